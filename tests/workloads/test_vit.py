"""The vit workload: its presets' sizes (built on the meta device), its blocks as the knobs find them, attention
through SDPA, and a tiny trial and bad sizes as `autotune trial` meets them in real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from aten_ops import AtenOps

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.knobs.applying import apply
from autotune.knobs.regional import find_blocks
from autotune.knobs.registry import Knobs
from autotune.workloads import vit

REPO = Path(__file__).resolve().parents[2]
META = torch.device("meta")
CPU = torch.device("cpu")
_CPU_FLASH = "aten._scaled_dot_product_flash_attention_for_cpu"  # what SDPA runs on a CPU unless pinned to math


def built(preset: str, **params: Any) -> workloads.Workload:
    work = workloads.build("vit", preset, dict(params), META)
    assert isinstance(work, workloads.Workload)
    return work


def parameters(preset: str) -> int:
    """The parameter count of ``preset``'s model, built on ``meta``: shapes, no memory."""
    return sum(p.numel() for p in built(preset).model.parameters())


def autotune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_small_and_full_are_vit_s16_and_vit_b16() -> None:
    assert parameters("small") == 22_050_664  # timm's vit_small_patch16_224
    assert parameters("full") == 86_567_656  # timm's vit_base_patch16_224
    full = built("full")
    assert full.unit == "images/s" and full.items_per_sample == 1 and full.default_batch_size == 128
    assert vit.PRESETS["full"].tokens == 197  # 14 x 14 patches and the class token


def test_image_and_patch_change_the_preset_and_text_is_read_as_numbers() -> None:
    work = vit.build("tiny", image="48", patch="16")  # type: ignore[arg-type]  # what -p image=48 hands it
    assert isinstance(work.model, vit.VisionTransformer) and work.make_batch is not None
    assert work.model.pos_embed.shape == (1, 3 * 3 + 1, 64)
    images, labels = work.make_batch(2, CPU)
    assert images.shape == (2, 3, 48, 48) and images.dtype == torch.float32 and labels.shape == (2,)
    assert work.model(images).shape == (2, vit.PRESETS["tiny"].classes)


def test_the_blocks_are_found_by_compile_scope_and_checkpointing() -> None:
    assert find_blocks(built("full").model).describe() == "12 x Block (blocks.0 .. blocks.11, found)"
    assert find_blocks(built("tiny").model).describe() == "2 x Block (blocks.0 .. blocks.1, found)"


def _step(knobs: Knobs) -> tuple[float, list[torch.Tensor], set[str]]:
    """One tiny step's loss, gradients and forward ops under ``knobs``, from the same weights and batch."""
    torch.manual_seed(0)
    work = vit.build("tiny")
    assert work.make_batch is not None and work.loss_fn is not None
    images, labels = work.make_batch(4, CPU)
    model, ctx = apply(work.model, None, knobs, "cpu")
    ops = AtenOps()
    with ctx.autocast(), ops:
        loss = work.loss_fn(model(images), labels)
    ctx.backward(loss)
    return float(loss.detach()), [p.grad for p in model.parameters() if p.grad is not None], ops.names


def test_math_attention_and_checkpointed_blocks_apply_and_train_the_same() -> None:
    loss, grads, ops = _step(Knobs())
    assert _CPU_FLASH in ops  # attention goes through SDPA, and PyTorch picks its fused kernel
    pinned_loss, pinned_grads, pinned_ops = _step(Knobs(attention_backend="math", activation_checkpointing="full"))
    assert _CPU_FLASH not in pinned_ops and "aten.bmm" in pinned_ops
    assert pinned_loss == pytest.approx(loss, rel=1e-5)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(grads, pinned_grads, strict=True))


def test_bad_presets_and_sizes_are_refused_in_one_line() -> None:
    with pytest.raises(AutotuneError, match="preset 'huge' is not valid: expected one of tiny, small, full"):
        workloads.build("vit", "huge", {}, META)
    with pytest.raises(AutotuneError, match=r"vit: patch='big' is not valid: expected a positive integer"):
        vit.build("tiny", patch="big")  # type: ignore[arg-type]
    with pytest.raises(AutotuneError, match=r"vit: image=0 is not valid"):
        vit.build("tiny", image=0)
    with pytest.raises(AutotuneError) as caught:
        vit.build("full", patch=15)
    assert str(caught.value) == (
        "vit: image=224 is not valid with patch=15: the image must be a whole number of patches"
    )


def test_validate_checks_fixed_sizes(tmp_path: Path) -> None:
    space = tmp_path / "vit_bad.yaml"
    space.write_text(
        "workload: {name: vit, preset: tiny, args: {patch: 5}}\ndevice: cpu\nparams: {precision: [default]}\n"
    )
    proc = autotune("validate", str(space), str(REPO / "search_spaces" / "vit.yaml"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines() == [f"{REPO / 'search_spaces' / 'vit.yaml'}: ok (5 params, sampler tpe)"]
    assert f"{space}: workload.args: vit: image=32 is not valid with patch=5" in proc.stderr


@pytest.mark.slow  # a trial process
def test_a_tiny_trial_with_math_attention_runs_in_a_real_process() -> None:
    proc = autotune("trial", "vit", "--preset", "tiny", "--device", "cpu", "-p", "attention_backend=math", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "ok", result["reason"]
    assert result["params"]["attention_backend"] == "math" and result["params"]["batch_size"] == 8
    metrics = result["metrics"]
    assert metrics["throughput"] > 0 and metrics["throughput_unit"] == "images/s"
    assert metrics["loss_rel_error"] < 1e-3 and metrics["model_flops_per_step"] > 0


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("patch=5", "vit: image=32 is not valid with patch=5: the image must be a whole number of patches"),
        ("image=-32", "vit: image='-32' is not valid: expected a positive integer"),
    ],
)
def test_bad_sizes_end_autotune_trial_with_exit_2_and_one_line(param: str, message: str) -> None:
    proc = autotune("trial", "vit", "--preset", "tiny", "--device", "cpu", "-p", param)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"autotune: error: {message}"]
