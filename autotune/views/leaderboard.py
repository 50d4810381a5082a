"""The leaderboard of a study: the record model's ranking rendered for people and tools.

Only measured trials appear (rejected and duplicate trials cost no GPU time and repeat nothing new).
Rows come in three groups, as :class:`~autotune.records.StudyRecords` ranks them:

1. feasible ok trials, ranked by the first objective (a trial re-measured in fresh processes ranks
   by the median of those runs, and its other metrics are those runs' medians);
2. ok trials that broke a metric constraint, unranked;
3. pruned and failed trials (oom, crash, timeout ...), unranked, oldest first.

Nothing here decides what is feasible, what ranks first or by which number: the rows only render it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import optuna

from autotune.errors import AutotuneError
from autotune.records import StudyInfo, StudyRecords, TrialRecord
from autotune.records.trial import finite
from autotune.views.text import format_params

__all__ = ["LeaderboardRow", "leaderboard", "render", "rows"]

Format = Literal["table", "json", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "csv")
TABLE_WIDTH = 160
_MIN_KNOBS_WIDTH = 24
_REASON_WIDTH = 36
# Units of the metrics a table shows; throughput's comes with each result (images/s, tokens/s ...).
_UNITS = {
    "step_ms_p50": "ms", "step_ms_p90": "ms", "peak_mem_gib": "GiB", "compile_s": "s",
    "energy_j_per_sample": "J/sample", "power_w_mean": "W", "overhead_s": "s", "tflops": "TFLOP/s",
}  # fmt: skip
# The metric columns every table has: (header, metric).
_METRIC_COLUMNS = (("step p50 ms", "step_ms_p50"), ("peak GiB", "peak_mem_gib"), ("J/sample", "energy_j_per_sample"))


@dataclass(frozen=True)
class LeaderboardRow:
    """One measured trial as the leaderboard shows it: its record, rendered.

    ``value`` is the first objective's ranked value (the re-measured median when there is one, as
    ``value_is`` says), ``metrics`` the trial's metrics as ranked; ``rank`` is None for trials that do not
    rank; ``outcome`` is ok, infeasible, pruned, oom, crash ...
    """

    rank: int | None
    trial: int
    params: dict[str, Any]
    status: str
    reason: str | None
    metrics: dict[str, Any]
    value: float | None
    speedup: float | None
    remeasured: dict[str, Any] | None
    pareto: bool
    default: bool
    feasible: bool
    input_bound: bool = False
    outcome: str = ""
    value_is: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _row(records: StudyRecords, record: TrialRecord) -> LeaderboardRow:
    assert record.result is not None  # measured trials have a result
    return LeaderboardRow(
        rank=records.rank(record.number),
        trial=record.number,
        params=record.ran_with,
        status=record.result.status.value,
        reason=record.reason,
        metrics=record.metrics,
        value=record.value,
        speedup=records.speedup(record),
        remeasured=record.remeasured.to_dict() if record.remeasured is not None else None,
        pareto=record.number in records.pareto,
        default=record.default,
        feasible=record.feasible,
        input_bound=record.input_bound,
        outcome=record.outcome,
        value_is=record.value_is if record.ok else "",
    )


def rows(records: StudyRecords) -> list[LeaderboardRow]:
    """Every measured trial as a row: ranked ones first, then ok trials that broke a constraint, then the rest."""
    ranked = records.ranked
    shown = {r.number for r in ranked}
    infeasible = [r for r in records.measured if r.number not in shown and r.ok]
    rest = [r for r in records.measured if r.number not in shown and not r.ok]
    return [_row(records, record) for record in [*ranked, *infeasible, *rest]]


def leaderboard(study: optuna.Study, info: StudyInfo) -> list[LeaderboardRow]:
    """The study's measured trials as rows, read from the storage (see :func:`rows`)."""
    return rows(StudyRecords.read(study, info))


# --- rendering ---------------------------------------------------------------------------------


def _fmt_number(value: float) -> str:
    """Thousands separators for big numbers, four significant digits for small ones."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _unit(metric: str, metrics: Mapping[str, Any]) -> str:
    if metric == "throughput":
        return str(metrics.get("throughput_unit", ""))
    return _UNITS.get(metric, "")


def _value_text(row: LeaderboardRow, metric: str) -> str:
    if row.value is None:
        return "-"
    text = f"{_fmt_number(row.value)} {_unit(metric, row.metrics)}".rstrip()
    cv = finite((row.remeasured or {}).get("cv"))
    return f"{text} ±{cv:.1%}" if cv is not None else text


def _metric_text(row: LeaderboardRow, metric: str) -> str:
    value = finite(row.metrics.get(metric))
    return "-" if value is None or not row.ok else _fmt_number(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def _status_text(row: LeaderboardRow) -> str:
    notes = ["default"] if row.default else []
    if row.remeasured and row.remeasured.get("values"):
        notes.append(f"median of {len(row.remeasured['values'])}")
    if row.input_bound:
        notes.append(f"input-bound: {row.metrics['data_wait_frac']:.0%} waiting for data")
    if row.outcome == "ok":
        head = row.outcome
    else:
        head = row.outcome + (f": {_clip(row.reason, _REASON_WIDTH)}" if row.reason else "")
    return f"{head} ({', '.join(notes)})" if notes else head


def _constant_params(rows: Sequence[LeaderboardRow]) -> dict[str, Any]:
    """Params with one value in every row: said once under the table instead of in each row."""
    if len(rows) < 2:
        return {}
    first = rows[0].params
    return {
        k: v for k, v in first.items() if v is not None and all(k in r.params and r.params[k] == v for r in rows[1:])
    }


def _table_columns(info: StudyInfo) -> list[tuple[str, str]]:
    """(header, metric) of the metric columns: the fixed ones plus any other objective."""
    columns = list(_METRIC_COLUMNS)
    shown = {info.objectives[0][0], *(m for _, m in columns)}
    return columns + [(m, m) for m, _ in info.objectives[1:] if m not in shown]


def _row_cells(row: LeaderboardRow, info: StudyInfo, constant: Mapping[str, Any]) -> list[str]:
    multi = len(info.objectives) > 1
    cells = ["-" if row.rank is None else str(row.rank), str(row.trial)]
    cells += ["*" if row.pareto else ""] if multi else []
    cells += [_value_text(row, info.objectives[0][0]), "-" if row.speedup is None else f"{row.speedup:.2f}x"]
    cells += [_metric_text(row, m) for _, m in _table_columns(info)]
    knobs = {k: v for k, v in row.params.items() if k not in constant}
    return [*cells, _status_text(row), format_params(knobs)]


def _title(info: StudyInfo, shown: int, total: int) -> str:
    objectives = ", ".join(f"{m} ({d})" for m, d in info.objectives)
    more = f", top {shown} shown" if shown < total else ""
    return f"{info.workload} ({info.preset}) on {info.device}: {objectives}; {total} measured trials{more}"


def _table(rows: Sequence[LeaderboardRow], info: StudyInfo, total: int) -> str:
    constant = _constant_params(rows)
    headers = ["rank", "trial", *(["pareto"] if len(info.objectives) > 1 else []), info.objectives[0][0]]
    headers += ["speedup", *(h for h, _ in _table_columns(info)), "status", "knobs"]
    body = [_row_cells(row, info, constant) for row in rows]
    widths = [max(len(line[i]) for line in [headers, *body]) for i in range(len(headers))]
    # The knobs column (last) takes what is left of the width; the others are short by construction.
    widths[-1] = max(_MIN_KNOBS_WIDTH, TABLE_WIDTH - sum(widths[:-1]) - 2 * (len(widths) - 1))
    left = {"pareto", "status", "knobs"}  # text; numbers are right-aligned so their digits line up

    def line(cells: Sequence[str]) -> str:
        padded = [
            _clip(cell, w).ljust(w) if header in left else cell.rjust(w)
            for header, cell, w in zip(headers, cells, widths, strict=True)
        ]
        return "  ".join(padded).rstrip()

    constant_line = [f"same in every row: {format_params(constant)}"] if constant else []
    return "\n".join([_title(info, len(rows), total), *map(line, [headers, *body]), *constant_line]) + "\n"


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


def render(rows: Sequence[LeaderboardRow], info: StudyInfo, fmt: Format = "table", top: int | None = None) -> str:
    """The rows as text: an aligned ``table`` (~160 columns), ``csv`` (a header row, one column per
    param and per metric) or ``json`` (a list of objects with full params and metrics).

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
    return _table(shown, info, len(rows))
