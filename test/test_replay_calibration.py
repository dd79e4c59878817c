"""``dofkit replay --calibrate START END`` (``replay_bag(calibration=...)``): calibration from a window of the bag.

Truth: a simulated bag of config/lower_body.yaml's seven IMUs (``ros_dofkit.core.simulation``, exact sensors) on
the lower-body model. The subject stands still in the calibration pose (the model's default: joint angles 0) for
the first 0.6 s, then moves every leg joint; the IMUs have random mountings (the pelvis IMU the URDF's documented
one, z backward, as the configuration's heading axis assumes) and the IMU world is turned about the vertical (a
known heading). Calibrating on [0, 0.5) s must recover every mounting and the world alignment, and the replay of
the whole bag must then reproduce the simulated joint angles; the calibrated parameter file must replay to the
same outputs without --calibrate. A replay that gives no estimate, and bad windows, must fail with the reason.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ros_dofkit import cli
from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.core.spatial import rotation_angle
from ros_dofkit.replay.bag_replay import NoEstimateError, replay_bag
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import ReplayError
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.bag_io import BagWriter, read_bag
from ros_dofkit.ros.parameters import estimator_config_from_parameters, load_parameter_file

CONFIG = Path(__file__).resolve().parents[1] / "config" / "lower_body.yaml"
HEADING_RAD = -0.8  # the IMU world (ENU) is turned by this about the vertical relative to the model world
STAND_S = 0.6  # standing still in the calibration pose
RAMP_S = 0.5  # then the motion fades in over this
DURATION_S = 2.0
IMU_RATE_HZ = 100.0


class StandThenMove(SineTrajectory):
    """Default pose (joint angles 0, base at its default) until STAND_S, then the leg joints' sine motion faded in
    smoothly: q = q0 + s(t) (q_sine - q0) on the articulated coordinates, s = 0 -> 1 over RAMP_S (C1); the floating
    base stays at its default (its heading is what the calibration must find, from the IMU world's turn)."""

    def evaluate(self, times):
        t = np.atleast_1d(np.asarray(times, dtype=float))
        q_sine, v_sine = super().evaluate(t)
        plant = self.plant
        q0 = np.asarray(plant.default_positions(), dtype=float)
        view = plant.articulated_view()
        qi, vi = np.asarray(view.q_indices), np.asarray(view.v_indices)
        x = np.clip((t - STAND_S) / RAMP_S, 0.0, 1.0)
        s = x * x * (3.0 - 2.0 * x)
        ds = np.where((x > 0.0) & (x < 1.0), 6.0 * x * (1.0 - x) / RAMP_S, 0.0)
        q = np.tile(q0, (t.size, 1))
        v = np.zeros((t.size, plant.num_velocities()))
        offset = q_sine[:, qi] - q0[qi]
        q[:, qi] = q0[qi] + s[:, None] * offset
        v[:, vi] = ds[:, None] * offset + s[:, None] * v_sine[:, vi]
        return q, v


def true_mountings(setup, seed: int) -> dict:
    """Random R_BS per IMU; the pelvis IMU's is the URDF's pelvis_imu frame (sensor z backward)."""
    plant = setup.plant
    q0 = plant.default_positions()
    X_WP = plant.calc_frame_pose(q0, plant.get_frame_by_name("pelvis"))
    X_WI = plant.calc_frame_pose(q0, plant.get_frame_by_name("pelvis_imu"))
    R_BS = {imu.name: Rotation.random(random_state=seed + k).as_matrix() for k, imu in enumerate(setup.config.imus)}
    R_BS["pelvis"] = X_WP[:3, :3].T @ X_WI[:3, :3]
    return R_BS


def write_bag(path: Path, setup, R_BS: dict, skip=None) -> None:
    """The simulated recording (IMU topics of the configuration + /ground_truth/joint_states) as a bag;
    ``skip(topic, t)`` drops messages (t: seconds from the start)."""
    plant = setup.plant
    R_WG = Rotation.from_rotvec([0.0, 0.0, -HEADING_RAD]).as_matrix()  # G turned by HEADING_RAD in W
    imus = [SimulatedImu(imu.name, imu.body, R_BS[imu.name]) for imu in setup.config.imus]
    trajectory = StandThenMove(plant, seed=4, max_amplitude=0.3)
    run = SensorSimulator(plant, imus, trajectory=trajectory, R_WG=R_WG, imu_rate_hz=IMU_RATE_HZ).run(DURATION_S)
    factory = MessageFactory()
    topics = {name: topic for topic, name in setup.imu_topics.items()}
    with BagWriter(path, typestore=factory.typestore) as bag:
        first = None
        for topic, stamp_ns, message in simulation_records(run, factory, topics):
            first = stamp_ns if first is None else first
            if skip is None or not skip(topic, (stamp_ns - first) * 1e-9):
                bag.write(topic, stamp_ns, message)


@pytest.fixture(scope="module")
def setup():
    return ReplaySetup.from_parameter_file(CONFIG)


@pytest.fixture(scope="module")
def recording(setup, tmp_path_factory):
    path = tmp_path_factory.mktemp("calibrate") / "standing_then_walking"
    R_BS = true_mountings(setup, seed=11)
    write_bag(path, setup, R_BS)
    return path, R_BS


def dofkit(*arguments) -> int:
    return cli.main([str(a) for a in arguments])


def estimated_joint_states(path: Path) -> tuple[np.ndarray, list, np.ndarray]:
    stamps, positions, names = [], [], None
    for record in read_bag(path, topics=["/estimated/joint_states"]):
        names = list(record.message.name)
        stamps.append(record.stamp_ns)
        positions.append(np.array(record.message.position))
    return np.array(stamps), names, np.array(positions)


def truth_joint_states(path: Path) -> dict:
    return {record.stamp_ns: (list(record.message.name), np.array(record.message.position))
            for record in read_bag(path, topics=["/ground_truth/joint_states"])}


def test_replay_calibrates_on_the_standing_window_and_recovers_mountings_heading_and_motion(setup, recording,
                                                                                          tmp_path):
    bag, R_BS = recording
    outcome = replay_bag(bag, setup, tmp_path / "out", calibration=(0.0, 0.5))
    calibration = outcome.calibration
    assert hasattr(outcome.results, "run")  # the batched path (fixed mountings after calibration)
    # [0, 0.5) s at 100 Hz: 50 samples of every IMU, all still.
    assert calibration.result.num_samples == {imu.name: 50 for imu in setup.config.imus}
    assert calibration.result.max_spread_deg < 1e-6
    for name, R in R_BS.items():
        assert rotation_angle(calibration.result.R_BS[name].T @ R) < 1e-7, name
    R_WG_true = Rotation.from_rotvec([0.0, 0.0, -HEADING_RAD]).as_matrix()
    assert rotation_angle(calibration.result.R_WG.T @ R_WG_true) < 1e-7
    assert abs(abs(calibration.result.heading_angle) - abs(HEADING_RAD)) < 1e-7
    for imu in calibration.setup.config.imus:  # the replay ran with fixed mountings = the calibration
        assert not imu.needs_calibration
        assert rotation_angle(np.asarray(imu.mounting).T @ R_BS[imu.name]) < 1e-7

    stamps, names, positions = estimated_joint_states(tmp_path / "out")
    truth = truth_joint_states(bag)
    assert len(stamps) == len(truth)  # one estimate per sample instant
    moving = 0
    for stamp, estimate in zip(stamps.tolist(), positions, strict=True):
        true_names, true_positions = truth[stamp]
        expected = true_positions[[true_names.index(n) for n in names]]
        np.testing.assert_allclose(estimate, expected, atol=1e-5)
        moving += np.abs(expected).max() > 0.1
    assert moving > 50  # the legs really moved (the check is not only on the standing pose)


def test_cli_prints_the_calibration_and_saves_a_parameter_file_that_replays_the_same(setup, recording, tmp_path,
                                                                                    capsys):
    bag, R_BS = recording
    saved = tmp_path / "calibrated.yaml"
    assert dofkit("replay", bag, "--config", CONFIG, "--out", tmp_path / "a", "--calibrate", 0, 0.5,
                  "--calibrated-config", saved, "--quiet") == 0
    printed = capsys.readouterr().out
    assert "calibrated on [0, 0.5) s of the bag: 50-50 samples per IMU" in printed
    assert re.search(rf"spread 0.00 deg, heading angle -?{abs(math.degrees(HEADING_RAD)):.1f} deg", printed), printed
    values = load_parameter_file(saved)
    assert "heading_reference" not in values and not any(name.endswith(".calibrate") for name in values)
    config = estimator_config_from_parameters(values, ["lower_body"])
    for imu in config.imus:
        assert rotation_angle(np.asarray(imu.mounting).T @ R_BS[imu.name]) < 1e-7, imu.name
    # The saved file alone (no --calibrate) gives the same estimates.
    assert dofkit("replay", bag, "--config", saved, "--out", tmp_path / "b", "--quiet") == 0
    stamps_a, names_a, positions_a = estimated_joint_states(tmp_path / "a")
    stamps_b, names_b, positions_b = estimated_joint_states(tmp_path / "b")
    assert names_a == names_b and np.array_equal(stamps_a, stamps_b)
    np.testing.assert_allclose(positions_a, positions_b, atol=1e-9)


def test_a_replay_without_estimates_fails_and_names_the_reason(recording, tmp_path, capsys):
    bag, _ = recording
    assert dofkit("replay", bag, "--config", CONFIG, "--out", tmp_path / "out", "--quiet") == 1
    error = capsys.readouterr().err
    assert "wait for calibration (mounting 'calibrate')" in error and "--calibrate START END" in error
    assert "'pelvis'" in error and "'right_foot'" in error
    assert not (tmp_path / "out").exists()  # no empty output bag left behind


def test_both_replay_paths_refuse_to_return_no_estimate(setup, recording, tmp_path):
    bag, _ = recording
    for batch in (True, False):
        with pytest.raises(NoEstimateError, match="wait for calibration"):
            replay_bag(bag, setup, tmp_path / f"out_{batch}", batch=batch)
        assert not (tmp_path / f"out_{batch}").exists()


@pytest.mark.parametrize(("start", "end", "message"), [
    (0.5, 0.5, r"END must be after START, got \[0.5, 0.5\)"),
    (0.4, 0.1, r"END must be after START"),
    (-0.2, 0.3, r"START is seconds after the bag's first input stamp and must be >= 0"),
    (50.0, 51.0, r"calibration window \[50, 51\) s is outside .*: its inputs span 2.000 s"),
])
def test_bad_windows_are_rejected(recording, tmp_path, capsys, start, end, message):
    bag, _ = recording
    assert dofkit("replay", bag, "--config", CONFIG, "--out", tmp_path / "out", "--calibrate", start, end,
                  "--quiet") == 1
    error = capsys.readouterr().err
    assert error.startswith("dofkit replay: error: ")
    assert re.search(message, error), error
    assert not (tmp_path / "out").exists()


def test_a_window_without_samples_of_an_imu_is_rejected(setup, tmp_path):
    bag = tmp_path / "late_foot"
    write_bag(bag, setup, true_mountings(setup, seed=3),
              skip=lambda topic, t: topic == "/imu/left_foot/data" and t < 0.3)  # the foot IMU starts late
    with pytest.raises(ReplayError, match=r"\[0, 0.25\) s of .* holds no sample of IMU\(s\) \['left_foot'\]"):
        replay_bag(bag, setup, tmp_path / "out", calibration=(0.0, 0.25))
    assert not (tmp_path / "out").exists()
    # A window after the foot IMU started calibrates.
    outcome = replay_bag(bag, setup, tmp_path / "out", calibration=(0.3, 0.55))
    assert outcome.calibration.result.num_samples["left_foot"] == 25


def test_a_window_while_moving_is_refused_by_the_estimator(setup, recording, tmp_path):
    bag, _ = recording
    with pytest.raises(ReplayError, match=r"calibration on \[1, 1.5\) s of .* failed: the IMUs moved"):
        replay_bag(bag, setup, tmp_path / "out", calibration=(1.0, 1.5))
    # A looser bound is the caller's choice.
    outcome = replay_bag(bag, setup, tmp_path / "out", calibration=(1.0, 1.5), calibration_max_spread_deg=180.0)
    assert outcome.calibration.result.max_spread_deg > 2.0
