"""Seeded initial weights shared by every framework of a cell: make, check, load, export.

    python -m harness.trainer.weights make MODEL --out FILE --seed S [--depth 18]
    python -m harness.trainer.weights check MODEL FILE

A file holds torchvision's layout (harness/drivers/weights_map.py, the one home of the layout:
its reference model, its mapping to each framework, the check of a file): the state_dict of
the model the torchvision driver trains, built from `torch.manual_seed(S)` by torchvision's
own initialisation, with seeded, non-trivial frozen batch-norm statistics (so a wrong
mapping of a norm shows in the features) and fixed values in the class slots that some
framework lacks. Exit codes: 0 done, 2 bad input (one line on stderr).
"""
import argparse
import os
import sys

from harness import atomic
from harness.drivers import weights_map
from harness.drivers.weights_map import MODELS, WeightsError, check, reference_model

# the bundled trainer's model names -> the scenario's
TRAINER_MODELS = {"retina": "retinanet", "faster": "faster_rcnn", "mask": "mask_rcnn"}


def make(model, seed, depth=50):
    """The torchvision-layout initial state of `model` on a ResNet-`depth` FPN for `seed` (same on
    every CPU run)."""
    import torch
    from torchvision.ops.misc import FrozenBatchNorm2d
    torch.manual_seed(seed)
    net = reference_model(model, depth)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, module in sorted(net.named_modules()):
            if isinstance(module, FrozenBatchNorm2d):
                n = module.weight.numel()
                module.weight.copy_(0.8 + 0.4 * torch.rand(n, generator=gen))
                module.bias.copy_(0.05 * torch.randn(n, generator=gen))
                module.running_mean.copy_(0.05 * torch.randn(n, generator=gen))
                module.running_var.copy_(0.8 + 0.45 * torch.rand(n, generator=gen))
        state = net.state_dict()
        for key, (rows, value) in weights_map.background_slots(model).items():
            state[key][rows] = value
    return {k: v.detach().clone() for k, v in state.items()}


def versions():
    import torch
    import torchvision
    return {"torch": str(torch.__version__), "torchvision": str(torchvision.__version__)}


def writable(path):
    """Refuse a path that cannot be written, before any work is done for it (its folder is made)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise WeightsError("%s: cannot write: %s is not a folder" % (path, folder))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise WeightsError("%s: cannot write: cannot make its folder: %s" % (path, exc.strerror or exc)) from None
    if os.path.isdir(path):
        raise WeightsError("%s: cannot write: it is a directory" % path)
    if not os.access(folder, os.W_OK) or os.path.exists(path) and not os.access(path, os.W_OK):
        raise WeightsError("%s: cannot write: permission denied" % path)
    return folder


def save(path, model, seed, state):
    """Write atomically: a half-written file never carries the name."""
    import torch
    writable(path)
    try:
        with atomic.replacing(path, "wb") as f:   # readable by a container user, as open() makes it
            torch.save(weights_map.pack(model, seed, state, versions()), f)
    except OSError as exc:
        raise WeightsError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None


load_into = weights_map.load      # (net, path, model, framework) -> tensors loaded


def export(net, framework, model, depth=50):
    """`net`'s state in torchvision's layout (what load_into would turn back into it)."""
    reference = reference_model(model, depth).state_dict()
    return weights_map.from_framework(net.state_dict(), framework, model, reference)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.weights", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="action", required=True)
    mk = sub.add_parser("make", help="write one seeded initial state in torchvision's layout")
    mk.add_argument("model")
    mk.add_argument("--out", required=True)
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--depth", type=int, default=50, choices=weights_map.DEPTHS, help="ResNet depth of the backbone")
    ck = sub.add_parser("check", help="refuse a file that does not fit MODEL")
    ck.add_argument("model")
    ck.add_argument("file")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.model not in MODELS:
            raise WeightsError("unknown model %r (known: %s)" % (args.model, ", ".join(MODELS)))
        if args.action == "make":
            writable(args.out)
            save(args.out, args.model, args.seed, make(args.model, args.seed, args.depth))
            print("wrote %s: %s, ResNet-%d FPN, seed %d, torchvision layout" % (
                args.out, args.model, args.depth, args.seed))
        else:
            n = check(args.file, args.model)
            print("%s: %s weights, %d tensors, fit" % (args.file, args.model, n))
    except WeightsError as exc:
        print("error: %s" % exc, file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
