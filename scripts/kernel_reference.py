"""Our Triton LayerNorm and fused linear + cross-entropy against torch, eager and compiled, at GPT-2's shapes.

python scripts/kernel_reference.py --tokens 16384 65536

Each variant runs a whole training pass of the op (forward and backward) under bf16 autocast with
fp32 weights, as the ``gpt2`` workload does with ``precision=bf16``, timed with the same windowed
``do_bench`` (L2 flushed before every run) as the matmul trials. Our kernels run with the config
their own ``triton.autotune`` picks on the first call (every config benchmarked; printed), after a
check of outputs and gradients against the torch reference. Peak memory is the allocator's peak
during one pass, above what the inputs already hold.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F

from autotune.kernels import cross_entropy as ce
from autotune.kernels import layernorm as ln
from autotune.kernels.timing import settled_timing

HIDDEN = 768  # GPT-2 124M
VOCAB = 50257

Pass = Callable[[], list[torch.Tensor]]  # one forward + backward; returns the output and the gradients


def _peak_gib(run: Pass) -> float:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**30


def _rel_error(found: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(found.double() - ref.double()) / torch.linalg.vector_norm(ref.double()))


def _report(
    op: str, tokens: int, name: str, run: Pass, ref: list[torch.Tensor] | None, baseline: float | None
) -> float:
    run()  # compiles / autotunes (a benchmarking pass may leave gradients it accumulated wrong)
    outputs = run()
    errors = [_rel_error(o.detach(), r) for o, r in zip(outputs, ref, strict=True)] if ref is not None else []
    timing = settled_timing(run)
    peak = _peak_gib(run)
    vs = f" {baseline / timing['ms']:5.2f}x eager" if baseline is not None else ""
    error = f" max rel err {max(errors):.1e}" if errors else ""
    print(
        f"{op:<22} tokens={tokens:<6} {name:<26} {timing['ms']:8.3f} ms (cv {timing['window_cv']:.3f})"
        f"{vs} peak {peak:6.2f} GiB{error}",
        flush=True,
    )
    return timing["ms"]


def _layer_norm_pass(
    fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, grad: torch.Tensor
) -> Pass:
    def run() -> list[torch.Tensor]:
        for t in (x, w, b):
            t.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = fn(x, w, b)
        y.backward(grad)
        return [y, x.grad, w.grad, b.grad]  # type: ignore[list-item]

    return run


def layer_norm(tokens: int) -> None:
    x = torch.randn(tokens, HIDDEN, device="cuda", requires_grad=True)
    w = (1 + 0.1 * torch.randn(HIDDEN, device="cuda")).requires_grad_()
    b = (0.1 * torch.randn(HIDDEN, device="cuda")).requires_grad_()
    grad = torch.randn_like(x)  # one upstream gradient for every variant, so their gradients compare

    def torch_ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (HIDDEN,), w, b)

    eager = _layer_norm_pass(torch_ln, x, w, b, grad)
    ref = [t.detach().clone() for t in eager()]
    base = _report("layernorm fwd+bwd", tokens, "torch eager", eager, None, None)
    for name, fn in (("torch.compile", torch.compile(torch_ln)), ("ours (Triton)", ln.layer_norm)):
        _report("layernorm fwd+bwd", tokens, name, _layer_norm_pass(fn, x, w, b, grad), ref, base)
    print(f"  picked: fwd {ln.layernorm_fwd.best_config}, bwd {ln.layernorm_bwd.best_config}")


def _cross_entropy_pass(fn: Callable[..., torch.Tensor], h: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> Pass:
    def run() -> list[torch.Tensor]:
        h.grad = w.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fn(h, w, t)
        loss.backward()
        return [loss, h.grad, w.grad]  # type: ignore[list-item]

    return run


def cross_entropy(tokens: int) -> None:
    h = (torch.randn(tokens, HIDDEN, device="cuda") / HIDDEN**0.5).requires_grad_()
    w = (0.02 * torch.randn(VOCAB, HIDDEN, device="cuda")).requires_grad_()
    t = torch.randint(0, VOCAB, (tokens,), device="cuda")

    def torch_head(h: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(h @ w.T, t)

    eager = _cross_entropy_pass(torch_head, h, w, t)
    ref = [t.detach().clone() for t in eager()]
    base = _report("linear+cross-entropy", tokens, "torch eager", eager, None, None)
    compiled = _cross_entropy_pass(torch.compile(torch_head), h, w, t)
    _report("linear+cross-entropy", tokens, "torch.compile", compiled, ref, base)
    ours = _cross_entropy_pass(ce.fused_linear_cross_entropy, h, w, t)
    _report("linear+cross-entropy", tokens, f"ours (chunk {ce.DEFAULT_CHUNK})", ours, ref, base)
    print(f"  picked: {ce.cross_entropy_fwd_bwd.best_config}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[16384], help="batch x sequence (1024 in GPT-2)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for tokens in args.tokens:
        layer_norm(tokens)
        cross_entropy(tokens)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
