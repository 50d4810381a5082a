"""The environment for a test's child Python process: the tests' folder first on its path (their workloads, as a
sweep's are on its own path), then whatever path this process was given (a GPU machine's copy of the repository runs
the package from ``PYTHONPATH``, not from an install)."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).parent


def child_env() -> dict[str, str]:
    """``os.environ`` with the tests' folder put before the inherited ``PYTHONPATH``."""
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *([inherited] if inherited else [])])}
