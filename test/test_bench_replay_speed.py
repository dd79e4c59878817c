"""Smoke test of the replay benchmark (benchmarks/replay_speed.py) on a short recording: it keeps
`./run bench replay_speed` from rotting. It runs in a process of its own (the benchmark pins itself to one CPU and
freezes the garbage collector's view of everything it holds). No timing is asserted: the test checks that every
line is printed with finite, positive figures and that the budget line carries a verdict."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_replay_benchmark_runs_end_to_end_with_its_memory_runs():
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "replay_speed.py"), "--duration", "1.5", "--repeat", "1",
         "--memory-factor", "2"],
        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert finished.returncode == 0, finished.stderr[-3000:]
    out = finished.stdout
    for label in ("whole replay (batched):", "read + decode bag:", "estimator (offline core):",
                  "encode + write outputs:", "streaming path", "compiled IK alone"):
        line = next((line for line in out.splitlines() if label in line), None)
        assert line is not None, f"{label!r} missing from:\n{out}"
        factors = [float(x) for x in re.findall(r"([0-9.]+)x", line)]
        assert factors and all(f > 0 for f in factors), line
    assert re.search(r"budget >= 100x real time: ratio [0-9.]+ -> (PASS|MISS)", out), out
    memory = re.search(r"1.5 s of input ([0-9.]+) s wall, peak ([0-9]+) MB; 3 s of input ([0-9.]+) s wall .*peak "
                       r"([0-9]+) MB", out)
    assert memory, out
    assert all(float(value) > 0 for value in memory.groups())
