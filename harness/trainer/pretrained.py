"""Initial weights from a file: an ImageNet ResNet for the backbone, or a whole detector.

model.backbone_weights=FILE: a classification ResNet's state_dict in torchvision's layout
(`torchvision.models.resnet50().state_dict()`: conv1.weight, bn1.*, layer1.0.conv1.weight,
...; fc.* is ignored), bare or under "state_dict" or "model". Each batch norm's weight,
bias and running statistics go into the frozen norm the trainer folds into the conv before
it (backbone.ConvFrozenBN), so the backbone computes torchvision's eval-mode features.

model.weights=FILE (also `--weights FILE`): a whole detector, in one of
  - a detbench weights file (`detbench weights make`, torchvision's layout, model checked);
  - a trainer checkpoint (checkpoint.py) or a plain state_dict of the bundled model;
  - a plain state_dict of torchvision's detector (keys backbone.body.*, rpn.*, roi_heads.*).
torchvision's layout is mapped by harness/drivers/weights_map.py.

A file that does not fit raises WeightsError: one line naming the file and the first key
that does not fit. Files are read with torch.load(weights_only=True): no code runs.
"""
import torch

from harness.drivers import weights_map
from harness.drivers.weights_map import COUNTERS, WeightsError

from .weights import TRAINER_MODELS

CHECKPOINT_FORMAT = "detbench-trainer-checkpoint"     # checkpoint.FORMAT
IGNORED_BACKBONE_PREFIXES = ("fc.",)                  # the ImageNet classifier
_BODY = "backbone.body."


def read(path):
    """The object a torch file holds (tensors and plain containers only)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise WeightsError("%s: no such file" % path) from None
    except IsADirectoryError:
        raise WeightsError("%s: is a directory, not a torch file" % path) from None
    except PermissionError:
        raise WeightsError("%s: cannot read: permission denied" % path) from None
    except Exception as exc:        # not a torch file, damaged archive, content that needs code
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise WeightsError("%s: not a torch file (%s)" % (path, first)) from None


def state_dict_of(obj, path):
    """`obj` itself, or obj["state_dict"] / obj["model"], as a {name: tensor} dict."""
    if isinstance(obj, dict):
        for wrapper in ("state_dict", "model"):
            if isinstance(obj.get(wrapper), dict):
                obj = obj[wrapper]
                break
    if not isinstance(obj, dict) or not obj:
        raise WeightsError("%s: holds no state_dict (a {name: tensor} dict, bare or under "
                           "\"state_dict\" or \"model\")" % path)
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise WeightsError("%s: key %s does not hold a tensor: not a state_dict" % (path, key))
    return obj


def _shape(t):
    return [int(s) for s in t.shape]


# --- the backbone ------------------------------------------------------------------------------

def _describe(backbone):
    from torchvision.models.resnet import Bottleneck
    block = "bottleneck" if isinstance(backbone.stages[0][0], Bottleneck) else "basic"
    layers = [len(stage) for stage in backbone.stages]
    return block, layers


def torchvision_resnet_keys(block, layers):
    """The state_dict keys of torchvision's ResNet with these blocks, in its order (no fc, no counters)."""
    from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
    with torch.device("meta"):
        net = ResNet(Bottleneck if block == "bottleneck" else BasicBlock, list(layers))
    return [k for k in net.state_dict() if not k.startswith(IGNORED_BACKBONE_PREFIXES) and not k.endswith(COUNTERS)]


def map_backbone_state(state, backbone, source):
    """torchvision ResNet `state` -> a complete state_dict of the bundled `backbone`."""
    block, layers = _describe(backbone)
    arch = "torchvision's ResNet (%s blocks, layers %s)" % (block, ",".join(map(str, layers)))
    expected = torchvision_resnet_keys(block, layers)
    known = set(expected)
    target = backbone.state_dict()
    prefixed = {"backbone." + k for k in target}      # the names weights_map maps to, in the detector
    out = {}
    for key, tensor in state.items():
        if key.startswith(IGNORED_BACKBONE_PREFIXES) or key.endswith(COUNTERS):
            continue
        if key not in known:
            hint = ""
            if key.startswith(_BODY) or key.startswith("backbone.stem.") or key.startswith("neck."):
                hint = " (a detector's weights: use model.weights)"
            raise WeightsError("%s: key %s is not in %s%s" % (source, key, arch, hint))
        name = weights_map.native_name(_BODY + key, "detbench-trainer", prefixed)
        if name is None or not name.startswith("backbone."):
            raise WeightsError("%s: key %s has no place in this backbone" % (source, key))
        name = name[len("backbone."):]
        if name not in target:
            raise WeightsError("%s: key %s has no place in this backbone (no %s)" % (source, key, name))
        if _shape(tensor) != _shape(target[name]):
            raise WeightsError("%s: key %s has shape %s, this backbone expects %s" % (
                source, key, _shape(tensor), _shape(target[name])))
        out[name] = tensor
    for key in expected:
        if key not in state:
            raise WeightsError("%s: no value for %s of %s" % (source, key, arch))
    for name, value in target.items():
        if name not in out:
            if not name.endswith(COUNTERS):
                raise WeightsError("%s: no value for this backbone's %s" % (source, name))
            out[name] = value
    return out


def load_backbone(backbone, path):
    """Load an ImageNet ResNet state_dict (torchvision's layout) into `backbone`; returns the count."""
    state = state_dict_of(read(path), path)
    mapped = map_backbone_state(state, backbone, path)
    backbone.load_state_dict(mapped, strict=True)
    return len(mapped)


# --- the whole detector ------------------------------------------------------------------------

def _bundled(state, target, source, what):
    """A bundled-layout `state` checked against `target` key by key (file order first)."""
    out = {}
    for key, tensor in state.items():
        if key not in target:
            raise WeightsError("%s: key %s is not in %s" % (source, key, what))
        if _shape(tensor) != _shape(target[key]):
            raise WeightsError("%s: key %s has shape %s, %s expects %s" % (
                source, key, _shape(tensor), what, _shape(target[key])))
        out[key] = tensor
    for key, value in target.items():
        if key not in out:
            if not key.endswith(COUNTERS):
                raise WeightsError("%s: no value for %s's %s" % (source, what, key))
            out[key] = value
    return out


def map_detector_state(obj, net, model, source, what):
    """(state_dict for `net`, layout name) from a loaded file object; `model` is the scenario's name."""
    target = net.state_dict()
    if isinstance(obj, dict) and obj.get("format") == weights_map.FORMAT:
        state = weights_map.unpack(obj, source, model)
        return weights_map.to_framework(state, "detbench-trainer", model, target, source=source), "torchvision"
    if isinstance(obj, dict) and obj.get("format") == CHECKPOINT_FORMAT:
        if not isinstance(obj.get("model"), dict):
            raise WeightsError("%s: trainer checkpoint without a model state" % source)
        name = (obj.get("config") or {}).get("model.name")
        ours = {v: k for k, v in TRAINER_MODELS.items()}.get(model)
        if name and ours and name != ours:
            raise WeightsError("%s: checkpoint of a %s model, this run trains %s" % (source, name, ours))
        return _bundled(state_dict_of(obj["model"], source), target, source, what), "trainer checkpoint"
    state = state_dict_of(obj, source)
    if any(k.startswith(_BODY) for k in state):
        return weights_map.to_framework(state, "detbench-trainer", model, target, source=source), "torchvision"
    return _bundled(state, target, source, what), "trainer"


def load_detector(net, path, model, what="this model"):
    """Load a whole detector's weights into `net`; returns (tensor count, layout)."""
    mapped, layout = map_detector_state(read(path), net, model, path, what)
    net.load_state_dict(mapped, strict=True)
    return len(mapped), layout
