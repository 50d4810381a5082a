"""The environment for a test's child Python process: the tests' folder (or the folders a test names) first on its
path (their workloads, as a sweep's are on its own path), then whatever path this process was given (a GPU machine's
copy of the repository runs the package from ``PYTHONPATH``, not from an install); never an empty entry, which
Python would read as the working folder."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).parent


def child_env(*first: Path, without: Iterable[str] = (), **variables: str) -> dict[str, str]:
    """``os.environ`` with ``first`` (the tests' folder where none is named) put before the inherited ``PYTHONPATH``,
    the variables named in ``without`` left out (``MLFLOW_TRACKING_URI``: MLflow's default store) and ``variables``
    set."""
    inherited = os.environ.get("PYTHONPATH")
    path = [str(folder) for folder in first or (TESTS,)] + ([inherited] if inherited else [])
    env = {name: value for name, value in os.environ.items() if name not in set(without)}
    return {**env, **variables, "PYTHONPATH": os.pathsep.join(path)}
