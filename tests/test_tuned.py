"""TunedConfig's hand-offs to the frameworks: the same arguments as autotune.frameworks, warned at the caller's line."""

from __future__ import annotations

import pytest
import transformers

from autotune.frameworks import FrameworkWarning
from autotune.tuned import TunedConfig

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
