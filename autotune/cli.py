"""The ``autotune`` command: one thin function per subcommand; the work happens in the modules."""

from __future__ import annotations

import functools
import operator
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, cast

import click

from autotune.errors import AutotuneError
from autotune.interrupts import Interrupted, StopSignals
from autotune.quiet import quiet_resource_tracker

__all__ = ["main"]

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
EXIT_TRIAL_FAILED = 3


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"autotune: error: {message}", err=True)
    sys.exit(code)


def _parse_assignments(pairs: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AutotuneError(f"-p {pair!r} is not key=value")
        params[key.strip()] = value.strip()
    return params


def _study_option(verb: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--study", "study_name", help=f"The study to {verb} [default: the storage's only study].")


def _names_storage_faults(command: Callable[..., None]) -> Callable[..., None]:
    """A command whose ``storage`` (a full disk, a corrupt or read-only file) fails with one line naming it.

    Wherever the fault shows: opening the study, or reading a damaged page of it halfway through.
    """

    @functools.wraps(command)
    def named(*args: Any, **kwargs: Any) -> None:
        from autotune.storage.faults import faults_named

        with faults_named(kwargs["storage"]):
            command(*args, **kwargs)

    return named


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    from autotune.space import parse_duration

    try:
        return None if value is None else parse_duration(value)
    except AutotuneError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="autotune")
def cli() -> None:
    """Find the fastest way to train a PyTorch model on this GPU.

    Exit codes: 0 done, 2 bad input, 3 a trial that failed (oom, timeout, ...), 1 internal error.
    """


@cli.command()
@click.argument("workload")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VALUE", help="A knob or workload parameter.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--preset", default="full", show_default=True, help="Workload size: tiny, small or full (llama: also 125m, 1b, 3b)."
)
@click.option("--timeout", default="10m", show_default=True, callback=_duration, help="Wall-clock limit: 90s, 10m, 1h.")
@click.option(
    "--memory-cap",
    type=float,
    metavar="GIB",
    help="Fail allocations past this much memory, as a smaller device would.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    help="Least number of timed steps (default: 30 on a GPU, 10 on a CPU).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--gpus-per-trial",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run the trial as this many ranks of torch.distributed, one GPU each (gloo processes on a CPU).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the TrialResult as JSON.")
def trial(
    workload: str,
    params: tuple[str, ...],
    device: str,
    preset: str,
    timeout: float,
    memory_cap: float | None,
    steps: int | None,
    seed: int,
    gpus_per_trial: int,
    as_json: bool,
) -> None:
    """Measure one configuration of WORKLOAD (resnet50, gpt2, llama, vit or module:function) in its own process.

    Example: autotune trial resnet50 -p precision=bf16 -p memory_format=channels_last -p batch_size=256
    """
    from autotune.search.costmodel import compiles
    from autotune.trial.job import check_spec
    from autotune.trial.trialspec import MeasureSettings, TrialSpec
    from autotune.trial_process import TrialRunner
    from autotune.views import text as report

    parsed = _parse_assignments(params)
    measure = MeasureSettings(min_steps=steps)
    spec = TrialSpec(workload, parsed, preset, device, {}, measure, memory_cap, seed, gpus_per_trial=gpus_per_trial)
    check_spec(spec)
    result = TrialRunner(compiles=compiles(parsed)).run(spec, timeout)
    click.echo(result.to_json(indent=2) if as_json else report.trial_summary(workload, preset, result))
    if not result.ok:
        sys.exit(EXIT_TRIAL_FAILED)


@cli.command()
@click.argument("space_files", metavar="SPACE_FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(space_files: tuple[Path, ...]) -> None:
    """Check each SPACE_FILE and report every problem at once, with file and key path.

    Example: autotune validate search_spaces/*.yaml
    """
    from autotune.space import load_space, machine_problems

    problems: list[str] = []
    for space_file in space_files:
        try:
            space = load_space(space_file)
        except AutotuneError as exc:
            problems += str(exc).splitlines()
            continue
        if here := machine_problems(space):  # what its trials need of this machine (float8: torchao, FP8)
            problems += here
            continue
        click.echo(f"{space_file}: ok ({len(space.params)} params, sampler {space.sampler.name})")
    if problems:
        raise AutotuneError("\n".join(problems))


class _Flag(NamedTuple):
    """One option of ``autotune sweep``: its flag, the :class:`~autotune.sweep.SweepOptions` field it sets (also
    the parsed value's name), its help, click's other arguments, and what turns the parsed value into the field's."""

    flag: str
    field: str
    help: str
    click: dict[str, Any]
    convert: Callable[[Any], Any] | None


def _flag(flag: str, field: str, help: str, *, convert: Callable[[Any], Any] | None = None, **click: Any) -> _Flag:
    """A row of :data:`_SWEEP_FLAGS`; ``click`` is click.option's other arguments (a default is shown in --help)."""
    return _Flag(flag, field, help, {"show_default": click.get("default") is not None, **click}, convert)


def _profile_steps(profile: bool) -> int:
    from autotune.views.profile_study import DEFAULT_STEPS

    return DEFAULT_STEPS if profile else 0


def _gpu_list(gpus: str | None) -> tuple[str, ...]:
    from autotune.sweep.gpus.orchestrator import parse_gpus

    return parse_gpus(gpus) if gpus else ()


# Every option of `autotune sweep`, in --help's order: one row here and one SweepOptions field make a new one.
# (Here, not on SweepOptions' fields: importing autotune.sweep imports torch, and --help should not wait for it.)
_SWEEP_FLAGS = (
    _flag("--study", "study_name", "Study name (default: the space file's name). Same name = resume."),
    _flag("--n-trials", "n_trials", "Measured trials in total, finished ones included.", type=click.IntRange(min=1)),
    _flag("--timeout", "timeout_s", "Stop starting trials after this long: 90s, 30m, 8h.", callback=_duration),
    _flag("--storage", "storage", "Optuna RDB URL, or memory.", default="sqlite:///autotune.db"),
    _flag("--device", "device", "Override the space's device: auto, cpu, cuda, cuda:N."),
    _flag("--seed", "seed", "Override the space's sampler seed.", type=int),
    _flag("--replay", "replay", "Answer trials from recorded measurements (JSON).", type=click.Path(path_type=Path)),
    _flag(
        "--tracking-uri",
        "tracking_uri",
        "MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db).",
    ),
    _flag("--no-mlflow", "tracking", "Do not log to MLflow.", convert=operator.not_, is_flag=True),
    _flag("--memory-cap", "memory_cap_gib", "Fail trial allocations past this much memory.", type=float, metavar="GIB"),
    _flag("--remeasure-top", "remeasure_top", "Measure the best K again.", type=click.IntRange(min=0), default=3),
    _flag("--remeasure-repeats", "remeasure_repeats", "... R times each.", type=click.IntRange(min=1), default=3),
    _flag(
        "--patience",
        "patience",
        "Stop after N measured trials in a row without a new best.",
        type=click.IntRange(min=1),
    ),
    _flag(
        "--prune-below",
        "prune_ratio",
        "Stop a trial after warm-up if its throughput is under this fraction of the best (0: never).",
        type=click.FloatRange(0, 1),
        default=0.5,
    ),
    _flag(
        "--profile",
        "profile_steps",
        "At the end, profile the PyTorch defaults and the winner side by side.",
        convert=_profile_steps,
        is_flag=True,
    ),
    _flag(
        "--warm-start",
        "warm_start",
        "Start the sampler from STUDY's measured trials (same storage): evidence, never trials of this study.",
        metavar="STUDY",
    ),
    _flag(
        "--no-informed-start",
        "informed_start",
        "Do not measure, after the default, the configuration an expert would try first on this device.",
        convert=operator.not_,
        is_flag=True,
    ),
    _flag(
        "--no-rehearse-start",
        "rehearse_start",
        "Do not run the winner's production start once at the end (it ships what that start built).",
        convert=operator.not_,
        is_flag=True,
    ),
    _flag(
        "--no-report",
        "report",
        "Do not write the HTML report at the end (`autotune report` writes it any time).",
        convert=operator.not_,
        is_flag=True,
    ),
    _flag(
        "--compile-ahead/--no-compile-ahead",
        "compile_ahead",
        "Compile the search's next graphs on the idle CPU while trials run [default: on a GPU, one worker, 8+ cores].",
        default=None,
    ),
    _flag(
        "--gpus",
        "gpus",
        "One worker per GPU, one study: 0,1,2,3 (nvidia-smi numbering) or all. With --device cpu, CPU workers.",
        convert=_gpu_list,
        metavar="LIST",
    ),
)


def _sweep_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with every option of :data:`_SWEEP_FLAGS`, each passed as the SweepOptions field it sets."""
    for flag in reversed(_SWEEP_FLAGS):  # click lists a command's options in decorator order, top first
        command = click.option(flag.flag, flag.field, help=flag.help, **flag.click)(command)
    return command


def _sweep_options(parsed: dict[str, Any]) -> dict[str, Any]:
    """The SweepOptions fields that ``autotune sweep``'s parsed options (keyed by field) ask for."""
    return {f.field: parsed[f.field] if f.convert is None else f.convert(parsed[f.field]) for f in _SWEEP_FLAGS}


@cli.command()
@click.argument("space_file", type=click.Path(path_type=Path))
@_sweep_flags
@_names_storage_faults
def sweep(space_file: Path, **flags: Any) -> None:
    """Search SPACE_FILE with Optuna, each trial an isolated measured job; re-run the command to resume."""
    from autotune.space import load_space
    from autotune.sweep import SweepOptions, run_sweep
    from autotune.sweep.stages.summary import summary_text

    space = load_space(space_file, replay=flags["replay"] is not None)
    options = SweepOptions(**_sweep_options(flags))
    summary = run_sweep(space, options)
    click.echo(summary_text(summary, options.storage))


@cli.command()
@_study_option("show")
@click.option("--storage", default="sqlite:///autotune.db", show_default=True, help="Optuna RDB URL.")
@click.option("--top", type=click.IntRange(min=1), help="Show only the best N.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--wide", is_flag=True, help="One line per trial, however wide (default: fit the terminal).")
@_names_storage_faults
def leaderboard(study_name: str | None, storage: str, top: int | None, fmt: str, wide: bool) -> None:
    """Rank the measured trials of a study: knobs, throughput, speedup over the default, memory, energy."""
    from autotune.views.leaderboard import Format, render
    from autotune.views.leaderboard import leaderboard as rank

    study, info = _open_study(study_name, storage)
    click.echo(render(rank(study, info), info, cast(Format, fmt), top, wide=wide), nl=False)


@cli.command()
@_study_option("export from")
@click.option("--storage", default="sqlite:///autotune.db", show_default=True, help="Optuna RDB URL.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("tuned.yaml"), show_default=True)
@click.option("--rule", help="Pick the best trial whose metrics satisfy this, e.g. 'peak_mem_gib <= 40'.")
@click.option(
    "--compile-artifacts/--no-compile-artifacts",
    default=True,
    show_default=True,
    help="Ship the winner's compile beside the file (a trial that saved none is run once more, on this machine).",
)
@_names_storage_faults
def export(study_name: str | None, storage: str, output: Path, rule: str | None, compile_artifacts: bool) -> None:
    """Write the winning configuration as a tuned-config file for production training.

    A compiled winner's compile artifacts go beside it (OUTPUT's stem + .compile-artifacts.bin): production's
    apply() loads them instead of compiling it all again.
    """
    from autotune.views.export import Shipping
    from autotune.views.export import export as write_config

    study, info = _open_study(study_name, storage)
    shipping = None
    if compile_artifacts:
        say = functools.partial(click.echo, err=True)
        shipping = Shipping(_run_once, say, " (one trial's time; --no-compile-artifacts skips it)")
    config = write_config(study, info, output, rule=rule, storage=storage, artifacts=shipping)
    trial = config.provenance.get("trial")
    shipped = config.compile_artifacts
    also = f" and {shipped['file']} ({shipped['bytes'] / 2**20:.1f} MiB of compile artifacts)" if shipped else ""
    click.echo(f"wrote {output}{also} (study {study.study_name}, trial {trial}): {config.knobs}")


def _run_once(spec: Any) -> Any:
    """One trial in a fresh process (export's run once more): 30 minutes at most, a large model's finalist options."""
    from autotune.trial_process import TrialRunner

    return TrialRunner().run(spec, 1800.0)


@cli.command()
@_study_option("profile")
@click.option("--storage", default="sqlite:///autotune.db", show_default=True, help="Optuna RDB URL.")
@click.option("--steps", type=click.IntRange(min=1), default=5, show_default=True, help="Profiled steps per trial.")
@click.option("--out", type=click.Path(path_type=Path), help="Folder for the Chrome traces [default: profiles/STUDY].")
@click.option("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db).")
@click.option("--no-mlflow", is_flag=True, help="Do not log the table and traces to the sweep's MLflow run.")
@_names_storage_faults
def profile(
    study_name: str | None, storage: str, steps: int, out: Path | None, tracking_uri: str | None, no_mlflow: bool
) -> None:
    """torch.profiler over the PyTorch-default trial and the winner: where each step's time goes, side by side."""
    from autotune.sweep.stages.profile import profile_folder
    from autotune.views.profile_study import ProfileFailed, profile_study, space_of

    study, info = _open_study(study_name, storage)
    folder = (out or profile_folder(study.study_name)).absolute()
    try:
        result = profile_study(
            study, info, space_of(info), folder, steps=steps, say=lambda line: click.echo(line, err=True)
        )
    except ProfileFailed as exc:
        _fail(str(exc), EXIT_TRIAL_FAILED)
    click.echo(result.text())
    if not no_mlflow:
        from autotune.storage.studies import redact_url
        from autotune.tracking import SweepTracker

        tracker = SweepTracker(study.study_name, tracking_uri)
        where = redact_url(tracker.tracking_uri)
        logged = result.log(tracker)
        click.echo(f"logged to the sweep's MLflow run in {where}" if logged else f"not logged: no sweep run in {where}")


@cli.command()
@_study_option("show")
@click.option("--storage", default="sqlite:///autotune.db", show_default=True, help="Optuna RDB URL.")
@_names_storage_faults
def status(study_name: str | None, storage: str) -> None:
    """A sweep's progress from another terminal: trials done and running (where, for how long), best, ETA."""
    from autotune.views.status import sweep_status

    study, info = _open_study(study_name, storage)
    click.echo("\n".join(sweep_status(study, info).lines()))


@cli.command()
@click.argument("tuned_file", type=click.Path(path_type=Path))
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Runs of each config.")
@click.option("--device", help="Where to measure: auto, cpu, cuda, cuda:N (default: auto).")
@click.option("--timeout", default="15m", show_default=True, callback=_duration, help="Limit per run: 90s, 10m.")
def verify(tuned_file: Path, repeats: int, device: str | None, timeout: float) -> None:
    """Re-measure TUNED_FILE and its PyTorch default here; exit 3 if it regressed beyond the noise.

    Example: autotune verify tuned.yaml
    """
    from autotune.trial_process import TrialRunner
    from autotune.views.verify import VerifyFailed
    from autotune.views.verify import verify as verify_tuned

    runner = TrialRunner()
    say = functools.partial(click.echo, err=True)
    try:
        found = verify_tuned(tuned_file, lambda spec: runner.run(spec, timeout), repeats, device, say)
    except VerifyFailed as exc:
        click.echo(f"REGRESSION: {exc}")
        sys.exit(EXIT_TRIAL_FAILED)
    click.echo("\n".join(found.lines()))
    if found.regression:
        sys.exit(EXIT_TRIAL_FAILED)


@cli.command()
@_study_option("report on")
@click.option("--storage", default="sqlite:///autotune.db", show_default=True, help="Optuna RDB URL.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True)
@click.option("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db).")
@click.option("--no-mlflow", is_flag=True, help="Do not log the report to the sweep's MLflow run.")
@_names_storage_faults
def report(study_name: str | None, storage: str, output: Path, tracking_uri: str | None, no_mlflow: bool) -> None:
    """One self-contained HTML page of plots (opens offline), and the same figures as PNGs beside it."""
    from autotune.views.report import figures_folder, write_report

    study, info = _open_study(study_name, storage)
    written = write_report(study, info, output, storage)
    click.echo(f"wrote {written.html} and {len(written.pngs)} PNGs in {figures_folder(written.html)}")
    if not no_mlflow:
        from autotune.storage.studies import redact_url
        from autotune.tracking import SweepTracker

        tracker = SweepTracker(study.study_name, tracking_uri)
        where = redact_url(tracker.tracking_uri)
        logged = written.log(tracker)
        click.echo(f"logged to the sweep's MLflow run in {where}" if logged else f"not logged: no sweep run in {where}")


def _open_study(name: str | None, storage: str) -> tuple[Any, Any]:
    from autotune.records import load_study_info
    from autotune.storage.studies import load_existing_study, the_only_study

    name = the_only_study(storage) if name is None else name
    study = load_existing_study(name, storage)
    info = load_study_info(study)
    if info is None:
        raise AutotuneError(f"study {name!r} was not made by autotune sweep")
    return study, info


def _interrupted(stop: Interrupted, args: list[str]) -> NoReturn:
    """One line for a run ended by SIGINT or SIGTERM (a sweep's says how to resume it), and 128 + the signal."""
    resume = f"; resume with: {shlex.join(['autotune', *args])}" if args[:1] == ["sweep"] else ""
    click.echo(f"autotune: interrupted by {stop.signame}{resume}", err=True)
    sys.exit(stop.exit_code)


def _run_guarded(entry: click.Command, args: list[str] | None) -> int:
    args = sys.argv[1:] if args is None else args
    quiet_resource_tracker()  # before any trial process starts the tracker
    try:
        with StopSignals():  # SIGTERM too ends the command through the except clauses below, not on the spot
            entry.main(args=args, prog_name="autotune", standalone_mode=False)
    except click.exceptions.Abort as exc:  # click's form of a KeyboardInterrupt (Interrupted is one)
        cause = exc.__cause__
        if not isinstance(cause, KeyboardInterrupt):
            _fail("aborted", 130)
        _interrupted(cause if isinstance(cause, Interrupted) else Interrupted(signal.SIGINT), args)
    except Interrupted as exc:
        _interrupted(exc, args)
    except click.ClickException as exc:
        _fail(exc.format_message(), EXIT_BAD_INPUT)
    except AutotuneError as exc:
        lines = str(exc).splitlines() or ["bad input"]
        for line in lines[:-1]:  # several problems (validate): one line each
            click.echo(f"autotune: error: {line}", err=True)
        _fail(lines[-1], EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        _interrupted(Interrupted(signal.SIGINT), args)
    except Exception as exc:
        if os.environ.get("AUTOTUNE_DEBUG"):
            traceback.print_exc()
        _fail(
            f"internal error: {type(exc).__name__}: {exc} (AUTOTUNE_DEBUG=1 shows the traceback)",
            EXIT_INTERNAL,
        )
    return 0


def main(args: list[str] | None = None) -> int:
    """Console-script entry point."""
    return _run_guarded(cli, args)
