"""Log scrapers: one module per training-log format, chosen by name.

Each ``scrape(lines, **options)`` returns (records, errors) and never raises on bad
input. Modules also offer ``iter_scrape`` (a generator, flat memory) and, except
jsonl, ``iter_scrape_path`` (streaming from a file with a chunked fast path, and the
compiled scanner for the text formats of mmdetection, detectron2 and
maskrcnn-benchmark). ``scrape_path(name, path)`` reads a log file the fastest way its
format has; every way gives the same (records, errors).
"""
from harness.scrapers import (common, detectron2, dllogger, effdet, jsonl,
                              maskrcnn_benchmark, mmdet_v1, mmdet_v2, mmdet_v3,
                              simpledet_mxnet, torchvision_ref)

SCRAPERS = {
    "detbench-jsonl": jsonl.scrape,
    "mmdet-v1": mmdet_v1.scrape,
    "mmdet-v2": mmdet_v2.scrape,
    "mmdet-v3": mmdet_v3.scrape,
    "maskrcnn-benchmark": maskrcnn_benchmark.scrape,
    "detectron2": detectron2.scrape,
    "torchvision-ref": torchvision_ref.scrape,
    "simpledet-mxnet": simpledet_mxnet.scrape,
    "dllogger": dllogger.scrape,
    "effdet": effdet.scrape,
}

# The formats that read a file with a fast path (all but detbench-jsonl).
PATH_SCRAPERS = {
    "mmdet-v1": mmdet_v1.iter_scrape_path,
    "mmdet-v2": mmdet_v2.iter_scrape_path,
    "mmdet-v3": mmdet_v3.iter_scrape_path,
    "maskrcnn-benchmark": maskrcnn_benchmark.iter_scrape_path,
    "detectron2": detectron2.iter_scrape_path,
    "torchvision-ref": torchvision_ref.iter_scrape_path,
    "simpledet-mxnet": simpledet_mxnet.iter_scrape_path,
    "dllogger": dllogger.iter_scrape_path,
    "effdet": effdet.iter_scrape_path,
}


class UnknownScraperError(KeyError):
    """A scraper name that is not in SCRAPERS; the message lists the valid names."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def get(name):
    """Return the scrape function called ``name``; UnknownScraperError lists the valid names."""
    try:
        return SCRAPERS[name]
    except KeyError:
        raise UnknownScraperError(
            "unknown scraper %r; valid names: %s" % (name, ", ".join(sorted(SCRAPERS)))
        ) from None


def scrape_path(name, path, **options):
    """Return (records, errors) of the log file at ``path``, streamed from disk."""
    scrape = get(name)
    iter_path = PATH_SCRAPERS.get(name)
    if iter_path is None:
        return scrape(common.read_lines(path), **options)
    return common.collect(iter_path(path, **options))
