"""The answer store: answers of ENRICH ... STORE kept for every task and run (base.py: the
interface; sqlite.py: the embedded default; redis.py: a Redis server for clusters)."""
