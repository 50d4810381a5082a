"""Compile artifacts inside the trial process: loaded before it compiles, saved after it measured.

- Saved: a trial of a sweep (its spec names the study's cache folder) that ended ok saves what it compiled
  (:func:`autotune.tuned.artifacts.save`) into ``<study cache>/compile-artifacts/`` and records the file
  in its result, ``extra["compile_artifacts"]``; ``autotune export`` ships the chosen trial's. A trial that
  compiled nothing (eager) saves nothing. Saving comes after the timed window: no measured step pays for it.
- Loaded: a spec that carries a tuned config's artifacts (``autotune verify``) has them loaded before
  anything compiles, by the function production's ``apply()`` calls, so the trial runs what production
  runs. ``metrics["compile_artifacts_loaded"]`` says whether they were (1) or not (0, with the reason in
  the result's warnings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from autotune.errors import first_line
from autotune.measurement import TrialResult
from autotune.trial.trialspec import TrialSpec
from autotune.tuned import artifacts as compileartifacts

__all__ = ["load_before_compile", "note_and_save", "shipped_spec_field"]


def shipped_spec_field(artifacts: compileartifacts.Artifacts, folder: Path, recorded_in: str) -> dict[str, Any]:
    """What :attr:`TrialSpec.compile_artifacts` holds for a tuned config's artifacts (plain data, picklable)."""
    return {**artifacts.to_dict(), "folder": str(folder), "recorded_in": recorded_in}


def load_before_compile(spec: TrialSpec, device: torch.device) -> compileartifacts.Loaded | None:
    """Load the spec's shipped artifacts (a changed file raises AutotuneError: the trial is invalid); None without.

    Every trial has the compile caches' keys made stable here, before it compiles, as ``apply()`` has them.
    """
    compileartifacts.stable_cache_keys()
    shipped = spec.compile_artifacts
    if shipped is None:
        return None
    artifacts = compileartifacts.Artifacts.from_dict(shipped, compileartifacts.SECTION)
    where = str(shipped.get("recorded_in", "the tuned config"))
    return compileartifacts.load_shipped(artifacts, shipped["folder"], device, recorded_in=where, warn=False)


def note_and_save(
    spec: TrialSpec, device: torch.device, result: TrialResult, loaded: compileartifacts.Loaded | None, since: float
) -> None:
    """Note on ``result`` whether shipped artifacts were loaded; save this trial's own into the study's folder
    (``since``: when the trial began, a ``time.time()`` stamp: the Triton kernels it built as they ran go too)."""
    if loaded is not None:
        result.metrics["compile_artifacts_loaded"] = 1.0 if loaded.loaded else 0.0
        if loaded.skipped:
            result.warnings.append(loaded.skipped)
    if spec.compile_cache_dir is None or not result.ok:
        return
    try:
        saved = compileartifacts.save(Path(spec.compile_cache_dir) / compileartifacts.FOLDER, device, since)
    except Exception as exc:  # the measurement stands: a trial without artifacts ships none, nothing worse
        result.warnings.append(f"compile artifacts not saved: {type(exc).__name__}: {first_line(exc)}")
        return
    if saved is not None:
        result.extra["compile_artifacts"] = saved.to_dict()
