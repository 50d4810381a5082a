"""A trial whose graph is still compiling ahead steps aside (autotune.sweep.proposals.parked_trials): real sweeps, real
trial processes, Inductor on the CPU. Other trials are measured meanwhile, the parked one when its compile has ended or
the budget's last trials are parked; its record counts its measurement only; a stop signal queues it again."""

from __future__ import annotations

import io
import signal
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState
from study_records import measured_records
from sweep_processes import start

from autotune.measurement import AHEAD_METRIC
from autotune.records import TrialKind, schema
from autotune.search.costmodel import Seconds, graph_key
from autotune.space import load_space
from autotune.sweep import SweepOptions, loop, run_sweep
from autotune.sweep.proposals import compile_ahead
from autotune.sweep.proposals.compile_ahead import CompileAhead
from autotune.sweep.proposals.parked_trials import Parking
from autotune.sweep.proposals.proposer import Proposal
from autotune.views.progress import Progress

# Four configurations of six: the default (eager, batch 16), then the informed start (compiled, batch 16), whose graph
# is compiled ahead while the default runs and is still compiling when the default ends.
SPACE = """
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 4, trial_timeout: 5m}
sampler: {name: tpe, seed: 0}
params:
  batch_size: {choices: [16, 32, 64], ordinal: true, default: 16}
  compile_mode: [none, default]
"""


def parking_options(storage: str) -> SweepOptions:
    """An in-process sweep of ``storage`` that compiles ahead and parks; nothing else that would add trials or time."""
    return SweepOptions(
        report=False,
        storage=storage,
        tracking=False,
        remeasure_top=0,
        compile_ahead=True,
        prune_ratio=0,
        rehearse_start=False,
    )


@pytest.mark.slow
def test_the_informed_start_steps_aside_while_its_graph_compiles(tmp_path: Path) -> None:
    (tmp_path / "park.yaml").write_text(SPACE)
    storage = f"sqlite:///{tmp_path}/park.db"
    options = parking_options(storage)
    said = io.StringIO()
    began = time.time()
    summary = run_sweep(load_space(tmp_path / "park.yaml"), options, Progress(None, None, said))
    wall_s = time.time() - began
    assert "trial 1 steps aside until its graph is compiled ahead" in said.getvalue(), said.getvalue()
    assert summary.measured == 4
    study = optuna.load_study(study_name="park", storage=storage)
    assert all(trial.state is TrialState.COMPLETE for trial in study.trials)  # nothing left RUNNING
    records = {record.number: record for record in measured_records(study)}
    informed = records[1]
    assert informed.informed and informed.compiled and informed.ok
    assert informed.started is not None
    parked_s = study.trials[1].user_attrs[schema.ATTR_PARKED_S]
    assert parked_s > 0
    # Trials asked after it were measured while it stood aside, and its record starts when it was taken up again:
    # its duration is its measurement's, so the trial times add up to no more than the sweep took.
    meanwhile = [r for r in records.values() if r.number > 1 and r.ended is not None and r.ended <= informed.started]
    assert meanwhile, {n: (r.started, r.ended) for n, r in records.items()}
    complete, start = study.trials[1].datetime_complete, study.trials[1].datetime_start
    assert complete is not None and start is not None
    assert informed.duration_s < (complete - start).total_seconds()
    assert sum(r.duration_s for r in records.values()) < wall_s
    # The wait for the rest of its compile, if any, still counts as its compile (the GPU would be idle).
    assert informed.compile_s > 0


@pytest.mark.slow
def test_a_trial_predicted_to_outlast_the_parked_compile_is_measured_after_the_parked_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eager trials predicted at 100 s against 1 s left of the informed start's compile: the informed start is
    measured first, the trial asked meanwhile after it, and that trial's record starts when its own measurement did
    (no second counted twice)."""

    def predict(configurations: list[dict[str, object]]) -> Seconds:
        eager = [graph_key(c) is None for c in configurations]
        return Seconds(np.array([100.0 if e else 10.0 for e in eager]), np.array([0.0 if e else 1.0 for e in eager]))

    monkeypatch.setattr(loop, "_predict", lambda ctx: predict)
    (tmp_path / "park.yaml").write_text(SPACE)
    storage = f"sqlite:///{tmp_path}/park.db"
    options = parking_options(storage)
    said = io.StringIO()
    began = time.time()
    run_sweep(load_space(tmp_path / "park.yaml"), options, Progress(None, None, said))
    wall_s = time.time() - began
    assert "trial 1 steps aside until its graph is compiled ahead" in said.getvalue(), said.getvalue()
    assert "trial 2 runs after parked 1: predicted 100 s, more than the 1 s" in said.getvalue(), said.getvalue()
    study = optuna.load_study(study_name="park", storage=storage)
    records = {record.number: record for record in measured_records(study)}
    informed, after = records[1], records[2]
    assert informed.ended is not None and after.started is not None and after.started >= informed.ended
    assert study.trials[2].user_attrs[schema.ATTR_PARKED_S] >= informed.duration_s
    assert sum(r.duration_s for r in records.values()) < wall_s


@pytest.mark.slow
def test_a_graph_that_cannot_park_compiles_ahead_while_the_parked_trial_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host of two compile slots parks one graph; the next proposal of another graph, not compiling ahead, has its
    compile started ahead (Parking.compile_beside) and the parked trial, predicted ready sooner, is measured first;
    the proposal's trial then finds its graph compiled ahead. Six configurations, a budget of six: the last two are
    the compiled ones of batch 64 and 32 (the informed start is batch 16's), in the order the sampler proposes them,
    which can vary with the timing of the asks; so the predicted waits go by the trial that proposed the graph."""
    storage = f"sqlite:///{tmp_path}/park.db"
    waits = {4: 1.0, 5: 30.0}  # the predicted rest of a graph's compile ahead, by the trial that proposed it

    def proposed_by(trials: list[optuna.trial.FrozenTrial], configuration: dict[str, object]) -> int:
        return min((t.number for t in trials if t.user_attrs.get(schema.ATTR_PARAMS) == configuration), default=-1)

    def predict(configurations: list[dict[str, object]]) -> Seconds:
        trials = optuna.load_study(study_name="park", storage=storage).get_trials(deepcopy=False)
        waiting = np.array(
            [waits.get(proposed_by(trials, c), 0.0) if graph_key(c) is not None else 0.0 for c in configurations]
        )
        return Seconds(waiting + 10.0, waiting)

    monkeypatch.setattr(loop, "_predict", lambda ctx: predict)
    monkeypatch.setattr(compile_ahead, "slots", lambda: 2)  # read by compile_ahead_for
    monkeypatch.setattr(CompileAhead, "_start_next", lambda self, skip: None)  # no guesses: only what trials claim
    (tmp_path / "park.yaml").write_text(SPACE.replace("trials: 4", "trials: 6"))
    said = io.StringIO()
    run_sweep(load_space(tmp_path / "park.yaml"), parking_options(storage), Progress(None, None, said))
    study = optuna.load_study(study_name="park", storage=storage)
    records = {record.number: record for record in measured_records(study)}
    assert sorted(records[n].params["batch_size"] for n in (4, 5)) == [32, 64], said.getvalue()
    assert all(records[n].params["compile_mode"] == "default" for n in (4, 5)), said.getvalue()
    assert "trial 4 steps aside until its graph is compiled ahead" in said.getvalue(), said.getvalue()
    assert "trial 5 compiles ahead while the trials standing aside are measured" in said.getvalue(), said.getvalue()
    assert "trial 5 waits for trial 4 first" in said.getvalue(), said.getvalue()
    parked, beside = records[4], records[5]
    assert parked.ended is not None and beside.started is not None and beside.started >= parked.ended
    assert beside.result is not None and AHEAD_METRIC in beside.result.metrics  # its graph came from the compile ahead


@pytest.mark.slow
def test_a_stop_signal_queues_a_parked_trial_again(tmp_path: Path) -> None:
    (tmp_path / "park.yaml").write_text(SPACE.replace("trials: 4", "trials: 6"))
    args = ["sweep", "park.yaml", "--no-mlflow", "--remeasure-top", "0", "--prune-below", "0", "--compile-ahead"]
    args.append("--no-report")
    proc = start(tmp_path, args)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "steps aside until its graph is compiled ahead" in line:
            proc.send_signal(signal.SIGINT)
            break
    _, rest = proc.communicate(timeout=120)
    err = "".join(seen) + rest
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "Traceback" not in err, err
    study = optuna.load_study(study_name="park", storage=f"sqlite:///{tmp_path}/autotune.db")
    parked = study.trials[1]
    assert parked.state is TrialState.FAIL, err
    assert parked.user_attrs[schema.ATTR_STATUS] == schema.INTERRUPTED
    assert parked.user_attrs[schema.ATTR_REASON].startswith("interrupted by SIGINT"), parked.user_attrs
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    # Its configuration is queued, still the informed start, for the resumed sweep to measure first.
    again = [t for t in study.trials if t.state is TrialState.WAITING and t.system_attrs.get("failed_trial") == 1]
    assert len(again) == 1 and again[0].user_attrs.get(schema.ATTR_INFORMED), [t.user_attrs for t in study.trials]
    assert again[0].params == parked.params


class CompilesAhead:
    """The compile ahead as parking sees it: a compiled configuration's graph can be claimed (its compile starts
    then, if it was not running; unlike :class:`~autotune.sweep.proposals.compile_ahead.CompileAhead`, also once its
    compile has ended, which lets a test park a graph again); ``guesses``: the graphs it compiles of its own pick;
    ``ended_graphs``: whose compile has ended. A graph never started reads as ended, as in the real one."""

    def __init__(self, slots: int = 4, guesses: tuple[dict[str, object], ...] = ()) -> None:
        self.ended_graphs: set[str] = set()
        self.started = {str(graph_key(params)) for params in guesses}
        self.claims: list[str] = []  # the graphs claimed, in order
        self.slots = slots

    def claim(self, params: dict[str, object], compiled_graphs: set[str]) -> bool:
        key = graph_key(params)
        if key is None or key in compiled_graphs:
            return False
        self.claims.append(key)
        self.started.add(key)
        return True

    def drop(self, params: dict[str, object]) -> None:
        self.started.discard(str(graph_key(params)))

    def ended(self, params: dict[str, object]) -> bool:
        key = str(graph_key(params))
        return key in self.ended_graphs or key not in self.started


def test_trials_of_the_parked_graph_park_beside_it_and_others_are_measured(tmp_path: Path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/graphs.db")
    study = optuna.create_study(study_name="graphs", storage=storage)
    ahead = CompilesAhead()
    parking = Parking(ahead, study, storage, Progress(None, None, io.StringIO()), lambda _: None)  # type: ignore[arg-type]
    fp16 = {"precision": "fp16", "compile_mode": "default", "batch_size": 64}
    bf16 = {**fp16, "precision": "bf16"}
    graphs = [
        fp16,
        {**fp16, "fused_optimizer": True},
        bf16,
        {**fp16, "compile_mode": "reduce-overhead"},
        {**fp16, "compile_mode": "max-autotune-no-cudagraphs"},
        {**fp16, "fused_optimizer": False},
    ]
    proposals = [Proposal(study.ask(), params, TrialKind.MEASURED) for params in graphs]
    parked = [parking.park(p, f"t{p.trial.number}", set()) for p in proposals]
    # The fused optimizer leaves the graph as it is: its trials stand aside beside the first; bf16 is a second graph,
    # reduce-overhead a third; max-autotune a fourth, one too many (SAMPLER_GRAPHS, the slots but one): measured now.
    assert parked == [True, True, True, True, False, True]
    assert parking.take() is None  # their compiles still run
    ahead.ended_graphs.add(str(graph_key(bf16)))  # the second graph's compile ends first: its trial goes first
    second = parking.take()
    assert second is not None and second.proposal.trial.number == 2 and parking.take() is None
    ahead.ended_graphs.update({str(graph_key(fp16)), str(graph_key(graphs[3]))})
    taken = [parking.take() for _ in range(5)]
    assert [t.proposal.trial.number if t else None for t in taken] == [0, 1, 3, 5, None]  # in the order parked
    assert all(schema.ATTR_PARKED_S in study.trials[n].user_attrs for n in (0, 1, 2, 3, 5))

    # A wide host (eight slots) parks at most SAMPLER_GRAPHS graphs: the fourth is measured now.
    wide = Parking(CompilesAhead(slots=8), study, storage, Progress(None, None, io.StringIO()), lambda _: None)  # type: ignore[arg-type]
    modes = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
    wide_parked = [
        wide.park(Proposal(study.ask(), {**fp16, "compile_mode": m}, TrialKind.MEASURED), "t", set()) for m in modes
    ]
    assert wide_parked == [True, True, True, False]
    wide.release("the test's end")

    # A host of two compile slots keeps one for the search's next graph: the sampler parks one graph there.
    narrow = Parking(CompilesAhead(slots=2), study, storage, Progress(None, None, io.StringIO()), lambda _: None)  # type: ignore[arg-type]
    assert narrow.park(Proposal(study.ask(), fp16, TrialKind.MEASURED), "t", set())
    assert not narrow.park(Proposal(study.ask(), bf16, TrialKind.MEASURED), "t", set())
    narrow.release("the test's end")

    again = [Proposal(study.ask(), params, TrialKind.MEASURED) for params in graphs[:2]]
    assert all(parking.park(p, "again", set()) for p in again)
    parking.release("a test's stop")  # both recorded as interrupted and queued again: nothing left RUNNING
    states = [study.trials[p.trial.number].state for p in again]
    assert states == [TrialState.FAIL, TrialState.FAIL] and not parking.parked


def test_a_proposal_that_would_outlast_the_parked_graphs_compile_runs_after_it(tmp_path: Path) -> None:
    """GPT-2's informed start stood aside with about 10 s of its compile left while a 59 s eager trial ran: a
    proposal predicted to take longer than the rest of the parked informed start's compile is measured
    after it; a shorter one, or one nothing predicts, runs meanwhile, and any while the informed start is not parked
    (a sampler's proposal, or its twin alone: the informed start's figure is the pruning bar by then)."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/outlast.db")
    study = optuna.create_study(study_name="outlast", storage=storage)
    said = io.StringIO()
    informed = {"precision": "bf16", "compile_mode": "default", "batch_size": 64}
    eager = {"precision": "fp32", "compile_mode": "none", "batch_size": 64}
    predicted: dict[str, tuple[float, float]] = {}  # params key -> (trial seconds, of which waiting)

    def predict(configurations: list[dict[str, object]]) -> Seconds | None:
        if not predicted:
            return None
        rows = [predicted[str(sorted(c.items()))] for c in configurations]
        return Seconds(np.array([t for t, _ in rows]), np.array([w for _, w in rows]))

    parking = Parking(CompilesAhead(), study, storage, Progress(None, None, said), predict)  # type: ignore[arg-type]
    proposal = Proposal(study.ask(), eager, TrialKind.MEASURED)
    assert not parking.outlasts(proposal)  # nothing parked
    start = Proposal(study.ask(), informed, TrialKind.MEASURED)
    assert parking.park(start, "informed", set(), informed=True)
    assert not parking.outlasts(proposal)  # nothing predicted
    predicted[str(sorted(informed.items()))] = (45.0, 10.5)
    predicted[str(sorted(eager.items()))] = (21.5, 0.0)
    assert parking.outlasts(proposal)
    parking.parked[0].informed = False  # its twin, or a sampler's proposal: it stands aside whatever runs meanwhile
    assert not parking.outlasts(proposal)
    parking.parked[0].informed = True
    assert "trial 0 runs after parked 1: predicted 22 s, more than the 10 s" in said.getvalue(), said.getvalue()
    predicted[str(sorted(informed.items()))] = (45.0, 20.0)  # 21.5 s against 20 s left: within the margin
    assert not parking.outlasts(proposal)
    parking.release("the test's end")


def test_a_parked_trial_whose_compile_ended_goes_before_one_still_compiling(tmp_path: Path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/order.db")
    study = optuna.create_study(study_name="order", storage=storage)
    ahead = CompilesAhead()
    parking = Parking(ahead, study, storage, Progress(None, None, io.StringIO()), lambda _: None)  # type: ignore[arg-type]
    slow, quick = ({"precision": p, "compile_mode": "default", "batch_size": 64} for p in ("fp16", "bf16"))
    assert all(parking.park(Proposal(study.ask(), p, TrialKind.MEASURED), "t", set()) for p in (slow, quick))
    ahead.ended_graphs.add(str(graph_key(quick)))
    first = parking.take()
    assert first is not None and first.proposal.params == quick
    assert parking.take() is None  # the other's compile still runs
    last = parking.take(waiting=True)  # the budget's last trial: it waits for the rest of its compile
    assert last is not None and last.proposal.params == slow and not parking.parked


def test_the_informed_starts_twin_parks_beside_it_and_a_samplers_other_graph_does_not(tmp_path: Path) -> None:
    """Measured at once, the twin (another graph) made the informed start wait for the rest of its compile, the GPU
    idle (42.8 s of ResNet-50's on an H100): the expert's two trials park together, in the order asked; a sampler's
    proposal parks beside them only with one of their graphs, and a sampler's parked graph keeps the twin out."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/twin.db")
    study = optuna.create_study(study_name="twin", storage=storage)
    ahead = CompilesAhead()
    parking = Parking(ahead, study, storage, Progress(None, None, io.StringIO()), lambda _: None)  # type: ignore[arg-type]
    bf16 = {"precision": "bf16", "compile_mode": "default", "batch_size": 512, "fused_optimizer": True}
    fp16 = {**bf16, "precision": "fp16"}

    def park(params: dict[str, object], informed: bool = False, twin: bool = False) -> bool:
        return parking.park(Proposal(study.ask(), params, TrialKind.MEASURED), "t", set(), informed, twin)

    assert park(bf16, informed=True) and park(fp16, twin=True)
    assert not park({**bf16, "compile_mode": "reduce-overhead"})  # a sampler's other graph: measured now
    assert park({**fp16, "fused_optimizer": False})  # the twin's graph: beside it
    ahead.ended_graphs.update({str(graph_key(bf16)), str(graph_key(fp16))})
    taken = [parking.take() for _ in range(4)]
    assert [t.proposal.trial.number if t else None for t in taken] == [0, 1, 3, None]

    assert park({**bf16, "batch_size": 256})  # a sampler's parked graph first: the expert's twin waits its turn
    assert not park(fp16, twin=True)
    parking.release("the test's end")


def test_a_proposal_that_would_wait_lets_the_parked_trial_whose_compile_ends_sooner_go_first(tmp_path: Path) -> None:
    """ResNet-50's trial 15 (on an H200) waited 40.8 s for a compile ahead started 3 s before, a third
    graph that could not park, while parked trial 11's compile had about 26 s left: where a proposal cannot park (here
    a host of three compile slots), the parked trial predicted to end first goes first, then the proposal waits for
    what is left; none goes first when the proposal's graph is not compiling ahead, nothing is predicted, or every
    parked compile is predicted to end later."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/sooner.db")
    study = optuna.create_study(study_name="sooner", storage=storage)
    said = io.StringIO()
    waits: dict[str, float] = {}  # graph key -> the predicted rest of its compile ahead

    def predict(configurations: list[dict[str, object]]) -> Seconds | None:
        if not waits:
            return None
        rest = np.array([waits[str(graph_key(c))] for c in configurations])
        return Seconds(rest + 10.0, rest)

    older, younger, third = ({"precision": "fp16", "compile_mode": m, "batch_size": 512} for m in MODES)
    ahead = CompilesAhead(slots=3, guesses=(third,))  # two graphs park; the third graph compiles as a guess
    parking = Parking(ahead, study, storage, Progress(None, None, said), predict)  # type: ignore[arg-type]
    assert parking.park(Proposal(study.ask(), older, TrialKind.MEASURED), "t0", set())
    assert parking.park(Proposal(study.ask(), younger, TrialKind.MEASURED), "t1", set())
    proposal = Proposal(study.ask(), third, TrialKind.MEASURED)
    assert not parking.park(proposal, "t2", set())  # a third graph: measured now, after waiting for its compile
    assert parking.sooner(proposal) is None  # nothing predicted
    waits.update({str(graph_key(older)): 26.0, str(graph_key(younger)): 45.0, str(graph_key(third)): 40.0})
    first = parking.sooner(proposal)
    assert first is not None and first.proposal.params == older, said.getvalue()
    assert schema.ATTR_PARKED_S in study.trials[0].user_attrs  # its record starts now
    said_first = (
        "trial 2 waits for trial 0 first: its graph's compile ahead is predicted to end in 26 s, this one's in 40 s"
    )
    assert said_first in said.getvalue(), said.getvalue()
    waits[str(graph_key(third))] = 2.4  # measuring it took the proposal's compile nearer its end
    waits[str(graph_key(younger))] = 12.0
    assert parking.sooner(proposal) is None and len(parking.parked) == 1
    waits[str(graph_key(third))] = 30.0
    ahead.ended_graphs.add(str(graph_key(third)))  # its compile ahead has ended: it waits for nothing
    assert parking.sooner(proposal) is None
    parking.release("the test's end")


MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


def test_a_graph_too_many_compiles_ahead_while_the_parked_trials_are_measured(tmp_path: Path) -> None:
    """GPT-2's trial 14 (on an H200), a fourth graph proposed while three stood aside, compiled 25.9 s
    in its trial, the GPU idle, and the parked trials were measured after it: its compile now starts ahead and the
    parked trial predicted to be ready first is measured meanwhile; not where nothing is predicted, every parked
    compile is predicted to end after its own, it is eager, or its graph was compiled by a trial."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/beside.db")
    study = optuna.create_study(study_name="beside", storage=storage)
    said = io.StringIO()
    rests: dict[str, float] = {}  # graph key -> its compile: the rest of it once started ahead, all of it in a trial
    ahead = CompilesAhead()  # four slots: three graphs park

    def predict(configurations: list[dict[str, object]]) -> Seconds | None:
        if not rests:
            return None
        keys = [str(graph_key(c)) for c in configurations]
        compiles = np.array([0.0 if k in ahead.ended_graphs else rests[k] for k in keys])
        waiting = np.array([c if k in ahead.started else 0.0 for k, c in zip(keys, compiles, strict=True)])
        return Seconds(compiles + 10.0, waiting)  # a trial: its compile (or the rest it waits for), then 10 s

    parking = Parking(ahead, study, storage, Progress(None, None, said), predict)  # type: ignore[arg-type]
    graphs = [{"precision": "fp16", "compile_mode": "reduce-overhead", "batch_size": b} for b in (8, 16, 32, 64)]
    for params in graphs[:3]:
        assert parking.park(Proposal(study.ask(), params, TrialKind.MEASURED), "t", set())
    fourth, key = Proposal(study.ask(), graphs[3], TrialKind.MEASURED), str(graph_key(graphs[3]))
    assert not parking.park(fourth, "t3", set())  # a graph too many
    assert not parking.compile_beside(fourth, set())  # nothing predicted: it compiles in its trial, as before
    rests.update({str(graph_key(params)): rest for params, rest in zip(graphs, (40.0, 36.0, 45.0, 25.0), strict=True)})
    assert not parking.compile_beside(fourth, set())  # each parked compile outlasts its whole trial (35 s): none starts
    assert ahead.claims[3:] == [] and key not in ahead.started
    rests[str(graph_key(graphs[1]))] = 30.0  # ready before its trial would end (35 s), not before its compile (25 s)
    assert not parking.compile_beside(fourth, set())
    assert ahead.claims[3:] == [key] and key not in ahead.started  # started to see, then stopped again
    rests[str(graph_key(graphs[1]))] = 12.0
    assert not parking.compile_beside(fourth, {key})  # a trial compiled its graph already
    eager = Proposal(study.ask(), {**graphs[3], "compile_mode": "none"}, TrialKind.MEASURED)
    assert not parking.compile_beside(eager, set())
    assert key not in ahead.started

    assert parking.compile_beside(fourth, set())
    assert key in ahead.started and "trial 3 compiles ahead while the trials standing aside" in said.getvalue()
    first = parking.sooner(fourth)  # 12 s left against its 25: the parked trial goes first
    assert first is not None and first.proposal.params == graphs[1]
    assert parking.sooner(fourth) is None  # the other two are predicted to end after it
    parking.release("the test's end")


def test_when_a_parked_trial_must_wait_the_one_predicted_to_end_first_goes(tmp_path: Path) -> None:
    """The budget's last trials parked, none's compile ended: the one whose compile is predicted to end first is
    measured (its trial waits the least, the GPU idle), the longest parked where nothing is predicted."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/soonest.db")
    study = optuna.create_study(study_name="soonest", storage=storage)
    waits: dict[str, float] = {}

    def predict(configurations: list[dict[str, object]]) -> Seconds | None:
        if not waits:
            return None
        rest = np.array([waits[str(graph_key(c))] for c in configurations])
        return Seconds(rest + 10.0, rest)

    parking = Parking(CompilesAhead(), study, storage, Progress(None, None, io.StringIO()), predict)  # type: ignore[arg-type]
    slow, quick = ({"precision": "fp16", "compile_mode": m, "batch_size": 512} for m in MODES[:2])
    for params in (slow, quick):
        assert parking.park(Proposal(study.ask(), params, TrialKind.MEASURED), "t", set())
    assert parking.take() is None  # both compiles still run
    waits.update({str(graph_key(slow)): 30.0, str(graph_key(quick)): 5.0})
    first = parking.take(waiting=True)
    assert first is not None and first.proposal.params == quick
    waits.clear()
    assert parking.park(Proposal(study.ask(), quick, TrialKind.MEASURED), "t", set())
    longest = parking.take(waiting=True)  # nothing predicted: the longest parked
    assert longest is not None and longest.proposal.params == slow
    parking.release("the test's end")
