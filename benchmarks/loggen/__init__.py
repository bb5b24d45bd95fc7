"""Training logs written from known per-iteration times, in each framework's own printed format.

For every format `detbench scrape --list-formats` names, a generator writes a log the way
that framework writes it (its logging period, its averaging and its rounding, read from the
framework's source), with random periods, epoch lengths, run lengths up to 200,000
iterations, crashes and resumes (counters that go back), warnings and evaluation output
between the records, and now and then a record line a crash left as NUL bytes. Each log
comes with its truth: the runs, every iteration's time and data time, and the lines of its
records. `FixedChooser` fixes the choices that make one case (a logging period, an epoch
length, a batch) and draws the rest.

    from benchmarks import loggen
    log = loggen.generate("detectron2", loggen.RandomChooser(random.Random(7)))
    log.write(path); log.mean(run=1, lo=201, hi=1200)

`windows.requests` draws windows to ask of a log, `judge.judge` says whether an answer (a
figure, or a refusal) is true of the log, and `interface` asks detbench.
"""
from . import (detbench, detectron, detectron2, dllogger, effdet, maskrcnn, mmcv, mmengine, simpledet,
               tensorpack, torchvision)
from .core import Chooser, Fault, FixedChooser, Log, RandomChooser, Run

GENERATORS = {
    "detbench-jsonl": detbench.generate,
    "mmdet-v1": mmcv.generate_v1,
    "mmdet-v2": mmcv.generate_v2,
    "mmdet-v3": mmengine.generate,
    "maskrcnn-benchmark": maskrcnn.generate,
    "detectron2": detectron2.generate,
    "torchvision-ref": torchvision.generate,
    "simpledet-mxnet": simpledet.generate,
    "dllogger": dllogger.generate,
    "effdet": effdet.generate,
    "detectron": detectron.generate,
    "tensorpack": tensorpack.generate,
}


def generate(fmt, choose, max_iters=200000, max_records=None):
    """A generated log of format `fmt`, every choice drawn from `choose`: trainings of up to
    `max_iters` iterations, and of at most about `max_records` records where that is given."""
    return GENERATORS[fmt](choose, max_iters=max_iters, max_records=max_records)


__all__ = ["GENERATORS", "generate", "Chooser", "RandomChooser", "FixedChooser", "Log", "Run", "Fault"]
