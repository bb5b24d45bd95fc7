"""Keep freed host memory in the process instead of returning it to the OS every iteration.

glibc serves large blocks with mmap and unmaps them on free, so every iteration of a
CPU training loop pays page faults and page zeroing again for all its activations. Serving them
from the heap and never trimming it keeps those pages mapped and reused. Linux/glibc only; a no-op
elsewhere.
"""
import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4


def keep_freed_memory():
    """Return True when the allocator settings were applied."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_MMAP_MAX, 0)                     # large blocks come from the heap too
    ok = mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1) and ok  # and the heap is not trimmed back
    return bool(mallopt(_M_TOP_PAD, 256 << 20) and ok)
