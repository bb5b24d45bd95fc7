"""How many digits a rendered figure keeps: three significant ones, the whole number always.

A fixed count of decimals blurs the small figures (a CPU cell at 0.807 images/s and one at
0.762 both read 0.8) and pads the large ones; three significant digits tell apart any two
figures more than 1% apart, at every scale: 0.807, 1.61, 40.0, 288, 1256 (a figure of 1000
or more keeps its integer digits and gets no decimals)."""

import math

SIGNIFICANT = 3


def figure(value: float) -> str:
    """`value` with SIGNIFICANT significant digits, never rounding its integer part."""
    if value == 0 or not math.isfinite(value):
        return "%.0f" % value if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, SIGNIFICANT - 1 - magnitude)
    text = "%.*f" % (decimals, value)
    if decimals and abs(float(text)) >= 10 ** (magnitude + 1):  # rounded up a power of ten: 9.996 -> 10.0
        text = "%.*f" % (decimals - 1, value)
    return text
