"""Semantic checks and the logical plan: names, schemas and types resolved (sqlglot), every problem reported."""
