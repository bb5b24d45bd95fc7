"""A rendered figure keeps three significant digits and its whole integer part, so cells a few
percent apart never print alike, whatever their scale."""
import pytest

from harness.report.digits import figure


@pytest.mark.parametrize("value, text", [
    (0.8071, "0.807"),    # a CPU cell: "%.1f" printed 0.8, the same as a cell at 0.76
    (0.0996, "0.0996"),
    (1.605, "1.60"),      # trailing zeros stay: they say how many digits were kept
    (40.0, "40.0"),
    (55.5, "55.5"),
    (288.0, "288"),
    (2478.4, "2478"),     # more than three integer digits: all kept, no decimals
    (9.996, "10.0"),      # rounding up to a power of ten keeps three digits, not four
    (99.96, "100"),
    (0.0, "0"),
])
def test_three_significant_digits_and_the_whole_integer_part(value, text):
    assert figure(value) == text


def test_cells_one_percent_apart_print_apart_at_every_scale():
    for scale in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0):
        for base in (1.0, 1.5, 2.5, 5.0, 9.8):
            low = base * scale
            assert figure(low) != figure(low * 1.01), low
