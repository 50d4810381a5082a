"""Search spaces: loading and validating YAML, and the space's dealings with a real Optuna study."""

from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from autotune.errors import AutotuneError
from autotune.search.samplerview import OrdinalView
from autotune.space import Space, SpaceError, load_space, parse_duration

SHIPPED = sorted((Path(__file__).parents[2] / "search_spaces").glob("*.yaml"))

MATMUL = """\
workload: {name: replayed_matmul}
objective: {metric: ms, direction: minimize}
feasibility:
  - num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 <= 232448
params:
  BLOCK_M: {choices: [64, 128, 256], ordinal: true}
  BLOCK_N: {choices: [64, 128, 256], ordinal: true}
  BLOCK_K: {choices: [32, 64, 128], ordinal: true}
  num_stages: [2, 3, 4, 5]
"""


def write(tmp_path: Path, text: str, name: str = "space.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str, **kwargs: bool) -> Space:
    return load_space(write(tmp_path, text), **kwargs)


def problems(tmp_path: Path, text: str, **kwargs: bool) -> list[str]:
    with pytest.raises(SpaceError) as caught:
        load(tmp_path, text, **kwargs)
    assert str(caught.value) == "\n".join(caught.value.problems)
    assert isinstance(caught.value, AutotuneError)
    return caught.value.problems


# --- shipped spaces -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_spaces_load_cleanly(path: Path) -> None:
    first_line = path.read_text().splitlines()[0]
    command = f"# autotune sweep search_spaces/{path.name}"
    assert first_line == command or first_line.startswith(command + " ")  # e.g. with --replay RECORDS
    space = load_space(path)
    assert space.params
    assert space.is_feasible(space.default_params()) == (True, None)


def test_quick_space_runs_on_cpu_without_compile() -> None:
    space = load_space(Path(__file__).parents[2] / "search_spaces" / "quick.yaml")
    assert space.device == "cpu"
    assert space.workload.preset == "tiny"
    assert "compile_mode" not in space.params


# --- one pass reports every problem ---------------------------------------------------------------


def test_every_problem_is_reported_with_its_key_path(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        workload: {name: gpt2, preset: tiny}
        objectve: {metric: throughput, direction: maximize}
        budget: {trials: 4, timeout: 8x}
        params:
          precision: [default, bf17]
        """,
    )
    assert len(found) == 3, found
    file = str(tmp_path / "space.yaml")
    assert f"{file}: objectve: unknown key (did you mean 'objective'?)" in found
    assert any(p.startswith(f"{file}: budget.timeout: duration '8x' is not valid") for p in found)
    bf17 = "'bf17' is not one of default, fp32, tf32, bf16, fp16 (did you mean 'bf16'?)"
    assert f"{file}: params.precision: {bf17}" in found


def test_nested_typos_get_suggestions(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        workload: {name: gpt2, preest: tiny}
        budget: {trails: 3}
        sampler: {name: tpee}
        params:
          batch_size: {low: 8, hihg: 64}
        """,
    )
    text = "\n".join(found)
    assert "workload.preest: unknown key (did you mean 'preset'?)" in text
    assert "budget.trails: unknown key (did you mean 'trials'?)" in text
    assert "sampler.name: 'tpee' is not one of auto, tpe, gp, cmaes, random, grid (did you mean 'tpe'?)" in text
    assert "params.batch_size.hihg: unknown key (did you mean 'high'?)" in text
    assert "params.batch_size.high: required for a range" in text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("cudnn_benchmark: maybe", "params.cudnn_benchmark: 'maybe' is not one of true, false"),
        ("batch_size: [8, 0]", "params.batch_size: 0 is not a positive int"),
        ("batch_size: {low: 8.0, high: 64}", "params.batch_size: batch_size takes positive ints"),
        ("precision: {low: 1, high: 2}", "a low/high range is not valid"),
        ("precision: []", "params.precision: expected a non-empty list of choices"),
        ("precision: [bf16, bf16]", "'bf16' is listed twice"),
        ("precision:", "params.precision: no value"),
        (
            "compile_mode: {choices: [none, default], default: max-autotune}",
            "default: 'max-autotune' is not one of",
        ),
        ("batch_size: {low: 8, high: 4}", "low=8 is greater than high=4"),
        ("batch_size: {low: 8, high: 64, step: 5}", "high - low = 56 is not a multiple of step=5"),
        ("batch_size: {low: 8, high: 64, step: 8, log: true}", "a log range cannot have a step"),
        (
            "precison: [bf16]",
            "'precison' is neither a knob nor an argument of workload 'gpt2' (did you mean 'precision'?)",
        ),
        ("width: [1, 2]", "'width' is neither a knob nor an argument of workload 'gpt2'"),
        ("precision: {choices: [bf16], log: true}", "params.precision.log: applies to low/high ranges only"),
        # compile_scope=blocks is searched only where something compiles
        (
            "compile_mode: [none, default, reduce-overhead]\n  compile_scope: [model, blocks]",
            "params.compile_scope: blocks with compile_mode none is an invalid combination (eager compiles no "
            "blocks): add when: {compile_mode: [default, reduce-overhead]}",
        ),
        (
            "compile_mode: [none, default]\n  compile_scope: {choices: [model, blocks], when: {compile_mode: [none]}}",
            "params.compile_scope: blocks with compile_mode none is an invalid combination",
        ),
        (
            "compile_scope: blocks",
            "params.compile_scope: blocks needs a compile_mode, which this space leaves at none",
        ),
    ],
)
def test_bad_params_are_named(tmp_path: Path, params: str, message: str) -> None:
    found = problems(tmp_path, f"workload: {{name: gpt2}}\nparams:\n  {params}\n")
    assert any(message in p for p in found), found


def test_when_must_name_an_earlier_param_and_its_values(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        workload: {name: gpt2}
        params:
          cudnn_deterministic: {choices: [true, false], when: {compile_mode: [none]}}
          compile_mode: [none, default]
          fused_optimizer: {choices: [true, false], when: {compile_mode: [max-autotune]}}
          matmul_precision: {choices: [auto, high], when: {precison: [bf16]}}
        """,
    )
    text = "\n".join(found)
    assert "when.compile_mode: 'compile_mode' is declared after 'cudnn_deterministic'" in text
    assert "when.compile_mode: 'max-autotune' is not a value compile_mode takes (one of none, default)" in text
    assert "when.precison: 'precison' is not a param of this space" in text


def test_blocks_conditional_on_a_compile_mode_is_a_valid_space(tmp_path: Path) -> None:
    space = load(
        tmp_path,
        """\
        workload: {name: gpt2}
        params:
          compile_mode: [none, default]
          compile_scope: {choices: [model, blocks], when: {compile_mode: [default]}}
        """,
    )
    assert space.params["compile_scope"].default == "model"  # the knob's own, for the default configuration


def test_feasibility_names_params_while_constraints_name_any_metric(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        MATMUL.replace("num_stages *", "num_stage *") + "constraints: ['tflops >= 100', 'ms < 2']\n",
        replay=True,
    )
    assert found == [
        f"{tmp_path / 'space.yaml'}: feasibility[0]: 'num_stage' is not a param of this space "
        "(did you mean 'num_stages'?)"
    ]


def test_bad_expressions_and_budget(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        workload: {name: gpt2}
        constraints: ["__import__('os').system('true')", 3]
        budget: {trials: 0, trial_timeout: 0s}
        device: tpu
        objective: [{metric: throughput, direction: up}]
        params: {precision: [bf16]}
        """,
    )
    text = "\n".join(found)
    assert "constraints[0]: expression" in text and "__import__('os').system\" is not allowed" in text
    assert "constraints[1]: 3 is not an expression" in text
    assert "budget.trials: 0 is not a whole number >= 1" in text
    assert "budget.trial_timeout: duration '0s' is not valid" in text
    assert "device: 'tpu' is not one of cpu, cuda, auto" in text
    assert "objective[0].direction: 'up' is not one of maximize, minimize" in text


def test_unknown_workload_is_one_problem_among_others(tmp_path: Path) -> None:
    found = problems(tmp_path, "workload: {name: no_such_module:build}\nparams: {precision: [bf17], width: [1]}\n")
    assert len(found) == 2, found
    assert "workload.name: workload 'no_such_module:build': cannot import" in found[0]
    assert "params.precision: 'bf17'" in found[1]


def test_user_workload_arguments_are_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "space_test_workload.py").write_text("def build(preset='full', width=64, depth=2):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    head = "workload: {name: 'space_test_workload:build', args: {depth: 3}}\n"
    space = load(tmp_path, head + "params: {width: [32, 64, 128], precision: [fp32, bf16]}\n")
    assert space.workload.args == {"depth": 3}
    assert space.default_params() == {"width": 64, "precision": "fp32"}  # build()'s default width
    found = problems(tmp_path, head + "params: {widht: [32], depth: [1, 2]}\n")
    text = "\n".join(found)
    assert "params.widht: 'widht' is neither a knob nor an argument" in text and "'width'" in text
    assert "workload.args.depth: 'depth' is also in params" in text


def test_missing_file_and_yaml_errors_are_one_problem(tmp_path: Path) -> None:
    with pytest.raises(SpaceError, match="file not found") as caught:
        load_space(tmp_path / "nope.yaml")
    assert len(caught.value.problems) == 1
    found = problems(tmp_path, "workload: {name: gpt2}\nparams:\n  precision: [bf16\n  x: 1\n")
    assert len(found) == 1 and "invalid YAML" in found[0] and ": line " in found[0]


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    found = problems(tmp_path, "workload: {name: gpt2}\nparams:\n  precision: [bf16]\n  precision: [fp16]\n")
    assert found == [
        f"{tmp_path / 'space.yaml'}: line 4: duplicate key 'precision' (YAML would keep only the last one)"
    ]


def test_grid_sampler_needs_discrete_params(tmp_path: Path) -> None:
    space = "workload: {name: gpt2}\nsampler: {name: grid}\nparams: {lr: {low: 0.1, high: 1.0}}\n"
    found = problems(tmp_path, space, replay=True)
    message = "sampler 'grid' cannot search a continuous range: give a step or choices"
    assert found == [f"{tmp_path / 'space.yaml'}: params.lr: {message}"]


# --- typed results --------------------------------------------------------------------------------


def test_parsed_space(tmp_path: Path) -> None:
    space = load(
        tmp_path,
        """\
        workload: {name: gpt2, preset: tiny}
        device: cpu
        objective:
          - {metric: throughput, direction: maximize}
          - {metric: peak_mem_gib, direction: minimize}
        constraints: [peak_mem_gib <= 70]
        budget: {trials: 20, timeout: 1h30m}
        sampler: {name: random, seed: 3}
        params:
          batch_size: {low: 32, high: 512, log: true}
          lr_scale: {low: 1.0e-3, high: 1, log: true}
          cudnn_benchmark: true
        """,
        replay=True,
    )
    assert space.is_multi_objective and space.directions == ["maximize", "minimize"]
    assert space.budget.trials == 20 and space.budget.timeout_s == 5400 and space.budget.trial_timeout_s == 600
    assert (space.sampler.name, space.sampler.seed) == ("random", 3)
    assert [c.text for c in space.constraints] == ["peak_mem_gib <= 70"]
    batch, lr, cudnn = space.params.values()
    assert (batch.kind, batch.low, batch.high, batch.log) == ("int", 32, 512, True)
    assert (lr.kind, lr.low, lr.high) == ("float", 0.001, 1.0)
    assert (cudnn.kind, cudnn.choices) == ("fixed", (True,))
    assert space.default_params() == {"batch_size": 32, "lr_scale": 0.001, "cudnn_benchmark": True}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(90, 90.0), ("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("8h", 28800.0), ("1h30m", 5400.0)],
)
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "8x", "h", "-5", "0", "1m1h", True])
def test_parse_duration_rejects(text: str | bool) -> None:
    with pytest.raises(AutotuneError, match="duration"):
        parse_duration(text)


# --- with a real Optuna study ---------------------------------------------------------------------

CONDITIONAL = """\
workload: {name: gpt2, preset: tiny}
params:
  batch_size: {choices: [4, 8, 16], ordinal: true}
  compile_mode: {choices: [none, default, max-autotune], default: default}
  cudnn_deterministic: {choices: [true, false], when: {compile_mode: [none]}}
  precision: bf16
"""
MODES = ("none", "default", "max-autotune")


def test_suggest_respects_when_and_stores_real_values(tmp_path: Path) -> None:
    space = load(tmp_path, CONDITIONAL)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen_modes, seen_batches = set(), set()
    for _ in range(40):
        trial = study.ask()
        params = space.suggest(trial)
        seen_modes.add(params["compile_mode"])
        seen_batches.add(trial.params["batch_size"])
        assert params["precision"] == "bf16" and "precision" not in trial.params  # fixed: not asked
        assert trial.params["batch_size"] == params["batch_size"]  # ordinal: Optuna holds the value, not an index
        assert trial.distributions["batch_size"] == CategoricalDistribution((4, 8, 16))
        assert ("cudnn_deterministic" in params) == (params["compile_mode"] == "none")
        assert ("cudnn_deterministic" in trial.params) == (params["compile_mode"] == "none")
        assert space.params_from_optuna(trial.params, trial.distributions) == params
        study.tell(trial, float(params["batch_size"]))
    assert seen_modes == {"none", "default", "max-autotune"}
    assert seen_batches == {4, 8, 16}


def test_a_study_that_stored_ordinals_as_indices_keeps_doing_so(tmp_path: Path) -> None:
    """Studies made before ordinals were stored by value: suggest, enqueue and decode by the stored encoding."""
    space = load(tmp_path, CONDITIONAL)
    old = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    old.add_trial(
        optuna.trial.create_trial(
            value=1.0,
            params={"batch_size": 2, "compile_mode": "default"},
            distributions={"batch_size": IntDistribution(0, 2), "compile_mode": CategoricalDistribution(MODES)},
        )
    )
    assert space.stored_as(optuna.create_study().get_trials()).legacy_ordinals == frozenset()
    legacy = space.stored_as(old.get_trials())
    assert legacy.legacy_ordinals == {"batch_size"} and legacy.ordinals == {}
    assert space.ordinals == {"batch_size": (4, 8, 16)}
    first = old.trials[0]
    assert legacy.params_from_optuna(first.params, first.distributions)["batch_size"] == 16  # index 2
    assert legacy.optuna_params({"batch_size": 8}) == {"batch_size": 1}
    old.enqueue_trial(legacy.optuna_params({"batch_size": 8, "compile_mode": "none"}))
    for _ in range(10):
        trial = old.ask()  # a categorical here would make Optuna refuse the param's second distribution
        params = legacy.suggest(trial)
        assert trial.params["batch_size"] == (4, 8, 16).index(params["batch_size"])
        assert legacy.params_from_optuna(trial.params, trial.distributions) == params
        old.tell(trial, 1.0)
    assert legacy.params_from_optuna(old.trials[1].params, old.trials[1].distributions)["batch_size"] == 8


def test_enqueued_defaults_come_back_from_suggest(tmp_path: Path) -> None:
    space = load(tmp_path, CONDITIONAL)
    defaults = space.default_params()
    assert defaults == {
        "batch_size": 4,
        "compile_mode": "default",
        "precision": "bf16",
    }  # explicit default wins
    assert space.optuna_params(defaults) == {"batch_size": 4, "compile_mode": "default"}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(space.optuna_params(defaults))
    assert space.suggest(study.ask()) == defaults
    with pytest.raises(AutotuneError, match="batch_size=5 is not valid: expected one of 4, 8, 16"):
        space.optuna_params({"batch_size": 5})
    with pytest.raises(AutotuneError, match="'width' is not in the search space"):
        space.optuna_params({"width": 5})


def test_sampler_params_place_another_studys_configuration(tmp_path: Path) -> None:
    """Warm-start evidence: ordinals as indices, missing params at their default, outsiders refused."""
    space = load(tmp_path, CONDITIONAL)
    params, distributions = space.sampler_params({"batch_size": 16, "compile_mode": "none", "other": 1}) or ({}, {})
    # cudnn_deterministic is active with compile_mode none and the other study lacks it: PyTorch's default.
    assert params == {"batch_size": 2, "compile_mode": "none", "cudnn_deterministic": False}
    assert distributions["batch_size"] == IntDistribution(0, 2)
    assert space.sampler_params({"batch_size": 16, "compile_mode": "default"}) == (
        {"batch_size": 2, "compile_mode": "default"},
        {"batch_size": IntDistribution(0, 2), "compile_mode": CategoricalDistribution(MODES)},
    )
    assert space.sampler_params({"batch_size": 8}) is not None  # compile_mode: its default
    assert space.sampler_params({"compile_mode": "default"}) is None  # batch_size has no default to assume
    assert space.sampler_params({"batch_size": 32, "compile_mode": "default"}) is None  # not a choice here
    assert space.sampler_params({"batch_size": 8, "compile_mode": "default", "precision": "fp32"}) is None


def test_sampler_params_match_what_the_sampler_reads_of_the_study(tmp_path: Path) -> None:
    """Evidence lines up with the study's own trials in the sampler's view (else samplers drop the param)."""
    space = load(
        tmp_path,
        """\
        workload: {name: replayed_matmul}
        params:
          BLOCK_M: {choices: [64, 128, 256], ordinal: true}
          num_warps: {low: 2, high: 8, step: 2}
          scale: {low: 0.1, high: 1.0, log: true}
          mode: [a, b]
        """,
        replay=True,
    )
    view = OrdinalView(optuna.samplers.RandomSampler(seed=0), space.ordinals)
    study = optuna.create_study(sampler=view)
    for _ in range(5):
        trial = study.ask()
        params = space.suggest(trial)
        seen = view.convert(study._storage.get_trial(trial._trial_id))
        assert space.sampler_params(params) == (seen.params, seen.distributions)
        study.tell(trial, 1.0)


def test_pytorch_defaults_for_knobs(tmp_path: Path) -> None:
    space = load(
        tmp_path,
        """\
        workload: {name: resnet50}
        params:
          precision: [bf16, fp16, default]
          memory_format: [channels_last, contiguous]
          compile_mode: [max-autotune, none]
          cudnn_benchmark: [true, false]
          fused_optimizer: [true, false]
          batch_size: {choices: [64, 128], ordinal: true}
        """,
    )
    assert space.default_params() == {
        "precision": "default",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "cudnn_benchmark": False,
        "fused_optimizer": False,
        "batch_size": 64,
    }


def test_grid_respects_when(tmp_path: Path) -> None:
    grid = load(tmp_path, CONDITIONAL).grid()
    # 3 batch sizes x (none x 2 deterministic flags + default + max-autotune)
    assert len(grid) == 3 * (2 + 1 + 1)
    assert {
        "batch_size": 16,
        "compile_mode": "none",
        "cudnn_deterministic": True,
        "precision": "bf16",
    } in grid
    assert all(("cudnn_deterministic" in c) == (c["compile_mode"] == "none") for c in grid)


def test_feasibility_rule_rejects(tmp_path: Path) -> None:
    space = load(tmp_path, MATMUL, replay=True)
    small = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3}
    large = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 5}
    assert space.is_feasible(small) == (True, None)
    assert space.is_feasible(large) == (False, space.feasibility[0].text)
    feasible = [c for c in space.grid() if space.is_feasible(c)[0]]
    assert 0 < len(feasible) < len(space.grid()) == 3 * 3 * 3 * 4


# --- finalists -------------------------------------------------------------------------------------


def test_finalists_section_is_typed(tmp_path: Path) -> None:
    space = load(
        tmp_path,
        """\
        workload: {name: gpt2, preset: tiny}
        params:
          compile_mode: [none, default]
        finalists:
          top: 2
          compile_mode: max-autotune-no-cudagraphs
          inductor: {coordinate_descent_tuning: true, max_autotune_gemm_backends: "aten,triton"}
        """,
    )
    finalists = space.finalists
    assert finalists is not None and finalists.top == 2
    assert finalists.knob_overrides() == {
        "compile_mode": "max-autotune-no-cudagraphs",
        "inductor": "coordinate_descent_tuning=true;max_autotune_gemm_backends=ATEN,TRITON",
    }
    assert load(tmp_path, "workload: {name: gpt2, preset: tiny}\nparams: {batch_size: 8}\n").finalists is None


@pytest.mark.parametrize(
    ("params", "finalists", "compiles"),
    [
        ("{batch_size: [8, 16]}", "", False),
        ("{compile_mode: [none]}", "", False),
        ("{compile_mode: [none, max-autotune]}", "", True),
        ("{compile_mode: [none]}", "finalists: {compile_mode: default}", True),
        ("{compile_mode: [none], batch_size: [8, 16]}", "finalists: {top: 1, compile_mode: max-autotune}", True),
    ],
)
def test_a_space_says_whether_its_sweep_may_compile(
    tmp_path: Path, params: str, finalists: str, compiles: bool
) -> None:
    # The trial server preloads Inductor's compiler only for a sweep that may compile (autotune.trial_process).
    space = load(tmp_path, f"workload: {{name: gpt2, preset: tiny}}\nparams: {params}\n{finalists}\n")
    assert space.compiles is compiles


def test_every_finalists_problem_is_reported_with_its_key_path(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        workload: {name: gpt2, preset: tiny}
        params:
          compile_mode: [none, default]
          inductor: [coordinate_descent_tuning=true]
        finalists:
          top: 0
          compile_mode: max_autotune
          inductor: {coordinate_descent: true, max_autotune: maybe, freezing: true, triton.cudagraphs: false}
          repeats: 3
        """,
    )
    file = str(tmp_path / "space.yaml")
    expected = [
        "params.inductor: Inductor options are not searched: set them in the finalists: section",
        "finalists.repeats: unknown key (expected one of top, compile_mode, inductor)",
        "finalists.top: 0 is not a whole number >= 1",
        "finalists.compile_mode: 'max_autotune' is not one of default, reduce-overhead, max-autotune,",
        "finalists.inductor.coordinate_descent: unknown Inductor option (did you mean 'coordinate_descent_tuning'?",
        "finalists.inductor.max_autotune: 'maybe' is not true or false",
        "finalists.inductor.freezing: an Inductor option autotune does not set",
    ]
    assert len(found) == len(expected), found
    for problem, start in zip(found, expected, strict=True):
        assert problem.startswith(f"{file}: {start}"), (problem, start)


@pytest.mark.parametrize(
    ("finalists", "message"),
    [
        ("{top: 1}", "finalists: nothing to re-try the finalists with: give inductor: options, compile_mode:"),
        ("{inductor: {max_autotune: true}}", "finalists.inductor: the space never compiles (compile_mode)"),
        ("{inductor: [max_autotune]}", "finalists.inductor: expected a mapping of Inductor options, got a list"),
        ("[2]", "finalists: expected a mapping of settings, got a list"),
    ],
)
def test_finalists_need_something_to_try(tmp_path: Path, finalists: str, message: str) -> None:
    found = problems(
        tmp_path, f"workload: {{name: gpt2, preset: tiny}}\nparams: {{batch_size: 8}}\nfinalists: {finalists}\n"
    )
    assert len(found) == 1 and found[0].startswith(f"{tmp_path / 'space.yaml'}: {message}"), found
