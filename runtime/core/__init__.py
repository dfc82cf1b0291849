"""The operator core: the async I/O queue, the per-element resolution, the ENRICH and PROCESS
operators, and the chains that drive them over Arrow batches on the worker's event loop."""
