"""The benchmark suite of dslc: `python -m bench` from the repository root (see README.md).

A folder of the repository, not part of the installed `dslc` package.
"""
