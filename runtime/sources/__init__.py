"""SOURCE FROM PYTHON: the user's split enumerator and reader, independent of Spark."""
