"""The gpt2 workload's data modes: synthetic tokens, host token windows through a real loader and a trial."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner
from autotune.workloads import gpt2
from autotune.workloads.hostdata import HostTokens, widen_tokens

CPU = torch.device("cpu")
TINY = gpt2.PRESETS["tiny"]


def test_synthetic_tokens_are_made_on_the_device_as_before() -> None:
    torch.manual_seed(0)
    gpt2.GPT(TINY)
    tokens = torch.randint(0, TINY.vocab, (2, TINY.seq + 1))
    torch.manual_seed(0)
    work = gpt2.build("tiny")
    assert work.dataset is None and work.make_batch is not None
    inputs, targets = work.make_batch(2, CPU)
    assert torch.equal(inputs, tokens[:, :-1]) and torch.equal(targets, tokens[:, 1:])


def test_host_tokens_give_a_dataset_that_a_step_trains_on() -> None:
    work = workloads.build("gpt2", "tiny", {"data": "host"}, CPU)
    assert isinstance(work, workloads.Workload) and work.make_batch is None
    assert isinstance(work.dataset, HostTokens) and work.device_transform is widen_tokens
    assert len(work.dataset) == gpt2.HOST_TOKENS["tiny"] - TINY.seq
    loader = DataLoader(work.dataset, batch_size=TINY.batch, shuffle=True, drop_last=True)
    inputs, targets = widen_tokens(next(iter(loader)))
    assert inputs.shape == (TINY.batch, TINY.seq) and torch.equal(inputs[:, 1:], targets[:, :-1])
    assert work.loss_fn is not None
    loss = work.loss_fn(work.model(inputs), targets)
    loss.backward()
    assert abs(float(loss.detach()) - math.log(TINY.vocab)) < 0.5  # random tokens, small init: about ln(vocab)


def test_an_unknown_data_mode_is_refused() -> None:
    with pytest.raises(AutotuneError, match="gpt2: data='files' is not valid: expected one of synthetic, host"):
        gpt2.build("tiny", data="files")


@pytest.mark.slow  # a trial process
def test_a_host_tokens_trial_runs_in_a_real_process() -> None:
    # What `autotune trial gpt2 -p data=host` runs, here from this process's warm forkserver (`autotune trial`
    # as a process is tested in tests/test_cli.py).
    result = TrialRunner().run(TrialSpec("gpt2", {"data": "host"}, "tiny", "cpu"), timeout_s=300).to_dict()
    assert result["status"] == "ok", result["reason"]
    metrics = result["metrics"]
    assert metrics["throughput"] > 0 and metrics["throughput_unit"] == "tokens/s"
    assert 0 < metrics["data_wait_frac"] < 1 and metrics["loss_rel_error"] < 1e-3
