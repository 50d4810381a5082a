"""A space's settings other than params: workload, objectives, budget, sampler, finalists, and their vocabularies.

Plain typed values with no validation of their own (``autotune.space.validate_settings`` builds
them from YAML), plus :func:`parse_duration`, which the CLI uses too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.knobs.inductor import to_text

__all__ = [
    "DEFAULT_TRIAL_TIMEOUT_S",
    "DEVICES",
    "DIRECTIONS",
    "METRICS",
    "SAMPLERS",
    "Budget",
    "Device",
    "Direction",
    "FinalistsSpec",
    "KernelSpec",
    "Objective",
    "SamplerSpec",
    "WorkloadSpec",
    "parse_duration",
]

Direction = Literal["maximize", "minimize"]
Device = Literal["cpu", "cuda", "auto"]

DEVICES: tuple[Device, ...] = ("cpu", "cuda", "auto")
DIRECTIONS: tuple[Direction, ...] = ("maximize", "minimize")
SAMPLERS = ("auto", "tpe", "gp", "cmaes", "random", "grid")  # auto: see autotune.search.samplers
# What a trial reports; constraints may also name others (kernel and replay workloads add theirs).
METRICS = (
    "throughput", "step_ms_p50", "step_ms_p90", "step_cv", "peak_mem_gib", "compile_s",
    "energy_j_per_sample", "power_w_mean", "gpu_util_mean", "overhead_s", "tflops", "mfu",
)  # fmt: skip
DEFAULT_TRIAL_TIMEOUT_S = 600.0

_DURATION = re.compile(r"(?:(\d+(?:\.\d*)?)h)?(?:(\d+(?:\.\d*)?)m)?(?:(\d+(?:\.\d*)?)s)?")


@dataclass(frozen=True)
class Objective:
    """One metric of a trial's result to optimise."""

    metric: str
    direction: Direction


@dataclass(frozen=True)
class Budget:
    """How long a sweep runs: a trial count and/or wall time, and the limit for each trial."""

    trials: int | None = None
    timeout_s: float | None = None
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S


@dataclass(frozen=True)
class SamplerSpec:
    """The Optuna sampler by name (tpe, gp, cmaes, random, grid), its seed, and whether it proposes by expected
    improvement per predicted second of trial (``cost_aware``, :mod:`autotune.search.costaware`; None: the default,
    on for TPE, ``tpe`` or what ``auto`` resolves to, off for the others)."""

    name: str = "auto"
    seed: int | None = None
    cost_aware: bool | None = None


@dataclass(frozen=True)
class FinalistsSpec:
    """The ``finalists:`` stage: after the search, its ``top`` configurations re-tried with Inductor's
    expensive options (``inductor``, typed by :mod:`autotune.knobs.inductor`) and/or another ``compile_mode``."""

    top: int = 1
    compile_mode: str | None = None
    inductor: dict[str, bool | str] = field(default_factory=dict)

    def knob_overrides(self) -> dict[str, Any]:
        """The knob params a finalist runs with in place of its search configuration's."""
        overrides: dict[str, Any] = {}
        if self.compile_mode is not None:
            overrides["compile_mode"] = self.compile_mode
        if self.inductor:
            overrides["inductor"] = to_text(self.inductor)
        return overrides


@dataclass(frozen=True)
class WorkloadSpec:
    """The workload to train: built-in name or ``package.module:function``, preset, fixed args."""

    name: str
    preset: str = "full"
    args: dict[str, Any] = field(default_factory=dict)


def parse_duration(text: str | int | float) -> float:
    """Seconds in a duration: ``90``, ``"90s"``, ``"30m"``, ``"8h"``, ``"1h30m"``, ``"1.5h"``."""
    bad = AutotuneError(f"duration {text!r} is not valid: use seconds or a form like 90s, 30m, 8h, 1h30m")
    if isinstance(text, bool):
        raise bad
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        compact = str(text).strip().lower().replace(" ", "")
        try:
            seconds = float(compact)
        except ValueError:
            match = _DURATION.fullmatch(compact)
            if not compact or match is None:
                raise bad from None
            hours, minutes, secs = (float(g or 0) for g in match.groups())
            seconds = hours * 3600 + minutes * 60 + secs
    if not math.isfinite(seconds) or seconds <= 0:
        raise AutotuneError(f"duration {text!r} is not valid: it must be a positive time")
    return seconds


@dataclass(frozen=True)
class KernelSpec:
    """A Triton kernel the space lists (``kernels:``): its import path and the params it contributes.

    ``alias`` is the kernel's name in params (``fused_add`` for an autotuned kernel's one param,
    ``fused_add.BLOCK_SIZE`` ... for a declared kernel's). A declared kernel's ``rule`` is over its
    own names; ``fixed`` holds its settings that have one value (they are not params).
    """

    path: str
    alias: str
    params: tuple[str, ...]
    rule: Expression | None = None
    fixed: dict[str, Any] = field(default_factory=dict)

    def values(self, params: dict[str, Any]) -> dict[str, Any]:
        """This kernel's values in ``params``, by their plain names, fixed ones included."""
        prefix = f"{self.alias}."
        return {**self.fixed, **{k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}}
