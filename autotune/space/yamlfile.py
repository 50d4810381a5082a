"""Reading a space's YAML file: its text and data, with duplicate keys and syntax errors reported.

Plain PyYAML keeps the last of two equal keys silently; this loader records them so that a
repeated param is reported, not quietly dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autotune.space.problems import _Report

__all__: list[str] = []


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that records duplicate keys (plain YAML keeps the last one silently)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int]] = []


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            if key_node.value in seen:
                loader.duplicates.append((key_node.value, key_node.start_mark.line + 1))
            seen.add(key_node.value)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path, report: _Report) -> tuple[str, Any]:
    """The file's text and parsed YAML; a missing file or a syntax error is one problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        report.add("", "file not found")
        return "", None
    except (OSError, UnicodeDecodeError) as exc:
        report.add("", f"cannot read the file ({exc})")
        return "", None
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "YAML"
        report.add(line, f"invalid YAML: {getattr(exc, 'problem', None) or exc}")
        return text, None
    finally:
        loader.dispose()
    for key, number in loader.duplicates:
        report.add(f"line {number}", f"duplicate key {key!r} (YAML would keep only the last one)")
    return text, data
