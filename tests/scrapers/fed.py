"""The reference reading of a log file: its raw lines, each cleaned once and fed in order.

Reading stops at the first line that holds a NUL byte (no text log does) with a fatal
ScrapeError at that line, as every reader of harness.measure.scrapers.common does.
"""
from harness.measure.records import ScrapeError
from harness.measure.scrapers import common

NUL_REASON = "a NUL byte: the file is not a text log"


def fed_line_by_line(scraper, path):
    """Every item of the file's lines fed to ``scraper`` one by one."""
    with open(path, "rb") as f:
        data = f.read()
    raws = data.split(b"\n")
    if data.endswith(b"\n"):
        raws.pop()
    for k, raw in enumerate(raws):
        if b"\0" in raw:
            return list(common.run_lines(scraper, raws[:k])) + [ScrapeError(k, NUL_REASON, "", True)]
    return list(common.run_lines(scraper, raws))
