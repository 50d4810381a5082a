"""The leaderboard of a study: measured trials ranked, the winner chosen, rendered for people and tools.

Only measured trials appear (rejected and duplicate trials cost no GPU time and repeat nothing new).
Rows come in three groups:

1. feasible ok trials, ranked by the first objective; a trial re-measured in fresh processes ranks
   by the median of those runs, so a winner must hold up rather than win one noisy measurement;
2. ok trials that broke a metric constraint, unranked;
3. failures (oom, crash, timeout ...), unranked, oldest first.

``speedup`` compares each value with the PyTorch-default trial's (> 1 is better in either
direction). With several objectives, ``pareto`` marks the feasible ok trials that no other feasible
ok trial beats on every objective. ``input_bound`` marks ok trials that waited for input more than a
tenth of their step time (the table says how much): their speed is the data path's, not the model's.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import optuna
from optuna.trial import FrozenTrial

from autotune import studyio
from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.report import format_params
from autotune.results import Status, TrialResult
from autotune.studyio import StudyInfo

__all__ = ["LeaderboardRow", "best_trial", "choose", "leaderboard", "objective_value", "render", "speedup"]

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
    """One measured trial as the leaderboard shows it.

    ``value`` is the first objective's value used for ranking (the re-measured median when there
    is one); ``rank`` is None for trials that are not feasible and ok.
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

    @property
    def ok(self) -> bool:
        return self.status == Status.OK.value


# --- building rows -----------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite float, or None (a missing metric, a string, NaN: nothing to rank by)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def objective_value(metric: str, result: TrialResult, remeasured: Mapping[str, Any] | None) -> float | None:
    """The value of one objective: the re-measured median when that metric was re-measured."""
    if remeasured and remeasured.get("metric", metric) == metric and _number(remeasured.get("median")):
        return _number(remeasured["median"])
    return _number(result.metrics.get(metric))


def _better(a: float, b: float, direction: str) -> bool:
    return a > b if direction == "maximize" else a < b


def speedup(value: float | None, baseline: float | None, direction: str) -> float | None:
    """``value`` over the PyTorch-default ``baseline``, so that > 1 is better in either direction."""
    if value is None or baseline is None:
        return None
    ratio = (value, baseline) if direction == "maximize" else (baseline, value)
    return ratio[0] / ratio[1] if ratio[1] > 0 else None


def _dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """a is no worse than b on every objective and better on at least one."""
    no_worse = all(not _better(y, x, d) for x, y, d in zip(a, b, directions, strict=True))
    return no_worse and any(_better(x, y, d) for x, y, d in zip(a, b, directions, strict=True))


@dataclass(frozen=True)
class _Measured:
    """A measured trial's facts before ranking."""

    trial: FrozenTrial
    result: TrialResult
    remeasured: dict[str, Any] | None
    objectives: tuple[float | None, ...]

    @property
    def value(self) -> float | None:
        return self.objectives[0]

    @property
    def is_default(self) -> bool:
        return bool(self.trial.user_attrs.get(studyio.ATTR_DEFAULT))

    @property
    def feasible(self) -> bool:
        violation = _number(self.trial.user_attrs.get(studyio.ATTR_VIOLATION)) or 0.0
        return self.result.ok and violation <= 0 and self.value is not None


def _collect(study: optuna.Study, info: StudyInfo) -> list[_Measured]:
    out = []
    study_attrs = study.user_attrs  # one query, not one per trial (the sweep ranks after every trial)
    for trial in studyio.measured_trials(study):
        result = studyio.trial_result(trial)
        assert result is not None  # measured_trials keeps only trials with a result
        remeasured = studyio.remeasured(study, trial, study_attrs)
        objectives = tuple(objective_value(metric, result, remeasured) for metric, _ in info.objectives)
        out.append(_Measured(trial, result, remeasured, objectives))
    return out


def _baseline(measured: Sequence[_Measured]) -> float | None:
    """The first objective's value of the ok PyTorch-default trial, the yardstick of ``speedup``."""
    defaults = [m for m in measured if m.is_default and m.result.ok and m.value is not None]
    return defaults[0].value if defaults else None


def _pareto_front(measured: Sequence[_Measured], directions: Sequence[str]) -> set[int]:
    """Numbers of the feasible trials that no other feasible trial dominates.

    O(n^2): a sweep holds hundreds of trials, not millions.
    """
    points = {
        m.trial.number: [v for v in m.objectives if v is not None]
        for m in measured
        if m.feasible and None not in m.objectives
    }
    return {
        number
        for number, point in points.items()
        if not any(_dominates(other, point, directions) for n, other in points.items() if n != number)
    }


def _order(measured: Sequence[_Measured], direction: str) -> list[tuple[int | None, _Measured]]:
    """Ranked feasible trials, then ok-but-infeasible ones, then failures (each by trial number)."""
    sign = -1.0 if direction == "maximize" else 1.0
    feasible = sorted((m for m in measured if m.feasible), key=lambda m: (sign * (m.value or 0.0), m.trial.number))
    infeasible = [m for m in measured if m.result.ok and not m.feasible]
    failed = [m for m in measured if not m.result.ok]
    by_number = sorted(infeasible, key=lambda m: m.trial.number) + sorted(failed, key=lambda m: m.trial.number)
    return [(i + 1, m) for i, m in enumerate(feasible)] + [(None, m) for m in by_number]


def leaderboard(study: optuna.Study, info: StudyInfo) -> list[LeaderboardRow]:
    """The study's measured trials as rows: ranked feasible ones first (see the module docstring)."""
    measured = _collect(study, info)
    directions = [direction for _, direction in info.objectives]
    front = _pareto_front(measured, directions) if len(directions) > 1 else set()
    baseline = _baseline(measured)
    return [
        LeaderboardRow(
            rank=rank,
            trial=m.trial.number,
            params=studyio.trial_params(m.trial),
            status=m.result.status.value,
            reason=m.trial.user_attrs.get(studyio.ATTR_REASON) or m.result.reason,
            metrics=dict(m.result.metrics),
            value=m.value if m.result.ok else None,
            speedup=speedup(m.value, baseline, directions[0]) if m.result.ok else None,
            remeasured=m.remeasured,
            pareto=m.trial.number in front,
            default=m.is_default,
            feasible=m.feasible,
            input_bound=m.result.input_bound,
        )
        for rank, m in _order(measured, directions[0])
    ]


def best_trial(study: optuna.Study, info: StudyInfo) -> FrozenTrial | None:
    """The rank-1 trial (the re-measured median decides where there is one), or None."""
    rows = leaderboard(study, info)
    if not rows or rows[0].rank != 1:
        return None
    return next(t for t in studyio.measured_trials(study) if t.number == rows[0].trial)


# --- choosing ----------------------------------------------------------------------------------


def _rule_variables(row: LeaderboardRow) -> dict[str, Any]:
    """What a rule may name: params and metrics, the re-measured median standing in for its metric."""
    variables = {**row.params, **row.metrics}
    if row.remeasured and _number(row.remeasured.get("median")) is not None:
        variables[row.remeasured.get("metric", "")] = row.remeasured["median"]
    return variables


def choose(rows: Sequence[LeaderboardRow], rule: str | None, info: StudyInfo) -> LeaderboardRow:
    """The row to export: rank 1, or with ``rule`` the best-ranked feasible row that satisfies it.

    ``rule`` is an :class:`~autotune.expr.Expression` over the row's metrics and params (e.g.
    ``peak_mem_gib <= 40``). With several objectives, Pareto rows are tried before the others.
    Raises :class:`AutotuneError` when no row qualifies.
    """
    ranked = sorted((r for r in rows if r.rank is not None), key=lambda r: r.rank or 0)
    if not ranked:
        raise AutotuneError(f"no feasible ok trial to choose from ({len(rows)} measured trials)")
    if rule is None:
        return ranked[0]
    expression = Expression(rule)
    if len(info.objectives) > 1:
        ranked.sort(key=lambda r: not r.pareto)  # stable: rank order kept within each group
    for row in ranked:
        if expression.evaluate(_rule_variables(row)):
            return row
    raise AutotuneError(f"no feasible ok trial satisfies {expression.text!r} ({len(ranked)} checked)")


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
    cv = _number((row.remeasured or {}).get("cv"))
    return f"{text} ±{cv:.1%}" if cv is not None else text


def _metric_text(row: LeaderboardRow, metric: str) -> str:
    value = _number(row.metrics.get(metric))
    return "-" if value is None or not row.ok else _fmt_number(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def _status_text(row: LeaderboardRow) -> str:
    notes = ["default"] if row.default else []
    if row.remeasured and row.remeasured.get("values"):
        notes.append(f"median of {len(row.remeasured['values'])}")
    if row.input_bound:
        notes.append(f"input-bound: {row.metrics['data_wait_frac']:.0%} waiting for data")
    if row.ok and not row.feasible:
        head = "infeasible" + (f": {_clip(row.reason, _REASON_WIDTH)}" if row.reason else "")
    elif not row.ok:
        head = row.status + (f": {_clip(row.reason, _REASON_WIDTH)}" if row.reason else "")
    else:
        head = row.status
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
    head = ["rank", "trial", "status", "reason", "default", "feasible", "pareto", "input_bound", "value", "speedup"]
    head += ["remeasured_median", "remeasured_cv"]
    out = io.StringIO()
    writer = csv.DictWriter(out, [*head, *params, *metric_names.values()], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        remeasured = row.remeasured or {}
        record: dict[str, Any] = {
            "rank": row.rank, "trial": row.trial, "status": row.status, "reason": row.reason,
            "default": row.default, "feasible": row.feasible, "pareto": row.pareto, "input_bound": row.input_bound,
            "value": row.value, "speedup": row.speedup,
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
