"""One assembler in Triton's cache keys, in every process: torch's own ``ptxas``, chosen before anything compiles.

A Triton kernel's cache key holds its backend's hash, which is the version text of the ``ptxas`` Triton asks about
first in the process for the GPU's architecture; Triton keeps that answer for the life of the process
(``get_ptxas_version`` and ``CUDABackend.hash`` are ``lru_cache``d). Where that ``ptxas`` is the one
``TRITON_PTXAS_PATH`` names (Triton 3.6 below Blackwell, sm_100; Triton 3.9 below sm_90: newer GPUs use
``TRITON_PTXAS_BLACKWELL_PATH``, which torch does not set, and there every process keys alike), Triton bundles
one (CUDA 12.8's in Triton 3.6), and a CUDA build of torch ships its own (CUDA 13.0's with torch 2.11+cu130) and
points the variable at it, but only where Inductor builds a kernel: in its compile workers as they start, and in the
process itself just before it builds one there (``_set_triton_ptxas_path``). A process that had Triton hash a kernel
before that keys its kernels with the bundled version, one that did not, with torch's; a kernel shipped under one
key is not found under the other and is built again (on an H100 a production start built 37 of GPT-2's and 168 of
ResNet-50's kernels that the trial had built, same name, metadata and TTIR: BENCHMARKS.md).

:func:`pin` makes the choice torch makes, at once, wherever the compile caches' keys are made the trial's
(:func:`autotune.tuned.artifacts.stable_cache_keys`: a trial's process and a compile ahead before anything they run
can compile, ``cfg.apply()`` of a compiled config) and in :func:`autotune.knobs.apply` (an eager config's Triton
kernels too), so trials and production all key with the same ``ptxas``. A ``TRITON_PTXAS_PATH`` set by the user
stays as it is (torch leaves it too); it should then be the same where the sweep ran and in production.
"""

from __future__ import annotations

__all__ = ["pin"]


def pin() -> None:
    """Point ``TRITON_PTXAS_PATH`` at torch's own ``ptxas`` where this torch has one and the variable is unset,
    as Inductor itself does before its first kernel build, but now; without torch's helper, nothing changes."""
    try:
        # torch's private helper (deferred: Inductor's runtime helpers, no compiler, no thread): where a torch moves
        # it, Triton's own choice stands, as without this module
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
    except ImportError:
        return
    _set_triton_ptxas_path()
