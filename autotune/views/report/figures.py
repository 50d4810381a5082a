"""The report's plotly figures, one function each, all from a :class:`ReportData`.

Drawn here rather than by ``optuna.visualization``: Optuna's own plots show ordinal params as indices,
infeasible trials at their placeholder value and first measurements where the records rank by re-measured
medians; and the Pareto front is the record model's (:attr:`TrialPoint.pareto`), not recomputed.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from autotune.numbers import minutes
from autotune.views.report.data import ReportData, TrialPoint

__all__ = [
    "best_so_far",
    "failures_figure",
    "gpu_time_figure",
    "importance_figure",
    "knob_axis",
    "pareto_figure",
    "slices_figure",
    "throughput_figure",
]

MAX_SLICES = 12  # knobs shown in the slice figure (the most important first)
_OK_COLOR, _OFF_COLOR, _BEST_COLOR, _DEFAULT_COLOR = "#1f77b4", "#b0b0b0", "#2ca02c", "#d62728"


def best_so_far(points: list[TrialPoint], direction: str) -> list[tuple[int, float]]:
    """(trial number, best feasible value up to it) at each feasible trial, in trial order."""
    best: float | None = None
    out = []
    for p in sorted(points, key=lambda q: q.number):
        if not p.feasible or p.value is None:
            continue
        better = best is None or (p.value > best if direction == "maximize" else p.value < best)
        best = p.value if better else best
        assert best is not None
        out.append((p.number, best))
    return out


def _axis_title(data: ReportData) -> str:
    return f"{data.metric} ({data.unit})" if data.unit else data.metric


def _hover(p: TrialPoint) -> str:
    knobs = "<br>".join(f"{k}={v}" for k, v in p.params.items())
    return f"trial {p.number} ({p.status})<br>{knobs}"


def throughput_figure(data: ReportData) -> go.Figure:
    """The first objective per trial: feasible trials, infeasible ones greyed, best so far, the default."""
    fig = go.Figure()
    groups = {"feasible": [p for p in data.points if p.feasible], "infeasible": []}
    groups["infeasible"] = [p for p in data.points if p.value is not None and not p.feasible]
    for name, color in (("feasible", _OK_COLOR), ("infeasible", _OFF_COLOR)):
        shown = groups[name]
        if shown:
            fig.add_trace(
                go.Scatter(
                    x=[p.number for p in shown],
                    y=[p.value for p in shown],
                    mode="markers",
                    name=f"{name} trials",
                    marker={"color": color, "size": 6},
                    hovertext=[_hover(p) for p in shown],
                    hoverinfo="text+y",
                )
            )
    steps = best_so_far(data.points, data.direction)
    if steps:
        last = max(p.number for p in data.points)
        xs, ys = [n for n, _ in steps] + [last], [v for _, v in steps] + [steps[-1][1]]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line_shape="hv", name="best so far", line_color=_BEST_COLOR))
    if data.baseline is not None:
        fig.add_hline(y=data.baseline, line_dash="dash", line_color=_DEFAULT_COLOR, annotation_text="PyTorch default")
    fig.update_layout(title=f"{data.metric} per trial", xaxis_title="trial", yaxis_title=_axis_title(data))
    return fig


def importance_figure(importances: dict[str, float]) -> go.Figure:
    """fANOVA importance per knob, the most important on top."""
    names = list(importances)[::-1]
    fig = go.Figure(go.Bar(x=[importances[n] for n in names], y=names, orientation="h", marker_color=_OK_COLOR))
    fig.update_layout(title="which knobs mattered (fANOVA importance)", xaxis_title="importance")
    return fig


def knob_axis(values: list[Any]) -> list[str]:
    """A knob's distinct values as axis labels, numbers in numeric order, the rest alphabetically."""
    numbers = sorted({v for v in values if isinstance(v, int | float) and not isinstance(v, bool)})
    others = sorted({str(v) for v in values if not (isinstance(v, int | float) and not isinstance(v, bool))})
    return [str(v) for v in numbers] + others


def slices_figure(data: ReportData, knobs: list[str]) -> go.Figure:
    """Each knob's effect: the first objective of every feasible trial against the knob's real value."""
    shown = knobs[:MAX_SLICES]
    feasible = [p for p in data.points if p.feasible and p.value is not None]
    columns = min(3, max(1, len(shown)))
    rows = max(1, -(-len(shown) // columns))
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=shown, vertical_spacing=0.12)
    for i, knob in enumerate(shown):
        row, col = divmod(i, columns)
        fig.add_trace(
            go.Scatter(
                x=[str(p.params.get(knob)) for p in feasible],
                y=[p.value for p in feasible],
                mode="markers",
                marker={"color": _OK_COLOR, "size": 5, "opacity": 0.6},
                hovertext=[_hover(p) for p in feasible],
                hoverinfo="text+y",
                showlegend=False,
            ),
            row=row + 1,
            col=col + 1,
        )
        order = knob_axis([p.params.get(knob) for p in feasible])
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order, row=row + 1, col=col + 1)
        if data.baseline is not None:
            fig.add_hline(y=data.baseline, line_dash="dash", line_color=_DEFAULT_COLOR, row=row + 1, col=col + 1)
    fig.update_layout(title=f"each knob's effect on {data.metric} (dashed: PyTorch default)", height=300 * rows)
    return fig


def pareto_figure(data: ReportData) -> go.Figure | None:
    """The first two objectives of the feasible trials, the record model's Pareto front marked; None with one."""
    if len(data.info.objectives) < 2:
        return None
    (first, first_direction), (second, _) = data.info.objectives[:2]
    points = [p for p in data.points if p.feasible and None not in p.objectives[:2]]
    if not points:
        return None
    fig = go.Figure()
    for name, on_front, color in (("other feasible trials", False, _OFF_COLOR), ("Pareto front", True, _BEST_COLOR)):
        shown = sorted((p for p in points if p.pareto == on_front), key=lambda p: p.objectives[0] or 0.0)
        fig.add_trace(
            go.Scatter(
                x=[p.objectives[0] for p in shown],
                y=[p.objectives[1] for p in shown],
                mode="lines+markers" if on_front else "markers",
                name=name,
                marker_color=color,
                text=[_hover(p) for p in shown],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        title=f"Pareto front: {first} ({first_direction}) against {second}", xaxis_title=first, yaxis_title=second
    )
    return fig


def failures_figure(data: ReportData) -> go.Figure:
    """How the measured trials ended, one bar per status class."""
    labels = list(data.status_counts)
    colors = [_OK_COLOR if s == "ok" else _OFF_COLOR if s == "infeasible" else _DEFAULT_COLOR for s in labels]
    fig = go.Figure(go.Bar(x=labels, y=[data.status_counts[s] for s in labels], marker_color=colors))
    fig.update_layout(title="how the measured trials ended", yaxis_title="trials")
    return fig


def gpu_time_figure(data: ReportData) -> go.Figure:
    """Where the sweep's trial time went, in minutes, one bar per part."""
    parts = {label: seconds / 60 for label, seconds in data.time.parts().items()}
    fig = go.Figure(go.Bar(x=list(parts.values()), y=list(parts), orientation="h", marker_color=_OK_COLOR))
    title = f"where the trial time went ({minutes(data.time.trial_s)} of trials, then re-measuring)"
    fig.update_layout(title=title, xaxis_title="minutes")
    return fig
