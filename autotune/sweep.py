"""The sweep: an Optuna study whose trials run as isolated, measured trial jobs (or replayed records).

Flow of one trial: the space suggests params -> a duplicate of a measured configuration is
answered from that measurement, an infeasible one is rejected by the space's rules, anything
else runs through the executor -> the TrialResult is stored on the Optuna trial -> told to
Optuna -> mirrored to MLflow. The Optuna storage is the truth: several workers (one per GPU,
or on several hosts through PostgreSQL) can share a study, and re-running the same command
resumes it.

How outcomes reach the sampler (Optuna's samplers learn only from COMPLETE trials):
- ok: COMPLETE with the objective values; a broken metric constraint makes it infeasible;
- oom, and configurations rejected by a feasibility rule: COMPLETE and infeasible (the value
  is a placeholder: the worst feasible value so far), so TPE/GP learn where the boundary is;
- crash, timeout, compile_error, numerics, invalid: FAIL, with status and reason as attributes;
- a trial left RUNNING by a killed sweep: FAIL, and its configuration is enqueued again.
"""

from __future__ import annotations

import logging
import os
import socket
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, Trial, TrialState

from autotune import studyio
from autotune.errors import AutotuneError
from autotune.progress import Progress
from autotune.results import Status, TrialResult
from autotune.samplers import make_sampler
from autotune.space import Space
from autotune.sqlitelock import first_open_lock
from autotune.studyio import StudyInfo, TrialKind, redact_url

__all__ = ["SweepOptions", "SweepSummary", "open_storage", "run_sweep"]

log = logging.getLogger(__name__)


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Silence Optuna's warnings about what this loop does on purpose: heartbeats outside
    study.optimize (it records them itself, see _heartbeat), and constraints told to CMA-ES."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
        # CMA-ES learns infeasible trials from the worst-value placeholder instead (see samplers.py).
        warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
        yield


HEARTBEAT_S = 10  # a worker's running trial reports in this often ...
GRACE_S = 60  # ... and is presumed dead (its config retried) after this long without a beat
DEFAULT_TRIALS = 20  # when neither the space nor the command sets a budget
MAX_SKIPS_IN_A_ROW = 100  # proposals that need no run (duplicates, rejected): the space is exhausted
INFEASIBLE_STATUSES = (Status.OOM,)  # failures that teach the sampler a boundary
Executor = Callable[[dict[str, Any], float, float | None], TrialResult]  # params, timeout, prune below


@dataclass(frozen=True)
class SweepOptions:
    """What the command line adds to a space; None means the space's own setting."""

    study_name: str | None = None
    storage: str = studyio.DEFAULT_STORAGE
    n_trials: int | None = None
    timeout_s: float | None = None
    device: str | None = None
    seed: int | None = None
    replay: Path | None = None
    tracking: bool = True
    tracking_uri: str | None = None
    memory_cap_gib: float | None = None
    remeasure_top: int = 3
    remeasure_repeats: int = 3
    patience: int | None = None  # stop after this many measured trials in a row without a new best
    prune_ratio: float = 0.5  # stop a trial after warm-up below this fraction of the best throughput; 0: never


@dataclass
class SweepSummary:
    """How a sweep ended, for the command's last lines."""

    study_name: str
    measured: int = 0
    pruned: int = 0
    failed: int = 0
    skipped: int = 0
    stop_reason: str = ""
    best_trial: int | None = None
    best_value: float | None = None
    speedup: float | None = None
    wall_s: float = 0.0
    leaderboard: str = ""


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage with worker heartbeats, so configurations of dead workers get retried."""
    if url == "memory":
        return optuna.storages.InMemoryStorage()
    engine: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine = {"connect_args": {"timeout": 60}}  # several local workers queue on the file lock
    with _quiet_optuna(), first_open_lock(url):
        try:
            return RDBStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
        except Exception as exc:  # bad URL, missing driver, unreachable server
            raise studyio.storage_error(url, exc) from exc


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _is_dead_local_worker(worker: str | None) -> bool:
    """True for a worker of this host whose process is gone (a killed sweep)."""
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextmanager
def _heartbeat(storage: optuna.storages.BaseStorage, trial_id: int) -> Iterator[None]:
    """Record heartbeats while a trial runs (Optuna does this only inside study.optimize)."""
    if not isinstance(storage, RDBStorage):
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            try:
                storage.record_heartbeat(trial_id)
            except Exception as exc:  # a database hiccup must not kill the trial
                log.debug("heartbeat failed: %s", exc)
            if stop.wait(HEARTBEAT_S):
                return

    thread = threading.Thread(target=beat, daemon=True, name="autotune-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class Sweep:
    """One worker of a study: asks, evaluates, tells, logs, until the budget or the time is spent."""

    def __init__(
        self,
        space: Space,
        options: SweepOptions,
        executor: Executor,
        progress: Progress,
        sampler: optuna.samplers.BaseSampler | None = None,
    ) -> None:
        self.space = space
        self.options = options
        self.executor = executor
        self.progress = progress
        self.name = options.study_name or space.path.stem + ("-replay" if options.replay else "")
        self.info = StudyInfo(
            workload=space.workload.name,
            preset=space.workload.preset,
            device=options.device or space.device,
            space_path=str(space.path),
            space_text=space.text,
            objectives=tuple((o.metric, o.direction) for o in space.objectives),
        )
        self.storage = open_storage(options.storage)
        seed = options.seed if options.seed is not None else space.sampler.seed
        kinds = {param.kind for param in space.params.values()}
        sampler = sampler or make_sampler(space.sampler.name, seed, kinds)
        self.study = optuna.create_study(
            storage=self.storage,
            study_name=self.name,
            directions=space.directions,
            sampler=sampler,
            load_if_exists=True,
        )
        self._check_same_study()
        # Trials numbered from here on were created while this worker runs: a single worker's own,
        # or another worker's beside it. Earlier ones (a resumed sweep's) never count as concurrent.
        self.first_new_trial = len(self.study.get_trials(deepcopy=False))
        self.budget = options.n_trials or space.budget.trials
        if self.budget is None and options.timeout_s is None and space.budget.timeout_s is None:
            self.budget = DEFAULT_TRIALS
        timeout = options.timeout_s or space.budget.timeout_s
        self.deadline = time.time() + timeout if timeout else None
        self.tracker = self._make_tracker()

    # -- set-up ---------------------------------------------------------------------------
    def _check_same_study(self) -> None:
        stored = studyio.load_study_info(self.study)
        if stored is None:
            self.study.set_user_attr(studyio.STUDY_ATTR_INFO, self.info.to_dict())
            return
        if (stored.workload, stored.preset, stored.objectives) != (
            self.info.workload,
            self.info.preset,
            self.info.objectives,
        ):
            raise AutotuneError(
                f"study {self.name!r} in {self.options.storage} was made for {stored.workload} "
                f"({stored.preset}, objectives {list(stored.objectives)}); use --study NAME for a new one"
            )

    def _make_tracker(self) -> Any:
        if not self.options.tracking:
            return None
        from autotune.tracking import SweepTracker

        return SweepTracker(self.name, self.options.tracking_uri)

    def _recover_orphans(self) -> None:
        """Fail RUNNING trials of dead local workers at once (others go stale by heartbeat)."""
        with _quiet_optuna():
            retry = RetryHeartbeatStaleTrialCallback(max_retry=3)
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if not _is_dead_local_worker(trial.user_attrs.get(studyio.ATTR_WORKER)):
                continue
            try:
                self.storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue
            retry(self.study, self.storage.get_trial(trial._trial_id))
            self.progress.message(f"trial {trial.number} was left running by a killed sweep: retrying it")
        if isinstance(self.storage, RDBStorage):
            with _quiet_optuna():
                optuna.storages.fail_stale_trials(self.study)

    def _enqueue_first_trials(self) -> None:
        """The PyTorch-default configuration first (every leaderboard shows the speedup over it);
        for a grid sampler, every point of the grid."""
        trials = self.study.get_trials(deepcopy=False)
        if not any(t.user_attrs.get(studyio.ATTR_DEFAULT) for t in trials):
            self.study.enqueue_trial(
                self.space.optuna_params(self.space.default_params()), user_attrs={studyio.ATTR_DEFAULT: True}
            )
        if self.space.sampler.name == "grid" and not trials:
            grid = self.space.grid()
            for params in grid:
                self.study.enqueue_trial(self.space.optuna_params(params), skip_if_exists=True)
            if self.budget is None or self.budget > len(grid):
                self.budget = len(grid)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        started = time.time()
        summary = SweepSummary(self.name)
        if self.tracker is not None:
            self.tracker.start(self._run_params(), self.space.path)
        self._recover_orphans()
        self._enqueue_first_trials()
        self.progress.budget, self.progress.deadline = self.budget, self.deadline
        self.progress.done = len(studyio.measured_trials(self.study))
        skips = 0
        while not (reason := self._stop_reason(skips)):
            measured = self._one_trial()
            skips = 0 if measured else skips + 1
            if isinstance(self.storage, RDBStorage):
                with _quiet_optuna():
                    optuna.storages.fail_stale_trials(self.study)
        summary.stop_reason = reason
        if not self.options.replay:  # recorded measurements would only repeat themselves
            self._remeasure_top()
        summary.wall_s = time.time() - started
        self.progress.close()
        return self._finish(summary)

    # -- a winner that holds up -----------------------------------------------------------------
    def _remeasure_top(self) -> None:
        """Measure the top k again in fresh processes; the leaderboard then ranks by their medians.

        The best of many noisy measurements is biased upwards: a configuration can lead because
        its one measurement was lucky. Re-measured medians keep such outliers from winning.
        """
        from autotune.leaderboard import leaderboard

        k, repeats = self.options.remeasure_top, self.options.remeasure_repeats
        top = [r for r in leaderboard(self.study, self.info) if r.rank is not None and r.rank <= k]
        metric = self.info.objectives[0][0]
        trials = self.study.get_trials(deepcopy=False)  # numbered 0..n-1: a trial's number is its index
        for row in top:
            trial = trials[row.trial]
            if repeats < 1 or studyio.remeasured(self.study, trial) is not None:
                continue  # done by an earlier run of this sweep, or by another worker
            self.progress.message(f"re-measuring trial {row.trial} ({repeats}x in fresh processes)")
            values = self._measure_again(studyio.trial_params(trial), metric, repeats)
            data = {"metric": metric, "values": values, "first": row.value}
            if values:
                median = statistics.median(values)
                cv = statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
                data.update(median=median, cv=cv)
                if self.tracker is not None:
                    self.tracker.add_trial_metrics(row.trial, {f"remeasured_{metric}": median, "remeasured_cv": cv})
            studyio.store_remeasured(self.study, row.trial, data)

    def _measure_again(self, params: dict[str, Any], metric: str, repeats: int) -> list[float]:
        values = []
        for _ in range(repeats):
            result = self.executor(params, self.space.budget.trial_timeout_s, None)
            if result.ok and metric in result.metrics:
                values.append(float(result.metrics[metric]))
            else:
                self.progress.message(f"  re-measurement {result.status.value}: {result.reason}")
        return values

    def _run_params(self) -> dict[str, str]:
        return {
            "space_file": str(self.space.path),
            "workload": self.info.workload,
            "preset": self.info.preset,
            "device": self.info.device,
            "sampler": self.space.sampler.name,
            "objectives": ",".join(f"{m}:{d}" for m, d in self.info.objectives),
            "storage": redact_url(self.options.storage),
        }

    def _stop_reason(self, skips: int) -> str:
        # Trials other workers are running now will count once they finish: don't start more than the budget.
        running = len(self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        if self.budget is not None and len(studyio.measured_trials(self.study)) + running >= self.budget:
            return f"budget of {self.budget} measured trials reached"
        if self.deadline is not None and time.time() >= self.deadline:
            return "sweep time limit reached"
        if self.options.patience and self._trials_since_best() >= self.options.patience:
            return f"no improvement in the last {self.options.patience} measured trials"
        if skips >= MAX_SKIPS_IN_A_ROW:
            return f"search space exhausted ({skips} proposals in a row were already measured or infeasible)"
        return ""

    def _trials_since_best(self) -> int:
        """Measured trials since the first objective last improved (feasible trials only)."""
        metric, direction = self.info.objectives[0]
        sign = 1.0 if direction == "maximize" else -1.0
        best, since = None, 0
        for trial in sorted(studyio.measured_trials(self.study), key=lambda t: t.number):
            value = studyio.feasible_value(trial, metric)
            if value is not None and (best is None or sign * value > best):
                best, since = sign * value, 0
            else:
                since += 1
        return since

    def _one_trial(self) -> bool:
        """Ask, evaluate, tell. True when the trial was measured (it counts in the budget)."""
        with _quiet_optuna():
            trial = self.study.ask()
        trial.set_user_attr(studyio.ATTR_WORKER, _worker_id())
        started = time.monotonic()
        try:
            with _heartbeat(self.storage, trial._trial_id):
                params = self.space.suggest(trial)
                trial.set_user_attr(studyio.ATTR_PARAMS, params)
                label = self._label(trial.number, params)
                self.progress.started(label)
                kind, result, source = self._evaluate(trial, params)
        except BaseException:
            with _quiet_optuna():
                self.study.tell(trial, state=TrialState.FAIL)  # bad input or an interrupt: leave nothing RUNNING
            raise
        self._record(trial, params, kind, result, source)
        self._report(label, kind, result, source, time.monotonic() - started)
        return kind is TrialKind.MEASURED

    def _label(self, number: int, params: dict[str, Any]) -> str:
        from autotune.tracking import trial_run_name

        return trial_run_name(number, params)

    def _evaluate(self, trial: Trial, params: dict[str, Any]) -> tuple[TrialKind, TrialResult, FrozenTrial | None]:
        earlier = self._measured_with(params, trial.number)
        if earlier is not None and self._by_a_concurrent_worker(earlier):
            # Workers started with the same seed propose in lockstep (TPE's random start-up ignores
            # the history): the one that collided draws from fresh entropy from now on.
            self.study.sampler.reseed_rng()
        if earlier is not None and earlier.state is TrialState.RUNNING:
            reason = f"being measured by trial {earlier.number} (another worker)"
            return TrialKind.DUPLICATE, TrialResult.failed(Status.INVALID, reason, params), None
        if earlier is not None:
            result = studyio.trial_result(earlier)
            assert result is not None
            return TrialKind.DUPLICATE, result, earlier
        feasible, rule = self.space.is_feasible(params)
        if not feasible:
            return (
                TrialKind.REJECTED,
                TrialResult.failed(Status.INVALID, f"rejected by rule: {rule}", params),
                None,
            )
        return TrialKind.MEASURED, self.executor(params, self.space.budget.trial_timeout_s, self._prune_below()), None

    def _by_a_concurrent_worker(self, trial: FrozenTrial) -> bool:
        """True for a trial another worker is running, or one another worker created since this one started.

        A single worker never sees one, so its proposals stay exactly those of its seed; a resumed
        sweep's earlier trials, orphans of a killed run included, were created before it started.
        """
        if trial.state is TrialState.RUNNING:
            return True
        return trial.number >= self.first_new_trial and trial.user_attrs.get(studyio.ATTR_WORKER) != _worker_id()

    def _prune_below(self) -> float | None:
        """The throughput under which a trial is stopped after warm-up: a fraction of the best so far."""
        metric, direction = self.info.objectives[0]
        if (
            not self.options.prune_ratio
            or metric != "throughput"
            or direction != "maximize"
            or len(self.info.objectives) > 1
        ):
            return None
        values = [
            v for t in studyio.measured_trials(self.study) if (v := studyio.feasible_value(t, metric)) is not None
        ]
        return self.options.prune_ratio * max(values) if values else None

    def _measured_with(self, params: dict[str, Any], number: int) -> FrozenTrial | None:
        """A finished measured trial with exactly these params, else one running now, else None."""

        def same(trial: FrozenTrial) -> bool:
            return trial.number != number and trial.user_attrs.get(studyio.ATTR_PARAMS) == params

        finished = self.study.get_trials(deepcopy=False, states=studyio.FINISHED_STATES)
        measured = (t for t in finished if same(t) and studyio.trial_kind(t) is TrialKind.MEASURED)
        running = (t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) if same(t))
        return next(measured, None) or next(running, None)

    # -- telling Optuna ---------------------------------------------------------------------------
    def _violation(self, kind: TrialKind, result: TrialResult) -> float | None:
        """> 0 infeasible, <= 0 feasible, None for outcomes that are told as FAIL."""
        if kind is TrialKind.REJECTED or result.status in INFEASIBLE_STATUSES:
            return 1.0
        if not result.ok:
            return None
        worst = -1.0
        for constraint in self.space.constraints:
            try:
                worst = max(worst, constraint.violation(result.metrics))
            except AutotuneError as exc:
                log.warning("constraint %r not checked: %s", constraint.text, exc)
        return worst

    def _objective_values(self, result: TrialResult) -> list[float] | None:
        try:
            return [float(result.metrics[metric]) for metric, _ in self.info.objectives]
        except (KeyError, TypeError, ValueError):
            return None

    def _placeholder_values(self) -> list[float]:
        """For infeasible trials: the worst feasible value so far, a floor the samplers never prefer."""
        feasible = [
            t.values
            for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.values and t.user_attrs.get(studyio.ATTR_VIOLATION, 0.0) <= 0
        ]
        if not feasible:
            return [0.0] * len(self.info.objectives)
        columns = list(zip(*feasible, strict=True))
        return [
            min(column) if direction == "maximize" else max(column)
            for column, (_, direction) in zip(columns, self.info.objectives, strict=True)
        ]

    def _record(
        self,
        trial: Trial,
        params: dict[str, Any],
        kind: TrialKind,
        result: TrialResult,
        source: FrozenTrial | None,
    ) -> None:
        violation = source.user_attrs.get(studyio.ATTR_VIOLATION) if source else self._violation(kind, result)
        values = self._objective_values(result) if result.ok else None
        if result.ok and values is None:
            missing = [m for m, _ in self.info.objectives if m not in result.metrics]
            result = TrialResult.failed(Status.INVALID, f"objective metric not reported: {missing}", params)
            violation = None
        stored = result.to_dict()
        stored.pop("series", None)  # per-step series go to MLflow artifacts, not the study database
        attrs: dict[str, Any] = {
            studyio.ATTR_KIND: kind.value,
            studyio.ATTR_RESULT: stored,
            studyio.ATTR_STATUS: result.status.value,
            studyio.ATTR_REASON: result.reason,
        }
        if violation is not None:
            attrs[studyio.ATTR_VIOLATION] = violation
        if source is not None:
            attrs[studyio.ATTR_DUPLICATE_OF] = source.number
        if kind is TrialKind.MEASURED and self.tracker is not None:
            run_id = self.tracker.log_trial(trial.number, result, params, tags=self._tags(trial), series=result.series)
            if run_id:
                attrs[studyio.ATTR_MLFLOW_RUN] = run_id
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        with _quiet_optuna():
            if result.status is Status.PRUNED and kind is TrialKind.MEASURED:
                self._tell_pruned(trial, result)
            elif violation is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                trial.set_constraint("feasibility", violation)  # what the samplers learn the boundary from
                self.study.tell(trial, values if values is not None else self._placeholder_values())

    def _tell_pruned(self, trial: Trial, result: TrialResult) -> None:
        """Report the warm-up steps as intermediate throughputs, then tell Optuna the trial was pruned."""
        items = float(result.metrics.get("items_per_step", 0.0))
        for step, ms in enumerate(result.series.get("warmup_ms", [])):
            if ms > 0:
                trial.report(items / (ms / 1e3), step)
        trial.set_constraint("feasibility", -1.0)
        self.study.tell(trial, state=TrialState.PRUNED)

    def _tags(self, trial: Trial) -> dict[str, str]:
        return {"autotune.default": "true"} if trial.user_attrs.get(studyio.ATTR_DEFAULT) else {}

    # -- reporting -------------------------------------------------------------------------------
    def _best_text(self) -> str:
        from autotune.leaderboard import leaderboard

        rows = [r for r in leaderboard(self.study, self.info) if r.rank == 1]
        if not rows:
            return "none yet"
        best = rows[0]
        unit = best.metrics.get("throughput_unit", "") if self.info.objectives[0][0] == "throughput" else ""
        speedup = f" ({best.speedup:.2f}x default)" if best.speedup else ""
        return f"t{best.trial:03d} {best.value:,.4g} {unit}{speedup}".replace("  ", " ")

    def _report(
        self, label: str, kind: TrialKind, result: TrialResult, source: FrozenTrial | None, seconds: float
    ) -> None:
        metric = self.info.objectives[0][0]
        if kind is TrialKind.DUPLICATE:
            outcome = f"same as trial {source.number}, not run again" if source else str(result.reason)
        elif kind is TrialKind.REJECTED:
            outcome = str(result.reason)
        elif result.ok:
            unit = result.metrics.get("throughput_unit", "") if metric == "throughput" else ""
            outcome = f"ok {metric} {result.metrics.get(metric, float('nan')):,.4g} {unit}".rstrip()
            if result.metrics.get("gpu_other_processes"):
                outcome += " (WARNING: other processes used the GPU while it was timed: not trustworthy)"
        else:
            outcome = f"{result.status.value}: {result.reason}"
        counts = studyio.tally(studyio.measured_trials(self.study))
        self.progress.finished(label, outcome, seconds, kind is TrialKind.MEASURED, counts, self._best_text())

    def _catch_up_tracking(self) -> None:
        """Log measured trials that MLflow missed (an outage, another worker that died)."""
        logged = self.tracker.logged_trial_numbers()
        if logged is None:
            return
        for trial in studyio.measured_trials(self.study):
            result = studyio.trial_result(trial)
            if trial.number not in logged and result is not None:
                self.tracker.log_trial(trial.number, result, studyio.trial_params(trial), tags=self._tags(trial))

    def _finish(self, summary: SweepSummary) -> SweepSummary:
        from autotune.leaderboard import leaderboard, render

        rows = leaderboard(self.study, self.info)
        measured = studyio.measured_trials(self.study)
        counts = studyio.tally(measured)
        summary.measured, summary.pruned, summary.failed = counts.measured, counts.pruned, counts.failed
        summary.skipped = len(self.study.get_trials(deepcopy=False)) - len(measured)
        best = next((r for r in rows if r.rank == 1), None)
        if best is not None:
            summary.best_trial, summary.best_value, summary.speedup = best.trial, best.value, best.speedup
        summary.leaderboard = render(rows, self.info, "table", 10)
        if self.tracker is not None:
            self._catch_up_tracking()
            self.tracker.finish(self._summary_metrics(summary), self._summary_artifacts(rows))
        return summary

    def _summary_metrics(self, summary: SweepSummary) -> dict[str, float]:
        metrics = {
            "trials_measured": summary.measured,
            "trials_pruned": summary.pruned,
            "trials_failed": summary.failed,
            "wall_s": summary.wall_s,
        }
        if summary.best_trial is not None:
            best = self.study.get_trials(deepcopy=False)[summary.best_trial]
            again = studyio.remeasured(self.study, best) or {}
            if "cv" in again:
                metrics["best_remeasured_cv"] = again["cv"]
        if summary.best_value is not None:
            metrics["best_value"] = summary.best_value
        if summary.speedup is not None:
            metrics["speedup_vs_default"] = summary.speedup
        return {k: float(v) for k, v in metrics.items()}

    def _summary_artifacts(self, rows: list[Any]) -> dict[str, str]:
        from autotune.export import export
        from autotune.leaderboard import render

        artifacts = {"leaderboard.csv": render(rows, self.info, "csv", None)}
        if any(r.rank == 1 for r in rows):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "best_config.yaml"
                export(self.study, self.info, path, storage=self.options.storage)  # export redacts it
                artifacts["best_config.yaml"] = path.read_text()
        return artifacts


def _trial_executor(space: Space, options: SweepOptions) -> Executor:
    from autotune.jobspec import TrialSpec
    from autotune.runner import TrialRunner

    runner = TrialRunner()
    device = options.device or space.device

    def execute(params: dict[str, Any], timeout_s: float, prune_below: float | None) -> TrialResult:
        spec = TrialSpec(
            space.workload.name,
            params,
            space.workload.preset,
            device,
            dict(space.workload.args),
            memory_cap_gib=options.memory_cap_gib,
            prune_below=prune_below,
        )
        return runner.run(spec, timeout_s)

    return execute


def _replay_executor(path: Path) -> Executor:
    from autotune.replay import ReplayRecords

    records = ReplayRecords.load(path)
    return lambda params, _timeout, _prune_below: records.lookup(params)


def run_sweep(
    space: Space,
    options: SweepOptions,
    progress: Progress | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> SweepSummary:
    """Run (or resume) the sweep of ``space`` until its budget, its time limit or exhaustion.

    ``sampler`` overrides the space's (the search benchmark compares samplers this way).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress lines say what matters
    executor = _replay_executor(options.replay) if options.replay else _trial_executor(space, options)
    progress = progress or Progress(None, None)
    return Sweep(space, options, executor, progress, sampler).run()
