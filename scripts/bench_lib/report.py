"""Statistics, table rows, the Markdown table and results.json."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
import json
import math
from pathlib import Path
import statistics
from typing import Any, Literal

type Outcome = Literal["pass", "fail", "info", "n/a", "error"]


@dataclass(frozen=True, slots=True)
class Stat:
    """p50/p95 of a sample (or one value, then both are that value)."""

    p50: float
    p95: float
    n: int
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        """The statistics of `values`, or None for an empty sample."""
        if not values:
            return None
        ordered = sorted(values)
        return cls(
            p50=statistics.median(ordered),
            p95=percentile(ordered, 95),
            n=len(ordered),
            max=ordered[-1],
        )

    @classmethod
    def single(cls, value: float) -> Stat:
        """One measured value."""
        return cls(p50=value, p95=value, n=1, max=value)

    def scaled(self, factor: float) -> Stat:
        """The same statistics in another unit."""
        return Stat(self.p50 * factor, self.p95 * factor, self.n, self.max * factor)


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Linear-interpolation percentile of sorted values (numpy's default method)."""
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * pct / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(slots=True)
class Row:
    """One line of the table."""

    figure: int
    name: str
    unit: str
    ours: Stat | None
    core: Stat | None
    target: str
    outcome: Outcome
    ratio: float | None = None
    detail: str = ""  # what decided the outcome, e.g. "Δp50 +3.1 ms"
    single: bool = False  # one value per agent: no p95 column
    notes: list[str] = field(default_factory=list)


def ratio_of(ours: Stat | None, core: Stat | None) -> float | None:
    """ours p50 / core p50 when both exist and core is not zero."""
    if ours is None or core is None or core.p50 == 0:
        return None
    return ours.p50 / core.p50


def judged(ok: bool | None) -> Outcome:
    """pass/fail, or n/a when nothing could be judged."""
    if ok is None:
        return "n/a"
    return "pass" if ok else "fail"


def _number(value: float, unit: str) -> str:
    if unit in ("tokens", "count", "requests"):
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    if unit == "bytes":
        return human_bytes(value)
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def human_bytes(value: float) -> str:
    """1234567 -> "1.18 MiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _cells(stat: Stat | None, unit: str, single: bool) -> tuple[str, str]:
    if stat is None:
        return "-", "-"
    suffix = "" if unit in ("bytes", "count") else f" {unit}"
    if single:
        return _number(stat.p50, unit) + suffix, "-"
    return _number(stat.p50, unit) + suffix, _number(stat.p95, unit) + suffix


def markdown_table(rows: Sequence[Row]) -> str:
    """The one table: figure, ours p50/p95, core p50/p95, ratio, target, pass/fail."""
    lines = [
        "| figure | ours p50 | ours p95 | core p50 | core p95 | ratio | target | pass/fail |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        ours50, ours95 = _cells(row.ours, row.unit, row.single)
        core50, core95 = _cells(row.core, row.unit, row.single)
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        outcome = row.outcome.upper() if row.outcome in ("pass", "fail") else row.outcome
        if row.detail:
            outcome = f"{outcome} ({row.detail})"
        name = f"{row.figure}. {row.name}"
        lines.append(
            f"| {name} | {ours50} | {ours95} | {core50} | {core95} | {ratio} "
            f"| {row.target} | {outcome} |"
        )
    return "\n".join(lines)


def notes_block(rows: Sequence[Row]) -> str:
    """Footnotes collected from the rows (what was scaled down, what is missing)."""
    seen: list[str] = []
    for row in rows:
        for note in row.notes:
            if note not in seen:
                seen.append(note)
    return "\n".join(f"- {note}" for note in seen)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def write_results(
    path: Path,
    meta: dict[str, Any],
    rows: Sequence[Row],
    raw: dict[str, Any],
    default: Callable[[Any], Any] = str,
) -> None:
    """bench/results.json: settings, the table rows, and every raw sample."""
    document = {"meta": meta, "rows": [asdict(row) for row in rows], "raw": raw}
    path.write_text(json.dumps(_jsonable(document), indent=2, default=default) + "\n")
