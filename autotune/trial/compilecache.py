"""A study's compile caches: Inductor's (FX graphs, AOTAutograd) and Triton's, in one folder per study.

Inductor caches what it compiles on disk (torch 2.13: ``/tmp/torchinductor_<user>``, shared by all
of a user's processes, gone when ``/tmp`` is cleaned or private to a container) and Triton its
kernels (``~/.triton/cache``). A sweep keeps both next to its study instead: every trial of the study
(repeats, re-measurements and finalists of one configuration, a resumed sweep, every worker of one
host) compiles from the same folder, which is removed with the study's files and never mixed with
another study's. On a 2-core CPU, a tiny MLP's first compiled trial spent 13.4 s compiling and the
next identical one 2.2 s (tests/test_compile_cache.py checks the drop).

The sweep passes the folder in :attr:`autotune.jobspec.TrialSpec.compile_cache_dir`; the trial
process calls :func:`use` before anything compiles. The variables must be set in the trial process
itself: trial processes come from a forkserver started once, whose environment is fixed by then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from autotune.storage.sqlitelock import sqlite_path

__all__ = ["CACHE_FOLDER", "study_cache_dir", "use"]

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
