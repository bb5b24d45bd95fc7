"""Render tables as Markdown in the form of SimpleDet's BENCHMARK.md."""
from harness.spec import catalog
from harness.report.model import FLAG_TEXT, ITERATION, THROUGHPUT

MARKS = "¹²³⁴⁵⁶⁷⁸⁹"

INTRO = {
    THROUGHPUT: "Throughput in **images/s**, iteration time in parentheses.",
    ITERATION: "Iteration time on a single device, **data time** in parentheses.",
}


def cell_text(entry, form):
    if entry is None:
        return "-"
    if entry.na is not None:
        return "NA"
    if form == THROUGHPUT:
        if entry.throughput is None or entry.iteration_ms is None:
            return "NA"
        return "%.1f(%.0fms)" % (entry.throughput, entry.iteration_ms)
    if entry.iteration_ms is None:
        return "NA"
    data = "?" if entry.data_ms is None else "%.0f" % entry.data_ms
    return "%.0fms(%sms)" % (entry.iteration_ms, data)


def render_table(table):
    notes = []          # footnote texts in order of first use

    def mark(text):
        if text not in notes:
            notes.append(text)
        i = notes.index(text)
        return MARKS[i] if i < len(MARKS) else "[%d]" % (i + 1)

    lines = ["#### %s" % table.title, INTRO[table.form], "",
             "|model|%s|" % "|".join(c.title for c in table.columns),
             "|-----|%s|" % "|".join("-" * max(3, len(c.title)) for c in table.columns)]
    for model in table.models:
        cells = []
        for col in table.columns:
            entry = table.entries.get((model, col.key))
            text = cell_text(entry, table.form)
            if entry is not None and entry.na:
                text += mark("NA: " + entry.na)
            elif entry is not None:
                text += "".join(mark(FLAG_TEXT.get(f, f)) for f in entry.flags)
            cells.append(text)
        lines.append("|%s|%s|" % (catalog.model_title(model), "|".join(cells)))
    footer = ["%s %s" % (MARKS[i] if i < len(MARKS) else "[%d]" % (i + 1), text)
              for i, text in enumerate(notes)]
    extra = footer + list(table.notes)
    if extra:
        lines.append("")
        lines += [line + "  " if i < len(extra) - 1 else line for i, line in enumerate(extra)]
    return "\n".join(lines) + "\n"


def render(tables, heading=None):
    parts = []
    if heading:
        parts.append("### %s\n" % heading)
    parts += [render_table(t) for t in tables]
    return "\n".join(parts)
