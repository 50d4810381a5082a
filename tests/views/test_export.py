"""``autotune export`` over real sqlite studies: what it writes, and that load() and apply() read it back."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import torch
import yaml
from recorded_studies import add_trial, failed, make_info, make_study, ok_result
from tuned_files import FINALIST_OPTIONS, here_env

import autotune
from autotune import workloads
from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo
from autotune.tuned.file import load
from autotune.views.export import export
from autotune.workloads.gpt2 import GPT

STORAGE = "postgresql+psycopg2://tuner:s3cret@db.example:5432/autotune"
TUNED_KNOBS = {
    "batch_size": 256,
    "precision": "bf16",
    "memory_format": "channels_last",
    "compile_mode": "none",
    "cudnn_benchmark": None,  # left untouched: not written
    "cudnn_deterministic": None,
    "fused_optimizer": True,
    "matmul_precision": "auto",
}


@pytest.fixture
def info() -> StudyInfo:
    return make_info()


@pytest.fixture
def study(tmp_path: Path, info: StudyInfo) -> optuna.Study:
    s = make_study(tmp_path, info, name="resnet50-night")
    add_trial(s, info, ok_result(1000.0, **{**TUNED_KNOBS, "precision": "default", "batch_size": 128}), default=True)
    winner = ok_result(3250.0, 21.5, **TUNED_KNOBS)
    winner.env = here_env()
    remeasured = {"values": [3200.0, 3250.0, 3300.0], "median": 3250.0, "cv": 0.01, "metric": "throughput"}
    add_trial(s, info, winner, remeasured=remeasured, mlflow_run_id="abc123")
    add_trial(s, info, ok_result(2000.0, 8.0, **{**TUNED_KNOBS, "batch_size": 64}))
    add_trial(s, info, failed(Status.OOM, "CUDA out of memory", batch_size=1024))
    return s


def test_export_then_load_round_trip(tmp_path: Path, study: optuna.Study, info: StudyInfo) -> None:
    path = tmp_path / "out" / "tuned.yaml"
    written = export(study, info, path, storage=STORAGE)
    text = path.read_text()
    assert 'cfg = autotune.load("tuned.yaml")' in text
    assert "model, step_ctx = cfg.apply(model, optimizer)" in text
    assert "throughput 3,250 images/s (3.25x PyTorch defaults)" in text
    assert "s3cret" not in text
    assert not list(path.parent.glob(".tuned.yaml.*"))  # the temporary file was renamed, not left behind
    assert path.stat().st_mode & 0o777 == 0o644
    loaded = load(path)
    assert loaded == written
    assert loaded.knobs == {k: v for k, v in TUNED_KNOBS.items() if v is not None}
    assert loaded.batch_size == 256 and loaded.params == {} and loaded.kernels == {}
    assert loaded.workload == {"name": "resnet50", "preset": "full"}
    prov = loaded.provenance
    assert prov["study"] == "resnet50-night" and prov["trial"] == 1 and prov["mlflow_run_id"] == "abc123"
    assert prov["storage"] == "postgresql+psycopg2://tuner@db.example:5432/autotune"
    assert prov["metrics"]["throughput"] == 3250.0 and prov["metrics"]["peak_mem_gib"] == 21.5
    assert prov["metrics"]["remeasured"]["cv"] == 0.01 and prov["metrics"]["speedup_vs_default"] == 3.25
    assert prov["env"] == here_env() and prov["autotune_version"] == autotune.__version__
    assert prov["exported_at"].endswith("+00:00")


def test_export_with_a_rule(tmp_path: Path, study: optuna.Study, info: StudyInfo) -> None:
    config = export(study, info, tmp_path / "tuned.yaml", rule="peak_mem_gib <= 10")
    assert config.provenance["trial"] == 2 and config.knobs["batch_size"] == 64
    assert config.provenance["rule"] == "peak_mem_gib <= 10"
    with pytest.raises(AutotuneError, match="peak_mem_gib <= 1'"):
        export(study, info, tmp_path / "none.yaml", rule="peak_mem_gib <= 1")
    assert not (tmp_path / "none.yaml").exists()


def test_export_splits_workload_params_from_knobs(tmp_path: Path) -> None:
    info = make_info(workload="my_models:mlp")
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(10.0, precision="fp32", width=512, dropout=None))
    config = export(s, info, tmp_path / "tuned.yaml")
    assert config.knobs == {"precision": "fp32"} and config.params == {"width": 512}


def test_export_of_a_kernel_study(tmp_path: Path) -> None:
    info = StudyInfo(
        "autotune.workloads.triton_matmul:build", "tiny", "cuda", "x.yaml", "", (("throughput", "maximize"),)
    )
    s = make_study(tmp_path, info)
    block = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3, "dtype": "bf16"}
    metrics = {"throughput": 1.5, "throughput_unit": "TFLOP/s", "tflops": 1.5, "ms": 0.01}
    add_trial(s, info, TrialResult(Status.OK, None, block, metrics, here_env()))
    path = tmp_path / "kernels.yaml"
    export(s, info, path)
    config = load(path)
    expected: dict[str, int | str] = {
        "BLOCK_M": 32,
        "BLOCK_N": 64,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 3,
        "GROUP_M": 8,
    }
    expected["kernel"] = "tiled"  # the variant; records made before it existed ran the tiled kernel
    assert config.kernels == {"triton_matmul": {"64x64x64:bf16": expected}}
    assert config.kernel_config("triton_matmul", 64, 64, 64, torch.bfloat16) == expected
    assert config.kernel_config("triton_matmul", 64, 64, 64, "bf16") == expected
    assert config.kernel_config("triton_matmul", 128, 64, 64, "bf16") is None
    assert config.kernel_config("other", 64, 64, 64, "bf16") is None
    assert config.knobs == {}


def test_export_of_a_kernel_study_on_a_shape_of_its_own(tmp_path: Path) -> None:
    info = StudyInfo(
        "autotune.workloads.triton_matmul:build", "full", "cuda", "x.yaml", "", (("throughput", "maximize"),)
    )
    s = make_study(tmp_path, info)
    block = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "dtype": "bf16"}
    metrics = {"throughput": 700.0, "throughput_unit": "TFLOP/s", "tflops": 700.0, "ms": 0.2}
    add_trial(s, info, TrialResult(Status.OK, None, {**block, "M": 4096, "N": 4096, "K": 4096}, metrics, here_env()))
    config = export(s, info, tmp_path / "kernels.yaml")
    assert list(config.kernels["triton_matmul"]) == ["4096x4096x4096:bf16"]  # not the preset's 8192^3


def test_export_to_an_unwritable_place(tmp_path: Path, study: optuna.Study, info: StudyInfo) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(AutotuneError, match="cannot write"):
        export(study, info, tmp_path / "file" / "tuned.yaml")


def test_export_with_no_feasible_trial(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, failed(Status.CRASH, "segfault"))
    with pytest.raises(AutotuneError, match="no feasible ok trial"):
        export(s, info, tmp_path / "tuned.yaml")


def test_export_writes_a_finalists_inductor_options_as_a_mapping(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0, compile_mode="none"), default=True)
    finalist = ok_result(
        1500.0, compile_mode="default", inductor="coordinate_descent_tuning=true;epilogue_fusion=false"
    )
    add_trial(s, info, finalist)
    path = tmp_path / "tuned.yaml"
    export(s, info, path)
    assert yaml.safe_load(path.read_text())["knobs"]["inductor"] == FINALIST_OPTIONS
    cfg = load(path)
    assert cfg.to_knobs().inductor_options == FINALIST_OPTIONS


def test_compile_scope_blocks_goes_through_export_to_apply(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0, compile_mode="none", compile_scope="model"), default=True)
    add_trial(s, info, ok_result(1400.0, compile_mode="default", compile_scope="model"))
    add_trial(s, info, ok_result(1500.0, compile_mode="reduce-overhead", compile_scope="blocks"))
    path = tmp_path / "tuned.yaml"
    export(s, info, path)
    written = yaml.safe_load(path.read_text())["knobs"]
    assert (written["compile_mode"], written["compile_scope"]) == ("reduce-overhead", "blocks")
    cfg = load(path)
    assert cfg.to_knobs().compile_scope == "blocks"
    work = workloads.build("gpt2", "tiny", {}, torch.device("cpu"))
    assert isinstance(work, workloads.Workload)
    model = work.model
    assert isinstance(model, GPT)  # it names its 2 transformer blocks
    applied, step_ctx = cfg.apply(model, torch.optim.AdamW(model.parameters()))
    assert applied is model  # compiled in place: the same module, its blocks compiled (on their first call)
    assert step_ctx.blocks is not None and step_ctx.blocks.modules == tuple(model.blocks)
    assert all(block._compiled_call_impl is not None for block in model.blocks)
    assert model._compiled_call_impl is None and "compile_scope" not in step_ctx.noops


def test_the_recorded_version_is_the_project_s_also_from_a_source_tree() -> None:
    """Export records autotune.__version__ (a GPU box runs the package from its source tree, with no installed
    metadata to read): it must be pyproject's version."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert autotune.__version__ == pyproject["project"]["version"]
