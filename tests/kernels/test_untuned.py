"""The fp32 reference pass runs each ``triton.autotune`` kernel's first config and chooses nothing; the steps choose.

Real processes in Triton's CPU interpreter (``TRITON_INTERPRET=1`` before triton is imported), with the kernels of
``user_kernels``: the ones whose benchmark makes the last config win whatever the CPU does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from checks import run_interpreted

PRELUDE = """
import json, sys, torch, triton, user_kernels as uk
from triton.runtime.errors import OutOfResources
from autotune.kernels.choices import loaded_autotuners
from autotune.kernels.pinning import pin
from autotune.kernels.untuned import first_configs
from autotune.trial.numerics import reference_pass

CONFIGS = [triton.Config({"BLOCK_SIZE": size}, num_warps=1, num_stages=1) for size in (16, 32, 64)]


def plain_loss(workload, batch):  # the reference's math with every kernel choosing as ever
    with torch.no_grad():
        return float(workload.loss_fn(workload.model(batch[0]), batch[1]))


found = {}
"""

REFERENCE = """
workload = uk.last_wins_mlp()
batch = workload.make_batch(16, torch.device("cpu"))
passed = reference_pass(workload, batch)
reference = passed.loss
kernel = uk.last_wins_add
at_reference = {"block": uk.LAST_BLOCK[0], "configs": len(kernel.configs), "cache": len(kernel.cache)}
stepped = plain_loss(workload, batch)
found["reference"] = {"at_reference": at_reference, "stepped_block": uk.LAST_BLOCK[0],
                      "autotuning": sorted(passed.autotuning),
                      "cache": len(uk.last_wins_add.cache), "same_loss": reference == stepped}
"""

LEFT_TO_CHOOSE = """
# A pruning rule may drop configs that are wrong for a shape: that kernel chooses, from what its rule keeps.
ruled_add = triton.autotune(
    configs=CONFIGS, key=["n"], do_bench=uk._last_wins_bench,
    prune_configs_by={"early_config_prune": lambda configs, nargs, **kwargs: configs[:2]},
)(uk._scaled_add)
pin(uk.scaled_add, CONFIGS[2])  # a listed kernel, pinned by its trial: one config already
# A kernel whose run another library patched on the instance: the patch is kept, and comes back after the block.
patched_add = triton.autotune(configs=CONFIGS, key=["n"], do_bench=uk._last_wins_bench)(uk._scaled_add)
patched_calls = [0]


def patched_run(*args, **kwargs):
    patched_calls[0] += 1
    return type(patched_add).run(patched_add, *args, **kwargs)


patched_add.run = patched_run
x, y = torch.randn(40), torch.randn(40)
with first_configs() as cut:
    ruled = uk.launch(ruled_add, x, y)[1]
    pinned = uk.launch(uk.scaled_add, x, y)[1]
    free = uk.launch(uk.last_wins_add, x, y)[1]
    patched = uk.launch(patched_add, x, y)[1]
paths = [path for path, _ in loaded_autotuners()]
found["left_to_choose"] = {"found": paths, "cut": cut.cut, "launched": sorted(cut.launched),
                           "ruled": ruled, "pinned": pinned, "free": free, "patched": patched,
                           "patched_calls": patched_calls[0], "patch_back": vars(patched_add).get("run") is patched_run,
                           "run_back": "run" not in vars(uk.last_wins_add),
                           "configs_after": len(uk.last_wins_add.configs)}
"""

FIRST_FAILS = """
refused = [0]


def too_big(nargs):  # what a config needing more shared memory than the GPU has meets at its launch
    refused[0] += 1
    raise OutOfResources(232448, 227328, "shared memory")


failing_first = triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 16}, num_warps=1, num_stages=1, pre_hook=too_big), *CONFIGS[1:]],
    key=["n"], do_bench=uk._last_wins_bench,
)(uk._scaled_add)
uk.KERNEL[0] = failing_first
workload = uk.kernel_mlp()
batch = workload.make_batch(16, torch.device("cpu"))
passed = reference_pass(workload, batch)
reference = passed.loss
found["first_fails"] = {"block": uk.LAST_BLOCK[0], "configs": len(failing_first.configs),
                        "autotuning": sorted(passed.autotuning),
                        "same_loss": reference == plain_loss(workload, batch), "refused": refused[0]}
"""

GENUINE = """
import dataclasses
passes = [0]


def broken_loss(outputs, targets):  # fails after the kernel ran: the trial's failure, not a config's
    passes[0] += 1
    raise RuntimeError("the loss failed")


workload = dataclasses.replace(uk.last_wins_mlp(), loss_fn=broken_loss)
try:
    reference_pass(workload, workload.make_batch(16, torch.device("cpu")))
    raised = None
except RuntimeError as exc:
    raised = str(exc)
found["genuine"] = {"raised": raised, "passes": passes[0], "configs": len(uk.last_wins_add.configs)}
"""


TIMED = """
import time
x, y = torch.randn(40), torch.randn(40)
with first_configs() as plain:
    uk.launch(uk.last_wins_add, x, y)
with first_configs(time_on=torch.device("cpu")) as timed:
    began = time.perf_counter()
    for _ in range(3):
        uk.launch(uk.last_wins_add, x, y)
    spent_ms = (time.perf_counter() - began) * 1e3
found["timed"] = {"plain": plain.launches is None, "count": len(timed.launches), "ms": timed.launches.ms(),
                  "from_second": timed.launches.ms(since=1), "spent_ms": spent_ms, "block": uk.LAST_BLOCK[0]}
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The scenarios below, in order, in one process (each one's kernels load after the others ran)."""
    script = PRELUDE + REFERENCE + LEFT_TO_CHOOSE + FIRST_FAILS + GENUINE + TIMED + "json.dump(found, sys.stdout)\n"
    return json.loads(run_interpreted(["-c", script], tmp_path_factory.mktemp("untuned")).stdout)


def test_the_reference_runs_the_first_config_and_the_step_still_benchmarks(found: Any) -> None:
    done = found["reference"]
    # The reference launched config 1 of 3 and left no choice behind; its kernel's configs are whole again.
    assert done["at_reference"] == {"block": 16, "configs": 3, "cache": 0}
    assert done["autotuning"] == ["user_kernels:last_wins_add"]  # launched cut: the trial's first step autotunes it
    assert done["stepped_block"] == 64 and done["cache"] == 1  # the step benchmarked all three: the last won
    assert done["same_loss"]  # 2x + y is exact in fp32 whatever the block size


def test_a_kernel_with_a_pruning_rule_and_a_pinned_kernel_are_left_as_they_are(found: Any) -> None:
    done = found["left_to_choose"]
    assert {"__main__:ruled_add", "user_kernels:scaled_add", "user_kernels:last_wins_add"} <= set(done["found"])
    # Named by the module that defines it, not by an alias (the reference scenario's `kernel`), though the
    # interpreter's function wrapping it says Triton's module (autotune.kernels.choices._home_module).
    assert "__main__:kernel" not in done["found"]
    assert "user_kernels:last_wins_add" in done["cut"]
    assert "__main__:ruled_add" not in done["cut"] and "user_kernels:scaled_add" not in done["cut"]
    assert done["ruled"] == 32  # benchmarked the two configs its rule kept; the later one won
    assert done["pinned"] == 64 and done["free"] == 16
    # Those launched of the kernels cut (declared_add was not); each one's run is its own again after the block.
    assert done["launched"] == ["__main__:patched_add", "user_kernels:last_wins_add"]
    assert done["patched"] == 16 and done["patched_calls"] == 1 and done["patch_back"] and done["run_back"]
    assert done["configs_after"] == 3


def test_a_first_config_that_cannot_run_sends_the_reference_back_to_the_kernels_own_choice(found: Any) -> None:
    done = found["first_fails"]
    # Refused twice: as the reference's lone config, then in the benchmark of the pass run again (once, uncut).
    # Its kernels chose in that second pass: none is left for the trial's steps to autotune.
    assert done == {"block": 64, "configs": 3, "same_loss": True, "refused": 2, "autotuning": []}


def test_any_other_failure_of_the_reference_is_raised_at_once(found: Any) -> None:
    assert found["genuine"] == {"raised": "the loss failed", "passes": 1, "configs": 3}


def test_a_timed_block_times_each_launch_of_a_cut_kernel(found: Any) -> None:
    # The eager probe's share of its steps spent in the kernels that would autotune comes from these times (in the
    # interpreter by the host's clock: the kernel runs inside the call).
    done = found["timed"]
    assert done["plain"]  # an untimed block keeps no times
    assert done["count"] == 3 and done["block"] == 16  # each launch, on the first config
    assert 0 < done["from_second"] < done["ms"] <= done["spent_ms"]
