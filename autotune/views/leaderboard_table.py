"""The leaderboard as a text table that fits the terminal, every knob of every row readable.

One line per trial where that fits the width (or with ``wide``): rank, trial, the ranked value, speedup, step
time, memory, energy, TFLOP/s and MFU (where the trials' model FLOPs were counted), the status with its reason,
and the knobs. Where it does not fit, each trial's figures keep
their line and its knobs (and a failure's reason) follow in full on lines of their own, wrapped to the width, so a
winner's whole configuration is always on the screen. Knobs with one value in every row are said once, under the
table.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from autotune.numbers import number, quantity, ratio, share
from autotune.records.trial import finite
from autotune.views.text import format_params

if TYPE_CHECKING:
    from autotune.records import StudyInfo
    from autotune.views.leaderboard_rows import LeaderboardRow

__all__ = ["DEFAULT_WIDTH", "table", "terminal_width"]

DEFAULT_WIDTH = 100  # where the output is no terminal (a log file, a pipe) and COLUMNS is unset
_GAP = "  "
_INDENT = 6  # where the lines under a trial's figures start: past its rank
# Units of the metrics a table shows; throughput's comes with each result (images/s, tokens/s ...).
_UNITS = {
    "step_ms_p50": "ms", "step_ms_p90": "ms", "peak_mem_gib": "GiB", "compile_s": "s",
    "energy_j_per_sample": "J/sample", "power_w_mean": "W", "overhead_s": "s", "tflops": "TFLOP/s",
}  # fmt: skip
# The metric columns every table has: (header, metric).
_METRIC_COLUMNS = (("step p50 ms", "step_ms_p50"), ("peak GiB", "peak_mem_gib"), ("J/sample", "energy_j_per_sample"))
_LEFT = {"pareto", "status", "knobs"}  # text; numbers are right-aligned so their digits line up


def terminal_width() -> int:
    """The terminal's columns (``COLUMNS`` first, as the shell sets it), else :data:`DEFAULT_WIDTH`."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def unit(metric: str, metrics: Mapping[str, Any]) -> str:
    """The unit a metric is shown in: the result's own for throughput (images/s, tokens/s ...)."""
    if metric == "throughput":
        return str(metrics.get("throughput_unit", ""))
    return _UNITS.get(metric, "")


def _value_text(row: LeaderboardRow, metric: str) -> str:
    if row.value is None:
        return "-"
    text = quantity(row.value, unit(metric, row.metrics))
    cv = finite((row.remeasured or {}).get("cv"))
    return f"{text} ±{cv:.1%}" if cv is not None else text


def _metric_text(row: LeaderboardRow, metric: str) -> str:
    value = finite(row.metrics.get(metric))
    return "-" if value is None or not row.ok else number(value)


def _status_text(row: LeaderboardRow, with_reason: bool) -> str:
    """``ok (default, median of 3)``, ``pruned``, and with ``with_reason`` ``oom: CUDA out of memory ...``."""
    notes = ["default"] if row.default else []
    if row.remeasured and row.remeasured.get("values"):
        notes.append(f"median of {len(row.remeasured['values'])}")
    if row.input_bound:
        notes.append(f"input-bound: {row.metrics['data_wait_frac']:.0%} waiting for data")
    head = row.outcome
    if with_reason and row.outcome != "ok" and row.reason:
        head += f": {row.reason}"
    return f"{head} ({', '.join(notes)})" if notes else head


def _constant_params(rows: Sequence[LeaderboardRow]) -> dict[str, Any]:
    """Params with one value in every row: said once under the table instead of in each row."""
    if len(rows) < 2:
        return {}
    first = rows[0].params
    return {
        k: v for k, v in first.items() if v is not None and all(k in r.params and r.params[k] == v for r in rows[1:])
    }


def _metric_columns(info: StudyInfo) -> list[tuple[str, str]]:
    """(header, metric) of the metric columns: the fixed ones plus any other objective."""
    columns = list(_METRIC_COLUMNS)
    shown = {info.objectives[0][0], *(m for _, m in columns)}
    return columns + [(m, m) for m, _ in info.objectives[1:] if m not in shown]


def _shows_flops(rows: Sequence[LeaderboardRow]) -> bool:
    """Whether the table has TFLOP/s and MFU columns: some trial's model FLOPs were counted."""
    return any(row.tflops is not None for row in rows)


def _flops_texts(row: LeaderboardRow) -> list[str]:
    return ["-" if row.tflops is None else number(row.tflops), "-" if row.mfu is None else share(row.mfu)]


def _headers(info: StudyInfo, flops: bool) -> list[str]:
    multi = len(info.objectives) > 1
    head = ["rank", "trial", *(["pareto"] if multi else []), info.objectives[0][0], "speedup"]
    return head + [h for h, _ in _metric_columns(info)] + (["TFLOP/s", "MFU"] if flops else [])


def _figures(row: LeaderboardRow, info: StudyInfo, flops: bool) -> list[str]:
    """A row's cells up to its status: rank, trial, the Pareto mark, the ranked value, speedup, the metrics,
    TFLOP/s and MFU where the table shows them."""
    cells = ["-" if row.rank is None else str(row.rank), str(row.trial)]
    cells += ["*" if row.pareto else ""] if len(info.objectives) > 1 else []
    cells += [_value_text(row, info.objectives[0][0]), "-" if row.speedup is None else ratio(row.speedup)]
    cells += [_metric_text(row, m) for _, m in _metric_columns(info)]
    return cells + (_flops_texts(row) if flops else [])


def _aligned(headers: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in [headers, *lines]) for i in range(len(headers))]

    def cells(line: Sequence[str]) -> str:
        padded = [
            cell.ljust(w) if header in _LEFT else cell.rjust(w)
            for header, cell, w in zip(headers, line, widths, strict=True)
        ]
        return _GAP.join(padded).rstrip()

    return [cells(line) for line in [headers, *lines]]


def _title(info: StudyInfo, shown: int, total: int) -> str:
    objectives = ", ".join(f"{m} ({d})" for m, d in info.objectives)
    more = f", top {shown} shown" if shown < total else ""
    return f"{info.workload} ({info.preset}) on {info.device}: {objectives}; {total} measured trials{more}"


def _one_line_each(rows: Sequence[LeaderboardRow], info: StudyInfo, constant: Mapping[str, Any]) -> list[str]:
    flops = _shows_flops(rows)
    headers = [*_headers(info, flops), "status", "knobs"]
    body = [
        [*_figures(row, info, flops), _status_text(row, True), format_params(_varying(row, constant))] for row in rows
    ]
    return _aligned(headers, body)


def _stacked(rows: Sequence[LeaderboardRow], info: StudyInfo, constant: Mapping[str, Any], width: int) -> list[str]:
    """Each trial's figures on one line, its knobs and reason in full on the lines under it. Where the figures and
    the status together are wider than ``width`` (TFLOP/s and MFU beside a re-measured value), the status heads the
    lines under the figures instead, or goes unsaid where the reason's line names it."""
    flops = _shows_flops(rows)
    figures = [_figures(row, info, flops) for row in rows]
    statuses = [_status_text(row, False) for row in rows]
    head, *lines = _aligned(
        [*_headers(info, flops), "status"], [[*f, s] for f, s in zip(figures, statuses, strict=True)]
    )
    status_below = max(map(len, [head, *lines])) > width
    if status_below:
        head, *lines = _aligned(_headers(info, flops), figures)
    indent = " " * _INDENT
    wrap = textwrap.TextWrapper(
        max(_INDENT + 20, width), initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    )
    out = [head]
    for row, line, status in zip(rows, lines, statuses, strict=True):
        out.append(line)
        reason = f"{row.outcome}: {row.reason}" if row.outcome != "ok" and row.reason else ""
        knobs = format_params(_varying(row, constant))
        if status_below and not reason:
            knobs = f"{status}: {knobs}" if knobs else status
        out += wrap.wrap(knobs) if knobs else []
        out += wrap.wrap(reason) if reason else []
    return out


def _varying(row: LeaderboardRow, constant: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.params.items() if k not in constant}


def table(
    rows: Sequence[LeaderboardRow], info: StudyInfo, total: int, width: int | None = None, wide: bool = False
) -> str:
    """The rows as a table no wider than ``width`` (the terminal's by default) unless ``wide``: one line per
    trial where that fits, else each trial's knobs and reason in full under its figures."""
    width = terminal_width() if width is None else width
    constant = _constant_params(rows)
    lines = _one_line_each(rows, info, constant)
    if not wide and max(map(len, lines)) > width:
        lines = _stacked(rows, info, constant, width)
    wrap = textwrap.TextWrapper(max(40, width), subsequent_indent="  ", break_on_hyphens=False)
    constant_line = wrap.wrap(f"same in every row: {format_params(constant)}") if constant else []
    return "\n".join([_title(info, len(rows), total), *lines, *constant_line]) + "\n"
