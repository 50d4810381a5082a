"""Triton kernels: ours, whose block sizes autotune tunes, and the machinery for users' kernels.

- ``matmul``: the grouped matmul with its torch reference, check, benchmark and shared-memory estimate.
- ``listing``: a kernel a space lists (``package.module:kernel``) as search params: an autotuned
  kernel's configs as one readable categorical param, a declared kernel's values as ordinal params.
- ``declare``: :func:`~autotune.kernels.declare.tunable`, declaring a kernel by its ordered values.
- ``pinning``: a kernel pinned to one config (no benchmarking at launch), recording its shape keys;
  production pinning that falls back, with a warning, on shapes never measured.
- ``choices``: what the autotuned kernels a trial did not pin chose for themselves (production pins the same).
- ``autotuning``: in a trial process, an autotuner's round of configs compiled in parallel before it benchmarks
  them, and the rounds' time, which the trial records.
"""

from __future__ import annotations

__all__ = ["autotuning", "choices", "declare", "listing", "matmul", "pinning"]
