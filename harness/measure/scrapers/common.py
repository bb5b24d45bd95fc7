"""Helpers shared by the log scrapers.

Every scraper is a small class with a ``feed(line, index)`` method that turns one
cleaned log line into an IterationRecord, a ScrapeError or None. The drivers here
clean lines (ANSI colours, carriage-return redraws, launcher rank prefixes), shield
the caller from any exception, drop duplicated iterations, and offer a fast path
for files: whole chunks are matched with one ``finditer`` when the chunk is plain
enough that doing so gives exactly what line-by-line feeding would, or, for the
formats it knows, through the compiled scanner ``_fastscan`` when the install built it.
That scanner cleans lines the same way and hands every line it cannot read exactly as
``feed`` would back to ``feed``.
"""
import gc
import re
from typing import Iterable, Iterator, List, Optional, Tuple, Union

from harness.measure.records import IterationRecord, ScrapeError

try:  # harness/measure/scrapers/_fastscan.c, built by `pip install` when a C compiler is there
    from harness.measure.scrapers import _fastscan
except ImportError:  # not built: the pure-Python paths give the same items
    _fastscan = None

Item = Union[IterationRecord, ScrapeError]

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# Prefixes that launchers put before each line of a rank: torchrun --tee
# ("[default1]:", "[rank1]:"), srun --label ("1: "), mpirun --tag-output ("[1,1]<stdout>:").
RANK_RE = re.compile(r"(?:\[(?:rank|default)?(\d+)\]:|(\d+): |\[\d+,(\d+)\]<std(?:out|err)>:)")
# The same prefixes after a newline: starts with a literal, so a chunk is scanned fast.
RANK_AFTER_NL_RE = re.compile(r"\n" + RANK_RE.pattern)
# A line that a JSON-reading feed() takes for JSON: "{" after what str.lstrip() removes.
JSON_AT_START_RE = re.compile(r"[^\S\n]*\{")
JSON_AFTER_NL_RE = re.compile(r"\n[^\S\n]*\{")
ERROR_TEXT_MAX = 200
CHUNK_SIZE = 1 << 22


def make_error(index: int, reason: str, text: str) -> ScrapeError:
    """Return a ScrapeError for line ``index``, its text cut to 200 characters."""
    return ScrapeError(index, reason, text[:ERROR_TEXT_MAX])


def clean_line(line) -> Optional[str]:
    """Return the text of one log line as rank 0 printed it, or None for other ranks.

    Accepts str or bytes (decoded as UTF-8, bad bytes replaced). Drops the line end,
    keeps the last segment after a carriage return (progress-bar redraws), removes
    ANSI colour codes and strips a launcher's rank prefix.
    """
    if line.__class__ is not str:
        if isinstance(line, (bytes, bytearray)):
            line = bytes(line).decode("utf-8", "replace")
        else:
            line = str(line)
    if line.endswith("\n"):
        line = line[:-1]
    if "\r" in line:
        line = line.rstrip("\r")
        line = line[line.rfind("\r") + 1:]
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if line and line[0] in "[0123456789":
        m = RANK_RE.match(line)
        if m is not None:
            rank = m.group(1) or m.group(2) or m.group(3)
            if int(rank) != 0:
                return None
            line = line[m.end():]
    return line


def _cleaned(raw) -> Optional[str]:
    """clean_line(raw), or None (the line is skipped) where cleaning fails: int() refuses
    a rank of more than 4300 digits."""
    try:
        return clean_line(raw)
    except Exception:
        return None


def has_json_line(chunk: str) -> bool:
    """Whether some line of the chunk starts with '{' once leading whitespace is gone."""
    return (JSON_AT_START_RE.match(chunk) is not None
            or JSON_AFTER_NL_RE.search(chunk) is not None)


def read_lines(path) -> Iterator[str]:
    """Stream a file line by line (binary read, UTF-8 with replacement), cleaned.

    Lines printed by ranks other than 0 come out as empty strings so that the
    index of every line still matches its position in the file.
    """
    with open(path, "rb") as f:
        for raw in f:
            text = _cleaned(raw)
            yield "" if text is None else text


def read_blocks(path, size: int = CHUNK_SIZE) -> Iterator[Tuple[bytes, int]]:
    """Yield (block, end) where block[:end] is a run of whole lines of about ``size`` bytes.

    Each run but the last ends with '\\n'; the last one lacks it when the file does.
    Never holds more than one block in memory.
    """
    rest = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(size)
            if not block:
                break
            if rest:
                block = rest + block
            end = block.rfind(b"\n") + 1
            if end == 0:
                rest = block
                continue
            rest = block[end:]
            yield block, end
    if rest:
        yield rest, len(rest)


def read_chunks(path, size: int = CHUNK_SIZE) -> Iterator[Tuple[int, str]]:
    """Yield (index of first line, text) for runs of whole lines of about ``size`` bytes.

    The text holds complete lines joined by '\\n' (the last one may lack it only at
    the end of the file). Never holds more than one chunk in memory.
    """
    first = 0
    for block, end in read_blocks(path, size):
        text = (block if end == len(block) else block[:end]).decode("utf-8", "replace")
        yield first, text
        first += text.count("\n")


_tuple_new = tuple.__new__


def new_record(iteration, line, time_s, data_time_s, span, kind, images_per_s=None,
               images=None, memory_mb=None, loss=None) -> IterationRecord:
    """Build an IterationRecord without the keyword handling of its constructor."""
    return _tuple_new(IterationRecord, (iteration, line, time_s, data_time_s, span, kind,
                                        images_per_s, images, memory_mb, loss))


def to_float(text: str) -> float:
    """float() that also reads 'nan', 'inf' and trailing units like '3189M'."""
    return float(text.rstrip("M,s"))


def field_after(text: str, label: str, start: int = 0, end: int = -1) -> Optional[str]:
    """The token after ``label`` in the line of ``text`` holding ``start``, or None.

    The search stops at ``end`` when given, else at the end of that line; the token
    ends at a space, comma, tab or newline.
    """
    if end < 0:
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
    i = text.find(label, start, end)
    if i < 0:
        return None
    i += len(label)
    j = i
    while j < end and text[j] not in " ,\t\n":
        j += 1
    return text[i:j]


class Scraper:
    """Base of the per-format scrapers: state across lines plus the fast-path hooks.

    Subclasses set ``key`` (a substring found exactly once in every record line) and
    ``pattern`` (a compiled regex that finds a record inside one line and never
    matches across a newline), and implement ``from_match``. Formats with several
    kinds of lines override ``feed`` and ``fast_ok``.
    """

    key: str = ""
    pattern = None
    native: Optional[str] = None  # the format's scan function in _fastscan, if it has one

    def __init__(self):
        self.last_iteration = 0

    def feed(self, line: str, index: int) -> Optional[Item]:
        """Turn one cleaned line into a record, an error, or None."""
        if self.key in line:
            m = self.pattern.search(line)
            if m is None:
                return self.unmatched(line, index)
            return self.from_match(m, index)
        return None

    def unmatched(self, line: str, index: int) -> Optional[Item]:
        """A line has the key but not the record shape: an error unless overridden."""
        return make_error(index, "looks like a training record but does not parse", line)

    def from_match(self, m, index: int) -> Optional[Item]:
        raise NotImplementedError

    def fast_ok(self, chunk: str) -> bool:
        """Whether the chunk holds no line kind that only ``feed`` understands."""
        return True

    def accept(self, record: IterationRecord) -> Optional[IterationRecord]:
        """Drop a record whose iteration is not past the last one (other ranks, repeats)."""
        if record.iteration <= self.last_iteration:
            return None
        self.last_iteration = record.iteration
        return record


def _safe_feed(scraper: Scraper, line: str, index: int) -> Optional[Item]:
    try:
        return scraper.feed(line, index)
    except Exception as exc:  # a scraper must never raise on input
        return make_error(index, "cannot parse: %s" % type(exc).__name__, line)


def run_lines(scraper: Scraper, lines: Iterable) -> Iterator[Item]:
    """Feed lines one by one; yield records and errors in line order."""
    for index, raw in enumerate(lines):
        line = _cleaned(raw)
        if line is None:
            continue
        out = _safe_feed(scraper, line, index)
        if out is not None:
            yield out


def _needs_line_path(scraper: Scraper, chunk: str) -> bool:
    return ("\r" in chunk or "\x1b" in chunk or RANK_RE.match(chunk) is not None
            or RANK_AFTER_NL_RE.search(chunk) is not None or not scraper.fast_ok(chunk))


def _from_matches(scraper: Scraper, matches, chunk: str, first: int) -> List[Item]:
    """The items of one chunk's matches, built with the garbage collector paused.

    Records hold no reference cycles, so the collections that millions of new tuples
    would trigger find nothing; pausing them is about a third of the build time.
    """
    out: List[Item] = []
    append = out.append
    from_match = scraper.from_match
    count = chunk.count
    line = first
    pos = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for m in matches:
            start = m.start()
            line += count("\n", pos, start)
            pos = start
            try:
                item = from_match(m, line)
            except Exception as exc:
                end = chunk.find("\n", start)
                bol = chunk.rfind("\n", 0, start) + 1
                text = chunk[bol:end if end >= 0 else len(chunk)]
                item = make_error(line, "cannot parse: %s" % type(exc).__name__, text)
            if item is not None:
                append(item)
    finally:
        if was_enabled:
            gc.enable()
    return out


def native_scanner(scraper: Scraper):
    """The compiled scan function for this scraper's format, or None (none, or not built)."""
    if _fastscan is None or not scraper.native:
        return None
    return getattr(_fastscan, scraper.native)


def _scan_block(scraper: Scraper, scan, block: bytes, end: int,
                line: int) -> Tuple[List[Item], int]:
    """Items of the lines in block[:end] (the first is line ``line``) and the next index.

    The compiled scanner reads every line it can; each line it stops at (not plain
    ASCII, JSON, a shape or number it does not read exactly) is fed here in Python.
    """
    out: List[Item] = []
    pos = 0
    while pos < end:
        pos, line = scan(scraper, block, pos, end, line, out)
        if pos >= end:
            break
        stop = block.find(b"\n", pos, end)
        if stop < 0:
            stop = end
        text = _cleaned(block[pos:stop])
        if text is not None:
            item = _safe_feed(scraper, text, line)
            if item is not None:
                out.append(item)
        pos, line = stop + 1, line + 1
    return out, line


def run_path(scraper: Scraper, path, chunk_size: Optional[int] = None,
             native: bool = True) -> Iterator[Item]:
    """Scrape a file streaming from disk; same output as ``run_lines`` fed the file's raw
    lines (each cleaned once: ``read_lines`` cleans too, so feeding its lines to
    ``run_lines`` cleans twice, which differs where one cleaning exposes another code or
    a rank prefix, e.g. rank 0's "1: text" under srun --label, "0: 1: text").

    With ``native`` (the default) and a compiled scanner for the format, blocks go
    through it. Otherwise a chunk goes through one ``finditer`` when it has no carriage
    returns, ANSI codes or rank prefixes, no line kind the fast path cannot see, and as
    many matches as occurrences of the key (so no line would have become an error);
    else its lines are fed one by one.
    """
    size = chunk_size or CHUNK_SIZE
    scan = native_scanner(scraper) if native else None
    if scan is not None:
        line = 0
        for block, end in read_blocks(path, size):
            items, line = _scan_block(scraper, scan, block, end, line)
            yield from items
        return
    pattern = scraper.pattern
    key = scraper.key
    for first, chunk in read_chunks(path, size):
        if pattern is not None and key and not _needs_line_path(scraper, chunk):
            matches = list(pattern.finditer(chunk))
            if len(matches) == chunk.count(key):
                yield from _from_matches(scraper, matches, chunk, first)
                continue
        lines = chunk.split("\n")
        if chunk.endswith("\n"):
            lines.pop()
        for offset, raw in enumerate(lines):
            line = _cleaned(raw)
            if line is None:
                continue
            out = _safe_feed(scraper, line, first + offset)
            if out is not None:
                yield out


def collect(items: Iterable[Item]) -> Tuple[List[IterationRecord], List[ScrapeError]]:
    """Split a stream of records and errors into the two lists ``scrape`` returns."""
    records: List[IterationRecord] = []
    errors: List[ScrapeError] = []
    for item in items:
        if item.__class__ is IterationRecord:
            records.append(item)
        else:
            errors.append(item)
    return records, errors


def entry_points(scraper_class):
    """The three functions every format module exposes, for one Scraper class."""
    def iter_scrape(lines, **options):
        """Yield records and errors one by one (flat memory)."""
        return run_lines(scraper_class(**options), lines)

    def iter_scrape_path(path, **options):
        """Like iter_scrape over a file, with the chunked fast path."""
        return run_path(scraper_class(**options), path)

    def scrape(lines, **options):
        """Return (records, errors)."""
        return collect(iter_scrape(lines, **options))

    return iter_scrape, iter_scrape_path, scrape
