"""A workload that shows which Inductor options its compile ran under, and is fast only under the finalists' ones."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from torch._inductor import config
from torch.nn import functional as F

from autotune.workloads import Workload

WATCHED = ("coordinate_descent_tuning", "epilogue_fusion")
SLOW_STEP_S = 0.02  # what a step costs unless Inductor compiled it with coordinate_descent_tuning


def inductor_witness(preset: str = "tiny", record: str = "") -> Workload:
    """A tiny MLP. Each graph Inductor compiles appends the watched options, as Inductor's config holds them
    during that compile, to ``record`` (one JSON line: the process id and the options); each step then sleeps
    :data:`SLOW_STEP_S` unless the last compile ran with coordinate_descent_tuning, so a finalist given it
    is the clear winner."""
    width = 32
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))
    seen = {"tuned": False}

    def witness(graph: torch.fx.Graph) -> None:  # Inductor's post-grad hook: runs inside its compile
        options = {name: getattr(config, name) for name in WATCHED}
        seen["tuned"] = bool(options["coordinate_descent_tuning"])
        with Path(record).open("a") as out:
            out.write(json.dumps({"pid": os.getpid(), **options}) + "\n")

    config.post_grad_custom_post_pass = witness  # this trial process runs this one workload only

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, width, device=device), torch.randint(0, 10, (batch_size,), device=device)

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:  # eager: outside the compiled model
        if not seen["tuned"]:
            time.sleep(SLOW_STEP_S)
        return F.cross_entropy(output, target)

    return Workload(model, make_batch, loss_fn, default_batch_size=16)
