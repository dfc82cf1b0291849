"""`python -m dslc.compiler.cli ...` runs the `dslc` command."""
import sys

from dslc.compiler.cli.main import main

sys.exit(main())
