"""The `dslc` command line and the REPL: users' entry points, apart from the compiler's stages."""
