"""A user's ``triton.autotune`` kernel listed in a space: swept, exported, pinned by ``apply()`` in production.

Where the kernel launches, everything runs as real processes in Triton's CPU interpreter
(``TRITON_INTERPRET=1`` must be set before a process imports triton), with the kernel module
``user_kernels`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import io
import itertools
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from checks import run_interpreted

from autotune.records import StudyRecords, schema
from autotune.space import SpaceError, load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.stages.summary import summary_text
from autotune.tracking.description import SweepFacts, finished
from autotune.views.export import export
from autotune.views.progress import Progress
from autotune.views.status import sweep_status

CONFIGS = {16: "BLOCK_SIZE=16 num_warps=1 num_stages=1", 32: "BLOCK_SIZE=32 num_warps=2 num_stages=1",
           64: "BLOCK_SIZE=64 num_warps=4 num_stages=2"}  # fmt: skip

SPACE = """\
workload: {{name: "{workload}", preset: tiny}}
device: cpu
kernels: ["user_kernels:scaled_add"]
budget: {{trials: {trials}, trial_timeout: 2m}}
sampler: {{name: grid, seed: 0}}
params:
  batch_size: 16
"""

APPLY = """
import json, sys, warnings, torch, autotune, user_kernels as uk
cfg = autotune.load("tuned.yaml")
model = uk.KernelMLP()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model, ctx = cfg.apply(model, torch.optim.AdamW(model.parameters()))
    model(torch.randn(16, 32)).sum().backward()
json.dump({"launched": uk.LAST_BLOCK[0], "configs": len(uk.scaled_add.configs),
           "warnings": [str(w.message) for w in caught if "kernel" in str(w.message)]}, sys.stdout)
"""


# `autotune sweep space.yaml` without MLflow, re-measuring or the report: what these tests read is the study.
QUICK_SWEEP = ["-m", "autotune", "sweep", "space.yaml", "--no-mlflow", "--remeasure-top", "0", "--no-report"]


@pytest.mark.slow
def test_a_sweep_picks_among_a_kernels_configs_and_production_launches_only_the_winner(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE.format(workload="user_kernels:kernel_mlp", trials=3))
    swept = run_interpreted(QUICK_SWEEP, tmp_path)
    assert all(label in swept.stdout for label in CONFIGS.values())  # each config was a trial
    storage = f"sqlite:///{tmp_path}/autotune.db"  # `autotune export --study space -o tuned.yaml`, in this process
    study = optuna.load_study(study_name="space", storage=storage)
    info = schema.load_study_info(study)
    assert info is not None
    export(study, info, tmp_path / "tuned.yaml", storage=storage)

    tuned = yaml.safe_load((tmp_path / "tuned.yaml").read_text())
    assert tuned["params"] == {}  # the kernel's param lives under kernels:, not with the workload's
    pinned = tuned["kernels"]["user_kernels:scaled_add"]
    block = pinned["kwargs"]["BLOCK_SIZE"]
    lines = swept.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["1"])
    # The winner's row and the knob lines wrapped under it (indented past the rank column)
    under = itertools.takewhile(lambda line: line.startswith(" " * 6), lines[at + 1 :])
    rank_one = " ".join([lines[at], *(line.strip() for line in under)])
    assert rank_one.endswith(f"scaled_add={CONFIGS[block]}")  # the leaderboard's winner is what was exported
    assert pinned["shape_keys"] == [[16 * 32, "torch.float32", "torch.float32", "torch.float32", "torch.int32"]]

    applied = run_interpreted(["-c", APPLY], tmp_path)
    assert applied.stdout.strip() == f'{{"launched": {block}, "configs": 1, "warnings": []}}'


def test_a_listed_kernel_the_model_never_calls_is_a_warning_in_the_summary_not_in_each_trial(tmp_path: Path) -> None:
    """The kernel is pinned but never launched, so no interpreter is needed: the sweep runs in this process
    (its trial in a real one), without the seconds an `autotune sweep` process and its forkserver take."""
    (tmp_path / "space.yaml").write_text(SPACE.format(workload="trial_workloads:tiny_mlp", trials=1))
    options = SweepOptions(report=False, storage=f"sqlite:///{tmp_path}/autotune.db", tracking=False, remeasure_top=0)
    said = io.StringIO()
    summary = run_sweep(load_space(tmp_path / "space.yaml"), options, Progress(None, None, said))
    assert "never ran" not in said.getvalue()  # one trial that did not launch it is no news
    warning = "WARNING: listed kernel user_kernels:scaled_add never ran in any finished trial (is it the one"
    assert warning in summary_text(summary, options.storage)
    study = optuna.load_study(study_name="space", storage=options.storage)  # `autotune status` says it too
    info = schema.load_study_info(study)
    assert info is not None
    assert any(line.startswith(warning) for line in sweep_status(study, info).lines())
    records = StudyRecords.read(study, info)  # and the MLflow sweep run's description
    assert warning in finished(SweepFacts("space", "1", "parent", records))


def test_a_kernel_that_does_not_import_is_reported_by_validation(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE.format(workload="resnet50", trials=1).replace("user_kernels", "nope"))
    with pytest.raises(SpaceError, match=r"kernels\[0\]: kernel 'nope:scaled_add': cannot import 'nope'"):
        load_space(tmp_path / "space.yaml")


SPACE_UNLISTED = """\
workload: {name: "user_kernels:self_tuned_mlp", preset: tiny}
device: cpu
budget: {trials: 1, trial_timeout: 2m}
sampler: {name: grid, seed: 0}
params:
  batch_size: 16
"""


@pytest.mark.slow
def test_a_kernel_the_space_does_not_list_is_pinned_in_production_to_what_it_chose_in_the_trial(
    tmp_path: Path,
) -> None:
    """Not listed, the kernel's own autotuner chooses in the trial; the export records the choice per shape key
    and apply() pins it, so a production start benchmarks none of the kernel's configs."""
    (tmp_path / "space.yaml").write_text(SPACE_UNLISTED)
    run_interpreted(QUICK_SWEEP, tmp_path)
    storage = f"sqlite:///{tmp_path}/autotune.db"
    study = optuna.load_study(study_name="space", storage=storage)
    info = schema.load_study_info(study)
    assert info is not None
    export(study, info, tmp_path / "tuned.yaml", storage=storage)

    chosen = yaml.safe_load((tmp_path / "tuned.yaml").read_text())["kernels"]["user_kernels:self_tuned_add"]
    assert chosen["chosen_by"] == "autotune"
    [choice] = chosen["by_shape"]
    assert choice["shape_key"] == [16 * 32, "torch.float32", "torch.float32", "torch.float32", "torch.int32"]
    block = choice["kwargs"]["BLOCK_SIZE"]
    assert choice["config"] == CONFIGS[block]
    apply = APPLY.replace("uk.KernelMLP()", "uk.self_tuned_mlp().model").replace("uk.scaled_add", "uk.self_tuned_add")
    applied = run_interpreted(["-c", apply], tmp_path)
    assert applied.stdout.strip() == f'{{"launched": {block}, "configs": 1, "warnings": []}}'


CHOICES = """
import json, sys, torch, user_kernels as uk
from autotune.kernels.choices import autotuned_choices
from autotune.kernels.pinning import pin_tuned
before = autotuned_choices()
uk.launch(uk.self_tuned_add, torch.randn(40), torch.randn(40))
uk.launch(uk.self_tuned_add, torch.randn(8, 8), torch.randn(8, 8))
found = autotuned_choices()
skipped = autotuned_choices(skip=["user_kernels:self_tuned_add"])
# Two shapes that chose differently: production fills the autotuner's own cache instead of cutting its configs.
uk.self_tuned_add.cache.clear()
entry = found["user_kernels:self_tuned_add"]["by_shape"][0]
by_shape = [dict(entry, kwargs={"BLOCK_SIZE": size}) for size in (16, 64)]
by_shape[1]["shape_key"] = [999, *by_shape[1]["shape_key"][1:]]
pin_tuned({"user_kernels:self_tuned_add": {"chosen_by": "autotune", "by_shape": by_shape}})
cached = sorted(config.kwargs["BLOCK_SIZE"] for config in uk.self_tuned_add.cache.values())
json.dump({"before": before, "found": found, "skipped": skipped, "configs": len(uk.self_tuned_add.configs),
           "cached": cached}, sys.stdout)
"""


def test_the_choices_are_found_per_shape_key_and_pinned_even_where_shapes_chose_differently(tmp_path: Path) -> None:
    import json

    done = json.loads(run_interpreted(["-c", CHOICES], tmp_path).stdout)
    assert done["before"] == {} and done["skipped"] == {}
    [entry] = done["found"].values()
    assert list(done["found"]) == ["user_kernels:self_tuned_add"]  # its home module's name, not an alias
    assert [choice["shape_key"][0] for choice in entry["by_shape"]] == [40, 64]
    assert done["configs"] == 2 and done["cached"] == [16, 64]


def test_the_walk_over_loaded_modules_passes_over_one_without_globals() -> None:
    """cffi puts ``Lib`` objects in sys.modules that are modules with no ``__dict__`` (MLflow's server loads one):
    finding the autotuners must pass over them, not crash the trial that asks."""
    import types

    from autotune.kernels.choices import loaded_autotuners

    def no_namespace(_module: object) -> dict[str, object]:
        raise AttributeError("__dict__")

    lib = type("Lib", (types.ModuleType,), {"__dict__": property(no_namespace)})("fake_cffi.lib")
    sys.modules["fake_cffi.lib"] = lib
    try:
        import triton  # noqa: F401  (the walk looks only once Triton is loaded)

        assert all(not path.startswith("fake_cffi") for path, _ in loaded_autotuners())
    finally:
        del sys.modules["fake_cffi.lib"]


INFORMED = """\
workload: {name: "user_kernels:last_wins_mlp", preset: tiny}
device: cpu
kernels: ["user_kernels:last_wins_add"]
budget: {trials: 2, trial_timeout: 2m}
sampler: {name: random, seed: 0}
params:
  fused_optimizer: [false, true]
"""


@pytest.mark.slow
def test_the_informed_start_takes_a_listed_kernels_own_autotuned_choice(tmp_path: Path) -> None:
    """Before the informed start is queued, the listed kernel runs unpinned in a short eager run of the expert's
    configuration; what its autotuner chose there (here always its last config) is the informed start's."""
    (tmp_path / "space.yaml").write_text(INFORMED)
    swept = run_interpreted(QUICK_SWEEP, tmp_path)
    assert "as their own autotuners chose: last_wins_add: BLOCK_SIZE=64 num_warps=4 num_stages=2" in swept.stderr
    study = optuna.load_study(study_name="space", storage=f"sqlite:///{tmp_path}/autotune.db")
    default, informed = sorted(study.trials, key=lambda trial: trial.number)
    assert default.params["last_wins_add"] == CONFIGS[16]  # the default trial: the param's first value
    assert informed.params == {"fused_optimizer": True, "last_wins_add": CONFIGS[64]}
    assert study.user_attrs[schema.STUDY_ATTR_INFORMED]["params"]["last_wins_add"] == CONFIGS[64]
    # The kernels' run is device time spent for the informed start: its trial's duration counts it.
    prepared = informed.user_attrs[schema.ATTR_PREPARED_S]
    assert prepared > 0
    record = StudyRecords(study, (("throughput", "maximize"),)).trial(informed.number)
    assert informed.duration is not None
    assert record.duration_s == pytest.approx(informed.duration.total_seconds() + prepared)
