"""torch.distributed helpers: set-up from torchrun's environment and small reductions."""
import os

import torch
import torch.distributed as torch_dist


def world_size():
    return torch_dist.get_world_size() if torch_dist.is_initialized() else 1


def rank():
    return torch_dist.get_rank() if torch_dist.is_initialized() else 0


def setup(device_kind):
    """Join the process group torchrun describes; returns (device, local rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device_kind == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world > 1 and not torch_dist.is_initialized():
        backend = "nccl" if device_kind == "cuda" else "gloo"
        torch_dist.init_process_group(backend=backend, device_id=device if device_kind == "cuda" else None)
    return device, local, world


def global_mean(t):
    """Mean of a tensor over ranks (itself when not distributed); no gradient flows."""
    if world_size() == 1:
        return t
    t = t.detach().clone()
    torch_dist.all_reduce(t)
    return t / world_size()


def cleanup():
    if torch_dist.is_initialized():
        torch_dist.destroy_process_group()
