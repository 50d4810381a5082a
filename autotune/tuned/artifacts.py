"""Compile artifacts: the compile a trial paid for, shipped beside ``tuned.yaml`` so production does not pay it again.

What they are: ``torch.compiler.save_cache_artifacts()`` (PyTorch's "Mega-Cache"), the entries this process
wrote to, or read from, Inductor's FX-graph cache, AOTAutograd's cache, the autotuning cache and the
profile-guided dynamic-shape cache; on a GPU the FX-graph entries carry their Triton kernels. What was
verified in torch 2.13's source (``torch/compiler/__init__.py``, ``torch/compiler/_cache.py``,
``torch/_inductor/codecache.py``) and by running it on a CPU (2.11, on the GPU box, not yet):

- The artifacts are recorded in the memory of the process that compiled, as each cache entry is written
  or read, so ``save_cache_artifacts()`` must be called in that process, after its compile. A compile
  served from a warm cache folder records its entries too: a trial that hit its study's cache saves
  artifacts all the same. With nothing compiled it returns None (an eager trial saves nothing).
- ``load_cache_artifacts(data)`` writes the entries into this process's cache folders
  (``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``); the next ``torch.compile`` then finds them there.
  Bytes it cannot parse are logged and it returns None: no exception. It loads pickled graphs and
  compiled kernels, executable code, which is why the file's sha256 is recorded and checked here.
- The caches find an entry by a key hashed from a pickle of the graph and its inputs' metadata. Torch's
  memory formats pickle as a global that ``pickle`` looks up by scanning ``sys.modules`` for the first module
  with a ``torch`` attribute: ``__mp_main__`` in a trial process whose parent's main module imported torch,
  ``torch._utils`` in a script that imports torch first, a user's module imported before torch that imports
  it. So the same graph got another key in the trial than in production, and the artifacts were loaded and
  never found (seen here: trials started from a script that had imported torch, 0 cache hits in production).
  :func:`stable_cache_keys` pickles them by their name in ``torch`` instead (as dtypes already are); every
  trial process, and ``apply()`` of a compiled config, call it before anything compiles.
- Dynamo still traces the model (its bytecode is not in the artifacts), and on a CPU the C++ kernels
  are not in them either: each is built again from its source. A GPU's Triton kernels are included.
  Measured here, a 128-block MLP on a 2-core CPU shared with other jobs, first 3 steps from empty caches:
  23-36 s without, 11-15 s with them, nearly all of that C++ builds (tests/tuned/test_compile_artifacts.py;
  ``scripts/compile_artifacts_benchmark.py`` measures it for a workload, on a GPU too).

Torch's artifacts leave out the C launchers Triton builds for its kernels where Inductor's static launcher is off
(seconds each), and the kernels coordinate descent built as they first ran: with both shipped, GPT-2's
coordinate-descent finalist started in 12.7 s instead of 19.6 s on an H100 (BENCHMARKS.md). The
file carries them too, torch's bytes then inside a zip (:mod:`autotune.tuned.tritonfiles`).

The format: a trial of a sweep saves its artifacts as ``<study cache>/compile-artifacts/<sha256>.bin``
(named by content: identical bytes are kept once; on a CPU a 128-block MLP's came to 2.3 MB, a tiny MLP's
to 0.3 MB) and records :class:`Artifacts` in its result (``extra["compile_artifacts"]``).
``autotune export`` copies the chosen trial's file beside ``tuned.yaml`` as
``<stem>.compile-artifacts.bin`` (the bytes torch wrote, or those and Triton's files: unchanged either way) and
writes the section::

    compile_artifacts:
      file: tuned.compile-artifacts.bin      # beside this file
      sha256: 9f2c...                         # apply() refuses a file with any other
      bytes: 8123456
      env: {torch: 2.11.0+cu130, triton: 3.6.0, cuda: '13.0', gpu: NVIDIA H100 80GB HBM3}
      trial: 17
      entries: {inductor: 2, aot_autograd: 1, triton_launchers: 16, triton_kernels: 292}

Before ``cfg.apply()`` compiles, :func:`load_shipped` checks the sha256 (a mismatch is refused:
:class:`~autotune.errors.AutotuneError`, one line), then that torch (its full version, CUDA build
included), Triton and the GPU (or the CPU model: Inductor's C++ is generated for its instruction set)
are the ones that wrote them (a mismatch warns in one line, :class:`CompileArtifactsWarning`, and the
model compiles from scratch), then loads them once per process.

Imports torch, the standard library and a few small autotune modules: the trial process saves with it,
production loads with it.
"""

from __future__ import annotations

import contextlib
import copyreg
import hashlib
import importlib.metadata
import os
import re
import subprocess
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from autotune.atomicfile import write_atomically
from autotune.errors import AutotuneError
from autotune.host import cpu_model
from autotune.knobs import assembler
from autotune.tuned import tritonfiles

__all__ = [
    "FOLDER",
    "SECTION",
    "Artifacts",
    "CompileArtifactsWarning",
    "Loaded",
    "differences",
    "environment",
    "load_shipped",
    "read_verified",
    "save",
    "shipped_name",
    "stable_cache_keys",
]

FOLDER = "compile-artifacts"  # in a study's cache folder: what its trials saved
SECTION = "compile_artifacts"  # the tuned config's section
SUFFIX = ".compile-artifacts.bin"  # beside a tuned config: ``tuned.yaml`` -> ``tuned.compile-artifacts.bin``
_ENV_KEYS = ("torch", "triton", "cuda", "ptxas", "gpu", "cpu")
_ENV_NAMES = {"torch": "torch", "triton": "Triton", "cuda": "CUDA", "ptxas": "ptxas", "gpu": "GPU", "cpu": "CPU"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_loaded: set[str] = set()  # sha256 of the artifacts this process has loaded: once is enough


class CompileArtifactsWarning(UserWarning):
    """A tuned config's compile artifacts are not used here (written by other software or for another device,
    or their file is missing): the model compiles from scratch."""


# --- where they were written ---------------------------------------------------------------------


def environment(device: torch.device | str) -> dict[str, str]:
    """What compiled code depends on here: torch's full version (its CUDA build in the local part), Triton's,
    and the GPU of ``device`` with its CUDA version and the ptxas Triton's keys name for it, or the CPU model for a
    CPU device."""
    device = torch.device(device)
    env = {"torch": str(torch.__version__)}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        env["triton"] = importlib.metadata.version("triton")
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = str(torch.version.cuda)
        if (ptxas := _ptxas_version(device)) is not None:
            env["ptxas"] = ptxas
    else:
        env[device.type] = cpu_model() if device.type == "cpu" else device.type
    return env


def _ptxas_version(device: torch.device) -> str | None:
    """The version of the ptxas whose version Triton's keys hold for ``device``'s GPU, after torch's choice of it
    (:func:`autotune.knobs.assembler.pin`): ``Build cuda_13.0.r13.0/compiler.36424714_0``. A kernel shipped under
    another is not found (the start compiles as without artifacts), so a start says which differs. None without Triton's
    NVIDIA backend or a ptxas to ask."""
    assembler.pin()
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version
    except ImportError:
        return None
    major, minor = torch.cuda.get_device_capability(device)
    try:
        return str(get_ptxas_version(major * 10 + minor)).strip().splitlines()[-1]
    except (OSError, RuntimeError, subprocess.CalledProcessError, IndexError):
        return None  # no ptxas found or it would not say: the other keys still compare


def differences(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``"torch 2.11.0+cu130 (here 2.13.0+cpu)"`` for each key on which ``here`` differs from ``recorded``.

    Versions are compared whole (a torch built for another CUDA writes other kernels); a device that one
    side names and the other does not (a GPU against a CPU) is a difference.
    """
    found = []
    for key in _ENV_KEYS:
        then, now = recorded.get(key), here.get(key)
        if then is None and now is None:
            continue
        if key in ("triton", "ptxas") and (then is None or now is None):
            continue  # one side without Triton installed (CPU kernels do not use it), or a file from before ptxas
        if str(then) != str(now):
            found.append(f"{_ENV_NAMES[key]} {then or 'none'} (here {now or 'none'})")
    return found


def _memory_format_name(memory_format: torch.memory_format) -> str:
    """``contiguous_format``: a memory format's name in ``torch``, where ``pickle`` then finds it."""
    return str(memory_format).removeprefix("torch.")


def stable_cache_keys() -> None:
    """Pickle torch's memory formats as ``torch.<name>`` in this process, whatever it imported first (see the
    module docstring), and name torch's own ``ptxas`` in Triton's keys (:func:`autotune.knobs.assembler.pin`): the
    compile caches' keys of a graph are then the same in the trial and in production. Call it before anything compiles;
    calling it again does nothing more."""
    copyreg.pickle(torch.memory_format, _memory_format_name)
    assembler.pin()


# --- what is recorded ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifacts:
    """A file of compile artifacts: its name (in the study's folder, or beside the tuned config), sha256,
    size, the env that wrote it, and what it holds (entries per cache, as torch's ``CacheInfo`` counts)."""

    file: str
    sha256: str
    bytes: int
    env: dict[str, str]
    entries: dict[str, int] = field(default_factory=dict)
    trial: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "sha256": self.sha256, "bytes": self.bytes, "env": dict(self.env)}
        if self.trial is not None:
            data["trial"] = self.trial
        if self.entries:
            data["entries"] = dict(self.entries)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> Artifacts:
        """Read a section (or a trial's record of one); ``where`` names it in the one-line error of a bad one."""
        if not isinstance(data, Mapping):
            raise AutotuneError(f"{where}: expected a mapping, got {type(data).__name__}")
        file, sha256, size, env = data.get("file"), data.get("sha256"), data.get("bytes"), data.get("env")
        if not isinstance(file, str) or not file or Path(file).name != file:
            raise AutotuneError(f"{where}.file: expected a file name (no folder), got {file!r}")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise AutotuneError(f"{where}.sha256: expected 64 hex digits, got {sha256!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise AutotuneError(f"{where}.bytes: expected a size in bytes, got {size!r}")
        if not isinstance(env, Mapping) or "torch" not in env:
            raise AutotuneError(f"{where}.env: expected the env that wrote them (torch, gpu or cpu ...), got {env!r}")
        trial = data.get("trial")
        entries = data.get("entries") or {}
        return cls(
            file,
            sha256,
            size,
            {str(k): str(v) for k, v in env.items() if v is not None},
            {str(k): int(v) for k, v in entries.items()} if isinstance(entries, Mapping) else {},
            int(trial) if isinstance(trial, int) and not isinstance(trial, bool) else None,
        )


def shipped_name(config_path: str | os.PathLike[str]) -> str:
    """The artifacts' file beside a tuned config: ``tuned.yaml`` -> ``tuned.compile-artifacts.bin``."""
    return Path(config_path).stem + SUFFIX


# --- the trial's side ----------------------------------------------------------------------------


def save(folder: str | os.PathLike[str], device: torch.device | str, since: float | None = None) -> Artifacts | None:
    """Save what this process compiled as ``<folder>/<sha256>.bin``; None when it compiled nothing.

    Call it in the process that compiled, after the compile (the artifacts live in its memory), and
    :func:`stable_cache_keys` before it. ``since``: when the process began its work (``time.time()``), for the
    Triton kernels it built as they ran (:func:`autotune.tuned.tritonfiles.collect`).
    """
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return None
    torch_data, info = saved
    triton = tritonfiles.collect(tritonfiles.triton_cache_dir(), since, torch_data)  # what torch leaves out
    data = tritonfiles.pack(torch_data, triton)
    digest = hashlib.sha256(data).hexdigest()
    name = f"{digest}.bin"
    target = Path(folder) / name
    if not (target.exists() and target.stat().st_size == len(data)):  # named by content: the same bytes once
        write_atomically(target, data)
    return Artifacts(name, digest, len(data), environment(device), _entries(info, triton))


# --- production's side ---------------------------------------------------------------------------


_REMEDY = f"export again, or delete the {SECTION} section to compile from scratch"


def read_verified(path: Path, sha256: str, recorded_in: str, remedy: str = _REMEDY) -> bytes:
    """The bytes of ``path``, refused (one-line AutotuneError, ending with ``remedy``) unless their sha256 is the
    one ``recorded_in`` holds."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AutotuneError(f"compile artifacts {path}: not found (named in {recorded_in})") from None
    except OSError as exc:
        raise AutotuneError(f"compile artifacts {path}: cannot read them ({exc.strerror or exc})") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise AutotuneError(
            f"compile artifacts {path.name}: sha256 {actual[:16]}... is not the {sha256[:16]}... that {recorded_in}"
            f" records: refusing to load compiled code that was changed ({remedy})"
        )
    return data


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_shipped` did: ``entries`` loaded (per cache) in ``seconds``, or why nothing was
    (``skipped``: the one line it warned)."""

    entries: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def loaded(self) -> bool:
        return self.skipped is None


def load_shipped(
    artifacts: Artifacts,
    folder: str | os.PathLike[str],
    device: torch.device | str,
    *,
    recorded_in: str,
    warn: bool = True,
    stacklevel: int = 1,
) -> Loaded:
    """Load ``artifacts`` (their file in ``folder``) into this process's compile caches, before it compiles.

    A file whose sha256 is not the recorded one raises :class:`AutotuneError` (one line). A missing file, or
    one written by other software or for another device, is not loaded: one :class:`CompileArtifactsWarning`
    line (unless ``warn`` is False: the caller said so already) and the model compiles from scratch.
    ``stacklevel`` is the warning's, counted from the caller (1: the line that called this).
    """
    path = Path(folder) / artifacts.file
    if not path.exists():
        return _skip(f"{recorded_in}: its compile artifacts {path.name} are not beside it", warn, stacklevel)
    data = read_verified(path, artifacts.sha256, recorded_in)
    changed = differences(artifacts.env, environment(device))
    if changed:
        reason = f"{recorded_in}: compile artifacts written by {'; '.join(changed)}: not loaded, compiling from scratch"
        return _skip(reason, warn, stacklevel)
    stable_cache_keys()  # the keys the trial computed (apply() and the trial process have done so already)
    if artifacts.sha256 in _loaded:
        return Loaded(dict(artifacts.entries))
    started = time.perf_counter()
    torch_data, triton = tritonfiles.unpack(data, recorded_in)
    info = torch.compiler.load_cache_artifacts(torch_data)
    if info is None:  # torch could not parse them (it logged why): nothing was written to the caches
        reason = f"{recorded_in}: torch could not read its compile artifacts: compiling from scratch"
        return _skip(reason, warn, stacklevel)
    tritonfiles.install(triton, tritonfiles.triton_cache_dir())
    _loaded.add(artifacts.sha256)
    return Loaded(_entries(info, triton), time.perf_counter() - started)


def _entries(info: Any, triton: dict[str, bytes]) -> dict[str, int]:
    """What a file of artifacts holds: entries per cache (torch's ``CacheInfo``), Triton's launchers and kernels."""
    return {**{kind: len(keys) for kind, keys in info.artifacts.items() if keys}, **tritonfiles.counts(triton)}


def _skip(reason: str, warn: bool, stacklevel: int) -> Loaded:
    if warn:
        warnings.warn(reason, CompileArtifactsWarning, stacklevel=stacklevel + 2)
    return Loaded(skipped=reason)
