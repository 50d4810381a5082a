"""The llama workload: its presets' sizes (built on the meta device), a tiny trial in a real process."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch
from pythonpath import child_env

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner
from autotune.workloads import llama

META = torch.device("meta")


def parameters(preset: str, **params: int) -> int:
    """The parameter count of ``preset``'s model, built on ``meta``: shapes, no memory."""
    work = workloads.build("llama", preset, dict(params), META)
    assert isinstance(work, workloads.Workload)
    return sum(p.numel() for p in work.model.parameters())  # a tied embedding counts once


def test_the_1b_preset_is_llama_3_2_1b() -> None:
    assert parameters("1b") == 1_235_814_400  # Llama 3.2 1B's published 1.24B
    assert parameters("full") == parameters("1b")  # the shared name for a built-in's full size


def test_the_3b_preset_has_llama_3_2_3b_shapes_at_16_layers_and_all_28_on_request() -> None:
    assert parameters("3b") == 2_004_716_544
    assert parameters("3b", layers=28) == 3_212_749_824  # Llama 3.2 3B's published 3.21B


def test_the_125m_preset_is_gpt2_small_sized() -> None:
    assert parameters("125m") == parameters("small") == 124_668_672


def test_the_model_is_transformers_llama_with_sdpa_attention_and_grouped_query_heads() -> None:
    work = workloads.build("llama", "1b", {"seq": 1024}, META)
    assert isinstance(work, workloads.Workload)
    config: Any = work.model.config
    assert type(work.model).__name__ == "LlamaForCausalLM" and config._attn_implementation == "sdpa"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (2048, 16, 32)
    assert (config.num_key_value_heads, config.intermediate_size, config.vocab_size) == (8, 8192, 128256)
    assert work.items_per_sample == 1024 and work.unit == "tokens/s" and work.default_batch_size == 8


def test_bad_presets_and_params_are_refused_in_one_line() -> None:
    with pytest.raises(AutotuneError, match="preset 'huge' is not valid: expected one of tiny, small, full, 125m"):
        workloads.build("llama", "huge", {}, META)
    with pytest.raises(AutotuneError, match=r"llama: seq='long' is not valid: expected a positive integer"):
        llama.build("tiny", seq="long")  # type: ignore[arg-type]  # what -p seq=long hands it
    with pytest.raises(AutotuneError, match=r"llama: layers=0 is not valid"):
        llama.build("tiny", layers=0)


def test_without_transformers_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # what an environment without it raises: ImportError
    with pytest.raises(AutotuneError) as caught:
        llama.build("tiny")
    assert str(caught.value) == "workload llama needs Hugging Face transformers: pip install transformers"


def test_seq_given_as_text_sets_the_sequence_length() -> None:
    work = llama.build("tiny", seq="32")  # type: ignore[arg-type]
    inputs, targets = work.make_batch(2, torch.device("cpu")) if work.make_batch else (None, None)
    assert inputs is not None and targets is not None
    assert inputs.shape == (2, 32) and torch.equal(inputs[:, 1:], targets[:, :-1])


@pytest.mark.slow  # a trial process
def test_building_it_prints_nothing_where_transformers_imports_torchao() -> None:
    # torchao (installed with the test extra) logs the CUDA extensions a CPU cannot load, and torch the enums torchao
    # registers: four lines in every llama trial's output before the workload quietened them.
    pytest.importorskip("torchao")
    build = "from autotune.workloads import llama; llama.build('tiny')"
    done = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_tiny_trial_trains_and_reports_model_flops_and_tflops_but_no_mfu_on_a_cpu() -> None:
    result = TrialRunner().run(TrialSpec("llama", {"batch_size": 2}, "tiny", "cpu"), timeout_s=300)
    assert result.ok, result.reason
    metrics = result.metrics
    shape = llama.PRESETS["tiny"]
    tokens = 2 * shape.seq
    assert metrics["throughput_unit"] == "tokens/s" and metrics["loss_rel_error"] < 1e-3
    # Every weight but the embedding is a matmul's, forward and both gradients (6 FLOPs a weight a token); attention
    # adds its scores and their weighting, 12 x layers x width x sequence a token.
    work = llama.build("tiny")
    matmul_weights = sum(p.numel() for n, p in work.model.named_parameters() if "proj" in n or "lm_head" in n)
    attention = 12 * shape.layers * shape.dim * shape.seq * tokens
    assert metrics["model_flops_per_step"] == 6 * matmul_weights * tokens + attention
    step_s = tokens / metrics["throughput"]
    assert metrics["tflops"] == pytest.approx(metrics["model_flops_per_step"] / step_s / 1e12)
    assert "mfu" not in metrics and "peak_tflops" not in metrics  # no peak for a CPU
