"""Scenario options of the container rivals, and where their initial weights come from.

Nothing is downloaded when a trial starts: a rival starts from random weights, or from the
weights file its scenario option `weights` names (a path that is mounted into the trial).
The normalized settings say which, as `init`: "random" or "file:<name>".
"""
import os

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
    if not isinstance(path, str) or not os.path.isabs(path):
        raise UserError("%s: options.weights is an absolute path to a mounted weights file, got %r"
                        % (ctx.framework, path))
    return path


def init(ctx):
    path = weights(ctx)
    return "random" if path is None else "file:" + os.path.basename(path)


def one_node(ctx):
    if ctx.nodes != 1:
        raise UserError("%s: runs on one node here (its launch has no multi-node rendezvous); "
                        "nodes must be 1, got %d" % (ctx.framework, ctx.nodes))
