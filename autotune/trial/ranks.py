"""A data-parallel trial's ranks: ``gpus_per_trial`` processes of torch.distributed, one GPU each, measured together.

The trial process is rank 0. It forks the other ranks before anything touches the device (each then gets its own
CUDA context, as a trial process does), and every rank joins the process group (NCCL on GPUs, gloo on a CPU), builds
the workload with the same seed, applies the knobs (``data_parallel`` wraps the model there) and runs the trial's
stages, ending its warm-up and timing as many steps as the others (:mod:`autotune.trial.agreement`). On a GPU, rank
``r`` takes the ``r``-th visible device.

What the trial reports is the ranks' throughput together: every rank trains its own batch each step, and a step
ends when the slowest rank's does, so the global throughput is the world size times the slowest rank's per-rank
throughput (per-rank batch over its step time). The result is rank 0's, with that throughput and the slowest rank
(``slowest_rank``, ``slowest_rank_step_ms``) in its metrics, and each rank's step time and throughput in its extra.

A rank that dies (killed, crashed) or fails (raises) fails the trial with one line that names it, and no rank is
left behind: once rank 0 has its own answer it waits for the others' (at most :data:`RANK_TIMEOUT_S`, or
:data:`FAILED_PEER_GRACE_S` once one has failed, since the others are then stuck in a collective), kills those still
running and reaps them. Joining the group and every collective time out after :data:`RANK_TIMEOUT_S` as well. A
rank that outlives rank 0 (killed itself by the trial's timeout) sees it gone and exits. A sweep's early stop is not
applied to the ranks: each would decide alone, and one rank stopping would strand the others.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from autotune.host import how_it_ended
from autotune.measurement import Status, TrialResult
from autotune.trial.failures import classify
from autotune.trial.job import run_trial
from autotune.trial.trialspec import TrialSpec

__all__ = ["FAILED_PEER_GRACE_S", "RANK_TIMEOUT_S", "RankEnd", "combined", "rank_device", "run_ranks"]

RANK_TIMEOUT_S = 300.0  # joining the group, each collective, and the others' answers after rank 0's own
FAILED_PEER_GRACE_S = 10.0  # after a rank has failed: how long the others get to say so themselves
_HOST = "127.0.0.1"


@dataclass(frozen=True)
class RankEnd:
    """How one rank ended: its ``result``; or ``died`` (how, where it died without one); or neither (it was still
    running when the others had ended, and was stopped). ``at``: when its answer or its death was seen."""

    rank: int
    result: TrialResult | None
    at: float
    died: str | None = None


def rank_device(name: str, rank: int) -> str:
    """The device of ``rank`` for a spec's device ``name``: the ``rank``-th GPU for cuda (or auto, with one), the
    CPU for cpu."""
    cuda = name.startswith("cuda") or (name == "auto" and torch.cuda.is_available())
    return f"cuda:{rank}" if cuda else "cpu"


def run_ranks(spec: TrialSpec, requested_at: float) -> TrialResult:
    """Run ``spec`` as ``spec.gpus_per_trial`` ranks, this process rank 0, each rank its own
    :func:`~autotune.trial.job.run_trial`; return their result together (:func:`combined`). Never raises: ranks that
    cannot be started fail the trial."""
    try:
        return _run_ranks(spec, requested_at)
    except Exception as exc:  # the ranks could not be started
        status, reason = classify(exc)
        return TrialResult.failed(status, reason, spec.params)


def _run_ranks(spec: TrialSpec, requested_at: float) -> TrialResult:
    world = spec.gpus_per_trial
    ranked = replace(spec, pruning=None)
    address = f"tcp://{_HOST}:{_free_port()}"
    forked = multiprocessing.get_context("fork")
    others = [_Rank.start(forked, rank, ranked, address, requested_at) for rank in range(1, world)]
    try:
        own, ended = _run_rank(0, ranked, address, requested_at)
        wait_s = RANK_TIMEOUT_S if own.ok else FAILED_PEER_GRACE_S
        ends = [RankEnd(0, own, ended), *(rank.wait(ended + wait_s) for rank in others)]
    finally:
        for rank in others:
            rank.stop()
    return combined(ends, spec.params)


def combined(ends: list[RankEnd], params: dict[str, Any]) -> TrialResult:
    """The trial's result from its ranks' ends: the first rank that died, else the first that failed, else one that
    gave no answer, fails the trial; else rank 0's result with the throughput of all (see the module's docstring)."""
    world = len(ends)
    died = [end for end in ends if end.died is not None]
    if died:
        end = died[0]
        return TrialResult.failed(Status.CRASH, f"rank {end.rank} of {world} {end.died}", params)
    failed = sorted((end for end in ends if end.result is not None and not end.result.ok), key=lambda end: end.at)
    if failed:
        first = failed[0]
        assert first.result is not None
        return TrialResult.failed(first.result.status, f"rank {first.rank} of {world}: {first.result.reason}", params)
    silent = [end.rank for end in ends if end.result is None]
    if silent:
        said = f"rank {silent[0]} of {world} gave no result within {RANK_TIMEOUT_S:g} s of rank 0's"
        return TrialResult.failed(Status.TIMEOUT, said, params)
    return _together([end.result for end in ends if end.result is not None])


def _together(results: list[TrialResult]) -> TrialResult:
    """Rank 0's result with the throughput of every rank together: world size x the slowest rank's."""
    rates = [float(result.metrics["throughput"]) for result in results]
    slowest = min(range(len(rates)), key=rates.__getitem__)
    steps_ms = [float(result.metrics.get("step_ms_p50", 0.0)) for result in results]
    result = results[0]
    result.metrics.update(
        throughput=len(results) * rates[slowest],
        rank_throughput=rates[slowest],
        world_size=len(results),
        slowest_rank=slowest,
        slowest_rank_step_ms=steps_ms[slowest],
    )
    result.extra["rank_step_ms"] = steps_ms
    result.extra["rank_throughput"] = rates
    return result


def _run_rank(rank: int, spec: TrialSpec, address: str, requested_at: float) -> tuple[TrialResult, float]:
    """One rank: its device, the process group joined, the trial run on the rank's device, the group left; its result
    and when the trial ended, before it left the group (a failure is then stamped before the others see it)."""
    device = rank_device(spec.device, rank)
    try:
        if device.startswith("cuda"):
            torch.cuda.set_device(device)  # before the group: NCCL's communicator takes the current device
        dist.init_process_group(
            "nccl" if device.startswith("cuda") else "gloo",
            init_method=address,
            rank=rank,
            world_size=spec.gpus_per_trial,
            timeout=datetime.timedelta(seconds=RANK_TIMEOUT_S),
        )
    except Exception as exc:  # a device it cannot take, the others never came: the trial cannot run
        reason = f"could not join the other ranks: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        return TrialResult.failed(Status.CRASH, reason, spec.params), time.time()
    try:
        return run_trial(replace(spec, device=device), requested_at, rank), time.time()
    finally:
        with contextlib.suppress(Exception):  # a peer already gone: nothing left to tell it
            dist.destroy_process_group()


class _Rank:
    """A rank other than 0: a forked process that runs its trial and sends its result back."""

    def __init__(self, process: multiprocessing.process.BaseProcess, receiver: Connection, rank: int) -> None:
        self.process = process
        self.receiver = receiver
        self.rank = rank

    @classmethod
    def start(
        cls,
        forked: Any,
        rank: int,
        spec: TrialSpec,
        address: str,
        requested_at: float,
    ) -> _Rank:
        receiver, sender = forked.Pipe(duplex=False)
        process = forked.Process(
            target=_rank_main, args=(rank, spec, address, requested_at, sender), name=f"autotune-rank-{rank}"
        )
        process.start()
        sender.close()  # only the rank writes: EOF then means it is gone
        return cls(process, receiver, rank)

    def wait(self, deadline: float) -> RankEnd:
        """Its end: its result, its death, or (at ``deadline``, still running) neither."""
        if not self.receiver.poll(max(0.0, deadline - time.time())):
            return RankEnd(self.rank, None, time.time())
        try:
            payload, at = self.receiver.recv()
        except EOFError:
            self.process.join(FAILED_PEER_GRACE_S)
            return RankEnd(self.rank, None, time.time(), died=how_it_ended(self.process.exitcode))
        return RankEnd(self.rank, TrialResult.from_dict(payload), at)

    def stop(self) -> None:
        """Kill it if it still runs, and reap it."""
        if self.process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid or 0, signal.SIGKILL)
        self.process.join()
        self.receiver.close()


def _rank_main(rank: int, spec: TrialSpec, address: str, requested_at: float, sender: Connection) -> None:
    """A forked rank's life: exit with rank 0, run its trial, send the result with the time it ended."""
    _exit_with_rank_zero()
    result, ended = _run_rank(rank, spec, address, requested_at)
    with contextlib.suppress(BrokenPipeError):  # rank 0 is gone: nobody to tell
        sender.send((result.to_dict(), ended))
    sender.close()


def _exit_with_rank_zero() -> None:
    """Exit as soon as rank 0 (this process's parent) is gone, whatever this rank is waiting for."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="autotune-rank-watch").start()


def _free_port() -> int:
    """A TCP port free on this host now, for the ranks' rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_HOST, 0))
        return int(probe.getsockname()[1])
