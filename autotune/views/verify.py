"""``autotune verify tuned.yaml``: does the tuned config still win on the machine that will train?

It re-measures, in fresh trial processes and interleaved so that a drifting machine hurts both
alike, the exported configuration and the study's PyTorch-default trial, ``repeats`` times each;
then compares the speedup and (on the same GPU and software) the figure itself with what the file
recorded. A shortfall beyond the noise, the larger of :data:`MIN_TOLERANCE` and three coefficients
of variation (the file's re-measurements and this run's), is a regression: the result names the
likeliest reason (another GPU, other software, or the same set-up measuring lower).

A compiled config's shipped compile artifacts are loaded in each run of it before it compiles, by the
function production's ``apply()`` calls (:mod:`autotune.trial.artifacts_io`): a changed file is refused
before anything runs, and the report says whether they loaded and what compiling took.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.measurement import TrialResult
from autotune.numbers import number, quantity
from autotune.trial.artifacts_io import shipped_spec_field
from autotune.trial.trialspec import TrialSpec
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.file import env_differences, load

__all__ = ["MIN_TOLERANCE", "Verification", "VerifyFailed", "verification_specs", "verify"]

#: The least shortfall called a regression: below it, run-to-run noise of whole trials.
MIN_TOLERANCE = 0.03
_ENV_LABELS = {"gpu": "GPU", "torch": "torch", "cuda": "CUDA", "triton": "Triton"}

Run = Callable[[TrialSpec], TrialResult]


@dataclass
class Verification:
    """What ``verify`` measured and concluded; ``regression`` is None when the config held."""

    metric: str
    unit: str
    tuned: list[float]
    default: list[float]
    recorded_value: float | None
    recorded_speedup: float | None
    tolerance: float
    env_changes: list[str] = field(default_factory=list)
    regression: str | None = None
    compile_note: str | None = None  # what the shipped compile artifacts did, for a config that has them

    @property
    def speedup(self) -> float:
        return statistics.median(self.tuned) / statistics.median(self.default)

    def lines(self) -> list[str]:
        """The report ``autotune verify`` prints."""
        tuned, default = statistics.median(self.tuned), statistics.median(self.default)
        recorded = (
            f"; recorded {quantity(self.recorded_value, self.unit)}, {self.recorded_speedup:.2f}x"
            if self.recorded_value is not None and self.recorded_speedup is not None
            else ""
        )
        out = [
            f"tuned    {self.metric} {quantity(tuned, self.unit)} {_runs(self.tuned)}",
            f"default  {self.metric} {quantity(default, self.unit)} {_runs(self.default)}",
            f"speedup  {self.speedup:.2f}x here{recorded}; noise tolerance {self.tolerance:.1%}",
        ]
        out += [f"changed  {change}" for change in self.env_changes]
        out += [f"compile  {self.compile_note}"] if self.compile_note else []
        verdict = f"REGRESSION: {self.regression}" if self.regression else "ok: the tuned config holds on this machine"
        out.append(verdict)
        return out


def _runs(values: list[float]) -> str:
    """``(median of 3: 6,801, 6,847, 6,850)``."""
    return f"(median of {len(values)}: {', '.join(number(v) for v in values)})"


def _cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def verification_specs(
    config: Any, device: str | None = None, kernels: tuple[str, ...] = ()
) -> tuple[TrialSpec, TrialSpec]:
    """The trial specs of the tuned config and of the PyTorch-default trial it was compared with."""
    provenance = config.provenance
    tuned_params, default = provenance.get("trial_params"), provenance.get("default")
    if not isinstance(tuned_params, dict) or not isinstance(default, dict) or "params" not in default:
        study = provenance.get("study", "NAME")
        raise AutotuneError(
            "this tuned file does not record its trial's and the default trial's params (written before "
            f"`autotune verify` existed): export it again with `autotune export --study {study}`"
        )
    workload = config.workload
    if "name" not in workload:
        raise AutotuneError("this tuned file names no workload (its `workload:` section has no `name`)")
    # The space's listed kernels, pinned by the trial's params; one that chose for itself chooses again here.
    listed = tuple(path for path, tuned in config.kernels.items() if ":" in path and "by_shape" not in tuned) or kernels

    def spec(params: Mapping[str, Any]) -> TrialSpec:
        return TrialSpec(
            workload["name"],
            dict(params),
            workload.get("preset", "full"),
            device or workload.get("device", "auto"),
            dict(workload.get("args") or {}),
            kernels=listed,
        )

    return spec(tuned_params), spec(default["params"])


def with_shipped_artifacts(spec: TrialSpec, config: Any) -> TrialSpec:
    """``spec`` loading ``config``'s compile artifacts first, as production's apply() does; the file is checked
    here, so a changed one is refused (AutotuneError) before any run. ``spec`` as it is without artifacts."""
    if not config.compile_artifacts or config.source is None or config.to_knobs().compile_mode == "none":
        return spec
    name = config.source.name
    artifacts = compileartifacts.Artifacts.from_dict(config.compile_artifacts, f"{name}: {compileartifacts.SECTION}")
    path = config.source.parent / artifacts.file
    if path.exists():
        compileartifacts.read_verified(path, artifacts.sha256, name)
    return replace(spec, compile_artifacts=shipped_spec_field(artifacts, config.source.parent.absolute(), name))


def _compile_note(results: list[TrialResult], recorded: Mapping[str, Any]) -> str | None:
    """``loaded its compile artifacts: compiling took 3.1 s (median of 3; the trial 31.3 s)``, or why not loaded."""
    flags = [r.metrics.get("compile_artifacts_loaded") for r in results]
    if not flags or any(flag is None for flag in flags):
        return None
    if not all(flags):
        skipped = next((w for r in results for w in r.warnings if "compile artifacts" in w), "not loaded")
        return f"compile artifacts not used: {skipped}"
    seconds = [float(r.metrics["compile_s"]) for r in results if "compile_s" in r.metrics]
    if not seconds:
        return "loaded its compile artifacts"
    trial = recorded.get("compile_s")
    then = f"; the trial {trial:.1f} s" if isinstance(trial, int | float) else ""
    median = statistics.median(seconds)
    return f"loaded its compile artifacts: compiling took {median:.1f} s (median of {len(seconds)}{then})"


def _recorded(provenance: Mapping[str, Any], metric: str) -> tuple[float | None, float | None, float]:
    """The file's figure for the winner (re-measured median when there is one), its speedup, and its CV."""
    metrics = provenance.get("metrics") or {}
    remeasured = metrics.get("remeasured") or {}
    value = remeasured.get("median", metrics.get(metric))
    speedup = metrics.get("speedup_vs_default")
    return value, speedup, float(remeasured.get("cv") or 0.0)


def _env_changes(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    return [
        f"{_ENV_LABELS[key]}: recorded {recorded.get(key)}, here {here.get(key)}"
        for key in env_differences(recorded, here)
    ]


class VerifyFailed(AutotuneError):
    """A configuration that no longer runs on this machine: a regression of its own kind."""


def _measure(
    tuned: TrialSpec, default: TrialSpec, repeats: int, run: Run, metric: str
) -> tuple[list[TrialResult], list[TrialResult]]:
    """Interleaved repeats; a failed run is news about the machine, not noise."""
    results: dict[str, list[TrialResult]] = {"tuned": [], "default": []}
    for _ in range(repeats):
        for label, spec in (("tuned", tuned), ("default", default)):
            result = run(spec)
            if not result.ok or metric not in result.metrics:
                status = result.status.value
                raise VerifyFailed(f"the {label} configuration did not run here: {status}: {result.reason}")
            results[label].append(result)
    return results["tuned"], results["default"]


def verify(
    path: str | Path,
    run: Run,
    repeats: int = 3,
    device: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Verification:
    """Re-measure the tuned config at ``path`` and its default with ``run`` (a fresh trial process each); ``say``
    hears one line once the file is checked and the runs begin."""
    if repeats < 1:
        raise AutotuneError(f"verify needs repeats >= 1, got {repeats=}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the env comparison below says it, once, with the figures
        config = load(path)
    tuned_spec, default_spec = verification_specs(config, device)
    tuned_spec = with_shipped_artifacts(tuned_spec, config)
    if say is not None:
        artifacts = ", the tuned one with its compile artifacts" if tuned_spec.compile_artifacts else ""
        say(f"re-measuring {Path(path)} and its PyTorch default, {repeats}x each in fresh processes{artifacts}")
    objectives = config.provenance.get("objectives") or [{"metric": "throughput", "direction": "maximize"}]
    metric, direction = objectives[0]["metric"], objectives[0]["direction"]
    if direction != "maximize":
        raise AutotuneError(f"verify compares a maximised objective; this file's {metric} is {direction}d")
    tuned_runs, default_runs = _measure(tuned_spec, default_spec, repeats, run, metric)
    tuned = [float(r.metrics[metric]) for r in tuned_runs]
    default = [float(r.metrics[metric]) for r in default_runs]
    env = default_runs[-1].env
    value, speedup, recorded_cv = _recorded(config.provenance, metric)
    tolerance = max(MIN_TOLERANCE, 3 * max(recorded_cv, _cv(tuned), _cv(default)))
    unit = (config.provenance.get("metrics") or {}).get(f"{metric}_unit", "")
    changes = _env_changes(config.provenance.get("env") or {}, env)
    found = Verification(metric, unit, tuned, default, value, speedup, tolerance, changes)
    found.compile_note = _compile_note(tuned_runs, config.provenance.get("metrics") or {})
    found.regression = _regression(found)
    return found


def _regression(found: Verification) -> str | None:
    """Why the tuned config falls short here, or None when it holds within the noise."""
    floor = 1 - found.tolerance
    reasons = []
    if found.recorded_speedup is not None and found.speedup < found.recorded_speedup * floor:
        reasons.append(f"speedup {found.speedup:.2f}x here against {found.recorded_speedup:.2f}x recorded")
    tuned = statistics.median(found.tuned)
    same_setup = not found.env_changes
    if same_setup and found.recorded_value is not None and tuned < found.recorded_value * floor:
        reasons.append(
            f"{found.metric} {number(tuned)} here against {quantity(found.recorded_value, found.unit)} recorded"
        )
    if not reasons:
        return None
    cause = f"other set-up ({'; '.join(found.env_changes)})" if found.env_changes else "same set-up, other figure"
    return f"{'; '.join(reasons)}: {cause}"
