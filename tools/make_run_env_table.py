"""Write the table of `dslc run`'s contract with the job (docs/operations.md, between the two
markers) from the registry `dslc.runtime.run_env`: `.venv/bin/python tools/make_run_env_table.py`.
tests/tooling/test_run_env.py fails while the page and the registry differ."""
from __future__ import annotations

import sys
from pathlib import Path

from dslc.runtime import run_env

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
BEGIN = "<!-- generated from runtime/run_env.py by tools/make_run_env_table.py: edit the registry, not the table -->"
END = "<!-- end of the generated table -->"


def with_table(text: str) -> str:
    """`text` with the lines between BEGIN and END replaced by the registry's table."""
    head, begin, rest = text.partition(BEGIN + "\n")
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    return head + begin + "\n" + run_env.markdown_table() + "\n" + end + tail


def main() -> int:
    text = DOC.read_text()
    new = with_table(text)
    if new != text:
        DOC.write_text(new)
        print(f"{DOC}: table rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
