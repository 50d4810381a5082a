"""Is this GPU fit to measure on? What a ``--gpus`` worker asks before each trial it runs.

A GPU that cannot take a trial (a wedged driver, an ECC error, a neighbour's job on it) made every
later trial on it fail or measure the neighbour. So a worker checks, and the first failure is one line:

- no other autotune sweep holds the device: a worker holds a lock per device on this host (a file
  lock in ``$TMPDIR/autotune-devices``) for as long as it runs;
- NVML lists no process computing on the GPU (the worker itself never does: its trials and checks
  run in child processes that have exited by then);
- in a fresh process forked like a trial's, the device initialises, a small matmul and a
  reduction return exactly the right numbers, and at least :data:`MIN_FREE_FRACTION` of its
  memory is free.

With ``--device cpu`` the "devices" are CPU workers (how the tests run several workers): the lock
and the small kernels are checked, on the CPU; NVML has nothing to say. Holding a worker's lock
from another process (:class:`DeviceLock`) is a real failure that a test can provoke on a CPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import first_line
from autotune.trial_process import TrialRunner

__all__ = ["CHECK_TIMEOUT_S", "MIN_FREE_FRACTION", "DeviceCheck", "DeviceLock", "lock_folder", "probe"]

MIN_FREE_FRACTION = 0.8  # of the GPU's memory, after the check's own context: less means another holder
CHECK_TIMEOUT_S = 60.0  # a GPU whose context or kernel takes longer is hung
_FOREIGN_LOOKS = 3
_FOREIGN_LOOK_GAP_S = 0.5


def lock_folder() -> Path:
    """Where device locks live: one folder per host (``$TMPDIR`` or the system's temporary folder)."""
    return Path(tempfile.gettempdir()) / "autotune-devices"


class DeviceLock:
    """An exclusive lock on one device of this host, named ``name``, held until this process exits or releases it.

    A lock file that cannot be opened (a folder of another user without write access) is no
    evidence of a holder: :meth:`acquire` then reports nothing.
    """

    def __init__(self, name: str, folder: Path | None = None) -> None:
        self.path = (folder or lock_folder()) / f"{name}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> str | None:
        """Take the lock; None when taken (or it cannot be told), else who holds it."""
        if self._fd is not None:
            return None
        fd = self._open()
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            return f"another autotune sweep (pid {holder}) is using it"
        except OSError:  # a file system without flock: nothing to tell
            os.close(fd)
            return None
        with contextlib.suppress(OSError):  # a read-only handle locks as well; it only cannot say who holds it
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return None

    def _open(self) -> int | None:
        """A handle on the lock file; the folder and file are made usable by every user of the host."""
        folder = self.path.parent
        try:
            if not folder.exists():
                folder.mkdir(parents=True, exist_ok=True)
                os.chmod(folder, 0o1777)  # like /tmp: anyone may add a lock, only its owner remove it
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # another user's lock file: flock works on a read-only handle too
            with contextlib.suppress(OSError):
                return os.open(self.path, os.O_RDONLY)
            return None
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # the umask took write access from other users' sweeps
        return fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def probe(device_type: str) -> str | None:
    """Runs in a fresh process: initialise the device, run small kernels, check their numbers and free memory.

    None when all is well, else what went wrong (one line).
    """
    import torch  # here, in the probe's own process: the worker that imports this module never touches CUDA

    try:
        if device_type == "cuda" and not torch.cuda.is_available():
            return "CUDA sees no GPU (CUDA_VISIBLE_DEVICES names no usable device)"
        device = torch.device(device_type)
        wrong = _wrong_numbers(torch, device)
        if wrong:
            return wrong
        if device_type == "cuda":
            free, total = torch.cuda.mem_get_info(device)
            if free < MIN_FREE_FRACTION * total:
                return f"only {free / 2**30:.1f} of {total / 2**30:.1f} GiB of its memory is free"
    except Exception as exc:  # a CUDA error at init or in a kernel: that is the answer
        return f"{type(exc).__name__}: {first_line(exc)}"
    return None


def _wrong_numbers(torch: Any, device: Any) -> str | None:
    """A matmul and a reduction whose exact results fp32 can hold (integers below 2**24)."""
    a = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    expected = (a.long() @ a.long().T).float()
    got = (a.to(device) @ a.to(device).T).cpu()
    if not torch.equal(got, expected):
        return "a small matmul gave wrong numbers"
    total = torch.ones(1 << 20, device=device).sum().item()
    if total != 1 << 20:
        return f"a reduction of 2**20 ones gave {total}"
    return None


@dataclass
class DeviceCheck:
    """Checks the device a worker pins its trials to (see the module docstring); call it before each trial.

    ``entry`` is the device as ``--gpus`` named it: what the worker sets ``CUDA_VISIBLE_DEVICES`` to
    (an nvidia-smi index or a GPU UUID). ``device_type`` is ``cuda`` or ``cpu``.
    """

    entry: str
    device_type: str
    runner: TrialRunner = field(default_factory=TrialRunner)
    timeout_s: float = CHECK_TIMEOUT_S
    lock_dir: Path | None = None
    _lock: DeviceLock | None = field(default=None, init=False, repr=False)

    def __call__(self) -> str | None:
        """None when the device is fit for the next trial, else why not (one line)."""
        return self._lock_failure() or self._foreign_process() or self._probe_failure()

    def _lock_failure(self) -> str | None:
        if self._lock is None:
            self._lock = DeviceLock(self._lock_name(), self.lock_dir)
        return self._lock.acquire()

    def _lock_name(self) -> str:
        """The GPU's PCI bus id where NVML knows it (one name whether given as index or UUID), else the entry."""
        if self.device_type != "cuda":
            return f"cpu-{self.entry}"
        with _nvml_device(self.entry) as (nvml, handle):
            if handle is not None:
                bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
                return "gpu-" + (bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)).replace(":", "_")
        return f"gpu-{self.entry}"

    def _foreign_process(self) -> str | None:
        """A process NVML lists as computing on the GPU, seen on every look over about a second.

        Looking again spares a trial process of this worker that NVML still lists for a moment after it
        was reaped (its context being torn down): only a process that stays is another's.
        """
        if self.device_type != "cuda":
            return None
        with _nvml_device(self.entry) as (nvml, handle):
            if handle is None:
                return None
            seen: set[int] | None = None
            for look in range(_FOREIGN_LOOKS):
                if look:
                    time.sleep(_FOREIGN_LOOK_GAP_S)
                try:
                    pids = {p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
                except nvml.NVMLError:
                    return None
                seen = pids if seen is None else seen & pids
                if not seen:
                    return None
            pid = min(seen or ())
            return f"process {pid} ({_process_name(pid)}) is computing on it"
        return None

    def _probe_failure(self) -> str | None:
        outcome = self.runner.call(probe, (self.device_type,), self.timeout_s)
        if outcome.timed_out:
            return f"its check did not finish within {self.timeout_s:g} s (a hung device)"
        if outcome.failure is not None:
            return f"its check process {outcome.failure}"
        return outcome.value


@contextlib.contextmanager
def _nvml_device(entry: str) -> Any:
    """(pynvml, the handle of the GPU ``entry`` names) inside the block; (None, None) where NVML cannot tell."""
    try:
        import pynvml  # here: without a driver NVML fails to load, and the check then says what it cannot tell

        pynvml.nvmlInit()
    except Exception:  # no driver or library: NVML's checks are skipped, the probe still runs
        yield None, None
        return
    try:
        try:
            if entry.isdigit():
                handle = pynvml.nvmlDeviceGetHandleByIndex(int(entry))
            else:
                handle = pynvml.nvmlDeviceGetHandleByUUID(entry)
        except pynvml.NVMLError:
            handle = None  # not a GPU NVML knows: the probe says what CUDA makes of it
        yield pynvml, handle
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _process_name(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return "not visible from here"
