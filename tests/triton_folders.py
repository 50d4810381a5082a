"""A Triton cache folder's kernel, as Triton writes it, for tests of what the compile artifacts carry."""

from __future__ import annotations

import json
import os
from pathlib import Path

NAME = "triton_poi_fused_add_0"  # the kernel's name in its files


def add_kernel(root: Path, key: str, modified: float | None = None) -> Path:
    """A kernel's folder ``root/key``: its cubin, its metadata, intermediate forms and Triton's index of their
    absolute paths; ``modified``: the files' modification time (default: now)."""
    kernel = root / key
    kernel.mkdir(parents=True)
    (kernel / f"{NAME}.cubin").write_bytes(b"\x7fELF cubin " + key.encode())
    (kernel / f"{NAME}.json").write_text(json.dumps({"name": NAME, "hash": key}))
    for form in ("source", "ttir", "llir", "ptx"):  # the intermediate forms Triton keeps beside the binary
        (kernel / f"{NAME}.{form}").write_text(f"{form} of {key}")
    paths = {f"{NAME}.{suffix}": str(kernel / f"{NAME}.{suffix}") for suffix in ("cubin", "json", "ptx", "llir")}
    (kernel / f"__grp__{NAME}.json").write_text(json.dumps({"child_paths": paths}))
    if modified is not None:
        for path in kernel.iterdir():
            os.utime(path, (modified, modified))
    return kernel
