"""A study's compile caches: Inductor's (FX graphs, AOTAutograd) and Triton's, in one folder per study.

Inductor caches what it compiles on disk (torch 2.13: ``/tmp/torchinductor_<user>``, shared by all
of a user's processes, gone when ``/tmp`` is cleaned or private to a container) and Triton its
kernels (``~/.triton/cache``). A sweep keeps both next to its study instead: every trial of the study
(repeats, re-measurements and finalists of one configuration, a resumed sweep, every worker of one
host) compiles from the same folder, which is removed with the study's files and never mixed with
another study's. On a 2-core CPU, a tiny MLP's first compiled trial spent 13.4 s compiling and the
next identical one 2.2 s (tests/test_compile_cache.py checks the drop).

Triton's autotuners keep their choices there too (``TRITON_CACHE_AUTOTUNING``: each ``triton.autotune`` kernel
that benchmarks its configs writes their timings beside its compiled kernels, keyed by the kernel's source, its
configs, the shape key and the GPU): a kernel the space does not list, such as GPT-2's fused head, which
compiled and benchmarked its 34 configs in every trial of a sweep (on an H100, GPT-2's eager trials took 14.4 to
14.6 s with it, 4.7 to 5.7 s with torch's head), chooses once per study and shape; the trials that follow read
the choice back and compile only the chosen config (not yet measured on a GPU).

The sweep passes the folder in :attr:`autotune.jobspec.TrialSpec.compile_cache_dir`; the trial
process calls :func:`use` before anything compiles. The variables must be set in the trial process
itself: trial processes come from a forkserver started once, whose environment is fixed by then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from autotune.kernels.choices import loaded_autotuners
from autotune.storage.sqlitelock import sqlite_path

__all__ = ["CACHE_FOLDER", "remember_autotuning", "study_cache_dir", "use"]

CACHE_FOLDER = ".autotune-cache"


def study_cache_dir(storage: str, study: str) -> Path:
    """``.autotune-cache/<study>`` beside a SQLite study's database file, else in the current folder (absolute)."""
    database = sqlite_path(storage)
    base = database.parent if database is not None else Path.cwd()
    return (base / CACHE_FOLDER / re.sub(r"[^\w.-]", "_", study)).resolve()


def use(cache_dir: str | Path) -> None:
    """Point this process's Inductor and Triton caches at ``cache_dir`` (call it before anything compiles).

    Both read their variable each time they look for the folder, so setting it here is enough.
    """
    root = Path(cache_dir)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    remember_autotuning()


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
