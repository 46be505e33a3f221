"""Draws the integration's brand images: icon and logo, light and dark, 1x and 2x.

The mark is a speech bubble holding a three-node graph (a conversation run by a graph);
the logo sets the mark beside the words LANGGRAPH / CONVERSATION in a monoline face
drawn here. Everything is geometry with signed distances, antialiased by the distance to
the edge, and written as PNG with the standard library only (zlib, struct), so the files
are the same bytes on every machine: tests/test_brand.py regenerates them and compares.

Sizes follow Home Assistant's brands rules: icon square, 256x256 (icon@2x 512x512); logo
with its shortest side 128 (logo@2x 256); transparent background, trimmed to the drawing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
import math
from pathlib import Path
import struct
import zlib

BRAND_DIR = (
    Path(__file__).resolve().parents[2] / "custom_components" / "langgraph_conversation" / "brand"
)

# Colours (RGB). The dark variants are for Home Assistant's dark theme: a lighter bubble
# and light words, which would vanish on white.
BUBBLE = {"light": (37, 99, 235), "dark": (96, 165, 250)}
GRAPH = {"light": (255, 255, 255), "dark": (11, 18, 32)}
WORDS = {"light": (31, 41, 55), "dark": (229, 231, 235)}

Point = tuple[float, float]
Distance = Callable[[float, float], float]


@dataclass(frozen=True)
class Shape:
    """A signed distance (negative inside) and the box outside which it is surely empty."""

    distance: Distance
    box: tuple[float, float, float, float]  # x0, y0, x1, y1


def capsule(a: Point, b: Point, width: float) -> Shape:
    """A straight stroke with round ends."""
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy or 1.0
    half = width / 2

    def distance(x: float, y: float) -> float:
        t = min(1.0, max(0.0, ((x - ax) * dx + (y - ay) * dy) / length2))
        return math.hypot(x - ax - t * dx, y - ay - t * dy) - half

    return Shape(
        distance, (min(ax, bx) - half, min(ay, by) - half, max(ax, bx) + half, max(ay, by) + half)
    )


def disc(centre: Point, radius: float) -> Shape:
    cx, cy = centre
    return Shape(
        lambda x, y: math.hypot(x - cx, y - cy) - radius,
        (cx - radius, cy - radius, cx + radius, cy + radius),
    )


def arc(centre: Point, radius: float, start: float, sweep: float, width: float) -> Shape:
    """A round-ended stroke along a circle, from `start` degrees over `sweep` degrees.

    Angles are on screen: 0 points right, 90 down (y grows downwards).
    """
    cx, cy = centre
    half = width / 2
    ends = [
        (cx + radius * math.cos(math.radians(a)), cy + radius * math.sin(math.radians(a)))
        for a in (start, start + sweep)
    ]

    def distance(x: float, y: float) -> float:
        angle = math.degrees(math.atan2(y - cy, x - cx))
        offset = (angle - start) % 360 if sweep > 0 else (start - angle) % 360
        if offset <= abs(sweep):
            return abs(math.hypot(x - cx, y - cy) - radius) - half
        return min(math.hypot(x - ex, y - ey) for ex, ey in ends) - half

    reach = radius + half
    return Shape(distance, (cx - reach, cy - reach, cx + reach, cy + reach))


def rounded_rect(x0: float, y0: float, x1: float, y1: float, radius: float) -> Shape:
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx, hy = (x1 - x0) / 2 - radius, (y1 - y0) / 2 - radius

    def distance(x: float, y: float) -> float:
        qx, qy = abs(x - cx) - hx, abs(y - cy) - hy
        outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
        return outside + min(max(qx, qy), 0.0) - radius

    return Shape(distance, (x0, y0, x1, y1))


def polygon(points: list[Point]) -> Shape:
    """A convex polygon, corners listed clockwise on screen."""
    edges = []
    for (ax, ay), (bx, by) in zip(points, points[1:] + points[:1], strict=True):
        length = math.hypot(bx - ax, by - ay)
        # Outward normal of a clockwise (on screen) edge.
        edges.append((ax, ay, (by - ay) / length, -(bx - ax) / length))

    def distance(x: float, y: float) -> float:
        return max((x - ax) * nx + (y - ay) * ny for ax, ay, nx, ny in edges)

    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return Shape(distance, (min(xs), min(ys), max(xs), max(ys)))


def scaled(shape: Shape, scale: float, dx: float = 0.0, dy: float = 0.0) -> Shape:
    """The shape drawn `scale` times larger and moved by (dx, dy) (in output pixels)."""
    x0, y0, x1, y1 = shape.box
    return Shape(
        lambda x, y: shape.distance((x - dx) / scale, (y - dy) / scale) * scale,
        (x0 * scale + dx, y0 * scale + dy, x1 * scale + dx, y1 * scale + dy),
    )


# -- the mark, on a 512 x 512 board ------------------------------------------------------

MARK = 512.0


def mark_bubble() -> list[Shape]:
    return [
        rounded_rect(0, 0, MARK, 440, 112),
        polygon([(92, 380), (236, 436), (52, MARK)]),
    ]


def mark_graph() -> list[Shape]:
    top_left, top_right, bottom = (150.0, 140.0), (362.0, 140.0), (256.0, 316.0)
    return [
        capsule(top_left, top_right, 28),
        capsule(top_left, bottom, 28),
        capsule(top_right, bottom, 28),
        disc(top_left, 46),
        disc(top_right, 46),
        disc(bottom, 46),
    ]


# -- the words, a monoline face on a cap height of 100 -------------------------------------

STROKE = 15.0


def _glyph(letter: str) -> tuple[float, list[Shape]]:
    """Advance width and strokes of one capital, its top-left corner at (0, 0)."""
    w = STROKE
    line = capsule
    glyphs: dict[str, tuple[float, list[Shape]]] = {
        "A": (
            66,
            [line((0, 100), (33, 0), w), line((33, 0), (66, 100), w), line((13, 64), (53, 64), w)],
        ),
        "C": (84, [arc((50, 50), 50, -40, -280, w)]),
        "E": (
            52,
            [
                line((0, 0), (0, 100), w),
                line((0, 0), (52, 0), w),
                line((0, 50), (44, 50), w),
                line((0, 100), (52, 100), w),
            ],
        ),
        "G": (
            92,
            [
                arc((50, 50), 50, -30, -300, w),
                line((56, 58), (96, 58), w),
                line((96, 58), (96, 78), w),
            ],
        ),
        "H": (
            62,
            [line((0, 0), (0, 100), w), line((62, 0), (62, 100), w), line((0, 50), (62, 50), w)],
        ),
        "I": (0, [line((0, 0), (0, 100), w)]),
        "L": (50, [line((0, 0), (0, 100), w), line((0, 100), (50, 100), w)]),
        "N": (
            62,
            [line((0, 100), (0, 0), w), line((0, 0), (62, 100), w), line((62, 100), (62, 0), w)],
        ),
        "O": (100, [arc((50, 50), 50, 0, 360, w)]),
        "P": (
            56,
            [
                line((0, 0), (0, 100), w),
                line((0, 0), (28, 0), w),
                line((0, 56), (28, 56), w),
                arc((28, 28), 28, -90, 180, w),
            ],
        ),
        "R": (
            58,
            [
                line((0, 0), (0, 100), w),
                line((0, 0), (28, 0), w),
                line((0, 56), (28, 56), w),
                arc((28, 28), 28, -90, 180, w),
                line((26, 56), (58, 100), w),
            ],
        ),
        "S": (56, [arc((28, 25), 25, -10, -260, w), arc((28, 75), 25, -90, 260, w)]),
        "T": (64, [line((0, 0), (64, 0), w), line((32, 0), (32, 100), w)]),
        "V": (66, [line((0, 0), (33, 100), w), line((33, 100), (66, 0), w)]),
    }
    return glyphs[letter]


def word(text: str, gap: float = 30.0) -> tuple[float, list[Shape]]:
    """Strokes of a word on a cap height of 100, and its width (outer stroke edges)."""
    shapes: list[Shape] = []
    x = STROKE / 2
    for letter in text:
        advance, strokes = _glyph(letter)
        shapes += [scaled(s, 1.0, x, STROKE / 2) for s in strokes]
        x += advance + gap
    return x - gap + STROKE / 2, shapes


# -- raster and PNG ------------------------------------------------------------------------


def coverage(width: int, height: int, shapes: Iterable[Shape]) -> list[float]:
    """How much of each pixel the union of the shapes covers (0..1), row by row."""
    cover = [0.0] * (width * height)
    for shape in shapes:
        x0, y0, x1, y1 = shape.box
        for py in range(max(0, int(y0) - 1), min(height, int(y1) + 2)):
            y = py + 0.5
            row = py * width
            for px in range(max(0, int(x0) - 1), min(width, int(x1) + 2)):
                # A distance of d pixels from the edge covers about 0.5 - d of the pixel.
                value = 0.5 - shape.distance(px + 0.5, y)
                if value > cover[row + px]:
                    cover[row + px] = 1.0 if value >= 1.0 else value
    return cover


def paint(width: int, height: int, layers: list[tuple[tuple[int, int, int], list[Shape]]]) -> bytes:
    """RGBA pixels: each layer (colour, shapes) laid over the ones before it."""
    red = [0.0] * (width * height)
    green = [0.0] * (width * height)
    blue = [0.0] * (width * height)
    alpha = [0.0] * (width * height)
    for (r, g, b), shapes in layers:
        for i, a in enumerate(coverage(width, height, shapes)):
            if a <= 0.0:
                continue
            keep = 1.0 - a
            red[i] = r * a + red[i] * keep
            green[i] = g * a + green[i] * keep
            blue[i] = b * a + blue[i] * keep
            alpha[i] = a + alpha[i] * keep
    out = bytearray(width * height * 4)
    for i, a in enumerate(alpha):
        level = round(a * 255)
        if level == 0:
            continue
        # Channels are premultiplied above; PNG wants them straight.
        out[4 * i : 4 * i + 4] = bytes(
            (round(red[i] / a), round(green[i] / a), round(blue[i] / a), level)
        )
    return bytes(out)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _filtered(row: bytes, previous: bytes) -> bytes:
    """The row under the PNG filter that leaves the smallest sum (the usual heuristic)."""
    bpp = 4
    candidates = []
    left = bytes(bpp) + row[:-bpp]
    upleft = bytes(bpp) + previous[:-bpp]
    candidates.append(bytes([0]) + row)
    candidates.append(bytes([1]) + bytes((x - a) & 255 for x, a in zip(row, left, strict=True)))
    candidates.append(bytes([2]) + bytes((x - b) & 255 for x, b in zip(row, previous, strict=True)))
    candidates.append(
        bytes([3])
        + bytes((x - (a + b) // 2) & 255 for x, a, b in zip(row, left, previous, strict=True))
    )
    candidates.append(
        bytes([4])
        + bytes(
            (x - _paeth(a, b, c)) & 255
            for x, a, b, c in zip(row, left, previous, upleft, strict=True)
        )
    )
    return min(candidates, key=lambda f: sum(v if v < 128 else 256 - v for v in f[1:]))


def png(width: int, height: int, rgba: bytes) -> bytes:
    """An 8-bit RGBA PNG, filtered per row and deflated at the highest level."""
    stride = width * 4
    previous = bytes(stride)
    raw = bytearray()
    for y in range(height):
        row = rgba[y * stride : (y + 1) * stride]
        raw += _filtered(row, previous)
        previous = row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + chunk(b"IEND", b"")
    )


# -- the images ----------------------------------------------------------------------------


def icon(size: int, theme: str) -> bytes:
    scale = size / MARK
    layers = [
        (BUBBLE[theme], [scaled(s, scale) for s in mark_bubble()]),
        (GRAPH[theme], [scaled(s, scale) for s in mark_graph()]),
    ]
    return png(size, size, paint(size, size, layers))


def logo(height: int, theme: str) -> bytes:
    """The mark at full height, then LANGGRAPH over CONVERSATION, trimmed to the drawing."""
    unit = height / 256  # the layout below is drawn on a height of 256
    mark = MARK * 256 / MARK
    left = mark + 44
    top_width, top = word("LANGGRAPH")
    bottom_width, bottom = word("CONVERSATION", gap=26)
    # The first line 110 high from y 20, the second 62 high ending at y 236.
    top_scale, bottom_scale = 110 / (100 + STROKE), 62 / (100 + STROKE)
    words = [scaled(s, top_scale * unit, left * unit, 20 * unit) for s in top]
    words += [scaled(s, bottom_scale * unit, left * unit, 174 * unit) for s in bottom]
    width = math.ceil((left + max(top_width * top_scale, bottom_width * bottom_scale)) * unit)
    mark_scale = 256 / MARK * unit
    layers = [
        (BUBBLE[theme], [scaled(s, mark_scale) for s in mark_bubble()]),
        (GRAPH[theme], [scaled(s, mark_scale) for s in mark_graph()]),
        (WORDS[theme], words),
    ]
    return png(width, height, paint(width, height, layers))


def images() -> dict[str, bytes]:
    """File name -> PNG bytes, every image Home Assistant looks for."""
    made: dict[str, bytes] = {}
    for theme, prefix in (("light", ""), ("dark", "dark_")):
        made[f"{prefix}icon.png"] = icon(256, theme)
        made[f"{prefix}icon@2x.png"] = icon(512, theme)
        made[f"{prefix}logo.png"] = logo(128, theme)
        made[f"{prefix}logo@2x.png"] = logo(256, theme)
    return made
