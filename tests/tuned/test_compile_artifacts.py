"""A tuned config ships the winner's compile: saved by the trial, copied by export, checked and loaded by apply().

The end-to-end test runs what a user runs, in real processes: the production loop of tests/compile_workloads.py
with the tuned knobs and no artifacts (fresh process, empty Inductor and Triton caches: the baseline), a compiled
trial (it saves its artifacts in the study's cache folder), ``export`` (it copies them beside ``tuned.yaml``),
the production loop again with them (fresh process, empty caches), then side by side a file of another torch
(warns once, compiles) and a changed artifacts file (refused in one line). 56-86 s on the 2-core
development machine, most of it the one cold compile the comparison needs. The other tests check the format,
the refusals, the warnings, export, verify and MLflow in this process (torch.compile is lazy: nothing compiles).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import warnings
from pathlib import Path
from subprocess import PIPE
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
import torch
import yaml
from compile_workloads import BATCH, FIRST_STEPS, deep_mlp_model
from pythonpath import child_env
from recorded_studies import THROUGHPUT, add_trial, make_study
from triton_folders import NAME, add_kernel

from autotune.errors import AutotuneError
from autotune.knobs import Knobs
from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.artifacts import Artifacts, CompileArtifactsWarning
from autotune.tuned.config import TunedConfig
from autotune.tuned.file import EnvMismatchWarning, load
from autotune.views.export import Shipping, export

TESTS = Path(__file__).parents[1]  # tests/, where the shared workload scripts live
STUDY = "mlp"
WORKLOAD = "compile_workloads:deep_mlp"
# The bar: the first steps with the artifacts take at most 0.7 of the time without them. Measured on
# the 2-core development machine, shared with other jobs (128 blocks, apply() and 3 steps): 23-36 s without,
# 14-15 s with (0.4-0.6); with 48 blocks the C++ builds left in both (13 s of the 14) made it 0.6-0.8.
MAX_RATIO = 0.7


def info() -> StudyInfo:
    return StudyInfo(WORKLOAD, "tiny", "cpu", "mlp.yaml", "workload: {name: x}\n", THROUGHPUT)


def default_trial() -> TrialResult:
    """The eager PyTorch-default trial the winner is measured against (its figure made up: it only has to lose)."""
    metrics = {"throughput": 1.0, "throughput_unit": "samples/s", "step_ms_p50": 32_000.0, "peak_mem_gib": 0.1}
    env = {"device": "cpu", **compileartifacts.environment("cpu")}
    return TrialResult(Status.OK, None, {"compile_mode": "none", "batch_size": 32}, metrics, env)


def study_with(tmp_path: Path, winner: TrialResult) -> tuple[optuna.Study, str]:
    """A SQLite study in ``tmp_path`` whose winner is ``winner``; the study and its storage URL."""
    study = make_study(tmp_path, info(), name=STUDY)
    add_trial(study, info(), default_trial(), default=True)
    add_trial(study, info(), winner)
    return study, f"sqlite:///{tmp_path}/s.db"


def production(tuned: Path, caches: Path) -> subprocess.Popen[str]:
    """The production loop in a fresh process, its Inductor and Triton caches in ``caches`` (a new folder: empty)."""
    env = child_env(
        TESTS.parent,
        TESTS,
        TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),  # the layout of a study's cache folder
        TRITON_CACHE_DIR=str(caches / "triton"),
    )
    script = str(TESTS / "compile_workloads.py")
    return subprocess.Popen([sys.executable, script, str(tuned)], stdout=PIPE, stderr=PIPE, text=True, env=env)


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout, stderr


def outcome(proc: subprocess.Popen[str]) -> dict[str, Any]:
    code, stdout, stderr = finished(proc)
    assert code == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def copy_config(source: Path, folder: Path, change: Any) -> Path:
    """``source`` and its artifacts file copied into ``folder``; ``change(data, artifacts)`` edits them on the way."""
    folder.mkdir()
    data = yaml.safe_load(source.read_text())
    name = data["compile_artifacts"]["file"]
    artifacts = bytearray((source.parent / name).read_bytes())
    change(data, artifacts)
    (folder / source.name).write_text(yaml.safe_dump(data, sort_keys=False))
    (folder / name).write_bytes(bytes(artifacts))
    return folder / source.name


@pytest.mark.slow
def test_a_production_loop_starts_from_the_shipped_compile(tmp_path: Path) -> None:
    # Without: the tuned knobs and no artifacts, a fresh process compiling from empty caches.
    resolved = Knobs.from_params({"compile_mode": "default", "batch_size": BATCH}).to_params()
    knobs = {k: v for k, v in resolved.items() if v is not None}  # as export writes them
    plain = tmp_path / "plain" / "tuned.yaml"
    plain.parent.mkdir()
    plain.write_text(yaml.safe_dump({"schema_version": 1, "knobs": knobs}))
    without = outcome(production(plain, tmp_path / "caches-without"))
    assert without["artifacts_loaded"] is None and without["cache_hits"] == {"fx_graph": 0, "aot_autograd": 0}

    # The trial, compiling in its study's folder. That folder is warm here (a copy of the run above), so this test
    # pays one cold compile, not two; a trial served by its study's cache saves its artifacts all the same.
    storage = f"sqlite:///{tmp_path}/s.db"
    cache = study_cache_dir(storage, STUDY)
    shutil.copytree(tmp_path / "caches-without", cache)
    # A launcher Triton built in the study's folder (on a GPU, one per kernel signature; none on a CPU): it ships too.
    launcher = f"{'0f' * 32}/__triton_launcher{sysconfig.get_config_var('EXT_SUFFIX')}"
    (cache / "triton" / launcher).parent.mkdir(parents=True)
    (cache / "triton" / launcher).write_bytes(b"\x7fELF a launcher: never loaded by a CPU model")
    # A kernel built as it first ran (on a GPU, by coordinate descent, after torch's bundle closed): it ships too,
    # its index pointing at the production folder; one built before the trial began stays out.
    built, older = add_kernel(cache / "triton", "d4" * 32), add_kernel(cache / "triton", "b2" * 32, time.time() - 3600)
    for path in built.iterdir():  # written by the trial process: here, while it runs
        os.utime(path, (time.time() + 3600, time.time() + 3600))
    measure = MeasureSettings(min_warmup_steps=1, settle_window=2, min_steps=3, min_time_s=0.1, max_steps=10)
    spec = TrialSpec(WORKLOAD, knobs, "tiny", "cpu", measure=measure, compile_cache_dir=str(cache))
    trial = TrialRunner().run(spec, 300)
    assert trial.ok, trial.reason
    saved = trial.extra["compile_artifacts"]  # what it compiled, saved in the study's folder
    assert (cache / compileartifacts.FOLDER / saved["file"]).stat().st_size == saved["bytes"]
    # the forward and backward graphs, their join, the launcher and the kernel built as it ran
    assert saved["entries"] == {"inductor": 2, "aot_autograd": 1, "triton_launchers": 1, "triton_kernels": 1}

    study, storage = study_with(tmp_path, trial)
    tuned = tmp_path / "out" / "tuned.yaml"
    config = export(study, info(), tuned, storage=storage)
    assert config.knobs == knobs  # the configuration measured without the artifacts above
    shipped = tuned.parent / "tuned.compile-artifacts.bin"
    assert config.compile_artifacts["file"] == shipped.name and config.compile_artifacts["trial"] == 1
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == config.compile_artifacts["sha256"] == saved["sha256"]

    # With: the exported config and its artifacts, a fresh process with empty caches.
    with_them = outcome(production(tuned, tmp_path / "caches-with"))
    assert with_them["artifacts_loaded"] is True and with_them["warnings"] == [], with_them
    assert with_them["artifacts_entries"] == saved["entries"]
    assert (tmp_path / "caches-with" / "triton" / launcher).read_bytes() == (cache / "triton" / launcher).read_bytes()
    index = tmp_path / "caches-with" / "triton" / built.name / f"__grp__{NAME}.json"
    assert str(index.parent) in index.read_text() and not (tmp_path / "caches-with" / "triton" / older.name).exists()
    # The compile found the trial's graphs in the caches: its keys are the trial's (stable_cache_keys).
    assert with_them["cache_hits"] == {"fx_graph": 2, "aot_autograd": 1}, with_them
    times = {"with": [with_them["first_steps_s"]], "without": [without["first_steps_s"]]}
    if times["with"][0] > MAX_RATIO * times["without"][0]:  # a burst of the other jobs' load: one more pair
        times["without"].append(outcome(production(plain, tmp_path / "caches-without-2"))["first_steps_s"])
        times["with"].append(outcome(production(tuned, tmp_path / "caches-with-2"))["first_steps_s"])
    ratio = min(times["with"]) / min(times["without"])  # each at its least disturbed
    measured = (
        f"apply() and the first {FIRST_STEPS} steps from empty caches: {_seconds(times['with'])} with the"
        f" artifacts, {_seconds(times['without'])} without ({ratio:.2f})"
    )
    print(measured)
    assert ratio <= MAX_RATIO, measured

    # Side by side (neither is timed): a file written by another torch, and a changed artifacts file.
    def other_torch(data: dict[str, Any], _artifacts: bytearray) -> None:  # its measurement and its artifacts
        data["provenance"]["env"]["torch"] = data["compile_artifacts"]["env"]["torch"] = "2.0.0"

    def tamper(_data: dict[str, Any], artifacts: bytearray) -> None:
        artifacts[len(artifacts) // 2] ^= 0xFF

    elsewhere = production(copy_config(tuned, tmp_path / "other", other_torch), tmp_path / "caches-without")
    changed = production(copy_config(tuned, tmp_path / "tampered", tamper), tmp_path / "caches-tampered")
    other = outcome(elsewhere)  # compiled from the warm caches of the first run: only the warning is news
    assert other["artifacts_loaded"] is False and other["loss"] > 0
    assert len(other["warnings"]) == 1, other["warnings"]  # one line, from load(): the numbers and the artifacts
    assert "torch 2.0.0" in other["warnings"][0] and "compile artifacts will not load" in other["warnings"][0]
    code, stdout, stderr = finished(changed)
    assert code == 2 and stdout == "", stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to load compiled code that was changed" in lines[0], stderr


def _seconds(values: list[float]) -> str:
    return " and ".join(f"{v:.1f}" for v in values) + " s"


# --- the checks, in this process (torch.compile is lazy: apply() compiles nothing) ----------------------------


def config_with(tmp_path: Path, data: bytes, **section: Any) -> TunedConfig:
    """A compiled tuned config loaded from ``tmp_path``, its artifacts file holding ``data``."""
    (tmp_path / "tuned.compile-artifacts.bin").write_bytes(data)
    artifacts = {
        "file": "tuned.compile-artifacts.bin",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "env": compileartifacts.environment("cpu"),
        **section,
    }
    config = {"schema_version": 1, "knobs": {"compile_mode": "default"}, "compile_artifacts": artifacts}
    (tmp_path / "tuned.yaml").write_text(yaml.safe_dump(config))
    return load(tmp_path / "tuned.yaml")


def test_apply_refuses_artifacts_that_do_not_match_their_sha256(tmp_path: Path) -> None:
    config = config_with(tmp_path, b"compiled code", sha256="0" * 64)
    with pytest.raises(AutotuneError) as refused:
        config.apply(deep_mlp_model(blocks=1))
    message = str(refused.value)
    assert "\n" not in message and "tuned.compile-artifacts.bin" in message and "not the 0000000000000000" in message


def test_artifacts_of_another_torch_warn_once_and_the_model_still_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    env = {**compileartifacts.environment("cpu"), "torch": "2.0.0"}
    config = config_with(tmp_path, b"not even torch's format", env=env)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = config.apply(deep_mlp_model(blocks=1))
    ours = [w for w in caught if issubclass(w.category, CompileArtifactsWarning | EnvMismatchWarning)]
    assert [w.category for w in ours] == [CompileArtifactsWarning]
    line = str(ours[0].message)
    assert "\n" not in line and "torch 2.0.0 (here " in line and "compiling from scratch" in line
    assert ours[0].filename == __file__  # it names the user's line, not autotune's
    assert isinstance(model, torch._dynamo.eval_frame.OptimizedModule)
    assert config.artifacts_load is not None and not config.artifacts_load.loaded
    assert not [path for path in (tmp_path / "inductor").rglob("*") if path.is_file()]  # nothing in the caches


def test_a_missing_artifacts_file_warns_and_compiles(tmp_path: Path) -> None:
    config = config_with(tmp_path, b"x")
    (tmp_path / "tuned.compile-artifacts.bin").unlink()
    with pytest.warns(CompileArtifactsWarning, match="are not beside it"):
        model, _ = config.apply(deep_mlp_model(blocks=1))
    assert isinstance(model, torch._dynamo.eval_frame.OptimizedModule)


def test_an_eager_config_leaves_its_artifacts_alone(tmp_path: Path) -> None:
    config = config_with(tmp_path, b"compiled code", sha256="0" * 64)
    config.knobs["compile_mode"] = "none"
    model, _ = config.apply(deep_mlp_model(blocks=1))  # no refusal: nothing compiles, nothing loads
    assert config.artifacts_load is None and not isinstance(model, torch._dynamo.eval_frame.OptimizedModule)


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ({"file": "../elsewhere.bin"}, "compile_artifacts.file: expected a file name"),
        ({"sha256": "abc"}, "compile_artifacts.sha256: expected 64 hex digits"),
        ({"env": {"cpu": "x"}}, "compile_artifacts.env: expected the env"),
    ],
)
def test_a_bad_section_is_named_when_loading(tmp_path: Path, section: dict[str, Any], fragment: str) -> None:
    with pytest.raises(AutotuneError, match=fragment):
        config_with(tmp_path, b"x", **section)


def test_differences_compare_whole_versions_and_the_device() -> None:
    cpu = {"torch": "2.11.0+cu130", "triton": "3.6.0", "cpu": "AMD EPYC"}
    assert compileartifacts.differences(cpu, cpu) == []
    other = {**cpu, "torch": "2.11.0+cu128"}
    assert compileartifacts.differences(cpu, other) == ["torch 2.11.0+cu130 (here 2.11.0+cu128)"]
    gpu = {"torch": "2.11.0+cu130", "triton": "3.6.0", "gpu": "NVIDIA H100 80GB HBM3", "cuda": "13.0"}
    assert compileartifacts.differences(gpu, cpu) == [
        "CUDA 13.0 (here none)",
        "GPU NVIDIA H100 80GB HBM3 (here none)",
        "CPU none (here AMD EPYC)",
    ]
    assert compileartifacts.differences(cpu, {"torch": "2.11.0+cu130", "cpu": "AMD EPYC"}) == []  # Triton absent
    # The ptxas Triton's keys name: another one finds none of the shipped kernels; a file from before it was recorded
    # (or a side without Triton's NVIDIA backend) compares the rest
    h100 = {**gpu, "ptxas": "Build cuda_13.0.r13.0/compiler.36424714_0"}
    bundled = {**gpu, "ptxas": "Build cuda_12.8.r12.8/compiler.35583870_0"}
    assert compileartifacts.differences(h100, bundled) == [
        "ptxas Build cuda_13.0.r13.0/compiler.36424714_0 (here Build cuda_12.8.r12.8/compiler.35583870_0)"
    ]
    assert compileartifacts.differences(gpu, h100) == [] and compileartifacts.differences(h100, gpu) == []


# --- export ----------------------------------------------------------------------------------------------------


def saved_trial(tmp_path: Path, data: bytes = b"the trial's compile") -> tuple[optuna.Study, str, TrialResult]:
    """A study whose compiled winner saved ``data`` as its artifacts in the study's folder, as a trial does."""
    storage = f"sqlite:///{tmp_path}/s.db"
    digest = hashlib.sha256(data).hexdigest()
    folder = study_cache_dir(storage, STUDY) / compileartifacts.FOLDER
    folder.mkdir(parents=True)
    (folder / f"{digest}.bin").write_bytes(data)
    winner = compiled_winner()
    env = compileartifacts.environment("cpu")
    winner.extra["compile_artifacts"] = Artifacts(f"{digest}.bin", digest, len(data), env, {"inductor": 2}).to_dict()
    study, storage = study_with(tmp_path, winner)
    return study, storage, winner


def compiled_winner() -> TrialResult:
    metrics = {"throughput": 9.0, "throughput_unit": "samples/s", "step_ms_p50": 3.0, "compile_s": 21.0}
    env = {"device": "cpu", **compileartifacts.environment("cpu")}
    return TrialResult(Status.OK, None, {"compile_mode": "default", "batch_size": 32}, metrics, env)


def test_export_ships_the_trials_artifacts_beside_the_file(tmp_path: Path) -> None:
    study, storage, _ = saved_trial(tmp_path)
    target = tmp_path / "out" / "prod.yaml"
    export(study, info(), target, storage=storage)
    assert (target.parent / "prod.compile-artifacts.bin").read_bytes() == b"the trial's compile"
    text = target.read_text()
    assert "apply() loads the winner's compile (prod.compile-artifacts.bin" in text
    section = yaml.safe_load(text)["compile_artifacts"]
    assert section["file"] == "prod.compile-artifacts.bin" and section["trial"] == 1
    assert section["sha256"] == hashlib.sha256(b"the trial's compile").hexdigest()
    assert section["env"] == compileartifacts.environment("cpu") and section["entries"] == {"inductor": 2}
    assert load(target).compile_artifacts == section


def test_export_refuses_a_trials_artifacts_file_that_was_changed(tmp_path: Path) -> None:
    study, storage, winner = saved_trial(tmp_path)
    saved = winner.extra["compile_artifacts"]
    (study_cache_dir(storage, STUDY) / compileartifacts.FOLDER / saved["file"]).write_bytes(b"something else")
    with pytest.raises(AutotuneError, match="refusing to load compiled code that was changed"):
        export(study, info(), tmp_path / "tuned.yaml", storage=storage)
    assert not (tmp_path / "tuned.yaml").exists()
    config = export(study, info(), tmp_path / "tuned.yaml", storage=storage, artifacts=None)  # --no-compile-artifacts
    assert config.compile_artifacts == {} and "compile_artifacts" not in (tmp_path / "tuned.yaml").read_text()


def test_an_old_study_runs_the_winner_once_more_to_ship_its_compile(tmp_path: Path) -> None:
    study, storage = study_with(tmp_path, compiled_winner())  # swept before trials saved artifacts
    ran: list[TrialSpec] = []
    said: list[str] = []

    def run_again(spec: TrialSpec) -> TrialResult:
        ran.append(spec)
        folder = Path(spec.compile_cache_dir or "") / compileartifacts.FOLDER
        digest = hashlib.sha256(b"compiled again").hexdigest()
        folder.mkdir(parents=True)
        (folder / f"{digest}.bin").write_bytes(b"compiled again")
        result = compiled_winner()
        result.extra["compile_artifacts"] = Artifacts(f"{digest}.bin", digest, 14, {"torch": "x"}).to_dict()
        return result

    config = export(study, info(), tmp_path / "tuned.yaml", storage=storage, artifacts=Shipping(run_again, said.append))
    assert len(said) == 1 and said[0].startswith("trial 1 saved no compile artifacts (swept before trials saved them)")
    assert "running its configuration once more to capture them" in said[0]
    assert ran[0].params["compile_mode"] == "default"
    assert ran[0].compile_cache_dir == str(study_cache_dir(storage, STUDY))
    assert (tmp_path / "tuned.compile-artifacts.bin").read_bytes() == b"compiled again"
    assert config.compile_artifacts["trial"] == 1

    said.clear()
    quiet = export(study, info(), tmp_path / "other.yaml", storage=storage, artifacts=Shipping(None, said.append))
    assert quiet.compile_artifacts == {} and said == [
        "trial 1 saved no compile artifacts (swept before trials saved them): other.yaml ships without them"
        " (the model compiles from scratch in production)"
    ]


def test_an_old_study_is_not_run_again_on_another_machine(tmp_path: Path) -> None:
    winner = compiled_winner()
    winner.env["torch"] = "2.0.0"
    study, storage = study_with(tmp_path, winner)
    said: list[str] = []
    never = Shipping(lambda spec: pytest.fail("ran on another machine"), said.append)
    config = export(study, info(), tmp_path / "tuned.yaml", storage=storage, artifacts=never)
    assert config.compile_artifacts == {}
    assert len(said) == 1 and "not the one that measured it (torch 2.0.0 (here" in said[0]


# --- the command line, the sweep's MLflow run, the compile caches' keys ------------------------------------------


def autotune_side_by_side(*commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """``python -m autotune`` processes, started together (each spends its seconds importing torch)."""
    procs = [
        subprocess.Popen([sys.executable, "-m", "autotune", *c], stdout=PIPE, stderr=PIPE, text=True) for c in commands
    ]
    done = [(proc, *proc.communicate(timeout=300)) for proc in procs]
    return [subprocess.CompletedProcess(proc.args, proc.returncode, out, err) for proc, out, err in done]


def test_export_and_verify_refuse_changed_artifacts_in_one_line(tmp_path: Path) -> None:
    study, storage, winner = saved_trial(tmp_path)
    tuned = tmp_path / "tuned.yaml"
    export(study, info(), tuned, storage=storage)
    (tmp_path / "tuned.compile-artifacts.bin").write_bytes(b"changed after the export")
    (study_cache_dir(storage, STUDY) / compileartifacts.FOLDER / winner.extra["compile_artifacts"]["file"]).write_bytes(
        b"changed in the study's folder"
    )
    exported, verified = autotune_side_by_side(
        ["export", "--study", STUDY, "--storage", storage, "-o", str(tmp_path / "again.yaml")],
        ["verify", str(tuned), "--device", "cpu"],
    )
    for proc in (exported, verified):
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("autotune: error: compile artifacts "), proc.stderr
        assert "refusing to load compiled code that was changed" in lines[0]
    assert not (tmp_path / "again.yaml").exists()


def test_the_sweep_logs_the_winners_artifacts_beside_best_config(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from autotune.records import StudyRecords
    from autotune.sweep.stages.summary import _summary_artifacts
    from autotune.tracking import SweepTracker

    study, storage, _ = saved_trial(tmp_path)
    records = StudyRecords.read(study, info())
    ctx = SimpleNamespace(study=study, info=info(), records=records, options=SimpleNamespace(storage=storage))
    texts, files = _summary_artifacts(ctx, [], tmp_path / "summary")  # type: ignore[arg-type]
    assert files == [tmp_path / "summary" / "best_config.compile-artifacts.bin"]
    assert "file: best_config.compile-artifacts.bin" in texts["best_config.yaml"]

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracker = SweepTracker(STUDY, uri)
    parent = tracker.start({}, None)
    assert parent is not None
    tracker.finish(records, {}, texts, files=files)
    logged = {item.path for item in MlflowClient(uri).list_artifacts(parent)}
    assert {"best_config.yaml", "best_config.compile-artifacts.bin"} <= logged


def test_stable_cache_keys_name_memory_formats_in_torch() -> None:
    import pickle

    compileartifacts.stable_cache_keys()
    for memory_format in (torch.contiguous_format, torch.channels_last, torch.preserve_format):
        data = pickle.dumps(memory_format)
        assert b"\x8c\x05torch\x94" in data and b"torch._utils" not in data and b"__main__" not in data
        assert pickle.loads(data) is memory_format


# --- autotune verify: the tuned runs load the artifacts, as production does ---------------------------------------


def test_verify_runs_the_tuned_config_with_its_artifacts(tmp_path: Path) -> None:
    from autotune.views.verify import verify

    study, storage, _ = saved_trial(tmp_path)
    tuned = tmp_path / "tuned.yaml"
    export(study, info(), tuned, storage=storage)
    specs: list[TrialSpec] = []

    def run(spec: TrialSpec) -> TrialResult:
        specs.append(spec)
        result = compiled_winner() if spec.params.get("compile_mode") == "default" else default_trial()
        if spec.compile_artifacts is not None:  # what the trial process reports once it loaded them
            result.metrics |= {"compile_artifacts_loaded": 1.0, "compile_s": 2.0}
        return result

    said: list[str] = []
    found = verify(tuned, run, repeats=1, say=said.append)
    shipped, default = specs
    assert shipped.compile_artifacts is not None and default.compile_artifacts is None
    assert shipped.compile_artifacts["file"] == "tuned.compile-artifacts.bin"
    assert shipped.compile_artifacts["folder"] == str(tmp_path)
    assert said == [
        f"re-measuring {tuned} and its PyTorch default, 1x each in fresh processes, the tuned one with"
        " its compile artifacts"
    ]
    assert (
        "compile  loaded its compile artifacts: compiling took 2.0 s (median of 1; the trial 21.0 s)" in found.lines()
    )


def test_a_trial_given_artifacts_of_another_machine_says_so_in_its_result(tmp_path: Path) -> None:
    from autotune.trial import artifacts_io as trialartifacts

    data = b"written elsewhere"
    (tmp_path / "tuned.compile-artifacts.bin").write_bytes(data)
    env = {**compileartifacts.environment("cpu"), "cpu": "another CPU"}
    artifacts = Artifacts("tuned.compile-artifacts.bin", hashlib.sha256(data).hexdigest(), len(data), env)
    shipped = trialartifacts.shipped_spec_field(artifacts, tmp_path, "tuned.yaml")
    spec = TrialSpec(WORKLOAD, {"compile_mode": "default"}, "tiny", "cpu", compile_artifacts=shipped)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileArtifactsWarning)  # the trial reports it in its result instead
        loaded = trialartifacts.load_before_compile(spec, torch.device("cpu"))
    result = compiled_winner()
    trialartifacts.note_and_save(spec, torch.device("cpu"), result, loaded, time.time())
    assert result.metrics["compile_artifacts_loaded"] == 0.0
    assert result.warnings == [
        "tuned.yaml: compile artifacts written by CPU another CPU (here "
        f"{compileartifacts.environment('cpu')['cpu']}): not loaded, compiling from scratch"
    ]
    assert "compile_artifacts" not in result.extra  # no study folder: nothing saved


def test_export_ships_the_rehearsed_starts_artifacts_else_the_trials_own(tmp_path: Path) -> None:
    from autotune.records import Rehearsal, schema

    study, storage, winner = saved_trial(tmp_path)
    own = winner.extra["compile_artifacts"]
    folder = study_cache_dir(storage, STUDY) / compileartifacts.FOLDER
    data = b"what the rehearsed start saved"
    digest = hashlib.sha256(data).hexdigest()
    rehearsed = Artifacts(f"{digest}.bin", digest, len(data), compileartifacts.environment("cpu")).to_dict()
    rehearsal = Rehearsal(own["sha256"], "ok", loaded=True, start_s=2.0, artifacts=rehearsed)
    study.set_user_attr(schema.rehearsed_key(1), rehearsal.to_dict())

    export(study, info(), tmp_path / "gone.yaml", storage=storage)  # its file is not in the folder (yet)
    assert (tmp_path / "gone.compile-artifacts.bin").read_bytes() == b"the trial's compile"
    (folder / f"{digest}.bin").write_bytes(data)
    export(study, info(), tmp_path / "there.yaml", storage=storage)
    assert (tmp_path / "there.compile-artifacts.bin").read_bytes() == data
    assert yaml.safe_load((tmp_path / "there.yaml").read_text())["compile_artifacts"]["sha256"] == digest
