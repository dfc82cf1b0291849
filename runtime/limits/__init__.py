"""What bounds the calls of an operator: CACHE, RATE, ADAPTIVE concurrency."""
