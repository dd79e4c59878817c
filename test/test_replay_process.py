"""replay.process: a dofkit replay process keeps freed memory for its next window (glibc's malloc thresholds)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: an 8 MiB block (above glibc's initial 128 KiB mmap threshold) allocated, touched and freed,
# then allocated and touched again; prints the page faults of each round.
_ROUNDS = """
import resource, sys
import numpy as np
from ros_dofkit.replay.process import keep_freed_memory
set_ = keep_freed_memory() if sys.argv[1] == "keep" else None
faults = []
for _ in range(2):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(1 << 20)  # 8 MiB, every page written
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del block
print(set_, *faults)
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt's thresholds are glibc's (another C library keeps its own policy)")
def test_freed_blocks_are_reused_without_page_faults_once_the_thresholds_are_set():
    """Without the setting, glibc maps a fresh 8 MiB block and unmaps it on free, so the next one faults every page
    again; with it (``keep_freed_memory`` answers True), the block comes from the heap and the second one reuses the
    first one's pages."""
    runs = {}
    for mode in ("default", "keep"):
        out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True, check=True)
        runs[mode] = [int(count) for count in out.stdout.split()[1:]]
        if mode == "keep":
            assert out.stdout.split()[0] == "True"
    # (The kernel may map several pages per fault: the counts are compared with the first block's, not with pages.)
    (default_first, default_second), (keep_first, keep_second) = runs["default"], runs["keep"]
    assert default_first > 100 and keep_first > 100  # the first block's pages are fresh either way
    assert default_second > 0.5 * default_first  # mapped afresh: its pages fault again
    assert keep_second < 0.1 * keep_first  # reused
