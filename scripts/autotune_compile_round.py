"""The fused LM head's autotuning round with no GPU: its configs compiled one after another, as Triton does, against
autotune's parallel compile (:mod:`autotune.kernels.autotuning`).

Triton compiles for a GPU it does not have (its wheel ships ``ptxas``): the driver here names the target (sm_90, an
H100 or H200, by default) and has no launcher, so a launch ends where it would reach the GPU (:class:`Launched`).
The round is Triton's own autotuner over the kernel's configs, with an injected ``do_bench`` (as Triton's tests
do): it launches its config, so a config not compiled yet compiles there, as in a trial, and ranks the configs by
a fixed order, so both modes choose the same. Each mode runs in a fresh process with an empty Triton cache.

    python scripts/autotune_compile_round.py [--configs N] [--dtype bfloat16] [--arch 90] [--config-hooks]

prints one JSON line per mode (``serial``, then ``parallel``): the round's seconds, the configs compiled before the
first benchmark, the compiles and the threads that ran them, the config chosen, and what a trial would record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VOCAB = 50304  # GPT-2's padded vocabulary: the head's shape key
ROWS = 4  # rows of logits: what is compiled does not depend on them


class Launched(Exception):
    """Where a kernel would start on the GPU: this driver compiles, it runs nothing."""


def _compile_only_driver(arch: int) -> Any:
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class CompileOnlyDriver(DriverBase):
        """Triton's driver interface for an NVIDIA GPU of compute capability ``arch`` that is not there."""

        @classmethod
        def is_active(cls) -> bool:
            return False

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError(ty)

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", arch, 32)

        def get_active_torch_device(self) -> torch.device:
            return torch.device("cpu")

        def get_benchmarker(self) -> Any:
            raise NotImplementedError("the round's do_bench is injected")

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def launcher_cls(self, *_args: Any) -> Any:
            raise Launched

    return CompileOnlyDriver()


def one_round(mode: str, configs: int, dtype: str, arch: int, config_hooks: bool = False) -> dict[str, Any]:
    """The round in this process (``mode``: ``serial``, Triton as it is; ``parallel``, autotune's hooks installed;
    ``config_hooks``: each config given a ``pre_hook``)."""
    import torch
    import triton
    import triton.compiler
    from triton.runtime.driver import driver

    from autotune.kernels import autotuning, cross_entropy

    driver.set_active(_compile_only_driver(arch))
    installed = autotuning.install() if mode == "parallel" else False
    head = cross_entropy.cross_entropy_fwd_bwd
    head.configs = head.configs[:configs]
    if config_hooks:  # each config with a pre_hook (one that does nothing): left to compile in its benchmark
        head.configs = [
            triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=lambda _args: None)
            for c in head.configs
        ]
    fastest = len(head.configs) // 2
    compiles: list[str] = []  # the thread that ran each compile
    compiled_at_benchmarks: list[int] = []
    compile = triton.compiler.compile  # what a JIT function binds at its first launch

    def counted_compile(*args: Any, **kwargs: Any) -> Any:
        kernel = compile(*args, **kwargs)
        compiles.append(threading.current_thread().name)
        return kernel

    def do_bench(kernel_call: Any, quantiles: Any) -> list[float]:
        index = len(compiled_at_benchmarks)
        compiled_at_benchmarks.append(len(compiles))
        with contextlib.suppress(Launched):  # compiled (where it was not yet), then stopped at the launch
            kernel_call()
        ms = 1.0 if index == fastest else 2.0 + index
        return [ms] * len(quantiles)

    triton.compiler.compile = counted_compile
    head._do_bench = do_bench
    head.__dict__.pop("do_bench", None)  # Triton caches the benchmarker it first looks up
    logits = torch.zeros(ROWS, VOCAB, dtype=getattr(torch, dtype))
    targets, losses = torch.zeros(ROWS, dtype=torch.long), torch.empty(ROWS)
    started = time.perf_counter()
    with contextlib.suppress(Launched):  # the round, then the launch of its choice
        head[(ROWS,)](logits, logits.stride(0), targets, losses, VOCAB)
    chosen = next(iter(head.cache.values()))
    return {
        "mode": mode,
        "installed": installed,
        "triton": triton.__version__,
        "arch": arch,
        "dtype": dtype,
        "configs": len(head.configs),
        "round_s": time.perf_counter() - started,
        "compiled_before_first_benchmark": compiled_at_benchmarks[0] if compiled_at_benchmarks else 0,
        "compiles": len(compiles),
        "threads": sorted(set(compiles)),
        "chosen": head.configs.index(chosen),
        "expected": fastest,
        **autotuning.autotuning_metrics(),
    }


def _child_env(cache: str) -> dict[str, str]:
    """This environment with an empty Triton cache, the repository importable and the CPU interpreter off."""
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**env, "TRITON_CACHE_DIR": cache, "PYTHONPATH": os.pathsep.join(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=10**6, help="the kernel's first N configs (all by default)")
    parser.add_argument("--dtype", default="bfloat16", help="the logits' dtype, a torch name")
    parser.add_argument("--arch", type=int, default=90, help="the compute capability compiled for (90: sm_90)")
    parser.add_argument("--config-hooks", action="store_true", help="give each config a pre_hook that does nothing")
    parser.add_argument("--mode", choices=["serial", "parallel"], help="one round in this process (internal)")
    options = parser.parse_args()
    if options.mode:
        found = one_round(options.mode, options.configs, options.dtype, options.arch, options.config_hooks)
        print(json.dumps(found))
        return
    for mode in ("serial", "parallel"):
        with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
            env = _child_env(cache)
            args = ["--mode", mode, "--configs", str(options.configs), "--dtype", options.dtype]
            args += ["--arch", str(options.arch), *(["--config-hooks"] if options.config_hooks else [])]
            done = subprocess.run(
                [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise SystemExit(f"the {mode} round failed: {done.stderr.strip().splitlines()[-1:]}")
            print(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
