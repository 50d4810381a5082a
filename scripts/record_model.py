"""Modelled replay records for GPT-2 and ResNet-50, fitted on real H100 trials: a stand-in for search comparisons.

    python scripts/record_model.py extract --storage-dir /work/gpu_runs -o scripts/data/h100_trials.json
    python scripts/record_model.py extract --storage-dir /work/gpu_runs -o scripts/data/h100_sweep_trials.json \
        --study resnet50_before_20=rn_before:resnet50 --study gpt2_after_98fc5f3=gpt2_after2:gpt2 --what "..."
    python scripts/record_model.py fit gpt2 -o scripts/data/gpt2_h100_modelled.json
    python scripts/record_model.py fit resnet50 -o scripts/data/resnet50_h100_modelled.json
    python scripts/record_model.py validate gpt2 --records scripts/data/gpt2_h100_modelled.json

A replay needs an answer for every configuration a sampler may propose, and the real sweeps measured 21
(GPT-2, 120 configurations) and 13 + 11 (ResNet-50, 960). So the records of ``fit`` are a MODEL, fitted
on those real trials (``extract`` keeps them in ``scripts/data/h100_trials.json``), labelled as such in
the file (``what``, ``model``), and meant for one use: comparing search strategies by the GPU time
they take to a configuration within 2% of the best (``scripts/cost_benchmark.py``). Real trials do not
stand in it as themselves: every record, measured configurations included, is the model's.

The model, per workload (the fit errors are printed and written to the file):

- throughput: log-linear over one column per knob value, one per precision class (GPT-2: default and
  fp32 are strict fp32; ResNet-50: default uses cuDNN's TF32, as tf32 does; bf16 and fp16 are low
  precision), the class times compiling (compiling gains more in low precision) and, for ResNet-50,
  the batch times compiling; fitted (:func:`autotune.search.surrogate.fit_linear`) on every real throughput:
  ok trials, trials pruned after warm-up (their warm-up figure), and each compiled trial's eager probe
  (a real measurement of the same knobs run eager);
- peak memory: log-linear over the knob values and the log batch, on the same trials and the OOM trial (what it
  held plus what it asked for, from PyTorch's message: a lower bound); a configuration whose peak exceeds
  ``oom_gib``, the H100's 79.2 GiB, is an OOM (GPT-2 at batch 64 in eager fp32 asked for 87.1 GiB);
- a trial's time, from the measuring rules (``autotune/trial/trialspec.py``: warm-up, then at least 30 steps
  and 3 s; ``autotune/trial/eagerprobe.py``: 5 eager steps before a compile) and the model's step time
  (items per step / throughput), plus fitted parts: the fixed cost of an eager and of a compiled trial
  (medians of what the real trials took beyond their steps and compile), the fresh compile (log-linear
  over the graph's knobs, on each graph's first compile), cuDNN's algorithm search in eager trials
  with ``cudnn_benchmark`` (median by precision class), the compile from the study's cache (the real
  hits' median fraction of a fresh compile, plus the cuDNN search, which a new process repeats), and
  the start-up of a sweep's first trial (the real default trial's), added to the default configuration.

``validate`` replays a real sweep's own sequence of configurations through the model
(:class:`autotune.search.replaytimes.TimedReplay`, pruning as the sweep decides it) and sets the modelled
trial times and time to within 2% beside the real ones: where the model and the GPU overlap.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.measurement import Status, TrialResult
from autotune.records import params_key
from autotune.search.costmodel import compiles, graph_key
from autotune.search.replay import ReplayRecords
from autotune.search.replaytimes import TimedReplay
from autotune.search.surrogate import LinearModel, fit_linear
from autotune.space import load_space
from autotune.sweep.proposals.compile_pruning import compile_gain_bound
from autotune.trial.eagerprobe import PROBE_STEPS
from autotune.trial.pruning import Pruning
from autotune.trial.trialspec import MeasureSettings

REPO = Path(__file__).resolve().parent.parent
TRIALS = REPO / "scripts" / "data" / "h100_trials.json"
GPU = MeasureSettings().for_device("cuda")
MIN_STEPS, MIN_TIME_S = int(GPU.min_steps or 30), float(GPU.min_time_s or 3.0)
LOW_PRECISION = ("bf16", "fp16")
PRUNE_RATIO = 0.5  # the sweep's default (SweepOptions.prune_ratio)
OUTLIER_COMPILE = 0.3  # a graph's first compile under this fraction of the median first compile: a cache hit


@dataclass(frozen=True)
class Workload:
    """What the model of one workload needs: its studies, its space, how its knobs group."""

    studies: tuple[str, ...]
    space: Path
    items_per_sample: int
    classes: Mapping[str, str]  # precision -> precision class
    batch_by_compile: bool  # the batch times compiling as a column of the throughput model
    oom_gib: float = 79.18  # the H100's memory (torch.cuda.get_device_properties: 79.18 GiB)
    unit: str = "samples/s"


WORKLOADS = {
    "gpt2": Workload(
        ("gpt2",),
        REPO / "scripts" / "data" / "gpt2_h100_space.yaml",
        1024,
        {"default": "fp32", "fp32": "fp32", "tf32": "tf32", "bf16": "low", "fp16": "low"},
        batch_by_compile=False,
        unit="tokens/s",
    ),
    "resnet50": Workload(
        ("resnet50", "resnet50_memcap"),
        REPO / "search_spaces" / "resnet50.yaml",
        1,
        {"default": "tf32", "fp32": "fp32", "tf32": "tf32", "bf16": "low", "fp16": "low"},
        batch_by_compile=True,
        unit="images/s",
    ),
}

# --- extract ----------------------------------------------------------------------------------------------

KEPT_METRICS = (
    "throughput",
    "peak_mem_gib",
    "eager_probe_throughput",
    "compile_s",
    "setup_s",
    "startup_s",
    "window_s",
    "warmup_steps",
    "step_ms_p50",
    "first_step_s",
    "pruned_before_compile",
    "compile_wall_s",
    "compile_inductor_s",
    "compile_kernel_wait_s",
    "compiled_ahead_s",
    "compile_ahead_wait_s",
    "kernel_autotune_s",
    "kernel_autotune_compile_s",
)


# What ``extract`` reads by default: (key in the file, folder under --storage-dir, study name in its autotune.db).
STUDIES = (
    ("gpt2", "gpt2_before", "gpt2"),
    ("resnet50", "resnet50_before", "resnet50"),
    ("resnet50_memcap", "memcap", "resnet50_memcap"),
)
WHAT = "real measured trials, H100, torch 2.11 (BENCHMARKS.md)"


def extract(storage_dir: Path, studies: Sequence[tuple[str, str, str]] = STUDIES, what: str = WHAT) -> dict[str, Any]:
    """The measured trials of real studies: by default ``<dir>/gpt2_before``, ``resnet50_before``, ``memcap``."""
    import optuna

    from autotune.records import StudyRecords, load_study_info

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out: dict[str, Any] = {"what": what, "studies": {}}
    for key, folder, name in studies:
        study = optuna.load_study(study_name=name, storage=f"sqlite:///{storage_dir / folder / 'autotune.db'}")
        info = load_study_info(study)
        assert info is not None
        records = StudyRecords(study, info.objectives)
        rows = []
        for record in records.measured:
            metrics = record.first_metrics
            rows.append(
                {
                    "number": record.number,
                    "params": record.params,
                    "outcome": record.outcome,
                    "started": record.started.isoformat() if record.started else None,
                    "duration_s": round(record.duration_s, 3),
                    "compile_s": round(record.compile_s, 3),
                    "default": record.default,
                    "finalist_of": record.finalist_of,
                    "reason": record.reason if not record.ok else None,
                    "metrics": {k: metrics[k] for k in KEPT_METRICS if k in metrics},
                }
            )
        env = records.measured[0].result.env if records.measured and records.measured[0].result else {}
        out["studies"][key] = {"env": env, "trials": rows}
    return out


# --- the model ----------------------------------------------------------------------------------------------


# What an effect is believed to be before the data: the prior's standard deviation, in log units, by column.
# Precision classes differ by integer factors; the fused optimizer and cuDNN's benchmark move a step by a few %.
# A compile mode against another, the fused optimizer and cuDNN's benchmark move a step by a few %; compiling at
# all, by up to 2.5x (ResNet-50 bf16, contiguous); precision classes by integer factors.
PRIOR_SD = {
    "class": 1.0,
    "log2_batch": 1.0,
    "compiled": 0.5,
    "precision": 0.1,
    "batch_size": 0.3,
    "memory_format": 0.3,
    "&compiled": 0.3,
    "cudnn_benchmark": 0.1,
    "compile_mode": 0.05,
    "fused_optimizer": 0.05,
}


def prior_sd(column: str) -> float:
    """The prior's standard deviation of a column's effect (:data:`PRIOR_SD`, by the column's kind)."""
    if column.endswith("&compiled"):
        return PRIOR_SD["&compiled"]
    return PRIOR_SD[column.split("=")[0]]


# Knobs whose effect on throughput is the compiler's business once it compiles: Inductor picks its own layouts and
# kernels, so eager's penalty for bf16 on contiguous ResNet-50 convolutions (2,243 images/s against fp16
# channels_last's 4,891) is gone compiled (5,574 against 5,843). Compiled configurations get their own columns.
COMPILER_DECIDES = ("precision", "memory_format")


def _columns(params: Mapping[str, Any], workload: Workload, kind: str) -> dict[str, float]:
    """The columns of one configuration for the ``kind`` of figure (throughput, memory, compile): one per knob
    value (a compile mode's among compiled ones) and one per precision class; for throughput and memory, compiling
    and what it changes by class (and for throughput by batch, ResNet-50, with precision and memory format apart
    once compiled); for memory the log batch; for a compile, no fused optimizer (it is not compiled)."""
    compiled = compiles(params)
    cols: dict[str, float] = {}
    for name, value in params.items():
        if (name == "compile_mode" and not compiled) or (kind == "compile" and name == "fused_optimizer"):
            continue
        apart = kind == "throughput" and compiled and name in COMPILER_DECIDES
        cols[f"{name}={value!r}" + ("&compiled" if apart else "")] = 1.0
    klass = workload.classes[params["precision"]]
    cols[f"class={klass}"] = 1.0
    if compiled and kind != "compile":
        cols["compiled"] = 1.0
        cols[f"class={klass}&compiled"] = 1.0
        if kind == "throughput" and workload.batch_by_compile:
            cols[f"batch_size={params['batch_size']}&compiled"] = 1.0
    if kind == "memory":
        cols["log2_batch"] = math.log2(params["batch_size"]) - 7  # memory grows with the batch
    return cols


@dataclass
class LogLinear:
    """A log-linear fit over named columns, with its errors."""

    names: list[str]
    model: LinearModel
    columns: Callable[[Mapping[str, Any]], dict[str, float]]
    observations: int
    configurations: int
    rmse_in: float  # in log units
    rmse_loco: float  # leave one configuration out

    def predict(self, params: Mapping[str, Any]) -> float:
        row = np.array([[self.columns(params).get(n, 0.0) for n in self.names]])
        return float(math.exp(self.model.predict(row)[0][0]))

    def errors(self) -> dict[str, Any]:
        pct = lambda e: round(100 * (math.exp(e) - 1), 1)  # noqa: E731
        return {
            "observations": self.observations,
            "configurations": self.configurations,
            "rms_error_pct_in_sample": pct(self.rmse_in),
            "rms_error_pct_leave_one_configuration_out": pct(self.rmse_loco),
        }


def fit_log_linear(
    data: Sequence[tuple[Mapping[str, Any], float]], columns: Callable[[Mapping[str, Any]], dict[str, float]]
) -> LogLinear:
    """Fit log(value) on ``columns``, with the in-sample and leave-one-configuration-out RMS errors (log units)."""
    names = sorted({n for params, _ in data for n in columns(params)})

    def matrix(rows: Sequence[tuple[Mapping[str, Any], float]]) -> np.ndarray:
        return np.array([[columns(p).get(n, 0.0) for n in names] for p, _ in rows])

    logs = [math.log(v) for _, v in data]
    prior = [prior_sd(n) ** 2 for n in names]
    model = fit_linear(matrix(data), logs, prior, standardise=False)
    inside = model.predict(matrix(data))[0] - np.array(logs)
    keys = [params_key(p) for p, _ in data]
    errors: list[float] = []
    for key in sorted(set(keys)):
        train = [row for row, k in zip(data, keys, strict=True) if k != key]
        test = [row for row, k in zip(data, keys, strict=True) if k == key]
        if not train:
            continue
        held = fit_linear(matrix(train), [math.log(v) for _, v in train], prior, standardise=False)
        errors += list(held.predict(matrix(test))[0] - np.log([v for _, v in test]))
    rms = lambda e: float(math.sqrt(np.mean(np.square(e)))) if len(e) else float("nan")  # noqa: E731
    return LogLinear(names, model, columns, len(data), len(set(keys)), rms(inside), rms(np.array(errors)))


@dataclass
class RecordModel:
    """The fitted model of one workload (module docstring); :meth:`record` answers any configuration."""

    workload: Workload
    throughput: LogLinear
    memory: LogLinear
    compile: LogLinear
    overhead_eager_s: float
    overhead_compiled_s: float
    overhead_probe_s: float
    cudnn_search_s: dict[str, float]
    hit_fraction: float
    startup_s: float
    oom_s: float
    warmup_steps: float
    notes: list[str] = field(default_factory=list)

    def step_s(self, params: Mapping[str, Any]) -> float:
        return params["batch_size"] * self.workload.items_per_sample / self.throughput.predict(params)

    def window_s(self, params: Mapping[str, Any]) -> float:
        return max(MIN_TIME_S, MIN_STEPS * self.step_s(params))

    def steps_s(self, params: Mapping[str, Any]) -> float:
        return self.warmup_steps * self.step_s(params) + self.window_s(params)

    def cudnn_s(self, params: Mapping[str, Any]) -> float:
        if not params.get("cudnn_benchmark"):
            return 0.0
        klass = self.workload.classes[params["precision"]]
        return self.cudnn_search_s.get(klass, statistics.median(self.cudnn_search_s.values()))

    def record(self, params: Mapping[str, Any], default: bool = False) -> dict[str, Any]:
        startup = self.startup_s if default else 0.0
        memory = self.memory.predict(params)
        if memory > self.workload.oom_gib:
            error = f"modelled: peak memory {memory:.1f} GiB is above {self.workload.oom_gib:.1f} GiB"
            return {"params": dict(params), "status": "oom", "error": error, "duration_s": _r(self.oom_s + startup)}
        record: dict[str, Any] = {
            "params": dict(params),
            "status": "ok",
            "throughput": _r(self.throughput.predict(params)),
            "throughput_unit": self.workload.unit,
            "peak_mem_gib": _r(memory),
            "window_s": _r(self.window_s(params)),
        }
        if not compiles(params):
            duration = self.overhead_eager_s + self.cudnn_s(params) + self.steps_s(params)
            return {**record, "duration_s": _r(duration + startup), "compile_s": 0.0}
        eager = {**params, "compile_mode": "none"}
        # The eager probe runs out of memory where eager does: no estimate, and the trial compiles (eagerprobe.py).
        eager_fits = self.memory.predict(eager) <= self.workload.oom_gib
        probe = PROBE_STEPS * self.step_s(eager) if eager_fits else 0.0
        fresh = self.compile.predict(params)
        cached = self.hit_fraction * max(fresh - self.cudnn_s(params), 0.0) + self.cudnn_s(params)
        duration = self.overhead_compiled_s + probe + fresh + self.steps_s(params)
        record |= {
            "duration_s": _r(duration + startup),
            "compile_s": _r(fresh),
            "cached_compile_s": _r(min(cached, fresh)),
            "probe_s": _r(self.overhead_probe_s + probe),
        }
        if eager_fits:
            record["eager_probe_throughput"] = _r(self.throughput.predict(eager))
        return record

    def describe(self) -> dict[str, Any]:
        return {
            "throughput": self.throughput.errors(),
            "peak_memory": self.memory.errors(),
            "fresh_compile": self.compile.errors(),
            "overhead_eager_s": _r(self.overhead_eager_s),
            "overhead_compiled_s": _r(self.overhead_compiled_s),
            "overhead_probe_s": _r(self.overhead_probe_s),
            "cudnn_search_s": {k: _r(v) for k, v in self.cudnn_search_s.items()},
            "cache_hit_fraction": _r(self.hit_fraction),
            "first_trial_startup_s": _r(self.startup_s),
            "oom_s": _r(self.oom_s),
            "warmup_steps": self.warmup_steps,
            "oom_gib": _r(self.workload.oom_gib),
            "notes": self.notes,
        }


def _r(x: float) -> float:
    return round(float(x), 4)


def _trials(data: Mapping[str, Any], workload: Workload) -> list[dict[str, Any]]:
    """The workload's real measured trials, finalists (Inductor options outside the space) left out."""
    return [
        {**row, "study": name}
        for name in workload.studies
        for row in data["studies"][name]["trials"]
        if row["finalist_of"] is None
    ]


def fit_model(data: Mapping[str, Any], name: str) -> RecordModel:
    workload = WORKLOADS[name]
    trials = _trials(data, workload)
    thr: list[tuple[dict[str, Any], float]] = []
    mem: list[tuple[dict[str, Any], float]] = []
    for t in trials:
        metrics, params = t["metrics"], t["params"]
        if t["outcome"] in ("ok", "infeasible", "pruned") and not metrics.get("pruned_before_compile"):
            if "throughput" in metrics and not (t["outcome"] == "pruned" and params.get("cudnn_benchmark")):
                thr.append((params, metrics["throughput"]))
            if metrics.get("peak_mem_gib"):
                mem.append((params, metrics["peak_mem_gib"]))
        if metrics.get("eager_probe_throughput"):
            thr.append(({**params, "compile_mode": "none"}, metrics["eager_probe_throughput"]))
        if t["outcome"] == "oom" and (needed := _oom_peak(t.get("reason") or "")) is not None:
            mem.append((params, needed))
    throughput = fit_log_linear(thr, lambda p: _columns(p, workload, "throughput"))
    memory = fit_log_linear(mem, lambda p: _columns(p, workload, "memory"))

    # Compiles: each graph's first in its study is fresh; a later one is a cache hit.
    fresh: list[tuple[dict[str, Any], float]] = []
    hits: list[float] = []
    for study in workload.studies:
        first: dict[str, float] = {}
        for t in sorted((t for t in trials if t["study"] == study), key=lambda t: t["started"]):
            key = graph_key(t["params"])
            if key is None or t["compile_s"] <= 0:
                continue
            if key in first:
                hits.append(t["compile_s"] / first[key])
            else:
                first[key] = t["compile_s"]
                fresh.append((t["params"], t["compile_s"]))
    # A "fresh" compile far below the others hit a cache the graph key does not explain (module docstring).
    typical = statistics.median(s for _, s in fresh)
    outliers = [(p, s) for p, s in fresh if s < OUTLIER_COMPILE * typical]
    fresh = [(p, s) for p, s in fresh if s >= OUTLIER_COMPILE * typical]

    compile_model = fit_log_linear(fresh, lambda p: _columns(p, workload, "compile"))
    model = RecordModel(
        workload,
        throughput,
        memory,
        compile_model,
        overhead_eager_s=0.0,
        overhead_compiled_s=0.0,
        overhead_probe_s=0.0,
        cudnn_search_s={},
        hit_fraction=statistics.median(hits) if hits else 0.12,
        startup_s=0.0,
        oom_s=2.5,
        warmup_steps=float(statistics.median(t["metrics"]["warmup_steps"] for t in trials if t["outcome"] == "ok")),
    )
    if not hits:
        model.notes.append("no cache hit measured: hit fraction 0.12, GPT-2's on the same H100")
    for params, seconds in outliers:
        model.notes.append(
            f"left out of the compile fit: {seconds:.1f} s for {params} (a graph the study had not compiled; "
            f"under {OUTLIER_COMPILE:g} x the median fresh compile {typical:.1f} s)"
        )

    # cuDNN's search in eager trials: what their warm-up took beyond the steady step (the raw compile_s metric).
    search: dict[str, list[float]] = {}
    for t in trials:
        if not compiles(t["params"]) and t["params"].get("cudnn_benchmark") and "compile_s" in t["metrics"]:
            search.setdefault(workload.classes[t["params"]["precision"]], []).append(t["metrics"]["compile_s"])
    model.cudnn_search_s = {k: statistics.median(v) for k, v in search.items()} or {"any": 0.0}

    # Fixed costs: what the trials took beyond the model's steps, probe, compile and cuDNN search.
    eager_rest, compiled_rest, probe_rest, ooms = [], [], [], []
    for t in trials:
        params, duration = t["params"], t["duration_s"] - (t["metrics"].get("startup_s", 0.0) if t["default"] else 0.0)
        if t["outcome"] == "oom":
            ooms.append(duration)
        elif t["metrics"].get("pruned_before_compile"):
            probe_rest.append(duration - PROBE_STEPS * model.step_s({**params, "compile_mode": "none"}))
        elif t["outcome"] in ("ok", "infeasible"):
            rest = duration - model.steps_s(params) - model.cudnn_s(params) * (not compiles(params))
            if compiles(params):
                compiled_rest.append(
                    rest - t["compile_s"] - PROBE_STEPS * model.step_s({**params, "compile_mode": "none"})
                )
            else:
                eager_rest.append(rest)
    model.overhead_eager_s = max(statistics.median(eager_rest), 0.0)
    model.overhead_compiled_s = max(statistics.median(compiled_rest), 0.0)
    model.overhead_probe_s = max(statistics.median(probe_rest), 0.0) if probe_rest else model.overhead_compiled_s
    if not probe_rest:
        model.notes.append("no trial pruned before compiling: its fixed cost is a compiled trial's")
    model.oom_s = statistics.median(ooms) if ooms else model.overhead_eager_s
    defaults = [t["metrics"].get("startup_s", 0.0) for t in trials if t["default"]]
    model.startup_s = statistics.median(defaults) if defaults else 0.0
    return model


def _oom_peak(reason: str) -> float | None:
    """What an OOM trial held plus what it asked for (PyTorch's message), a lower bound of its peak, in GiB."""
    asked = re.search(r"Tried to allocate ([\d.]+) GiB", reason)
    held = re.search(r"this process has ([\d.]+) GiB memory in use", reason)
    return float(asked.group(1)) + float(held.group(1)) if asked and held else None


def records_file(model: RecordModel, name: str) -> dict[str, Any]:
    space = load_space(model.workload.space, replay=True)
    default = space.default_params()
    records = [model.record(p, default=params_key(p) == params_key(default)) for p in space.grid()]
    best = max((r for r in records if r["status"] == "ok"), key=lambda r: r["throughput"])
    return {
        "what": (
            f"MODELLED {name} training-step records, not measurements: a model fitted on real H100 trials "
            "(scripts/data/h100_trials.json) by scripts/record_model.py, for comparing search strategies only"
        ),
        "device": {"gpu": "NVIDIA H100 80GB HBM3 (modelled)", "torch": "2.11.0+cu130"},
        "model": model.describe(),
        "best": {"params": best["params"], "throughput": best["throughput"]},
        "records": records,
    }


# --- validate -------------------------------------------------------------------------------------------------


def validate(data: Mapping[str, Any], name: str, records_path: Path, out: Any = sys.stdout) -> dict[str, Any]:
    """The real sweep's own configurations, in order, replayed through the model: times side by side."""
    workload = WORKLOADS[name]
    study = workload.studies[0]
    trials = sorted((t for t in data["studies"][study]["trials"]), key=lambda t: t["started"])
    trials = [t for t in trials if t["finalist_of"] is None]
    replay = TimedReplay(ReplayRecords.load(records_path))
    results: list[TrialResult] = []
    real_total = model_total = 0.0
    rows = []
    for t in trials:
        ok = [r for r in results if r.status is Status.OK]
        best = max((r.metrics["throughput"] for r in ok), default=None)
        gain = compile_gain_bound(t["params"], results)
        pruning = Pruning(PRUNE_RATIO * best if best else None, gain)
        result = replay.answer(t["params"], pruning)
        results.append(result)
        seconds = float(result.metrics.get("duration_s", 0.0))
        real_total += t["duration_s"]
        model_total += seconds
        rows.append((t, result, seconds))
    target_real = max(t["metrics"]["throughput"] for t in trials if t["outcome"] == "ok")
    target_model = max(r.metrics["throughput"] for _, r, _ in rows if r.status is Status.OK)
    print(f"{name}: the real sweep's {len(trials)} configurations, in order, replayed through the model", file=out)
    print("| trial | configuration | real: outcome, s (compile) | model: outcome, s (compile) |", file=out)
    print("|---|---|---|---|", file=out)
    for t, result, seconds in rows:
        label = ", ".join(f"{v}" for v in t["params"].values())
        model_compile = float(result.metrics.get("compile_s", 0.0)) if compiles(t["params"]) else 0.0
        print(
            f"| {t['number']} | {label} | {t['outcome']}, {t['duration_s']:.1f} ({t['compile_s']:.1f}) | "
            f"{result.status.value}, {seconds:.1f} ({model_compile:.1f}) |",
            file=out,
        )
    to_real = _time_to(trials, [t["duration_s"] for t in trials], [_value(t) for t in trials], target_real)
    to_model = _time_to(trials, [s for _, _, s in rows], [_result_value(r) for _, r, _ in rows], target_model)
    ratios = [math.log(s / t["duration_s"]) for t, _, s in rows if s > 0 and t["duration_s"] > 0]
    summary = {
        "trials": len(trials),
        "trial_s_rms_error_pct": round(100 * (math.exp(math.sqrt(statistics.fmean(r * r for r in ratios))) - 1), 1),
        "trial_s_median_abs_error_pct": round(100 * (math.exp(statistics.median(abs(r) for r in ratios)) - 1), 1),
        "real_trial_s": round(real_total, 1),
        "model_trial_s": round(model_total, 1),
        "real_to_within_2pct_s": to_real,
        "model_to_within_2pct_s": to_model,
    }
    print(json.dumps(summary), file=out)
    return summary


def _value(t: Mapping[str, Any]) -> float | None:
    return t["metrics"].get("throughput") if t["outcome"] == "ok" else None


def _result_value(result: TrialResult) -> float | None:
    return result.metrics.get("throughput") if result.status is Status.OK else None


def _time_to(trials: Sequence[Any], seconds: Sequence[float], values: Sequence[float | None], best: float) -> float:
    """Seconds until the first value within 2% of ``best`` (the search's own best: no finalist)."""
    spent = 0.0
    for s, v in zip(seconds, values, strict=True):
        spent += s
        if v is not None and v >= 0.98 * best:
            return round(spent, 1)
    return math.inf


# --- main -------------------------------------------------------------------------------------------------------


def _study_arg(text: str) -> tuple[str, str, str]:
    """``KEY=FOLDER:STUDY`` as (key, folder, study name)."""
    key, _, rest = text.partition("=")
    folder, _, name = rest.partition(":")
    if not (key and folder and name):
        raise SystemExit(f"--study {text!r}: expected KEY=FOLDER:STUDY")
    return key, folder, name


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="the real trials of the H100 studies, to JSON")
    ex.add_argument("--storage-dir", type=Path, required=True)
    ex.add_argument("-o", "--out", type=Path, default=TRIALS)
    ex.add_argument(
        "--study",
        dest="studies",
        action="append",
        metavar="KEY=FOLDER:STUDY",
        help="a study to extract (repeatable; default: the three of h100_trials.json)",
    )
    ex.add_argument("--what", default=WHAT, help="what the file holds (its 'what' field)")
    fit = sub.add_parser("fit", help="modelled replay records of one workload")
    fit.add_argument("workload", choices=sorted(WORKLOADS))
    fit.add_argument("--trials", type=Path, default=TRIALS)
    fit.add_argument("-o", "--out", type=Path, required=True)
    val = sub.add_parser("validate", help="a real sweep's sequence replayed through the model")
    val.add_argument("workload", choices=sorted(WORKLOADS))
    val.add_argument("--trials", type=Path, default=TRIALS)
    val.add_argument("--records", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "extract":
        studies = [_study_arg(arg) for arg in args.studies] if args.studies else STUDIES
        args.out.write_text(json.dumps(extract(args.storage_dir, studies, args.what), indent=1) + "\n")
        return 0
    data = json.loads(args.trials.read_text())
    if args.command == "fit":
        model = fit_model(data, args.workload)
        payload = records_file(model, args.workload)
        args.out.write_text(json.dumps(payload, indent=None, separators=(",", ":")) + "\n")
        print(json.dumps(payload["model"], indent=1))
        print(f"best modelled configuration: {payload['best']}")
        return 0
    validate(data, args.workload, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
