"""PostgreSQL on the job's driver: URLs made JDBC's, the connection check before Spark starts, the
tables a SINK creates and the transactions that commit a micro-batch exactly once. A leaf of the
runtime: it imports nothing of core/, calls/, wrappers/ or spark/ (tests/tooling/test_runtime_layout.py)."""
