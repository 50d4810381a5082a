"""README.md and docs/**/*.md against the code: the reference is complete, and every code block in them works.

Rules for code blocks in README.md and docs/**/*.md. A block is fenced with ``` or ~~~ (indented fences in lists
count); its language is the first word after the fence; a failure names the page and the line of the opening fence
(or of the line inside the block at fault). Run ``pytest tests/test_docs.py`` after editing a page.

```yaml / ```yml
    1. A block with a top-level ``schema_version:`` key is a whole tuned config (it names its workload too): it
       must load with ``autotune.load``.
    2. Else a block with a top-level ``workload:`` key is a whole space: it must pass ``autotune validate`` (the
       code's own ``autotune.space.load_space``, in this process).
    3. A block whose first line is a comment starting ``# tuned.yaml`` is a fragment of a tuned config: its keys
       are sections of tuned.yaml (``knobs:``, ``kernels:``, ``compile_artifacts:`` ...), laid over TUNED_BASE
       (``schema_version: 1``, ``workload: {name: resnet50, preset: tiny}``) and loaded with ``autotune.load``.
    4. Any other block is a fragment of a space: its keys are top-level space keys, laid over BASE_SPACE
       (``workload: {name: resnet50, preset: tiny}``, ``device: cpu``,
       ``params: {precision: [default, bf16], compile_mode: [none, default]}``) and validated as in 1. A fragment's
       ``params:`` are added after the base's (a param of the same name replaces the base's); any other key
       replaces the base's. So a fragment about gpt2's ``head`` or triton_matmul's ``BLOCK_M`` must name its
       ``workload:``, which makes it a whole space.
    A space that names a user module (``workload: {name: "my_models:mlp"}``, ``kernels: ["my_kernels:add"]``) is
    validated in a temporary folder holding the page's file blocks that come before it (see python), as
    ``autotune validate`` run next to those files. YAML that is neither (output, another tool's file) goes in a
    ```text block.

```bash / ```sh / ```shell / ```console
    1. Lines ending in a backslash are joined. Each command of a line (split at ``&&``, ``||``, ``;``, ``|``, ``&``;
       redirections and ``# comments`` dropped) that starts with ``autotune``, ``python -m autotune`` or
       ``python3 -m autotune``, after an optional ``$ `` prompt and ``VAR=value`` assignments, is parsed by the real
       click CLI and never run: the command exists, every option exists, every value is accepted (types, ranges,
       choices, durations), required arguments and options are given.
    2. ``autotune trial WORKLOAD -p KEY=VALUE ...``: the workload also resolves (a page's own module from its earlier
       file blocks), each key is a knob or a parameter of that workload, and knob values are valid. ``--device``
       need not exist on this machine.
    3. A ``search_spaces/...`` argument must exist in the repository (globs too).
    4. No placeholders: an argument in capitals (``SPACE.yaml``, ``NAME``, ``N``) or with ``[``, ``]`` or ``...``
       fails. Write a real command (``autotune sweep search_spaces/quick.yaml``), and a synopsis in a ```text block.
    5. ``# needs a GPU`` comments are welcome and change nothing: commands are parsed, never run. Other commands
       (``pip``, ``mlflow``, ``python scripts/...``) are not checked.

```python / ```py
    1. A block whose first line is ``# FILENAME.py`` (``# my_models.py``; a relative path without ``..``) is a file
       of the page: it compiles, every name it uses is bound in it or a builtin, and it imports, in a temporary
       folder holding it and the page's earlier files. Later blocks of the page (yaml, bash, python) see it there.
    2. Any other block is a snippet: it compiles, and every name it uses is bound in it (assigned, imported,
       defined, a parameter) or a builtin: a snippet builds its ``model`` and ``optimizer`` (a page file's workload
       will do) instead of assuming them. It is then run as ``python SNIPPET.py`` in a subprocess, on the CPU, in a
       temporary folder holding the page's earlier files and a ``tuned.yaml`` written by the test (TUNED_BASE with
       knobs TUNED_KNOBS: batch 8, bf16, channels_last, eager; its env this machine's, so loading it does not warn).
       It must exit 0 within SNIPPET_TIMEOUT_S (60 s); keep it to seconds (importing torch is most of that).
    3. A snippet whose first line starts ``# needs a GPU`` is not run. Its imports must resolve instead
       (``from m import x``: ``x`` is in ``m``), and so must the attributes it takes of modules it imports
       (``autotune.load``, ``torch.compile``).

Other languages (``text``, none, ``json``, ``toml`` ...) are not checked.

Beyond code blocks: every knob, space key, param spec key, workload parameter, shipped kernel param, Inductor option
and vocabulary the code accepts appears in backticks in docs/reference/space.md, the names read from the code's own
tables (a new knob without docs fails here); every command and option of the CLI appears in docs/reference/cli.md;
both files are what ``python scripts/docs_reference.py`` generates (regenerate after changing the code); relative
links, and their ``#anchors`` by GitHub's heading slugs, resolve; README.md is at most 15 KiB; no file in README.md
or docs/ names a numbered session or issue.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import symtable
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import click
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SPACE_MD = DOCS / "reference" / "space.md"
CLI_MD = DOCS / "reference" / "cli.md"
README_MAX_BYTES = 15 * 1024
SNIPPET_TIMEOUT_S = 60.0
BANNED = re.compile(r"\b[a-z-]+(st|nd|rd|th) session|\bissue #?[0-9]+", re.IGNORECASE)

# What a space fragment is merged over: it validates alone, compiles in one of its configurations (so a
# `finalists:` fragment with only Inductor options validates too) and runs on a CPU.
BASE_SPACE: dict[str, Any] = {
    "workload": {"name": "resnet50", "preset": "tiny"},
    "device": "cpu",
    "params": {"precision": ["default", "bf16"], "compile_mode": ["none", "default"]},
}
TUNED_BASE: dict[str, Any] = {"schema_version": 1, "workload": {"name": "resnet50", "preset": "tiny"}}
TUNED_KNOBS: dict[str, Any] = {
    "batch_size": 8,
    "precision": "bf16",
    "memory_format": "channels_last",
    "compile_mode": "none",
    "fused_optimizer": False,
}

_YAML = {"yaml", "yml"}
_SHELL = {"bash", "sh", "shell", "console"}
_PYTHON = {"python", "py", "python3"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_FILE_LINE = re.compile(r"^#\s*(?P<name>[A-Za-z0-9_][A-Za-z0-9_/-]*\.py)\s*$")
_GPU_LINE = re.compile(r"^#\s*needs a GPU\b", re.IGNORECASE)
_TUNED_FRAGMENT_LINE = re.compile(r"^#\s*tuned\.yaml\b")
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Za-z0-9]+)?$|[\[\]]|\.\.\.")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}
_REDIRECTIONS = {">", ">>", "<", ">&", "<&", "&>", ">|"}


# --- The pages and their blocks ------------------------------------------------------------------------------


def _pages() -> list[Path]:
    return [path for path in [README, *sorted(DOCS.rglob("*.md"))] if path.is_file()]


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page, the line of its opening fence (1-based), its language and its text."""

    page: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{_rel(self.page)}:{self.line}"

    @property
    def first_line(self) -> str:
        lines = self.text.splitlines()
        return lines[0].strip() if lines else ""

    @property
    def file_name(self) -> str | None:
        """The file this python block is (``# FILENAME.py`` first), or None for a snippet."""
        match = _FILE_LINE.match(self.first_line)
        return match["name"] if match and ".." not in match["name"] else None


def _blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[end])
            if closing:
                break
            line = lines[end]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            end += 1
        info = opening["info"].strip().split()
        lang = info[0].lower().strip("{}.") if info else ""
        blocks.append(Block(page, index + 1, lang, "\n".join(body) + ("\n" if body else "")))
        index = end + 1
    return blocks


def _all_blocks(langs: set[str]) -> list[Block]:
    return [block for page in _pages() for block in _blocks(page) if block.lang in langs]


def _page_files(block: Block, include_self: bool = False) -> dict[str, str]:
    """The page's file blocks before ``block`` (and ``block`` itself if asked): name -> text."""
    files: dict[str, str] = {}
    for other in _blocks(block.page):
        if other.lang in _PYTHON and other.file_name and (other.line < block.line or (include_self and other == block)):
            files[other.file_name] = other.text
    return files


def _write_files(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def _in_folder(folder: Path) -> Iterator[None]:
    """Work in ``folder`` as a command run there would (its modules importable), then forget its modules."""
    before, cwd = set(sys.modules), os.getcwd()
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != folder.resolve()]
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules.get(name), "__file__", None) or ""
            if module_file and Path(module_file).resolve().is_relative_to(folder.resolve()):
                del sys.modules[name]
        importlib.invalidate_caches()


def _ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


# --- 1. The reference is complete ----------------------------------------------------------------------------


def _in_backticks(name: str, text: str) -> bool:
    return f"`{name}`" in text


def _code_names() -> dict[str, list[str]]:
    """Every name the code accepts in a space, by kind, read from the code's own tables."""
    import autotune.kernels
    from autotune import workloads
    from autotune.expr import FUNCTIONS
    from autotune.knobs import KNOB_SPECS, inductor
    from autotune.space import validate, validate_params, validate_settings
    from autotune.space.settings import DEVICES, DIRECTIONS, METRICS, SAMPLERS

    sections = {
        "workload": validate_settings._WORKLOAD_KEYS,
        "objective": validate_settings._OBJECTIVE_KEYS,
        "budget": validate_settings._BUDGET_KEYS,
        "sampler": validate_settings._SAMPLER_KEYS,
        "finalists": validate_settings._FINALISTS_KEYS,
    }
    knob_values = [str(c) for spec in KNOB_SPECS.values() if spec.kind is str for c in spec.choices or ()]
    workload_params = [
        name for builtin in workloads.BUILTIN for name in workloads.workload_params(workloads.resolve(builtin))
    ]
    kernels, kernel_params = _shipped_kernels(autotune.kernels)
    return {
        "top-level keys": list(validate._TOP_KEYS),
        "section keys": [f"{section}.{key}" for section, keys in sections.items() for key in keys],
        "param spec keys": list(validate_params._PARAM_KEYS),
        "knobs": list(KNOB_SPECS),
        "knob values": knob_values,
        "built-in workloads": list(workloads.BUILTIN),
        "workload parameters": workload_params,
        "presets": list(
            dict.fromkeys(p for name in workloads.BUILTIN for p in workloads.presets(workloads.resolve(name)))
        ),
        "shipped kernels": kernels,
        "kernel params": kernel_params,
        "Inductor options": list(inductor.ALLOWED),
        "GEMM backends": list(inductor.GEMM_BACKENDS),
        "metrics": list(METRICS),
        "samplers": list(SAMPLERS),
        "devices": list(DEVICES),
        "directions": list(DIRECTIONS),
        "expression functions": list(FUNCTIONS),
    }


def _shipped_kernels(package: ModuleType) -> tuple[list[str], list[str]]:
    """The public tunable Triton kernels of ``autotune.kernels`` (import paths) and the params each adds."""
    import pkgutil

    from triton.runtime.autotuner import Autotuner

    from autotune.errors import AutotuneError
    from autotune.kernels.listing import load_kernel, wrapped

    paths: list[str] = []
    params: list[str] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or wrapped(obj, Autotuner) is None:
                continue
            with contextlib.suppress(AutotuneError):  # a kernel of one config: nothing a space could choose
                kernel = load_kernel(f"{module.__name__}:{name}")
                paths.append(kernel.path)
                params += [param.name for param in kernel.params()]
    return paths, params


@pytest.fixture(scope="module")
def code_names() -> dict[str, list[str]]:
    return _code_names()


_NAME_KINDS = [
    "top-level keys", "section keys", "param spec keys", "knobs", "knob values", "built-in workloads",
    "workload parameters", "presets", "shipped kernels", "kernel params", "Inductor options", "GEMM backends",
    "metrics", "samplers", "devices", "directions", "expression functions",
]  # fmt: skip


@pytest.mark.parametrize("kind", _NAME_KINDS)
def test_space_reference_names_every_one(kind: str, code_names: dict[str, list[str]]) -> None:
    """Every name of this kind that the code accepts appears in space.md, in backticks."""
    assert SPACE_MD.is_file(), f"{_rel(SPACE_MD)} is missing"
    text = SPACE_MD.read_text(encoding="utf-8")
    names = code_names[kind]
    assert names, f"the code has no {kind}: this test reads the wrong table"
    missing = [name for name in names if not _in_backticks(name, text)]
    assert not missing, f"{_rel(SPACE_MD)} does not document these {kind}: {', '.join(missing)}"


def test_cli_reference_names_every_command_and_option() -> None:
    from autotune.cli import cli

    if not CLI_MD.is_file():
        pytest.skip(f"no {_rel(CLI_MD)}")
    text = CLI_MD.read_text(encoding="utf-8")
    missing = [f"autotune {name}" for name in cli.commands if not _in_backticks(f"autotune {name}", text)]
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param, click.Option):
                missing += [f"{name} {opt}" for opt in [*param.opts, *param.secondary_opts] if f"`{opt}`" not in text]
    assert not missing, f"{_rel(CLI_MD)} does not document: {'; '.join(missing)}"


def _reference_script() -> ModuleType:
    """scripts/docs_reference.py, imported by path (scripts/ is not a package)."""
    name = "docs_reference"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_reference_is_generated_from_the_code() -> None:
    """space.md's generated tables and cli.md are what scripts/docs_reference.py makes of the code now."""
    stale: list[Path] = _reference_script().stale()
    assert not stale, (
        f"out of date: {', '.join(_rel(path) for path in stale)}; run python scripts/docs_reference.py "
        "(and describe any new name it asks for there)"
    )


# --- 2. YAML blocks --------------------------------------------------------------------------------------------


def _merged_space(fragment: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(BASE_SPACE)
    for key, value in fragment.items():
        if key == "params" and isinstance(value, dict):
            merged["params"] = {**merged["params"], **value}
        else:
            merged[key] = value
    return merged


def _validate_space(path: Path, folder: Path, where: str) -> list[str]:
    from autotune.space import SpaceError, load_space

    try:
        with _in_folder(folder):
            load_space(path)
    except SpaceError as exc:
        return [f"{where}: {problem.replace(str(path), path.name)}" for problem in exc.problems]
    return []


def _load_tuned(path: Path, folder: Path, where: str) -> list[str]:
    import autotune

    try:
        with _in_folder(folder), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a config measured elsewhere warns; it still loads
            autotune.load(path)
    except autotune.AutotuneError as exc:
        return [f"{where}: {str(exc).replace(str(path), path.name)}"]
    return []


def _check_yaml(block: Block, folder: Path) -> list[str]:
    try:
        data = yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        return [f"{block.where}: not valid YAML: {exc}"]
    if not isinstance(data, dict):
        return [f"{block.where}: expected a mapping (a space, a space fragment or a tuned config), got {data!r}"]
    _write_files(folder, _page_files(block))
    if "schema_version" in data:  # first: a whole tuned config names its workload too
        path = folder / "tuned.yaml"
        path.write_text(block.text, encoding="utf-8")
        return _load_tuned(path, folder, f"{block.where} (a tuned config)")
    if "workload" in data:
        path = folder / "space.yaml"
        path.write_text(block.text, encoding="utf-8")
        return _validate_space(path, folder, f"{block.where} (a whole space)")
    if _TUNED_FRAGMENT_LINE.match(block.first_line):
        path = folder / "tuned.yaml"
        path.write_text(yaml.safe_dump({**TUNED_BASE, **data}, sort_keys=False), encoding="utf-8")
        return _load_tuned(path, folder, f"{block.where} (a tuned-config fragment, over {TUNED_BASE})")
    path = folder / "fragment.yaml"
    path.write_text(yaml.safe_dump(_merged_space(data), sort_keys=False), encoding="utf-8")
    return _validate_space(path, folder, f"{block.where} (a space fragment, over the test's BASE_SPACE)")


@pytest.mark.parametrize("block", _all_blocks(_YAML), ids=_ids(_all_blocks(_YAML)))
def test_yaml_block_validates(block: Block, tmp_path: Path) -> None:
    problems = _check_yaml(block, tmp_path)
    assert not problems, "\n".join(problems)


# --- 3. Shell blocks -------------------------------------------------------------------------------------------


def _commands(text: str) -> Iterator[tuple[int, list[str]]]:
    """Each command of a shell block (offset of its line in the block, its words), comments dropped."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        start, line = index, lines[index]
        while line.rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            line = line.rstrip()[:-1] + " " + lines[index]
        index += 1
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, ""
            words = list(lexer)
        except ValueError as exc:
            yield start, ["#", f"cannot split the line: {exc}"]
            continue
        command: list[str] = []
        skip_next = False
        for word in words:
            if word.startswith("#"):
                break
            if skip_next:
                skip_next = False
            elif word in _REDIRECTIONS:
                skip_next = True
            elif word in _OPERATORS:
                if command:
                    yield start, command
                command = []
            else:
                command.append(word)
        if command:
            yield start, command


def _autotune_args(words: list[str]) -> list[str] | None:
    """The arguments after ``autotune`` (or ``python -m autotune``), or None for another command."""
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if words[:1] == ["autotune"]:
        return words[1:]
    if len(words) >= 3 and words[0] in ("python", "python3") and words[1:3] == ["-m", "autotune"]:
        return words[3:]
    return None


def _check_trial(ctx: click.Context, folder: Path) -> str | None:
    """``autotune trial``: the workload resolves, each ``-p`` is a knob or its parameter, with a valid value."""
    import torch

    from autotune.cli import _parse_assignments
    from autotune.errors import AutotuneError
    from autotune.trial.job import check_spec
    from autotune.trial.trialspec import TrialSpec

    params = ctx.params
    try:
        parsed = _parse_assignments(params["params"])
        spec = TrialSpec(workload=params["workload"], params=parsed, preset=params["preset"], device="cpu")
        with _in_folder(folder):
            check_spec(spec)
        if params["device"] != "auto":
            torch.device(params["device"])
    except (AutotuneError, RuntimeError) as exc:
        return str(exc)
    except Exception as exc:  # a page's module that fails on import
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_autotune(args: list[str], folder: Path) -> str | None:
    """What is wrong with ``autotune ARGS`` (parsed, not run), or None."""
    from autotune.cli import cli

    placeholders = [arg for arg in args if _PLACEHOLDER.search(arg)]
    if placeholders:
        return f"placeholder(s) {', '.join(placeholders)}: write a real command here, a synopsis in a ```text block"
    if not args:
        return "no command after autotune"
    if args[0] in ("-h", "--help", "--version"):
        return None
    command = cli.commands.get(args[0])
    if command is None:
        return f"no command {args[0]!r} (commands: {', '.join(cli.commands)})"
    rest = args[1:]
    if "-h" in rest or "--help" in rest:
        return None
    try:
        ctx = command.make_context(f"autotune {args[0]}", list(rest))
    except click.ClickException as exc:
        return exc.format_message()
    missing = [arg for arg in rest if arg.startswith("search_spaces/") and not any(REPO.glob(arg))]
    if missing:
        return f"no such file in the repository: {', '.join(missing)}"
    return _check_trial(ctx, folder) if args[0] == "trial" else None


@pytest.mark.parametrize("block", _all_blocks(_SHELL), ids=_ids(_all_blocks(_SHELL)))
def test_shell_block_commands_parse(block: Block, tmp_path: Path) -> None:
    _write_files(tmp_path, _page_files(block))
    problems = []
    for offset, words in _commands(block.text):
        if words[:1] == ["#"]:
            problems.append(f"{_rel(block.page)}:{block.line + offset + 1}: {words[1]}")
            continue
        args = _autotune_args(words)
        if args is None:
            continue
        problem = _check_autotune(args, tmp_path)
        if problem:
            problems.append(f"{_rel(block.page)}:{block.line + offset + 1}: autotune {shlex.join(args)}: {problem}")
    assert not problems, "\n".join(problems)


# --- 4. Python blocks ------------------------------------------------------------------------------------------

_BUILTINS = set(dir(builtins)) | {"__file__", "__builtins__", "__annotations__"}


def _unbound_names(tree_source: str, filename: str) -> list[str]:
    """Names the code uses that nothing in it binds and that are not builtins."""
    table = symtable.symtable(tree_source, filename, "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    unbound: set[str] = set()

    def declared_globals(scope: symtable.SymbolTable) -> None:
        for symbol in scope.get_symbols():
            if symbol.is_declared_global() and symbol.is_assigned():
                bound.add(symbol.get_name())
        for child in scope.get_children():
            declared_globals(child)

    def walk(scope: symtable.SymbolTable, top: bool) -> None:
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and (top or symbol.is_global()) and symbol.get_name() not in bound:
                unbound.add(symbol.get_name())
        for child in scope.get_children():
            walk(child, False)

    declared_globals(table)
    walk(table, True)
    return sorted(unbound - _BUILTINS)


def _has_submodule(module: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except (ImportError, ValueError):  # ``module`` is not a package
        return False


def _unresolved_imports(tree: ast.Module, first_line: int) -> list[str]:
    """Imports that do not resolve and attributes of imported modules that do not exist (in the current folder), each
    as ``LINE: problem`` with the page's line numbers (the block's first line is ``first_line``)."""
    problems: list[str] = []
    modules: dict[str, ModuleType] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                try:
                    module = importlib.import_module(alias.name)
                except Exception as exc:
                    problems.append(f"{first_line + node.lineno - 1}: import {alias.name}: {type(exc).__name__}: {exc}")
                    continue
                if alias.asname:
                    modules[alias.asname] = module
                else:
                    top = alias.name.partition(".")[0]
                    modules[top] = sys.modules[top]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            try:
                module = importlib.import_module(node.module)
            except Exception as exc:
                problems.append(f"{first_line + node.lineno - 1}: from {node.module}: {type(exc).__name__}: {exc}")
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                if not hasattr(module, alias.name) and not _has_submodule(node.module, alias.name):
                    problems.append(f"{first_line + node.lineno - 1}: {node.module} has no {alias.name!r}")
                elif isinstance(getattr(module, alias.name, None), ModuleType):
                    modules[alias.asname or alias.name] = getattr(module, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            module = modules[node.value.id]
            if not hasattr(module, node.attr) and not _has_submodule(module.__name__, node.attr):
                problems.append(f"{first_line + node.lineno - 1}: {module.__name__} has no {node.attr!r}")
    return problems


def _tuned_yaml() -> str:
    from autotune.tuned.file import current_env

    env = {key: value for key, value in current_env().items() if value is not None}
    data = {**TUNED_BASE, "knobs": TUNED_KNOBS, "provenance": {"study": "docs", "trial": 0, "env": env}}
    return yaml.safe_dump(data, sort_keys=False)


def _run_snippet(block: Block, folder: Path) -> list[str]:
    script = folder / f"_snippet_line{block.line}.py"
    script.write_text(block.text, encoding="utf-8")
    (folder / "tuned.yaml").write_text(_tuned_yaml(), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        command = [sys.executable, script.name]
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [f"{block.where}: ran past {SNIPPET_TIMEOUT_S:.0f} s (shorten it, or mark it `# needs a GPU`)"]
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        return [f"{block.where}: the snippet exited {done.returncode}:\n{tail}"]
    return []


def _check_python(block: Block, folder: Path) -> list[str]:
    where = block.where
    try:
        tree = ast.parse(block.text, filename=where)
        compile(tree, where, "exec")
    except SyntaxError as exc:
        return [f"{_rel(block.page)}:{block.line + (exc.lineno or 1)}: does not compile: {exc.msg}"]
    star = any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in ast.walk(tree))
    unbound = [] if star else _unbound_names(block.text, where)
    if unbound:
        return [f"{where}: uses names it never binds: {', '.join(unbound)} (define or import them in the block)"]
    name = block.file_name
    _write_files(folder, _page_files(block, include_self=name is not None))
    if name is not None:
        module = name.removesuffix(".py").replace("/", ".")
        try:
            with _in_folder(folder):
                importlib.import_module(module)
        except Exception as exc:
            return [f"{where}: the file {name} does not import: {type(exc).__name__}: {exc}"]
        return []
    if _GPU_LINE.match(block.first_line):
        with _in_folder(folder):
            return [f"{_rel(block.page)}:{problem}" for problem in _unresolved_imports(tree, block.line + 1)]
    return _run_snippet(block, folder)


@pytest.mark.parametrize("block", _all_blocks(_PYTHON), ids=_ids(_all_blocks(_PYTHON)))
def test_python_block_works(block: Block, tmp_path: Path) -> None:
    problems = _check_python(block, tmp_path)
    assert not problems, "\n".join(problems)


# --- 5. Links --------------------------------------------------------------------------------------------------

_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
_REFERENCE = re.compile(r"^ {0,3}\[(?!\^)[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"'](?P<target>[^\"']+)[\"']", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"<[a-z]+\b[^>]*?\b(?:id|name)\s*=\s*[\"'](?P<anchor>[^\"']+)[\"']", re.IGNORECASE)
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def _prose_lines(text: str) -> list[str]:
    """The page's lines with fenced code blanked out (line numbers kept)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match["fence"]
            out.append("")
        elif fence is not None:
            if re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", line):
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def _without_code_spans(line: str) -> str:
    return re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: " " * len(m[0]), line)


def _heading_text(raw: str) -> str:
    """A heading as GitHub renders it to text: code spans, links, images and emphasis reduced to their text."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("*", "")


def _slug(text: str) -> str:
    """GitHub's anchor for a heading (github-slugger): lower case, punctuation but - and _ dropped, spaces -> -."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    lines = _prose_lines(page.read_text(encoding="utf-8"))
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    for index, line in enumerate(lines):
        heading: str | None = None
        atx = _ATX.match(line)
        if atx:
            heading = atx["text"]
        elif (
            index + 1 < len(lines)
            and _SETEXT.match(lines[index + 1])
            and line.strip()
            and not line.lstrip().startswith(("|", "-", "*", ">"))
            and (index == 0 or not lines[index - 1].strip() or _ATX.match(lines[index - 1]) is None)
        ):
            heading = line.strip()
        if heading is not None:
            slug = _slug(_heading_text(heading))
            anchors.add(slug if slug not in counts else f"{slug}-{counts[slug]}")
            counts[slug] = counts.get(slug, 0) + 1
        anchors.update(match["anchor"] for match in _HTML_ANCHOR.finditer(line))
    return anchors


def _links(page: Path) -> Iterator[tuple[int, str]]:
    lines = _prose_lines(page.read_text(encoding="utf-8"))
    for number, line in enumerate(lines, start=1):
        prose = _without_code_spans(line)
        for pattern in (_INLINE_LINK, _HTML_LINK):
            for match in pattern.finditer(prose):
                yield number, match["target"]
    for match in _REFERENCE.finditer("\n".join(lines)):
        yield "\n".join(lines)[: match.start()].count("\n") + 1, match["target"]


def _link_problem(page: Path, target: str) -> str | None:
    if not target or _SCHEME.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if not path_part:
        resolved = page
    elif path_part.startswith("/"):
        resolved = REPO / path_part.lstrip("/")
    else:
        resolved = (page.parent / path_part).resolve()
    if not resolved.exists():
        return f"{target}: no such file ({_rel(resolved) if resolved.is_relative_to(REPO) else resolved})"
    if not resolved.resolve().is_relative_to(REPO):
        return f"{target}: outside the repository"
    if anchor and resolved.is_file() and resolved.suffix == ".md":
        anchors = _anchors(resolved)
        if unquote(anchor) not in anchors:
            return f"{target}: {_rel(resolved)} has no heading with the anchor #{anchor}"
    return None


@pytest.mark.parametrize("page", _pages(), ids=[_rel(page) for page in _pages()])
def test_relative_links_resolve(page: Path) -> None:
    problems = [
        f"{_rel(page)}:{line}: {problem}"
        for line, target in _links(page)
        if (problem := _link_problem(page, target)) is not None
    ]
    assert not problems, "\n".join(problems)


# --- 6. Size and wording ---------------------------------------------------------------------------------------


def test_readme_is_at_most_15_kib() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes, over {README_MAX_BYTES}: move detail into docs/"


def _text_files() -> list[Path]:
    files = [README, *sorted(path for path in DOCS.rglob("*") if path.is_file())]
    texts = []
    for path in files:
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # an image
            continue
        texts.append(path)
    return texts


@pytest.mark.parametrize("path", _text_files(), ids=[_rel(path) for path in _text_files()])
def test_no_session_or_issue_numbers(path: Path) -> None:
    problems = [
        f"{_rel(path)}:{number}: {match[0]!r}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        for match in BANNED.finditer(line)
    ]
    assert not problems, "say what was measured, not when or in which thread:\n" + "\n".join(problems)
