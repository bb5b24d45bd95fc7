"""RetinaNet's sigmoid focal loss as one autograd function (`model.fused_focal_loss=true`).

torchvision's `sigmoid_focal_loss` is a dozen elementwise ops over the [B, anchors, classes]
logits, each one a full-size temporary that autograd keeps for the backward, which then makes
as many again. Here the loss is a scalar computed in one pass that also builds the gradient,
so the forward allocates a handful of full-size tensors, keeps one (the gradient), and the
backward is one multiply.

Every element is first treated as a negative (target 0); then one element per anchor, its
positive class (class 0 for an anchor without one, left as it was), is corrected: N elements
against N x C, with fixed shapes and no host sync. The result is the
same sum as torchvision's loss multiplied by the anchor weights (equal to rounding; tests in
tests/trainer/test_levers.py), for alpha >= 0.

With p = sigmoid(x) and softplus(x) = -log(1 - p):
  negative:  loss = (1 - a) p^g softplus(x)        d/dx = (1 - a) p^g (g (1 - p) softplus(x) + p)
  positive:  loss = a (1 - p)^g softplus(-x)       d/dx = -a (1 - p)^g (g p softplus(-x) + 1 - p)
"""
import torch
import torch.nn.functional as F


def _negative(x, gamma):
    """Per-element negative loss and its derivative (without the (1 - alpha) factor)."""
    p = torch.sigmoid(x)
    sp = F.softplus(x)
    pg = p.pow(gamma)
    loss = pg * sp
    grad = sp.mul_(torch.rsub(p, 1.0)).mul_(gamma).add_(p).mul_(pg)   # sp's storage, reused
    return loss, grad


def _positive(x, gamma):
    p = torch.sigmoid(x)
    q = torch.rsub(p, 1.0)
    sp = F.softplus(-x)
    qg = q.pow(gamma)
    return qg * sp, -(qg * (gamma * p * sp + q))


class _FocalLossSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, pos_class, weight, alpha, gamma):
        dense, grad = _negative(logits, gamma)
        # the per-anchor sums go through the anchor weights (0 for ignored anchors)
        total = (dense.sum(1) * weight).sum() * (1.0 - alpha)
        del dense
        grad.mul_(weight[:, None] * (1.0 - alpha))
        # the positive class of every anchor (class 0 where it has none), corrected where it
        # has one: fixed shapes, no host sync
        is_pos = pos_class >= 0
        col = pos_class.clamp(min=0)[:, None]
        x = logits.gather(1, col)[:, 0]
        w = weight * is_pos
        neg_loss, _ = _negative(x, gamma)
        pos_loss, pos_grad = _positive(x, gamma)
        total = total + ((pos_loss * alpha - neg_loss * (1.0 - alpha)) * w).sum()
        kept = grad.gather(1, col)[:, 0]
        grad.scatter_(1, col, torch.where(is_pos, pos_grad * (alpha * weight), kept)[:, None])
        ctx.save_for_backward(grad)
        return total

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad * grad_out, None, None, None, None


def focal_loss_sum(logits, pos_class, weight, alpha=0.25, gamma=2.0):
    """sum over anchors a and classes c of weight[a] * focal(logits[a, c], target[a, c]), where
    target[a, c] is 1 only for c == pos_class[a] (pos_class -1: no positive class).

    logits [..., C], pos_class [...] integer, weight [...] float (the same leading shape)."""
    if alpha < 0:
        raise ValueError("focal_loss_sum needs alpha >= 0")
    c = logits.shape[-1]
    # float32 with autocast off, whatever the step's precision: the loss sums N x C terms, and
    # the gradient reaches half-precision logits through the cast, in their own dtype
    logits = logits.reshape(-1, c).float()
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return _FocalLossSum.apply(logits, pos_class.reshape(-1), weight.reshape(-1).float(),
                                   float(alpha), float(gamma))
