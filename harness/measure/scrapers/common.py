"""Helpers shared by the log scrapers.

Every scraper is a small class with a ``feed(line, index)`` method that turns one
cleaned log line into an IterationRecord, a ScrapeError or None. The drivers here
clean lines (ANSI colours, carriage-return redraws, launcher rank prefixes), shield
the caller from any exception, and offer a fast path for files: whole chunks are
matched with one ``finditer`` when the chunk is plain enough that doing so gives
exactly what line-by-line feeding would, or, for the formats it knows, through the
compiled scanner ``_fastscan`` when the install built it. That scanner cleans lines the
same way and hands every line it cannot read exactly as ``feed`` would back to ``feed``:
among them every record whose counter does not rise and every start banner.

Runs (``Scraper.accept``): a log may hold several training processes one after another
(a crash and a resume appended to the same file). A start banner before a record, or a
counter that does not rise, begins the next run, and every record carries its run. A
record that falls between the two before it (lines swapped), or one printed twice word
for word with the run going on after it (a log pasted together), is a fatal ScrapeError
naming both lines; a run's last line printed twice (a writer that flushes it again as
training ends) is read once. Several processes that print records without a rank prefix
(every node's local rank 0, every worker) repeat each iteration with other figures: a
record of one of the last two iterations begins a run once (a resume can do that), and a
run that began so and goes back to a recent iteration again, after at most one new record
(the processes' records alternate) and within RANKS_NEAR logging periods, is a fatal
ScrapeError naming both pairs of lines, not a string of spurious runs; a resumed run that
logs on before it crashes and resumes again is two runs. Rank-prefixed lines are read for
rank 0 only (``clean_line``).

Files are read in blocks of bounded size: a line longer than LINE_MAX, or a NUL byte at
the start of the file (no text log), ends the reading with a fatal ScrapeError at that
line. A line that holds a NUL byte (a stretch of the file the system never wrote, as a
crash or a full disk leaves) is skipped, up to NUL_MAX bytes long, with a ScrapeError
(NUL_SKIPPED, not fatal) at its line after the items read: the lines around it are read,
and the figure's notes count the lines skipped.
"""

import gc
import os
import re
from typing import Any, Callable, Iterable, Iterator, List, Match, Optional, Pattern, Sequence, Tuple, Type, Union

from harness.measure.records import IterationRecord, ScrapeError

try:  # harness/measure/scrapers/_fastscan.c, built by `pip install` when a C compiler is there
    from harness.measure.scrapers import _fastscan  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # not built: the pure-Python paths give the same items
    _fastscan = None

Item = Union[IterationRecord, ScrapeError]
Fed = Union[Item, List[Item], None]  # what one line gives: an item, none, or a held record released and the line's
PathLike = Union[str, "os.PathLike[str]"]
Problems = List[Tuple[int, str]]  # (line index, reason) where a reading stopped
# _fastscan's scan: (scraper, block, pos, end, line, out) -> (pos, line), appending records to out
NativeScan = Callable[[Any, bytes, int, int, int, List[Item]], Tuple[int, int]]
IterScrape = Callable[..., Iterator[Item]]  # iter_scrape(lines, **options), iter_scrape_path(path, **options)
Scrape = Callable[..., Tuple[List[IterationRecord], List[ScrapeError]]]  # scrape(lines, **options)

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
LINE_MAX = 1 << 20  # bytes: a longer line is no log line, and reading stops there
# What last_iteration says to the compiled scanner while feed() must read every line (up
# to a run's first record, a banner waits for its record, or the run's state is one only
# Python computes): a value the scanner does not take, so it hands each line back.
HANDOVER = 1 << 62
RANKS_NEAR = 4  # logging periods: how soon a second process's records come again
UNPLACED = "cannot be placed"  # in the reason of a record line whose iteration the log does not give
NUL_SKIPPED = "a NUL byte (a stretch of the file never written): the line is skipped"
NOT_TEXT = "a NUL byte: the file is not a text log"  # a file that begins with one, or holds NUL_MAX on end
NUL_MAX = 1 << 30  # bytes of one line that holds a NUL byte, skipped before the reading stops


def make_error(index: int, reason: str, text: str) -> ScrapeError:
    """Return a ScrapeError for line ``index``, its text cut to 200 characters."""
    return ScrapeError(index, reason, text[:ERROR_TEXT_MAX])


# 0.5 / 10**d: correctly rounded, as _fastscan's
_HALF_UNITS: Tuple[float, ...] = tuple(0.5 / 10**d for d in range(23))


def half_unit(text: str) -> float:
    """Half a unit of the last digit of a printed number: the most its value can be off
    the one it was rounded from. '0.3716' -> 5e-05, '12' -> 0.5, '1.5e-03' -> 5e-05;
    not a number ('nan', 'inf'): inf."""
    point = text.find(".")
    if point >= 0:  # the usual shape, "0.3716": no exponent, digits after the point
        decimals = len(text) - point - 1
        if decimals < 23 and text[point + 1 :].isdigit() and text[:point].lstrip("+-").isdigit():
            return _HALF_UNITS[decimals]
    text = text.strip()
    mantissa, sep, exponent = text.lower().partition("e")
    try:
        shift = int(exponent) if sep else 0
    except ValueError:
        return float("inf")
    if not mantissa or not all(c in "0123456789.+-" for c in mantissa) or not any(c.isdigit() for c in mantissa):
        return float("inf")
    point = mantissa.find(".")
    decimals = 0 if point < 0 else len(mantissa) - point - 1
    decimals -= shift
    return float(0.5 / 10**decimals if decimals >= 0 else 0.5 * 10**-decimals)


def value_half_unit(value: object) -> float:
    """half_unit of a number as a JSON writer prints it (repr of a float, str of an int)."""
    if isinstance(value, str):
        return half_unit(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float("inf")
    return half_unit(repr(value))


def clean_line(line: Union[str, bytes, bytearray]) -> Optional[str]:
    """Return the text of one log line as rank 0 printed it, or None for other ranks.

    Accepts str or bytes (decoded as UTF-8, bad bytes replaced). Drops the line end,
    keeps the last segment after a carriage return (progress-bar redraws), removes
    ANSI colour codes and strips a launcher's rank prefix.
    """
    if not isinstance(line, str):
        if isinstance(line, (bytes, bytearray)):
            line = bytes(line).decode("utf-8", "replace")
        else:
            line = str(line)
    if line.endswith("\n"):
        line = line[:-1]
    if "\r" in line:
        line = line.rstrip("\r")
        line = line[line.rfind("\r") + 1 :]
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if line and line[0] in "[0123456789":
        m = RANK_RE.match(line)
        if m is not None:
            rank = m.group(1) or m.group(2) or m.group(3)
            if int(rank) != 0:
                return None
            line = line[m.end() :]
    return line


def _cleaned(raw: Union[str, bytes]) -> Optional[str]:
    """clean_line(raw), or None (the line is skipped) where cleaning fails: int() refuses
    a rank of more than 4300 digits."""
    try:
        return clean_line(raw)
    except Exception:
        return None


def has_json_line(chunk: str) -> bool:
    """Whether some line of the chunk starts with '{' once leading whitespace is gone."""
    return JSON_AT_START_RE.match(chunk) is not None or JSON_AFTER_NL_RE.search(chunk) is not None


def read_lines(path: "PathLike", problems: Optional[Problems] = None) -> Iterator[str]:
    """Stream a file line by line (binary read, UTF-8 with replacement), cleaned.

    Lines printed by ranks other than 0 come out as empty strings so that the
    index of every line still matches its position in the file, and so do the lines that
    hold a NUL byte. Reading stops at a line longer than LINE_MAX: (its line index, reason)
    goes into ``problems``, as does each line skipped for a NUL byte (NUL_SKIPPED).
    """
    stops: List[str] = []
    skipped: List[int] = []
    count = 0
    for block, end in read_blocks(path, CHUNK_SIZE, stops, skipped=skipped):
        whole = block[:end] if end < len(block) else block
        raws = whole.split(b"\n")
        if whole.endswith(b"\n"):
            raws.pop()
        count += len(raws)
        for raw in raws:
            text = _cleaned(raw)
            yield "" if text is None else text
    _stopped(problems, count, stops, skipped)


def _stopped(problems: Optional[Problems], line: int, stops: List[str], skipped: Sequence[int] = ()) -> None:
    """The lines skipped for a NUL byte, and where a reading stopped, as (line index, reason):
    the line after those read."""
    if problems is None:
        return
    problems.extend((k, NUL_SKIPPED) for k in skipped)
    if stops:
        problems.append((line, stops[0]))


def _long_line(block: bytes, end: int, limit: int) -> Optional[int]:
    """Where the first line of block[:end] longer than ``limit`` bytes starts, or None.
    Jumps a window of ``limit`` bytes at a time: a few searches per block."""
    pos = 0
    while end - pos > limit:
        k = block.rfind(b"\n", pos, pos + limit + 1)
        if k < 0:
            return pos
        pos = k + 1
    return None


def _blank_nul_lines(block: bytes, first: int, skipped: Optional[List[int]]) -> Tuple[bytes, bool]:
    """The block with every line that holds a NUL byte emptied (its newline kept, so every
    other line keeps its index), and whether its last, unfinished line holds one (then the
    rest of that line, up to its newline, is dropped as it is read). Each emptied line's
    index (``first`` is the block's first line) goes into ``skipped``."""
    lines = block.split(b"\n")
    open_nul = b"\0" in lines[-1]
    for k, text in enumerate(lines):
        if b"\0" in text:
            lines[k] = b""
            if skipped is not None:
                skipped.append(first + k)
    return b"\n".join(lines), open_nul


def read_blocks(
    path: "PathLike",
    size: int = CHUNK_SIZE,
    stops: Optional[List[str]] = None,
    limit: int = LINE_MAX,
    skipped: Optional[List[int]] = None,
) -> Iterator[Tuple[bytes, int]]:
    """Yield (block, end) where block[:end] is a run of whole lines of about ``size`` bytes.

    Each run but the last ends with '\\n'; the last one lacks it when the file does.
    Never holds more than one block and one line of at most ``limit`` bytes in memory: at
    a longer line reading stops after the whole lines before it, and the reason goes into
    ``stops`` when given (the line it stopped at is the one after those yielded: the reader
    counts them). A line that holds a NUL byte (a block of the file the system never wrote:
    a crash, a full disk) comes out empty, up to NUL_MAX bytes long, and its index goes into
    ``skipped``: the lines around it are read. A file that begins with a NUL byte is no text
    log: reading stops there.
    """
    rest = b""
    line = 0  # the index of the first line of ``rest``
    dropping = 0  # bytes dropped of a line that holds a NUL byte, up to its newline (0: none)
    with open(path, "rb") as f:
        while True:
            block = f.read(size)
            if not block:
                break
            if not line and not rest and block.startswith(b"\0"):
                if stops is not None:
                    stops.append(NOT_TEXT)
                return
            if dropping:
                k = block.find(b"\n")
                if k < 0:
                    dropping += len(block)
                    if dropping > NUL_MAX:
                        if stops is not None:
                            stops.append(NOT_TEXT)
                        return
                    continue
                block, dropping = block[k:], 0  # its newline stays: the emptied line keeps its place
            if rest:
                block = rest + block
            if b"\0" in block:
                block, open_nul = _blank_nul_lines(block, line, skipped)
                dropping = 1 if open_nul else 0
            end = block.rfind(b"\n") + 1
            long = _long_line(block, end, limit)
            if long is None and len(block) - end > limit:
                long = end
            if long is not None:
                if long:
                    yield block, long
                if stops is not None:
                    stops.append("a line longer than %d bytes: not a log line" % limit)
                return
            if end == 0:
                rest = block
                continue
            rest = block[end:]
            line += block.count(b"\n", 0, end)
            yield block, end
    if rest:
        yield rest, len(rest)


def read_chunks(
    path: "PathLike", size: int = CHUNK_SIZE, problems: Optional[Problems] = None
) -> Iterator[Tuple[int, str]]:
    """Yield (index of first line, text) for runs of whole lines of about ``size`` bytes.

    The text holds complete lines joined by '\\n' (the last one may lack it only at
    the end of the file). Never holds more than one chunk in memory. Where the reading
    stops (read_blocks), and each line skipped for a NUL byte, (line index, reason) goes
    into ``problems``.
    """
    stops: List[str] = []
    skipped: List[int] = []
    first = 0
    for block, end in read_blocks(path, size, stops, skipped=skipped):
        text = (block if end == len(block) else block[:end]).decode("utf-8", "replace")
        yield first, text
        first += text.count("\n")
    _stopped(problems, first, stops, skipped)


def problem_errors(problems: Problems) -> List[ScrapeError]:
    """The ScrapeErrors of read_blocks' problems: a line skipped for a NUL byte (not fatal),
    what stopped the reading (fatal)."""
    return [ScrapeError(line, reason, "", reason != NUL_SKIPPED) for line, reason in problems]


_tuple_new = tuple.__new__


def new_record(
    iteration: int,
    line: int,
    time_s: Optional[float],
    data_time_s: Optional[float],
    span: int,
    kind: str,
    images_per_s: Optional[float] = None,
    images: Optional[int] = None,
    memory_mb: Optional[float] = None,
    loss: Optional[float] = None,
    run: int = 1,
    rounding: float = 0.0,
    data_span: int = 0,
    data_kind: Optional[str] = None,
) -> IterationRecord:
    """Build an IterationRecord without the keyword handling of its constructor."""
    return _tuple_new(
        IterationRecord,
        (
            iteration,
            line,
            time_s,
            data_time_s,
            span,
            kind,
            images_per_s,
            images,
            memory_mb,
            loss,
            run,
            rounding,
            data_span,
            data_kind,
        ),
    )


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


def _same_figures(a: IterationRecord, b: IterationRecord) -> bool:
    """Two records of one iteration that say the same: a line printed twice."""
    return a[2:] == b[2:]


class Scraper:
    """Base of the per-format scrapers: state across lines plus the fast-path hooks.

    Subclasses set ``key`` (a substring found exactly once in every record line) and
    ``pattern`` (a compiled regex that finds a record inside one line and never
    matches across a newline), and implement ``from_match``. Formats with several
    kinds of lines override ``feed`` and ``fast_ok``. ``banners`` are substrings of the
    lines a training process prints once as it starts; ``banner_start`` reads the
    iteration it starts from where the banner says it.

    Every record passes ``accept``, which numbers the runs (see the module's text) and
    calls ``begin`` on the first record of each run: the place for a format whose figures
    depend on where its process started to set that up and rebuild the record.
    """

    key: str = ""
    pattern: Optional[Pattern[str]] = None
    native: Optional[str] = None  # the format's scan function in _fastscan, if it has one
    banners: Tuple[str, ...] = ()

    def __init__(self) -> None:
        self.run = 1
        self._last: Optional[IterationRecord] = None  # the run's last record
        self._before: Optional[IterationRecord] = None  # and the one before it
        # (line index, start iteration or None) since the last record
        self._banner: Optional[Tuple[int, Optional[int]]] = None
        self._python = False  # the run's figures are ones only feed() computes
        self._repeat: Optional[Tuple[int, int]] = None  # (line, line) of the run's last record, printed twice
        # (iteration, line, line): the run began at a record of an iteration just logged
        self._went_back: Optional[Tuple[int, int, int]] = None
        self._rises = 0  # records the run took since it began (the counter rising)
        self._unplaced = False  # the run has a record line whose iteration the log does not give

    # what the compiled scanner reads (and writes back, which changes nothing: the
    # records it appends are taken up by saw_native)
    @property
    def last_iteration(self) -> int:
        if self._python or self._banner is not None or self._last is None or self._repeat is not None:
            return HANDOVER  # begin() reads a run's first record: feed() sees the lines up to it
        return self._last.iteration

    @last_iteration.setter
    def last_iteration(self, value: int) -> None:
        pass

    def saw_native(self, out: List[IterationRecord], first: int) -> None:
        """Take up the records the compiled scanner appended to ``out`` from ``first`` on."""
        self._rises += len(out) - first
        if len(out) - first >= 2:
            self._before, self._last = out[-2], out[-1]
        else:
            self._before, self._last = self._last, out[-1]

    def finish(self) -> List[Item]:
        """What the scraper still holds once the log ends (a record that the lines after it complete)."""
        return []

    def take(self, line: str, index: int) -> Fed:
        """What one cleaned line gives: ``feed``'s item, where a format holds no record back; a
        format that holds a record until later lines complete it returns a list where one line
        gives two (the held record released, then the line's)."""
        return self.feed(line, index)

    def feed(self, line: str, index: int) -> Optional[Item]:
        """Turn one cleaned line into a record, an error, or None."""
        if self.key in line and self.pattern is not None:
            m = self.pattern.search(line)
            if m is None:
                return self.unmatched(line, index)
            return self.from_match(m, index)
        return self.banner(line, index)

    def banner(self, line: str, index: int) -> Optional[Item]:
        """Note a start banner (the next record begins a run); None: nothing to emit."""
        for text in self.banners:
            if text in line:
                self._banner = (index, self.banner_start(line))
                break
        return None

    def banner_start(self, line: str) -> Optional[int]:
        """The iterations done before the process that prints this banner, where it says."""
        return None

    def unmatched(self, line: str, index: int) -> Optional[Item]:
        """A line has the key but not the record shape: an error unless overridden."""
        return make_error(index, "looks like a training record but does not parse", line)

    def from_match(self, m: Match[str], index: int) -> Optional[Item]:
        raise NotImplementedError

    def fast_ok(self, chunk: str) -> bool:
        """Whether the chunk holds no line kind that only ``feed`` understands."""
        for text in self.banners:
            if text in chunk:
                return False
        return True

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        """The first record of a run (self.run), whose process started after ``start``
        iterations where a banner says so (else None): the record as this run reads it."""
        return rec if rec.run == self.run else rec._replace(run=self.run)

    def accept(self, rec: IterationRecord) -> Optional[Item]:
        """The record in its run, None for a repeated line, or a fatal error."""
        last = self._last
        if last is not None and self._banner is None and self._repeat is None and rec.iteration > last.iteration:
            self._before, self._last = last, rec  # the usual case: the counter rises
            self._rises += 1
            return rec
        banner = self._banner
        if banner is not None:
            self._banner = None
            if last is not None or self._unplaced:
                return self._new_run(rec, banner[1])
        if last is None:
            rec = self.begin(rec, None if banner is None else banner[1])
        elif rec.iteration <= last.iteration:
            before = self._before
            if rec.iteration == last.iteration and _same_figures(rec, last):
                if self._repeat is None:  # read once; an error only if the run goes on after it
                    self._repeat = (last.line, rec.line)
                return None
            if before is not None and rec.iteration == before.iteration and _same_figures(rec, before):
                return None  # a line of the record before, again (another rank's copy)
            if before is not None and before.iteration < rec.iteration < last.iteration:
                return ScrapeError(
                    rec.line,
                    "records out of order: iteration %d on line %d comes after iteration "
                    "%d on line %d" % (rec.iteration, rec.line + 1, last.iteration, last.line + 1),
                    "",
                    True,
                    self.run,
                )
            twin = self._twin_of(rec)
            if twin is not None and self._went_back is not None and self._near_went_back(rec):
                it, a, b = self._went_back
                return ScrapeError(
                    rec.line,
                    "records of several processes: iteration %d on lines %d and %d and "
                    "iteration %d on lines %d and %d carry different figures, and no rank prefix "
                    "says which process printed which (or a run crashed and resumed twice right "
                    "after logging: the log cannot tell; log from rank 0 only, or label the lines: "
                    "srun --label, torchrun --tee)" % (it, a + 1, b + 1, rec.iteration, twin.line + 1, rec.line + 1),
                    "",
                    True,
                    self.run,
                )
            out = self._new_run(rec, None)  # the counter did not rise: a restarted process
            if twin is not None:  # ... or a second process that logs the iterations just logged
                self._went_back = (rec.iteration, twin.line, rec.line)
            return out
        elif self._repeat is not None:
            # the last record came twice, and the run goes on: not a writer's last line again
            first, second = self._repeat
            self._repeat = None
            self._before, self._last = last, rec
            return ScrapeError(
                second,
                "iteration %d is logged twice: on line %d and on line %d" % (last.iteration, first + 1, second + 1),
                "",
                True,
                self.run,
            )
        self._before, self._last = last, rec
        self._rises += 1
        return rec

    def _near_went_back(self, rec: IterationRecord) -> bool:
        """Whether ``rec`` lies within RANKS_NEAR logging periods of the record the run began
        at (a twin): a second process goes on logging beside the first, while a restarted run
        that later restarts again has run on for a while."""
        if self._rises > 1:
            return False  # the run logged on after it began: a resumed run, not another process
        last, before, went_back = self._last, self._before, self._went_back
        if last is None or went_back is None:
            return False
        period = last.iteration - before.iteration if before is not None else 1
        return rec.iteration - went_back[0] <= RANKS_NEAR * max(1, period)

    def _twin_of(self, rec: IterationRecord) -> Optional[IterationRecord]:
        """The record among the run's last two of the same iteration as ``rec`` (whose
        figures differ: a copy word for word is handled before), or None."""
        for other in (self._last, self._before):
            if other is not None and other.iteration == rec.iteration:
                return other
        return None

    def unplaced(self, index: int, reason: str, text: str, restarted: bool = False) -> ScrapeError:
        """The error of a record line whose iteration the log does not give (UNPLACED in its
        reason): it still begins the run a banner announced, or that its counters going back
        show (``restarted``), so the runs are counted right."""
        if (self._banner is not None or restarted) and (self._last is not None or self._unplaced):
            self._banner = None
            self.run += 1
            self._rises = 0
            self._before = self._last = None
            self._python, self._repeat, self._went_back = False, None, None
        self._unplaced = True  # the run has a record line, placed or not: a banner after it begins the next
        return ScrapeError(index, reason, text[:ERROR_TEXT_MAX], False, self.run)

    def _new_run(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        self.run += 1
        self._went_back = None
        self._rises = 0
        self._unplaced = False
        self._python = False
        self._repeat = None  # the run's last line came twice: a writer's last flush
        rec = self.begin(rec, start)
        self._before, self._last = None, rec
        return rec


def _safe_feed(scraper: Scraper, line: str, index: int) -> Fed:
    try:
        return scraper.take(line, index)
    except Exception as exc:  # a scraper must never raise on input
        return make_error(index, "cannot parse: %s" % type(exc).__name__, line)


def _items(out: Fed) -> List[Item]:
    """The items one line gave, in order."""
    if out is None:
        return []
    return out if isinstance(out, list) else [out]


def run_lines(scraper: Scraper, lines: Iterable[Union[str, bytes]]) -> Iterator[Item]:
    """Feed lines one by one; yield records and errors in line order."""
    for index, raw in enumerate(lines):
        line = _cleaned(raw)
        if line is None:
            continue
        out = _safe_feed(scraper, line, index)
        if isinstance(out, list):
            yield from out
        elif out is not None:
            yield out
    yield from scraper.finish()


def _needs_line_path(scraper: Scraper, chunk: str) -> bool:
    return (
        "\r" in chunk
        or "\x1b" in chunk
        or RANK_RE.match(chunk) is not None
        or RANK_AFTER_NL_RE.search(chunk) is not None
        or not scraper.fast_ok(chunk)
    )


def _from_matches(scraper: Scraper, matches: Iterable[Match[str]], chunk: str, first: int) -> List[Item]:
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
                text = chunk[bol : end if end >= 0 else len(chunk)]
                item = make_error(line, "cannot parse: %s" % type(exc).__name__, text)
            if item is not None:
                append(item)
    finally:
        if was_enabled:
            gc.enable()
    return out


def native_scanner(scraper: Scraper) -> Optional[NativeScan]:
    """The compiled scan function for this scraper's format, or None (none, or not built)."""
    if _fastscan is None or not scraper.native:
        return None
    scan: NativeScan = getattr(_fastscan, scraper.native)
    return scan


def _scan_block(scraper: Scraper, scan: NativeScan, block: bytes, end: int, line: int) -> Tuple[List[Item], int]:
    """Items of the lines in block[:end] (the first is line ``line``) and the next index.

    The compiled scanner reads every line it can; each line it stops at (not plain
    ASCII, JSON, a shape or number it does not read exactly) is fed here in Python.
    """
    out: List[Item] = []
    pos = 0
    while pos < end:
        first = len(out)
        pos, line = scan(scraper, block, pos, end, line, out)
        if len(out) > first:
            scraper.saw_native(out, first)  # type: ignore[arg-type]  # the scanner appends records only
        if pos >= end:
            break
        stop = block.find(b"\n", pos, end)
        if stop < 0:
            stop = end
        text = _cleaned(block[pos:stop])
        if text is not None:
            out += _items(_safe_feed(scraper, text, line))
        pos, line = stop + 1, line + 1
    return out, line


def run_path(
    scraper: Scraper, path: "PathLike", chunk_size: Optional[int] = None, native: bool = True
) -> Iterator[Item]:
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
    problems: Problems = []
    if scan is not None:
        stops: List[str] = []
        skipped: List[int] = []
        index = 0
        for block, end in read_blocks(path, size, stops, skipped=skipped):
            items, index = _scan_block(scraper, scan, block, end, index)
            yield from items
        yield from scraper.finish()
        _stopped(problems, index, stops, skipped)
        yield from problem_errors(problems)
        return
    pattern = scraper.pattern
    key = scraper.key
    for first, chunk in read_chunks(path, size, problems):
        if pattern is not None and key and not _needs_line_path(scraper, chunk):
            matches = list(pattern.finditer(chunk))
            if len(matches) == chunk.count(key):
                yield from _from_matches(scraper, matches, chunk, first)
                continue
        lines = chunk.split("\n")
        if chunk.endswith("\n"):
            lines.pop()
        for offset, raw in enumerate(lines):
            text = _cleaned(raw)
            if text is None:
                continue
            out = _safe_feed(scraper, text, first + offset)
            if isinstance(out, list):
                yield from out
            elif out is not None:
                yield out
    yield from scraper.finish()
    yield from problem_errors(problems)


def collect(items: Iterable[Item]) -> Tuple[List[IterationRecord], List[ScrapeError]]:
    """Split a stream of records and errors into the two lists ``scrape`` returns."""
    records: List[IterationRecord] = []
    errors: List[ScrapeError] = []
    for item in items:
        if isinstance(item, IterationRecord):
            records.append(item)
        else:
            errors.append(item)
    return records, errors


def entry_points(scraper_class: Type[Scraper]) -> Tuple[IterScrape, IterScrape, Scrape]:
    """The three functions every format module exposes, for one Scraper class."""

    def iter_scrape(lines: Iterable[Union[str, bytes]], **options: Any) -> Iterator[Item]:
        """Yield records and errors one by one (flat memory)."""
        return run_lines(scraper_class(**options), lines)

    def iter_scrape_path(path: PathLike, **options: Any) -> Iterator[Item]:
        """Like iter_scrape over a file, with the chunked fast path."""
        return run_path(scraper_class(**options), path)

    def scrape(lines: Iterable[Union[str, bytes]], **options: Any) -> Tuple[List[IterationRecord], List[ScrapeError]]:
        """Return (records, errors)."""
        return collect(iter_scrape(lines, **options))

    return iter_scrape, iter_scrape_path, scrape
