"""Scrapers never raise, and read dirty logs the way rank 0 printed them."""
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.measure import scrapers
from harness.measure.records import IterationRecord, ScrapeError
from harness.measure.scrapers import common
from tests.scrapers.fed import fed_line_by_line

FIXTURES = Path(__file__).parent / "fixtures"
MMDET_V2_LINE = ("2021-03-01 09:11:01,500 - mmdet - INFO - Epoch [1][100/120]\tlr: 3.986e-03, "
                 "eta: 7:01:10, time: 0.388, data_time: 0.018, memory: 3375, loss: 1.0943")
D2_LINE = ("[05/17 10:42:13] d2.utils.events INFO:  eta: 11:02:41  iter: 19  total_loss: 1.104"
           "    time: 0.3716  last_time: 0.3690  data_time: 0.0132  last_data_time: 0.0095"
           "   lr: 0.00079922  max_mem: 3189M")
ALL_FIXTURE_LINES = [line for p in sorted(FIXTURES.iterdir())
                     for line in p.read_text(encoding="utf-8").splitlines()]


def _check(result):
    records, errors = result
    assert all(isinstance(r, IterationRecord) for r in records)
    assert all(isinstance(e, ScrapeError) and len(e.text) <= 200 for e in errors)


def test_ansi_colours_are_stripped():
    line = "\x1b[32m" + D2_LINE.replace("iter:", "\x1b[0miter:") + "\x1b[0m"
    records, errors = scrapers.get("detectron2")([line])
    assert records[0].iteration == 20 and records[0].time_s == 0.3716 and not errors


def test_carriage_return_redraw_keeps_last_segment():
    line = "50%|#####     | 5/10\r 90%|######### | 9/10\r" + MMDET_V2_LINE + "\r\n"
    records, errors = scrapers.get("mmdet-v2")([line])
    assert [r.iteration for r in records] == [100] and not errors


def test_interleaved_ranks_keep_rank_zero_only():
    other = MMDET_V2_LINE.replace("time: 0.388", "time: 9.999")
    lines = ["[rank1]:" + other, "[rank0]:" + MMDET_V2_LINE, "1: " + other,
             "[default1]:" + other, "[1,1]<stdout>:" + other]
    records, errors = scrapers.get("mmdet-v2")(lines)
    assert [(r.line, r.time_s) for r in records] == [(1, 0.388)] and not errors


def test_duplicate_iterations_from_unprefixed_ranks_are_dropped():
    records, _ = scrapers.get("mmdet-v2")([MMDET_V2_LINE, MMDET_V2_LINE])
    assert [r.line for r in records] == [0]


def test_truncated_last_line_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes((MMDET_V2_LINE + "\n" + MMDET_V2_LINE[:-30]).encode())
    from harness.measure.scrapers import mmdet_v2
    items = list(mmdet_v2.iter_scrape_path(path))
    assert isinstance(items[0], IterationRecord)
    assert isinstance(items[1], ScrapeError) and items[1].line == 1


def test_nan_and_inf_values():
    line = MMDET_V2_LINE.replace("loss: 1.0943", "loss: nan").replace("time: 0.388", "time: inf")
    records, errors = scrapers.get("mmdet-v2")([line])
    assert math.isinf(records[0].time_s) and math.isnan(records[0].loss) and not errors


def test_non_numeric_value_is_an_error():
    records, errors = scrapers.get("mmdet-v2")([MMDET_V2_LINE.replace("0.388", "0.3x8")])
    assert not records and errors[0].line == 0


def test_invalid_utf8_bytes(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"\xff\xfe garbage \xc3\x28\n" + b"\xe2\x82" + MMDET_V2_LINE.encode()
                     + b" \xe2\x82\n")
    lines = list(common.read_lines(path))
    assert len(lines) == 2 and "\ufffd" in lines[0]
    records, _ = scrapers.get("mmdet-v2")(lines)
    assert [r.iteration for r in records] == [100]
    records, _ = scrapers.get("mmdet-v2")([MMDET_V2_LINE.encode() + b" \xff"])
    assert [r.iteration for r in records] == [100]


def test_read_lines_streams_and_keeps_indices(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"a\r\nb\rc\n[rank1]:x\n\x1b[1mq\x1b[0m")
    assert list(common.read_lines(path)) == ["a", "c", "", "q"]


fixture_lines = st.lists(st.sampled_from(ALL_FIXTURE_LINES), max_size=8)
mutations = st.lists(st.tuples(st.integers(0, 400), st.text(max_size=5)), max_size=4)


def _mutate(line, edits):
    for pos, text in edits:
        pos %= len(line) + 1
        line = line[:pos] + text + line[pos + 1:]
    return line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_FIXTURE_LINES), mutations), max_size=6),
       st.lists(st.binary(max_size=80), max_size=4))
def test_no_scraper_raises_on_mutated_lines_or_bytes(pairs, blobs):
    lines = [_mutate(line, edits) for line, edits in pairs] + blobs
    for name, scrape in scrapers.SCRAPERS.items():
        if name == "detbench-jsonl":
            continue  # owned and tested elsewhere
        _check(scrape(lines))


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=3000))
def test_no_path_scraper_raises_on_random_bytes(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("blob") / "log.bin"
    path.write_bytes(blob)
    for iter_scrape_path in scrapers.PATH_SCRAPERS.values():
        list(iter_scrape_path(path))



def _path_scrapers():
    from harness.measure.scrapers import (detectron2, dllogger, effdet, maskrcnn_benchmark, mmdet_v2,
                                  mmdet_v3, simpledet_mxnet, torchvision_ref)
    return [mmdet_v2.MmcvScraper, mmdet_v3.MmengineScraper, maskrcnn_benchmark.MaskrcnnScraper,
            detectron2.Detectron2Scraper, torchvision_ref.TorchvisionScraper,
            simpledet_mxnet.SpeedometerScraper, dllogger.DlloggerScraper, effdet.EffdetScraper]


def _cut(line, at):
    """The line cut in two at ``at`` (a fraction), as a crashed writer leaves it, or whole."""
    if at is None:
        return [line]
    k = int(len(line) * at)
    return [line[:k], line[k:]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_FIXTURE_LINES), mutations,
                          st.one_of(st.none(), st.floats(0, 1))), min_size=1, max_size=12),
       st.lists(st.binary(max_size=80), max_size=3), st.sampled_from([1, 50, 400, 1 << 16]))
def test_reading_a_file_gives_what_feeding_its_lines_gives(tmp_path_factory, triples, blobs,
                                                           chunk_size):
    """Reading a file (chunked pure Python, or the compiled scanner) equals feeding its
    lines one by one, also for mutated and cut lines a pattern might read across ends."""
    lines = [part for line, edits, at in triples for part in _cut(_mutate(line, edits), at)]
    data = b"\n".join([line.encode("utf-8", "surrogatepass") for line in lines]
                      + [b.replace(b"\n", b"") for b in blobs])
    path = tmp_path_factory.mktemp("log") / "log.txt"
    path.write_bytes(data)
    for cls in _path_scrapers():
        by_lines = [repr(x) for x in fed_line_by_line(cls(), path)]
        for native in (False, True):
            got = [repr(x) for x in common.run_path(cls(), path, chunk_size, native=native)]
            assert got == by_lines, (cls.__name__, native)


def test_a_cut_effdet_line_is_not_read_across_the_line_end(tmp_path):
    from harness.measure.scrapers import effdet
    line = (FIXTURES / "effdet.log").read_text(encoding="utf-8").splitlines()[1]
    cut = line.index("  (") + 4
    path = tmp_path / "log.txt"
    path.write_text(line[:cut] + "\nx" + line[line.index(")  LR:"):] + "\n", encoding="utf-8")
    items = list(effdet.iter_scrape_path(path))
    assert items == list(effdet.iter_scrape(path.read_text(encoding="utf-8").splitlines()))
    assert [type(item) for item in items] == [ScrapeError]


def test_a_line_is_cleaned_once():
    """Under srun --label, rank 0 printing "1: text" gives "0: 1: text": one prefix goes."""
    line = "0: 1: " + MMDET_V2_LINE
    records, errors = scrapers.get("mmdet-v2")([line])
    assert [r.iteration for r in records] == [100] and not errors
    assert common.clean_line(line) == "1: " + MMDET_V2_LINE
    assert common.clean_line("\x1b\x1b[0m[0mtext") == "\x1b[0mtext"   # one pass of the pattern


def test_ranks_of_many_digits(tmp_path):
    """int() refuses more than 4300 digits: such a line is skipped, by every reader."""
    lines = ["[" + "0" * 5000 + "]:" + MMDET_V2_LINE, "1" * 5000 + ": " + MMDET_V2_LINE,
             "[rank" + "0" * 70 + "]:" + MMDET_V2_LINE.replace("100/", "110/")]
    path = tmp_path / "log.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from harness.measure.scrapers import mmdet_v2
    expected = list(mmdet_v2.iter_scrape(lines))
    assert [(r.iteration, r.line) for r in expected] == [(110, 2)]
    for native in (False, True):
        assert list(common.run_path(mmdet_v2.MmcvScraper(), path, native=native)) == expected
    assert list(common.read_lines(path))[:2] == ["", ""]
