"""What the kernel tests share: how far a result is from its reference, and a process in Triton's CPU interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from pythonpath import child_env

HERE = Path(__file__).resolve().parent


def rel_error(out: torch.Tensor | None, ref: torch.Tensor | None) -> float:
    """``||out - ref|| / ||ref||`` in float64."""
    assert out is not None and ref is not None
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def run_interpreted(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` under Triton's CPU interpreter (``TRITON_INTERPRET=1`` must be set before a
    process imports triton), with ``user_kernels`` and the tests' helpers importable; it must succeed."""
    env = child_env(HERE, HERE.parent, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done
