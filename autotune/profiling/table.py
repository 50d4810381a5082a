"""Two profiles side by side (before: the PyTorch defaults, after: the winner), in 100 columns.

Time by category in ms per step and as a share of the profiled step, the step times, the speedup,
then the top 10 kernels of each. Batch sizes may differ between the two, so compare shares and
throughput; ms per step are per step of that trial's own batch.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from autotune.numbers import number, quantity
from autotune.profiling.kernel_categories import CATEGORIES

__all__ = ["WIDTH", "ProfiledTrial", "markdown", "render", "speedup"]

WIDTH = 100
TOP = 10
_LABEL, _NUM, _SHARE = 24, 10, 8  # column widths of the side-by-side part
_CATEGORY = max(len(label) for label in CATEGORIES.values())
_NOTES = {
    "cuda": "GPU time by category; GPU idle: no kernel or copy running; data wait: host time blocked "
    "on input (it overlaps the GPU's time).",
    "cpu": "On a CPU: the ops' own time; other: Python and ops outside the categories; copies and "
    "GPU idle do not apply.",
}


@dataclass(frozen=True)
class ProfiledTrial:
    """One profiled trial: ``label`` (default, winner), its number, params, the profile run's metrics
    (throughput of its timed window ...) and ``profile``, what :func:`autotune.profiling.capture` returned."""

    label: str
    trial: int
    params: dict[str, Any]
    metrics: dict[str, Any]
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def heading(self) -> str:
        return f"{self.label} (trial {self.trial})"

    def throughput(self) -> float | None:
        value = self.metrics.get("throughput")
        return float(value) if isinstance(value, int | float) and value > 0 else None


def speedup(before: ProfiledTrial, after: ProfiledTrial) -> float | None:
    """The winner's throughput over the default's (both from their timed windows)."""
    old, new = before.throughput(), after.throughput()
    return new / old if old and new else None


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" if value < 10 else f"{value:.2f}" if value < 1000 else f"{value:,.0f}"


def _share(value: float | None, step_ms: float) -> str:
    return "" if value is None or step_ms <= 0 else f"{value / step_ms:.1%}"


Cell = str | tuple[str, str]  # one text across a trial's columns, or (ms, share)


def _row(label: str, cells: tuple[Cell, Cell], extra: str = "") -> str:
    """A label and one cell per trial, right-aligned in fixed columns."""
    texts = [
        f"{cell:>{_NUM + _SHARE}}" if isinstance(cell, str) else f"{cell[0]:>{_NUM}}{cell[1]:>{_SHARE}}"
        for cell in cells
    ]
    return f"{label:<{_LABEL}}{'  '.join(texts)}  {extra}".rstrip()


def _throughput(side: ProfiledTrial) -> str:
    value = side.throughput()
    return "-" if value is None else quantity(value, side.metrics.get("throughput_unit", ""))


def _side_by_side(before: ProfiledTrial, after: ProfiledTrial) -> list[str]:
    gain = speedup(before, after)
    timed = [s.metrics.get("step_ms_p50") for s in (before, after)]
    lines = [
        _row("", (before.heading, after.heading)),
        _row("throughput", (_throughput(before), _throughput(after)), f"{gain:.2f}x speedup" if gain else ""),
        _row("batch size", (str(before.params.get("batch_size", "-")), str(after.params.get("batch_size", "-")))),
        _row("step ms, timed p50", (_ms(timed[0]), _ms(timed[1]))),
        _row("step ms, profiled", (_ms(before.profile["step_ms"]), _ms(after.profile["step_ms"]))),
        _row("time by category", (("ms/step", "share"), ("ms/step", "share"))),
    ]
    lines += [_row(f"  {name}", (_category(before, key), _category(after, key))) for key, name in CATEGORIES.items()]
    return lines


def _category(side: ProfiledTrial, key: str) -> tuple[str, str]:
    """(ms per step, share of the step) of one category; "n/a" where it does not apply."""
    ms = side.profile["categories_ms"].get(key)
    return _ms(ms), _share(ms, side.profile["step_ms"])


def _short_name(name: str) -> str:
    """A C++ kernel name without its return type, argument list and PyTorch's namespaces."""
    if name.startswith("void ") or "::" in name:  # not "Memcpy HtoD (Pinned -> Device)": that says which
        name = re.sub(r"\([^()]*\)$", "", name.removeprefix("void "))
    return name.replace("at::native::", "").replace("(anonymous namespace)::", "")


def _top(side: ProfiledTrial) -> list[str]:
    kind = "kernels" if side.profile.get("device") == "cuda" else "ops"
    head = f"top {TOP} {kind}, {side.heading}"
    name_width = WIDTH - 6 - 2 * 4 - 8 - 6 - 6 - _CATEGORY  # rank, gaps, ms/step, share, calls, category
    lines = [f"{head:<{6 + name_width}}  {'ms/step':>8}  {'share':>6}  {'calls':>6}  category"]
    for rank, kernel in enumerate(side.profile.get("top", [])[:TOP], 1):
        name = _short_name(kernel["name"])
        name = name if len(name) <= name_width else name[: name_width - 3] + "..."
        share = _share(kernel["ms"], side.profile["step_ms"])
        category = CATEGORIES.get(kernel["category"], kernel["category"])
        calls = number(kernel["calls"])
        lines.append(f"  {rank:>2}  {name:<{name_width}}  {_ms(kernel['ms']):>8}  {share:>6}  {calls:>6}  {category}")
    return lines


def _changed_knobs(before: ProfiledTrial, after: ProfiledTrial) -> list[str]:
    changed = {k: v for k, v in after.params.items() if before.params.get(k) != v}
    text = " ".join(f"{k}={v}" for k, v in changed.items()) or "none (the default is the winner)"
    return textwrap.wrap(f"winner's knobs that differ: {text}", WIDTH, subsequent_indent="  ")


def render(before: ProfiledTrial, after: ProfiledTrial, title: str) -> str:
    """The before/after table as text at most :data:`WIDTH` columns wide."""
    lines = [*textwrap.wrap(title, WIDTH), "", *_side_by_side(before, after), *_changed_knobs(before, after)]
    for side in (before, after):
        lines += ["", *_top(side)]
    note = _NOTES.get(str(after.profile.get("device")), "")
    lines += [
        "",
        *textwrap.wrap(
            f"{note} Profiled ms include the profiler's overhead; throughput and speedup "
            "come from each run's timed window.",
            WIDTH,
        ),
    ]
    return "\n".join(lines) + "\n"


def markdown(text: str, title: str) -> str:
    """The rendered table as a markdown file (a heading and the table as a code block)."""
    return f"# {title}\n\n```\n{text}```\n"
