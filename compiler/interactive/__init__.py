"""What the REPL and the language server share: completion of .flow text, and one quiet Spark session for Spark's analyzer."""
