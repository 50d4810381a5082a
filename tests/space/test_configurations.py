"""How many configurations a space holds: listed where finite and small enough, None otherwise."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from autotune.space import ParamSpec, Space, list_configurations, load_space
from autotune.space.params import combinations


def space(tmp_path: Path, params: str, extra: str = "") -> Space:
    path = tmp_path / "space.yaml"
    head = "workload: {name: replayed_matmul}\nobjective: {metric: ms, direction: minimize}\n"
    path.write_text(head + textwrap.dedent(extra) + "params:\n" + textwrap.indent(textwrap.dedent(params), "  "))
    return load_space(path, replay=True)


def count(tmp_path: Path, params: str, extra: str = "") -> int | None:
    listed = list_configurations(space(tmp_path, params, extra))
    return None if listed is None else len(listed)


def test_every_discrete_kind_counts_its_values(tmp_path: Path) -> None:
    params = """\
        precision: [default, bf16]                  # a list
        layout: {choices: [a, b, c]}                # choices
        BLOCK_M: {choices: [64, 128], ordinal: true}
        GROUP_M: 8                                  # fixed: one value
        warps: {low: 2, high: 8, step: 2}           # an int range: 2, 4, 6, 8
        scale: {low: 0.5, high: 1.0, step: 0.25}    # a float range with a step: 0.5, 0.75, 1.0
    """
    assert count(tmp_path, params) == 2 * 3 * 2 * 1 * 4 * 3


def test_a_conditional_param_counts_only_where_its_condition_holds(tmp_path: Path) -> None:
    params = """\
        compile_mode: [none, default, max-autotune]
        cudnn_deterministic: {choices: [true, false], when: {compile_mode: [none]}}
        batch_size: [8, 16]
    """
    # (none x 2 flags + default + max-autotune) x 2 batch sizes; a product of the lists would say 12
    assert count(tmp_path, params) == (2 + 1 + 1) * 2


def test_feasibility_rules_rule_configurations_out(tmp_path: Path) -> None:
    listed = list_configurations(
        space(
            tmp_path, "BLOCK_M: [32, 64, 128]\nBLOCK_N: [32, 64, 128]\n", "feasibility: [BLOCK_M * BLOCK_N <= 4096]\n"
        )
    )
    assert listed is not None
    assert sorted((c["BLOCK_M"], c["BLOCK_N"]) for c in listed.feasible) == [
        (32, 32),
        (32, 64),
        (32, 128),
        (64, 32),
        (64, 64),
        (128, 32),
    ]
    assert listed.ruled_out == 3


def test_a_float_range_without_a_step_is_infinite(tmp_path: Path) -> None:
    assert count(tmp_path, "precision: [default, bf16]\nlr_scale: {low: 0.1, high: 1.0, log: true}\n") is None


def test_a_huge_int_range_is_not_listed_nor_built(tmp_path: Path) -> None:
    started = time.monotonic()
    assert count(tmp_path, "batch_size: {low: 1, high: 1000000000}\n") is None
    assert time.monotonic() - started < 1.0  # counted, never made into a billion values


def test_listing_stops_past_the_limit() -> None:
    specs = [ParamSpec("a", "categorical", (1, 2, 3)), ParamSpec("b", "int", low=1, high=4)]
    assert combinations(specs, limit=12) is not None and len(combinations(specs, limit=12) or []) == 12
    assert combinations(specs, limit=11) is None
    assert combinations([ParamSpec("x", "float", low=0.0, high=1.0)], limit=100) is None


def test_a_stepped_float_is_listed_as_the_grid_lists_it() -> None:
    spec = ParamSpec("x", "float", low=0.1, high=0.4, step=0.1)
    assert spec.count() == 4
    assert combinations([spec]) == [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}, {"x": 0.4}]


@pytest.mark.parametrize(("name", "size"), [("quick", 18), ("triton_matmul", 84), ("gpt2_kernels", None)])
def test_shipped_spaces(name: str, size: int | None) -> None:
    path = Path(__file__).resolve().parents[2] / "search_spaces" / f"{name}.yaml"
    listed = list_configurations(load_space(path, replay=True))
    assert (None if listed is None else len(listed)) == size
