"""The resnet50 workload's data modes: synthetic batches, host images through a real loader,
a trial in a real process, and the shipped resnet50_data.yaml swept (shrunk to a CPU run)."""

from __future__ import annotations

import io
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from study_records import measured_records
from torch.utils.data import DataLoader

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner
from autotune.views.progress import Progress
from autotune.workloads import resnet50
from autotune.workloads.hostdata import DeviceAugment, HostImageBatches, HostImages, whole_batch

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
TINY = resnet50.PRESETS["tiny"]


def test_synthetic_data_is_what_it_was_and_ignores_the_host_params() -> None:
    torch.manual_seed(0)
    before = resnet50.ResNet(TINY.layers, TINY.width, TINY.classes)  # the model, then the batch: as before data modes
    images = torch.randn(4, 3, TINY.image, TINY.image)
    for params in ({}, {"data": "synthetic", "augment": "gpu", "fetch": "batch"}):
        torch.manual_seed(0)
        work = resnet50.build("tiny", **params)
        assert work.dataset is None and work.make_batch is not None
        assert torch.equal(work.make_batch(4, CPU)[0], images)
        weights, expected = work.model.state_dict(), before.state_dict()
        assert all(torch.equal(weights[name], expected[name]) for name in expected)


@pytest.mark.parametrize(
    ("augment", "fetch", "dataset_class", "collate_fn"),
    [("cpu", "sample", HostImages, None), ("gpu", "batch", HostImageBatches, whole_batch)],
)
def test_host_data_gives_a_dataset_that_a_step_trains_on(
    augment: str, fetch: str, dataset_class: type, collate_fn: object
) -> None:
    work = workloads.build("resnet50", "tiny", {"data": "host", "augment": augment, "fetch": fetch}, CPU)
    assert isinstance(work, workloads.Workload) and work.make_batch is None
    assert type(work.dataset) is dataset_class and work.collate_fn is collate_fn
    assert (work.device_transform == DeviceAugment(TINY.image)) if augment == "gpu" else work.device_transform is None
    assert work.dataset is not None
    loader = DataLoader(work.dataset, batch_size=4, shuffle=True, drop_last=True, collate_fn=work.collate_fn)
    batch = next(iter(loader))
    images, labels = work.device_transform(batch) if work.device_transform else batch
    assert images.shape == (4, 3, TINY.image, TINY.image) and labels.dtype == torch.int64
    assert work.loss_fn is not None
    loss = work.loss_fn(work.model(images), labels)
    loss.backward()
    assert torch.isfinite(loss) and loss > 0


def test_an_unknown_data_mode_is_refused() -> None:
    with pytest.raises(AutotuneError, match="resnet50: data='disk' is not valid: expected one of synthetic, host"):
        resnet50.build("tiny", data="disk")


@pytest.mark.slow  # a trial process with two loader workers
def test_a_host_data_trial_runs_in_a_real_process() -> None:
    # What `autotune trial resnet50 -p data=host ...` runs (params as the command line gives them, text), here
    # from this process's warm forkserver: `autotune trial` as a process is tested in tests/test_cli.py.
    params = {"data": "host", "augment": "gpu", "fetch": "batch", "num_workers": "2"}
    result = TrialRunner().run(TrialSpec("resnet50", params, "tiny", "cpu"), timeout_s=300).to_dict()
    assert result["status"] == "ok", result["reason"]
    params, metrics = result["params"], result["metrics"]
    assert (params["data"], params["augment"], params["fetch"], params["num_workers"]) == ("host", "gpu", "batch", 2)
    assert metrics["throughput"] > 0 and metrics["throughput_unit"] == "images/s"
    assert 0 < metrics["data_wait_frac"] < 1 and metrics["data_wait_ms_p50"] >= 0
    assert metrics["loss_rel_error"] < 1e-3  # the fp32 reference was taken on the first host batch


def _tiny_cpu_data_space() -> dict[str, object]:
    """search_spaces/resnet50_data.yaml as shipped, but tiny, on the CPU, three trials, eager, 0 or 2 workers."""
    space = yaml.safe_load((REPO / "search_spaces" / "resnet50_data.yaml").read_text())
    space.update(device="cpu", budget={"trials": 3, "trial_timeout": "2m"})
    space["workload"]["preset"] = "tiny"
    params = space["params"]
    params.update(
        batch_size={"choices": [8, 16], "ordinal": True, "default": 8},
        precision=["default", "bf16"],
        compile_mode=["none"],  # compiling on a CPU takes longer than this test should
        num_workers={"choices": [0, 2], "ordinal": True, "default": 0},
    )
    for name in ("prefetch_factor", "persistent_workers"):
        params[name]["when"] = {"num_workers": [2]}
    return space


@pytest.mark.slow  # three trial processes
def test_the_shipped_data_space_sweeps_host_data_trials(tmp_path: Path) -> None:
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(_tiny_cpu_data_space(), sort_keys=False))
    storage = f"sqlite:///{tmp_path}/autotune.db"
    # The sweep in this process, its trials in real processes (`autotune sweep` as a process: tests/sweep).
    # No pruning: a trial slowed by the machine's other jobs below half the best is pruned, not measured (seen once).
    options = SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0, prune_ratio=0)
    run_sweep(load_space(tmp_path / "data.yaml"), options, Progress(None, None, io.StringIO()))
    study = optuna.load_study(study_name="data", storage=storage)
    trials = measured_records(study)
    assert len(trials) == 3
    for trial in trials:
        result = trial.result
        assert result is not None and result.ok, result
        assert {"augment", "fetch", "num_workers", "pin_memory"} <= set(trial.params)
        assert 0 <= result.metrics["data_wait_frac"] <= 1  # measured for a dataset workload only: data: host took
