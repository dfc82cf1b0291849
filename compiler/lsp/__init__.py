"""`dslc lsp`: the Language Server Protocol server that serves dslc's checks to editors."""
