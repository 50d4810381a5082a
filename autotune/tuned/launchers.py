"""Triton's host launchers, shipped inside the compile artifacts: the part of a production start torch leaves out.

Triton calls each compiled kernel through a small C launcher that it builds with the host's C compiler, one per
kernel signature, and keeps in its cache folder as ``<key>/<name><EXT_SUFFIX>`` (the key hashed from the launcher's
source: :func:`triton.runtime.build._compile_so`). Inductor's static launcher makes them unnecessary, but where it is
off (the coordinate-descent workaround of :func:`autotune.inductor.cache_workarounds`) every kernel needs one, and
torch's artifacts (``save_cache_artifacts``) carry the cubins, not the launchers. On an H100 (BENCHMARKS.md, seventh
session) building them was 38.1 of the 51.5 s that ResNet-50's coordinate-descent finalist took to start with its
artifacts (26 launchers), and 12.8 of GPT-2's 19.6 s (16); with them in the cache folder the starts took 12.9 s and
6.9 s.

So a trial ships the launchers of its study's Triton folder with its artifacts: the file becomes a zip of torch's
bytes (``torch-artifacts.bin``, unchanged) and ``triton/<key>/<name>.so`` entries (:func:`pack`); loading unpacks
it (:func:`unpack`), writes the launchers into this process's Triton folder where missing (:func:`install`) and hands
torch its bytes. A file of torch's bytes alone (shipped before) loads as before. The launchers are native code, as
the cubins and pickled graphs beside them: the whole file's sha256 is checked before any of it is used, and an entry
whose name is not a launcher's place in the folder is refused. A launcher built for another Python has another file
name (its ``EXT_SUFFIX``) and is simply not found; one that cannot load there (another C library) Triton builds again.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path

from autotune.atomicfile import write_atomically
from autotune.errors import AutotuneError

__all__ = ["MAX_BYTES", "TORCH_ENTRY", "collect", "install", "pack", "triton_cache_dir", "unpack"]

TORCH_ENTRY = "torch-artifacts.bin"  # torch's own bytes, as save_cache_artifacts() returned them
_PREFIX = "triton/"
# <key>/<name>.so: Triton's cache keys are hex digests (sha256 in base32 in some versions: letters and digits)
_LAUNCHER = re.compile(r"[A-Za-z0-9_-]{16,128}/[A-Za-z0-9_.-]+\.so")
MAX_BYTES = 64 * 2**20  # launchers are tens of kB each: a folder past this is not a study's, and is left out


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


def collect(folder: Path | None) -> dict[str, bytes]:
    """The launchers (``<key>/<name>.so``) in a Triton cache folder, by their path in it; {} without any, or when
    they add up to more than :data:`MAX_BYTES`."""
    if folder is None or not folder.is_dir():
        return {}
    found: dict[str, bytes] = {}
    total = 0
    for path in sorted(folder.glob("*/*.so")):
        relative = path.relative_to(folder).as_posix()
        if not _LAUNCHER.fullmatch(relative):
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_BYTES:
            return {}
        found[relative] = data
    return found


def pack(torch_data: bytes, launchers: dict[str, bytes]) -> bytes:
    """One file: torch's bytes and the launchers; torch's bytes alone when there are none."""
    if not launchers:
        return torch_data
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(TORCH_ENTRY, torch_data)
        for relative, data in sorted(launchers.items()):
            bundle.writestr(_PREFIX + relative, data)
    return buffer.getvalue()


def unpack(data: bytes, where: str) -> tuple[bytes, dict[str, bytes]]:
    """Torch's bytes and the launchers of a file :func:`pack` wrote (a file of torch's bytes alone: those and {});
    ``where`` names it in the one-line error of an entry that is not a launcher's place."""
    if not data.startswith(b"PK\x03\x04"):  # torch's own bytes begin with a pickle's opcode, never with this
        return data, {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            torch_data = bundle.read(TORCH_ENTRY)
            launchers = {}
            for name in bundle.namelist():
                if name == TORCH_ENTRY:
                    continue
                relative = name.removeprefix(_PREFIX)
                if not name.startswith(_PREFIX) or not _LAUNCHER.fullmatch(relative):
                    raise AutotuneError(f"{where}: its compile artifacts hold {name!r}, which is not a Triton launcher")
                launchers[relative] = bundle.read(name)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise AutotuneError(f"{where}: its compile artifacts are not a file autotune wrote ({exc})") from None
    return torch_data, launchers


def install(launchers: dict[str, bytes], folder: Path | None) -> int:
    """Write the launchers into a Triton cache folder where they are missing; how many were written."""
    if folder is None:
        return 0
    written = 0
    for relative, data in launchers.items():
        target = folder / relative
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data)
        written += 1
    return written
