"""Build-time scripts: they start Spark to read its function registry and write the tables compiler/sparksql/ uses (not installed)."""
