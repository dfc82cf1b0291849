"""Column types at run time: the RETURNS check of an answer and the Arrow schema of a chain's output."""
