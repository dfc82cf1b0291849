"""Front end: .flow text → syntax tree with a span on every node (Lark, one statement at a time)."""
