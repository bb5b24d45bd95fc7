"""Scenario options of the container rivals, where their initial weights and data come from.

Nothing is downloaded when a trial starts (the network is off): a rival starts from random
weights, or from the weights file its scenario option `weights` names (a path that is mounted
into the trial). The normalized settings say which, as `init`: "random" or "file:<name>". A
config override that would make a framework download (a URL, or one of the frameworks' own
schemes such as catalog:// or detectron2://) is refused before the run starts, naming what to
give instead.
"""
import os
import re

from harness.errors import UserError


def options(ctx, known):
    """ctx.options, refused with one line when it holds a key the adapter does not know."""
    unknown = sorted(set(ctx.options) - set(known))
    if unknown:
        raise UserError("%s: unknown options %s (known: %s)" % (
            ctx.framework, ", ".join(unknown), ", ".join(sorted(known))))
    return dict(ctx.options)


def weights(ctx):
    """The weights file the scenario gave (options.<framework>.weights), or None: random."""
    if getattr(ctx, "weights", None):
        raise UserError("%s: cannot load the scenario's shared initial weights (torchvision's layout); "
                        "give its own weights file as options.%s.weights, or exclude the cell"
                        % (ctx.framework, ctx.framework))
    path = ctx.options.get("weights")
    if path is None or path == "":
        return None
    no_downloads(ctx.framework, [path])
    if not isinstance(path, str) or not os.path.isabs(path):
        raise UserError("%s: options.weights is an absolute path to a mounted weights file, got %r"
                        % (ctx.framework, path))
    return path


# what makes a framework fetch a file at start: URLs, and the schemes its loaders resolve to one
# (maskrcnn-benchmark catalog://, detectron2 detectron2://, mmcv torchvision://, open-mmlab://, ...)
DOWNLOAD = re.compile(r"^(?:[a-z][a-z0-9+.-]*)://", re.IGNORECASE)


def no_downloads(framework, args):
    """UserError (one line) when one of `args` (extra arguments, a weights option) names a file
    the framework would fetch."""
    for arg in args:
        if DOWNLOAD.match(str(arg)) and not str(arg).lower().startswith("file://"):
            raise UserError("%s would download %s at start, and trials run without a network: give the file "
                            "(as options.%s.weights for initial weights, or a mounted path) instead"
                            % (framework, arg, framework))


def coco_only(ctx):
    """UserError unless the scenario gives COCO files (the framework reads no synthetic data)."""
    if not ctx.data:
        raise UserError("%s reads COCO files only: give the scenario data: {annotations: FILE, images: DIR} "
                        "(make a small set with `detbench dataset make-coco DIR`)" % ctx.framework)


def init(ctx):
    path = weights(ctx)
    return "random" if path is None else "file:" + os.path.basename(path)


def one_node(ctx):
    if ctx.nodes != 1:
        raise UserError("%s: runs on one node here (its launch has no multi-node rendezvous); "
                        "nodes must be 1, got %d" % (ctx.framework, ctx.nodes))
