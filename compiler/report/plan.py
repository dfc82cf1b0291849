"""The plan picture of the report: the DOT of `dslc explain --format dot` that `dslc run` kept in
the metrics file, each operator's box given its figures and coloured by its diagnosis, drawn as
SVG by Graphviz's `dot`."""
from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

CAUSE_COLOURS = {"capacity": "#fde2b0", "service": "#f8c6c6", "rate": "#d9d2f5", "cpu": "#cfe3f7", "input": "#d5f0d5"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _unquote(text: str) -> str:
    """The text of a DOT string as written between its quotes (`a\\"b` is `a"b`)."""
    return re.sub(r"\\(.)", lambda m: m.group(1), text)


def figures_label(name: str, kind: str, m: dict[str, Any], cause: str | None) -> str:
    """The text of an operator's box: its name and kind, then its figures."""
    lines = [name, kind, f"in {m.get('elements_in', 0)}  out {m.get('elements_out', 0)}"]
    if m.get("capacity"):     # an ENRICH; a PROCESS makes no calls (its merged figures hold zeros)
        lines.append(f"calls {m.get('calls', 0)}  retries {m.get('retries', 0)}  cache hits {m.get('cache_hits', 0)}")
        lines.append(f"p50 {m.get('p50_ms')} ms  p99 {m.get('p99_ms')} ms")
        lines.append(f"errors {m.get('errors', 0)}  dead letters {m.get('dead_letters', 0)}")
    elif m.get("errors"):
        lines.append(f"errors {m.get('errors')}")
    if cause:
        lines.append(f"limited by: {cause}")
    return "\n".join(lines)


def with_figures(dot: str, operators: dict[str, dict[str, Any]], causes: dict[str, str]) -> str:
    """`dot` with each operator's node label replaced by its figures (and filled by its cause)."""
    def replace(match: re.Match[str]) -> str:
        node, name, kind = match.group(1), _unquote(match.group(2)), match.group(3)
        m = operators.get(name)
        if m is None:
            return match.group(0)
        cause = causes.get(name)
        fill = f', style=filled, fillcolor="{CAUSE_COLOURS[cause]}"' if cause in CAUSE_COLOURS else ""
        return f'{node} [label={_quote(figures_label(name, kind, m, cause))}{fill}]'

    return re.sub(r'^(\s*"((?:[^"\\]|\\.)*)") \[label="(?:[^"\\]|\\.)*\\n(Enrich|Process)"\]', replace, dot, flags=re.M)


def plan_svg(dot: str, operators: dict[str, dict[str, Any]], causes: dict[str, str]) -> str | None:
    """The SVG (without its XML prologue, to sit inline in HTML), or None without Graphviz."""
    program = shutil.which("dot")
    if program is None or not dot:
        return None
    done = subprocess.run([program, "-Tsvg"], input=with_figures(dot, operators, causes), capture_output=True, text=True)
    if done.returncode != 0:
        return None
    svg = done.stdout
    return svg[svg.index("<svg"):] if "<svg" in svg else None
