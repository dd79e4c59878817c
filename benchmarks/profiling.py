"""Sampling profiles of benchmark processes with py-spy, and a text summary of them.

Where you are: ``benchmarks/`` (not part of the package). py-spy is a profiling tool installed next to the
interpreter (``.venv/bin/pip install py-spy``), not a dependency: only the ``--profile`` options of
benchmarks/node_latency.py and benchmarks/replay_speed.py need it. It attaches to a running interpreter by pid and
samples it from outside (nothing is instrumented; ``--nonblocking`` never pauses it); launching the command under
py-spy instead fails here to read the interpreter's thread state. Imports only the standard library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path


def py_spy() -> str:
    """The py-spy executable (a profiling tool installed next to this interpreter, not a dependency)."""
    executable = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(executable, os.X_OK):
        raise SystemExit("error: --profile needs py-spy (`.venv/bin/pip install py-spy`; a tool, not a dependency)")
    return executable


def start_profiler(pid: int, output: Path, delay: float, duration: float,
                   after: threading.Event | None = None) -> threading.Thread:
    """Sample process ``pid`` with py-spy for ``duration`` s after ``delay`` s (a warm-up), into ``output`` (raw
    collapsed stacks, one line per distinct stack, functions without line numbers); the delay counts from ``after``
    being set when given (e.g. the process's first output: start-up is then left out). Returns the thread to join
    once the sampled window is over."""
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [py_spy(), "record", "--pid", str(pid), "--nonblocking", "--rate", "500", "--nolineno", "--duration",
               str(max(1, round(duration))), "--format", "raw", "--output", str(output)]

    def run():
        if after is not None and not after.wait(timeout=duration + 120):
            return
        time.sleep(delay)
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=duration + 120)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def summarize_profile(path: Path, top: int = 12) -> list:
    """Lines of the busiest functions of a py-spy raw profile (collapsed stacks ``frame;frame;... count``): share
    of the samples with the function on top of the stack (self) and anywhere in it (inclusive)."""
    own, inclusive, total = {}, {}, 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        total += int(count)
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + int(count)
    if not total:
        return [f"    (no samples in {path})"]
    lines = [f"    {total} busy samples; self time:"]
    lines += [f"    {100 * n / total:5.1f}%  {frame}" for frame, n in sorted(own.items(), key=lambda x: -x[1])[:top]]
    lines.append("    inclusive time:")
    lines += [f"    {100 * n / total:5.1f}%  {frame}"
              for frame, n in sorted(inclusive.items(), key=lambda x: -x[1])[:top]]
    return lines
