"""The training step's forward and backward captured once as a CUDA graph and replayed
(`train.cuda_graph=true`, one GPU).

A replay launches the step's thousands of kernels as one, so the host no longer paces the
GPU. That needs a step that never waits for the device and has the same shapes every time:

- the two-stage models run their sync-free path (`model.sync_free=true`: fixed-point NMS,
  RoIAlign from one atlas, RoIs in padded slots); RetinaNet's step is sync-free already;
- every batch's targets are padded to fixed slots (`target_slots`): objects to
  `data.max_gt` (synthetic data: `data.synthetic_max_boxes`), crowd regions to the data
  set's most in one image, mask crops to `data.mask_crop` + 1 pixels a side. Padded objects
  have label 0 and zero boxes, as the padding a batch already has up to its largest image's
  count, so the losses do not change;
- the images keep the fixed canvas (`data.canvas=fixed`).

What is captured: zeroing the gradients in place, the forward under autocast (its weight
cache off, as graphs require), the loss sum and the (scaled) backward, which adds into
gradient tensors allocated before the capture, so the optimizer always finds them in the
same place. The optimizer step, the learning rate, the loss scaler's checks and the logging
stay outside, as eager code. The first `WARMUP` steps run eagerly on a side stream (cuDNN
picks its kernels, lazy state is made); the next step is captured and every step after it
copies its batch into the captured inputs and replays.

On the CPU the command line refuses the option. `capture=False` runs the same static-input
step without a graph: the tests use it to check that padding to slots and adding into
preallocated gradients give the plain step's losses. The capture itself needs a GPU.
"""
import torch
import torch.nn.functional as F

from .coco import DataError

WARMUP = 3


def refusal(cfg, device_kind, world):
    """One line saying why `train.cuda_graph=true` cannot work with these settings, or None."""
    t, m, d = cfg.train, cfg.model, cfg.data
    if not t.cuda_graph:
        return None
    if device_kind != "cuda":
        return ("train.cuda_graph=true needs a CUDA device: a CUDA graph replays CUDA kernels, and this "
                "run is on the CPU")
    if world > 1:
        return ("train.cuda_graph=true runs on one GPU: capturing DistributedDataParallel's gradient "
                "all-reduce is not built")
    if m.name in ("faster", "mask") and not m.sync_free:
        return ("train.cuda_graph=true needs model.sync_free=true for %s: the plain two-stage step reads "
                "values back to the host (NMS, sampling), which a graph cannot capture" % m.name)
    for key in ("compile_backbone", "checkpoint_backbone"):
        if getattr(t, key):
            return "train.cuda_graph=true with train.%s=true is not built: use one of them" % key
    if d.source == "coco" and d.canvas != "fixed":
        return ("train.cuda_graph=true needs data.canvas=fixed: a graph replays one image shape, and "
                "data.canvas=%s pads each batch to its own" % d.canvas)
    if m.name == "mask" and d.source == "coco" and not d.mask_crop:
        return ("train.cuda_graph=true with Mask R-CNN on COCO needs data.mask_crop (e.g. 128): without it "
                "each of the data.max_gt mask slots would be as large as the canvas")
    return None


def target_slots(cfg, batches):
    """The fixed size of each padded dimension of a batch's targets."""
    d, m = cfg.data, cfg.model
    slots = {"objects": max(1, d.synthetic_max_boxes if d.source == "synthetic" else d.max_gt)}
    crowd = getattr(batches, "max_crowd", 0)
    if crowd:
        slots["crowd"] = crowd
    if m.name == "mask" and d.source == "coco":
        slots["crop"] = (d.mask_crop + 1, d.mask_crop + 1)   # pack() repeats a canvas edge row once
    return slots


def _pad(t, dim, size, value=0.0):
    """`t` padded with `value` at the end of `dim` up to `size`."""
    extra = size - t.shape[dim]
    if extra == 0:
        return t
    spec = [0, 0] * (t.dim() - dim - 1) + [0, extra]
    return F.pad(t, spec, value=value)


def pad_targets(targets, slots):
    """The targets with each padded dimension at its slot's size; DataError where a batch has
    more than a slot holds."""
    g = slots["objects"]
    have = {"objects": targets["labels"].shape[1]}
    if "crowd" in targets:
        have["crowd"] = targets["crowd"].shape[1]
    if "mask_crops" in targets and "crop" in slots:
        have["crop"] = tuple(targets["mask_crops"].shape[-2:])
    for name, n in have.items():
        limit = slots.get(name)
        if limit is not None and (n > limit if name != "crop" else n[0] > limit[0] or n[1] > limit[1]):
            raise DataError("a batch has %s %s, over the %s slot of the captured step (train.cuda_graph)"
                            % (name, n, limit))
    out = dict(targets)
    out["boxes"] = _pad(targets["boxes"], 1, g)
    out["labels"] = _pad(targets["labels"], 1, g)
    if "mask_crops" in targets:
        crops = _pad(targets["mask_crops"], 1, g)
        if "crop" in slots:
            crops = _pad(_pad(crops, 2, slots["crop"][0]), 3, slots["crop"][1])
        out["mask_crops"] = crops
        affine = targets["mask_affine"]
        if affine.shape[1] < g:        # an empty slot maps the canvas onto itself, as collate's
            fill = affine.new_tensor([1.0, 1.0, 0.0, 0.0]).expand(affine.shape[0], g - affine.shape[1], 4)
            affine = torch.cat([affine, fill], dim=1)
        out["mask_affine"] = affine
    if "crowd" in targets and "crowd" in slots:
        out["crowd"] = _pad(targets["crowd"], 1, slots["crowd"])
    return out


class GraphedStep:
    """Forward and backward of a training step on fixed-shape inputs, captured as a CUDA graph
    after WARMUP eager steps. Calling it leaves the step's gradients in each parameter's .grad
    and returns ({name: loss}, total)."""

    def __init__(self, model, optimizer, scaler, autocast, device, slots, capture=True):
        """autocast: makes the step's autocast context, with its weight cache off (a graph
        must not keep casts made during the capture)."""
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.autocast, self.device, self.slots = autocast, device, slots
        self.capture = capture
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.steps = 0
        self.graph = None
        self.inputs = None          # the captured step's images and targets
        self.outputs = None         # its losses and total, refreshed by each replay

    def __call__(self, images, targets):
        targets = pad_targets(targets, self.slots)
        self.steps += 1
        if self.steps <= WARMUP:
            return self._on_side_stream(images, targets)
        if self.inputs is None:
            self.inputs = (images.clone(), {k: v.clone() for k, v in targets.items()})
            if self.capture:
                self._capture()
        else:
            self._load(images, targets)
        if self.capture:
            self.graph.replay()
        else:
            self.outputs = self._forward_backward(*self.inputs)
        return self.outputs

    def _forward_backward(self, images, targets):
        for p in self.params:       # gradients stay where they are: zeroed, then added into
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()
        with self.autocast():
            losses = self.model(images, targets)
        total = sum(losses.values())
        (self.scaler.scale(total) if self.scaler is not None else total).backward()
        return losses, total

    def _on_side_stream(self, images, targets):
        if not self.capture:
            return self._forward_backward(images, targets)
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = self._forward_backward(images, targets)
        main.wait_stream(side)
        return out

    def _capture(self):
        torch.cuda.synchronize(self.device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = self._forward_backward(*self.inputs)

    def _load(self, images, targets):
        static_images, static_targets = self.inputs
        shapes = {name: tuple(v.shape) for name, v in targets.items()}
        captured = {name: tuple(v.shape) for name, v in static_targets.items()}
        if images.shape != static_images.shape or shapes != captured:
            raise DataError("a batch of images %s and targets %s does not fit the captured step's %s and %s "
                            "(train.cuda_graph)" % (tuple(images.shape), shapes, tuple(static_images.shape), captured))
        static_images.copy_(images, non_blocking=True)
        for name, value in targets.items():
            static_targets[name].copy_(value, non_blocking=True)
