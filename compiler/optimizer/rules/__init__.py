"""One optimiser rule per module."""
