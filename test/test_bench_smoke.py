"""Smoke tests of the IK benchmark (benchmarks/scenarios.py, benchmarks/ik.py) on a few frames, without OpenSim.

They keep `./run bench ik` from rotting: the scenarios are checked against independent truth (Pinocchio's
forward kinematics, the joint limits of the URDF) and the harness runs end to end on 5 frames. No timing is
asserted.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pinocchio  # noqa: E402

from benchmarks import ik, scenarios  # noqa: E402
from ros_dofkit.core.spatial import rotation_angle  # noqa: E402


@pytest.fixture(scope="module")
def panda():
    return scenarios.panda_scenario(num_frames=40)


@pytest.fixture(scope="module")
def humanoid():
    return scenarios.humanoid_scenario(num_frames=40)


def _pinocchio_R_WL(urdf, link_names, q_by_joint_name, floating=None):
    """World orientation of each named link from Pinocchio (independent of our plant)."""
    if floating is None:
        model = pinocchio.buildModelFromUrdf(str(urdf))
    else:
        model = pinocchio.buildModelFromUrdf(str(urdf), pinocchio.JointModelFreeFlyer())
    data = model.createData()
    q = pinocchio.neutral(model)
    for j in range(1, model.njoints):
        if model.joints[j].shortname() == "JointModelFreeFlyer":
            w, x, y, z, px, py, pz = floating
            q[model.idx_qs[j]:model.idx_qs[j] + 7] = [px, py, pz, x, y, z, w]
        elif model.names[j] in q_by_joint_name:
            q[model.idx_qs[j]] = q_by_joint_name[model.names[j]]
    pinocchio.framesForwardKinematics(model, data, q)
    return np.stack([data.oMf[model.getFrameId(name)].rotation for name in link_names])


def _q_by_name(scenario, q):
    plant = scenario.plant
    out = {}
    for j in range(plant.num_joints()):
        joint = plant.get_joint(j)
        if joint.num_positions == 1:
            out[joint.name] = q[joint.position_start]
    return out


@pytest.mark.parametrize("frame", [0, 17, 39])
def test_panda_observations_match_pinocchio(panda, frame):
    R_WL = _pinocchio_R_WL(scenarios.robots_dir() / scenarios.PANDA_URDF, scenarios.PANDA_IMU_BODIES,
                           _q_by_name(panda, panda.q_true[frame]))
    R_expected = R_WL @ np.stack([imu.R_BS for imu in panda.imus])
    assert rotation_angle(np.swapaxes(R_expected, -1, -2) @ panda.R_GO[frame]).max() < 1e-12


def test_humanoid_observations_match_pinocchio(humanoid):
    s = humanoid.floating_q_start
    frame = 23
    q = humanoid.q_true[frame]
    R_WL = _pinocchio_R_WL(scenarios.robots_dir() / scenarios.HUMANOID_URDF, scenarios.HUMANOID_IMU_BODIES,
                           _q_by_name(humanoid, q), floating=q[s:s + 7])
    R_expected = R_WL @ np.stack([imu.R_BS for imu in humanoid.imus])
    assert rotation_angle(np.swapaxes(R_expected, -1, -2) @ humanoid.R_GO[frame]).max() < 1e-12


def test_scenarios_have_the_advertised_shape(panda, humanoid):
    assert len(panda.imus) == 4 and panda.scored_positions.size == 7 and panda.floating_q_start is None
    assert len(humanoid.imus) >= 15 and humanoid.scored_positions.size == 29
    assert humanoid.plant.num_positions() == 36 and humanoid.floating_q_start is not None
    s = humanoid.floating_q_start
    assert set(range(s + 4, s + 7)) <= set(humanoid.locked_positions)  # translations locked, as OpenSense does
    for scenario in (panda, humanoid):
        T, n = scenario.num_frames, len(scenario.imus)
        assert scenario.R_GO.shape == (T, n, 3, 3) and scenario.q_true.shape == (T, scenario.plant.num_positions())
        np.testing.assert_allclose(np.diff(scenario.times), 0.01)
        assert not set(scenario.locked_positions) & set(scenario.scored_positions.tolist())
        # Non-trivial mountings, unique names.
        assert min(rotation_angle(imu.R_BS) for imu in scenario.imus) > np.radians(30)
        assert len({imu.name for imu in scenario.imus}) == n


def test_motion_is_smooth_and_inside_the_joint_limits():
    scenario = scenarios.panda_scenario(num_frames=500)
    lower = scenario.plant.position_lower_limits()[scenario.scored_positions]
    upper = scenario.plant.position_upper_limits()[scenario.scored_positions]
    Q = scenario.q_true[:, scenario.scored_positions]
    assert np.all(Q >= lower) and np.all(Q <= upper)
    steps = np.abs(np.diff(Q, axis=0))
    assert steps.max() < 0.02  # rad per 10 ms frame: smooth
    assert np.ptp(Q, axis=0).min() > 0.2  # but every joint really moves
    # The start guess is 0.1 rad off the truth on every estimated joint.
    np.testing.assert_allclose(np.abs(scenario.q_start - scenario.q_true[0])[scenario.scored_positions], 0.1)


def test_noise_rotates_observations_by_about_the_requested_angle():
    clean = scenarios.panda_scenario(num_frames=200)
    noisy = scenarios.panda_scenario(num_frames=200, noise_deg=2.0)
    np.testing.assert_array_equal(clean.q_true, noisy.q_true)
    angles = rotation_angle(np.swapaxes(clean.R_GO, -1, -2) @ noisy.R_GO)
    # Isotropic noise with sigma per axis: the angle is Maxwell distributed, mean 2·sqrt(2/π)·sigma.
    np.testing.assert_allclose(angles.mean(), np.radians(2.0) * 2 * np.sqrt(2 / np.pi), rtol=0.1)


def test_truncated_and_errors_validate_sizes(panda):
    short = panda.truncated(5)
    assert short.num_frames == 5 and short.R_GO.shape[0] == 5
    with pytest.raises(scenarios.ScenarioError, match="expected 1 <= num_frames <= 40"):
        panda.truncated(41)
    with pytest.raises(scenarios.ScenarioError, match="expected estimates of shape"):
        panda.joint_errors(np.zeros((3, 3)))
    np.testing.assert_array_equal(panda.joint_errors(panda.q_true), 0.0)


@pytest.mark.parametrize("runner", [ik.run_dofkit_track, ik.run_dofkit_track_sequence])
def test_harness_runs_our_solver_on_a_few_frames(panda, runner):
    scenario = panda.truncated(5)
    result = runner(scenario)
    assert result.q.shape == scenario.q_true.shape
    assert result.frames_per_second > 0
    row = ik.score(scenario, result)
    assert row.max_joint_error < 1e-2  # started 0.1 rad off; accuracy 1e-4
    locked = list(scenario.locked_positions)
    np.testing.assert_array_equal(result.q[:, locked], np.tile(scenario.q_start[locked], (5, 1)))


def test_humanoid_harness_and_table(humanoid):
    scenario = humanoid.truncated(4)
    rows = [ik.score(scenario, runner(scenario)) for runner in (ik.run_dofkit_track, ik.run_dofkit_track_sequence)]
    assert rows[0].max_joint_error < 1e-2 and rows[0].max_base_error < 1e-2
    table = ik.format_table(scenario, rows)
    assert "base err rad" in table and "ros_dofkit track()" in table
    lines = ik.budget_lines([ik.Round(rows, [])])
    assert len(lines) == 2 and all("NOT MEASURED" in line for line in lines)
    assert ">= 30x" in lines[0] and ">= 60x" in lines[1]


def _rows(track_fps, sequence_fps, error=1e-4):
    return [ik.Row("ros_dofkit track()", track_fps, 1.0, error, error / 10, 0.0),
            ik.Row("ros_dofkit track_sequence()", sequence_fps, 1.0, error, error / 10, 0.0)]


def test_budget_verdicts_take_the_worst_round_against_its_fastest_opensim_configuration():
    def opensim(fast, slow):
        return [ik.Row(ik.MODE_LABELS["assembler"], fast, 1.0, 1e-4, 1e-5, 0.0),
                ik.Row(ik.MODE_LABELS["constraint"], slow, 1.0, 5e-3, 5e-4, 0.0)]

    # Round 1: 40x and 80x the fastest configuration (1000 frames/s); round 2: 25x and 70x (track() misses).
    rounds = [ik.Round(_rows(40_000, 80_000), opensim(1000, 100)), ik.Round(_rows(50_000, 140_000), opensim(2000, 90))]
    assert rounds[1].peer.solver == ik.MODE_LABELS["assembler"]
    track, sequence = ik.budget_lines(rounds)
    assert track.lstrip().startswith("MISS") and "25.0x" in track and "40.0x 25.0x" in track
    assert sequence.lstrip().startswith("PASS") and "70.0x" in sequence
    assert "equal or better" in track
    # The peer is the fastest configuration even when a slower one is less accurate: our accuracy is held to it.
    sloppy = [ik.Round(_rows(40_000, 80_000, error=2e-3), opensim(1000, 100))]
    assert all("WORSE" in line and line.lstrip().startswith("MISS") for line in ik.budget_lines(sloppy))
    # Equal within 1 % + 1e-4 rad (both solvers stopped at accuracy 1e-4 on the same noisy problem) counts as equal.
    tie = [ik.Round(_rows(40_000, 80_000, error=1e-4 * 1.005 + 5e-5), opensim(1000, 100))]
    assert all(line.lstrip().startswith("PASS") for line in ik.budget_lines(tie))
    assert "--no-opensim given" in ik.budget_lines([ik.Round(_rows(1, 1), [])], "--no-opensim given")[0]


def test_median_rows_take_the_median_rate_per_solver():
    rounds = [ik.Round(_rows(r, 2 * r), []) for r in (10.0, 30.0, 20.0)]
    medians = ik.median_rows(rounds, lambda r: r.ours)
    assert [row.frames_per_second for row in medians] == [20.0, 40.0]
    assert medians[0].solver == "ros_dofkit track()"


def test_command_runs_end_to_end_without_opensim(capsys):
    affinity = os.sched_getaffinity(0)
    try:
        status = ik.main(["--scenarios", "panda", "--frames", "5", "--repeat", "1", "--no-opensim"])
    finally:
        os.sched_setaffinity(0, affinity)  # main() pins the process to one CPU; give pytest its CPUs back
    out = capsys.readouterr().out
    assert status == 0
    assert "could not be measured" in out and "ros_dofkit track_sequence()" in out and "NOT MEASURED" in out
    assert ik.main(["--frames", "1", "--no-opensim"]) == 2


def test_the_cpu_clock_times_every_solver_and_is_named(panda, capsys):
    scenario = panda.truncated(5)
    used = []

    def clock():
        used.append(1)
        return time.thread_time()

    result = ik.run_dofkit_track_sequence(scenario, ik.ACCURACY, clock)
    assert len(used) == 4 and result.frames_per_second > 0  # the assemble and the tracking, start and end
    affinity = os.sched_getaffinity(0)
    try:
        status = ik.main(["--scenarios", "panda", "--frames", "5", "--repeat", "1", "--no-opensim", "--clock", "cpu"])
    finally:
        os.sched_setaffinity(0, affinity)
    assert status == 0 and "timing: cpu clock" in capsys.readouterr().out


def test_missing_opensim_is_reported_not_fatal(monkeypatch, capsys):
    from benchmarks import opensim_peer

    monkeypatch.setitem(sys.modules, "opensim", None)  # makes `import opensim` raise ImportError
    assert not opensim_peer.opensim_available()
    with pytest.raises(opensim_peer.OpenSimUnavailableError, match=r"pip install opensim==4\.6"):
        opensim_peer.import_opensim()
    affinity = os.sched_getaffinity(0)
    try:
        status = ik.main(["--scenarios", "panda", "--frames", "4", "--repeat", "1"])
    finally:
        os.sched_setaffinity(0, affinity)
    out = capsys.readouterr().out
    assert status == 0
    assert "opensim is not importable" in out and "could not be measured" in out
    assert "OpenSim IKSolver" not in out


def test_fastest_of_keeps_the_first_estimates_and_the_shortest_times():
    times = iter([(0.3, 0.02), (0.1, 0.05), (0.2, 0.01)])

    def runner(tag):
        assemble, track = next(times)
        return ik.SolverResult(tag, np.full((3, 1), assemble), assemble, track)

    result = ik.fastest_of(3, runner, "ours")
    assert result.track_seconds == 0.01 and result.assemble_seconds == 0.1
    np.testing.assert_array_equal(result.q, 0.3)  # the first run's estimates
