"""The Triton LayerNorm against torch's: outputs and gradients, several pinned configs, fp32 and bf16.

The kernels run in Triton's CPU interpreter in a fresh process (``TRITON_INTERPRET=1`` must be set
before a process first imports triton); unpinned, a kernel with several configs would need a GPU to
benchmark them, so each config is pinned. In that process every ``torch.empty``/``torch.empty_like``
returns NaNs, so an output element the kernels never write shows up as an error. GPU tests run the
same checks compiled, at GPT-2's sizes.
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
from torch import nn

from autotune.errors import AutotuneError
from autotune.kernels import layernorm as ln
from autotune.kernels.listing import load_kernel
from autotune.kernels.pinning import pinned

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2}  # relative error ||out - ref|| / ||ref|| against torch in fp32

# (ROWS, num_warps) pinned together: one row per program, a block that leaves a ragged last tile
# (39 rows), and the largest block; the backward's 16-row programs split 39 rows 16 + 16 + 7.
CONFIGS = [((1, 1), (1, 2)), ((4, 4), (2, 8)), ((16, 2), (16, 16))]

_SCRIPT = """
import json, sys, torch
from torch import nn

_empty, _empty_like = torch.empty, torch.empty_like
torch.empty = lambda *a, **k: _empty(*a, **k).fill_(float("nan"))  # unwritten outputs become NaN
torch.empty_like = lambda *a, **k: _empty_like(*a, **k).fill_(float("nan"))

from autotune.kernels import layernorm as ln
from autotune.kernels.pinning import pin

CONFIGS = json.loads(sys.argv[1])
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
FWD, BWD = list(ln.layernorm_fwd.configs), list(ln.layernorm_bwd.configs)


def config(configs, rows, warps):
    return next(c for c in configs if c.kwargs["ROWS"] == rows and c.num_warps == warps)


def rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def errors(x, weight, bias):
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    refs = [t.detach().float().requires_grad_() for t in (x, weight, bias)]
    y = ln.layer_norm(*leaves)
    ref = ln.reference(*refs)
    dy = torch.randn(y.shape, dtype=y.dtype)  # random, never ones: sum(dx) over a row would be ~0
    y.backward(dy)
    ref.backward(dy.float())
    return {
        "dtypes": [str(t.dtype) for t in (y, *(leaf.grad for leaf in leaves))],
        "y": rel(y, ref), "dx": rel(leaves[0].grad, refs[0].grad),
        "dw": rel(leaves[1].grad, refs[1].grad), "db": rel(leaves[2].grad, refs[2].grad),
    }


def inputs(shape, x_dtype, param_dtype):
    n = shape[-1]
    x = (torch.randn(shape) * 3 + 1).to(DTYPES[x_dtype])  # a mean and scale of their own: not already normal
    return x, (1 + torch.randn(n) / 2).to(DTYPES[param_dtype]), torch.randn(n).to(DTYPES[param_dtype])


torch.manual_seed(0)
cases = {  # name: (shape, x dtype, weight/bias dtype); N=50 is not a power of two, 39 rows fill no block
    "fp32": ((3, 13, 50), "fp32", "fp32"),
    "bf16": ((37, 64), "bf16", "bf16"),
    "bf16_fp32_params": ((3, 13, 50), "bf16", "fp32"),  # autocast: bf16 activations, fp32 parameters
}
out = {"interpreted": ln._interpreted(), "errors": {}, "launches": {}}
for (fwd_rows, fwd_warps), (bwd_rows, bwd_warps) in CONFIGS:
    label = f"fwd{fwd_rows}x{fwd_warps}-bwd{bwd_rows}x{bwd_warps}"
    fwd = pin(ln.layernorm_fwd, config(FWD, fwd_rows, fwd_warps))
    bwd = pin(ln.layernorm_bwd, config(BWD, bwd_rows, bwd_warps))
    for case, (shape, x_dtype, param_dtype) in cases.items():
        out["errors"][f"{label}/{case}"] = errors(*inputs(shape, x_dtype, param_dtype))
    out["launches"][label] = [fwd.count, [list(k) for k in fwd.keys], bwd.count]

x, w, b = inputs((39, 50), "fp32", "fp32")
out["errors"]["strided"] = errors(x.T.contiguous().T, w, b)  # last dimension strided: copied to rows first

torch_ln = nn.LayerNorm(50)
with torch.no_grad():
    torch_ln.weight.normal_()
    torch_ln.bias.normal_()
triton_ln = ln.TritonLayerNorm(50)
triton_ln.load_state_dict(torch_ln.state_dict())
x = torch.randn(7, 50)
out["module"] = {
    "keys": [sorted(torch_ln.state_dict()), sorted(triton_ln.state_dict())],
    "error": rel(triton_ln(x), torch_ln(x)),
    "is_layer_norm": isinstance(triton_ln, nn.LayerNorm),
}
empty = ln.layer_norm(torch.randn(0, 50, requires_grad=True), w, b)
out["empty"] = list(empty.shape)
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    """What the kernels computed in a process started with ``TRITON_INTERPRET=1``."""
    env = child_env(REPO, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(CONFIGS)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_interpreter_is_on_in_the_child(interpreted: dict[str, Any]) -> None:
    assert interpreted["interpreted"] is True


@pytest.mark.parametrize("case", ["fp32", "bf16", "bf16_fp32_params"])
@pytest.mark.parametrize("configs", CONFIGS, ids=lambda c: f"fwd{c[0]}-bwd{c[1]}")
def test_outputs_and_gradients_match_torch(interpreted: dict[str, Any], configs: Any, case: str) -> None:
    (fwd_rows, fwd_warps), (bwd_rows, bwd_warps) = configs
    found = interpreted["errors"][f"fwd{fwd_rows}x{fwd_warps}-bwd{bwd_rows}x{bwd_warps}/{case}"]
    tolerance = TOLERANCE["fp32" if case == "fp32" else "bf16"]
    for name in ("y", "dx", "dw", "db"):
        assert 0 <= found[name] <= tolerance, f"{case} {name}: relative error {found[name]}"  # NaN fails too


def test_outputs_and_gradients_keep_their_tensors_dtypes(interpreted: dict[str, Any]) -> None:
    errors = interpreted["errors"]
    bf16, fp32 = "torch.bfloat16", "torch.float32"
    assert errors["fwd1x1-bwd1x2/bf16"]["dtypes"] == [bf16] * 4
    assert errors["fwd1x1-bwd1x2/bf16_fp32_params"]["dtypes"] == [bf16, bf16, fp32, fp32]


def test_a_strided_input_matches_torch(interpreted: dict[str, Any]) -> None:
    found = interpreted["errors"]["strided"]
    assert max(found[name] for name in ("y", "dx", "dw", "db")) <= TOLERANCE["fp32"], found


def test_the_pinned_kernels_ran_keyed_by_row_width(interpreted: dict[str, Any]) -> None:
    for fwd_count, fwd_keys, bwd_count in interpreted["launches"].values():
        assert fwd_count == bwd_count == 3  # one forward and one backward per case
        assert sorted({key[0] for key in fwd_keys}) == [50, 64]


def test_triton_layer_norm_is_a_drop_in_nn_layer_norm(interpreted: dict[str, Any]) -> None:
    module = interpreted["module"]
    assert module["keys"] == [["bias", "weight"], ["bias", "weight"]]
    assert module["error"] <= TOLERANCE["fp32"]
    assert module["is_layer_norm"]
    assert interpreted["empty"] == [0, 50]


def test_kernels_are_listed_as_ordered_params() -> None:
    for name in ("layernorm_fwd", "layernorm_bwd"):
        params = load_kernel(f"autotune.kernels.layernorm:{name}").params()
        assert [(p.name, p.values, p.ordinal) for p in params] == [
            (f"{name}.ROWS", (1, 2, 4, 8, 16), True),
            (f"{name}.num_warps", (1, 2, 4, 8, 16), True),
        ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"bias": False}, "bias=False"), ({"elementwise_affine": False}, "elementwise_affine=False")],
)
def test_triton_layer_norm_needs_weight_and_bias(kwargs: dict[str, bool], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ln.TritonLayerNorm(8, **kwargs)


def test_bad_shapes_are_refused_before_launch() -> None:
    with pytest.raises(ValueError, match=r"must be \(8,\)"):
        ln.layer_norm(torch.randn(2, 8), torch.ones(4), torch.zeros(8))
    wide = ln.MAX_N + 1
    with pytest.raises(ValueError, match="wider than MAX_N"):
        ln.layer_norm(torch.randn(1, wide), torch.ones(wide), torch.zeros(wide))


@pytest.mark.skipif(ln._interpreted(), reason="this process runs Triton's interpreter")
def test_cpu_without_interpreter_is_bad_input() -> None:
    with pytest.raises(AutotuneError, match="TRITON_INTERPRET=1"):
        ln.layer_norm(torch.randn(2, 8), torch.ones(8), torch.zeros(8))


# On a GPU: the compiled kernels at GPT-2's widths (full 768, small 384, tiny 64), 16 x 1024 tokens + 3.


def _gpu_errors(n: int, dtype: torch.dtype) -> dict[str, float]:
    torch.manual_seed(0)
    x = (torch.randn(16 * 1024 + 3, n, device="cuda") * 3 + 1).to(dtype).requires_grad_()
    w = (1 + torch.randn(n, device="cuda") / 2).to(dtype).requires_grad_()
    b = torch.randn(n, device="cuda").to(dtype).requires_grad_()
    refs = [t.detach().float().requires_grad_() for t in (x, w, b)]
    y, ref = ln.layer_norm(x, w, b), ln.reference(refs[0], refs[1], refs[2])
    dy = torch.randn_like(y)
    y.backward(dy)
    ref.backward(dy.float())
    grads = {name: rel_error(t.grad, r.grad) for name, t, r in zip(("dx", "dw", "db"), (x, w, b), refs, strict=True)}
    return {"y": rel_error(y, ref), **grads}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("n", [768, 384, 64])
def test_gpu_pinned_configs_match_torch_at_gpt2_sizes(n: int, dtype: torch.dtype) -> None:
    tolerance = TOLERANCE["fp32" if dtype == torch.float32 else "bf16"]
    for (fwd_rows, fwd_warps), (bwd_rows, bwd_warps) in CONFIGS:
        fwd = next(c for c in ln.layernorm_fwd.configs if c.kwargs["ROWS"] == fwd_rows and c.num_warps == fwd_warps)
        bwd = next(c for c in ln.layernorm_bwd.configs if c.kwargs["ROWS"] == bwd_rows and c.num_warps == bwd_warps)
        with pinned(ln.layernorm_fwd, fwd), pinned(ln.layernorm_bwd, bwd):
            found = _gpu_errors(n, dtype)
        assert max(found.values()) <= tolerance, (fwd, bwd, found)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_unpinned_autotuning_picks_a_config_that_matches_torch() -> None:
    found = _gpu_errors(768, torch.bfloat16)  # benchmarks every config of both kernels first
    assert max(found.values()) <= TOLERANCE["bf16"], found


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_module_matches_nn_layer_norm_under_autocast() -> None:
    torch.manual_seed(0)
    torch_ln = nn.LayerNorm(768, device="cuda")
    triton_ln = ln.TritonLayerNorm(768, device="cuda")
    triton_ln.load_state_dict(torch_ln.state_dict())
    x = torch.randn(4, 1024, 768, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        expected, got = torch_ln(x), triton_ln(x)
    assert got.dtype == x.dtype  # torch's autocast layer norm also returns fp32 for an fp32 input
    assert rel_error(got, expected) <= TOLERANCE["fp32"]
