"""bench/latency.png: the distribution of turn overhead, ours against core, per variant.

Drawn with Pillow (Home Assistant already depends on it): one panel per kind of turn, each
with both agents' empirical cumulative distributions and their medians.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from .report import percentile

WIDTH = 1100
PANEL_HEIGHT = 230
TOP = 70
LEFT, RIGHT = 90, 40
COLORS = {"ours": (31, 119, 180), "core": (255, 127, 14)}
GRID = (225, 225, 225)
INK = (40, 40, 40)


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType sizes
        return ImageFont.load_default()


def _nice_step(span: float) -> float:
    raw = span / 6
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def draw(path: Path, panels: Sequence[tuple[str, dict[str, list[float]]]], title: str) -> None:
    """One panel per (label, {"ours": [ms...], "core": [ms...]})."""
    panels = [(label, data) for label, data in panels if any(data.values())]
    if not panels:
        return
    height = TOP + PANEL_HEIGHT * len(panels) + 20
    image = Image.new("RGB", (WIDTH, height), "white")
    pen = ImageDraw.Draw(image)
    title_font, font, small = _font(20), _font(14), _font(12)
    pen.text((LEFT, 14), title, fill=INK, font=title_font)
    pen.text((LEFT, 42), "cumulative fraction of turns; dashed: median", fill=INK, font=small)
    legend_x = WIDTH - RIGHT - 360
    for index, (agent, color) in enumerate(COLORS.items()):
        x = legend_x + index * 190
        pen.line([(x, 26), (x + 30, 26)], fill=color, width=3)
        name = "ours (LangGraph)" if agent == "ours" else "core (Ollama)"
        pen.text((x + 36, 18), name, fill=INK, font=font)

    for panel_index, (label, data) in enumerate(panels):
        top = TOP + panel_index * PANEL_HEIGHT
        plot_top, plot_bottom = top + 24, top + PANEL_HEIGHT - 40
        plot_left, plot_right = LEFT, WIDTH - RIGHT
        values = [v for series in data.values() for v in series]
        high = percentile(sorted(values), 99) * 1.1 if len(values) > 1 else max(values) * 1.1
        high = max(high, 1e-3)
        step = _nice_step(high)
        high = math.ceil(high / step) * step

        def x_of(
            ms: float, left: float = plot_left, right: float = plot_right, span: float = high
        ) -> float:
            return left + (right - left) * min(ms, span) / span

        def y_of(fraction: float, bottom: float = plot_bottom, top_: float = plot_top) -> float:
            return bottom - (bottom - top_) * fraction

        pen.text((plot_left, top + 2), label, fill=INK, font=font)
        tick = 0.0
        while tick <= high + 1e-9:
            x = x_of(tick)
            pen.line([(x, plot_top), (x, plot_bottom)], fill=GRID)
            pen.text((x - 12, plot_bottom + 6), f"{tick:g}", fill=INK, font=small)
            tick += step
        for fraction in (0.0, 0.5, 1.0):
            y = y_of(fraction)
            pen.line([(plot_left, y), (plot_right, y)], fill=GRID)
            pen.text((plot_left - 40, y - 7), f"{fraction:.1f}", fill=INK, font=small)
        pen.text((plot_right - 140, plot_bottom + 20), "turn overhead (ms)", fill=INK, font=small)
        pen.rectangle([plot_left, plot_top, plot_right, plot_bottom], outline=INK)

        for agent, color in COLORS.items():
            series = sorted(data.get(agent, []))
            if not series:
                continue
            points = [(x_of(series[0]), y_of(0.0))]
            for index, value in enumerate(series):
                x = x_of(value)
                points.append((x, y_of(index / len(series))))
                points.append((x, y_of((index + 1) / len(series))))
            pen.line(points, fill=color, width=2)
            median = percentile(series, 50)
            x = x_of(median)
            for y in range(int(plot_top), int(plot_bottom), 8):
                pen.line([(x, y), (x, y + 4)], fill=color, width=1)
            pen.text(
                (min(x + 4, plot_right - 110), plot_top + (4 if agent == "ours" else 20)),
                f"p50 {median:.1f} ms (n={len(series)})",
                fill=color,
                font=small,
            )
    image.save(path)
