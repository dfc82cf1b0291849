"""NEAREST BY with an index: the right side's vectors indexed once per version, probed by the left
side's rows per partition. Engine-independent (NumPy, pyarrow, faiss); runtime/spark/nearest.py
is the Spark glue. A leaf of the runtime: it imports no other part of it."""
