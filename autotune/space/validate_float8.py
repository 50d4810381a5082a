"""Validating float8 in a space: the ``float8_filter:`` key, float8's pairing with precision, and what this machine
needs to run it (:func:`machine_problems`).

``float8_filter:`` (a mapping: ``include``, ``exclude``, lists of module-name patterns) becomes a fixed param of the
same name, present where ``float8`` converts (its ``when``), so every float8 trial carries the filter in its params to
its record, ``autotune export`` and ``cfg.apply()`` (:mod:`autotune.knobs.float8`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.errors import AutotuneError
from autotune.knobs import float8
from autotune.space.params import ParamSpec, _member
from autotune.space.problems import _INVALID, _Report, _show_type
from autotune.space.searchspace import Space

__all__ = ["machine_problems"]

KEY = "float8_filter"


def _recipes(params: Mapping[str, ParamSpec]) -> tuple[str, ...]:
    """The float8 recipes a space's trials may convert with (none: never)."""
    spec = params.get("float8")
    return tuple(str(choice) for choice in (spec.choices or ()) if choice != "none") if spec is not None else ()


def _float8_filter(data: Mapping[str, Any], params: Mapping[str, ParamSpec] | None, report: _Report) -> Any:
    """The ``float8_filter:`` key as a fixed param active where float8 converts; None when absent, _INVALID
    (reported) when wrong."""
    raw = data.get(KEY)
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        report.add(KEY, f"expected {{include: [patterns], exclude: [patterns]}}, got {_show_type(raw)}")
        return _INVALID
    try:
        text = float8.LayerFilter.read(raw).to_text()
    except AutotuneError as exc:
        report.add(KEY, str(exc).removeprefix(f"{KEY}: "))
        return _INVALID
    if text is None:
        report.add(KEY, "no patterns: give include: or exclude: a list of module names, e.g. ['*.mlp.*']")
        return _INVALID
    if params is None:
        return _INVALID  # the params section's own problems are reported
    recipes = _recipes(params)
    if not recipes:
        report.add(KEY, "the space never trains in float8: add params.float8 (e.g. [none, tensorwise])")
        return _INVALID
    return ParamSpec(KEY, "fixed", (text,), default=text, when={"float8": recipes})


def _check_float8(params: Mapping[str, ParamSpec], report: _Report) -> None:
    """float8 only where precision is bf16: together with another they are an invalid combination
    (:meth:`autotune.knobs.Knobs.check_combination`), and every trial the sampler drew so would fail."""
    if KEY in params:
        report.add(f"params.{KEY}", f"the layer filter is not searched: set it with the space's {KEY}: key")
    if not _recipes(params):
        return
    spec, precision = params["float8"], params.get("precision")
    if precision is None or not _member("bf16", precision.choices or ()):
        report.add(
            "params.float8",
            "float8 needs precision bf16, which this space never chooses: declare precision before it with bf16 "
            "and add when: {precision: [bf16]}",
        )
        return
    others = [p for p in precision.choices or () if p != "bf16"]
    if any(_member(p, spec.when.get("precision", others)) for p in others):
        report.add("params.float8", "float8 with a precision other than bf16 is an invalid combination: add when: "
                   "{precision: [bf16]}")  # fmt: skip


def machine_problems(space: Space, device: str | None = None) -> list[str]:
    """What this machine lacks to run ``space``'s float8 trials on ``device`` (default: the space's), one
    ``FILE: params.float8: problem`` line each: torchao, or FP8 on the GPU. The GPU is asked through NVML, never
    CUDA; a GPU NVML cannot see (a CPU-only machine asked for ``cuda``) is the trial's own to refuse."""
    if not _recipes(space.params):
        return []
    report = _Report(str(space.path))
    missing = float8.torchao_missing()
    if missing is not None:
        report.add("params.float8", missing)
    target = device or space.device
    if target != "cpu" and (lacking := float8.nvml_lacks_float8("cuda" if target == "auto" else target)) is not None:
        report.add("params.float8", lacking)
    return report.problems
