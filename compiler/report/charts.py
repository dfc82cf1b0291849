"""Small inline SVG charts for the report: no script, no network, drawn by any browser."""
from __future__ import annotations

from html import escape
from typing import Sequence

from dslc.runtime.metrics import bucket_upper_ms

WIDTH, HEIGHT, PAD = 520, 180, 36
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _axis(title: str, y_max: float, x_label: str) -> list[str]:
    return [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
            f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
            f'<text x="{PAD}" y="14" font-size="12" font-family="sans-serif">{escape(title)}</text>',
            f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 8}" y2="{HEIGHT - PAD}" stroke="#444"/>',
            f'<line x1="{PAD}" y1="22" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#444"/>',
            f'<text x="4" y="30" font-size="10" font-family="sans-serif">{number(y_max)}</text>',
            f'<text x="{WIDTH - 8}" y="{HEIGHT - 8}" font-size="10" font-family="sans-serif" '
            f'text-anchor="end">{escape(x_label)}</text>']


def number(value: float) -> str:
    """A figure short enough for an axis, never in exponent notation: 950, 0.25, 12.5k, 3.1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.4g}" if abs(value) >= 1 or value == 0 else f"{value:.2g}"


def duration_ms(ms: float) -> str:
    """A latency as a person reads it: 0.27 ms, 464 ms, 2.2 s, 95 s, 12 min."""
    if ms >= 600_000:
        return f"{ms / 60_000:.3g} min"
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    return f"{ms:.3g} ms"


def histogram(title: str, buckets: dict[str, int]) -> str:
    """Bars of a latency histogram (runtime/metrics.py buckets), labelled in ms, s or min."""
    items = sorted(((int(k), v) for k, v in buckets.items()), key=lambda kv: kv[0])
    if not items:
        return ""
    low, high = items[0][0], items[-1][0]
    span = list(range(low, high + 1))
    counts = dict(items)
    top = max(counts.values())
    out = _axis(title, top, "latency (bucket upper bound)")
    inner = WIDTH - PAD - 12
    bar = inner / len(span)
    for i, index in enumerate(span):
        count = counts.get(index, 0)
        h = (HEIGHT - PAD - 24) * count / top if top else 0
        x = PAD + 2 + i * bar
        out.append(f'<rect class="bar" x="{x:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{max(1.0, bar - 1):.1f}" '
                   f'height="{h:.1f}" fill="{COLOURS[0]}"><title>≤ {duration_ms(bucket_upper_ms(index))}: {count}</title></rect>')
    # the ticks sit under their bars' middles, the last one ending there so it is never cut off
    for i, anchor in sorted({0: "start", len(span) // 2: "middle", len(span) - 1: "end"}.items()):
        x = PAD + 2 + i * bar + (bar / 2 if anchor == "middle" else bar if anchor == "end" else 0)
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - PAD + 14}" font-size="10" font-family="sans-serif" '
                   f'text-anchor="{anchor}">{duration_ms(bucket_upper_ms(span[i]))}</text>')
    out.append("</svg>")
    return "".join(out)


def lines(title: str, xs: Sequence[float], series: dict[str, Sequence[float | None]], x_label: str = "seconds") -> str:
    """One or more lines over the run's time (e.g. in flight and its limit)."""
    if len(xs) < 2:
        return ""
    values = [v for ys in series.values() for v in ys if v is not None]
    top = max(values) if values else 0
    top = top or 1
    x0, x1 = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1
    out = _axis(title, top, x_label)
    inner_w, inner_h = WIDTH - PAD - 12, HEIGHT - PAD - 24
    for n, (name, ys) in enumerate(series.items()):
        points = [f"{PAD + inner_w * (x - x0) / (x1 - x0):.1f},{HEIGHT - PAD - inner_h * y / top:.1f}"
                  for x, y in zip(xs, ys) if y is not None]
        colour = COLOURS[n % len(COLOURS)]
        out.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(points)}">'
                   f'<title>{escape(name)}</title></polyline>')
        out.append(f'<text x="{WIDTH - 12}" y="{30 + 12 * n}" font-size="10" font-family="sans-serif" '
                   f'text-anchor="end" fill="{colour}">{escape(name)}</text>')
    out.append(f'<text x="{PAD}" y="{HEIGHT - PAD + 14}" font-size="10" font-family="sans-serif">{x0:g}</text>')
    out.append(f'<text x="{WIDTH - 12}" y="{HEIGHT - PAD + 14}" font-size="10" font-family="sans-serif" '
               f'text-anchor="end">{x1:g}</text>')
    out.append("</svg>")
    return "".join(out)
