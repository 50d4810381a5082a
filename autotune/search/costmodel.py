"""What a trial will cost, in seconds of GPU time, predicted from the study's own trials.

A trial's time is its run (start-up, warm-up, the timed window: it grows with the step time) plus, for a
compiled configuration, its compile, which dominates real sweeps (H100: 57% of a GPT-2 sweep's trial time,
56% of a ResNet-50 sweep's; BENCHMARKS.md). Both parts are fitted, in log seconds, by
:func:`autotune.search.surrogate.fit_linear` over the study's measured trials (their :attr:`TrialRecord.duration_s`
and :attr:`TrialRecord.compile_s`, the record model's figures):

- the run: every measured trial's duration less its compile;
- a fresh compile: the compile of each compiled graph's first trial in the study;
- the compile cache: a study's trials compile into one cache folder (:mod:`autotune.compilecache`), so a
  configuration whose graph the study compiled already (:func:`graph_key`) compiles in a fraction of the
  time: the median of that fraction over the study's own repeats of a graph, else :data:`PRIOR_HIT_FRACTION`.
  A graph compiled ahead of its trial (:mod:`autotune.sweep.proposals.compile_ahead`) is in that folder too: its first
  trial is a repeat, and the compile ahead (``TrialCost.ahead_s``) is the graph's fresh compile. A graph still being
  compiled ahead costs the rest of that compile (its trial waits for it: GPU time) and then a repeat, so the
  search measures something else meanwhile unless it is worth the wait. A compile ahead that has run past its
  predicted compile has :data:`OVERRUN_REST_FRACTION` of the time it has run left (:meth:`CostModel.seconds`).

Before the study has compiled anything a compile is priced at :data:`PRIOR_COMPILE_S`.

Which knobs leave the compiled graph as it is (:data:`GRAPH_NEUTRAL_KNOBS`) is declared, not learnt: the
fused optimizer (torch.compile compiles the model, not the optimizer step), the cuDNN flags (an algorithm
choice at run time) and the data path. Measured on an H100 (torch 2.11): GPT-2 with the fused optimizer
after the same configuration without it compiled in 2.1 s instead of 17.0 s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from optuna.distributions import BaseDistribution

from autotune.measurement import AHEAD_METRIC
from autotune.records import TrialRecord, params_key
from autotune.records.trial import finite
from autotune.search.surrogate import Encoding, LinearModel, fit_linear

__all__ = [
    "COST_PRIOR_SD",
    "GRAPH_NEUTRAL_KNOBS",
    "OVERRUN_REST_FRACTION",
    "PRIOR_COMPILE_S",
    "PRIOR_HIT_FRACTION",
    "CostModel",
    "Seconds",
    "StudyPricer",
    "TrialCost",
    "compiles",
    "graph_key",
    "pays_one_off_work",
]

GRAPH_NEUTRAL_KNOBS = frozenset(
    {
        "fused_optimizer",
        "cudnn_benchmark",
        "cudnn_deterministic",
        "num_workers",
        "prefetch_factor",
        "persistent_workers",
        "pin_memory",
        "non_blocking",
        "gpu_prefetch",
    }
)
# A compile before the study has timed one: full models compiled in 25-37 s on an H100 (GPT-2 124M, ViT-B/16,
# ResNet-50; DESIGN.md, BENCHMARKS.md).
PRIOR_COMPILE_S = 30.0
# A compile from the study's cache, as a fraction of the fresh one, before the study has repeated a graph:
# GPT-2 on an H100, 2.1 / 17.0 and 2.4 / 25.1 s (BENCHMARKS.md "The compile cache"; a third, 2.3 / 17.9, was fp16
# served bf16's graph by torch 2.11's AOTAutograd cache, not a hit of the same graph: autotune.trial.compilecache).
PRIOR_HIT_FRACTION = 0.12
MIN_RUN_S = 0.5  # a run time never predicted below this (start-up alone takes longer)
# The prior spread of one knob value's effect on a trial's log seconds: a factor of e^0.5 = 1.65 either way before the
# study has timed it (chosen on the modelled GPT-2 records, BENCHMARKS.md "A search that counts GPU seconds").
COST_PRIOR_SD = 0.5
# The rest of a compile ahead that has run past its predicted compile, as a fraction of the time it has run: the
# prediction was wrong, and compiles ahead of one model spread widely (on an H100: GPT-2's 25-32 s, ResNet-50's
# 42-56 s, while a compile is priced at PRIOR_COMPILE_S until the study has timed one). Half: when its informed start
# was proposed, GPT-2's compile ahead had run 21 s of 31.7 (10 s left; this predicts 10.5 s) and ResNet-50's 14 s of
# 44.9 (31 s left; this predicts 16.4 s, the prior 30 s less 14; BENCHMARKS.md).
OVERRUN_REST_FRACTION = 0.5


def compiles(params: Mapping[str, Any]) -> bool:
    """Whether the configuration runs under ``torch.compile``."""
    return params.get("compile_mode", "none") not in (None, "none")


def pays_one_off_work(params: Mapping[str, Any]) -> bool:
    """Whether the first steps of ``params`` do work a trial's eager probe skips: a compile, or cuDNN's algorithm
    search (:mod:`autotune.trial.eagerprobe`)."""
    return compiles(params) or params.get("cudnn_benchmark") is True


def graph_key(params: Mapping[str, Any]) -> str | None:
    """What decides the graph a configuration compiles (its params but the graph-neutral knobs); None when eager.

    Two configurations with the same key share the study's compile cache: the second compiles in seconds.
    """
    if not compiles(params):
        return None
    return params_key({k: v for k, v in params.items() if k not in GRAPH_NEUTRAL_KNOBS})


class Seconds(NamedTuple):
    """Predicted seconds of trials: each trial's whole, and the part of it spent waiting for a compile ahead."""

    trial: np.ndarray
    waiting: np.ndarray


@dataclass(frozen=True)
class TrialCost:
    """One measured trial's cost: its params, its duration and the compiling part of it, in seconds."""

    params: Mapping[str, Any]
    duration_s: float
    compile_s: float = 0.0
    ahead_s: float | None = None  # its graph was compiled ahead of it, in this many seconds (None: it was not)


@dataclass
class CostModel:
    """Predicted seconds of a trial, fitted by :meth:`fit` (see the module docstring)."""

    encoding: Encoding
    run: LinearModel
    fresh_compile: LinearModel | None  # None: no compile timed yet, PRIOR_COMPILE_S
    hit_fraction: float
    compiled: frozenset[str] = field(default_factory=frozenset)  # graph keys the study has compiled
    compiling: Mapping[str, float] = field(default_factory=dict)  # graph key -> seconds its compile ahead has run

    @classmethod
    def fit(
        cls,
        trials: Sequence[TrialCost],
        distributions: Mapping[str, BaseDistribution],
        *,
        use_cache: bool = True,
        prior_sd: float = COST_PRIOR_SD,
        compiled_ahead: Collection[str] = (),
        compiling_ahead: Mapping[str, float] | None = None,
    ) -> CostModel:
        """The model of ``trials`` (the study's measured trials, in the order they ran) over ``distributions``.

        ``use_cache=False`` prices every compile as fresh (the benchmark's control: is the cache worth knowing?);
        ``prior_sd`` is the prior spread of one knob value's effect on the log seconds; ``compiled_ahead``: graph
        keys compiled ahead that no trial has run yet (in the cache all the same); ``compiling_ahead``: graph keys
        being compiled ahead, with the seconds each compile has run so far.
        """
        encoding = Encoding(distributions)
        variance = prior_sd**2

        def log_fit(data: Sequence[tuple[Mapping[str, Any], float]]) -> LinearModel:
            return fit_linear(
                encoding.matrix([p for p, _ in data]), [math.log(s) for _, s in data], variance, standardise=False
            )

        runs = [(t.params, max(t.duration_s - t.compile_s, MIN_RUN_S)) for t in trials]
        run = log_fit(runs)
        first: dict[str, float] = {}  # graph -> its first compile
        fresh: list[tuple[Mapping[str, Any], float]] = []
        hits: list[float] = []
        for trial in trials:
            key = graph_key(trial.params)
            if key is None or trial.compile_s <= 0:
                continue  # eager, or pruned before it compiled
            if key not in first and trial.ahead_s is not None:  # compiled ahead: that was the graph's fresh compile
                first[key] = trial.ahead_s
                fresh.append((trial.params, trial.ahead_s))
            if key in first:
                hits.append(trial.compile_s / first[key])
            else:
                first[key] = trial.compile_s
                fresh.append((trial.params, trial.compile_s))
        fresh_model = log_fit(fresh) if fresh else None
        fraction = min(1.0, statistics.median(hits)) if hits else PRIOR_HIT_FRACTION
        compiled = frozenset(first) | frozenset(compiled_ahead) if use_cache else frozenset()
        compiling = dict(compiling_ahead or {}) if use_cache else {}  # a compiled key is priced as compiled first
        return cls(encoding, run, fresh_model, fraction if use_cache else 1.0, compiled, compiling)

    def predict(self, configurations: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Predicted seconds of a trial of each configuration (the exponent of the predicted log seconds, as Snoek
        et al. predict a duration), given what the study has compiled."""
        return self.seconds(configurations).trial

    def seconds(self, configurations: Sequence[Mapping[str, Any]]) -> Seconds:
        """:meth:`predict`'s seconds, with the part of each spent waiting for the rest of its graph's compile ahead
        (0 where its graph is not being compiled ahead)."""
        rows = self.encoding.matrix(configurations)
        seconds = np.maximum(np.exp(self.run.predict(rows)[0]), MIN_RUN_S)
        waiting = np.zeros(len(configurations))
        if self.fresh_compile is not None:
            fresh = np.exp(self.fresh_compile.predict(rows)[0])
        else:
            fresh = np.full(len(configurations), PRIOR_COMPILE_S)
        for i, params in enumerate(configurations):
            key = graph_key(params)
            if key is None:
                continue
            if key in self.compiled:
                seconds[i] += fresh[i] * self.hit_fraction
            elif key in self.compiling:  # the wait for the compile ahead to end, then a repeat from the cache
                ran = self.compiling[key]
                waiting[i] = max(fresh[i] - ran, OVERRUN_REST_FRACTION * ran)
                seconds[i] += waiting[i] + fresh[i] * self.hit_fraction
            else:
                seconds[i] += fresh[i]
        return Seconds(seconds, waiting)


@dataclass
class StudyPricer:
    """Prices trials as a study stands: a :class:`CostModel` of its measured trials, knowing what is compiled ahead.

    ``use_cache``: whether the model knows the study's compile cache (False prices every compile as fresh);
    ``prior_sd``: the prior spread of one knob value's effect on the log seconds; ``compiled_ahead``: the
    configurations whose graphs were compiled ahead of their trials (priced as compiled), ``compiling_ahead``: those
    being compiled ahead, with the seconds each compile has run (priced at the rest of it, then a repeat); both set
    by a sweep that compiles ahead (:mod:`autotune.sweep.proposals.compile_ahead`), in the configurations' encoding as
    priced here.
    """

    use_cache: bool = True
    prior_sd: float = COST_PRIOR_SD
    compiled_ahead: Callable[[], Sequence[Mapping[str, Any]]] = tuple
    compiling_ahead: Callable[[], Sequence[tuple[Mapping[str, Any], float]]] = tuple

    def model(
        self, measured: Sequence[tuple[Mapping[str, Any], TrialRecord]], distributions: Mapping[str, BaseDistribution]
    ) -> CostModel:
        """The cost model of ``measured`` (each trial's params and record, in the order they ran) over
        ``distributions``, with what is compiled and compiling ahead now."""
        costs = [
            TrialCost(params, record.duration_s, record.compile_s, finite(record.first_metrics.get(AHEAD_METRIC)))
            for params, record in measured
        ]
        return CostModel.fit(
            costs,
            distributions,
            use_cache=self.use_cache,
            prior_sd=self.prior_sd,
            compiled_ahead={key for params in self.compiled_ahead() if (key := graph_key(params)) is not None},
            compiling_ahead={key: s for params, s in self.compiling_ahead() if (key := graph_key(params)) is not None},
        )
