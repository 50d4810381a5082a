"""The leaderboard of a study rendered for people and tools: a table that fits the terminal, CSV, JSON.

The rows (:mod:`autotune.views.leaderboard_rows`) come as the record model ranks them; nothing here decides what
is feasible, what ranks first or by which number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Literal

from autotune.errors import AutotuneError
from autotune.records import StudyInfo
from autotune.views.leaderboard_rows import LeaderboardRow, leaderboard, rows
from autotune.views.leaderboard_table import table

__all__ = ["FORMATS", "Format", "LeaderboardRow", "leaderboard", "render", "rows"]

Format = Literal["table", "json", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "csv")


def _record(row: LeaderboardRow) -> dict[str, Any]:
    return asdict(row)


def _csv(rows: Sequence[LeaderboardRow], info: StudyInfo) -> str:
    """One row per trial, one column per param and per metric: what a spreadsheet wants."""
    params = list(dict.fromkeys(k for r in rows for k in r.params))
    metrics = list(dict.fromkeys(k for r in rows for k in r.metrics))
    metric_names = {m: f"metric_{m}" if m in params else m for m in metrics}  # a clash keeps both
    head = ["rank", "trial", "outcome", "status", "reason", "default", "feasible", "pareto", "input_bound", "value"]
    head += ["value_is", "speedup"]
    head += ["remeasured_median", "remeasured_cv"]
    out = io.StringIO()
    writer = csv.DictWriter(out, [*head, *params, *metric_names.values()], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        remeasured = row.remeasured or {}
        record: dict[str, Any] = {
            "rank": row.rank, "trial": row.trial, "outcome": row.outcome, "status": row.status, "reason": row.reason,
            "default": row.default, "feasible": row.feasible, "pareto": row.pareto, "input_bound": row.input_bound,
            "value": row.value, "value_is": row.value_is, "speedup": row.speedup,
            "remeasured_median": remeasured.get("median"), "remeasured_cv": remeasured.get("cv"),
        }  # fmt: skip
        record |= {k: row.params.get(k) for k in params}
        record |= {metric_names[k]: row.metrics.get(k) for k in metrics}
        writer.writerow(record)
    return out.getvalue()


def render(
    rows: Sequence[LeaderboardRow],
    info: StudyInfo,
    fmt: Format = "table",
    top: int | None = None,
    width: int | None = None,
    wide: bool = False,
) -> str:
    """The rows as text: an aligned ``table`` within ``width`` columns (the terminal's by default; ``wide``: one
    line per trial, whatever its length), ``csv`` (a header row, one column per param and per metric) or ``json``
    (a list of objects with full params and metrics).

    ``top`` keeps the first N rows (ranked rows come first).
    """
    if fmt not in FORMATS:
        raise AutotuneError(f"format {fmt!r} is not valid: expected one of {', '.join(FORMATS)}")
    if top is not None and top < 1:
        raise AutotuneError(f"top={top} is not valid: expected a whole number >= 1")
    shown = list(rows[:top] if top is not None else rows)
    if fmt == "json":
        return json.dumps([_record(r) for r in shown], indent=2) + "\n"
    if fmt == "csv":
        return _csv(shown, info)
    if not shown:
        return f"{info.workload} ({info.preset}): no measured trials yet\n"
    return table(shown, info, len(rows), width, wide)
