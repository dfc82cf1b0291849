"""The samples of README.md and docs/*.md are what the commands print: each marked block is
produced by running its commands, so a sample cannot drift from the code.

A marker is an HTML comment on the line before a fenced block (invisible on a rendered page):

- `<!-- output -->`: the block shows commands and what they print. A line `$ COMMAND` runs
  COMMAND; the lines after it, up to the next `$ ` line, are its output (stdout and stderr). A
  line `...` stands for any number of lines (the sample shows part of the output).
  `<!-- output: vary NAME, NAME -->` names table columns or `NAME=value` fields whose values
  differ from run to run (in flight, calls per second).
- `<!-- file: PATH -->`: the block is saved as PATH (in the session's current folder) before the
  commands after it run.
- `<!-- run -->`: a ```bash block the reader pastes; it runs as it is.
- `<!-- illustration: WHY -->`: not run (a frame of a live display); WHY says why.

A fenced block without a language tag must carry one of them (tests/docs/test_doc_blocks.py), so
a new sample of output is either run or knowingly an illustration.

Each document runs top to bottom in one bash session in a sandbox of its own: a temporary
folder holding a copy of `examples/` and a link to the repository's `.venv`, where the session
starts with `.venv/bin` on PATH, as after the README's set-up line. The local services' ports
in the samples (PORTS) are replaced by free ones, in the copied examples, in the files and in the
commands, and back in what the commands print.

Comparison ignores what differs between two runs of the same thing: the sandbox's folder, clock
times and durations (`00:00:12`, `5.5s`, `40ms`), decimals (latencies), timestamps in file names,
the widths of table columns, and the values the marker names.

`.venv/bin/python tests/docs/sample_outputs.py README.md docs/operations.md` runs the samples of
those documents and writes what the commands printed into them (each part between `...` lines is
replaced by the lines of the output it matches once numbers are ignored); review the diff.
"""
from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: the local services' ports the samples show: the examples' (examples/run.py) and the README's
#: first pipeline's
PORTS = (8765, 8766)
COMMAND_TIMEOUT = 900

_MARKER = re.compile(r"^<!-- (output|file|run|illustration)(?::\s*(.*?))?\s*-->\s*$")
_FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")


@dataclass
class Block:
    """A marked fenced block: its marker, its argument, and where its body lies (0-based lines)."""

    kind: str
    arg: str
    lang: str
    start: int          # the opening fence
    end: int            # the closing fence
    body: list[str] = field(default_factory=list)


def fences(lines: list[str]) -> list[tuple[int, int, str]]:
    """(opening line, closing line, language) of every fenced block."""
    found, at = [], 0
    while at < len(lines):
        opening = _FENCE.match(lines[at])
        if opening:
            close = next(i for i in range(at + 1, len(lines)) if lines[i].startswith(opening[1])
                         and not lines[i].strip("`").strip())
            found.append((at, close, opening[2]))
            at = close
        at += 1
    return found


def blocks(text: str) -> list[Block]:
    """The marked blocks of a document, in order."""
    lines = text.split("\n")
    found = []
    for start, end, lang in fences(lines):
        marker = _MARKER.match(lines[start - 1]) if start else None
        if marker:
            found.append(Block(marker[1], marker[2] or "", lang, start, end, lines[start + 1:end]))
    return found


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """The (command, expected output lines) of an output block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.body:
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"an output block starts with '$ COMMAND', not {line!r}")
    return steps


def varying(block: Block) -> tuple[str, ...]:
    """The names a marker says vary: `vary a, b`."""
    words = block.arg.split(None, 1)
    if not words or words[0] != "vary":
        return ()
    return tuple(n.strip() for n in words[1].split(",")) if len(words) > 1 else ()


# ---------------------------------------------------------------- running

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Sandbox:
    """A copy of the examples and one bash session, as a reader's checkout and terminal."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dslc-docs-")).resolve()
        self.ports = {doc: _free_port() for doc in PORTS}
        shutil.copytree(REPO / "examples", self.root / "examples",
                        ignore=shutil.ignore_patterns("target", "__pycache__", "rec"))
        for path in (self.root / "examples").rglob("*"):
            if path.is_file() and path.suffix in (".py", ".flow", ".yaml", ".env"):
                path.write_text(self.to_sandbox(path.read_text()))
        (self.root / ".venv").symlink_to(REPO / ".venv")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSLC_")}
        env.update(PATH=f"{self.root / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONUNBUFFERED="1", TERM="dumb", VIRTUAL_ENV=str(REPO / ".venv"))
        self.shell = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=self.root, env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.shell.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def to_sandbox(self, text: str) -> str:
        for doc, port in self.ports.items():
            text = re.sub(rf"\b{doc}\b", str(port), text)
        return text

    def from_sandbox(self, text: str) -> str:
        text = text.replace(f"{self.root}/", "").replace(str(self.root), ".")
        for doc, port in self.ports.items():
            text = re.sub(rf"\b{port}\b", str(doc), text)
        return text

    def write(self, path: str, text: str) -> None:
        """Save a file at `path` in the session's current folder, as a reader's editor would."""
        end = f"__dslc_docs_{uuid.uuid4().hex}__"
        folder = os.path.dirname(path)
        out, status = self.run((f"mkdir -p '{folder}' && " if folder else "")
                               + f"cat > '{path}' <<'{end}'\n{text}\n{end}")
        if status != 0:
            raise RuntimeError(f"cannot write {path}: " + "\n".join(out))

    def run(self, script: str) -> tuple[list[str], int]:
        """Run `script` in the session (its cd and variables stay); its output lines and status."""
        done = f"__dslc_docs_{uuid.uuid4().hex}__"
        self.shell.stdin.write(f"{{\n{self.to_sandbox(script)}\n}} < /dev/null 2>&1\necho \"{done} $?\"\n")
        self.shell.stdin.flush()
        out: list[str] = []
        while True:
            line = self.lines.get(timeout=COMMAND_TIMEOUT)
            if line is None:
                raise RuntimeError(f"the shell ended while running {script!r}:\n" + "\n".join(out))
            if line.startswith(done):
                return [self.from_sandbox(x) for x in out], int(line.split()[-1])
            out.append(line)

    def close(self) -> None:
        """Stop the session and everything it started (its process group), remove the folder."""
        try:
            os.killpg(self.shell.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.shell.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait()
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------- comparing

_NORMAL = [
    (re.compile(r"\b\d{8}(?:T\d{6}Z|-\d{6})\b"), "<stamp>"),                        # file names' times
    (re.compile(r"(?<!\d{4}-\d\d-\d\d[ T])\b\d\d:\d\d:\d\d\b"), "<clock>"),          # a clock, not a data value
    (re.compile(r"\b\d+(?:\.\d+)?(?:ms|s|m|h)\b"), "<duration>"),
    (re.compile(r"\b\d+\.\d+\b"), "<decimal>"),
    (re.compile(r"dslc-(run|estimate|test)-\w+"), r"dslc-\1-<tmp>"),
]


def normal(lines: list[str], vary: tuple[str, ...] = ()) -> list[str]:
    """Lines as compared: what differs between two runs of the same thing made equal."""
    lines = _vary_columns(list(lines), vary)
    out = []
    for line in lines:
        for name in vary:
            line = re.sub(rf"\b{re.escape(name)}=\S+", f"{name}=<v>", line)
        for pattern, replacement in _NORMAL:
            line = pattern.sub(replacement, line)
        out.append(" ".join(line.split()))
    return out


def _vary_columns(lines: list[str], vary: tuple[str, ...]) -> list[str]:
    """In a table whose header names a varying column, that column's cells become `<v>`."""
    if not vary:
        return lines
    header, columns = None, []
    for i, line in enumerate(lines):
        cells = line.split()
        if any(name in cells for name in vary):
            header, columns = len(cells), [cells.index(name) for name in vary if name in cells]
            continue
        if header is not None and len(cells) == header:
            for c in columns:
                cells[c] = "<v>"
            lines[i] = "  ".join(cells)
        else:
            header = None
    return lines


def segments(expected: list[str]) -> tuple[list[list[str]], bool, bool]:
    """The parts of an expected output between `...` lines; whether it starts / ends open."""
    parts: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    open_start = bool(expected) and expected[0].strip() == "..."
    open_end = bool(expected) and expected[-1].strip() == "..."
    return [p for p in parts if p], open_start, open_end


def matches(expected: list[str], actual: list[str], vary: tuple[str, ...] = ()) -> bool:
    """True when the actual lines show the expected ones (`...` for any lines)."""
    parts, open_start, open_end = segments(expected)
    want = [normal(p, vary) for p in parts]
    got = normal(actual, vary)
    at = 0
    for n, part in enumerate(want):
        found = _find(part, got, at, anchored=(n == 0 and not open_start))
        if found is None:
            return False
        at = found + len(part)
    return open_end or at == len(got)


def _find(part: list[str], lines: list[str], start: int, anchored: bool) -> int | None:
    last = start if anchored else len(lines) - len(part)
    for at in range(start, last + 1):
        if lines[at:at + len(part)] == part:
            return at
    return None


def rewritten(expected: list[str], actual: list[str]) -> list[str]:
    """The expected lines with each part replaced by the actual lines it stands for (numbers
    ignored to find them); a part not found is kept."""
    if not any(line.strip() == "..." for line in expected):
        return actual
    shape = [re.sub(r"\d+", "0", line) for line in normal(actual)]
    out, at, part = [], 0, []
    for line in expected + ["..."]:
        if line.strip() != "...":
            part.append(line)
            continue
        if part:
            want = [re.sub(r"\d+", "0", x) for x in normal(part)]
            found = _find(want, shape, at, anchored=False)
            if found is None:
                out += part
            else:
                out += actual[found:found + len(part)]
                at = found + len(part)
        out.append(line)
        part = []
    return out[:-1]


# ---------------------------------------------------------------- a document

@dataclass
class Mismatch:
    """A command whose output is not what the document shows."""

    line: int
    command: str
    expected: list[str]
    actual: list[str]
    status: int

    def __str__(self) -> str:
        return (f"line {self.line + 1}: $ {self.command} (exit {self.status})\n--- the document shows\n"
                + "\n".join(self.expected) + "\n--- the command printed\n" + "\n".join(self.actual))


def run_document(path: Path, write: bool = False) -> list[Mismatch]:
    """Run the marked blocks of a document in a fresh sandbox; the mismatches (with `write`,
    the document is rewritten with what the commands printed)."""
    text = path.read_text()
    lines = text.split("\n")
    sandbox = Sandbox()
    mismatches: list[Mismatch] = []
    shift = 0           # lines added to the document above the block (when it is rewritten)
    try:
        for block in blocks(text):
            if block.kind == "file":
                sandbox.write(block.arg, "\n".join(block.body))
            elif block.kind == "run":
                out, status = sandbox.run("\n".join(block.body))
                if status != 0:
                    mismatches.append(Mismatch(block.start, "\n".join(block.body), [], out, status))
            elif block.kind == "output":
                shift = _compare(block, sandbox, lines, mismatches, shift)
    finally:
        sandbox.close()
    if write:
        path.write_text("\n".join(lines))
    return mismatches


def _compare(block: Block, sandbox: Sandbox, lines: list[str], mismatches: list[Mismatch], shift: int) -> int:
    """Run an output block's commands and compare; the document's lines rewritten in place
    (`shift`: lines added above the block so far, returned with this block's)."""
    at = block.start + 1 + shift
    for command, expected in commands(block):
        out, status = sandbox.run(command)
        if not matches(expected, out, varying(block)):
            mismatches.append(Mismatch(at - shift, command, expected, out, status))
            new = rewritten(expected, out)
            lines[at + 1:at + 1 + len(expected)] = new
            at += len(new) - len(expected)
            shift += len(new) - len(expected)
        at += 1 + len(expected)
    return shift


def main(argv: list[str]) -> int:
    """Rewrite the samples of the documents named with what their commands print now."""
    for name in argv:
        for mismatch in run_document(REPO / name, write=True):
            print(f"{name}: {mismatch}\n", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
