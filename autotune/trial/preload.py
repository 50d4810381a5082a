"""The trial server's first import: it keeps fork usable, then loads the compiler every compiled trial needs.

Every compiled trial imports Inductor's compiler when it first compiles (``torch._inductor.compile_fx`` and
``torch._dynamo.repro.after_dynamo``: 3.8-4.6 s on an H100 host, torch 2.11, ``scripts/trial_setup.py --imports``).
Imported once in the trial server (:data:`autotune.runner.PRELOAD`), each trial forked from it has them. But that
import asks ``torch.cuda.is_available()``, which by default asks the CUDA runtime (``cudaGetDeviceCount``): the
driver is then initialised in the server and every forked trial fails with "Cannot re-initialize CUDA in forked
subprocess" (seen on an H200 and an H100, torch 2.11). With ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` torch asks NVML
instead, which leaves fork usable (the same H100: a forked child passed :func:`autotune.devicecheck.probe` after the
import) unless NVML cannot count the devices, when torch falls back to the runtime. So this module sets that
variable for the server and its trials, and imports Inductor only where a CUDA build's NVML count answers.

Importing this module has those effects by design: the forkserver preloads modules by name, and this is the one
meant for it. Nothing else imports it.
"""

from __future__ import annotations

import importlib
import os

import torch

__all__ = ["COMPILER_MODULES", "compiler_preloadable"]

# What torch.compile imports on its first compile, beyond torch._dynamo (which the server imports anyway).
COMPILER_MODULES = ("torch._dynamo.repro.after_dynamo", "torch._inductor.compile_fx")


def compiler_preloadable() -> bool:
    """Whether importing :data:`COMPILER_MODULES` here leaves a forked process able to use CUDA: always with a torch
    built without CUDA; with one built with it, where NVML answers torch's device count (then its import-time device
    queries go through NVML, with ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` set, and not through the CUDA runtime)."""
    if not torch.backends.cuda.is_built():
        return True
    count_by_nvml = getattr(torch.cuda, "_device_count_nvml", None)  # torch's own NVML count, -1 where it fails
    return count_by_nvml is not None and count_by_nvml() >= 0


os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
if compiler_preloadable():
    for _module in COMPILER_MODULES:
        importlib.import_module(_module)
