"""The float8 knob on a CPU, through torchao's emulated FP8 GEMMs: what it converts, how close it computes to bf16,
and that autotune imports torchao only when float8 is used."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from pythonpath import child_env
from torch.nn import functional as F
from trial_workloads import WIDE, wide_layers

from autotune.errors import AutotuneError, InvalidCombination, NumericsError
from autotune.knobs import Knobs, apply
from autotune.knobs.float8 import FLOAT8_RECIPES, LayerFilter, chosen_layers, converted_share, head_layers
from autotune.trial.numerics import FLOAT8_LOSS_TOLERANCE, LOSS_TOLERANCE, check_first_loss, loss_tolerance

RECIPES = [recipe for recipe in FLOAT8_RECIPES if recipe != "none"]


def knobs(recipe: str = "tensorwise", **more: object) -> Knobs:
    return Knobs.from_params({"precision": "bf16", "float8": recipe, **more})


def converted(model: torch.nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if type(module).__name__ == "Float8Linear"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_float8_step_computes_close_to_bf16(recipe: str) -> None:
    torch.manual_seed(0)
    model = wide_layers()
    twin = wide_layers()
    twin.load_state_dict(model.state_dict())
    inputs, targets = torch.randn(32, WIDE), torch.randint(0, 16, (32,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reference = F.cross_entropy(twin(inputs), targets)
    everything = {"float8_filter": {"include": ["*"]}}  # every layer, so every GEMM of the step is in FP8
    trained, ctx = apply(model, torch.optim.AdamW(model.parameters()), knobs(recipe, **everything), "cpu")
    with ctx.autocast():
        loss = F.cross_entropy(trained(ctx.prepare_inputs(inputs)), targets)
    ctx.backward(loss)  # rowwise_with_gw_hp's weight gradient in bf16 needs its input in bf16 too
    assert converted(trained) == ["up", "mix", "narrow", "lm_head"]
    assert abs(float(loss.detach()) - float(reference.detach())) / float(reference.detach()) < 0.02
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in trained.parameters())


def test_the_default_filter_leaves_out_small_layers_and_the_head() -> None:
    model = wide_layers()
    assert head_layers(model) == {"lm_head"}
    assert chosen_layers(model, "tensorwise", LayerFilter()) == ["up", "mix"]  # narrow: 48 outputs, too small
    # rowwise gains on larger layers only; rowwise_with_gw_hp runs rowwise's GEMMs, so its rule too
    assert chosen_layers(model, "rowwise", LayerFilter()) == chosen_layers(model, "rowwise_with_gw_hp", LayerFilter())
    assert chosen_layers(model, "rowwise", LayerFilter()) == []
    up = mix = WIDE * WIDE
    assert converted_share(model) == pytest.approx((up + mix) / (up + mix + WIDE * 48 + 48 * 16))


def test_a_filter_chooses_by_name_and_excludes_after_either_rule() -> None:
    model = wide_layers()
    assert chosen_layers(model, "tensorwise", LayerFilter(exclude=("m*",))) == ["up"]
    assert chosen_layers(model, "tensorwise", LayerFilter(include=("*",))) == ["up", "mix", "narrow", "lm_head"]
    named = LayerFilter(include=("*",), exclude=("lm_head",))
    assert chosen_layers(model, "rowwise", named) == ["up", "mix", "narrow"]  # include replaces the size rule
    odd = torch.nn.Sequential(torch.nn.Linear(64, 1000), torch.nn.Linear(1000, 64))
    assert chosen_layers(odd, "tensorwise", LayerFilter(include=("*",))) == []  # FP8 GEMMs need multiples of 16


def test_apply_converts_in_place_and_the_optimizer_still_trains_the_layers() -> None:
    model = wide_layers()
    optimizer = torch.optim.AdamW(model.parameters())
    before = {name: module.weight for name, module in model.named_children() if isinstance(module, torch.nn.Linear)}
    trained, ctx = apply(model, optimizer, knobs(float8_filter="exclude=up"), "cpu")
    assert trained is model and ctx.float8_layers == ("mix",) and converted(model) == ["mix"]
    # the same Parameter: the optimizer made before apply() holds it
    assert dict(model.named_parameters())["mix.weight"] is before["mix"]
    assert any(p is before["mix"] for group in optimizer.param_groups for p in group["params"])
    assert "float8" not in ctx.noops


def test_float8_that_converts_nothing_is_a_noop_and_none_converts_nothing() -> None:
    _, ctx = apply(wide_layers(), None, knobs("rowwise"), "cpu")  # rowwise's rule admits none of these layers
    assert ctx.float8_layers == () and "float8" in ctx.noops
    model = wide_layers()
    _, ctx = apply(model, None, Knobs.from_params({"precision": "bf16"}), "cpu")
    assert ctx.float8_layers is None and converted(model) == []


def test_float8_needs_bf16() -> None:
    with pytest.raises(InvalidCombination, match="float8=tensorwise needs precision=bf16, not fp16"):
        Knobs.from_params({"precision": "fp16", "float8": "tensorwise"}).check_combination("cpu")
    Knobs.from_params({"precision": "fp16", "float8": "none"}).check_combination("cpu")


def test_the_filter_reads_its_mapping_and_text_forms_alike() -> None:
    mapping = {"include": ["*.mlp.*", "*.attn.*"], "exclude": "lm_head"}
    chosen = Knobs.from_params({"float8_filter": mapping})
    assert chosen.float8_filter == "include=*.mlp.*,*.attn.*;exclude=lm_head"
    assert Knobs.from_params({"float8_filter": chosen.float8_filter}) == chosen
    assert chosen.float8_layers.to_mapping() == {"include": ["*.mlp.*", "*.attn.*"], "exclude": ["lm_head"]}
    assert Knobs().float8_layers == LayerFilter() and LayerFilter().to_text() is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"exclude": ["lm_head"], "only": ["x"]}, "unknown key(s) only"),
        ({"include": [3]}, "float8_filter.include: expected a list of module-name patterns"),
        ({"exclude": ["a,b"]}, "has no ',', ';' or '='"),
        ("lm_head", "'lm_head' is not key=patterns"),
    ],
)
def test_a_bad_filter_is_named(value: object, message: str) -> None:
    with pytest.raises(AutotuneError) as raised:
        Knobs.from_params({"float8_filter": value})
    assert message in str(raised.value)


def test_the_numerics_guard_holds_float8_trials_to_bf16s_tolerance() -> None:
    assert loss_tolerance("bf16", "rowwise") == FLOAT8_LOSS_TOLERANCE == LOSS_TOLERANCE["bf16"]
    assert check_first_loss(10.4, 10.0, "bf16", "tensorwise") == pytest.approx(0.04)
    with pytest.raises(NumericsError, match=r"relative error 0.06 > 0.05 allowed for precision=bf16, float8=rowwise"):
        check_first_loss(10.6, 10.0, "bf16", "rowwise")


def test_autotune_imports_torchao_only_where_float8_converts() -> None:
    script = """
import sys, torch
import autotune, autotune.cli, autotune.knobs, autotune.space, autotune.trial.job, autotune.tuned
from autotune.knobs import Knobs, apply
apply(torch.nn.Linear(1040, 1040), None, Knobs.from_params({"precision": "bf16"}), "cpu")
assert "torchao" not in sys.modules, "imported without float8"
apply(torch.nn.Sequential(torch.nn.Linear(64, 1040)), None,
      Knobs.from_params({"precision": "bf16", "float8": "tensorwise", "float8_filter": "include=*"}), "cpu")
assert "torchao" in sys.modules
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_float8_runs_fp8_gemms_never_emulated() -> None:
    from autotune.knobs.float8 import gpu_lacks_float8, nvml_lacks_float8

    if (lacking := gpu_lacks_float8()) is not None:
        assert nvml_lacks_float8("cuda") == lacking  # NVML, which a sweep asks, says the same
        with pytest.raises(InvalidCombination, match=r"compute capability 8\.9"):
            knobs().check_combination("cuda")
        return
    assert nvml_lacks_float8("cuda") is None
    torch.manual_seed(0)
    model = wide_layers().cuda()
    inputs, targets = torch.randn(64, WIDE, device="cuda"), torch.randint(0, 16, (64,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        reference = float(F.cross_entropy(model(inputs), targets))
    trained, ctx = apply(model, torch.optim.AdamW(model.parameters()), knobs(), "cuda")
    assert ctx.float8_layers == ("up", "mix")
    configs = [module.__dict__["config"] for name, module in trained.named_modules() if name in ctx.float8_layers]
    assert configs and not any(config.emulate for config in configs)
    with ctx.autocast():
        loss = F.cross_entropy(trained(inputs), targets)
    ctx.backward(loss)
    assert abs(float(loss.detach()) - reference) / reference < 0.02
