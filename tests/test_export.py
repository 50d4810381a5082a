"""Tuned-config export and load over real sqlite studies, and production apply() on a tiny conv net."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
import yaml
from recorded_studies import add_trial, failed, make_info, make_study, ok_result

import autotune
from autotune import workloads
from autotune.errors import AutotuneError
from autotune.export import (
    SCHEMA_VERSION,
    EnvMismatchWarning,
    TunedConfig,
    current_env,
    export,
    load,
)
from autotune.records import StudyInfo
from autotune.results import Status, TrialResult
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


def here_env() -> dict[str, Any]:
    """A provenance env that matches this machine, so loading it does not warn."""
    return {k: v for k, v in current_env().items() if v is not None}


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


def write_config(path: Path, **changes: Any) -> Path:
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "workload": {"name": "resnet50", "preset": "tiny"},
        "knobs": {"precision": "bf16"},
        "provenance": {"env": here_env()},
    }
    data.update(changes)
    path.write_text(yaml.safe_dump(data))
    return path


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
    expected = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3, "GROUP_M": 8}
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


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AutotuneError, match=r"tuned config .*nope.yaml: not found"):
        load(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported (this autotune reads 1"),
        ({"schema_version": None}, "no schema_version (this autotune reads 1)"),
        ({"knobs": {"precision": "bf16", "warp_speed": 9}}, "unknown knob 'warp_speed'; knobs are: batch_size"),
        ({"knobs": {"precision": "fp8"}}, "knob precision='fp8' is not valid"),
        ({"knob": {"precision": "bf16"}}, "unknown section(s) knob"),
        ({"kernels": [1, 2]}, "kernels must be a mapping, got list"),
    ],
)
def test_load_errors_name_the_problem(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = write_config(tmp_path / "tuned.yaml", **changes)
    with pytest.raises(AutotuneError) as caught:
        load(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"tuned config {path}: ")


def test_load_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tuned.yaml"
    path.write_text("schema_version: 1\nknobs: {precision: bf16\n")
    with pytest.raises(AutotuneError, match=r"not valid YAML \(.* at line \d+\)$"):
        load(path)


def test_load_warns_when_measured_elsewhere(tmp_path: Path) -> None:
    env = {**here_env(), "torch": "2.0.0", "gpu": "NVIDIA H200"}
    path = write_config(tmp_path / "tuned.yaml", provenance={"env": env})
    with pytest.warns(EnvMismatchWarning) as caught:
        load(path)
    message = str(caught[0].message)
    assert message.startswith("tuned.yaml was measured on NVIDIA H200 / torch 2.0.0; this machine has ")
    assert f"torch {torch.__version__}" in message and message.endswith("re-tune for numbers that hold")


def test_load_is_quiet_on_the_same_machine(tmp_path: Path) -> None:
    env = {**here_env(), "torch": torch.__version__.split("+")[0] + "+cu999", "host": "elsewhere"}
    path = write_config(tmp_path / "tuned.yaml", provenance={"env": env})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autotune.load(path)  # the top-level, lazily imported entry point


def test_apply_trains_a_conv_net_as_the_trials_did(tmp_path: Path) -> None:
    knobs = {"precision": "bf16", "memory_format": "channels_last", "fused_optimizer": True, "compile_mode": "none"}
    path = write_config(tmp_path / "tuned.yaml", knobs={**knobs, "batch_size": 4})
    cfg = autotune.load(path)
    torch.manual_seed(0)
    work = workloads.build("resnet50", "tiny", {}, torch.device("cpu"))
    optimizer = torch.optim.AdamW(work.model.parameters(), lr=1e-3)
    model, step_ctx = cfg.apply(work.model, optimizer)
    assert step_ctx.autocast_dtype is torch.bfloat16 and step_ctx.channels_last_inputs
    assert optimizer.param_groups[0]["fused"] is True
    conv = next(p for p in model.parameters() if p.dim() == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last)
    before = conv.detach().clone()
    assert cfg.batch_size == 4
    for _ in range(3):
        inputs, targets = work.make_batch(cfg.batch_size, torch.device("cpu"))
        with step_ctx.autocast():
            loss = work.loss_fn(model(step_ctx.prepare_inputs(inputs)), targets)
        step_ctx.backward(loss)
        step_ctx.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        assert math.isfinite(float(loss.detach()))
    assert not torch.equal(before, conv.detach())
    assert conv.is_contiguous(memory_format=torch.channels_last)


def test_apply_takes_the_device_type_from_the_model() -> None:
    cfg = TunedConfig(knobs={"precision": "fp16"})
    _, step_ctx = cfg.apply(torch.nn.Linear(4, 4))
    assert step_ctx.device_type == "cpu" and step_ctx.scaler is not None


DATA_KNOBS = {"batch_size": 32, "num_workers": 2, "pin_memory": True, "prefetch_factor": 5, "persistent_workers": True}


def points(count: int = 128) -> torch.utils.data.TensorDataset:
    return torch.utils.data.TensorDataset(torch.randn(count, 4), torch.randint(0, 2, (count,)))


def test_dataloader_rebuilds_the_tuned_loader(tmp_path: Path) -> None:
    cfg = load(write_config(tmp_path / "tuned.yaml", knobs={**DATA_KNOBS, "non_blocking": True}))
    loader = cfg.dataloader(points(), device="cuda")
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor) == (32, 2, 5)
    assert loader.pin_memory and loader.persistent_workers and loader.drop_last
    assert isinstance(loader.sampler, torch.utils.data.RandomSampler)  # shuffled, as the trials were
    # Where the batches stay on a CPU, pinned memory would buy nothing: it is off.
    assert not cfg.dataloader(points(), device="cpu").pin_memory
    assert cfg.dataloader(points()).pin_memory is torch.cuda.is_available()


def test_dataloader_keyword_arguments_override_the_tuned_values(tmp_path: Path) -> None:
    cfg = TunedConfig(knobs=DATA_KNOBS)

    def collate(samples: list[Any]) -> list[Any]:
        return samples

    loader = cfg.dataloader(points(), device="cpu", batch_size=8, num_workers=0, shuffle=False, collate_fn=collate)
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (
        8,
        0,
        None,
        False,
    )
    assert isinstance(loader.sampler, torch.utils.data.SequentialSampler) and loader.collate_fn is collate
    assert len(next(iter(loader))) == 8


def test_dataloader_without_a_tuned_batch_size_asks_for_one() -> None:
    with pytest.raises(AutotuneError, match=r"no batch_size: pass dataloader\(dataset, batch_size=\.\.\.\)"):
        TunedConfig(knobs={"num_workers": 2}).dataloader(points())
    assert TunedConfig(knobs={"num_workers": 2}).dataloader(points(), batch_size=16).batch_size == 16


FINALIST_OPTIONS = {"coordinate_descent_tuning": True, "epilogue_fusion": False}


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


def test_load_names_a_bad_inductor_option(tmp_path: Path) -> None:
    path = write_config(tmp_path / "tuned.yaml", knobs={"compile_mode": "default", "inductor": {"max_autotun": True}})
    with pytest.raises(AutotuneError, match="max_autotun: unknown Inductor option"):
        load(path)


def test_apply_compiles_with_the_exported_inductor_options(tmp_path: Path) -> None:
    from torch._inductor import config

    seen: list[dict[str, Any]] = []

    def witness(graph: torch.fx.Graph) -> None:  # Inductor's post-grad hook: runs inside its compile
        seen.append({name: getattr(config, name) for name in FINALIST_OPTIONS})

    torch._dynamo.reset()  # compile afresh: a graph compiled earlier in this process would be reused
    cfg = load(write_config(tmp_path / "tuned.yaml", knobs={"compile_mode": "default", "inductor": FINALIST_OPTIONS}))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters())
    with config.patch(post_grad_custom_post_pass=witness):
        compiled, step_ctx = cfg.apply(model, optimizer)
        step_ctx.backward(compiled(torch.randn(4, 8)).square().mean())  # forward and backward compile here
        step_ctx.step()
    assert len(seen) == 2 and all(options == FINALIST_OPTIONS for options in seen)
    assert {name: getattr(config, name) for name in FINALIST_OPTIONS} != FINALIST_OPTIONS  # for that compile only


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
    model = workloads.build("gpt2", "tiny", {}, torch.device("cpu")).model
    assert isinstance(model, GPT)  # it names its 2 transformer blocks
    applied, step_ctx = cfg.apply(model, torch.optim.AdamW(model.parameters()))
    assert applied is model  # compiled in place: the same module, its blocks compiled (on their first call)
    assert step_ctx.blocks is not None and step_ctx.blocks.modules == tuple(model.blocks)
    assert all(block._compiled_call_impl is not None for block in model.blocks)
    assert model._compiled_call_impl is None and "compile_scope" not in step_ctx.noops
