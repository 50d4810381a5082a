"""User workloads (``module:function``) that the tests run as real trials, some built to fail."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn import functional as F

from autotune.trial_process import AHEAD_PROCESS
from autotune.workloads import Workload

MakeBatch = Callable[[int, torch.device], tuple[torch.Tensor, torch.Tensor]]


def _mlp_parts(width: int = 32) -> tuple[torch.nn.Module, MakeBatch]:
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, width, device=device), torch.randint(0, 10, (batch_size,), device=device)

    return model, make_batch


def tiny_mlp(preset: str = "tiny") -> Workload:
    """A step of well under a millisecond: the trial that must run fine after each failure."""
    model, make_batch = _mlp_parts()
    return Workload(model, make_batch, F.cross_entropy, default_batch_size=16)


class _Hook(torch.nn.Module):
    """Runs ``action`` in forward, then behaves like its inner module."""

    def __init__(self, inner: torch.nn.Module, action: Callable[[], object]) -> None:
        super().__init__()
        self.inner, self.action = inner, action

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.action()
        return self.inner(x)


def sleepy(preset: str = "tiny", seconds: float = 600.0) -> Workload:
    """Hangs in its forward pass, as a deadlocked or pathologically slow step would."""
    model, make_batch = _mlp_parts()
    return Workload(_Hook(model, lambda: time.sleep(seconds)), make_batch, F.cross_entropy)


def spawner(preset: str = "tiny", pidfile: str = "") -> Workload:
    """Starts a helper process (as compile workers do), records its pid, then hangs."""
    helper = subprocess.Popen(["sleep", "600"])
    Path(pidfile).write_text(str(helper.pid))
    return sleepy(preset)


def crowded(preset: str = "tiny") -> Workload:
    """Runs out of memory (``torch.OutOfMemoryError``, as CUDA's allocator raises it) when built in a trial while a
    compile ahead of the same sweep runs: a process named as compiles ahead are, forked by the trial's own server.
    Built in a compile ahead, or in a trial with none beside it, it is :func:`tiny_mlp`."""
    if _own_name() != AHEAD_PROCESS and _compile_ahead_beside():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (a compile ahead holds the rest)")
    return tiny_mlp(preset)


def _own_name() -> str:
    return Path("/proc/self/comm").read_text().strip()


def _compile_ahead_beside(settle_s: float = 1.0) -> bool:
    """Whether a compile ahead forked by this process's server (its siblings) is running; looked for during
    ``settle_s`` (a compile ahead started just before this trial names itself within moments)."""
    deadline = time.monotonic() + settle_s
    while True:
        if any(_is_sibling_ahead(stat) for stat in Path("/proc").glob("[0-9]*/stat")):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _is_sibling_ahead(stat: Path) -> bool:
    """``/proc/PID/stat`` is a live compile ahead whose parent is this process's: ``PID (comm) state ppid ...``."""
    try:
        name, rest = stat.read_text().rsplit(")", 1)
    except (OSError, ValueError):
        return False  # gone meanwhile
    state, ppid = rest.split()[:2]
    return name.split("(", 1)[-1] == AHEAD_PROCESS and state != "Z" and int(ppid) == os.getppid()


def killed(preset: str = "tiny", signame: str = "SIGKILL") -> Workload:
    """Dies from a signal in its forward pass, as a segfaulting kernel or the OOM killer would."""
    model, make_batch = _mlp_parts()
    action = lambda: os.kill(os.getpid(), signal.Signals[signame])  # noqa: E731
    return Workload(_Hook(model, action), make_batch, F.cross_entropy)


def nan_loss(preset: str = "tiny", from_step: int = 0) -> Workload:
    """Its loss turns NaN from step ``from_step`` on, as a diverging fp16 run does."""
    model, make_batch = _mlp_parts()
    steps = [0]

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(output, target)
        steps[0] += 1
        return loss * float("nan") if steps[0] > from_step + 1 else loss  # +1: the reference pass

    return Workload(model, make_batch, loss_fn, default_batch_size=16)


def zeros(preset: str = "tiny") -> Workload:
    """Feeds all-zero inputs, which would flatter the timing: must be refused."""
    model, _ = _mlp_parts()

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(batch_size, 32, device=device), torch.zeros(batch_size, dtype=torch.long, device=device)

    return Workload(model, make_batch, F.cross_entropy)


def cancelling(preset: str = "tiny") -> Workload:
    """A loss computed as (y + 1000) - 1000: exact enough in fp32, mostly rounding error in bf16."""
    model, make_batch = _mlp_parts()

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((output + 1000.0) - 1000.0).float().pow(2).mean() + 1.0

    return Workload(model, make_batch, loss_fn, default_batch_size=16)


def outlier(preset: str = "tiny", config: str = "steady", marker: str = "") -> Workload:
    """``steady`` steps take 10 ms every time. ``lucky`` takes 2 ms in the first process that ever
    runs it (no ``marker`` file yet) and 30 ms in every later one: a first measurement that was an
    outlier, as a lucky clock or a quiet neighbour gives on a real machine; ``lucky2`` the same with a marker of
    its own. ``fragile``: 10 ms in the first process, and fails in every later one. ``slow``: 60 ms, always."""
    model, make_batch = _mlp_parts()
    delays = {"steady": 0.010, "slow": 0.060}
    if config not in delays:  # lucky, lucky2, fragile: their first process differs from the rest
        own_marker = Path(marker if config == "lucky" else f"{marker}.{config}")
        first = not own_marker.exists()
        own_marker.touch()
        if config == "fragile" and not first:
            raise RuntimeError("fragile: fails after its first run")
        delays[config] = 0.010 if config == "fragile" else 0.002 if first else 0.030
    delay = delays[config]
    return Workload(_Hook(model, lambda: time.sleep(delay)), make_batch, F.cross_entropy)


def outlier_space(marker: Path, configs: tuple[str, ...]) -> str:
    """A space of ``outlier`` configurations, a grid measured once each (``marker`` as above)."""
    return f"""\
workload: {{name: "trial_workloads:outlier", preset: tiny, args: {{marker: "{marker}"}}}}
device: cpu
budget: {{trials: {len(configs)}, trial_timeout: 2m}}
sampler: {{name: grid, seed: 0}}
params:
  config: [{", ".join(configs)}]
"""


class _Metronome:
    """Sleeps until one period after its last wake-up, so that back-to-back steps take the period whatever the rest
    of each step took, up to the period (past it, the step takes what its work took). Called a period or more late
    (the first call, or after a pause between a trial's phases), it sleeps a whole period."""

    def __init__(self, period_ms: float) -> None:
        self.period_s = period_ms / 1e3
        self.woke: float | None = None

    def __call__(self) -> None:
        now = time.perf_counter()
        if self.woke is None or now - self.woke >= 2 * self.period_s:  # the first call, or after a pause
            time.sleep(self.period_s)
        elif now < self.woke + self.period_s:
            time.sleep(self.woke + self.period_s - now)
        self.woke = time.perf_counter()


def _paced_parts(step_ms: float) -> tuple[torch.nn.Module, MakeBatch]:
    """A small MLP whose forward is paced at ``step_ms``, computing in one thread: with torch's two, a loaded 2-core
    machine took its steps' own work from 0.7 ms to 11 ms (median; 26 ms mean), with one, 0.7 ms (2.5 ms mean)."""
    torch.set_num_threads(1)
    model, make_batch = _mlp_parts()
    return _Hook(model, _Metronome(step_ms)), make_batch


def paced(preset: str = "tiny", step_ms: float = 60.0) -> Workload:
    """Steps of ``step_ms`` each (paced by sleeping): figures that hold on a loaded CPU; the default is the slow one."""
    model, make_batch = _paced_parts(step_ms)
    return Workload(model, make_batch, F.cross_entropy)


_BALLAST: list[torch.Tensor] = []  # kept alive: what the trial's peak memory must count


def roomy(preset: str = "tiny", step_ms: float = 20.0, mib_per_sample: int = 24) -> Workload:
    """Paced steps (larger batches are faster per sample, on any machine) whose batches hold ``mib_per_sample`` of
    host memory per sample: a memory constraint then cuts the fastest, largest batches."""
    model, make_parts = _paced_parts(step_ms)

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if not _BALLAST:
            _BALLAST.append(torch.ones(batch_size * mib_per_sample * 2**18))  # touched: resident, counted
        return make_parts(batch_size, device)

    return Workload(model, make_batch, F.cross_entropy)


# 300 block-size configurations, answered from synthetic records so that asks cost nothing.
LOCKSTEP_SPACE = """\
workload: {name: triton_matmul, preset: full}
device: cuda
budget: {trials: 40}
sampler: {name: random, seed: 0}
params:
  BLOCK_M: [16, 32, 64, 128, 256]
  BLOCK_N: [16, 32, 64, 128, 256]
  BLOCK_K: [16, 32, 64, 128]
  num_warps: [2, 4, 8]
"""


def lockstep_records() -> list[dict[str, object]]:
    """A synthetic record for every configuration of LOCKSTEP_SPACE, for a replay executor."""
    return [
        {"params": {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_warps": w}, "status": "ok", "tflops": m + n + k + w}
        for m in (16, 32, 64, 128, 256)
        for n in (16, 32, 64, 128, 256)
        for k in (16, 32, 64, 128)
        for w in (2, 4, 8)
    ]


class Layer(torch.nn.Module):
    """A residual layer: the repeated block of :func:`named_blocks`."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(torch.tanh(x))


class NamedStack(torch.nn.Module):
    """Three identical layers under two parents, named in ``_repeated_blocks``: siblings alone would be two."""

    _repeated_blocks = ("Layer",)

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.first = Layer(width)
        self.rest = torch.nn.Sequential(Layer(width), Layer(width))
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rest(self.first(x)))


def named_blocks(preset: str = "tiny") -> Workload:
    """A model that names its repeated blocks (``compile_scope=blocks`` compiles those three)."""
    _, make_batch = _mlp_parts()
    return Workload(NamedStack(32), make_batch, F.cross_entropy, default_batch_size=16)


class AttentionBlock(torch.nn.Module):
    """A pre-norm transformer block: causal ``F.scaled_dot_product_attention``, then a GELU MLP, each residual."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class AttentionStack(torch.nn.Module):
    """``layers`` identical attention blocks (found, not named) over sequences of ``width``-wide vectors; a class per
    sequence from its mean."""

    def __init__(self, layers: int = 3, width: int = 32) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(AttentionBlock(width) for _ in range(layers))
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def attention_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sequences of 16 vectors 32 wide, and their classes."""
    return torch.randn(batch_size, 16, 32, device=device), torch.randint(0, 10, (batch_size,), device=device)


def tiny_attention(preset: str = "tiny") -> Workload:
    """A three-block transformer on random sequences: the attention and checkpointing knobs' trials."""
    return Workload(AttentionStack(), attention_batch, F.cross_entropy, default_batch_size=8)


WIDE = 3072  # the smallest square Linear float8's tensorwise rule converts (autotune.knobs.float8.MIN_WEIGHT)


def wide_layers() -> torch.nn.Sequential:
    """Linear layers float8's default filter tells apart: ``up`` and ``mix`` wide enough for tensorwise, ``narrow``
    too small, ``lm_head`` the output head (a multiple of 16 wide, so a pattern may name it)."""
    return torch.nn.Sequential(
        OrderedDict(
            up=torch.nn.Linear(WIDE, WIDE),
            act=torch.nn.ReLU(),
            mix=torch.nn.Linear(WIDE, WIDE),
            act2=torch.nn.ReLU(),
            narrow=torch.nn.Linear(WIDE, 48),
            lm_head=torch.nn.Linear(48, 16),
        )
    )


def wide_mlp(preset: str = "tiny") -> Workload:
    """:func:`wide_layers` trained on random batches: the float8 trials' workload (a CPU step of milliseconds)."""

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, WIDE, device=device), torch.randint(0, 16, (batch_size,), device=device)

    return Workload(wide_layers(), make_batch, F.cross_entropy, default_batch_size=16)


def rank_dies(preset: str = "tiny", rank: int = 1, how: str = "kill", at_call: int = 4, pids: str = "") -> Workload:
    """In a data-parallel trial, rank ``rank`` dies in its forward pass from call ``at_call`` on (the reference pass
    and the FLOP count make the first two): killed by SIGKILL (``how=kill``), as a segfault or the OOM killer would,
    or raising (``how=raise``). Every rank writes its pid into the folder ``pids``."""
    own = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if pids:
        Path(pids, f"rank{own}.pid").write_text(str(os.getpid()))
    model, make_batch = _mlp_parts()
    calls = [0]

    def action() -> None:
        calls[0] += 1
        if own != rank or calls[0] < at_call:
            return
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {own} fails on purpose")

    return Workload(_Hook(model, action), make_batch, F.cross_entropy, default_batch_size=16)
