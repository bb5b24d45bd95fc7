"""How exact each column's figure is, against the one definition of an iteration's time.

An iteration's time is the wall time from the end of the previous iteration to the end of
this one. Each trial stores the kind of figure its framework's log gave (figure_kind) and
the iterations that figure covers (window_json); a cell carries the kinds and windows of
its finished repeats, and a table prints one line saying, per column, what its figures are.
An approximate figure raises the window-approximate flag (harness.measure.flags).
"""

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from harness import frameworks
from harness.measure import records
from harness.report.model import Column, Detail, Entry


def kind_text(kind: str, exact: bool = True) -> str:
    """The short phrase for a figure kind (harness.measure.records.FIGURE_TEXT), else the kind's
    name; for a figure of an exact kind that is not exact (its printed digits bound it to more
    than 0.1%, or it covers another window than asked), the phrase says so instead of "exact"."""
    text = records.FIGURE_TEXT.get(kind, kind)
    if not exact and text.startswith(EXACT_PREFIX):
        return NOT_EXACT_PREFIX + text[len(EXACT_PREFIX) :]
    return text


EXACT_PREFIX = "exact: "
NOT_EXACT_PREFIX = "not exact (bounded to over 0.1% by the printed digits, or over another window): "


def window_change(window: Sequence[int], nominal: Sequence[int]) -> str:
    """How a figure's window differs from the one asked for: "widened" (it holds it and more),
    "narrowed" (it lies inside it), else "moved"."""
    if window[0] <= nominal[0] and window[1] >= nominal[1]:
        return "widened"
    if window[0] >= nominal[0] and window[1] <= nominal[1]:
        return "narrowed"
    return "moved"


def column_text(framework: str, details: Iterable[Detail]) -> str:
    """What the figures of one column are, from its entries' details (model.Detail: kinds,
    windows, nominal_window); '' when the column has no finished cell."""
    kinds: List[Tuple[Optional[str], bool]] = []
    changed: Dict[str, List[List[int]]] = {}  # "widened", "narrowed", "moved" -> windows
    for d in details:
        for kind in d.kinds:
            entry = (kind, kind not in d.inexact_kinds)
            if entry not in kinds:
                kinds.append(entry)
        nominal = d.nominal_window
        for w in d.windows:
            if nominal and list(w) != list(nominal):
                seen = changed.setdefault(window_change(w, nominal), [])
                if list(w) not in seen:
                    seen.append(list(w))
    if not kinds:
        return ""
    texts: List[str] = []
    for kind, exact in kinds:
        if kind is None:  # stored before figure kinds: what the adapter says its log means
            spec = frameworks.FRAMEWORKS.get(framework)
            kind_phrase = spec.figures if spec else "not recorded"
        else:
            kind_phrase = kind_text(kind, exact)
        if kind_phrase not in texts:
            texts.append(kind_phrase)
    text = " / ".join(texts)
    for how in ("widened", "narrowed", "moved"):
        if how in changed:
            text += " (window%s %s to %s)" % (
                "s" if len(changed[how]) > 1 else "",
                how,
                ", ".join("%d..%d" % tuple(w) for w in changed[how]),
            )
    return text


def table_line(columns: Sequence[Column], entries: Mapping[Tuple[str, str], Entry], models: Sequence[str]) -> List[str]:
    """'Figures: a, b: exact per iteration; c: exact window mean from cumulative averages
    (window widened to 19..119).' for one table, columns with the same text joined."""
    groups: Dict[str, List[str]] = {}
    for col in columns:
        details = [d for d in (entries[(m, col.key)].detail for m in models if (m, col.key) in entries) if d]
        text = column_text(col.key, details)
        if text:
            groups.setdefault(text, []).append(col.title)
    if not groups:
        return []
    return ["Figures: %s." % "; ".join("%s: %s" % (", ".join(titles), text) for text, titles in groups.items())]
