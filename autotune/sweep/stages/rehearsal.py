"""Finishing stage: the winner's production start, rehearsed, so that what ships is what production looks up.

A trial's compile artifacts are what its own process compiled and read. A production start loads them into empty
cache folders, and may still build Triton kernels: on an H100 (torch 2.11, Triton 3.6; BENCHMARKS.md) GPT-2's
coordinate-descent winner built 37 kernels at every start, ResNet-50's 168, each the same code as one the trial
built (the same metadata, the same TTIR but for its source paths) under another cache key. Every production process
built the same keys, whatever its Inductor folder was called; trial processes (forked from the trial server) built
others, a rehearsal run as a trial too. So the stage runs the start as production does: it exports the winner
(the tuned config and the trial's artifacts, into a temporary folder of the study's cache) and starts it with
:mod:`autotune.trial.firststeps` in a fresh interpreter, with empty Inductor and Triton folders. What that start
then saves, torch's entries it read or wrote and every Triton kernel and launcher in its folders, goes into the
study's compile-artifacts folder and ships instead (:attr:`~autotune.records.TrialRecord.shipped_artifacts`). Measured
on the same H100 by hand (the same start, saved), GPT-2's winner then started in 9.7 s instead of 17.2 s.

It also measures what it rehearses: the start production pays (``apply()`` and the first steps, less their steady
time; the summary's line, the winner's MLflow metric ``start_s``). About a re-measurement's time; a rehearsal of the
same artifacts is not run again (a resumed sweep), and a sweep past its time limit skips it and says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.records import Rehearsal, TrialRecord, schema
from autotune.records.trial import finite
from autotune.sweep.context import SweepContext
from autotune.sweep.measurers import TrialExecutor
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.file import load
from autotune.views.export import export

__all__ = ["TEMPORARY_PREFIX", "Rehearse", "outcome_line", "rehearse", "remove_leftovers"]

TEMPORARY_PREFIX = "rehearsal-"  # the temporary folders a rehearsal keeps in the study's cache folder

_REASON_CHARS = 300  # of a failed start's last line of error output, kept as its reason
_TRITON_KINDS = ("triton_launchers", "triton_kernels")  # what a file of artifacts may leave out past its size limit


def rehearse(tuned: Path, folder: Path, device: str, timeout_s: float) -> Rehearsal:
    """Start ``tuned`` (a tuned config with its compile artifacts beside it, as export writes it) as production does,
    in a fresh interpreter with empty Inductor and Triton folders, on ``device``; what it saves is kept in ``folder``
    (a study's compile-artifacts folder). ``timeout_s``: the most the start may take (then it is killed). Whatever
    goes wrong there is the rehearsal's outcome (``failed``, ``timeout``, with a one-line reason), never raised."""
    shipped = load(tuned).compile_artifacts or {}
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    # In the study's cache folder: the file it saves moves into ``folder`` by a rename, on the same disk
    with tempfile.TemporaryDirectory(prefix=TEMPORARY_PREFIX, dir=folder.parent) as caches:
        status, reason, found = _start(tuned, Path(caches), device, timeout_s)
        saved = None
        if status == "ok":
            try:
                saved = _keep(found.get("saved"), Path(caches) / "saved", folder, shipped.get("entries") or {})
            except (OSError, KeyError, TypeError, ValueError) as exc:
                status, reason = "failed", f"what it saved could not be kept: {type(exc).__name__}: {exc}"
    return Rehearsal(
        of_sha256=str(shipped.get("sha256", "")),
        status=status,
        reason=reason,
        loaded=found.get("artifacts_loaded") is True,
        start_s=finite(found.get("start_s")),
        load_s=finite(found.get("artifacts_load_s")),
        artifacts=saved,
        seconds=time.monotonic() - started,
    )


def _start(tuned: Path, caches: Path, device: str, timeout_s: float) -> tuple[str, str | None, dict[str, Any]]:
    """Run :mod:`autotune.trial.firststeps` on ``tuned`` in a new process group; (status, reason, what it printed).

    Its output goes to files, not pipes: a compile worker it leaves behind would hold a pipe open past its end."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),  # the workload's module, as the sweep found it
    }
    command = [sys.executable, "-m", "autotune.trial.firststeps", str(tuned), "--device", device]
    command += ["--save-to", str(caches / "saved")]
    out_path, err_path = caches / "start.out", caches / "start.err"
    try:
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
    except OSError as exc:
        return "failed", f"the start could not be run: {exc}", {}
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", f"the start took more than {timeout_s:.0f} s", {}
    finally:  # its compile workers too, whatever ended the wait (a timeout, Ctrl-C)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    printed = _last_object(out_path.read_text(errors="replace"))
    if proc.returncode != 0 or printed is None:
        errors = err_path.read_text(errors="replace").strip().splitlines()
        last = next((line.strip() for line in reversed(errors) if line.strip()), "no output")
        return "failed", f"exit code {proc.returncode}: {last[:_REASON_CHARS]}", {}
    return "ok", None, printed


def _last_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object (a workload may print lines of its own after it)."""
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict):
                return found
    return None


def _keep(saved: Any, saved_in: Path, folder: Path, own: dict[str, Any]) -> dict[str, Any] | None:
    """The artifacts the start saved, moved from its own folder into the study's; None when it saved none, or left
    out a kind of Triton file the trial's own carry (past the size limit on a kind): the trial's then ship."""
    if not isinstance(saved, dict):
        return None
    entries = saved.get("entries") or {}
    if any(own.get(kind) and not entries.get(kind) for kind in _TRITON_KINDS):
        return None
    source, target = saved_in / str(saved["file"]), folder / str(saved["file"])
    if not target.exists():  # named by content: the same bytes are there already
        os.replace(source, target)
    return dict(saved)


def remove_leftovers(cache: Path) -> None:
    """Remove the temporary folders of rehearsals that were killed (a stage holds the study's finish lease: no other
    rehearsal of the study runs now)."""
    for leftover in cache.glob(f"{TEMPORARY_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)


class Rehearse:
    """Rehearses the winner's production start (see the module docstring)."""

    name = "rehearse the start"

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline  # the sweep's time limit (time.time()); None: none

    def run(self, ctx: SweepContext) -> None:
        ctx.records.reread_remeasurements()  # the winner by its re-measured median; another process's rehearsal
        winner = ctx.records.winner
        executor = ctx.executor
        if winner is None or not isinstance(executor, TrialExecutor):
            return  # nothing ranked; or trials that do not run here (a test's own executor)
        own = winner.compile_artifacts
        if own is None or not winner.rehearsable:
            return  # eager, or saved none; or rehearsed already (a resumed sweep)
        timeout_s = ctx.space.budget.trial_timeout_s
        if self.deadline is not None:  # a rehearsal never runs past the sweep's time limit
            timeout_s = min(timeout_s, self.deadline - time.time())
        if timeout_s <= 0:
            ctx.progress.message(
                f"trial {winner.number}'s production start not rehearsed: the sweep's time limit has passed"
                " (its own compile artifacts ship)"
            )
            return
        ctx.progress.message(
            f"rehearsing trial {winner.number}'s production start: a fresh process, empty compile caches, its compile"
            f" artifacts ({own.get('bytes', 0) / 2**20:.1f} MiB) loaded"
        )
        cache = Path(executor.cache)
        cache.mkdir(parents=True, exist_ok=True)
        remove_leftovers(cache)
        with tempfile.TemporaryDirectory(prefix=f"{TEMPORARY_PREFIX}config-", dir=cache) as config_folder:
            tuned = Path(config_folder) / "tuned.yaml"
            try:  # the tuned config production gets, its artifacts beside it (the trial's own: none rehearsed yet)
                config = export(ctx.study, ctx.info, tuned, storage=ctx.options.storage, records=ctx.records)
            except AutotuneError as exc:
                ctx.progress.message(f"trial {winner.number}'s production start not rehearsed: {exc}")
                return
            if not config.compile_artifacts:  # a start from scratch would rehearse nothing that ships
                ctx.progress.message(
                    f"trial {winner.number}'s production start not rehearsed: its compile artifacts are not in"
                    f" {cache / compileartifacts.FOLDER}"
                )
                return
            rehearsal = rehearse(tuned, cache / compileartifacts.FOLDER, executor.device, timeout_s)
        data = rehearsal.to_dict()
        ctx.study.set_user_attr(schema.rehearsed_key(winner.number), data)
        ctx.records.note_rehearsed(winner.number, data)
        ctx.progress.message(outcome_line(winner, rehearsal))
        if ctx.tracker is not None and rehearsal.ok and rehearsal.start_s is not None:
            ctx.tracker.add_trial_metrics(winner.number, {"start_s": rehearsal.start_s})


def outcome_line(record: TrialRecord, rehearsal: Rehearsal) -> str:
    """What the rehearsal of ``record``'s start found, in one line."""
    head = f"trial {record.number}'s production start, rehearsed"
    if not rehearsal.ok:
        return f"{head}: it ended {rehearsal.status} ({rehearsal.reason}); its own compile artifacts ship"
    start = f"{rehearsal.start_s:.1f} s" if rehearsal.start_s is not None else "an unmeasured time"
    ships = (
        "what that start built and read ships"
        if rehearsal.artifacts is not None
        else "its own compile artifacts ship (the start saved none, or left out Triton files they carry)"
    )
    if not rehearsal.loaded:
        return f"{head}: its compile artifacts were not loaded, it compiled from scratch in {start}; {ships}"
    return (
        f"{head}: {start} to load its compile artifacts and compile its first steps (its trial spent"
        f" {record.compile_s:.1f} s compiling); {ships}"
    )
