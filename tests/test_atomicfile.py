"""Files written whole or not at all (:mod:`autotune.atomicfile`), on a real disk that is full: the user's files
and a compile cache's."""

from __future__ import annotations

from pathlib import Path

import pytest
from tmpfs import fill, mounted_tmpfs

from autotune.atomicfile import replaced_atomically, write_atomically, write_cache_file
from autotune.errors import AutotuneError


def test_a_file_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "tuned.yaml"
    write_atomically(target, "first\n")
    write_atomically(target, "second\n")
    assert target.read_text() == "second\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in target.parent.iterdir()] == ["tuned.yaml"]


def test_on_a_full_disk_the_old_file_stays_and_nothing_else(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "1m") as disk:
        target = disk / "tuned.yaml"
        target.write_text("the config that was there\n")
        ballast = fill(disk)
        with pytest.raises(AutotuneError, match=f"cannot write {target}: No space left on device"):
            write_atomically(target, "x" * 100_000)
        assert target.read_text() == "the config that was there\n"
        assert sorted(p.name for p in disk.iterdir()) == sorted([target.name, ballast.name])


def test_a_writer_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "trace.json"
    with pytest.raises(ValueError, match="a bug"), replaced_atomically(target) as temporary:
        temporary.write_text("{half a trace")
        raise ValueError("a bug in the writer")
    assert list(tmp_path.iterdir()) == []


def test_a_cache_file_is_written_whole_and_replaces_what_was_there(tmp_path: Path) -> None:
    target = tmp_path / "kernel.cubin"
    write_cache_file(target, b"first")
    write_cache_file(target, b"\x7fELF" + bytes(range(256)) * 4096)  # a megabyte: os.write may take it in parts
    assert target.read_bytes() == b"\x7fELF" + bytes(range(256)) * 4096
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in tmp_path.iterdir()] == ["kernel.cubin"]


def test_a_cache_file_on_a_full_disk_names_itself_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "1m") as disk:
        ballast = fill(disk)
        target = disk / "kernel.cubin"
        with pytest.raises(AutotuneError, match=f"cannot write {target}: No space left on device"):
            write_cache_file(target, b"x" * 100_000)
        assert [p.name for p in disk.iterdir()] == [ballast.name]
