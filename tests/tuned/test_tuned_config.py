"""TunedConfig in production: apply() on real models as the trials ran them, the tuned loader, framework hand-offs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tuned_files import FINALIST_OPTIONS, write_config

import autotune
from autotune import workloads
from autotune.errors import AutotuneError
from autotune.tuned.config import TunedConfig
from autotune.tuned.file import load
from autotune.tuned.frameworks import FrameworkWarning


def test_apply_trains_a_conv_net_as_the_trials_did(tmp_path: Path) -> None:
    knobs = {"precision": "bf16", "memory_format": "channels_last", "fused_optimizer": True, "compile_mode": "none"}
    path = write_config(tmp_path / "tuned.yaml", knobs={**knobs, "batch_size": 4})
    cfg = autotune.load(path)
    torch.manual_seed(0)
    work = workloads.build("resnet50", "tiny", {}, torch.device("cpu"))
    assert isinstance(work, workloads.Workload) and work.make_batch is not None and work.loss_fn is not None
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


TUNED = {"batch_size": 8, "precision": "bf16", "memory_format": "channels_last", "num_workers": 2}


def test_hf_training_args_are_accepted_and_the_warning_points_at_the_caller(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = TunedConfig(knobs=TUNED, kernels={"my_kernels:fused_add": {"kwargs": {"BLOCK": 64}}})
    with pytest.warns(FrameworkWarning) as caught:
        kwargs = cfg.hf_training_args()
    assert kwargs == {"per_device_train_batch_size": 8, "bf16": True, "dataloader_num_workers": 2}
    assert caught[0].filename == __file__
    assert caught[0].message.unexpressed == ("memory_format", "my_kernels:fused_add")  # type: ignore[union-attr]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **kwargs)
    assert (args.per_device_train_batch_size, args.bf16, args.dataloader_num_workers) == (8, True, 2)


def test_lightning_trainer_kwargs_name_what_lightning_leaves_to_the_user() -> None:
    with pytest.warns(FrameworkWarning) as caught:
        kwargs = TunedConfig(knobs=TUNED).lightning_trainer_kwargs()
    assert kwargs == {"precision": "bf16-mixed"}
    assert caught[0].filename == __file__
    assert set(caught[0].message.unexpressed) == {"batch_size", "memory_format", "num_workers"}  # type: ignore[union-attr]


def test_kernel_config_carries_the_matmul_variant() -> None:
    config = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "GROUP_M": 8}
    cfg = TunedConfig(
        knobs={}, kernels={"triton_matmul": {"4096x4096x4096:bf16": {**config, "kernel": "tma_persistent"}}}
    )
    assert cfg.kernel_config("triton_matmul", 4096, 4096, 4096, "bf16") == {**config, "kernel": "tma_persistent"}
    assert cfg.kernel_config("triton_matmul", 8192, 8192, 8192, "bf16") is None
