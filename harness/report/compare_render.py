"""The regression gate's verdicts as a reader sees them: a fixed-width table for the terminal,
a Markdown summary for a pull request or a job summary, and JUnit XML for a CI test view.

Each renderer is a function of one `harness.results.compare.Comparison` alone and returns text.
"""

from typing import List, Optional, Tuple

from harness.results.compare import (
    IMPROVEMENT,
    MISSING_BASELINE,
    MISSING_CANDIDATE,
    NOT_COMPARABLE,
    POSSIBLE,
    REGRESSION,
    VERDICTS,
    CellResult,
    Comparison,
)

COLUMNS = ("cell", "baseline", "candidate", "ratio", "95% CI of ratio", "p", "verdict")


def _num(value: Optional[float], fmt: str = "%.2f") -> str:
    return "-" if value is None else fmt % value


def row_cells(r: CellResult) -> Tuple[str, ...]:
    """The table's cells of one cell's verdict, in COLUMNS order."""
    change = "" if r.ratio is None else " (%+.1f%%)" % ((r.ratio - 1) * 100)
    ci = "-" if r.ci is None else "%.3f..%.3f" % r.ci
    return (
        r.key,
        _num(r.baseline_median),
        _num(r.candidate_median),
        _num(r.ratio, "%.3f") + change,
        ci,
        _num(r.p, "%.2g"),
        r.verdict,
    )


def headline(comparison: Comparison) -> str:
    """PASS or FAIL, the count of each verdict, both runs and the rule, on one line."""
    counts = ["%d %s" % (comparison.count(v), v) for v in VERDICTS if comparison.count(v)]
    rule = comparison.rule
    state = "FAIL" if comparison.exit_code() else "PASS"
    return "%s: %s (baseline %s, candidate %s; %s, threshold %g%%, alpha %g)" % (
        state,
        ", ".join(counts) or "no cells",
        comparison.baseline_run,
        comparison.candidate_run,
        rule.metric_text(),
        rule.threshold * 100,
        rule.alpha,
    )


def text(comparison: Comparison) -> str:
    """A fixed-width table for the terminal, notes under it."""
    rows = [COLUMNS] + [row_cells(r) for r in comparison.cells]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += _notes(comparison, "  ")
    return headline(comparison) + "\n\n" + "\n".join(lines) + "\n"


def _notes(comparison: Comparison, indent: str) -> List[str]:
    out = [indent + n for n in comparison.notes]
    for r in comparison.cells:
        out += ["%s%s: %s" % (indent, r.key, n) for n in r.notes]
    return out


def _md(value: str) -> str:
    return value.replace("|", "\\|").replace("<", "&lt;")


def markdown(comparison: Comparison) -> str:
    """A summary fit for a pull request or a GitHub job summary."""
    icon = {REGRESSION: "❌ ", POSSIBLE: "⚠️ ", IMPROVEMENT: "✅ "}
    title = "regression" if comparison.regressed else "FAIL (strict)" if comparison.exit_code() else "no regression"
    out = [
        "## detbench compare: %s" % title,
        "",
        _md(headline(comparison)),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in comparison.cells:
        cells = list(row_cells(r))
        cells[-1] = icon.get(r.verdict, "") + cells[-1]
        out.append("| " + " | ".join(_md(c) for c in cells) + " |")
    notes = _notes(comparison, "- ")
    if notes:
        out += ["", "Notes:", ""] + [_md(n) for n in notes]
    rule = comparison.rule
    out += [
        "",
        "%s (median over repeats). A regression needs a median %s of at least "
        "%g%% and a one-sided Mann-Whitney U p < %g; one of the two alone is a possible regression."
        % (
            "Latency in ms" if rule.latency else "Throughput in images/s",
            "rise" if rule.latency else "drop",
            rule.threshold * 100,
            rule.alpha,
        ),
    ]
    return "\n".join(out) + "\n"


def junit(comparison: Comparison) -> str:
    """JUnit XML: one testcase per cell; regressions fail, cells that cannot be judged are skipped."""
    import xml.etree.ElementTree as ET

    suite = ET.Element(
        "testsuite",
        name="detbench compare",
        tests=str(len(comparison.cells)),
        failures=str(comparison.count(REGRESSION)),
        errors="0",
        skipped=str(
            sum(1 for r in comparison.cells if r.verdict in (MISSING_BASELINE, MISSING_CANDIDATE, NOT_COMPARABLE))
        ),
    )
    for r in comparison.cells:
        framework = r.key.split("/", 1)[0]
        case = ET.SubElement(suite, "testcase", classname="detbench.%s" % framework, name=r.key)
        message = "%s: %s -> %s %s, ratio %s, p %s" % (
            r.verdict,
            _num(r.baseline_median),
            _num(r.candidate_median),
            "ms" if r.lower_is_better else "images/s",
            _num(r.ratio, "%.3f"),
            _num(r.p, "%.2g"),
        )
        if r.verdict == REGRESSION:
            ET.SubElement(case, "failure", message=message, type="regression").text = "\n".join(r.notes)
        elif r.verdict in (MISSING_BASELINE, MISSING_CANDIDATE, NOT_COMPARABLE):
            ET.SubElement(case, "skipped", message="%s: %s" % (r.verdict, "; ".join(r.notes)))
        ET.SubElement(case, "system-out").text = message + ("\n" + "\n".join(r.notes) if r.notes else "")
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
