"""Importing a user's module (a workload, a Triton kernel) named on the command line or in a space."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["import_user_module"]


def import_user_module(name: str) -> Any:
    """Import a user's module as ``python -m`` would: modules next to the command first."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)
