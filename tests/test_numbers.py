"""One number formatter for every line autotune prints: thousands separators, four significant digits below 1,000,
never e-notation."""

from __future__ import annotations

import pytest

from autotune.numbers import duration, minutes, number, quantity, ratio, share


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (365_515.4, "365,515"),
        (3.655e5, "365,500"),
        (1.2e9, "1,200,000,000"),
        (999.6, "1,000"),
        (999.4, "999.4"),
        (8.8841, "8.884"),
        (59.77, "59.77"),
        (0.061234, "0.06123"),
        (1e-7, "0.0000001"),
        (42.0, "42"),
        (0.0, "0"),
        (-1234.5, "-1,234"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
    ],
)
def test_number_reads_the_same_everywhere(value: float, text: str) -> None:
    assert number(value) == text
    assert "e+" not in number(value) and "e-" not in number(value)


def test_quantities_ratios_shares_and_times() -> None:
    assert quantity(365_515.0, "tokens/s") == "365,515 tokens/s"
    assert quantity(8.884) == "8.884"
    assert ratio(6.9312) == "6.93x" and share(0.334) == "33%"
    assert [duration(s) for s in (-1, 42, 425, 11_520)] == ["0s", "42s", "7m05s", "3h12m"]
    assert minutes(744.0) == "12.4 min"
