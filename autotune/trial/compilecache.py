"""A study's compile caches: Inductor's (FX graphs, AOTAutograd) and Triton's, in one folder per study.

Inductor caches what it compiles on disk (torch 2.13: ``/tmp/torchinductor_<user>``, shared by all
of a user's processes, gone when ``/tmp`` is cleaned or private to a container) and Triton its
kernels (``~/.triton/cache``). A sweep keeps both next to its study instead: every trial of the study
(repeats, re-measurements and finalists of one configuration, a resumed sweep, every worker of one
host) compiles from the same folder, which is removed with the study's files and never mixed with
another study's. On a 2-core CPU, a tiny MLP's first compiled trial spent 13.4 s compiling and the
next identical one 2.2 s (tests/trial/test_compile_cache.py checks the drop).

Triton's autotuners keep their choices there too (``TRITON_CACHE_AUTOTUNING``: each ``triton.autotune`` kernel
that benchmarks its configs writes their timings beside its compiled kernels, keyed by the kernel's source, its
configs, the shape key and the GPU): a kernel the space does not list, such as GPT-2's fused head, which
compiled and benchmarked its 34 configs in every trial of a sweep (on an H100, GPT-2's eager trials took 14.4 to
14.6 s with it, 4.7 to 5.7 s with torch's head), chooses once per study and shape; the trials that follow read
the choice back and compile only the chosen config (on an H100, GPT-2's eager fused-head trials after the
first took 4.7-5.0 s; BENCHMARKS.md).

Inductor's folder is one per autocast dtype (``inductor`` without autocast, ``inductor-bfloat16``,
``inductor-float16``): AOTAutograd's cache keyed a graph on whether autocast was on, not on its dtype, until
pytorch/pytorch#181564 (torch 2.13 has the fix, the H100's torch 2.11 not), so in one shared folder an fp16
trial ran the graph a bf16 trial of the same configuration had compiled (on an H100, GPT-2's fp16 trials
"compiled" in 1.7-1.9 s after their bf16 twins, against 17-19 s for a new graph, and measured bf16 code).
Triton's folder stays shared: a kernel's cache key is its source and options, which carry its dtypes.

The sweep passes the folder in :attr:`autotune.trial.trialspec.TrialSpec.compile_cache_dir`; the trial
process calls :func:`use` before anything compiles. The variables must be set in the trial process
itself: trial processes come from a forkserver started once, whose environment is fixed by then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.kernels.choices import loaded_autotuners
from autotune.storage.sqlitelock import sqlite_path

if TYPE_CHECKING:  # torch itself is not imported: the sweep's side reads study_cache_dir from here
    import torch

__all__ = ["CACHE_FOLDER", "inductor_folder", "remember_autotuning", "study_cache_dir", "use"]

CACHE_FOLDER = ".autotune-cache"


def study_cache_dir(storage: str, study: str) -> Path:
    """``.autotune-cache/<study>`` beside a SQLite study's database file, else in the current folder (absolute)."""
    database = sqlite_path(storage)
    base = database.parent if database is not None else Path.cwd()
    return (base / CACHE_FOLDER / re.sub(r"[^\w.-]", "_", study)).resolve()


def use(cache_dir: str | Path, autocast: torch.dtype | None = None) -> None:
    """Point this process's Inductor and Triton caches at ``cache_dir`` (call it before anything compiles);
    ``autocast``: the dtype the trial's autocast runs in, which picks Inductor's folder (:func:`inductor_folder`).

    Both read their variable each time they look for the folder, so setting it here is enough.
    """
    root = Path(cache_dir)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / inductor_folder(autocast))
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    remember_autotuning()


def inductor_folder(autocast: torch.dtype | None) -> str:
    """Inductor's folder in a study's cache for trials under ``autocast`` (None: autocast off): one per dtype, so
    AOTAutograd's cache never serves a graph compiled under another autocast dtype (see the module's docstring)."""
    return "inductor" if autocast is None else f"inductor-{str(autocast).removeprefix('torch.')}"


def remember_autotuning() -> None:
    """Every ``triton.autotune`` kernel of this process keeps its choices in the Triton cache folder: the ones
    decorated from now on (Triton reads ``TRITON_CACHE_AUTOTUNING`` when a kernel is decorated) and the ones the
    trial process was forked with (the workloads preloaded). Not under Triton's CPU interpreter, which has no
    benchmark to remember."""
    if os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes"):
        return
    os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
    for _, autotuner in loaded_autotuners():
        if hasattr(autotuner, "cache_results"):  # Triton 3.3 and later
            autotuner.cache_results = True
