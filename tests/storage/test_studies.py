"""How autotune keeps its records on Optuna storages: the parts not covered through the sweep."""

from __future__ import annotations

import pytest

from autotune.storage.studies import redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///autotune.db", "sqlite:///autotune.db"),
        ("postgresql://u:p%40ss@h/db", "postgresql://u@h/db"),
        ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
        ("mysql://h/db?user=u&password=x&ssl=1", "mysql://h/db?user=u&ssl=1"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
