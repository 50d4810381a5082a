"""Each knob really takes effect on the model, the backend flags and the training step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from autotune import knobs
from autotune.errors import AutotuneError, InvalidCombination
from autotune.knobs import Knobs
from autotune.workloads import Workload, build

# torch.backends.cudnn as the tests use it: its conv/rnn fp32_precision settings are missing from torch's stubs.
CUDNN: Any = torch.backends.cudnn

FLAGS = (
    (torch.backends.cuda.matmul, "fp32_precision"),
    (CUDNN.conv, "fp32_precision"),
    (CUDNN.rnn, "fp32_precision"),
    (torch.backends.cudnn, "benchmark"),
    (torch.backends.cudnn, "deterministic"),
)


@pytest.fixture(autouse=True)
def restore_backend_flags() -> Iterator[None]:
    saved = [getattr(obj, name) for obj, name in FLAGS]
    yield
    for (obj, name), value in zip(FLAGS, saved, strict=True):
        setattr(obj, name, value)


def resnet() -> torch.nn.Module:
    work = build("resnet50", "tiny", {}, torch.device("cpu"))
    assert isinstance(work, Workload)
    return work.model


def apply(model: torch.nn.Module, **params: Any) -> tuple[torch.nn.Module, knobs.StepContext]:
    optimizer = torch.optim.AdamW(model.parameters())
    return knobs.apply(model, optimizer, Knobs.from_params(params), "cpu")


def test_channels_last_converts_every_4d_weight_and_the_inputs() -> None:
    model, ctx = apply(resnet(), memory_format="channels_last")
    weights = [p for p in model.parameters() if p.dim() == 4]
    assert weights and all(p.is_contiguous(memory_format=torch.channels_last) for p in weights)
    assert not all(p.is_contiguous() for p in weights)
    x = ctx.prepare_inputs(torch.randn(2, 3, 32, 32))
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    assert "memory_format" not in ctx.noops


def test_channels_last_without_4d_weights_is_a_recorded_noop() -> None:
    work = build("gpt2", "tiny", {}, torch.device("cpu"))
    assert isinstance(work, Workload)
    _, ctx = apply(work.model, memory_format="channels_last")
    assert "memory_format" in ctx.noops


def test_default_precision_leaves_pytorch_flags_untouched() -> None:
    before = [getattr(obj, name) for obj, name in FLAGS]
    _, ctx = apply(resnet(), precision="default")
    assert [getattr(obj, name) for obj, name in FLAGS] == before
    assert ctx.autocast_dtype is None and ctx.scaler is None


def test_strict_fp32_turns_tf32_off_everywhere() -> None:
    CUDNN.conv.fp32_precision = "tf32"  # PyTorch's default for convolutions
    apply(resnet(), precision="fp32")
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert CUDNN.conv.fp32_precision == "ieee"
    assert CUDNN.rnn.fp32_precision == "ieee"


def test_tf32_turns_tf32_on_for_matmul_and_cudnn() -> None:
    _, ctx = apply(resnet(), precision="tf32")
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    assert CUDNN.conv.fp32_precision == "tf32"
    assert "tf32" in ctx.noops  # recorded: a CPU has no tensor cores


def test_matmul_precision_knob_sets_matmul_only() -> None:
    apply(resnet(), matmul_precision="high")
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


@pytest.mark.parametrize(("precision", "dtype"), [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_autocast_precisions_run_matmuls_in_half(precision: str, dtype: torch.dtype) -> None:
    model, ctx = apply(torch.nn.Linear(8, 8), precision=precision)
    with ctx.autocast():
        out = model(torch.randn(4, 8))
    assert out.dtype == dtype
    assert next(model.parameters()).dtype == torch.float32  # weights stay fp32
    assert (ctx.scaler is not None) == (precision == "fp16")


def test_fp16_step_goes_through_the_grad_scaler() -> None:
    torch.manual_seed(0)  # unseeded, about half of the runs never overflowed, so the scaler never backed off
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    _, ctx = knobs.apply(model, optimizer, Knobs(precision="fp16"), "cpu")
    before = model.weight.detach().clone()
    for _ in range(20):  # the scaler skips steps whose scaled gradients overflow, then backs off
        with ctx.autocast():
            loss = model(torch.randn(4, 8)).float().pow(2).mean()
        ctx.backward(loss)
        ctx.step(optimizer)
        optimizer.zero_grad()
    assert ctx.scaler is not None and ctx.scaler.get_scale() < 2.0**16  # it did back off
    assert not torch.equal(before, model.weight)


def test_fused_optimizer_switches_to_the_fused_kernel_and_steps() -> None:
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    _, ctx = knobs.apply(model, optimizer, Knobs(fused_optimizer=True), "cpu")
    assert all(group["fused"] for group in optimizer.param_groups)
    before = model.weight.detach().clone()
    model(torch.randn(4, 8)).sum().backward()
    ctx.step(optimizer)
    assert not torch.equal(before, model.weight)


def test_fused_optimizer_on_an_optimizer_without_one_is_invalid() -> None:
    model = torch.nn.Linear(8, 2)
    with pytest.raises(InvalidCombination, match="RMSprop"):
        knobs.apply(model, torch.optim.RMSprop(model.parameters()), Knobs(fused_optimizer=True), "cpu")


def test_compile_mode_goes_to_torch_compile() -> None:
    calls: list[dict[str, Any]] = []

    def fake_compile(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        calls.append(kwargs)
        return model

    knobs.apply(resnet(), None, Knobs(compile_mode="max-autotune-no-cudagraphs"), "cpu", compile_fn=fake_compile)
    assert calls == [{"mode": "max-autotune-no-cudagraphs"}]


def test_cudnn_flags_on_cpu_are_recorded_noops() -> None:
    _, ctx = apply(resnet(), cudnn_benchmark=True, cudnn_deterministic=False)
    assert {"cudnn_benchmark", "cudnn_deterministic"} <= set(ctx.noops)
    assert torch.backends.cudnn.benchmark is False  # not touched off-GPU


@pytest.mark.parametrize(
    "params",
    [
        {"cudnn_benchmark": True, "cudnn_deterministic": True},
        {"precision": "fp32", "matmul_precision": "high"},
        {"precision": "tf32", "matmul_precision": "highest"},
    ],
)
def test_contradictory_combinations_are_invalid(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidCombination):
        Knobs.from_params(params).check_combination("cpu")


def test_from_params_coerces_cli_strings() -> None:
    parsed = Knobs.from_params({"batch_size": "256", "cudnn_benchmark": "true", "fused_optimizer": "off"})
    assert (parsed.batch_size, parsed.cudnn_benchmark, parsed.fused_optimizer) == (256, True, False)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"precsion": "bf16"}, "unknown knob 'precsion'"),
        ({"precision": "bf17"}, "precision='bf17' is not valid"),
        ({"batch_size": "many"}, "batch_size='many' is not valid"),
        ({"batch_size": 0}, "batch_size=0 is not valid"),
        ({"cudnn_benchmark": "maybe"}, "cudnn_benchmark='maybe'"),
        ({"num_workers": -1}, "num_workers=-1 is not valid: expected an int >= 0"),
        ({"prefetch_factor": 0}, "prefetch_factor=0 is not valid: expected an int >= 1 or none"),
        ({"pin_memory": "pinned"}, "pin_memory='pinned' is not valid: expected true, false"),
    ],
)
def test_bad_knob_values_name_the_problem(params: dict[str, Any], message: str) -> None:
    with pytest.raises(AutotuneError, match=message.replace("(", r"\(")):
        Knobs.from_params(params)


def test_data_knobs_default_to_pytorchs_loader_and_take_cli_strings() -> None:
    defaults = Knobs()
    assert (defaults.num_workers, defaults.pin_memory, defaults.prefetch_factor) == (0, False, None)
    assert not (defaults.persistent_workers or defaults.non_blocking or defaults.gpu_prefetch)
    parsed = Knobs.from_params({"num_workers": "0", "prefetch_factor": "none", "gpu_prefetch": "on"})
    assert (parsed.num_workers, parsed.prefetch_factor, parsed.gpu_prefetch) == (0, None, True)
    assert Knobs.from_params({"prefetch_factor": "4"}).prefetch_factor == 4
    assert set(knobs.DATA_KNOBS) <= set(knobs.KNOB_SPECS) and set(knobs.DATA_KNOBS) <= set(defaults.to_params())


def test_every_registered_knob_is_a_field_of_the_setting_in_the_registrys_order() -> None:
    assert list(knobs.KNOB_SPECS) == list(Knobs().to_params())


def test_step_context_steps_the_optimizer_it_was_applied_to() -> None:
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    _, ctx = knobs.apply(model, optimizer, Knobs(), "cpu")
    before = model.weight.detach().clone()
    ctx.backward(model(torch.randn(3, 4)).pow(2).mean())
    ctx.step()
    assert not torch.equal(before, model.weight)
    ctx.zero_grad()
    assert model.weight.grad is None
    _, bare = knobs.apply(model, None, Knobs(), "cpu")
    with pytest.raises(AutotuneError, match="no optimizer"):
        bare.step()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cudnn_flags_are_set_on_a_gpu() -> None:
    _, ctx = knobs.apply(resnet().cuda(), None, Knobs(cudnn_benchmark=True), "cuda")
    assert torch.backends.cudnn.benchmark is True and "cudnn_benchmark" not in ctx.noops


def test_inductor_options_read_from_a_mapping_or_their_text_form() -> None:
    from_yaml = Knobs.from_params({"inductor": {"epilogue_fusion": False, "coordinate_descent_tuning": True}})
    from_cli = Knobs.from_params({"inductor": "coordinate_descent_tuning=true; epilogue_fusion = false"})
    assert from_yaml.inductor == from_cli.inductor == "coordinate_descent_tuning=true;epilogue_fusion=false"
    assert from_yaml.inductor_options == {"coordinate_descent_tuning": True, "epilogue_fusion": False}
    backends = Knobs.from_params({"inductor": {"max_autotune_gemm_backends": "aten, triton"}})
    assert backends.inductor_options == {"max_autotune_gemm_backends": "ATEN,TRITON"}
    assert Knobs.from_params({"inductor": "none"}).inductor is None
    assert Knobs().inductor_options == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"coordinate_descent": True},
            "coordinate_descent: unknown Inductor option .*did you mean 'coordinate_descent_",
        ),
        ({"freezing": True}, "freezing: an Inductor option autotune does not set"),
        ({"max_autotune": "maybe"}, "max_autotune: 'maybe' is not true or false"),
        ({"max_autotune_gemm_backends": "ATEN,TRITN"}, "max_autotune_gemm_backends: 'ATEN,TRITN' is not a comma"),
        ("max_autotune", "'max_autotune' is not name=value"),
    ],
)
def test_bad_inductor_options_name_the_problem(value: Any, message: str) -> None:
    with pytest.raises(AutotuneError, match=message):
        Knobs.from_params({"inductor": value})


def test_inductor_options_go_to_torch_compile_with_the_modes_own() -> None:
    calls: list[dict[str, Any]] = []

    def fake_compile(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        calls.append(kwargs)
        return model

    tuned = Knobs.from_params(
        {"compile_mode": "max-autotune-no-cudagraphs", "inductor": {"coordinate_descent_tuning": False}}
    )
    knobs.apply(resnet(), None, tuned, "cpu", compile_fn=fake_compile)
    # torch.compile takes a mode or options: the mode's own options, the knob's winning where they meet.
    assert calls == [{"options": {"max_autotune": True, "coordinate_descent_tuning": False}}]


def test_coordinate_descent_keeps_its_tuned_blocks_through_the_cache_on_torch_before_2_13() -> None:
    """torch 2.11's static launcher loses coordinate descent's cached block sizes (autotune.knobs.inductor), and so
    does a kernel built by a compile worker (pickled without them): Triton's own launcher and builds in the process;
    2.12 fixed the first. Before 2.13 the RBLOCK halving after a cache hit saves its pick unmarked: off. Without
    coordinate descent nothing is needed."""
    from autotune.knobs.inductor import cache_workarounds

    tuned = {"coordinate_descent_tuning": True}
    assert cache_workarounds(tuned, "2.11.0+cu130") == {
        "use_static_cuda_launcher": False,
        "compile_threads": 1,
        "dynamic_scale_rblock": False,
    }
    assert cache_workarounds(tuned, "2.12.0") == {"dynamic_scale_rblock": False}
    assert cache_workarounds(tuned, "2.13.0+cpu") == {}
    assert cache_workarounds({"coordinate_descent_tuning": False}, "2.11.0") == {}
    # a space's own choices are left as they are
    assert cache_workarounds({**tuned, "use_static_cuda_launcher": True}, "2.11.0") == {"dynamic_scale_rblock": False}
    assert cache_workarounds({**tuned, "dynamic_scale_rblock": True}, "2.12.1") == {}


def test_inductor_options_without_compile_are_a_recorded_noop() -> None:
    _, ctx = apply(resnet(), compile_mode="none", inductor="coordinate_descent_tuning=true")
    assert "inductor" in ctx.noops


def test_inductor_cudagraphs_option_decides_whether_steps_mark_cuda_graphs() -> None:
    off = Knobs.from_params({"compile_mode": "reduce-overhead", "inductor": {"triton.cudagraphs": False}})
    _, ctx = knobs.apply(resnet(), None, off, "cpu", compile_fn=lambda model, **_: model)
    assert not ctx.cudagraphs and "cudagraphs" not in ctx.noops  # the option turned the mode's graphs off
    on = Knobs.from_params({"compile_mode": "default", "inductor": {"triton.cudagraphs": True}})
    _, ctx = knobs.apply(resnet(), None, on, "cpu", compile_fn=lambda model, **_: model)
    assert "cudagraphs" in ctx.noops  # asked for, but CUDA graphs need a GPU


def test_apply_compiles_under_the_inductor_options_and_leaves_the_process_config_alone() -> None:
    from torch._inductor import config

    seen: list[dict[str, Any]] = []

    def witness(graph: torch.fx.Graph) -> None:  # Inductor's post-grad hook: runs inside its compile
        seen.append({name: getattr(config, name) for name in ("coordinate_descent_tuning", "epilogue_fusion")})

    torch._dynamo.reset()  # compile afresh: a graph compiled earlier in this process would be reused
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    tuned = Knobs.from_params(
        {"compile_mode": "default", "inductor": "coordinate_descent_tuning=true;epilogue_fusion=false"}
    )
    before = (config.coordinate_descent_tuning, config.epilogue_fusion)
    assert before != (True, False)  # else the witness below could not tell
    with config.patch(post_grad_custom_post_pass=witness):
        compiled, _ = knobs.apply(model, None, tuned, "cpu")
        compiled(torch.randn(4, 8)).sum().backward()  # compiles forward and backward now
    assert len(seen) == 2 and all(s == {"coordinate_descent_tuning": True, "epilogue_fusion": False} for s in seen)
    assert (config.coordinate_descent_tuning, config.epilogue_fusion) == before  # set for that compile only
