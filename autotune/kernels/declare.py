"""Declaring a tunable Triton kernel by its ordered values, so a search can exploit their order.

    from autotune.kernels.declare import tunable

    @tunable(key=["n_elements"], BLOCK_SIZE=[256, 512, 1024, 2048], num_warps=[2, 4, 8],
             feasibility="BLOCK_SIZE >= 32 * num_warps")
    @triton.jit
    def scaled_add(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr): ...

The result is a plain ``triton.autotune`` kernel over every feasible combination (it works the
same outside autotune), which also carries its values: listed in a space, it becomes one ordinal
param per name (``scaled_add.BLOCK_SIZE``, ``scaled_add.num_warps``) instead of one categorical
param over labels, and the rule rejects combinations before they run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.kernels.listing import ListedKernel, declared_grid

__all__ = ["tunable"]


def tunable(
    *,
    key: Sequence[str],
    num_warps: Sequence[int] = (4,),
    num_stages: Sequence[int] = (2,),
    feasibility: str | None = None,
    **constexprs: Sequence[Any],
) -> Callable[[Any], Any]:
    """A ``triton.autotune`` decorator built from ordered values (see the module docstring).

    ``constexprs`` maps each tuned ``tl.constexpr`` to its values in order; ``feasibility`` is an
    expression over those names and ``num_warps``/``num_stages`` that every config must satisfy.
    """
    values: dict[str, tuple[Any, ...]] = {name: tuple(v) for name, v in constexprs.items()}
    values |= {"num_warps": tuple(num_warps), "num_stages": tuple(num_stages)}
    for name, options in values.items():
        if not options:
            raise AutotuneError(f"tunable: {name} has no values")
    rule = Expression(feasibility) if feasibility else None
    if rule is not None and not rule.names <= values.keys():
        raise AutotuneError(f"tunable: feasibility {feasibility!r} names {sorted(rule.names - values.keys())}")
    grid = [c for c in declared_grid(values) if rule is None or rule.evaluate(c)]
    if not grid:
        raise AutotuneError(f"tunable: no combination satisfies {feasibility!r}")

    def decorate(fn: Any) -> Any:
        import triton  # here: Triton is imported only by a workload that declares a kernel (not on every platform)

        tuner = triton.autotune(configs=[ListedKernel.make_config(c) for c in grid], key=list(key))(fn)
        tuner.autotune_values = values
        tuner.autotune_feasibility = feasibility
        return tuner

    return decorate
