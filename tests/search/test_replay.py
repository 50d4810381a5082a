"""Replaying recorded GPU measurements: loading, matching, status mapping, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult
from autotune.search.replay import ReplayRecords

H200_RECORDS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "h200_triton_matmul_8192.json"
OOR_TEXT = "OutOfResources: out of resource: shared memory, Required: 245760, Hardware limit: 232448."


def _params(m: int, n: int, k: int = 64) -> dict[str, int]:
    return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}


RECORDS: list[dict[str, Any]] = [
    {"params": _params(128, 128), "status": "ok", "ms": 1.8, "tflops": 600.0},
    {"params": _params(256, 128), "status": "ok", "ms": 1.5, "tflops": 730.0},
    {"params": _params(64, 256, 128), "status": "out_of_resources", "error": OOR_TEXT},
    {"params": _params(64, 64), "status": "timeout"},
    {"params": _params(128, 128), "status": "ok", "ms": 9.9, "tflops": 1.0},  # a duplicate: ignored
]


def _write(tmp_path: Path, data: Any, name: str = "records.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def replay(tmp_path: Path) -> ReplayRecords:
    device = {"gpu": "NVIDIA H200", "triton": "3.6.0"}
    return ReplayRecords.load(_write(tmp_path, {"what": "test", "device": device, "records": RECORDS}))


def test_load_object_form(replay: ReplayRecords) -> None:
    assert len(replay) == 4
    assert replay.duplicates == 1
    assert replay.param_names == ("BLOCK_K", "BLOCK_M", "BLOCK_N")
    assert replay.meta == {"what": "test"}
    assert replay.env == {"gpu": "NVIDIA H200", "triton": "3.6.0", "replay": replay.source}


def test_load_bare_list(tmp_path: Path) -> None:
    path = _write(tmp_path, RECORDS[:2])
    replay = ReplayRecords.load(path)
    assert len(replay) == 2
    assert replay.lookup(_params(128, 128)).env == {"replay": str(path)}


def test_lookup_ok_record(replay: ReplayRecords) -> None:
    result = replay.lookup(_params(256, 128))
    assert result.status is Status.OK
    assert result.reason is None
    assert result.metrics == {"ms": 1.5, "tflops": 730.0, "throughput": 730.0, "throughput_unit": "TFLOP/s"}
    assert result.env["gpu"] == "NVIDIA H200"
    assert TrialResult.from_dict(json.loads(result.to_json())) == result


def test_first_of_duplicates_wins(replay: ReplayRecords) -> None:
    assert replay.lookup(_params(128, 128)).metrics["tflops"] == 600.0


def test_extra_params_are_ignored_and_kept_in_the_result(replay: ReplayRecords) -> None:
    params = {**_params(256, 128), "num_warps": 8, "GROUP_M": 8, "dtype": "bf16"}
    result = replay.lookup(params)
    assert result.ok
    assert result.params == params


def test_numbers_match_by_value(replay: ReplayRecords) -> None:
    assert replay.lookup({"BLOCK_M": 256.0, "BLOCK_N": 128, "BLOCK_K": 64.0}).ok


@pytest.mark.parametrize("value", ["256", True, [256]])
def test_strings_bools_and_lists_never_match_numbers(replay: ReplayRecords, value: Any) -> None:
    params = {**_params(256, 128), "BLOCK_M": value}
    assert params not in replay
    with pytest.raises(AutotuneError, match="no record"):
        replay.lookup(params)


def test_out_of_resources_is_oom_with_the_error_text(replay: ReplayRecords) -> None:
    result = replay.lookup(_params(64, 256, 128))
    assert result.status is Status.OOM
    assert result.reason == OOR_TEXT
    assert result.metrics == {}


def test_other_statuses_map_to_themselves(replay: ReplayRecords) -> None:
    result = replay.lookup(_params(64, 64))
    assert result.status is Status.TIMEOUT
    assert result.reason == "recorded as timeout"


def test_missing_configuration_names_it(replay: ReplayRecords) -> None:
    with pytest.raises(AutotuneError, match=r"no record for configuration BLOCK_K=64, BLOCK_M=32, BLOCK_N=32"):
        replay.lookup(_params(32, 32))


def test_missing_param_names_it_as_absent(replay: ReplayRecords) -> None:
    with pytest.raises(AutotuneError, match="BLOCK_K='<absent>'"):
        replay.lookup({"BLOCK_M": 128, "BLOCK_N": 128})


def test_best_and_values(replay: ReplayRecords) -> None:
    assert replay.best("tflops")["params"] == _params(256, 128)
    assert replay.best("throughput", "maximize")["params"] == _params(256, 128)
    assert replay.best("ms", "minimize")["params"] == _params(256, 128)
    records = list(replay.values())
    assert [r["status"] for r in records] == ["ok", "ok", "out_of_resources", "timeout"]
    records[0]["params"]["BLOCK_M"] = 1  # copies: the replay is unchanged
    assert replay.lookup(_params(128, 128)).ok


def test_best_errors(replay: ReplayRecords) -> None:
    with pytest.raises(AutotuneError, match="no ok record has metric 'energy'"):
        replay.best("energy")
    with pytest.raises(ValueError, match="direction='up'"):
        replay.best("tflops", "up")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"records": {}}', "expected a list of records or an object with a 'records' list"),
        ("42", "expected a list of records"),
        ('{"device": [], "records": []}', "'device' must be an object"),
        ('[{"status": "ok"}]', "record 0: expected an object with a 'params' object"),
        (
            '[{"params": {"BLOCK_M": 64}, "status": "ok"}, {"params": {}, "status": "melted"}]',
            "record 1: unknown status 'melted'",
        ),
        (
            '[{"params": {"BLOCK_M": [64]}, "status": "ok"}]',
            "record 0: parameter 'BLOCK_M': list [64] is not a scalar",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(AutotuneError) as caught:
        ReplayRecords.load(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AutotuneError, match=r"nowhere\.json: not found"):
        ReplayRecords.load(tmp_path / "nowhere.json")


@pytest.mark.skipif(not H200_RECORDS.exists(), reason=f"{H200_RECORDS} is not there")
def test_h200_file() -> None:
    replay = ReplayRecords.load(H200_RECORDS)
    assert (len(replay), replay.duplicates) == (108, 0)
    assert replay.param_names == ("BLOCK_K", "BLOCK_M", "BLOCK_N", "num_stages", "num_warps")
    best = replay.best("throughput")
    assert best["status"] == "ok"
    assert replay.lookup({**best["params"], "GROUP_M": 8}).metrics["throughput_unit"] == "TFLOP/s"
    statuses = {replay.lookup(r["params"]).status for r in replay.values()}
    assert statuses == {Status.OK, Status.OOM}
