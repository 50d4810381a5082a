"""The ``kernels:`` section: Triton kernels listed by import path, each turned into search params.

    kernels: [my_kernels:fused_add, autotune.kernels.layernorm:layernorm_fwd]

Each kernel is imported here (so ``autotune validate`` says when one does not import or is not
tunable); what it contributes is described in :mod:`autotune.kernels.listing`.
"""

from __future__ import annotations

from typing import Any

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.space.params import ParamSpec
from autotune.space.problems import _Report, _show_type
from autotune.space.settings import KernelSpec

__all__: list[str] = []


def _kernels(
    raw: Any, declared: tuple[str, ...], report: _Report
) -> tuple[tuple[KernelSpec, ...], dict[str, ParamSpec]]:
    """The listed kernels and the params they add; problems (import, not tunable, a name clash) reported."""
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        report.add("kernels", f"expected a list of package.module:kernel, got {_show_type(raw)}")
        return (), {}
    kernels: list[KernelSpec] = []
    params: dict[str, ParamSpec] = {}
    for i, path in enumerate(raw):
        where = f"kernels[{i}]"
        if not isinstance(path, str):
            report.add(where, f"{path!r} is not an import path (package.module:kernel)")
            continue
        try:
            spec, added = _kernel(path)
        except AutotuneError as exc:
            report.add(where, str(exc))
            continue
        for name in added:
            if name in declared or name in params:
                report.add(where, f"its param {name!r} is also a param of this space; rename one of them")
        kernels.append(spec)
        params.update(added)
    return tuple(kernels), params


def _kernel(path: str) -> tuple[KernelSpec, dict[str, ParamSpec]]:
    from autotune.kernels.listing import load_kernel  # imports Triton and the user's module

    listed = load_kernel(path)
    added = {
        p.name: ParamSpec(p.name, "ordinal" if p.ordinal else "categorical", p.values, default=p.values[0])
        for p in listed.params()
    }
    rule = Expression(listed.feasibility) if listed.feasibility else None
    return KernelSpec(path, listed.alias, tuple(added), rule, listed.fixed()), added
