"""Triton's cache files inside the compile artifacts (autotune.tuned.tritonfiles): the launchers and the kernels a
trial built as they ran, collected from a Triton cache folder, packed beside torch's bytes, unpacked and installed
where missing (a kernel's index pointing at its new folder); an entry that is not a place in Triton's cache is
refused in one line. The whole path through a trial, export and a production process: test_compile_artifacts.py."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import pytest
from triton_folders import NAME, add_kernel

from autotune.errors import AutotuneError
from autotune.tuned import tritonfiles

KEY = "3f" * 32
LAUNCHER = f"{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so"
UTILS = f"{'a1' * 32}/cuda_utils.cpython-312-x86_64-linux-gnu.so"
TORCH_BYTES = b"\x80\x04torch's own pickle"


def triton_folder(root: Path) -> Path:
    """A Triton cache folder: two launchers, and a kernel built before the trial began."""
    for relative, data in {LAUNCHER: b"\x7fELF launcher", UTILS: b"\x7fELF utils"}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    add_kernel(root, "b2" * 32, modified=time.time() - 3600)
    return root


def test_the_launchers_of_a_triton_folder_travel_with_torchs_bytes(tmp_path: Path) -> None:
    found = tritonfiles.collect(triton_folder(tmp_path / "trial"))
    assert found == {LAUNCHER: b"\x7fELF launcher", UTILS: b"\x7fELF utils"}  # without `since`, no kernel
    packed = tritonfiles.pack(TORCH_BYTES, found)
    assert tritonfiles.unpack(packed, "tuned.yaml") == (TORCH_BYTES, found)
    production = tmp_path / "production"
    assert tritonfiles.install(found, production) == 2
    assert (production / LAUNCHER).read_bytes() == b"\x7fELF launcher"
    (production / UTILS).write_bytes(b"built here")
    assert tritonfiles.install(found, production) == 0  # what the folder has is left as it is
    assert (production / UTILS).read_bytes() == b"built here"


def test_kernels_the_trial_built_as_they_ran_travel_and_point_at_their_new_folder(tmp_path: Path) -> None:
    folder = triton_folder(tmp_path / "trial")
    began = time.time() - 60
    bundled_key, built_key = "c3" * 32, "d4" * 32
    add_kernel(folder, bundled_key)  # built in the compile: torch's bytes carry it
    add_kernel(folder, built_key)  # built at its first launch (coordinate descent), after torch's bundle closed
    found = tritonfiles.collect(folder, began, TORCH_BYTES + bundled_key.encode())
    kernel_files = {name for name in found if not name.endswith(".so")}
    assert kernel_files == {f"{built_key}/{NAME}.cubin", f"{built_key}/{NAME}.json", f"{built_key}/__grp__{NAME}.json"}
    assert str(folder).encode() not in found[f"{built_key}/__grp__{NAME}.json"]  # no path of the trial's machine
    assert tritonfiles.counts(found) == {"triton_launchers": 2, "triton_kernels": 1}

    torch_data, files = tritonfiles.unpack(tritonfiles.pack(TORCH_BYTES, found), "tuned.yaml")
    assert torch_data == TORCH_BYTES
    production = tmp_path / "production"
    assert tritonfiles.install(files, production) == 5
    index = json.loads((production / built_key / f"__grp__{NAME}.json").read_text())
    assert index == {
        "child_paths": {f"{NAME}.{s}": str(production / built_key / f"{NAME}.{s}") for s in ("cubin", "json")}
    }
    assert all(
        Path(path).read_bytes() == (folder / built_key / name).read_bytes()
        for name, path in index["child_paths"].items()
        if name.endswith(".cubin")
    )


def test_a_kernel_a_tuned_config_names_travels_though_torchs_bytes_name_it(tmp_path: Path) -> None:
    """Coordinate descent's winner is built at run time, and Inductor's tuned config in torch's bytes names its key:
    named so, it is not in the bundle (a production start built 37 such kernels again on an H100), so it ships."""
    folder = triton_folder(tmp_path / "trial")
    began = time.time() - 60
    bundled_key, winner_key = "c3" * 32, "e5" * 32
    add_kernel(folder, bundled_key)
    add_kernel(folder, winner_key)
    tuned = json.dumps({"XBLOCK": 1024, "num_warps": 4, "found_by_coordesc": True, "triton_cache_hash": winner_key})
    found = tritonfiles.collect(folder, began, TORCH_BYTES + bundled_key.encode() + tuned.encode())
    assert {name.split("/")[0] for name in found if not name.endswith(".so")} == {winner_key}


def test_torchs_bytes_alone_stay_as_they_were(tmp_path: Path) -> None:
    assert tritonfiles.collect(tmp_path / "none", time.time()) == {}
    assert tritonfiles.pack(TORCH_BYTES, {}) == TORCH_BYTES  # a file shipped before Triton's files were: the same bytes
    assert tritonfiles.unpack(TORCH_BYTES, "tuned.yaml") == (TORCH_BYTES, {})
    assert tritonfiles.counts({}) == {}


def test_a_kind_past_the_limit_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = triton_folder(tmp_path)
    add_kernel(folder, "d4" * 32)
    monkeypatch.setattr(tritonfiles, "MAX_BYTES", 40)  # the launchers fit, the kernel's folder does not
    assert set(tritonfiles.collect(folder, time.time() - 60)) == {LAUNCHER, UTILS}
    monkeypatch.setattr(tritonfiles, "MAX_BYTES", 20)
    assert tritonfiles.collect(folder) == {}


def bundle(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        ({tritonfiles.TORCH_ENTRY: TORCH_BYTES, "triton/../../.bashrc.so": b"x"}, "'triton/../../.bashrc.so'"),
        ({tritonfiles.TORCH_ENTRY: TORCH_BYTES, f"triton/{KEY}/../x.so": b"x"}, "is not a Triton cache file"),
        ({tritonfiles.TORCH_ENTRY: TORCH_BYTES, f"inductor/{KEY}/x.so": b"x"}, "is not a Triton cache file"),
        ({tritonfiles.TORCH_ENTRY: TORCH_BYTES, f"triton/{KEY}/run.sh": b"x"}, "is not a Triton cache file"),
        ({f"triton/{LAUNCHER}": b"x"}, "not a file autotune wrote"),
    ],
)
def test_an_entry_that_is_not_a_place_in_tritons_cache_is_refused(entries: dict[str, bytes], fragment: str) -> None:
    with pytest.raises(AutotuneError, match=r"tuned\.yaml: its compile artifacts") as raised:
        tritonfiles.unpack(bundle(entries), "tuned.yaml")
    assert fragment in str(raised.value) and "\n" not in str(raised.value)
