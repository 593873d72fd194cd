"""Charts as inline SVG: the report opens anywhere, offline, with nothing to load.

Every drawn datum is an element of class `mark` (a bar, a line, a point), so a browser test can
count what rendered; an empty chart says so in words instead. Every chart is a figure with a
caption. Text from the data (a producer, a folder) is written with its control and bidi
characters escaped (`escaped`).
"""
from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 40
PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e")
# Characters that move or hide other text without showing themselves: controls (Cc), formats (Cf:
# the bidi overrides, embeddings, isolates and marks, zero-width characters), line and paragraph
# separators, lone surrogates. A name holding a right-to-left override could show another name.
_UNSEEN = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))


def visible(text: str) -> str:
    """`text` with every control, format (bidi), line and paragraph separator character written as
    its escape (U+202E as `\\u202e`), so what the page shows is what the name holds, in its order."""
    return "".join((f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
                   if unicodedata.category(c) in _UNSEEN else c for c in text)


def escaped(text: str) -> str:
    """`text` for HTML or SVG: `visible`, then HTML-escaped."""
    return escape(visible(text))


def _frame(body: str, name: str, caption: str, height: int = HEIGHT, legend: Sequence[str] = ()) -> str:
    keys = "".join(f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{escaped(s)}</span>'
                   for i, s in enumerate(legend))
    return (f'<figure><svg class="chart" data-chart="{escaped(name)}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img" aria-label="{escaped(caption)}" xmlns="http://www.w3.org/2000/svg">{body}'
            "</svg>" + (f'<div class="legend">{keys}</div>' if legend else "")
            + f"<figcaption>{escaped(caption)}</figcaption></figure>")


def _empty(name: str, caption: str, text: str) -> str:
    return _frame(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="empty">{escaped(text)}</text>',
                  name, caption)


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** (len(str(int(value))) - 1)
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * magnitude:
            return step * magnitude
    return 10.0 * magnitude


def _scale(value: float, whole: bool) -> tuple[float, float]:
    """The axis's top and its tick step. A count's axis (`whole`) ticks at whole numbers only: the
    first step of 1, 2, 2.5 (from 25 on), 5 times a power of ten that reaches `value` in at most
    four steps, up to the first multiple of it at or above `value`. Any other axis: four quarters
    of a round top."""
    if not whole:
        top = _nice_max(value)
        return top, top / 4
    if value <= 0:
        return 1.0, 1.0
    magnitude = 1
    while True:
        for mantissa in (1.0, 2.0, 2.5, 5.0):
            step = mantissa * magnitude
            if step == int(step) and 4 * step >= value:
                return step * math.ceil(value / step), step
        magnitude *= 10


def _number(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _y_axis(top: float, step: float, height: int) -> str:
    plot = height - TOP - BOTTOM
    parts = []
    for i in range(round(top / step) + 1):
        value = step * i
        y = TOP + plot - plot * value / top
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(value)}</text>')
    return "".join(parts)


def _x_labels(labels: Sequence[str], height: int, slot: float) -> str:
    if not labels:
        return ""
    every = max(1, len(labels) // 6)
    return "".join(f'<text x="{LEFT + slot * (i + 0.5):.1f}" y="{height - BOTTOM + 16}" text-anchor="middle">'
                   f"{escaped(label)}</text>" for i, label in enumerate(labels) if i % every == 0)


def stacked_bars(name: str, labels: Sequence[str], series: Mapping[str, Sequence[float]], empty: str, *,
                 caption: str) -> str:
    """One column per label, its series (counts) stacked in order."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    if not labels or not any(totals):
        return _empty(name, caption, empty)
    top, step = _scale(max(totals), whole=True)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(labels)
    bars = []
    for i in range(len(labels)):
        base = 0.0
        for s, (series_name, values) in enumerate(series.items()):
            value = values[i]
            if value <= 0:
                continue
            h = plot_h * value / top
            y = TOP + plot_h - plot_h * (base + value) / top
            bars.append(f'<rect class="mark" x="{LEFT + slot * i + slot * 0.1:.2f}" y="{y:.2f}" '
                        f'width="{max(slot * 0.8, 0.5):.2f}" height="{max(h, 0.5):.2f}" '
                        f'fill="{PALETTE[s % len(PALETTE)]}"><title>{escaped(labels[i])}: {escaped(series_name)} '
                        f'{value:g}</title></rect>')
            base += value
    return _frame(_y_axis(top, step, HEIGHT) + "".join(bars) + _x_labels(labels, HEIGHT, slot), name, caption,
                  legend=list(series))


def lines(name: str, labels: Sequence[str], series: Mapping[str, Sequence[float | None]], empty: str, *,
          caption: str, whole: bool = True) -> str:
    """One polyline per series over the labels (None: a gap); `whole`: the values are counts."""
    values = [v for vs in series.values() for v in vs if v is not None]
    if not labels or not values:
        return _empty(name, caption, empty)
    top, step = _scale(max(max(values), 0), whole)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(labels)
    drawn = []
    for s, vs in enumerate(series.values()):
        points = [(LEFT + slot * (i + 0.5), TOP + plot_h - plot_h * max(v, 0) / top) for i, v in enumerate(vs)
                  if v is not None]
        color = PALETTE[s % len(PALETTE)]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            drawn.append(f'<polyline class="mark" points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        elif points:
            x, y = points[0]
            drawn.append(f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
    return _frame(_y_axis(top, step, HEIGHT) + "".join(drawn) + _x_labels(labels, HEIGHT, slot), name, caption,
                  legend=list(series))


def horizontal_bars(name: str, items: Sequence[tuple[str, float]], empty: str, unit: str = "", *,
                    caption: str) -> str:
    """One bar per item, largest first as given, its value written beside it."""
    if not items or not any(v for _, v in items):
        return _empty(name, caption, empty)
    row, label_w = 22, 260
    height = TOP + row * len(items) + 8
    top = max(v for _, v in items)
    plot_w = WIDTH - label_w - 90
    parts = []
    for i, (label, value) in enumerate(items):
        y = TOP + row * i
        shown = visible(label)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        parts.append(f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{escape(shown)}</text>'
                     f'<rect class="mark" x="{label_w}" y="{y + 3}" width="{max(plot_w * value / top, 1):.1f}" '
                     f'height="{row - 6}" fill="{PALETTE[0]}"><title>{escaped(label)}: {value:g}{unit}</title></rect>'
                     f'<text x="{label_w + plot_w * value / top + 6:.1f}" y="{y + 15}">{_number(value)}{unit}</text>')
    return _frame("".join(parts), name, caption, height=height)


def histogram(name: str, bins: Sequence[tuple[str, float]], empty: str, *, caption: str) -> str:
    """Vertical bars, one per bin (counts), labelled below."""
    if not bins or not any(v for _, v in bins):
        return _empty(name, caption, empty)
    top, step = _scale(max(v for _, v in bins), whole=True)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(bins)
    parts = [_y_axis(top, step, HEIGHT)]
    for i, (label, value) in enumerate(bins):
        h = plot_h * value / top
        x = LEFT + slot * i
        if value:
            parts.append(f'<rect class="mark" x="{x + slot * 0.12:.1f}" y="{TOP + plot_h - h:.1f}" '
                         f'width="{slot * 0.76:.1f}" height="{max(h, 0.5):.1f}" fill="{PALETTE[0]}">'
                         f"<title>{escaped(label)}: {value:g}</title></rect>")
        parts.append(f'<text x="{x + slot / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                     f"{escaped(label)}</text>")
    return _frame("".join(parts), name, caption)
