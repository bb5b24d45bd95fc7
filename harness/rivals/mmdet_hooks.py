"""mmengine hooks the mmdetection driver adds to mmdet's own training loop.

Runs inside the mmdetection framework's pinned env (mmdet_driver.py calls register()
before it executes mmdet's tools/train.py). Two hooks:

- ``DetbenchIterTimerHook`` replaces mmengine's IterTimerHook. Its ``time`` is mmengine's
  own (from the end of the previous iteration to the end of this one: the logging that
  follows an iteration belongs to the next one), but its ``data_time`` is only the wait
  for the batch. mmengine's own data_time runs from the previous iteration's timer, so
  it also holds that iteration's logging, which at one log line per iteration is not
  data loading.
- ``DetbenchWorkHook`` (lowest priority, after the logger) counts the detection work of
  each iteration from what mmdet's own modules return, and prints one
  ``DETBENCH_WORK {json}`` line per iteration on rank 0: proposals the RPN kept, RoIs
  sampled, positive RoIs and mask RoIs (RetinaNet: positive anchors), summed over the
  images of the batch. Its end marks the start of the next iteration's wait for data.
"""
import json
import time

WORK_PREFIX = "DETBENCH_WORK "   # the line of harness/jsonlog.py (the harness is not importable here)
TIMER_HOOK = "DetbenchIterTimerHook"
WORK_HOOK = "DetbenchWorkHook"

# wall time (time.time(), as mmengine's timer) at which the last iteration's hooks, logging
# included, were done; None before the first iteration
_LOGGED = {"at": None}


class WorkCounter:
    """Work counts of the iteration in flight, from wrappers around mmdet's own calls."""

    def __init__(self):
        self.counts = {}

    def add(self, key, value):
        self.counts[key] = self.counts.get(key, 0) + int(value)

    def line(self, iteration):
        obj = {"iteration": iteration}
        obj.update(sorted(self.counts.items()))
        self.counts = {}
        return WORK_PREFIX + json.dumps(obj, sort_keys=True, separators=(",", ":"))

    def install(self, model):
        """Wrap the calls of a two-stage detector or a RetinaNet that decide its work."""
        if hasattr(model, "rpn_head") and hasattr(model, "roi_head"):
            self._wrap_proposals(model.rpn_head)
            roi = model.roi_head
            self._wrap_sampler(roi.bbox_sampler, "sampled_rois", "positive_rois")
            if getattr(roi, "with_mask", False):
                roi.mask_roi_extractor.register_forward_hook(
                    lambda module, args, output: self.add("mask_rois", output.shape[0]))
            return True
        head = getattr(model, "bbox_head", None)
        if head is not None and getattr(head, "sampler", None) is not None:
            self._wrap_sampler(head.sampler, None, "positive_anchors")
            return True
        return False

    def _wrap_proposals(self, rpn_head):
        inner = rpn_head.loss_and_predict

        def loss_and_predict(*args, **kwargs):
            losses, proposals = inner(*args, **kwargs)
            self.add("proposals", sum(len(p) for p in proposals))
            return losses, proposals
        rpn_head.loss_and_predict = loss_and_predict

    def _wrap_sampler(self, sampler, sampled_key, positive_key):
        inner = sampler.sample

        def sample(*args, **kwargs):
            result = inner(*args, **kwargs)
            if sampled_key:
                self.add(sampled_key, len(result.pos_inds) + len(result.neg_inds))
            self.add(positive_key, len(result.pos_inds))
            return result
        sampler.sample = sample


def register():
    """Register both hooks in mmengine's HOOKS registry (mmdet's registry falls back to it)."""
    import torch
    from mmengine.hooks import Hook, IterTimerHook
    from mmengine.model import is_model_wrapper
    from mmengine.registry import HOOKS

    class DetbenchIterTimerHook(IterTimerHook):
        def _before_iter(self, runner, batch_idx, data_batch=None, mode="train"):
            if mode != "train" or _LOGGED["at"] is None:
                return super()._before_iter(runner, batch_idx, data_batch, mode)
            runner.message_hub.update_scalar("train/data_time", time.time() - _LOGGED["at"])

    class DetbenchWorkHook(Hook):
        priority = "LOWEST"

        def __init__(self):
            self.counter = WorkCounter()

        def before_train(self, runner):
            net = runner.model.module if is_model_wrapper(runner.model) else runner.model
            counted = self.counter.install(net)
            if runner.rank == 0:
                print("detbench: torch threads %d, work counted: %s" % (
                    torch.get_num_threads(), "yes" if counted else "no (unknown detector)"), flush=True)

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            line = self.counter.line(runner.iter + 1)
            if runner.rank == 0:
                print(line, flush=True)
            _LOGGED["at"] = time.time()

    HOOKS.register_module(name=TIMER_HOOK, module=DetbenchIterTimerHook, force=True)
    HOOKS.register_module(name=WORK_HOOK, module=DetbenchWorkHook, force=True)
