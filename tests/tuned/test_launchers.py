"""Triton's host launchers inside the compile artifacts (autotune.tuned.launchers): collected from a Triton cache
folder, packed beside torch's bytes, unpacked and installed where missing; an entry that is not a launcher's place
is refused in one line. The whole path through a trial, export and a production process: test_compile_artifacts.py."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from autotune.errors import AutotuneError
from autotune.tuned import launchers

KEY = "3f" * 32
LAUNCHER = f"{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so"
UTILS = f"{'a1' * 32}/cuda_utils.cpython-312-x86_64-linux-gnu.so"
TORCH_BYTES = b"\x80\x04torch's own pickle"


def triton_folder(root: Path) -> Path:
    """A Triton cache folder: two launchers, and a kernel's files that are not launchers."""
    for relative, data in {LAUNCHER: b"\x7fELF launcher", UTILS: b"\x7fELF utils"}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    kernel = root / ("b2" * 32)
    kernel.mkdir()
    (kernel / "triton_poi_fused_add_0.cubin").write_bytes(b"cubin")
    (kernel / "triton_poi_fused_add_0.json").write_text("{}")
    return root


def test_the_launchers_of_a_triton_folder_travel_with_torchs_bytes(tmp_path: Path) -> None:
    found = launchers.collect(triton_folder(tmp_path / "trial"))
    assert found == {LAUNCHER: b"\x7fELF launcher", UTILS: b"\x7fELF utils"}  # not the kernels' own files
    packed = launchers.pack(TORCH_BYTES, found)
    assert launchers.unpack(packed, "tuned.yaml") == (TORCH_BYTES, found)
    production = tmp_path / "production"
    assert launchers.install(found, production) == 2
    assert (production / LAUNCHER).read_bytes() == b"\x7fELF launcher"
    (production / UTILS).write_bytes(b"built here")
    assert launchers.install(found, production) == 0  # what the folder has is left as it is
    assert (production / UTILS).read_bytes() == b"built here"


def test_torchs_bytes_alone_stay_as_they_were(tmp_path: Path) -> None:
    assert launchers.collect(tmp_path / "none") == {}
    assert launchers.pack(TORCH_BYTES, {}) == TORCH_BYTES  # a file shipped before launchers were: the same bytes
    assert launchers.unpack(TORCH_BYTES, "tuned.yaml") == (TORCH_BYTES, {})


def test_a_folder_of_launchers_past_the_limit_ships_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers, "MAX_BYTES", 20)
    assert launchers.collect(triton_folder(tmp_path)) == {}


def bundle(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        ({launchers.TORCH_ENTRY: TORCH_BYTES, "triton/../../.bashrc.so": b"x"}, "'triton/../../.bashrc.so'"),
        ({launchers.TORCH_ENTRY: TORCH_BYTES, f"inductor/{KEY}/x.so": b"x"}, "is not a Triton launcher"),
        ({launchers.TORCH_ENTRY: TORCH_BYTES, f"triton/{KEY}/kernel.cubin": b"x"}, "is not a Triton launcher"),
        ({f"triton/{LAUNCHER}": b"x"}, "not a file autotune wrote"),
    ],
)
def test_an_entry_that_is_not_a_launchers_place_is_refused(entries: dict[str, bytes], fragment: str) -> None:
    with pytest.raises(AutotuneError, match=r"tuned\.yaml: its compile artifacts") as raised:
        launchers.unpack(bundle(entries), "tuned.yaml")
    assert fragment in str(raised.value) and "\n" not in str(raised.value)
