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


def kind_text(kind: str) -> str:
    """The short phrase for a figure kind (harness.measure.records.FIGURE_TEXT), else the kind's name."""
    return records.FIGURE_TEXT.get(kind, kind)


def column_text(framework: str, details: Iterable[Detail]) -> str:
    """What the figures of one column are, from its entries' details (model.Detail: kinds,
    windows, nominal_window); '' when the column has no finished cell."""
    kinds: List[Optional[str]] = []
    widened: List[List[int]] = []
    for d in details:
        for kind in d.kinds:
            if kind not in kinds:
                kinds.append(kind)
        nominal = d.nominal_window
        for w in d.windows:
            if nominal and list(w) != list(nominal) and list(w) not in widened:
                widened.append(list(w))
    if not kinds:
        return ""
    texts: List[str] = []
    for kind in kinds:
        if kind is None:  # stored before figure kinds: what the adapter says its log means
            spec = frameworks.FRAMEWORKS.get(framework)
            kind_phrase = spec.figures if spec else "not recorded"
        else:
            kind_phrase = kind_text(kind)
        if kind_phrase not in texts:
            texts.append(kind_phrase)
    text = " / ".join(texts)
    if widened:
        text += " (window%s widened to %s)" % (
            "s" if len(widened) > 1 else "",
            ", ".join("%d..%d" % tuple(w) for w in widened),
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
