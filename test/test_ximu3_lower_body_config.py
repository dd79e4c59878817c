"""config/lower_body.yaml against a known truth: synthetic IMU orientations of the lower-body model.

The subject stands in the neutral pose facing an arbitrary heading of the IMUs' ENU world; the IMUs have arbitrary
mountings except the pelvis', whose z axis points backward as in the recording (the URDF's ``pelvis_imu`` frame).
Calibration through the estimator's public ``calibrate`` must recover every mounting and the heading from the
pelvis IMU's -z axis alone (the configuration's heading_reference / heading_axis), and a moved pose must then be
estimated exactly. Truth: forward kinematics of the same plant, R_GS = R_GW R_WB(q) R_BS.
"""

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.spatial import matrix_to_quat, rotation_angle
from ros_dofkit.replay.setup import ReplaySetup

CONFIG = Path(__file__).resolve().parents[1] / "config" / "lower_body.yaml"
HEADING_RAD = 1.1  # the subject faces 1.1 rad from the ENU world's x (any value but 0 would do)
MOVED = {"left_knee_flexion": 1.0, "right_hip_flexion": 0.5, "right_knee_flexion": 0.3, "left_hip_adduction": 0.1,
         "left_ankle_dorsiflexion": 0.2, "right_ankle_inversion": -0.15, "left_hip_rotation": -0.2}


@pytest.fixture()
def setup():
    return ReplaySetup.from_parameter_file(CONFIG)


def sensor_orientations(setup, q, R_GW, R_BS) -> dict:
    """R_GS of every configured IMU at plant positions ``q``."""
    X_WB = setup.plant.calc_body_poses(q)
    bodies = {imu.name: setup.plant.get_body_by_name(imu.body).index for imu in setup.config.imus}
    return {name: R_GW @ X_WB[bodies[name], :3, :3] @ R_BS[name] for name in bodies}


def feed(estimator, R_GS: dict, stamp: float) -> None:
    for name, R in R_GS.items():
        assert estimator.add_imu(name, stamp, matrix_to_quat(R), [0.0, 0.0, 0.0]).ok


def true_mountings(setup, generator) -> dict:
    plant = setup.plant
    q0 = plant.default_positions()
    X_WP = plant.calc_frame_pose(q0, plant.get_frame_by_name("pelvis"))
    X_WI = plant.calc_frame_pose(q0, plant.get_frame_by_name("pelvis_imu"))
    R_BS = {imu.name: Rotation.random(random_state=generator).as_matrix() for imu in setup.config.imus}
    R_BS["pelvis"] = X_WP[:3, :3].T @ X_WI[:3, :3]  # the URDF's documented mounting: sensor z backward
    return R_BS


def test_the_config_reads_the_imported_topics_and_calibrates_every_imu(setup):
    devices = ["pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
               "right_foot"]
    assert sorted(setup.imu_topics) == sorted(f"/imu/{d}/data" for d in devices)
    assert all(imu.needs_calibration for imu in setup.config.imus)
    assert setup.config.heading_reference == "pelvis" and setup.config.heading_axis == "-z"
    assert setup.config.use_joint_limits
    assert len(setup.plant.floating_base_joints()) == 1


def test_pelvis_imu_z_points_backward_in_the_model(setup):
    R_BS = true_mountings(setup, np.random.default_rng(0))["pelvis"]
    np.testing.assert_allclose(R_BS[:, 2], [-1.0, 0.0, 0.0], atol=1e-9)


def test_calibration_recovers_mountings_and_heading_then_tracks_a_pose(setup):
    generator = np.random.default_rng(7)
    R_BS = true_mountings(setup, generator)
    R_GW = Rotation.from_rotvec([0.0, 0.0, HEADING_RAD]).as_matrix()
    plant = setup.plant
    q0 = plant.default_positions()
    estimator = Estimator(plant, setup.config)
    for k in range(25):
        feed(estimator, sensor_orientations(setup, q0, R_GW, R_BS), 0.02 * k)
    calibration = estimator.calibrate()
    assert rotation_angle(calibration.R_WG @ R_GW) < 1e-9  # R_WG = R_GW^-1: the heading is undone
    assert calibration.heading_angle == pytest.approx(-HEADING_RAD, abs=1e-9)
    for name, R in R_BS.items():
        assert rotation_angle(estimator.mounting(name).T @ R) < 1e-9, name

    q = q0.copy()
    for joint, angle in MOVED.items():
        q[plant.get_joint_by_name(joint).position_start] = angle
    base = plant.floating_base_joints()[0].position_start
    q[base:base + 4] = Rotation.from_euler("zyx", [0.4, 0.1, -0.05]).as_quat(scalar_first=True)
    feed(estimator, sensor_orientations(setup, q, R_GW, R_BS), 1.0)
    result = estimator.step(1.0)
    assert result.solved
    np.testing.assert_allclose(result.q[base + 4:base + 7], q0[base + 4:base + 7])  # translation held
    R_W_pelvis = Rotation.from_quat(result.q[base:base + 4], scalar_first=True).as_matrix()
    true_R = Rotation.from_quat(q[base:base + 4], scalar_first=True).as_matrix()
    assert rotation_angle(R_W_pelvis.T @ true_R) < 1e-4
    for joint in (j for j in MOVED):
        start = plant.get_joint_by_name(joint).position_start
        assert result.q[start] == pytest.approx(q[start], abs=1e-4), joint
    assert max(result.sensor_errors_deg.values()) < 0.01
