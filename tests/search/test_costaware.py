"""The cost-aware search: its cost model, its gain model, and which candidate the sampler picks.

The studies here are made by hand: each trial a measured trial whose result carries its replayed duration
(``duration_s``, :mod:`autotune.search.replaytimes`), which is what :attr:`TrialRecord.duration_s` reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler

from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo, TrialKind, schema
from autotune.search.costaware import CostAwareSampler, cost_aware
from autotune.search.costmodel import PRIOR_COMPILE_S, CostModel, TrialCost, graph_key
from autotune.search.samplerview import OrdinalView
from autotune.search.surrogate import Encoding, expected_improvement, fit_linear
from autotune.space import SamplerSpec, load_space
from autotune.sweep import SweepOptions
from autotune.sweep.setup import open_study, study_info

OBJECTIVES = (("throughput", "maximize"),)


def _study(distributions: dict[str, Any], trials: list[tuple[dict[str, Any], float, float]]) -> optuna.Study:
    """A study of measured trials ``(params, throughput, seconds)``, as a replay sweep records them."""
    study = optuna.create_study(direction="maximize")
    info = StudyInfo("toy", "tiny", "cpu", "toy.yaml", "", OBJECTIVES)
    study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
    for params, throughput, seconds in trials:
        metrics = {"throughput": throughput, "duration_s": seconds}
        result = TrialResult(Status.OK, params=params, metrics=metrics, env={"replay": "test"})
        attrs = {
            schema.ATTR_KIND: TrialKind.MEASURED.value,
            schema.ATTR_RESULT: result.to_dict(),
            schema.ATTR_PARAMS: params,
        }
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=distributions, value=throughput, user_attrs=attrs)
        )
    return study


def _propose(study: optuna.Study, sampler: BaseSampler, distributions: dict[str, Any]) -> dict[str, Any]:
    """What ``sampler`` proposes next for ``study`` (the params suggested in the order given)."""
    study.sampler = sampler
    trial = study.ask()
    out = {}
    for name, distribution in distributions.items():
        if isinstance(distribution, CategoricalDistribution):
            out[name] = trial.suggest_categorical(name, distribution.choices)
        else:
            out[name] = trial.suggest_int(name, distribution.low, distribution.high)
    return out


# --- the sampler's pick ---------------------------------------------------------------------------------------

CUDNN_PRECISION = {
    "cudnn_benchmark": CategoricalDistribution([False, True]),
    "precision": CategoricalDistribution(["fp32", "bf16"]),
}


def _cudnn_study(benchmark_s: float) -> optuna.Study:
    """cuDNN's benchmark gains nothing and takes ``benchmark_s`` a trial (10 s without); bf16 is untried, so
    (False, bf16) and (True, bf16) promise the same."""
    return _study(
        CUDNN_PRECISION,
        [
            ({"cudnn_benchmark": False, "precision": "fp32"}, 100.0, 10.0),
            ({"cudnn_benchmark": True, "precision": "fp32"}, 100.0, benchmark_s),
        ],
    )


@pytest.mark.parametrize("seed", range(3))
def test_of_two_equally_promising_candidates_the_cheaper_one(seed: int) -> None:
    sampler = CostAwareSampler(optuna.samplers.RandomSampler(seed=seed), seed=seed)
    assert _propose(_cudnn_study(40.0), sampler, CUDNN_PRECISION) == {"cudnn_benchmark": False, "precision": "bf16"}
    # The control: the same study with the benchmark the cheap one. The pick follows the seconds.
    sampler = CostAwareSampler(optuna.samplers.RandomSampler(seed=seed), seed=seed)
    assert _propose(_cudnn_study(2.5), sampler, CUDNN_PRECISION) == {"cudnn_benchmark": True, "precision": "bf16"}


PRECISION_FUSED: dict[str, BaseDistribution] = {
    "fused_optimizer": CategoricalDistribution([False, True]),
    "precision": CategoricalDistribution(["fp32", "fp16", "bf16"]),
}


@pytest.mark.parametrize(("fp16", "bf16", "better"), [(150.0, 300.0, "bf16"), (300.0, 150.0, "fp16")])
def test_of_two_equally_costly_candidates_the_better_one(fp16: float, bf16: float, better: str) -> None:
    study = _study(
        PRECISION_FUSED,
        [
            ({"fused_optimizer": False, "precision": "fp32"}, 100.0, 10.0),
            ({"fused_optimizer": False, "precision": "fp16"}, fp16, 10.0),
            ({"fused_optimizer": False, "precision": "bf16"}, bf16, 10.0),
        ],
    )
    # Every untried configuration has fused_optimizer=True and takes 10 s: the precision measured best is taken.
    sampler = CostAwareSampler(optuna.samplers.RandomSampler(seed=0))
    assert _propose(study, sampler, PRECISION_FUSED) == {"fused_optimizer": True, "precision": better}


def test_a_tried_configuration_is_never_proposed_again() -> None:
    space = {"precision": CategoricalDistribution(["fp32", "bf16"])}
    study = _study(space, [({"precision": "fp32"}, 100.0, 10.0)])
    assert _propose(study, CostAwareSampler(optuna.samplers.RandomSampler(seed=0)), space) == {"precision": "bf16"}


def test_a_study_the_sweep_did_not_make_is_left_to_the_inner_sampler() -> None:
    """No study info, so no metric to read: the inner sampler proposes (here, the same as it alone would)."""
    space: dict[str, BaseDistribution] = {"x": IntDistribution(0, 100)}
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(params={"x": 3}, distributions=space, value=1.0))
    alone = optuna.create_study(direction="maximize")
    alone.add_trial(optuna.trial.create_trial(params={"x": 3}, distributions=space, value=1.0))
    wrapped = _propose(study, CostAwareSampler(optuna.samplers.RandomSampler(seed=5)), space)
    assert wrapped == _propose(alone, optuna.samplers.RandomSampler(seed=5), space)


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="cost_exponent"):
        CostAwareSampler(optuna.samplers.RandomSampler(), cost_exponent=-1)
    with pytest.raises(ValueError, match="draws"):
        CostAwareSampler(optuna.samplers.RandomSampler(), draws=0)


# --- the cost model ------------------------------------------------------------------------------------------

COMPILE_SPACE = {
    "batch_size": CategoricalDistribution([16, 32]),
    "compile_mode": CategoricalDistribution(["none", "default"]),
    "fused_optimizer": CategoricalDistribution([False, True]),
}


def test_the_cost_model_fits_a_small_study() -> None:
    """Eager trials take 5 s; a fresh compile 30 s more; the same graph again compiles in 3 s (the cache)."""
    trials = [
        TrialCost({"batch_size": 16, "compile_mode": "none", "fused_optimizer": False}, 5.0),
        TrialCost({"batch_size": 32, "compile_mode": "none", "fused_optimizer": False}, 5.0),
        TrialCost({"batch_size": 16, "compile_mode": "default", "fused_optimizer": False}, 35.0, 30.0),
        TrialCost({"batch_size": 16, "compile_mode": "default", "fused_optimizer": True}, 8.0, 3.0),
    ]
    model = CostModel.fit(trials, COMPILE_SPACE)
    assert model.hit_fraction == pytest.approx(0.1)
    eager, shared, fresh = model.predict(
        [
            {"batch_size": 32, "compile_mode": "none", "fused_optimizer": True},
            {"batch_size": 16, "compile_mode": "default", "fused_optimizer": True},  # the compiled graph, fused
            {"batch_size": 32, "compile_mode": "default", "fused_optimizer": False},  # a graph not compiled yet
        ]
    )
    assert eager == pytest.approx(5.0, rel=0.1)
    assert shared == pytest.approx(5.0 + 3.0, rel=0.15)
    assert fresh == pytest.approx(5.0 + 30.0, rel=0.15)
    unaware = CostModel.fit(trials, COMPILE_SPACE, use_cache=False)
    assert unaware.predict([{"batch_size": 16, "compile_mode": "default", "fused_optimizer": True}])[0] > 30.0


def test_a_graph_compiled_ahead_is_priced_as_compiled() -> None:
    """A compile ahead (autotune.sweep.proposals.compile_ahead) puts a graph in the cache before any trial runs it: its
    trials cost a compile from the cache, and the first one's own 3 s are a repeat of the 30 s compile ahead, not a
    fresh one."""
    first = {"batch_size": 16, "compile_mode": "default", "fused_optimizer": False}
    trials = [
        TrialCost({"batch_size": 16, "compile_mode": "none", "fused_optimizer": False}, 5.0),
        TrialCost(first, 8.0, 3.0, ahead_s=30.0),
    ]
    ahead = {"batch_size": 32, "compile_mode": "default", "fused_optimizer": False}
    ahead_key = graph_key(ahead)
    assert ahead_key is not None
    model = CostModel.fit(trials, COMPILE_SPACE, compiled_ahead={ahead_key})
    assert model.hit_fraction == pytest.approx(0.1)
    repeat, compiled_ahead = model.predict([{**first, "fused_optimizer": True}, ahead])
    assert repeat == pytest.approx(5.0 + 3.0, rel=0.15)
    assert compiled_ahead == pytest.approx(5.0 + 3.0, rel=0.15)
    assert CostModel.fit(trials, COMPILE_SPACE).predict([ahead])[0] == pytest.approx(5.0 + 30.0, rel=0.15)


def test_a_graph_still_compiling_ahead_costs_the_rest_of_its_compile_then_a_repeat() -> None:
    """Its trial would wait for the compile ahead (GPU time), then compile from the cache: started 10 s ago, a 30 s
    compile has 20 s left; one that has run 45 s, past its prediction, is given half of that again."""
    trials = [
        TrialCost({"batch_size": 16, "compile_mode": "none", "fused_optimizer": False}, 5.0),
        TrialCost({"batch_size": 16, "compile_mode": "default", "fused_optimizer": False}, 35.0, 30.0),
        TrialCost({"batch_size": 16, "compile_mode": "default", "fused_optimizer": True}, 8.0, 3.0),
    ]
    compiling = {"batch_size": 32, "compile_mode": "default", "fused_optimizer": False}
    compiling_key = graph_key(compiling)
    assert compiling_key is not None
    model = CostModel.fit(trials, COMPILE_SPACE, compiling_ahead={compiling_key: 10.0})
    assert model.predict([compiling])[0] == pytest.approx(5.0 + 20.0 + 3.0, rel=0.15)
    waiting = model.seconds([compiling, trials[0].params]).waiting
    assert waiting == pytest.approx([20.0, 0.0], rel=0.15)
    late = CostModel.fit(trials, COMPILE_SPACE, compiling_ahead={compiling_key: 45.0})
    assert late.seconds([compiling]).waiting[0] == pytest.approx(22.5, rel=0.15)
    assert late.predict([compiling])[0] == pytest.approx(5.0 + 22.5 + 3.0, rel=0.15)
    assert CostModel.fit(trials, COMPILE_SPACE).predict([compiling])[0] == pytest.approx(5.0 + 30.0, rel=0.15)


def test_a_sweep_that_compiles_ahead_reads_the_scores_and_tells_what_it_compiled() -> None:
    """What autotune.sweep.proposals.compile_ahead asks of the sampler, through the ordinal view (batch sizes stored by
    value, seen as indices): scores of whole configurations, and the configurations compiled ahead, then priced as
    compiled."""
    distributions = {**COMPILE_SPACE, "batch_size": CategoricalDistribution([16, 32])}
    study = _study(
        distributions,
        [
            ({"batch_size": 16, "compile_mode": "none", "fused_optimizer": False}, 100.0, 5.0),
            ({"batch_size": 32, "compile_mode": "none", "fused_optimizer": False}, 120.0, 5.0),
            ({"batch_size": 16, "compile_mode": "default", "fused_optimizer": False}, 150.0, 35.0),
        ],
    )
    view = OrdinalView(CostAwareSampler(optuna.samplers.RandomSampler(seed=0), seed=0), {"batch_size": [16, 32]})
    fresh = {"batch_size": 32, "compile_mode": "default", "fused_optimizer": False}
    before = view.score(study, [fresh])
    assert before is not None and before[0] > 0
    compiled: list[dict[str, Any]] = []
    compiling: list[tuple[dict[str, Any], float]] = [(fresh, 20.0)]  # its compile ahead has run 20 s of about 30
    assert view.set_compiled_ahead(lambda: compiled, lambda: compiling)
    waiting = view.score(study, [fresh])
    assert waiting is not None and before[0] < waiting[0]  # the rest of the compile is cheaper than all of it
    compiling.clear()
    compiled.append(fresh)
    after = view.score(study, [fresh])
    assert after is not None and after[0] > 2 * before[0] and after[0] > waiting[0]  # a fraction of the seconds
    # A sampler that prices no compile takes no part.
    assert OrdinalView(optuna.samplers.RandomSampler(), {}).score(study, [fresh]) is None


def test_before_any_compile_a_compile_is_priced_at_the_prior() -> None:
    trials = [TrialCost({"batch_size": 16, "compile_mode": "none", "fused_optimizer": False}, 5.0)]
    compiled = {"batch_size": 16, "compile_mode": "default", "fused_optimizer": False}
    assert CostModel.fit(trials, COMPILE_SPACE).predict([compiled])[0] == pytest.approx(5.0 + PRIOR_COMPILE_S, rel=0.05)


def test_graph_key_ignores_the_knobs_a_compile_does_not_see() -> None:
    base = {"batch_size": 16, "precision": "bf16", "compile_mode": "default", "fused_optimizer": False}
    assert graph_key(base) == graph_key({**base, "fused_optimizer": True, "cudnn_benchmark": True})
    assert graph_key(base) != graph_key({**base, "precision": "fp16"})
    assert graph_key(base) != graph_key({**base, "compile_mode": "reduce-overhead"})
    assert graph_key({**base, "compile_mode": "none"}) is None


# --- the linear model ------------------------------------------------------------------------------------------


def test_the_linear_model_learns_effects_and_is_unsure_of_what_it_has_not_seen() -> None:
    encoding = Encoding({"p": CategoricalDistribution(["a", "b", "c"]), "q": CategoricalDistribution(["x", "y"])})
    seen = [{"p": "a", "q": "x"}, {"p": "b", "q": "x"}, {"p": "a", "q": "y"}, {"p": "b", "q": "y"}]
    model = fit_linear(encoding.matrix(seen), [1.0, 2.0, 1.0, 2.0], 1.0, standardise=False)
    mean, sd = model.predict(encoding.matrix([{"p": "b", "q": "x"}, {"p": "c", "q": "x"}]))
    assert mean[0] == pytest.approx(2.0, abs=0.05)
    assert sd[1] > 5 * sd[0]  # "c" was never measured


def test_expected_improvement() -> None:
    ei = expected_improvement(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), best=0.5)
    assert ei[0] == pytest.approx(0.5)  # certain: the gain itself
    assert ei[1] == 0.0  # certain and worse
    assert ei[2] == pytest.approx(0.1978, abs=1e-3)  # sd * (z Phi(z) + phi(z)) at z = -0.5


class _WithEvidence(optuna.Study):
    """``study`` with warm-start evidence among its trials, numbered below zero, as samplerview shows it."""

    def __init__(self, study: optuna.Study, evidence: list[optuna.trial.FrozenTrial]) -> None:
        self.__dict__.update(study.__dict__)
        self._source = study
        self._evidence = evidence

    def _get_trials(self, deepcopy: bool = True, states: Any = None, use_cache: bool = False) -> list[Any]:
        own = self._source._get_trials(deepcopy=False, states=states, use_cache=use_cache)
        return [*(t for t in self._evidence if states is None or t.state in states), *own]


@pytest.mark.parametrize("better", ["bf16", "fp16"])
def test_warm_start_evidence_informs_the_gain(better: str) -> None:
    study = _study(PRECISION_FUSED, [({"fused_optimizer": False, "precision": "fp32"}, 100.0, 10.0)])
    evidence = optuna.trial.create_trial(
        params={"fused_optimizer": False, "precision": better}, distributions=PRECISION_FUSED, value=300.0
    )
    evidence.number = -1  # another study's trial: never "tried" here, but it says where the gain is
    for seed in range(3):
        sampler = CostAwareSampler(optuna.samplers.RandomSampler(seed=seed), seed=seed)
        study.sampler = sampler
        trial = study._storage.get_trial(study.ask()._trial_id)
        view = _WithEvidence(study, [evidence])
        proposed = sampler.sample_relative(view, trial, sampler.infer_relative_search_space(view, trial))
        assert proposed["precision"] == better
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)


# --- where it is the default -----------------------------------------------------------------------------------


def _space_file(tmp_path: Path, sampler: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(
        "workload: {name: gpt2, preset: tiny}\ndevice: cpu\n"
        f"sampler: {sampler}\n"
        "params:\n  precision: [fp32, bf16]\n  compile_mode: [none, default]\n"
    )
    return path


@pytest.mark.parametrize(
    ("sampler", "wrapped"),
    [
        ("{name: tpe}", True),
        ("{name: auto}", True),  # auto is TPE for a space with categorical params
        ("{name: tpe, cost_aware: false}", False),
        ("{name: random}", False),
        ("{name: random, cost_aware: true}", True),
    ],
)
def test_a_sweep_s_sampler_is_cost_aware_for_tpe_unless_the_space_says(
    tmp_path: Path, sampler: str, wrapped: bool
) -> None:
    space = load_space(_space_file(tmp_path, sampler), replay=True)
    options = SweepOptions(storage="memory", tracking=False)
    opened = open_study(space, options, study_info(space, options), None)
    assert isinstance(opened.study.sampler, OrdinalView)
    assert isinstance(opened.study.sampler.inner, CostAwareSampler) is wrapped


def test_cmaes_spaces_are_left_as_they_are() -> None:
    assert not cost_aware(SamplerSpec("auto"), {"ordinal", "int"})  # auto is CMA-ES there: measured as it is
    assert cost_aware(SamplerSpec("auto"), {"ordinal", "categorical"})


@pytest.mark.parametrize(
    ("sampler", "message"),
    [
        ("{name: tpe, cost_aware: yes please}", "sampler.cost_aware: 'yes please' is not true or false"),
        ("{name: grid, cost_aware: true}", "sampler.cost_aware: the grid sampler measures every point in order"),
    ],
)
def test_cost_aware_is_validated(tmp_path: Path, sampler: str, message: str) -> None:
    with pytest.raises(AutotuneError, match=re.escape(message)):
        load_space(_space_file(tmp_path, sampler), replay=True)
