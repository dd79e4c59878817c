"""Smoke test of the start-up benchmark (benchmarks/cold_start.py): fresh `dofkit replay` interpreters and fresh
estimator nodes over real DDS, end to end on a short recording, in a process of its own. No timing is asserted: the
test checks that every phase is printed as a finite, non-negative time, that the phases of a replay add up to its
time to the first estimate, and that each budget line carries a verdict."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_cold_start_benchmark_runs_end_to_end():
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "cold_start.py"), "--repeat", "1", "--duration", "1"],
        capture_output=True, text=True, timeout=400, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    out = finished.stdout
    replay = re.search(r"dofkit replay \(1 s of input\): startup ([0-9.]+), imports ([0-9.]+), kernels "
                       r"(-?[0-9.]+), estimate ([0-9.]+), to_first ([0-9.]+) s", out)
    assert replay, out
    startup, imports, kernels, estimate, to_first = (float(x) for x in replay.groups())
    assert min(startup, imports, estimate) >= 0 and to_first > 0
    # to_first = start-up + imports + the first replay (= kernel-cache load + a replay), up to rounding
    assert abs(startup + imports + kernels + estimate - to_first) < 0.01, out
    node = re.search(r"estimator node \(arm, 4 IMUs at 500 Hz\): startup ([0-9.]+), imports ([0-9.]+), "
                     r"to_first_set ([0-9.]+), latency ([0-9.]+), to_first ([0-9.]+) s", out)
    assert node, out
    assert float(node.group(5)) >= float(node.group(2)) > 0
    assert re.search(r"(PASS|MISS)  fresh dofkit replay to its first estimate: [0-9.]+ s", out), out
    assert re.search(r"(PASS|MISS)  fresh estimator node to its first estimate: [0-9.]+ s", out), out


def test_budget_line_takes_the_worst_process():
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import budget_line

    line = budget_line("dofkit replay", [{"to_first": 1.2}, {"to_first": 2.5}, {"to_first": 0.9}])
    assert line.startswith("MISS") and "2.50 s = 1.25x the budget" in line and "worst of 3: 1.20 2.50 0.90 s" in line
    assert budget_line("estimator node", [{"to_first": 2.0}]).startswith("PASS")
