"""Optimiser: logical plan → physical plan (filters pushed before external calls, columns pruned, chains)."""
