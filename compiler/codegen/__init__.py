"""Code generation: physical plan → one readable, deterministic PySpark job."""
