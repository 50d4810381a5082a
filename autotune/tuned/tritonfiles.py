"""Triton's cache files that torch's compile artifacts leave out: its host launchers, and kernels built as they ran.

Torch's artifacts (``save_cache_artifacts``) carry the Triton kernels Inductor built while it compiled (its
``TritonBundler``), not two kinds of file a production start may need, which it then builds again, one after
another:

- **launchers.** Triton calls each compiled kernel through a small C launcher that it builds with the host's C
  compiler, one per kernel signature, and keeps in its cache folder as ``<key>/<name><EXT_SUFFIX>`` (the key hashed
  from the launcher's source). Inductor's static launcher makes them unnecessary, but where it is off (the
  coordinate-descent workaround of :func:`autotune.knobs.inductor.cache_workarounds`) every kernel needs one. All of the
  Triton folder's launchers are shipped (tens of kB each).
- **kernels built at run time.** Coordinate descent tunes a kernel at its first launch, after the compile, and builds
  each block size it tries then; the winner's cubin is in the Triton folder, and the tuned config in Inductor's
  cache names it, but the bundle was closed before it was built. So the kernel folders (``<key>/``: the cubin, its
  metadata, Triton's ``__grp__`` index of them; not the intermediate forms Triton keeps beside them, which loading
  a kernel does not need) that this process wrote (modified since ``since``)
  are shipped as well, except those torch's bytes carry: the bundle records each kernel by its key. A tuned config
  in those bytes names its winner's key too (``"triton_cache_hash"``), so a key named there is shipped whatever
  else names it. On an H100 (BENCHMARKS.md) GPT-2's coordinate-descent finalist shipped 292 such folders beside
  torch's 211 kernels (17.2 MB in all, every block size tried) and started in 12.7 s, against 14.4 s with the
  launchers alone and 6.1 s from warm cache folders. Such a cold start, profiled, built 37 kernels again
  (``make_cubin``, in ``async_compile.precompile``: 7.4 s against 0.4 s warm), and ResNet-50's 315 whose keys none
  of the trial's 1249 kernel folders has (47.3 s, 15.9 s warm; kernels built again under another key:
  :mod:`autotune.knobs.assembler`). Every kernel folder this process wrote ships, not only the winners tuned configs
  name: shipping only those (80 of ResNet-50's 1,084 on an H200) made its start build 126 kernels from source
  (31-39 s against 12-19 s).

The file becomes a zip of torch's bytes (``torch-artifacts.bin``, unchanged) and ``triton/<key>/<name>`` entries
(:func:`pack`); loading unpacks it (:func:`unpack`), writes the files into this process's Triton folder where
missing (:func:`install`) and hands torch its bytes. A file of torch's bytes alone (shipped before) loads as
before. These are native code, as the cubins and pickled graphs beside them: the whole file's sha256 is checked
before any of it is used, and an entry whose name is not a place in Triton's cache is refused. A launcher built for
another Python has another file name (its ``EXT_SUFFIX``) and is simply not found; one that cannot load there
(another C library) Triton builds again.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path

from autotune.atomicfile import write_cache_file
from autotune.errors import AutotuneError

__all__ = [
    "KERNEL_DIR",
    "MAX_BYTES",
    "TORCH_ENTRY",
    "collect",
    "counts",
    "install",
    "pack",
    "triton_cache_dir",
    "unpack",
]

TORCH_ENTRY = "torch-artifacts.bin"  # torch's own bytes, as save_cache_artifacts() returned them
_PREFIX = "triton/"
_GROUP = "__grp__"  # Triton's index of one kernel's files (absolute paths), written last
# <key>/<name>: Triton's cache keys are hex digests (sha256 in base32 in some versions: letters and digits); a name
# that does not begin with a dot, with a suffix Triton's cache writes (a launcher's .so, a kernel's forms and metadata)
_PLACE = re.compile(
    r"[A-Za-z0-9_-]{16,128}/[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(so|json|cubin|hsaco|zebin|spv|ptx|ttir|ttgir|llir|amdgcn|source)"
)
# What Triton reads of a kernel's folder on a cache hit: its metadata (JSON), its index and its binary (a cubin on
# NVIDIA). Its intermediate forms (source, TTIR, TTGIR, LLVM IR, PTX) are read into memory only to be kept there:
# ResNet-50's coordinate-descent finalist built 1249 kernel folders, 219 MB with their forms (34 MB of cubins): past
# MAX_BYTES, none would ship.
_LOADED = frozenset({".json", ".cubin", ".hsaco", ".zebin", ".spv"})
# A tuned config's winner in torch's bytes (Inductor's autotune entries are JSON): its kernel's Triton cache key
_TUNED_KERNEL = re.compile(rb'"triton_cache_hash":\s*"([A-Za-z0-9_-]{16,128})"')
KERNEL_DIR = b"[autotune:kernel-folder]"  # stands for a kernel's folder in its JSON files while shipped
# Launchers are tens of kB each, a kernel's folder a few hundred: past this, a kind is left out (the start builds them)
MAX_BYTES = 64 * 2**20


def triton_cache_dir() -> Path | None:
    """Where Triton keeps its cache in this process: ``TRITON_CACHE_DIR``, else Triton's default; None without
    Triton."""
    if folder := os.environ.get("TRITON_CACHE_DIR"):
        return Path(folder)
    try:
        from triton import knobs  # Triton 3.4 and later
    except ImportError:
        return None
    return Path(knobs.cache.dir)


def collect(folder: Path | None, since: float | None = None, bundled: bytes = b"") -> dict[str, bytes]:
    """The files of a Triton cache folder that torch's bytes (``bundled``) leave out, by their path in it: every
    launcher, and with ``since`` (a ``time.time()`` stamp) the kernel folders modified since then whose key
    ``bundled`` does not name, or names as a tuned config's winner. {} without a folder; a kind past
    :data:`MAX_BYTES` is left out."""
    if folder is None or not folder.is_dir():
        return {}
    launchers = {_relative(p, folder): p for p in sorted(folder.glob("*/*.so"))}
    found = _within_limit({name: p.read_bytes() for name, p in launchers.items() if _PLACE.fullmatch(name)})
    kernels: dict[str, bytes] = {}
    if since is not None:
        tuned = set(_TUNED_KERNEL.findall(bundled))
        for kernel in sorted(p for p in folder.iterdir() if p.is_dir()):
            # A study's folder holds every trial's kernels: the cheap test first, and the search through torch's
            # bytes (megabytes) only for the few this process built
            key = kernel.name.encode()
            if _built_since(kernel, since) and (key in tuned or key not in bundled):
                kernels.update(_kernel_files(kernel, folder))
    return {**found, **_within_limit(kernels)}


def counts(files: dict[str, bytes]) -> dict[str, int]:
    """How many launchers and kernel folders ``files`` holds (``triton_launchers``, ``triton_kernels``), those
    there are."""
    launchers = sum(1 for name in files if name.endswith(".so"))
    kernels = len({name.split("/")[0] for name in files if not name.endswith(".so")})
    found = {"triton_launchers": launchers, "triton_kernels": kernels}
    return {kind: n for kind, n in found.items() if n}


def pack(torch_data: bytes, files: dict[str, bytes]) -> bytes:
    """One file: torch's bytes and Triton's; torch's bytes alone when there are none."""
    if not files:
        return torch_data
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(TORCH_ENTRY, torch_data)
        for relative, data in sorted(files.items()):
            bundle.writestr(_PREFIX + relative, data)
    return buffer.getvalue()


def unpack(data: bytes, where: str) -> tuple[bytes, dict[str, bytes]]:
    """Torch's bytes and Triton's files of a file :func:`pack` wrote (a file of torch's bytes alone: those and {});
    ``where`` names it in the one-line error of an entry that is not a place in Triton's cache."""
    if not data.startswith(b"PK\x03\x04"):  # torch's own bytes begin with a pickle's opcode, never with this
        return data, {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            torch_data = bundle.read(TORCH_ENTRY)
            files = {}
            for name in bundle.namelist():
                if name == TORCH_ENTRY:
                    continue
                relative = name.removeprefix(_PREFIX)
                if not name.startswith(_PREFIX) or not _PLACE.fullmatch(relative):
                    raise AutotuneError(
                        f"{where}: its compile artifacts hold {name!r}, which is not a Triton cache file"
                    )
                files[relative] = bundle.read(name)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise AutotuneError(f"{where}: its compile artifacts are not a file autotune wrote ({exc})") from None
    return torch_data, files


def install(files: dict[str, bytes], folder: Path | None) -> int:
    """Write Triton's files into its cache folder where they are missing, each kernel's index last (Triton reads a
    kernel from its index); how many were written."""
    if folder is None:
        return 0
    missing = {relative: data for relative, data in files.items() if not (folder / relative).exists()}
    for kernel in {(folder / relative).parent for relative in missing}:  # each folder once, not once a file
        try:
            kernel.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AutotuneError(f"cannot write {kernel}: {exc.strerror or exc}") from None
    for relative, data in sorted(missing.items(), key=lambda item: _GROUP in item[0]):
        target = folder / relative
        if relative.endswith(".json"):
            data = data.replace(KERNEL_DIR, str(target.parent).encode())
        write_cache_file(target, data)  # a cache's file: whole for readers, not flushed (rebuilt when lost)
    return len(missing)


def _relative(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def _built_since(folder: Path, since: float) -> bool:
    """Whether ``folder`` is a kernel's (it has Triton's index) with a file modified since ``since``."""
    files = [p for p in folder.iterdir() if p.is_file()]
    is_kernel = any(p.name.startswith(_GROUP) and p.suffix == ".json" for p in files)
    return is_kernel and any(p.stat().st_mtime >= since for p in files)


def _kernel_files(kernel: Path, folder: Path) -> dict[str, bytes]:
    """A kernel folder's files that Triton loads (:data:`_LOADED`), its index listing only those, their JSON with the
    folder's path as :data:`KERNEL_DIR`; {} where one is not a place in Triton's cache, its JSON holds the
    placeholder already (it could not be told from the path), or its index cannot be read."""
    files: dict[str, bytes] = {}
    index: tuple[str, bytes] | None = None
    for path in sorted(p for p in kernel.iterdir() if p.is_file() and p.suffix in _LOADED):
        relative, data = _relative(path, folder), path.read_bytes()
        if not _PLACE.fullmatch(relative) or KERNEL_DIR in data:
            return {}
        if path.name.startswith(_GROUP):
            index = (relative, data)
        else:
            files[relative] = data.replace(str(kernel).encode(), KERNEL_DIR) if path.suffix == ".json" else data
    if index is None:
        return {}
    try:
        group = json.loads(index[1])
        group["child_paths"] = {
            name: path for name, path in group["child_paths"].items() if f"{kernel.name}/{name}" in files
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}
    files[index[0]] = json.dumps(group).encode().replace(json.dumps(str(kernel))[1:-1].encode(), KERNEL_DIR)
    return files


def _within_limit(files: dict[str, bytes]) -> dict[str, bytes]:
    return files if sum(len(data) for data in files.values()) <= MAX_BYTES else {}
