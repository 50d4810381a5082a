"""The trial server's first import: Inductor's compiler, loaded where that leaves fork usable.

Every compiled trial imports Inductor's compiler when it first compiles (``torch._inductor.compile_fx`` and
``torch._dynamo.repro.after_dynamo``: 3.8-4.6 s on an H100 host, torch 2.11, ``scripts/trial_setup.py --imports``).
Imported once in the trial server (:data:`autotune.trial_process.PRELOAD`), each trial forked from it has them. But
in torch 2.11 that import asks ``torch.cuda.is_available()`` (``torch/_inductor/runtime/benchmarking.py``, at module
level),
which by default asks the CUDA runtime (``cudaGetDeviceCount``): the driver then starts in the server, and every
forked trial fails with "Cannot re-initialize CUDA in forked subprocess" (seen on an H200 and an H100). With
``PYTORCH_NVML_BASED_CUDA_CHECK=1`` torch answers from NVML instead, which leaves fork usable (the same H100: a forked
child passed :func:`autotune.sweep.workers.device_check.probe` after the import), unless NVML cannot count the devices
(no NVML, or ``CUDA_VISIBLE_DEVICES`` naming MIG devices), when torch falls back to the runtime. So this module sets
that variable for the import only, and imports only where torch's own NVML count answers, or where torch has no CUDA.

Importing this module has that effect by design: the forkserver preloads modules by name, and this one is meant for
it. Nothing in ``autotune/`` imports it but :data:`~autotune.trial_process.PRELOAD`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator

import torch

__all__ = ["COMPILER_MODULES", "compiler_preloadable", "preload_compiler"]

# What torch.compile imports on its first compile, beyond torch._dynamo (which the server imports anyway).
COMPILER_MODULES = ("torch._dynamo.repro.after_dynamo", "torch._inductor.compile_fx")
_NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def compiler_preloadable() -> bool:
    """Whether torch answers its device queries before CUDA starts without the CUDA runtime, with
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1``: always with a torch built without CUDA; with one built with it, where
    torch's own NVML count (what ``device_count()`` uses before CUDA starts) answers. Only those queries: an import
    that started CUDA some other way would still spoil fork (``scripts/trial_setup.py --imports`` checks that)."""
    if not torch.backends.cuda.is_built():
        return True
    count_by_nvml = getattr(torch.cuda, "_device_count_nvml", None)  # -1 where NVML fails or names MIG devices
    return count_by_nvml is not None and count_by_nvml() >= 0


@contextlib.contextmanager
def _nvml_device_queries() -> Iterator[None]:
    """``PYTORCH_NVML_BASED_CUDA_CHECK=1`` inside the block, the variable as it was after: the trials answer
    ``is_available()`` as torch does by default (the CUDA runtime's stronger answer, e.g. for ``device: auto``)."""
    saved = os.environ.get(_NVML_CHECK)
    os.environ[_NVML_CHECK] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[_NVML_CHECK]
        else:
            os.environ[_NVML_CHECK] = saved


def preload_compiler() -> bool:
    """Import :data:`COMPILER_MODULES` where :func:`compiler_preloadable` says so; whether they were imported."""
    if not compiler_preloadable():  # its NVML count does not read PYTORCH_NVML_BASED_CUDA_CHECK
        return False
    with _nvml_device_queries():
        for module in COMPILER_MODULES:
            importlib.import_module(module)
    return True


preload_compiler()
