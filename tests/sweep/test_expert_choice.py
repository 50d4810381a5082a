"""The informed start's choice: what an expert would try first for a space on a device, after a default trial
whose result is given (no process runs)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

from expert_facts import CPU, H100, V100, default_trial
from optuna.trial import TrialState
from study_records import measured_default

from autotune.measurement import Status
from autotune.records import TrialRecord
from autotune.space import Space, load_space
from autotune.sweep.proposals.expert_choice import (
    FLOAT8_MIN_SHARE,
    DeviceFacts,
    expert_params,
    float8_pays,
    float8_twin,
    informed_twin,
    likely_starts,
    precision_twin,
)

SPACES = Path(__file__).resolve().parents[2] / "search_spaces"


def space_file(tmp_path: Path, params: str, extra: str = "") -> Space:
    path = tmp_path / "space.yaml"
    workload = 'workload: {name: "trial_workloads:tiny_mlp", preset: tiny}'
    path.write_text(f"{workload}\ndevice: cuda\n{extra}params:\n{params}")
    return load_space(path)


def test_on_a_gpu_every_knob_an_expert_turns_and_the_largest_batch_that_fits() -> None:
    space = load_space(SPACES / "resnet50.yaml")
    expert = expert_params(space, default_trial(space, 10.8), H100)  # the default: 10.8 GiB at batch 128
    assert expert.params == {
        # 10.8 / 128 x 0.8 (bf16) x 512 = 34.6 GiB: under 90% of the GPU (71.2) and of the constraint (<= 70)
        "batch_size": 512,
        "precision": "bf16",
        "memory_format": "channels_last",
        "compile_mode": "default",
        "cudnn_benchmark": True,
        "fused_optimizer": True,
    }
    assert "about 34.6 GiB at 512" in expert.describe() and "peak_mem_gib <= 70" in expert.describe()
    assert all(space.params[name].contains(value) for name, value in expert.params.items())


def test_the_batch_keeps_under_a_memory_constraint_and_the_memory_cap() -> None:
    capped = load_space(SPACES / "resnet50_memcap.yaml")  # peak_mem_gib <= 16: 256 would be about 17.3 GiB
    assert expert_params(capped, default_trial(capped, 10.8), H100).params["batch_size"] == 128
    space = load_space(SPACES / "resnet50.yaml")
    # --memory-cap 20: 18 GiB usable, so 256 (17.3) and not 512.
    assert expert_params(space, default_trial(space, 10.8), H100, memory_cap_gib=20).params["batch_size"] == 256
    # A small GPU: 16 GiB, 14.4 usable.
    small = DeviceFacts("cuda", "T4", 16.0, bf16=False, four_d_weights=True)
    expert = expert_params(space, default_trial(space, 10.8), small)
    assert expert.params["batch_size"] == 128 and expert.params["precision"] == "fp16"


def test_without_bf16_fp16_and_the_workloads_own_fused_head() -> None:
    space = load_space(SPACES / "gpt2.yaml")
    facts = DeviceFacts("cuda", "V100", 31.7, bf16=False, workload_choices={"head": "fused"})
    expert = expert_params(space, default_trial(space, 19.8), facts)
    assert expert.params["precision"] == "fp16" and expert.params["head"] == "fused"
    # 19.8 GiB at 16 in fp32: 32 sequences in fp16 would be about 31.7 GiB, over 90% of 31.7
    assert expert.params["batch_size"] == 16
    h100 = DeviceFacts("cuda", "H100", 79.1, bf16=True, workload_choices={"head": "fused"})
    assert expert_params(space, default_trial(space, 19.8), h100).params == {
        "batch_size": 64,  # 63.4 GiB estimated; measured 59.1 with torch's head (BENCHMARKS.md)
        "precision": "bf16",
        "compile_mode": "default",
        "compile_scope": "model",  # the whole model: the fastest step (blocks trade step time for compile time)
        "fused_optimizer": True,
        "head": "fused",
    }


def unmeasured_default(space: Space) -> TrialRecord:
    """The space's default trial while it runs: its params, no result yet."""
    measured = default_trial(space, None)
    return TrialRecord(
        number=0, state=TrialState.RUNNING, kind=None, params=measured.params, result=None, status=None, reason=None,
        default=True, violation=None, objectives=(None,), first_values=None,
    )  # fmt: skip


def test_before_the_default_is_measured_the_informed_start_is_guessed_at_the_largest_batches() -> None:
    space = load_space(SPACES / "resnet50.yaml")
    guesses = likely_starts(space, unmeasured_default(space), H100, 3)
    # All but the batch as the informed start after the default decides it (above); its batch needs the default's
    # peak, so the space's largest first: 512, as on the H100, its fp16 twin (measured next), then 256.
    measured = expert_params(space, default_trial(space, 10.8), H100).params
    assert guesses == [measured, {**measured, "precision": "fp16"}, {**measured, "batch_size": 256}]
    assert likely_starts(space, unmeasured_default(space), H100, 9)[-1]["batch_size"] == 128  # none below the default's
    assert likely_starts(space, unmeasured_default(space), CPU, 2) == [  # a CPU keeps the default's batch
        expert_params(space, default_trial(space, 1.0), CPU).params
    ]


def test_no_guess_where_the_expert_would_change_nothing(tmp_path: Path) -> None:
    space = space_file(tmp_path, "  batch_size: {choices: [16, 32], ordinal: true, default: 16}\n")
    assert likely_starts(space, unmeasured_default(space), H100, 2) == []


def test_listed_kernels_keep_the_defaults_block_sizes() -> None:
    space = load_space(SPACES / "gpt2_kernels.yaml")
    facts = DeviceFacts("cuda", "H100", 79.1, bf16=True, workload_choices={"head": "fused"})
    default = default_trial(space, 19.8)
    expert = expert_params(space, default, facts)
    assert expert.params["head"] == "fused" and expert.params["norm"] == "torch"
    kernel_params = {name: value for name, value in default.params.items() if "." in name}
    assert kernel_params and all(expert.params[name] == value for name, value in kernel_params.items())
    assert space.is_feasible(expert.params) == (True, None)


def test_on_a_cpu_compile_and_the_fused_optimizer_but_no_bf16_batch_or_triton() -> None:
    space = load_space(SPACES / "gpt2.yaml")
    facts = DeviceFacts("cpu", "CPU", 23.5, bf16=False, workload_choices={"head": "fused"})
    expert = expert_params(space, default_trial(space, 1.2), facts)
    assert expert.changes == {"compile_mode": "default", "compile_scope": "model", "fused_optimizer": True}
    amx = DeviceFacts("cpu", "CPU", 23.5, bf16=True, workload_choices={"head": "fused"})
    assert expert_params(space, default_trial(space, 1.2), amx).changes["precision"] == "bf16"
    resnet = load_space(SPACES / "resnet50.yaml")
    assert expert_params(resnet, default_trial(resnet, 1.0), CPU).changes == {
        "memory_format": "channels_last",  # oneDNN's convolutions prefer it too
        "compile_mode": "default",
        "fused_optimizer": True,
    }


def test_only_values_the_space_offers_and_what_it_fixes_stays(tmp_path: Path) -> None:
    space = space_file(
        tmp_path,
        """\
  precision: [default, fp32]
  matmul_precision: [auto, high]
  compile_mode: none
  memory_format: [contiguous]
  batch_size: {choices: [16, 32], default: 16}
""",
    )
    expert = expert_params(space, default_trial(space, 10.0), H100)
    # No bf16, fp16 or tf32 on offer: TF32 matmuls at least. Compile fixed to none; 32 would need 20 of 71.2 GiB.
    assert expert.params == {
        "precision": "default",
        "matmul_precision": "high",
        "compile_mode": "none",
        "memory_format": "contiguous",
        "batch_size": 32,
    }


def test_conditional_params_follow_the_choices_made_before_them(tmp_path: Path) -> None:
    space = space_file(
        tmp_path,
        """\
  num_workers: {choices: [0, 2, 4, 8, 12], ordinal: true, default: 0}
  prefetch_factor: {choices: [2, 4, 8], ordinal: true, default: 2, when: {num_workers: [2, 4, 8, 12]}}
  pin_memory: [false, true]
  non_blocking: {choices: [true, false], default: false, when: {pin_memory: [true]}}
""",
    )
    default = default_trial(space, 1.0)
    assert default.params == {"num_workers": 0, "pin_memory": False}
    on_gpu = expert_params(space, default, H100).params
    assert on_gpu == {"num_workers": 4, "prefetch_factor": 2, "pin_memory": True, "non_blocking": True}
    on_cpu = expert_params(space, default, CPU)
    assert on_cpu.params == default.params and not on_cpu.changes  # nothing to change: no informed start


def test_the_informed_start_has_a_twin_in_the_other_half_precision_where_the_gpu_has_both(tmp_path: Path) -> None:
    space = load_space(SPACES / "resnet50.yaml")
    default = default_trial(space, 10.8)
    expert = expert_params(space, default, H100)
    assert precision_twin(space, expert.params, H100) == {**expert.params, "precision": "fp16"}
    # no bf16 on a V100 (its expert picks fp16), none on a CPU
    assert precision_twin(space, expert_params(space, default, V100).params, V100) is None
    assert precision_twin(space, expert_params(space, default, CPU).params, CPU) is None
    only_bf16 = space_file(tmp_path, "  precision: [default, bf16]\n  compile_mode: [none, default]\n")
    assert precision_twin(only_bf16, expert_params(only_bf16, default_trial(only_bf16, 1.0), H100).params, H100) is None


def test_no_twin_where_the_precision_switches_another_param_or_breaks_a_rule(tmp_path: Path) -> None:
    gated = space_file(
        tmp_path,
        """\
  precision: [default, bf16, fp16]
  cudnn_benchmark: {choices: [false, true], default: false, when: {precision: [fp16]}}
""",
    )
    assert precision_twin(gated, expert_params(gated, default_trial(gated, 1.0), H100).params, H100) is None
    ruled = space_file(
        tmp_path,
        "  precision: [default, bf16, fp16]\n  batch_size: {choices: [16, 32], default: 16}\n",
        extra="feasibility:\n  - \"precision != 'fp16'\"\n",
    )
    expert = expert_params(ruled, default_trial(ruled, 1.0), H100)
    assert expert.params["precision"] == "bf16" and precision_twin(ruled, expert.params, H100) is None


def test_after_an_oom_the_batch_below_the_defaults() -> None:
    space = load_space(SPACES / "resnet50.yaml")
    expert = expert_params(space, default_trial(space, None, Status.OOM), H100)
    assert expert.params["batch_size"] == 64 and "ran out of memory at batch 128" in expert.describe()
    crashed = expert_params(space, default_trial(space, None, Status.CRASH), H100)
    assert crashed.params["batch_size"] == 128  # no peak to scale: the default's batch


_CHECKPOINTING = """\
  batch_size: {choices: [8, 12, 16, 20, 24, 32], ordinal: true, default: 8}
  activation_checkpointing: [none, full, selective]
"""


def checkpointed_trial(number: int, params: dict[str, object], peak_gib: float) -> TrialRecord:
    """A measured trial of ``params`` other than the default, at ``peak_gib`` of peak memory."""
    record = measured_default(params, {"throughput": 100.0, "peak_mem_gib": peak_gib})
    return dataclasses.replace(record, number=number, default=False)


def test_under_a_memory_constraint_checkpointing_buys_a_larger_batch(tmp_path: Path) -> None:
    space = space_file(tmp_path, _CHECKPOINTING, "constraints: [peak_mem_gib <= 10]\n")
    default = default_trial(space, 4.0)  # 0.5 GiB a sample: 16 fit under 90% of 10 GiB, 18 would not
    expert = expert_params(space, default, H100)
    # selective keeps 0.85 of the peak until one is measured: 0.425 GiB a sample, 20 fit (8.5 GiB)
    assert expert.params == {"batch_size": 20, "activation_checkpointing": "selective"}
    assert "about 8.5 GiB at 20 with activation_checkpointing=selective" in expert.describe()
    # without the constraint, memory does not hold the batch back: no recomputation, the largest batch
    free = space_file(tmp_path, _CHECKPOINTING)
    assert expert_params(free, default_trial(free, 4.0), H100).params == {
        "batch_size": 32,
        "activation_checkpointing": "none",
    }


def test_a_measured_checkpointed_trial_replaces_the_factor(tmp_path: Path) -> None:
    space = space_file(tmp_path, _CHECKPOINTING, "constraints: [peak_mem_gib <= 10]\n")
    default = default_trial(space, 4.0)
    # selective measured at 6.0 GiB for 20: 0.3 GiB a sample, so 24 fit (7.2 GiB), which the factor (0.425) refused
    selective = checkpointed_trial(3, {"batch_size": 20, "activation_checkpointing": "selective"}, 6.0)
    expert = expert_params(space, default, H100, measured=(default, selective))
    assert expert.params == {"batch_size": 24, "activation_checkpointing": "selective"}
    assert "trial 3's peak 6.0 GiB at batch 20 scaled: about 7.2 GiB at 24, within" in expert.describe()
    # selective measured heavier (9.5 GiB at 20: 0.475 a sample) fits 16 only, as none does; full, not measured,
    # keeps 0.7 of the default's 0.5 a sample: 24 fit
    heavy = checkpointed_trial(3, {"batch_size": 20, "activation_checkpointing": "selective"}, 9.5)
    expert = expert_params(space, default, H100, measured=(default, heavy))
    assert expert.params == {"batch_size": 24, "activation_checkpointing": "full"}


def test_the_batch_grows_the_activations_only_where_the_models_state_is_known(tmp_path: Path) -> None:
    # a 2B-parameter decoder on an H200: 56.0 GiB at batch 2 in fp32, 30 GiB of it weights, gradients and AdamW state
    space = space_file(tmp_path, "  batch_size: {choices: [2, 4, 8, 16], ordinal: true, default: 2}\n"
                       "  precision: [default, bf16]\n")  # fmt: skip
    default = default_trial(space, 56.0)
    whole = expert_params(space, default, H200)
    # the whole peak scaled: 56.0 / 2 * 0.8 = 22.4 GiB a sample, so 4 is the largest batch within 125.8 GiB
    assert whole.params["batch_size"] == 4
    split = expert_params(space, default, replace(H200, state_gib=30.0))
    # the rest scaled: (56.0 - 30.0) / 2 * 0.8 = 10.4 GiB a sample, 30 + 83.2 = 113.2 GiB at 8 fits, 16 does not
    assert split.params["batch_size"] == 8
    assert "(30.0 GiB of it weights, gradients and optimizer state) scaled: about 113.2 GiB at 8" in split.describe()
    # a state the peak cannot hold (a wrong count) is not trusted: the whole peak is scaled
    assert expert_params(space, default, replace(H200, state_gib=60.0)).params["batch_size"] == 4


FP8_SPACE = """\
  precision: [default, bf16, fp16]
  float8: {choices: [none, rowwise, tensorwise], when: {precision: [bf16]}}
"""
H200 = DeviceFacts("cuda", "NVIDIA H200", 139.8, bf16=True, cpus=16, float8=True, float8_share=0.76)


def test_on_a_gpu_with_fp8_and_large_layers_the_informed_start_trains_in_float8(tmp_path: Path) -> None:
    space = space_file(tmp_path, FP8_SPACE, extra="float8_filter: {exclude: [lm_head]}\n")
    expert = expert_params(space, default_trial(space, 1.0), H200)
    assert expert.params == {"precision": "bf16", "float8": "tensorwise", "float8_filter": "exclude=lm_head"}
    assert precision_twin(space, expert.params, H200) == {"precision": "fp16"}  # fp16 has no float8 to carry
    for facts in (replace(H200, float8_share=0.40), replace(H200, float8=False), replace(H200, float8_share=None)):
        assert not float8_pays(facts)
        assert expert_params(space, default_trial(space, 1.0), facts).params == {"precision": "bf16", "float8": "none"}
    assert float8_pays(replace(H200, float8_share=FLOAT8_MIN_SHARE)) and not float8_pays(replace(H200, device="cpu"))


def test_a_float8_informed_start_is_measured_beside_its_twin_without_float8(tmp_path: Path) -> None:
    space = space_file(tmp_path, FP8_SPACE, extra="float8_filter: {exclude: [lm_head]}\n")
    expert = expert_params(space, default_trial(space, 1.0), H200)
    # float8 off, and the filter it alone switched on goes with it: what float8 gains is then measured, not assumed
    assert float8_twin(space, expert.params) == {"precision": "bf16", "float8": "none"}
    assert informed_twin(space, expert.params, H200) == {"precision": "bf16", "float8": "none"}
    # without float8 in the start the twin is the other half precision, as before
    no_fp8 = expert_params(space, default_trial(space, 1.0), replace(H200, float8=False)).params
    assert float8_twin(space, no_fp8) is None
    assert informed_twin(space, no_fp8, H200) == {"precision": "fp16"}
    # a space whose float8 offers no "none" has no float8 twin
    forced = space_file(tmp_path, "  precision: [bf16]\n  float8: [tensorwise, rowwise]\n")
    assert float8_twin(forced, {"precision": "bf16", "float8": "tensorwise"}) is None


def test_the_informed_start_tries_float8_only_where_the_space_has_it(tmp_path: Path) -> None:
    space = space_file(tmp_path, "  precision: [default, bf16]\n  compile_mode: [none, default]\n")
    expert = expert_params(space, default_trial(space, 1.0), H200)
    assert expert.params == {"precision": "bf16", "compile_mode": "default"}
