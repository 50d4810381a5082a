"""Where a trial's numbers came from: the machine's fingerprint, which the trial job puts in every result.

The device, its driver and software versions, the host; a GPU by its PCI address, one name for it whatever
``CUDA_VISIBLE_DEVICES`` says. The timed window's telemetry (:class:`autotune.trial.measure.GpuTelemetry`) finds the
GPU in NVML by that address too.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import socket
from typing import Any

import pynvml  # nvidia-ml-py; torch imports it too
import torch

from autotune.host import cpu_model

__all__ = ["env_fingerprint", "nvml_handle", "open_nvml"]

log = logging.getLogger(__name__)


def env_fingerprint(device: torch.device) -> dict[str, Any]:
    """Where the numbers came from: device, driver and software versions, host."""
    env: dict[str, Any] = {
        "device": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }
    with contextlib.suppress(ImportError):
        import triton  # deferred: Triton is optional (Linux x86-64 only); where it is missing, the env omits it

        env["triton"] = triton.__version__
    if device.type != "cuda":
        env["cpu"] = cpu_model()
        env["threads"] = torch.get_num_threads()
        return env
    env["gpu"] = torch.cuda.get_device_name(device)
    env["gpu_pci_bus_id"] = _pci_bus_id(device)  # which of a host's GPUs measured it (one sweep per GPU)
    env["cuda"] = torch.version.cuda
    env["cudnn"] = torch.backends.cudnn.version()
    nvml = open_nvml()
    if nvml is not None:
        with contextlib.suppress(Exception):
            env["driver"] = nvml.nvmlSystemGetDriverVersion()
    return env


def open_nvml() -> Any | None:
    """NVML, initialised; None where there is none (no driver, no library: telemetry is optional)."""
    try:
        pynvml.nvmlInit()
        return pynvml
    except Exception as exc:
        log.debug("NVML unavailable: %s", exc)
        return None


def nvml_handle(nvml: Any, device: torch.device) -> Any:
    """The NVML handle of a torch device, matched by PCI bus id (CUDA and NVML indices can differ)."""
    return nvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id(device).encode())


def _pci_bus_id(device: torch.device) -> str:
    """The GPU's PCI address, e.g. ``00000000:1b:00.0``."""
    props: Any = torch.cuda.get_device_properties(device)  # torch's stubs leave the PCI fields out
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
