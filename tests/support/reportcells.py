"""A measured cell read back from `detbench report`'s Markdown: the figures, whatever digits they
print with (harness.report.digits) and whatever flag marks follow them."""
import re

MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def throughput_cell(report, model):
    """(images/s, iteration ms) of `model`'s row in a throughput table (its first column), or None."""
    found = re.search(r"^\|%s\|([\d.]+)\(([\d.]+)ms\)[%s]*\|" % (re.escape(model), MARKS), report, re.M)
    return (float(found.group(1)), float(found.group(2))) if found else None


def iteration_cell(report, model):
    """(iteration ms, data ms) of `model`'s row in a single-device iteration-time table, or None."""
    found = re.search(r"^\|%s\|([\d.]+)ms\(([\d.]+)ms\)[%s]*\|" % (re.escape(model), MARKS), report, re.M)
    return (float(found.group(1)), float(found.group(2))) if found else None
