"""float8 in a space: the ``float8_filter:`` key, float8's pairing with bf16, and what a machine lacks to run it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from autotune.space import SpaceError, load_space, machine_problems

HEAD = 'workload: {name: "trial_workloads:wide_mlp", preset: tiny}\ndevice: cpu\n'
SEARCHED = """\
params:
  precision: [default, bf16]
  float8: {choices: [none, tensorwise, rowwise], when: {precision: [bf16]}}
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def problems(tmp_path: Path, body: str) -> list[str]:
    try:
        load_space(write(tmp_path, body))
    except SpaceError as exc:
        return exc.problems
    return []


def test_the_filter_key_is_a_fixed_param_present_where_float8_converts(tmp_path: Path) -> None:
    space = load_space(write(tmp_path, SEARCHED + "float8_filter: {include: ['*.mlp.*'], exclude: [lm_head]}\n"))
    spec = space.params["float8_filter"]
    assert spec.kind == "fixed" and spec.choices == ("include=*.mlp.*;exclude=lm_head",)
    assert spec.when == {"float8": ("tensorwise", "rowwise")}
    assert "float8_filter" not in space.default_params()  # the default trial: no float8, no filter
    assert space.is_feasible({"precision": "bf16", "float8": "rowwise", "float8_filter": spec.first()})[0]
    assert machine_problems(space) == []  # torchao is installed here, and a CPU emulates FP8


def test_a_space_without_the_key_leaves_the_filter_to_its_default(tmp_path: Path) -> None:
    space = load_space(write(tmp_path, SEARCHED))
    assert "float8_filter" not in space.params


def test_float8_without_bf16_is_refused(tmp_path: Path) -> None:
    unpaired = problems(tmp_path, "params:\n  precision: [default, bf16]\n  float8: [none, tensorwise]\n")
    assert unpaired == [
        f"{tmp_path / 'space.yaml'}: params.float8: float8 with a precision other than bf16 is an invalid "
        "combination: add when: {precision: [bf16]}"
    ]
    alone = problems(tmp_path, "params:\n  float8: [none, tensorwise]\n")
    assert len(alone) == 1 and "float8 needs precision bf16, which this space never chooses" in alone[0]
    assert problems(tmp_path, "params:\n  precision: bf16\n  float8: [none, tensorwise]\n") == []
    assert problems(tmp_path, "params:\n  precision: [default, fp16]\n  float8: none\n") == []


def test_bad_filters_are_named_with_their_key(tmp_path: Path) -> None:
    found = problems(tmp_path, SEARCHED + "float8_filter: {include: '*.mlp.*', only: [x]}\n")
    assert found == [f"{tmp_path / 'space.yaml'}: float8_filter: unknown key(s) only (keys: include, exclude)"]
    assert "float8_filter: expected {include: [patterns]" in problems(tmp_path, SEARCHED + "float8_filter: [x]\n")[0]
    unused = problems(tmp_path, "params:\n  precision: [default, bf16]\nfloat8_filter: {exclude: [lm_head]}\n")
    assert len(unused) == 1 and "the space never trains in float8: add params.float8" in unused[0]
    in_params = problems(tmp_path, SEARCHED + "  float8_filter: include=*\n")
    assert len(in_params) == 1 and "set it with the space's float8_filter: key" in in_params[0]
