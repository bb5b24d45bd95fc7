"""Log scrapers: one module per training-log format, chosen by name.

Each ``scrape(lines, **options)`` returns (records, errors) and never raises on bad
input. Modules also offer ``iter_scrape`` (a generator, flat memory) and, except
jsonl, ``iter_scrape_path`` (streaming from a file with a chunked fast path).
"""
from harness.scrapers import (detectron2, dllogger, effdet, jsonl, maskrcnn_benchmark,
                              mmdet_v1, mmdet_v2, mmdet_v3, simpledet_mxnet,
                              torchvision_ref)

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
