"""The report's figures as PNGs (matplotlib, no display needed), for MLflow's image viewer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# Figure objects, not pyplot: no GUI backend, no global state (sweeps run on servers without a display).
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from autotune.atomicfile import replaced_atomically
from autotune.numbers import minutes
from autotune.views.report.data import ReportData
from autotune.views.report.figures import MAX_SLICES, best_so_far, knob_axis

__all__ = ["write_pngs"]

_DPI = 100


def _throughput(ax: Axes, data: ReportData, _importances: dict[str, float], _knobs: list[str]) -> None:
    feasible = [(p.number, p.value) for p in data.points if p.feasible and p.value is not None]
    infeasible = [(p.number, p.value) for p in data.points if p.value is not None and not p.feasible]
    ax.scatter([n for n, _ in feasible], [v for _, v in feasible], s=10, label="feasible trials")
    if infeasible:
        ax.scatter([n for n, _ in infeasible], [v for _, v in infeasible], s=10, c="#b0b0b0", label="infeasible")
    steps = best_so_far(data.points, data.direction)
    if steps:
        last = max(p.number for p in data.points)
        ax.step([n for n, _ in steps] + [last], [v for _, v in steps] + [steps[-1][1]], where="post", c="#2ca02c",
                label="best so far")  # fmt: skip
    if data.baseline is not None:
        ax.axhline(data.baseline, ls="--", c="#d62728", label="PyTorch default")
    ax.set(title=f"{data.metric} per trial", xlabel="trial", ylabel=f"{data.metric} {data.unit}".strip())
    ax.legend(loc="best")


def _importance(ax: Axes, _data: ReportData, importances: dict[str, float], _knobs: list[str]) -> None:
    names = list(importances)[::-1]
    ax.barh(names, [importances[n] for n in names])
    ax.set(title="which knobs mattered (fANOVA importance)", xlabel="importance")


def _failures(ax: Axes, data: ReportData, _importances: dict[str, float], _knobs: list[str]) -> None:
    ax.bar(list(data.status_counts), list(data.status_counts.values()))
    ax.set(title="how the measured trials ended", ylabel="trials")


def _gpu_time(ax: Axes, data: ReportData, _importances: dict[str, float], _knobs: list[str]) -> None:
    parts = data.time.parts()
    ax.barh(list(parts)[::-1], [s / 60 for s in parts.values()][::-1])
    ax.set(title=f"where the trial time went ({minutes(data.time.trial_s)} of trials)", xlabel="minutes")


def _pareto(ax: Axes, data: ReportData, _importances: dict[str, float], _knobs: list[str]) -> None:
    names = [m for m, _ in data.info.objectives[:2]]
    points = [
        (x, y, p.pareto)
        for p in data.points
        if p.feasible
        for x, y in [p.objectives[:2]]
        if x is not None and y is not None
    ]
    ax.scatter([x for x, _, _ in points], [y for _, y, _ in points], s=10, c="#b0b0b0", label="trials")
    front = sorted((x, y) for x, y, on_front in points if on_front)
    ax.plot([x for x, _ in front], [y for _, y in front], "o-", c="#d62728", label="Pareto front")
    ax.set(title="Pareto front", xlabel=names[0], ylabel=names[1])
    ax.legend()


Draw = Callable[[Axes, ReportData, dict[str, float], list[str]], None]


def _save(path: Path, draw: Draw, data: ReportData, importances: dict[str, float], knobs: list[str]) -> Path:
    fig = Figure(figsize=(9, 5))
    draw(fig.subplots(), data, importances, knobs)
    fig.tight_layout()
    _write(fig, path)
    return path


def _slices(path: Path, data: ReportData, knobs: list[str]) -> Path:
    shown = knobs[:MAX_SLICES]
    feasible = [p for p in data.points if p.feasible and p.value is not None]
    columns = min(3, len(shown))
    rows = -(-len(shown) // columns)
    fig = Figure(figsize=(4 * columns, 3 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, knob in zip(axes.flat, shown, strict=False):
        order = knob_axis([p.params.get(knob) for p in feasible])
        where = {label: i for i, label in enumerate(order)}
        ax.scatter([where[str(p.params.get(knob))] for p in feasible], [p.value for p in feasible], s=8, alpha=0.6)
        ax.set_xticks(range(len(order)), order, rotation=30, fontsize=8)
        if data.baseline is not None:
            ax.axhline(data.baseline, ls="--", c="#d62728")
        ax.set_title(knob, fontsize=10)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    fig.suptitle(f"each knob's effect on {data.metric} (dashed: PyTorch default)")
    fig.tight_layout()
    _write(fig, path)
    return path


def _write(fig: Figure, path: Path) -> None:
    """``fig`` as a PNG at ``path``, whole or not at all."""
    with replaced_atomically(path) as temporary:
        fig.savefig(temporary, dpi=_DPI, format="png")  # the temporary name does not end in .png


def write_pngs(data: ReportData, importances: dict[str, float], knobs: list[str], folder: Path) -> list[Path]:
    """Write the figures that have something to show into ``folder``; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    draws: dict[str, Draw] = {"throughput": _throughput, "failures": _failures, "gpu_time": _gpu_time}
    if importances:
        draws["importance"] = _importance
    if len(data.info.objectives) > 1 and any(p.pareto for p in data.points):
        draws["pareto"] = _pareto
    paths = [_save(folder / f"{name}.png", draw, data, importances, knobs) for name, draw in draws.items()]
    if knobs and any(p.feasible for p in data.points):
        paths.append(_slices(folder / "slices.png", data, knobs))
    return paths
