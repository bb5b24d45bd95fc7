"""The reference reading of a log file: its raw lines, each cleaned once and fed in order.

A line that holds a NUL byte (no text log writes one: a stretch of the file never written)
is skipped, keeping every other line's index, and a ScrapeError that is not fatal names it
after the items read, as every reader of harness.measure.scrapers.common does.
"""
from harness.measure.records import ScrapeError
from harness.measure.scrapers import common

NUL_REASON = common.NUL_SKIPPED


def fed_line_by_line(scraper, path):
    """Every item of the file's lines fed to ``scraper`` one by one."""
    with open(path, "rb") as f:
        data = f.read()
    raws = data.split(b"\n")
    if data.endswith(b"\n"):
        raws.pop()
    skipped = [k for k, raw in enumerate(raws) if b"\0" in raw]
    raws = [b"" if b"\0" in raw else raw for raw in raws]
    return list(common.run_lines(scraper, raws)) + [ScrapeError(k, NUL_REASON, "", False) for k in skipped]
