"""Tuned knobs handed to the real transformers.TrainingArguments / Trainer and lightning.Trainer, on the CPU."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning
import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import Trainer, TrainingArguments
from transformers.trainer_pt_utils import AcceleratorConfig
from transformers.training_args import OptimizerNames

from autotune.errors import AutotuneError
from autotune.knobs import Knobs
from autotune.tuned.frameworks import FrameworkWarning, hf_training_args, lightning_trainer_kwargs

# A winner that a CPU can run in both frameworks: every setting but torch.compile (20 s to build on a CPU) runs.
TUNED: dict[str, Any] = {
    "batch_size": 4,
    "precision": "bf16",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "cudnn_benchmark": None,
    "cudnn_deterministic": None,
    "fused_optimizer": True,
    "matmul_precision": "auto",
    "num_workers": 2,
    "pin_memory": True,
    "prefetch_factor": 3,
    "persistent_workers": True,
    "non_blocking": True,
    "gpu_prefetch": False,
}
# Every knob at PyTorch's default, written out as an export writes it.
DEFAULTS: dict[str, Any] = Knobs().to_params()
LISTED_KERNEL = "user_kernels:scaled_add"
KERNELS = {LISTED_KERNEL: {"kwargs": {"BLOCK": 128}, "num_warps": 4, "num_stages": 2}, "triton_matmul": {}}
# torch.backends as these tests use it: its generic fp32_precision setting is missing from torch's stubs.
_BACKENDS: Any = torch.backends


@pytest.fixture(autouse=True)
def restore_backend_flags() -> Iterator[None]:
    """Lightning's benchmark= and TrainingArguments' tf32= set process-wide flags: later tests must not see them."""
    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, _BACKENDS.fp32_precision)
    yield
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, _BACKENDS.fp32_precision = saved


def framework_warnings(convert: Any, knobs: dict[str, Any], **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
    """``convert(knobs)`` and the FrameworkWarnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = convert(knobs, **kwargs)
    return result, [w.message for w in caught if issubclass(w.category, FrameworkWarning)]


def hf_args(tmp_path: Path, **kwargs: Any) -> TrainingArguments:
    # use_cpu: the test runs on the CPU even where a GPU exists; it is also what bf16 needs on a CPU.
    return TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", **kwargs)


def lightning_trainer(tmp_path: Path, **kwargs: Any) -> lightning.Trainer:
    return lightning.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        **kwargs,
    )


# --- Hugging Face ----------------------------------------------------------------------------------


def test_hf_training_args_carry_every_tuned_setting(tmp_path: Path) -> None:
    kwargs, warned = framework_warnings(hf_training_args, {**TUNED, "compile_mode": "max-autotune"})
    assert warned == []  # TrainingArguments expresses all of them
    assert kwargs == {
        "per_device_train_batch_size": 4,
        "bf16": True,
        "torch_compile": True,
        "torch_compile_mode": "max-autotune",
        "optim": "adamw_torch_fused",
        "dataloader_num_workers": 2,
        "dataloader_pin_memory": True,
        "dataloader_prefetch_factor": 3,
        "dataloader_persistent_workers": True,
        "accelerator_config": {"non_blocking": True},
    }
    args = hf_args(tmp_path, **kwargs)
    assert (args.per_device_train_batch_size, args.bf16, args.optim) == (4, True, OptimizerNames.ADAMW_TORCH_FUSED)
    assert (args.torch_compile, args.torch_compile_mode) == (True, "max-autotune")
    assert (args.dataloader_num_workers, args.dataloader_prefetch_factor, args.dataloader_persistent_workers) == (
        2,
        3,
        True,
    )
    assert isinstance(args.accelerator_config, AcceleratorConfig) and args.accelerator_config.non_blocking is True


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({"precision": "fp16"}, {"fp16": True}),
        ({"precision": "fp32"}, {"tf32": False}),
        ({"precision": "fp32", "matmul_precision": "highest"}, {"tf32": False}),
    ],
)
def test_hf_precisions_that_a_cpu_accepts(tmp_path: Path, knobs: dict[str, Any], expected: dict[str, Any]) -> None:
    kwargs, warned = framework_warnings(hf_training_args, knobs)
    assert (kwargs, warned) == (expected, [])
    args = hf_args(tmp_path, **kwargs)
    assert all(getattr(args, name) == value for name, value in expected.items())


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({"precision": "tf32"}, {"tf32": True}),
        ({"precision": "bf16", "matmul_precision": "high"}, {"bf16": True, "tf32": True}),
    ],
)
def test_hf_tf32_settings(knobs: dict[str, Any], expected: dict[str, Any]) -> None:
    # Checked as a dict only: TrainingArguments refuses tf32=True without an Ampere or newer GPU.
    assert framework_warnings(hf_training_args, knobs) == (expected, [])


def test_hf_warns_once_naming_exactly_what_it_cannot_express(tmp_path: Path) -> None:
    knobs = {
        **TUNED,
        "memory_format": "channels_last",
        "cudnn_benchmark": True,
        "matmul_precision": "highest",  # IEEE matmuls with cuDNN's TF32 kept: no TrainingArguments switch
        "gpu_prefetch": True,
    }
    kwargs, warned = framework_warnings(hf_training_args, knobs, kernels=KERNELS)
    assert len(warned) == 1
    assert warned[0].unexpressed == (
        "memory_format",
        "cudnn_benchmark",
        "matmul_precision",
        "gpu_prefetch",
        LISTED_KERNEL,
    )
    message = str(warned[0])
    assert "memory_format=channels_last -> model.to(memory_format=torch.channels_last)" in message
    assert "cudnn_benchmark=True, matmul_precision=highest -> autotune.knobs.apply_backend_flags(" in message
    assert f"kernel {LISTED_KERNEL} -> autotune.kernels.pinning.pin_tuned(cfg.kernels)" in message
    assert "tf32" not in kwargs
    hf_args(tmp_path, **kwargs)  # what it does express is still accepted


# --- Lightning -------------------------------------------------------------------------------------


def test_lightning_trainer_takes_the_precision_and_warns_about_the_rest(tmp_path: Path) -> None:
    knobs = {**TUNED, "compile_mode": "max-autotune", "memory_format": "channels_last", "cudnn_benchmark": True}
    kwargs, warned = framework_warnings(lightning_trainer_kwargs, knobs, kernels=KERNELS)
    assert kwargs == {"precision": "bf16-mixed", "benchmark": True}
    assert len(warned) == 1
    # non_blocking is not named: Lightning copies batches to a GPU with non_blocking=True on its own.
    assert warned[0].unexpressed == (
        "batch_size",
        "memory_format",
        "compile_mode",
        "fused_optimizer",
        "num_workers",
        "pin_memory",
        "prefetch_factor",
        "persistent_workers",
        LISTED_KERNEL,
    )
    message = str(warned[0])
    assert (
        "batch_size=4, num_workers=2, pin_memory=True, prefetch_factor=3, persistent_workers=True -> cfg.dataloader("
        in message
    )
    assert "compile_mode=max-autotune -> torch.compile(model, mode='max-autotune')" in message
    assert "fused_optimizer=True -> fused=True on the optimizer configure_optimizers returns" in message
    trainer = lightning_trainer(tmp_path, **kwargs)
    assert trainer.precision == "bf16-mixed"
    assert torch.backends.cudnn.benchmark is True


@pytest.mark.parametrize(
    ("knobs", "expected", "unexpressed"),
    [
        ({"precision": "fp16"}, {"precision": "16-mixed"}, ()),
        ({"precision": "tf32"}, {}, ("precision",)),  # TF32 is a backend flag: Trainer keeps "32-true"
        ({"precision": "fp32"}, {}, ("precision",)),
        ({"cudnn_deterministic": True}, {}, ("cudnn_deterministic",)),  # Trainer's is use_deterministic_algorithms
        ({"matmul_precision": "high"}, {}, ("matmul_precision",)),
    ],
)
def test_lightning_precision_and_flags(
    tmp_path: Path, knobs: dict[str, Any], expected: dict[str, Any], unexpressed: tuple[str, ...]
) -> None:
    kwargs, warned = framework_warnings(lightning_trainer_kwargs, knobs)
    assert kwargs == expected
    assert [w.unexpressed for w in warned] == ([unexpressed] if unexpressed else [])
    lightning_trainer(tmp_path, **kwargs)  # fp16 on a CPU: Lightning falls back to bf16-mixed, with its own warning


# --- compile_scope=blocks: neither framework compiles a model's blocks one by one ---------------------


@pytest.mark.parametrize("convert", [hf_training_args, lightning_trainer_kwargs])
def test_blocks_compiled_one_by_one_are_left_to_apply_and_said(convert: Any) -> None:
    knobs = {**TUNED, "compile_mode": "reduce-overhead", "compile_scope": "blocks"}
    kwargs, warned = framework_warnings(convert, knobs)
    assert "torch_compile" not in kwargs and "torch_compile_mode" not in kwargs  # no whole-model compile on top
    assert len(warned) == 1 and {"compile_mode", "compile_scope"} <= set(warned[0].unexpressed)
    # The two knobs are one instruction: the mode goes to each block, through cfg.apply(model).
    said = "compile_mode=reduce-overhead, compile_scope=blocks -> cfg.apply(model) (it compiles each repeated block"
    assert said in str(warned[0])
    assert "torch.compile(model" not in str(warned[0])


def test_hf_still_compiles_the_whole_model_for_compile_scope_model() -> None:
    kwargs, warned = framework_warnings(hf_training_args, {"compile_mode": "default", "compile_scope": "model"})
    assert (kwargs, warned) == ({"torch_compile": True, "torch_compile_mode": "default"}, [])


# --- shared rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize("convert", [hf_training_args, lightning_trainer_kwargs])
def test_knobs_at_pytorch_defaults_map_to_nothing(convert: Any) -> None:
    assert framework_warnings(convert, DEFAULTS) == ({}, [])
    assert framework_warnings(convert, {**DEFAULTS, "cudnn_benchmark": False}) == ({}, [])
    assert framework_warnings(convert, {}) == ({}, [])


@pytest.mark.parametrize("convert", [hf_training_args, lightning_trainer_kwargs])
def test_worker_settings_without_workers_were_noops(convert: Any) -> None:
    # The trial recorded them as no-ops; TrainingArguments and the DataLoader refuse them without workers.
    knobs = {"num_workers": 0, "prefetch_factor": 4, "persistent_workers": True}
    assert framework_warnings(convert, knobs) == ({}, [])


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"warp_speed": True}, "unknown knob 'warp_speed'"),
        ({"precision": "bf32"}, "knob precision='bf32' is not valid"),
        ({"batch_size": 0}, "knob batch_size=0 is not valid"),
    ],
)
@pytest.mark.parametrize("convert", [hf_training_args, lightning_trainer_kwargs])
def test_bad_knobs_are_user_errors(convert: Any, knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(AutotuneError, match=message):
        convert(knobs)


def test_values_are_typed_by_the_knob_registry() -> None:
    kwargs, _ = framework_warnings(hf_training_args, {"batch_size": "8", "fused_optimizer": "true"})
    assert kwargs == {"per_device_train_batch_size": 8, "optim": "adamw_torch_fused"}


# --- real training runs --------------------------------------------------------------------------------


class Pairs(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, n: int = 32) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=generator)
        self.y = torch.randn(n, 1, generator=generator)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Regressor(torch.nn.Module):
    """A linear model that records each step's batch size and the dtype its layer computed in (autocast's)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)
        self.steps: list[tuple[int, torch.dtype]] = []

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.linear(x)
        self.steps.append((len(x), out.dtype))
        return {"loss": torch.nn.functional.mse_loss(out.float(), labels)}


def test_hf_trainer_fits_with_the_tuned_arguments(tmp_path: Path) -> None:
    model = Regressor()
    args = hf_args(
        tmp_path,
        max_steps=2,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        **hf_training_args(TUNED),
    )
    trainer = Trainer(model=model, args=args, train_dataset=Pairs())
    before = model.linear.weight.detach().clone()
    trainer.train()
    assert trainer.state.global_step == 2
    assert model.steps == [(4, torch.bfloat16)] * 2
    # accelerate's AcceleratedOptimizer around a fused AdamW (accelerate has no type information: Any here)
    wrapped: Any = trainer.optimizer
    assert wrapped.optimizer.defaults["fused"] is True
    loader = trainer.get_train_dataloader()
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (2, 3, True)
    assert not torch.equal(model.linear.weight, before)


class LitRegressor(lightning.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = Regressor()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.model(**batch)["loss"]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-2, fused=True)  # the warning's fused_optimizer step


def test_lightning_trainer_fits_with_the_tuned_arguments(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FrameworkWarning)  # the DataLoader settings: built below as it says
        kwargs = lightning_trainer_kwargs(TUNED)
    loader = DataLoader(
        Pairs(),
        batch_size=TUNED["batch_size"],
        shuffle=True,
        drop_last=True,
        num_workers=TUNED["num_workers"],
        pin_memory=TUNED["pin_memory"],
        prefetch_factor=TUNED["prefetch_factor"],
        persistent_workers=TUNED["persistent_workers"],
    )
    module = LitRegressor()
    trainer = lightning_trainer(tmp_path, max_steps=2, **kwargs)
    trainer.fit(module, loader)
    assert trainer.global_step == 2
    assert module.model.steps == [(4, torch.bfloat16)] * 2


def test_hf_checkpoints_layers_whole_and_leaves_the_step_contexts_knobs_to_apply(tmp_path: Path) -> None:
    full = {"activation_checkpointing": "full", "compile_mode": "default", "activation_memory_budget": 0.5}
    kwargs, warned = framework_warnings(hf_training_args, {**full, "attention_backend": "flash"})
    assert kwargs["activation_checkpointing"] is True
    assert kwargs["activation_checkpointing_kwargs"] == {"use_reentrant": False}
    assert len(warned) == 1 and warned[0].unexpressed == ("activation_memory_budget", "attention_backend")
    message = str(warned[0])
    assert "activation_memory_budget=0.5 -> cfg.apply(model); its step_ctx.autocast() sets the budget" in message
    assert "attention_backend=flash -> cfg.apply(model); its step_ctx.autocast() and step_ctx.backward()" in message
    args = hf_args(tmp_path, **kwargs)
    assert args.activation_checkpointing is True
    _, warned = framework_warnings(hf_training_args, {"activation_checkpointing": "selective"})
    assert warned[0].unexpressed == ("activation_checkpointing",)
    assert "wraps each repeated block's forward in place" in str(warned[0])
