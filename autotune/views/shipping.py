"""``autotune export``'s side of compile artifacts: the chosen trial's file, copied beside the tuned config.

The trial saved its artifacts in the study's cache folder (:mod:`autotune.trial.artifacts_io`) and its record
names the file and its sha256. Export checks the bytes against that sha256 (a changed file is refused:
it is compiled code) and writes them beside ``tuned.yaml`` as ``tuned.compile-artifacts.bin``; the
section it returns goes into the file.

A trial without them (a study swept before trials saved them, a file deleted since, a trial that ran on
another host of a PostgreSQL study) has none to copy. Given ``run_again``, export then runs the trial's
configuration once more, in a fresh trial process that compiles from the study's cache folder (a warm one
makes that quick), says so in one line first, and ships what that run saved: only on a machine like the
one that measured the trial (same GPU or CPU, torch and Triton), else the artifacts would not be the
trial's. Without ``run_again`` (the sweep's own ``best_config.yaml``), or on another machine, the config
ships without them and one line says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from autotune.atomicfile import write_atomically
from autotune.errors import AutotuneError
from autotune.measurement import TrialResult
from autotune.records import StudyInfo, TrialRecord
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.trialspec import TrialSpec
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.artifacts import Artifacts

__all__ = ["Shipping", "ship"]

RunAgain = Callable[[TrialSpec], TrialResult]


def _quiet(_line: str) -> None:
    pass


@dataclass(frozen=True)
class Shipping:
    """How export ships compile artifacts. ``run_again`` runs a trial spec (None: ship only what the trial
    saved); ``say`` takes the one-line notes (running once more, or why none ship); ``hint`` ends the
    "running once more" line (the CLI names its flag that skips it)."""

    run_again: RunAgain | None = None
    say: Callable[[str], None] = _quiet
    hint: str = ""


def ship(
    record: TrialRecord, info: StudyInfo, study_name: str, storage: str, target: Path, shipping: Shipping
) -> Artifacts | None:
    """The artifacts of ``record``'s trial, written beside the tuned config ``target``; None when none ship.

    Raises :class:`AutotuneError` when the trial's file is not the one its record names (its sha256).
    """
    if not record.compiled or record.result is None:
        return None  # eager: nothing compiled, nothing to ship
    folder = study_cache_dir(storage, study_name) / compileartifacts.FOLDER
    found = _saved(record, folder)
    if found is not None:
        return _write(found[0], found[1], record.number, target)
    why = _missing(record, folder)
    if shipping.run_again is None:
        shipping.say(f"{why}: {target.name} ships without them (the model compiles from scratch in production)")
        return None
    elsewhere = _other_machine(record.result)
    if elsewhere:
        shipping.say(
            f"{why}, and this machine is not the one that measured it ({'; '.join(elsewhere)}): {target.name} ships"
            " without them (export on the sweep's machine to ship them)"
        )
        return None
    shipping.say(f"{why}: running its configuration once more to capture them{shipping.hint}")
    again = shipping.run_again(_spec(record, info, folder.parent))
    saved = again.extra.get("compile_artifacts") if again.ok else None
    if saved is None:
        outcome = f"{again.status.value}: {again.reason}" if not again.ok else "ok, but it saved no compile artifacts"
        ended = f"trial {record.number}'s configuration, run once more, ended {outcome}"
        shipping.say(f"{ended}: {target.name} ships without them")
        return None
    artifacts = Artifacts.from_dict(saved, "the run once more's compile artifacts")
    data = compileartifacts.read_verified(folder / artifacts.file, artifacts.sha256, "the run once more's result")
    return _write(data, artifacts, record.number, target)


def _saved(record: TrialRecord, folder: Path) -> tuple[bytes, Artifacts] | None:
    """The file that ships with the trial and its record, checked against the sha256 recorded: what the rehearsal of
    its start saved (:mod:`autotune.sweep.stages.rehearsal`), else the trial's own; None when neither is here."""
    choices = (
        (record.shipped_artifacts, "rehearsed start", "the trial's own then ship"),
        (record.compile_artifacts, "trial", "export then runs the trial once more"),
    )
    for saved, whose, instead in choices:
        if saved is None:
            continue
        artifacts = Artifacts.from_dict(saved, f"trial {record.number}'s record of its {whose}'s compile artifacts")
        path = folder / artifacts.file
        if not path.exists():
            continue
        remedy = f"delete {path} ({instead}), or export with --no-compile-artifacts"
        return compileartifacts.read_verified(path, artifacts.sha256, f"trial {record.number}", remedy), artifacts
    return None


def _missing(record: TrialRecord, folder: Path) -> str:
    if record.compile_artifacts is None:
        return f"trial {record.number} saved no compile artifacts (swept before trials saved them)"
    return f"trial {record.number}'s compile artifacts are not in {folder} (deleted, or saved on another host)"


def _other_machine(result: TrialResult) -> list[str]:
    """How this machine differs from the one that measured ``result`` (device, torch, Triton), for compiling."""
    device = str(result.env.get("device") or "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        return [f"GPU {result.env.get('gpu')} (here none)"]
    recorded = {key: result.env[key] for key in ("torch", "triton", "cuda", "gpu", "cpu") if result.env.get(key)}
    return compileartifacts.differences(recorded, compileartifacts.environment(device))


def _spec(record: TrialRecord, info: StudyInfo, cache_dir: Path) -> TrialSpec:
    """The trial's configuration as the sweep ran it, compiling from (and saving into) the study's folder."""
    args: dict[str, Any]
    kernels: tuple[str, ...]
    try:
        space = info.space()
    except AutotuneError:  # a space text that no longer loads: its workload args and kernels are unknown
        args, kernels = {}, ()
    else:
        args, kernels = dict(space.workload.args), tuple(kernel.path for kernel in space.kernels)
    assert record.result is not None
    device = str(record.result.env.get("device") or info.device)
    return TrialSpec(
        info.workload,
        dict(record.params),
        info.preset,
        device,
        args,
        kernels=kernels,
        compile_cache_dir=str(cache_dir),
    )


def _write(data: bytes, artifacts: Artifacts, trial: int, target: Path) -> Artifacts:
    """``data`` beside ``target``; the section that names it."""
    name = compileartifacts.shipped_name(target)
    write_atomically(target.parent / name, data)
    return replace(artifacts, file=name, trial=trial)
