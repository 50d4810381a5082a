"""Which linear layers gain from float8 training on this GPU: one layer's forward and backward, compiled, in bf16 and
in each torchao float8 recipe, over a grid of shapes.

    python3 scripts/float8_layer_benchmark.py [--tokens 16384] [--out float8_layers.json]

Each row is an ``nn.Linear(K, N)`` fed ``tokens`` rows (batch x sequence): the bf16 step time, each recipe's, and
its speedup over bf16, with whether torchao's auto filter (``_auto_filter_for_recipe``, tuned on H100s) would
convert that layer. The rule the informed start and the default float8 filter use is read from such a table.
Needs a GPU of compute capability 8.9 or more and torchao.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

# (K, N): in_features, out_features. Square layers from a small model's attention to a 3B model's, and the MLP's
# up and down projections of 1B (2048 <-> 8192) and 3B (3072 <-> 8192) decoders.
SHAPES = [
    (512, 512),
    (1024, 1024),
    (2048, 512),
    (2048, 2048),
    (3072, 3072),
    (4096, 4096),
    (2048, 8192),
    (8192, 2048),
    (3072, 8192),
    (8192, 3072),
    (8192, 8192),
]
RECIPES = ["tensorwise", "rowwise"]


def _step_ms(layer: nn.Module, tokens: int, k: int, n: int) -> float:
    """Median milliseconds of one compiled forward and backward of ``layer`` over ``tokens`` rows."""
    x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(layer)

    def step() -> None:
        compiled(x).backward(grad)

    return _median_ms(step)


def _median_ms(step: Callable[[], None], warmup: int = 5, iters: int = 20, repeats: int = 5) -> float:
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return statistics.median(times)


def _layer(k: int, n: int) -> nn.Linear:
    return nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)


def measure(tokens: int) -> list[dict[str, object]]:
    """One row per shape: bf16 and each recipe's step time, speedups, torchao's auto-filter verdicts."""
    from torchao.float8 import Float8LinearConfig, _auto_filter_for_recipe, convert_to_float8_training

    rows: list[dict[str, object]] = []
    for k, n in SHAPES:
        torch._dynamo.reset()
        row: dict[str, object] = {"K": k, "N": n, "tokens": tokens, "bf16_ms": _step_ms(_layer(k, n), tokens, k, n)}
        for recipe in RECIPES:
            torch._dynamo.reset()
            holder = nn.Sequential(_layer(k, n))
            convert_to_float8_training(holder, config=Float8LinearConfig.from_recipe_name(recipe))
            ms = _step_ms(holder, tokens, k, n)
            row[f"{recipe}_ms"] = ms
            row[f"{recipe}_speedup"] = row["bf16_ms"] / ms  # type: ignore[operator]
            row[f"{recipe}_torchao_filter"] = _auto_filter_for_recipe(recipe, [])(_layer(k, n), "layer")
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict[str, object]) -> str:
    said = [f"K={row['K']:>5} N={row['N']:>5}  bf16 {row['bf16_ms']:.3f} ms"]
    for recipe in RECIPES:
        keep = "converted" if row[f"{recipe}_torchao_filter"] else "left out"
        said.append(f"{recipe} {row[f'{recipe}_ms']:.3f} ms ({row[f'{recipe}_speedup']:.2f}x, torchao: {keep})")
    return "  ".join(said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16384, help="rows a layer sees a step (batch x sequence)")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        raise SystemExit("float8_layer_benchmark: needs a GPU of compute capability 8.9 or more")
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    rows = measure(args.tokens)
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
