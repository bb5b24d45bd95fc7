"""A tiny learnable set and a ResNet-18 FPN weights file, for tests that train a framework a step or two."""
import subprocess
import sys

from harness.plan import learnable
from tests.support.cliproc import ROOT


def learnable_with_weights(root, model):
    """((train annotations, train images), weights file) of 2 training images of 64x64 under `root`."""
    (ann, images), _ = learnable.make_learnable(root, images=2, val_images=1, size=(64, 64))
    weights = root / ("%s-r18.pt" % model)
    subprocess.run([sys.executable, "-m", "harness.cli", "weights", "make", model, "--out", str(weights),
                    "--depth", "18", "--seed", "0"], cwd=str(ROOT), check=True, capture_output=True, timeout=300)
    return (str(ann), str(images)), str(weights)
