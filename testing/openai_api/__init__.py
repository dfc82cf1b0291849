"""The parts of the local OpenAI-compatible service (`dslc.testing.openai_service`): one module per
endpoint family (`chat`, `embeddings`) over shared ones (`errors`, `params`, `schemas`, `answers`,
`limits`). A new family (files, batches) is a module of its own whose `routes(service)` the
service adds to its application."""
