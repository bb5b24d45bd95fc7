"""The compiled scanner gives exactly what feeding the lines one by one gives.

Three readings of the same file must agree item for item: ``feed`` line by line (the
reference), the pure-Python chunked path, and the compiled scanner with Python feeding
the lines it hands back. The logs are the fixtures and hypothesis-made logs: record
lines of each format with their numbers, separators and heads mutated, other ranks'
prefixes, colour codes, carriage returns, JSON lines, repeats, random bytes and a
truncated last line.
"""
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.measure.scrapers import common
from harness.measure.scrapers.detectron2 import Detectron2Scraper
from harness.measure.scrapers.maskrcnn_benchmark import MaskrcnnScraper
from harness.measure.scrapers.mmdet_v2 import MmcvScraper
from harness.measure.scrapers.mmdet_v3 import MmengineScraper
from tests.support.services import need_service
from tests.scrapers.fed import fed_line_by_line

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
NATIVE = common._fastscan is not None
CLASSES = {"mmcv": MmcvScraper, "mmengine": MmengineScraper, "detectron2": Detectron2Scraper,
           "maskrcnn": MaskrcnnScraper}


def _need_native():
    need_service(NATIVE, "the compiled scanner harness/measure/scrapers/_fastscan.c is not built "
                         "(pip install -e . found no C compiler)")


# A first record of each format (iteration 1): the compiled scanner leaves every line up to
# a run's first record to Python (common.Scraper.begin reads it), and reads the lines after
PRIMERS = {
    "mmcv": "2021-03-01 09:10:00,000 - mmdet - INFO - Epoch [1][1/120]\tlr: 1.000e-03, eta: 7:01:10, "
            "time: 0.400, data_time: 0.020, memory: 3375, loss: 1.2000",
    "mmengine": "06/12 14:00:00 - mmengine - INFO - Iter(train) [ 1/90000]  lr: 2.0e-02  eta: 1 day  "
                "time: 0.4  data_time: 0.02  memory: 33  loss: 1.2",
    "detectron2": "[05/17 10:40:13] d2.utils.events INFO:  eta: 1:00  iter: 0  total_loss: 1.2  time: 0.4  "
                  "data_time: 0.02  lr: 0.1  max_mem: 3189M",
    "maskrcnn": "x INFO: eta: 1:00  iter: 1  loss: 1.2 (1.2)  time: 0.4 (0.4)  data: 0.02 (0.02)  lr: 0.002  "
                "max mem: 3012",
}


def primed(fmt, **options):
    """A scraper of the format that has read its run's first record (PRIMERS)."""
    scraper = CLASSES[fmt](**options)
    assert [type(x).__name__ for x in common.run_lines(scraper, [PRIMERS[fmt]])] == ["IterationRecord"]
    return scraper


def readings(cls, options, path, chunk_size):
    """repr() of every item of the three readings (repr: nan equals nan, -0.0 is not 0.0)."""
    def items(iterable):
        return [repr(item) for item in iterable]
    by_lines = items(fed_line_by_line(cls(**options), path))
    pure = items(common.run_path(cls(**options), path, chunk_size, native=False))
    native = items(common.run_path(cls(**options), path, chunk_size, native=True))
    return by_lines, pure, native


def test_the_compiled_scanner_is_built():
    _need_native()
    assert {name for name in CLASSES if hasattr(common._fastscan, name)} == set(CLASSES)
    assert all(common.native_scanner(cls()) is not None for cls in CLASSES.values())


def test_a_scanner_built_for_other_record_fields_does_not_load():
    """Should records.py change, importing the scanner fails and the pure path runs."""
    _need_native()
    code = ("import typing, harness.measure.records as r\n"
            "class Other(typing.NamedTuple):\n    iteration: int\n"
            "r.IterationRecord = Other\n"
            "from harness.measure.scrapers import common\n"
            "assert common._fastscan is None and common.native_scanner(common.Scraper()) is None\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("fmt,fixture,options", [
    ("mmcv", "mmdet_v1.log", {}), ("mmcv", "mmdet_v1.log", {"interval": 10}),
    ("mmcv", "mmdet_v2.log", {}), ("mmcv", "mmdet_v2_iter.log", {}),
    ("mmcv", "mmdet_v2.log.json", {}), ("mmengine", "mmdet_v3.log", {}),
    ("mmengine", "mmdet_v3.log", {"window": 10}), ("mmengine", "mmdet_v3_vis.json", {}),
    ("maskrcnn", "maskrcnn_benchmark.log", {}), ("detectron2", "detectron2.log", {}),
    ("detectron2", "detectron2.log", {"prefer": "last"}),
    ("detectron2", "detectron2_v06.log", {}), ("detectron2", "detectron2_2019.log", {}),
    ("detectron2", "detectron2_metrics.json", {})])
def test_fixtures_read_the_same_three_ways(fmt, fixture, options, tmp_path):
    _need_native()
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    path = tmp_path / "log.txt"
    path.write_text(text * 30 + "\x1b[1m" + text + "[rank1]:" + text + text * 30,
                    encoding="utf-8")
    by_lines, pure, native = readings(CLASSES[fmt], options, path, 1000)
    assert native == by_lines and pure == by_lines
    assert any(item.startswith("IterationRecord") for item in native)


@pytest.mark.parametrize("fmt,fixture,records", [
    ("mmcv", "mmdet_v2.log", 3), ("mmengine", "mmdet_v3.log", 3),
    ("detectron2", "detectron2.log", 2), ("maskrcnn", "maskrcnn_benchmark.log", 2)])
def test_plain_logs_are_read_by_the_scanner_itself(fmt, fixture, records):
    """Past a run's first record, no line of a plain log (validation lines included) goes back
    to Python; up to it (its banner, its first record), every line does."""
    _need_native()
    data = (FIXTURES / fixture).read_bytes()
    lines = data.split(b"\n")
    scan = getattr(common._fastscan, fmt)
    out = []
    assert scan(CLASSES[fmt](), data, 0, len(data), 0, out) == (0, 0) and out == []
    expected, _ = common.collect(common.run_lines(CLASSES[fmt](), lines))
    assert len(expected) == records
    first = expected[0].line + 1          # the lines up to the first record: Python's
    scraper = CLASSES[fmt]()
    assert list(common.run_lines(scraper, lines[:first])) == expected[:1]
    start = len(b"\n".join(lines[:first])) + 1
    out = []
    pos, line = scan(scraper, data, start, len(data), first, out)
    assert (pos, line) == (len(data), data.count(b"\n"))
    assert out == expected[1:]


def test_the_scanner_keeps_the_scraper_state(tmp_path):
    _need_native()
    path = tmp_path / "log.txt"
    path.write_bytes((FIXTURES / "mmdet_v2.log").read_bytes())
    scraper = MmcvScraper()
    assert [r.iteration for r in common.run_path(scraper, path)] == [50, 100, 170]
    assert scraper.last_iteration == 170 and scraper.interval == 50


MMCV = ("2021-03-01 09:11:01,500 - mmdet - INFO - Epoch [1][100/120]\tlr: 3.986e-03, "
        "eta: 7:01:10, time: 0.388, data_time: 0.018, memory: 3375, loss: 1.0943")


def test_lines_it_cannot_read_exactly_are_handed_to_python():
    _need_native()
    first = MMCV.replace("100/", "50/").encode() + b"\n"
    for odd in (MMCV.replace("0.388", "0_388"), "\x1b[32m" + MMCV.replace(", ", "\x1b(, "),
                "  {\"mode\": 1}", MMCV.replace("INFO", "INF\u00c9"), MMCV.replace("\t", " "),
                MMCV.replace("[1][", "[1234567890]["), "\u2588\r" + MMCV + "\x0c",
                MMCV.replace("100/", "30/"), MMCV.replace("100/", "50/"),   # a counter that does not rise
                "2021-03-01 09:00:00,000 - mmdet - INFO - Environment info:"):   # a start banner
        data = first + odd.encode() + b"\n"
        out = []
        pos, line = common._fastscan.mmcv(primed("mmcv"), data, 0, len(data), 7, out)
        assert (pos, line, len(out)) == (len(first), 8, 1), odd


def test_a_run_s_first_record_is_handed_to_python():
    """Up to a run's first record, and while a run's figures are ones only Python computes
    (a detectron2 process that started past iteration 0), every line goes back to Python."""
    _need_native()
    data = MMCV.encode() + b"\n"
    assert common._fastscan.mmcv(MmcvScraper(), data, 0, len(data), 0, []) == (0, 0)
    resumed = Detectron2Scraper()
    list(common.run_lines(resumed, ["[05/17 10:40:00 d2.engine.train_loop]: Starting training from iteration 500",
                                    PRIMERS["detectron2"].replace("iter: 0 ", "iter: 519 ")]))
    assert resumed.start == 500 and resumed.last_iteration == common.HANDOVER
    data = PRIMERS["detectron2"].replace("iter: 0 ", "iter: 539 ").encode()
    assert common._fastscan.detectron2(resumed, data, 0, len(data), 0, []) == (0, 0)


def test_colour_codes_redraws_and_rank_prefixes_are_cleaned_by_the_scanner():
    _need_native()
    lines = ["\x1b[32m" + MMCV.replace("data_time", "data_\x1b[0mtime") + "\x1b[0m",
             "50%|\u2588\u2588   | 5/10\r" + MMCV.replace("100/", "110/") + "\r",
             "[rank0]:" + MMCV.replace("100/", "115/"), "[rank1]:" + MMCV.replace("100/", "117/"),
             "0: 1: " + MMCV.replace("100/", "118/"), "\x1b[1;31m[1,2]<stdout>:\x1b[0m" + MMCV,
             "[rank01]:" + MMCV.replace("100/", "119/"), "\x1b[\x7f" + MMCV.replace("100/", "1/")]
    data = "\n".join(lines).encode()
    out = []
    pos, _ = common._fastscan.mmcv(primed("mmcv"), data, 0, len(data), 0, out)
    assert pos == data.rindex(b"\n") + 1   # "\x1b[\x7f" is no colour code: left to Python
    assert [(r.iteration, r.line) for r in out] == [(100, 0), (110, 1), (115, 2), (118, 4)]
    assert out == common.collect(common.run_lines(primed("mmcv"), data.split(b"\n")[:-1]))[0]


# The choices of the Python patterns that a scanner could easily get wrong. Each line
# must read the same both ways, and the scanner must read it itself.
CHOICES = [
    ("mmcv", MMCV.replace("loss: 1.0943", "a: 1, loss: 1.5, loss: , loss: 2.5, b: 3")),  # last
    ("mmcv", MMCV.replace(", memory: 3375, loss: 1.0943", ", memory: 3375")),      # no ", "
    ("mmcv", MMCV.replace("\tlr:", "\tx, time: a b, time: 9, lr:")),                # lazy time
    ("mmcv", MMCV.replace("Epoch [1][100/120]", "Epoch [1][7] Iter [30/40]")),        # 2nd head
    ("mmcv", MMCV.replace(", memory: 3375", "").replace("loss:", "loss_x: 1, loss:")),
    ("mmcv", "2021 - mmdet - INFO - Epoch(val) [1][500]\tbbox_mAP: 0.3, data_time: 0.1"),
    ("mmcv", MMCV.replace("INFO - ", "INFO - Iter [3/4]\t")),                        # 1st head
    ("mmengine", "06/12 14:04:00 - mmengine - INFO - Epoch(val)  [1][ 50/500]    eta: 0:00:30"
                 "  time: 0.0601  data_time: 0.0021  memory: 900"),
    ("mmengine", "06/12 - Iter(train) [  20/90000]  lr: 2.0e-02  eta: 1 day  time: 0.3  "
                 "data_time: 0.01  memory: 33  loss: 1.8  loss: 1.9"),
    ("mmengine", "06/12 - Epoch(train) [2][ 20/90]  lr: 1  time: 0.3  data_time: 0.01  "
                 "loss: 1.8"),                                                   # no memory
    ("detectron2", "[05/17] d2 INFO:  max_iter: 5  iter: 19  total_loss: 1.1  time: 0.3  "
                   "data_time: 0.01  lr: 0.1  max_mem: 3189MM"),                      # 1st head
    ("detectron2", "[05/17] d2 INFO:  eta: 1:00  iter: 19    time: 0.3  last_data_time: 0.2  "
                   "lr: 0.1  total_loss: 9  max_mem: 3189M"),                    # loss after
    ("detectron2", "[05/17] d2 INFO:  eta: 1:00  iter: 1  total_loss: 1.1  lr: 0.1"),  # warmup
    ("maskrcnn", "x INFO: eta: 1:00  iter: 20  loss: 1.8 (2.0)  time: 0.4 (0.5)x  time: 0.41 "
                 "(0.5)  data: 0.01 (0.02)  lr: 0.002  max mem: 3012"),
    ("maskrcnn", "x INFO: iter: 20  time: 0.4 (0.5)  data: 0.01 (0.02)  loss: 1.8 (2.0)"),
    ("maskrcnn", "x INFO: iter: 20  time: 0.4 ()  data: 0.01 (0.02)  time: 0.5 (0.6)  data: 0.02 "
                 "(0.03)"),                                                  # "\(\S+\)": 2 chars
]


@pytest.mark.parametrize("fmt,line", CHOICES)
@pytest.mark.parametrize("prefer", ["global", "last"])
def test_the_scanner_makes_the_patterns_choices(fmt, line, prefer):
    _need_native()
    options = {"prefer": prefer} if fmt == "detectron2" else {}
    data = line.encode() + b"\n"
    out = []
    pos, _ = getattr(common._fastscan, fmt)(primed(fmt, **options), data, 0, len(data), 0, out)
    expected = list(common.run_lines(primed(fmt, **options), [line]))
    assert pos == len(data)
    assert out == expected


def _with_point(digits_and_place):
    digits, place = digits_and_place
    place %= len(digits) + 1
    return digits[:place] + "." + digits[place:]


DECIMALS = st.one_of(
    st.from_regex(r"\A[+-]?[0-9]{0,18}(\.[0-9]{0,18})?([eE][+-]?[0-9]{1,3})?\Z"),
    st.tuples(st.text("0123456789", min_size=13, max_size=18), st.integers(0, 18)).map(_with_point),
    st.floats().map(repr), st.floats(0, 1e6).map("%.17g".__mod__),
    st.floats(0, 100).map("%.15f".__mod__), st.integers(0, 10 ** 20).map(str))


@settings(max_examples=400, deadline=None)
@given(DECIMALS)
@example("9007199254740993")
@example("0.1234567890123456")
@example("123456789012345.6")
@example("999999999999999.9")
@example("-0")
@example(".5")
@example("5.")
@example("1e400")
def test_numbers_convert_exactly_as_float_does(token):
    _need_native()
    data = MMCV.replace("0.388", token).encode()
    out = []
    pos, _ = common._fastscan.mmcv(primed("mmcv"), data, 0, len(data), 0, out)
    try:
        value = float(token)
    except ValueError:
        assert pos == 0 and out == []   # Python writes the error
        return
    digits = token.lstrip("+-").replace(".", "", 1)
    if digits.isdigit() and digits.isascii() and len(digits) <= 15:   # a plain decimal: read here
        assert pos == len(data) and repr(out[0].time_s) == repr(value)
        assert repr(out[0].rounding) == repr(max(common.half_unit(token), common.half_unit("0.018")))
    else:   # an exponent or many digits: Python reads the number and its rounding
        assert (pos, out) == (0, []) or (pos == len(data) and repr(out[0].time_s) == repr(value))


# ---- hypothesis-made logs ----


def mostly(usual, odd, one_in=8):
    """Draw from ``odd`` one time in ``one_in``, else from ``usual``."""
    return st.integers(1, one_in).flatmap(lambda k: odd if k == 1 else usual)


NUMBERS = mostly(
    st.one_of(st.floats(0, 10).map("%.4f".__mod__), st.floats(0, 10).map("%.3f".__mod__),
              st.floats(0, 5).map("%.4g".__mod__), st.integers(0, 99999).map(str)),
    st.one_of(st.floats().map(repr),
              st.sampled_from(["nan", "-inf", "1_0", "", "1e", "1e5", "-0.0", ".5", "5.", "0x10",
                               "1.2.3", "3189M", "3189MM", "M", "0.4)", ")", "1,5", "\u0661",
                               "9" * 17, "0.1234567890123456789", "+.5e-3", "1e400"]),
              st.text("0123456789.eE+-_nafiM()", max_size=8)), one_in=16)
INTS = mostly(st.integers(0, 60).map(str),
              st.sampled_from(["0", "007", "1234567890", "", "x", "\u0661"]))
PREFIXES = mostly(st.just(""), st.sampled_from([
    "[rank0]:", "[rank1]:", "0: ", "3: ", "[default0]:", "[default2]:", "[1,0]<stdout>:",
    "[0,1]<stderr>:", "[rank00]:", "[rank]:", "\x1b[32m", "   ", "\t{", "{", "50%|#   |\r",
    "[05/17 10:42:13] ", "\x1b[1;31m[rank1]:\x1b[0m", "100%|\u2588\u2588| 16/16\r", "\r\r",
    "\x1b(B", "\x1bM", "\x1b[?25l", "\x1b[12", "\x1b", "\x1b[0m\x1b[", "a\rb\r", "[rank01]:",
    "01: ", "[0,01]<stdout>:", "\x1b[\x7f"]))
COLOURS = st.lists(st.tuples(st.integers(0, 400), st.sampled_from([
    "\x1b[0m", "\x1b[32m", "\x1b[1;4;31m", "\x1b[?25h", "\x1b[ q", "\x1bM", "\x1b_", "\x1b[",
    "\x1b(", "\x1b[5\u00e9m", "\x1b[\x7f", "\x1b[1\x7fm", "\r", "\r\r"])), min_size=1, max_size=3)
ODD_SEPS = st.sampled_from(["  ", ", ", " ", "\t", "   ", ",  ", ""])


@st.composite
def _fields(draw, names, sep, values=None):
    """'name: value' pairs joined by ``sep``, mostly in the format's own order; values are
    numbers unless ``values`` names another strategy for a name."""
    names = list(names)
    if draw(st.integers(0, 7)) == 0:
        names = draw(st.permutations(names))
    if draw(st.integers(0, 7)) == 0:   # a label twice
        names.insert(draw(st.integers(0, len(names))), draw(st.sampled_from(names)))
    out = []
    for name in names:
        if draw(st.integers(0, 19)) > 0:
            value = draw((values or {}).get(name, NUMBERS))
            out.append(name + value + draw(mostly(st.just(sep), ODD_SEPS, 32)))
    return "".join(out)[:-len(sep)] if draw(st.booleans()) else "".join(out)


def _head(draw, heads):
    head = draw(mostly(st.sampled_from(heads[:-1]), st.just(heads[-1])))
    return head % tuple(draw(INTS) for _ in range(head.count("%s")))


@st.composite
def mmcv_line(draw):
    head = _head(draw, ["Epoch [%s][%s/%s]\t", "Iter [%s/%s]\t", "Epoch(val) [%s][%s]\t"])
    body = draw(_fields(["lr: ", "eta: ", "time: ", "data_time: ", "memory: ", "loss_cls: ",
                         "acc: ", "loss: "], ", "))
    return "2021-03-01 11:02:31,415 - mmdet - INFO - " + head + body


@st.composite
def mmengine_line(draw):
    head = _head(draw, ["Epoch(train)  [%s][ %s/%s]  ", "Epoch(train) [%s][%s/%s]  ",
                        "Iter(train) [  %s/%s]  ", "Epoch(val) [%s][%s/%s]  "])
    body = draw(_fields(["base_lr: ", "lr: ", "eta: ", "time: ", "data_time: ", "memory: ",
                         "loss: ", "loss_cls: "], "  "))
    return "06/12 14:02:41 - mmengine - INFO - " + head + body


@st.composite
def detectron2_line(draw):
    body = draw(_fields(["eta: ", "iter: ", "total_loss: ", "loss_cls: ", "time: ",
                         "last_time: ", "data_time: ", "last_data_time: ", "lr: ", "max_mem: "],
                        "  ", {"iter: ": INTS}))
    return "[05/17 10:42:13] d2.utils.events INFO:  " + body


@st.composite
def maskrcnn_line(draw):
    def meter():
        return "%s (%s)" % (draw(NUMBERS), draw(NUMBERS))
    parts = ["eta: 0:12:34", "iter: " + draw(INTS), "loss: " + meter(), "loss_cls: " + meter(),
             "time: " + meter(), "data: " + meter(), "lr: 0.002000", "max mem: " + draw(NUMBERS)]
    kept = [p for p in parts if draw(st.integers(0, 9)) > 0]
    return ("2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: "
            + draw(mostly(st.just("  "), ODD_SEPS)).join(kept))


LINES = {"mmcv": mmcv_line(), "mmengine": mmengine_line(), "detectron2": detectron2_line(),
         "maskrcnn": maskrcnn_line()}
JSON_LINES = ['{"mode": "train", "epoch": 1, "iter": 50, "lr": 0.01, "time": 0.4, '
              '"data_time": 0.01, "memory": 3000, "loss": 1.5}',
              '{"data_time": 0.01, "iteration": 19, "time": 0.3, "lr": 0.1, "iter": 20}',
              '  {"broken", "data_time": ', '{"mode"']
# None: inferred; odd types and huge ints: state the scanner leaves to Python
OPTIONS = {
    "mmcv": st.fixed_dictionaries({"interval": st.sampled_from([None, 10, 0, -3, 2 ** 70, 7.5])}),
    "mmengine": st.fixed_dictionaries({"window": st.sampled_from([None, 10, 0, 2 ** 70, 2.5])}),
    "detectron2": st.fixed_dictionaries({"prefer": st.sampled_from(["global", "last"]),
                                         "warmup_iter": st.sampled_from([3, 0, -7, 2 ** 70])}),
    "maskrcnn": st.just({}),   # no options: the means since the start cover `iteration` iterations
}
EDITS = st.lists(st.tuples(st.integers(0, 400),
                           st.text(" ,\t()[]:{}0123456789.e\x1b\r\x0c\u00e9Mn", max_size=3)),
                 min_size=1, max_size=2)


def _mutate(line, edits):
    for pos, text in edits:
        pos %= len(line) + 1
        line = line[:pos] + text + line[pos + 1:]
    return line


@st.composite
def log(draw, fmt):
    """Bytes of a log: mostly this format's lines, some mutated, some noise."""
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 19))
        if kind < 14:
            line = draw(PREFIXES) + draw(LINES[fmt])
            if kind == 13:
                line = _mutate(line, draw(EDITS))
            elif kind == 12:   # colour codes anywhere, even inside a label
                for pos, code in draw(COLOURS):
                    pos %= len(line) + 1
                    line = line[:pos] + code + line[pos:]
            lines.append(line.encode("utf-8", "surrogatepass"))
        elif kind == 14 and lines:
            lines.append(draw(st.sampled_from(lines)))       # a repeat (another rank)
        elif kind == 15:
            lines.append(draw(st.sampled_from(JSON_LINES)).encode())
        elif kind == 16:
            lines.append(draw(st.binary(max_size=60)).replace(b"\n", b""))
        elif kind == 17:
            lines.append(b"Saving checkpoint at 1 epochs")
        else:
            lines.append(draw(LINES[fmt]).encode()[:draw(st.integers(0, 200))])
    data = b"\n".join(lines)
    return data if draw(st.booleans()) else data + b"\n"


def _check_log(fmt, options, data, chunk_size, tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "log.txt"
    path.write_bytes(data)
    by_lines, pure, native = readings(CLASSES[fmt], options, path, chunk_size)
    assert native == by_lines
    assert pure == by_lines


@pytest.mark.parametrize("fmt", sorted(CLASSES))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(data=st.data())
def test_made_up_logs_read_the_same_three_ways(fmt, data, tmp_path_factory):
    _need_native()
    _check_log(fmt, data.draw(OPTIONS[fmt]), data.draw(log(fmt)),
               data.draw(st.sampled_from([1, 64, 300, 1 << 20])), tmp_path_factory)
