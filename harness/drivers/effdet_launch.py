"""Starts efficientdet-pytorch's train.py so that a trial ends with its measured window.

    python effdet_launch.py --effdet DIR --stop-after N -- TRAIN_ARGS...

At the pinned commit train.py has no flag for either: EfficientDet(config) fetches timm's
ImageNet backbone weights when the model is built, and a run trains whole epochs, each
followed by a COCO evaluation. This imports train.py as a module and changes three things
before calling its main(): the model is built with pretrained_backbone=False (random
weights, nothing downloaded); the first epoch's loader yields only its first N batches, so
the epoch (and its log, one line per batch with --log-interval 1) ends at iteration N; and
the process exits 0 right after that epoch, before the evaluation. Everything inside an
iteration is train.py's own. Under torch.distributed.run, which passes LOCAL_RANK in the
environment only, the rank is handed to train.py's --local_rank.
"""
import argparse
import importlib.util
import logging
import os
import sys


class FirstBatches:
    """A loader's first `count` batches, with the loader's other attributes."""

    def __init__(self, loader, count):
        self.loader = loader
        self.count = min(count, len(loader))

    def __len__(self):
        return self.count

    def __iter__(self):
        for index, batch in enumerate(self.loader):
            if index >= self.count:
                return
            yield batch

    def __getattr__(self, name):
        return getattr(self.loader, name)


def without_pretrained_backbone(build):
    def efficientdet(config, *args, **kwargs):
        kwargs["pretrained_backbone"] = False
        return build(config, *args, **kwargs)
    return efficientdet


def stopping_after(train_epoch, count):
    def first_epoch_only(epoch, model, loader, *args, **kwargs):
        train_epoch(epoch, model, FirstBatches(loader, count), *args, **kwargs)
        logging.info("detbench: iteration %d logged; the measured window is complete, stopping", count)
        sys.exit(0)
    return first_epoch_only


def load_train(effdet_dir):
    sys.path.insert(0, effdet_dir)
    spec = importlib.util.spec_from_file_location("effdet_train", os.path.join(effdet_dir, "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(prog="effdet_launch.py")
    parser.add_argument("--effdet", required=True, help="efficientdet-pytorch's checkout")
    parser.add_argument("--stop-after", type=int, required=True, help="iterations to train")
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    train_args = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    if "LOCAL_RANK" in os.environ and not any(a.startswith("--local_rank") for a in train_args):
        train_args = train_args + ["--local_rank", os.environ["LOCAL_RANK"]]
    train = load_train(args.effdet)
    train.EfficientDet = without_pretrained_backbone(train.EfficientDet)
    train.train_epoch = stopping_after(train.train_epoch, args.stop_after)
    sys.argv = [os.path.join(args.effdet, "train.py")] + train_args
    train.main()


if __name__ == "__main__":
    main()
