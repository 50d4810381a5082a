"""Triton kernels whose block sizes autotune tunes, each with its torch reference.

Each kernel module offers the kernel call, a ``check`` against torch, a ``bench`` and a
shared-memory estimate that lets a sampler reject configurations that cannot launch.
"""

from __future__ import annotations

__all__ = ["matmul"]
