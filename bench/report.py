"""Benchmark results as data, and the RESULTS.md they are written to."""
from __future__ import annotations

import datetime as dt
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Table:
    """A markdown table."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        """Append a row; cells are formatted with str()."""
        if len(cells) != len(self.headers):
            raise ValueError(f"row of {len(cells)} cells for {len(self.headers)} columns")
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        """The table as GitHub markdown."""
        lines = ["| " + " | ".join(self.headers) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Target:
    """A target of the issue, the figure measured for it, and whether it was met."""

    text: str
    measured: str
    met: bool


@dataclass
class Section:
    """The results of one benchmark."""

    title: str
    setup: str
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    load: float | None = None     # 1-minute load average when the section ended (set by __main__)

    def markdown(self) -> str:
        """The section, with its setup, tables, targets and notes."""
        parts = [f"## {self.title}", "", self.setup.strip(), ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        if self.targets:
            parts += ["| target | measured | met |", "|---|---|---|"]
            parts += [f"| {t.text} | {t.measured} | {'yes' if t.met else '**no**'} |" for t in self.targets]
            parts.append("")
        parts += [f"- {note}" for note in self.notes]
        if self.notes:
            parts.append("")
        load = "" if self.load is None else f"; load average (1 min) at its end: {self.load:.1f}"
        parts.append(f"_Section ran in {self.seconds:.0f} s{load}._")
        return "\n".join(parts)


def ratio(a: float, b: float, digits: int = 2) -> str:
    """a / b as '1.23x' ('n/a' when b is 0)."""
    return f"{a / b:.{digits}f}x" if b else "n/a"


def percent(a: float, b: float) -> str:
    """a / b as '85%' ('n/a' when b is 0)."""
    return f"{a / b:.0%}" if b else "n/a"


def render(sections: list[Section], *, mode: str, command: str, seconds: float,
           versions: dict[str, str] | None = None, today: dt.date | None = None) -> str:
    """The whole RESULTS.md."""
    today = today or dt.date.today()
    versions = versions or {}
    targets = [t for s in sections for t in s.targets]
    met = sum(t.met for t in targets)
    head = [
        "# Benchmark results",
        "",
        f"Written by `{command}` ({mode} run); do not edit by hand, run it again.",
        "Every figure is a ratio of two measurements taken in this one run on this one machine.",
        "",
        "| | |",
        "|---|---|",
        f"| date | {today.isoformat()} |",
        f"| cores | {os.cpu_count()} |",
        f"| load average (1 min) at the end | {os.getloadavg()[0]:.1f} (other work on the machine lowers absolute figures) |",
        f"| machine | {platform.machine()}, {platform.system()} {platform.release()} |",
        f"| python | {platform.python_version()} |",
        *[f"| {name} | {version} |" for name, version in versions.items()],
        f"| run time | {seconds:.0f} s |",
        f"| targets met | {met} of {len(targets)} |",
        "",
    ]
    return "\n".join(head + [s.markdown() + "\n" for s in sections]).rstrip() + "\n"


def write(path: Path, sections: list[Section], keep_others: bool = False, **kwargs: object) -> str:
    """Render and (re)write the results file; return its text. `keep_others`: sections of the
    file that this run did not produce stay as they were (a partial run with --only), and the
    header says which ones come from an earlier run."""
    text = render(sections, **kwargs)  # type: ignore[arg-type]
    if keep_others and path.exists():
        text = _merge(path.read_text(encoding="utf-8"), text)
    path.write_text(text, encoding="utf-8")
    return text


def _sections(text: str) -> tuple[str, dict[str, str]]:
    """The text before the first '## ' heading, and each section's text by its heading."""
    head, *parts = text.split("\n## ")
    return head, {part.split("\n", 1)[0]: "## " + part.rstrip() + "\n" for part in parts}


def _merge(old: str, new: str) -> str:
    head, fresh = _sections(new)
    _, previous = _sections(old)
    merged = {**previous, **fresh}
    order = sorted(merged, key=lambda title: (title.split(".")[0].isdigit() and int(title.split(".")[0])) or 99)
    kept = [t for t in order if t not in fresh]
    if kept:
        head = head.rstrip() + "\n| kept from an earlier run | " + "; ".join(kept) + " |\n"
        # the count covers every section in the file, not only those of this run
        verdicts = [line.rsplit("|", 2)[1].strip() for t in order for line in merged[t].splitlines()
                    if line.startswith("| ") and line.rstrip().endswith(("| yes |", "| **no** |"))]
        met = sum(v == "yes" for v in verdicts)
        head = re.sub(r"\| targets met \| \d+ of \d+ \|", f"| targets met (all sections) | {met} of {len(verdicts)} |", head)
    return head.rstrip() + "\n\n" + "\n".join(merged[t] for t in order).rstrip() + "\n"
