"""What the informed start asks in a trial process: the device's facts and the model's size."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autotune.trial.probe import STATE_BYTES_PER_PARAM, device_facts, training_state_gib


def test_the_training_state_counts_each_parameter_once_at_sixteen_bytes() -> None:
    linear = nn.Linear(1024, 1024)
    assert training_state_gib(linear) == (1024 * 1024 + 1024) * STATE_BYTES_PER_PARAM / 2**30
    tied = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 100, bias=False))
    tied[1].weight = tied[0].weight  # a tied LM head: one tensor, counted once
    assert training_state_gib(tied) == 100 * 8 * STATE_BYTES_PER_PARAM / 2**30
    with torch.device("meta"):  # as the probe builds it: no memory taken
        assert training_state_gib(nn.Linear(4096, 4096, bias=False)) == 4096 * 4096 * 16 / 2**30


def test_on_a_cpu_the_facts_hold_no_training_state_and_a_model_that_cannot_be_built_is_said_only_for_its_layout() -> (
    None
):
    facts = device_facts("llama", "tiny", {}, {}, "cpu", layout=True)
    assert facts["device"] == "cpu" and facts["four_d_weights"] is False and "state_gib" not in facts
    broken = device_facts("llama", "tiny", {"seq": -1}, {}, "cpu", layout=True)
    assert "layout_error" in broken and "seq" in broken["layout_error"]
    assert "layout_error" not in device_facts("llama", "tiny", {"seq": -1}, {}, "cpu", layout=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_facts_hold_the_models_training_state() -> None:
    facts = device_facts("llama", "tiny", {}, {}, "cuda", layout=False)
    with torch.device("meta"):
        from autotune.workloads.llama import make_model, shape_of

        expected = training_state_gib(make_model(shape_of("tiny")))
    assert facts["state_gib"] == expected > 0
