"""The fused LM head + cross-entropy against torch's, and GPT-2 with our kernels against GPT-2 with torch's.

The kernels run in Triton's CPU interpreter in fresh processes (``TRITON_INTERPRET=1`` must be set
before a process first imports triton), each kernel pinned to one config (unpinned, several configs
would need a GPU to benchmark). In the kernel process every ``torch.empty``/``torch.empty_like``
returns NaNs, so a loss the kernel never writes shows up; a gradient it never writes would leave a
logit in place of the gradient, which the gradient checks catch. GPU tests run the same checks
compiled, at GPT-2's sizes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from checks import rel_error
from pythonpath import child_env

from autotune.errors import AutotuneError
from autotune.kernels import cross_entropy as ce
from autotune.kernels.listing import load_kernel
from autotune.kernels.pinning import pinned
from autotune.workloads import gpt2, workload_params

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 1e-2}  # relative error ||out - ref|| / ||ref|| against fp32 torch

# (BLOCK_V, num_warps): several steps over the vocab with a ragged last one (300 = 256 + 44, 600 = 2 x 256 + 88),
# and one masked step covering the whole vocab.
CONFIGS = [(256, 2), (512, 4), (1024, 8)]
# name: (vocab, inputs' dtype, autocast dtype or None, chunk); 37 tokens, hidden size 24
CASES = {
    "fp32": (300, "fp32", None, 16),  # chunks of 16 + 16 + 5
    "fp32_one_chunk": (300, "fp32", None, ce.DEFAULT_CHUNK),
    "bf16": (600, "bf16", None, 16),
    "fp16": (300, "fp16", None, 16),
    "autocast_bf16": (300, "fp32", "bf16", 10),  # fp32 weights, bf16 matmuls: the trial's bf16 precision
}

_KERNEL_SCRIPT = """
import json, sys, torch

_empty, _empty_like = torch.empty, torch.empty_like
torch.empty = lambda *a, **k: _empty(*a, **k).fill_(float("nan"))  # unwritten outputs become NaN
torch.empty_like = lambda *a, **k: _empty_like(*a, **k).fill_(float("nan"))

from autotune.kernels import cross_entropy as ce
from autotune.kernels.pinning import pin

CONFIGS, CASES = json.loads(sys.argv[1]), json.loads(sys.argv[2])
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
ALL = list(ce.cross_entropy_fwd_bwd.configs)


def rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def errors(vocab, dtype, autocast, chunk, tokens=37, dim=24):
    hidden = torch.randn(tokens, dim).to(DTYPES[dtype]).requires_grad_()
    weight = (torch.randn(vocab, dim) * 2 / dim**0.5).to(DTYPES[dtype]).requires_grad_()  # logits of std 2
    targets = torch.randint(0, vocab, (tokens,))
    targets[:2] = torch.tensor([vocab - 1, 0])  # the last class sits in the ragged last step
    with torch.autocast("cpu", dtype=DTYPES[autocast or "bf16"], enabled=autocast is not None):
        loss = ce.fused_linear_cross_entropy(hidden, weight, targets, chunk=chunk)
    (1.7 * loss).backward()  # a grad_output other than 1
    refs = [t.detach().float().requires_grad_() for t in (hidden, weight)]
    expected = ce.reference(refs[0], refs[1], targets)
    (1.7 * expected).backward()
    with torch.no_grad():
        no_grad = ce.fused_linear_cross_entropy(hidden.float(), weight.float(), targets, chunk=chunk)
    return {
        "loss": rel(loss, expected), "no_grad_loss": rel(no_grad, expected.detach()),
        "hidden": rel(hidden.grad, refs[0].grad), "weight": rel(weight.grad, refs[1].grad),
        "dtypes": [str(t.dtype) for t in (loss, hidden.grad, weight.grad)],
    }


torch.manual_seed(0)
out = {"interpreted": ce._interpreted(), "errors": {}, "launches": {}}
for block, warps in CONFIGS:
    config = next(c for c in ALL if c.kwargs["BLOCK_V"] == block and c.num_warps == warps)
    launches = pin(ce.cross_entropy_fwd_bwd, config)
    for case, (vocab, dtype, autocast, chunk) in CASES.items():
        out["errors"][f"{block}x{warps}/{case}"] = errors(vocab, dtype, autocast, chunk)
    out["launches"][f"{block}x{warps}"] = [launches.count, sorted({k[0] for k in launches.keys})]
json.dump(out, sys.stdout)
"""

_GPT2_SCRIPT = """
import json, sys, torch
from autotune.kernels import cross_entropy as ce, layernorm as ln
from autotune.kernels.pinning import pin
from autotune.workloads import gpt2


def pinned(kernel, **values):
    warps = values.pop("num_warps")
    return pin(kernel, next(c for c in kernel.configs if c.kwargs == values and c.num_warps == warps))


launches = [pinned(ln.layernorm_fwd, ROWS=4, num_warps=4), pinned(ln.layernorm_bwd, ROWS=8, num_warps=2),
            pinned(ce.cross_entropy_fwd_bwd, BLOCK_V=256, num_warps=4)]
gpt2.HEAD_CHUNK = 96  # 4 x 64 tokens: chunks of 96 + 96 + 64
torch.manual_seed(0)
plain = gpt2.build("tiny")
torch.manual_seed(0)
ours = gpt2.build("tiny", norm="triton", head="fused")
same_init = all(torch.equal(a, b) for a, b in zip(plain.model.state_dict().values(), ours.model.state_dict().values()))
ours.model.load_state_dict(plain.model.state_dict())
torch.manual_seed(1)
inputs, targets = plain.make_batch(4, torch.device("cpu"))


def step(work, autocast):
    work.model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        output = work.model(inputs)
        loss = work.loss_fn(output, targets)
    loss.backward()
    return loss, {name: p.grad for name, p in work.model.named_parameters()}, list(output.shape)


def rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


out = {"same_init": same_init, "tied": ours.model.head.weight is ours.model.wte.weight,
       "keys": list(plain.model.state_dict()) == list(ours.model.state_dict()),
       "triton_norms": sum(isinstance(m, ln.TritonLayerNorm) for m in ours.model.modules())}
for name, autocast in (("fp32", False), ("bf16", True)):
    plain_loss, plain_grads, plain_shape = step(plain, autocast)
    our_loss, our_grads, our_shape = step(ours, autocast)
    out[name] = {"loss": rel(our_loss, plain_loss), "shapes": [plain_shape, our_shape],
                 "grads": max(rel(our_grads[k], plain_grads[k]) for k in plain_grads)}
out["launches"] = [p.count for p in launches]
json.dump(out, sys.stdout)
"""


def _interpret(script: str, *args: str) -> dict[str, Any]:
    """``script``'s JSON output, run in a fresh process with ``TRITON_INTERPRET=1``."""
    env = child_env(REPO, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    """What the kernel computed, config by config and case by case, in the interpreter."""
    return _interpret(_KERNEL_SCRIPT, json.dumps(CONFIGS), json.dumps(CASES))


@pytest.fixture(scope="module")
def gpt2_interpreted() -> dict[str, Any]:
    """GPT-2 tiny with norm=triton, head=fused against norm=torch, head=torch, in the interpreter."""
    return _interpret(_GPT2_SCRIPT)


def test_interpreter_is_on_in_the_child(interpreted: dict[str, Any]) -> None:
    assert interpreted["interpreted"] is True


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"BLOCK_V={c[0]}-warps={c[1]}")
def test_loss_and_gradients_match_torch(interpreted: dict[str, Any], config: tuple[int, int], case: str) -> None:
    found = interpreted["errors"][f"{config[0]}x{config[1]}/{case}"]
    _, dtype, autocast, _ = CASES[case]
    tolerance = TOLERANCE[autocast or dtype]
    for name in ("loss", "hidden", "weight"):
        assert 0 <= found[name] <= tolerance, f"{case} {name}: relative error {found[name]}"  # NaN fails too
    assert 0 <= found["no_grad_loss"] <= TOLERANCE["fp32"]  # fp32 inputs, no gradients computed


def test_loss_is_fp32_and_gradients_keep_their_tensors_dtypes(interpreted: dict[str, Any]) -> None:
    errors = interpreted["errors"]
    assert errors["256x2/bf16"]["dtypes"] == ["torch.float32", "torch.bfloat16", "torch.bfloat16"]
    assert errors["256x2/autocast_bf16"]["dtypes"] == ["torch.float32"] * 3


def test_the_pinned_kernel_ran_once_per_chunk_keyed_by_vocab(interpreted: dict[str, Any]) -> None:
    chunks = sum(-(-37 // chunk) for _, _, _, chunk in CASES.values())
    for count, vocabs in interpreted["launches"].values():
        assert count == 2 * chunks  # with gradients, then without
        assert vocabs == [300, 600]


def test_kernel_is_listed_as_ordered_params_and_restores_what_it_overwrites() -> None:
    listed = load_kernel("autotune.kernels.cross_entropy:cross_entropy_fwd_bwd")
    params = {p.name: p.values for p in listed.params() if p.ordinal}
    assert params == {
        "cross_entropy_fwd_bwd.BLOCK_V": (256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
        "cross_entropy_fwd_bwd.num_warps": (2, 4, 8, 16, 32),
    }
    assert listed.feasibility is not None
    assert {(c.kwargs["BLOCK_V"], c.num_warps) for c in listed.autotuner.configs} >= {(256, 8), (32768, 8)}
    assert (256, 16) not in {(c.kwargs["BLOCK_V"], c.num_warps) for c in listed.autotuner.configs}
    assert listed.autotuner.restore_value == ["logits_ptr"]  # autotuning on a GPU must not see gradients as logits


def test_bad_inputs_are_refused_before_launch() -> None:
    hidden, weight = torch.randn(4, 8), torch.randn(10, 8)
    with pytest.raises(ValueError, match="hidden"):
        ce.fused_linear_cross_entropy(hidden, torch.randn(10, 6), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="targets"):
        ce.fused_linear_cross_entropy(hidden, weight, torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="chunk=0"):
        ce.fused_linear_cross_entropy(hidden, weight, torch.zeros(4, dtype=torch.long), chunk=0)


@pytest.mark.skipif(ce._interpreted(), reason="this process runs Triton's interpreter")
def test_cpu_without_interpreter_is_bad_input() -> None:
    with pytest.raises(AutotuneError, match="TRITON_INTERPRET=1"):
        ce.fused_linear_cross_entropy(torch.randn(4, 8), torch.randn(10, 8), torch.zeros(4, dtype=torch.long))


# GPT-2 with our kernels.


def test_gpt2_with_our_kernels_matches_gpt2_with_torchs(gpt2_interpreted: dict[str, Any]) -> None:
    found = gpt2_interpreted
    assert found["same_init"] and found["tied"] and found["keys"]  # one seed, one model, one state_dict
    assert found["triton_norms"] == 2 * 2 + 1  # ln1 and ln2 of both blocks, and ln_f
    assert found["fp32"]["shapes"] == [[4, 64, 512], [4, 64, 64]]  # logits, or hidden states for the fused head
    assert found["fp32"]["loss"] <= TOLERANCE["fp32"]
    assert found["fp32"]["grads"] <= 1e-4, found["fp32"]  # through two blocks, every parameter
    assert found["bf16"]["loss"] <= TOLERANCE["bf16"]
    assert found["bf16"]["grads"] <= 3e-2, found["bf16"]
    assert all(count > 0 for count in found["launches"])


def test_gpt2_takes_norm_and_head_as_workload_params() -> None:
    assert workload_params(gpt2.build) == {"norm": "torch", "head": "torch", "data": "synthetic"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"norm": "apex"}, "gpt2: norm='apex' is not valid: expected one of torch, triton"),
     ({"head": "liger"}, "gpt2: head='liger' is not valid: expected one of torch, fused")],
)  # fmt: skip
def test_gpt2_refuses_unknown_kernels(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(AutotuneError, match=message):
        gpt2.build("tiny", **kwargs)


def test_gpt2_defaults_import_no_triton() -> None:
    script = "import sys; from autotune.workloads import gpt2; gpt2.build('tiny'); print('triton' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


# On a GPU: GPT-2's LM head (768 features, vocabulary 50304 = 12 x 4096 + 1152), 4096 + 7 tokens.


def _gpu_errors(dtype: torch.dtype, autocast: bool, tokens: int = 4096 + 7, chunk: int = 1024) -> dict[str, float]:
    torch.manual_seed(0)
    hidden = torch.randn(tokens, 768, device="cuda").to(dtype).requires_grad_()
    weight = (torch.randn(50304, 768, device="cuda") * 2 / 768**0.5).to(dtype).requires_grad_()
    targets = torch.randint(0, 50304, (tokens,), device="cuda")
    targets[0] = 50303
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        loss = ce.fused_linear_cross_entropy(hidden, weight, targets, chunk=chunk)
    (1.7 * loss).backward()
    refs = [t.detach().float().requires_grad_() for t in (hidden, weight)]
    expected = ce.reference(refs[0], refs[1], targets)
    (1.7 * expected).backward()

    return {
        "loss": rel_error(loss, expected),
        "hidden": rel_error(hidden.grad, refs[0].grad),
        "weight": rel_error(weight.grad, refs[1].grad),
    }


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    ("dtype", "autocast", "tolerance"),
    [(torch.float32, False, TOLERANCE["fp32"]), (torch.bfloat16, False, TOLERANCE["bf16"]),
     (torch.float32, True, TOLERANCE["bf16"])],
    ids=["fp32", "bf16", "autocast_bf16"],
)  # fmt: skip
def test_gpu_pinned_configs_match_torch_at_gpt2_sizes(dtype: torch.dtype, autocast: bool, tolerance: float) -> None:
    kernel = ce.cross_entropy_fwd_bwd
    for block, warps in [(1024, 4), (4096, 8), (32768, 16)]:
        config = next(c for c in kernel.configs if c.kwargs["BLOCK_V"] == block and c.num_warps == warps)
        with pinned(kernel, config):
            found = _gpu_errors(dtype, autocast)
        assert max(found.values()) <= tolerance, (config, found)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_unpinned_autotuning_restores_the_logits_it_overwrites() -> None:
    found = _gpu_errors(torch.bfloat16, autocast=False, tokens=257)  # benchmarks every config on one chunk first
    assert max(found.values()) <= TOLERANCE["bf16"], found


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    ("autocast", "loss_tol", "grad_tol"), [(False, 1e-5, 1e-3), (True, 1e-2, 5e-2)], ids=["fp32", "bf16"]
)
def test_gpu_gpt2_small_with_our_kernels_matches_torchs(autocast: bool, loss_tol: float, grad_tol: float) -> None:
    with torch.device("cuda"):
        torch.manual_seed(0)
        plain = gpt2.build("small")
        ours = gpt2.build("small", norm="triton", head="fused")
    ours.model.load_state_dict(plain.model.state_dict())
    assert plain.make_batch is not None
    inputs, targets = plain.make_batch(4, torch.device("cuda"))
    results = []
    for work in (plain, ours):
        assert work.loss_fn is not None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = work.loss_fn(work.model(inputs), targets)
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in work.model.named_parameters()}))
    (plain_loss, plain_grads), (our_loss, our_grads) = results
    assert abs(our_loss - plain_loss).item() <= loss_tol * plain_loss.item()
    worst = max(rel_error(our_grads[name], grad) for name, grad in plain_grads.items())
    assert worst <= grad_tol
