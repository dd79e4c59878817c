"""Smoke test of the replay benchmark (benchmarks/replay_speed.py) on a short recording: it keeps
`./run bench replay_speed` from rotting. It runs in a process of its own (the benchmark pins itself to one CPU and
freezes the garbage collector's view of everything it holds). No timing is asserted: the test checks that every
line is printed with finite, positive figures and that the budget lines carry a verdict; their worst-round logic
is checked on hand-made rounds."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert re.search(r"rosbags-only read of the same bag \(\d+ messages.*per round: [0-9.]+ s -> [0-9.]+x", out), out
    cpu = re.search(r"CPU time per round .*: replay ([0-9.]+) s, rosbags-only read ([0-9.]+) s -> ([0-9.]+)x real "
                    r"time, ([0-9.]+)x the read", out)
    assert cpu and all(float(value) > 0 for value in cpu.groups()), out
    assert re.search(r"(PASS|MISS)  replay >= 150x real time: [0-9.]+x \(worst of 1 round: [0-9.]+x\)", out), out
    assert re.search(r"(PASS|MISS)  replay >= 10x a rosbags-only read of the same bag: [0-9.]+x", out), out
    if len(os.sched_getaffinity(0)) > 1:
        assert re.search(r"whole replay on \d+ cores .*per round: [0-9.]+ s -> [0-9.]+x real time, [0-9.]+x the best "
                         r"rosbags-only read", out), out
    reach = re.search(r"10x the rosbags-only read allows the whole replay ([0-9.]+) ms CPU; the compiled IK alone "
                      r"takes ([0-9.]+) ms, reading \+ decoding ([0-9.]+) ms, encoding \+ writing ([0-9.]+) ms: "
                      r"([0-9.]+) ms CPU, ([0-9.]+)x the allowance \((unreachable|reachable)", out)
    assert reach and all(float(value) > 0 for value in reach.groups()[:6]), out
    memory = re.search(r"1.5 s of input ([0-9.]+) s wall, peak ([0-9]+) MB; 3 s of input ([0-9.]+) s wall .*peak "
                       r"([0-9]+) MB", out)
    assert memory, out
    assert all(float(value) > 0 for value in memory.groups())


def test_budget_lines_take_the_worst_round():
    sys.path.insert(0, str(REPO))
    from benchmarks import replay_speed

    factor, peer = replay_speed.budget_lines([160.0, 149.0, 200.0], [12.0, 11.0, 9.5])
    assert factor.startswith("MISS") and "149.0x (worst of 3 rounds: 160.0x 149.0x 200.0x)" in factor
    assert peer.startswith("MISS") and "9.5x" in peer
    factor, peer = replay_speed.budget_lines([150.0], [10.0])
    assert factor.startswith("PASS") and peer.startswith("PASS") and "worst of 1 round:" in factor
    line = replay_speed.overlapped_budget_line([170.0, 149.5], 2)
    assert line.startswith("MISS") and "on 2 cores: 149.5x (worst of 2 rounds: 170.0x 149.5x)" in line
    assert replay_speed.overlapped_budget_line([151.0], 2).startswith("PASS")


def test_reach_line_compares_the_unavoidable_parts_with_a_tenth_of_the_read():
    sys.path.insert(0, str(REPO))
    from benchmarks import replay_speed

    line = replay_speed.reach_line(0.160, 0.012, 0.020, 0.020)
    assert "allows the whole replay 16.0 ms CPU" in line and ": 52.0 ms CPU, 3.25x the allowance" in line
    assert "unreachable on one core, and on two cores: above 2x" in line
    line = replay_speed.reach_line(0.160, 0.012, 0.010, 0.005)
    assert "1.69x the allowance (unreachable on one core)" in line
    assert "reachable only if everything else is free" in replay_speed.reach_line(0.160, 0.004, 0.004, 0.004)


def _py_spy_available() -> bool:
    sys.path.insert(0, str(REPO))
    from benchmarks import profiling

    try:
        profiling.py_spy()
    except SystemExit:
        return False
    return True


def test_profile_option_prints_where_the_replay_spends_its_time(tmp_path):
    if not _py_spy_available():
        pytest.skip("--profile needs py-spy, a profiling tool that is not a dependency (.venv/bin/pip install py-spy)")
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "replay_speed.py"), "--duration", "1.5", "--repeat", "1",
         "--no-memory", "--no-streaming", "--profile", str(tmp_path / "replay.txt")],
        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert finished.returncode == 0, finished.stderr[-3000:]
    out = finished.stdout
    assert re.search(r"profile of back-to-back replays .*\n\s+\d+ busy samples; self time:", out), out
    assert re.search(r"[0-9.]+%  replay_bag \(ros_dofkit/replay/\w+\.py\)", out), out  # inclusive: the replay itself
    assert (tmp_path / "replay.txt").stat().st_size > 0
