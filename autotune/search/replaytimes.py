"""Replay with trial times: a replayed trial costs what its recorded trial did, compile cache and pruning included.

A replay file (:mod:`autotune.search.replay`) whose records carry ``duration_s`` is *timed*: each record says what
its trial cost on the GPU that measured it (or in the model that stands for one: ``scripts/record_model.py``),
in seconds:

- ``duration_s``: the whole trial, from its start to its record, with a fresh compile;
- ``compile_s``: the compile in it (0 for an eager configuration);
- ``cached_compile_s``: its compile when the study had compiled the same graph before
  (:func:`autotune.search.costmodel.graph_key`: a study's trials share one compile cache); default ``compile_s``;
- ``probe_s``: for a compiled configuration (or an eager one with cuDNN's algorithm search, or kernels that
  autotune), the seconds until its eager twin's throughput (``eager_probe_throughput``,
  :mod:`autotune.trial.eagerprobe`) is known: where a trial pruned before its one-off work stops; an eager record
  without it is never pruned that way (the modelled records of ``scripts/record_model.py`` give none: they model no
  kernel autotuning); ``eager_probe_autotuning_share``: for an eager one whose kernels autotune, the share of its
  probe's steps they took, which bounds their autotuning's gain as in the trial;
- ``window_s``: the timed window, which a trial pruned after its warm-up skips.

:class:`TimedReplay` answers as the sweep's trial job would: the compile is the cached one where the study
compiled the graph before; given a :class:`~autotune.trial.pruning.Pruning`, a probed configuration whose eager figure
times the most its one-off work can gain (:meth:`~autotune.trial.pruning.Pruning.one_off_gain`: the study's gain, or for
kernels' autotuning the lower of that and their share's bound) cannot reach the bound stops before that work (costing
``probe_s``), and
one whose throughput is under the bound stops after its warm-up (its duration less ``window_s``). The result
carries the trial's duration in its ``duration_s`` metric, which :attr:`TrialRecord.duration_s` reads: the
record model's figures (time shares, time to within 2%) are then the replayed ones, computed as for a real sweep.

The graphs compiled are kept by the :class:`TimedReplay` object, one per sweep process: a resumed replay
starts with an empty cache, as a sweep whose cache folder was removed would. Records without ``duration_s``
are answered as :meth:`ReplayRecords.lookup` answers them, pruning aside (the matmul records have no times).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from autotune.measurement import Status, TrialResult
from autotune.numbers import number
from autotune.records.trial import REPLAYED_DURATION
from autotune.search.costmodel import graph_key
from autotune.search.replay import ReplayRecords
from autotune.trial.pruning import KERNELS_AUTOTUNING, Pruning

__all__ = ["TIME_FIELDS", "TimedReplay"]

PROBE_DETAILS = ("eager_probe_autotuning_share", "eager_probe_steps")  # kept as the trial job keeps them

# What a timed record says of its trial's time; only duration_s and compile_s reach the result's metrics.
TIME_FIELDS = ("duration_s", "compile_s", "cached_compile_s", "probe_s", "window_s")


class TimedReplay:
    """Answers trials from ``records`` with their recorded time (module docstring)."""

    def __init__(self, records: ReplayRecords) -> None:
        self.records = records
        self.compiled: set[str] = set()  # graph keys this sweep has compiled

    def answer(self, params: Mapping[str, Any], pruning: Pruning | None = None) -> TrialResult:
        result = self.records.lookup(params)
        record = self.records.record(params)
        if record is None or not _number(record.get(REPLAYED_DURATION)):
            return result  # untimed: as before
        duration = float(record[REPLAYED_DURATION])
        if not result.ok:
            result.metrics = {REPLAYED_DURATION: duration}
            return result
        metrics = {k: v for k, v in result.metrics.items() if k not in TIME_FIELDS}
        key = graph_key(params)
        fresh = float(record.get("compile_s") or 0.0)
        compile_s = fresh
        if key is not None and key in self.compiled:
            cached = record.get("cached_compile_s")
            compile_s = float(cached) if _number(cached) else fresh
        duration += compile_s - fresh
        early = self._pruned_before_compile(params, record, metrics, pruning)
        if early is not None:
            return early
        if key is not None:
            self.compiled.add(key)
        throughput = metrics.get("throughput")
        reason = pruning.after_warmup(throughput) if pruning is not None and _number(throughput) else None
        if reason is not None:
            duration -= float(record.get("window_s") or 0.0)
            pruned = {**metrics, "compile_s": compile_s, REPLAYED_DURATION: max(duration, 0.0)}
            return self._result(Status.PRUNED, reason, params, pruned)
        return self._result(Status.OK, None, params, {**metrics, "compile_s": compile_s, REPLAYED_DURATION: duration})

    def _pruned_before_compile(
        self, params: Mapping[str, Any], record: Mapping[str, Any], metrics: Mapping[str, Any], pruning: Pruning | None
    ) -> TrialResult | None:
        """Pruned before its one-off work (a compile, cuDNN's search, the kernels' autotuning), as the trial job decides
        it (:mod:`autotune.trial.eagerprobe`): where the record was probed (``eager_probe_throughput``), an eager record
        only where it says what its probe cost (``probe_s``)."""
        eager, share = metrics.get("eager_probe_throughput"), metrics.get("eager_probe_autotuning_share")
        work = _one_off_work(params)
        if pruning is None or not _number(eager):
            return None
        unreachable = pruning.before_work(work, eager, share if _number(share) else None)
        if unreachable is None:
            return None
        if graph_key(params) is None and not _number(record.get("probe_s")):
            return None
        reason = unreachable.reason(work, f"eager {number(eager)}")
        early = {
            "throughput": unreachable.reachable,
            "eager_probe_throughput": eager,
            **{name: metrics[name] for name in PROBE_DETAILS if _number(metrics.get(name))},
            "pruned_before_compile": 1.0,
            "compile_s": 0.0,
            REPLAYED_DURATION: float(record.get("probe_s") or 0.0),
        }
        if "throughput_unit" in metrics:
            early["throughput_unit"] = metrics["throughput_unit"]
        return self._result(Status.PRUNED, reason, params, early)

    def _result(
        self, status: Status, reason: str | None, params: Mapping[str, Any], metrics: dict[str, Any]
    ) -> TrialResult:
        return TrialResult(status, reason, dict(params), metrics, self.records.env)


def _one_off_work(params: Mapping[str, Any]) -> str:
    """What a probed record's first steps paid once, in the trial job's words (a record keeps no kernel list: an
    eager one probed without cuDNN's search autotuned its kernels)."""
    if graph_key(params) is not None:
        return "compiling"
    return "cuDNN's algorithm search" if params.get("cudnn_benchmark") is True else KERNELS_AUTOTUNING


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
