"""How a ``dofkit replay`` process keeps its memory: freed pages stay with the process for the next window.

Where you are: ``ros_dofkit.replay``, beside ``bag_replay``; imports only the standard library (ctypes). Called by
``commands.replay`` before it replays (and by benchmarks/replay_speed.py, which replays as that command does), not
by ``replay_bag``: it sets the C allocator of the whole process, which a library must leave to its host.

A batched replay allocates a window's arrays (a few MB: the cycles, the solver's poses, the encoded outputs), frees
them and allocates them again for the next window. glibc's malloc returns freed memory at the top of its heap to the
system once more than its trim threshold is free, and serves blocks above its mmap threshold with fresh mappings; both
thresholds adapt to the largest block freed so far (from 128 KiB), so windows of a few MB kept handing their pages
back, and every page came back as a page fault that zeroes it (~1,500 faults, ~2-4 ms, per replay of
benchmarks/replay_speed.py's 10 s bag after another reader ran). With the thresholds fixed high, a window's pages are
reused by the next one; the first window still pays for its own (the process's working set, not more).
"""

from __future__ import annotations

import ctypes

#: glibc's mallopt parameters (malloc.h) and the values set: blocks up to 32 MiB (glibc's largest mmap threshold on
#: 64-bit systems) come from the heap, and up to 256 MiB of free heap top stays with the process.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 256 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Fix glibc malloc's mmap and trim thresholds high for this process (see the module docstring); True when set,
    False where the C library has no ``mallopt`` or refuses the values (another libc: nothing changes)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: its C library's (no ldconfig search)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
