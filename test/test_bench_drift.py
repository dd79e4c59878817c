"""Smoke test of the drift benchmark (benchmarks/drift.py): a short session of every scenario (the arm, the lower
body's slow sines, the lower body walking) end to end, in a process of its own (the benchmark pins itself to one
CPU). No timing is asserted: the test checks that every table, row and verdict is printed with finite figures, and
that the fusion's verdict on accuracy is a PASS on this short session for the arm and the walking lower body
(per-frame IK's worst minute is printed beside it). The raw IMUs' assumed heading walk is checked against the
simulated sensors' gyro biases."""

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.drift import lower_body_scenario, raw_drift_deg_per_min, session_noise
from ros_dofkit.core.spatial import quat_to_matrix

REPO = Path(__file__).resolve().parents[1]


def test_raw_heading_walk_is_the_rms_vertical_turn_of_the_simulated_gyro_biases():
    """A raw IMU's heading turns at the vertical (earth frame) component of its gyro bias: its RMS over the
    simulated sensors (7 IMUs x 30 seeds, random bias directions and poses) matches the assumed one-minute step,
    |b| / sqrt(3) per second (sampling error of 210 squares ~3 %)."""
    noise = session_noise(3.0)
    turns = []
    for seed in range(30):
        run = lower_body_scenario(noise, seed).simulator.run(0.02)
        for readings in run.imus:
            turns.append((quat_to_matrix(readings.true_quaternion_wxyz[0]) @ readings.gyro_bias)[2])
    simulated = math.degrees(float(np.sqrt(np.mean(np.square(turns))))) * 60.0
    assert raw_drift_deg_per_min(noise) == 60.0 * math.degrees(0.005 / math.sqrt(3.0))
    assert abs(simulated / raw_drift_deg_per_min(noise) - 1.0) < 0.12, simulated


def test_drift_benchmark_runs_end_to_end_and_prints_every_row_and_verdict():
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "drift.py"), "--minutes", "0.25", "--timing-seconds", "1"],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert finished.returncode == 0, finished.stderr[-3000:]
    out = finished.stdout
    if importlib.util.find_spec("imumocap") is None:
        # imumocap comes with the bench extra (requirements/bench.txt), not the test stack: the benchmark says so
        assert "imumocap: not available: No module named 'imumocap' (the bench extra has imumocap 1.3.1)" in out
    else:
        knees = out.split("imumocap 1.3.1 (knee flexion")[1].splitlines()[2].split()
        assert knees[0] == "1" and all(0.0 <= float(value) < 90.0 for value in knees[1:3])
    for scenario, joints in (("arm", 5), ("lower_body", 12), ("lower_body_gait", 12)):
        section = re.split(r"\n(?:arm|lower_body|lower_body_gait): |\nreal time: ", out.split(f"\n{scenario}: ")[1])[0]
        for row in ("per-frame IK", "fusion (orientations)", "fusion (raw IMUs)"):
            table = section.split(f"  {row} (estimator ")[1]
            assert re.match(r"\d+ us per cycle", table), table[:80]
            first_minute = table.splitlines()[2].split()
            assert first_minute[0] == "1" and len(first_minute) == 1 + joints
            assert all(0.0 <= float(value) < 90.0 for value in first_minute[1:])
        assert "imumocap" in section
        # the information bound beside the fusion: per joint, and its worst minute drawn over walks and on this walk
        bound = section.split("  information bound (")[1]
        rows = re.findall(r"^      (\S+)\s+([0-9.]+) /\s+([0-9.]+) /\s+([0-9.]+)$", bound, re.MULTILINE)
        assert len(rows) == joints and all(float(c) >= float(s) > 0.0 for _, _, c, s in rows)
        drawn = re.findall(r"causal ([0-9.]+) \(([0-9.]+)\), smoothed ([0-9.]+) \(([0-9.]+)\)", bound)
        assert len(drawn) == 2 and all(float(p90) >= float(median) for c in drawn for median, p90 in (c[:2], c[2:]))
        offsets = re.findall(r"^    \S+\s+(-?[0-9.]+)  vs\s+(-?[0-9.]+)", section, re.MULTILINE)
        assert len(offsets) == {"arm": 4, "lower_body": 7, "lower_body_gait": 7}[scenario]
    verdicts = re.findall(r"^(PASS|MISS)  (.*)$", out, re.MULTILINE)
    assert len(verdicts) == 7, out
    assert verdicts[0][0] == "PASS" and verdicts[0][1].startswith("arm: every estimated joint")
    assert verdicts[4][0] == "PASS" and verdicts[4][1].startswith("lower_body_gait: every estimated joint")
    for k in (0, 2, 4):  # the fusion's verdicts name the causal bound on the session's walk
        assert re.search(r"; causal information bound [0-9.]+ deg worst minute \(smoothed [0-9.]+\)", verdicts[k][1])
    assert re.search(r"real time: .* (\d+) us = ([0-9.]+) of the 10 ms period", out)
