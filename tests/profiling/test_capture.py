"""capture() around a real training step: the categories, the data wait, the trace, on the CPU (and a GPU)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.profiler import record_function

from autotune.profiling.capture import capture
from autotune.profiling.kernel_categories import CATEGORIES
from autotune.workloads import Workload, build

# A slow loader: far longer than the tiny model's step (about 15 ms here; 62 ms once on a loaded 2-core machine,
# where a 30 ms wait was then a third of the step).
WAIT_S = 0.2


def training_step(device: torch.device, wait_s: float = 0.0) -> Callable[[int], None]:
    """One step of the tiny built-in ResNet on host data, as the trial job runs it: fetch (a data wait), copy, train."""
    workload = build("resnet50", "tiny", {}, device)
    assert isinstance(workload, Workload) and workload.make_batch is not None and workload.loss_fn is not None
    model, loss_fn = workload.model, workload.loss_fn
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = workload.make_batch(4, torch.device("cpu"))

    def step(i: int) -> None:
        with record_function("autotune.data_wait"):
            time.sleep(wait_s)
            inputs, targets = images.to(device), labels.to(device)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step(0)  # warm: capture runs after the trial's timed window
    return step


def test_a_cpu_training_step_is_split_into_categories(tmp_path: Path) -> None:
    trace = tmp_path / "default" / "trace.json"
    summary = capture(training_step(torch.device("cpu")), 3, "cpu", trace)
    json.dumps(summary)  # goes back to the parent in the TrialResult
    assert summary["device"] == "cpu" and summary["steps"] == 3 and summary["step_ms"] > 0
    categories = summary["categories_ms"]
    assert list(categories) == list(CATEGORIES)
    assert categories["matmul_conv"] > 0 and categories["norm_elementwise"] > 0
    assert categories["gpu_idle"] is None and categories["copy_h2d"] is None and categories["copy_d2h"] is None
    # On a CPU the categories cover the whole step: ops' own time, the wait, and the rest as other.
    assert sum(v for v in categories.values() if v is not None) == pytest.approx(summary["step_ms"])
    top = summary["top"]
    assert top[0]["ms"] >= top[-1]["ms"] and top[0]["calls"] >= 1
    assert any(kernel["name"] == "aten::mkldnn_convolution" for kernel in top)
    assert summary["trace"] == str(trace)
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(event.get("name") == "autotune.step" for event in events) == 3


def test_a_slow_loader_shows_as_data_wait() -> None:
    summary = capture(training_step(torch.device("cpu"), WAIT_S), 2, torch.device("cpu"))
    wait_ms = summary["categories_ms"]["data_wait"]
    assert wait_ms >= WAIT_S * 1e3
    assert wait_ms / summary["step_ms"] > 0.5
    assert summary["trace"] is None


def test_no_steps_is_a_bug() -> None:
    with pytest.raises(ValueError, match="steps=0"):
        capture(lambda _i: None, 0, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gpu_step_shows_kernels_copies_and_idle_time(tmp_path: Path) -> None:
    summary = capture(training_step(torch.device("cuda"), WAIT_S), 3, "cuda", tmp_path / "trace.json")
    categories = summary["categories_ms"]
    assert categories["matmul_conv"] > 0 and categories["copy_h2d"] > 0
    assert categories["gpu_idle"] >= WAIT_S * 1e3 * 0.9  # the GPU waits while the host sleeps in the loader
    assert categories["data_wait"] >= WAIT_S * 1e3
    kernels = [c for c in CATEGORIES if c not in ("data_wait", "gpu_idle")]
    assert sum(categories[c] for c in kernels) <= summary["step_ms"] * 1.01  # one stream: no overlap
    assert all(not kernel["name"].startswith("aten::") for kernel in summary["top"])  # GPU kernels, not ops
