"""Tests of IMU calibration (OpenSense IMUPlacer adapted to ROS, SPEC 8.1): known mounting rotations recovered
through ENU/NED world alignment and a heading offset, static-window averaging, error paths, then tracking a
trajectory with the calibrated sensors recovers it."""

from __future__ import annotations

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import NED_TO_ENU, Assembler, average_rotations, calibrate_imus
from ros_dofkit.core.assembly.calibration import heading_correction
from ros_dofkit.core.multibody import MultibodyPlant

LINKS = ["panda_link3", "panda_link5", "panda_link7"]
PANDA_MID = np.array([0.0, -0.8, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02])  # away from the q2 = 0 singularity


@pytest.fixture(scope="module")
def panda():
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path("panda")))
    plant.finalize()
    return plant


def random_rotation(rng):
    return spatial.rotvec_to_matrix(rng.normal(size=3))


def sensor_world_orientations(plant, q, imu_bodies, R_BS, R_GX_true):
    """What the IMUs report (in their own world X) at q: R_XS = R_GXᵀ R_WB(q) R_BS."""
    X_WB = plant.calc_body_poses(q)
    return {
        name: R_GX_true.T @ X_WB[..., plant.get_body_by_name(body).index, :3, :3] @ R_BS[name]
        for name, body in imu_bodies.items()
    }


def test_recovers_known_mounting_rotations_with_enu_and_ned_worlds(panda):
    rng = np.random.default_rng(1)
    imu_bodies = {f"imu{i}": link for i, link in enumerate(LINKS)}
    R_BS = {name: random_rotation(rng) for name in imu_bodies}
    q_cal = PANDA_MID + np.append(rng.uniform(-0.5, 0.5, 7), 0.0)
    for alignment, R_GX_true in [(None, np.eye(3)), ("enu", np.eye(3)), ("NED", NED_TO_ENU)]:
        R_XS = sensor_world_orientations(panda, q_cal, imu_bodies, R_BS, R_GX_true)
        calibration = calibrate_imus(panda, q_cal, imu_bodies, R_XS, alignment=alignment)
        assert calibration.heading_angle == 0.0
        np.testing.assert_allclose(calibration.R_GX, R_GX_true, atol=1e-15)
        for name in imu_bodies:
            np.testing.assert_allclose(calibration.R_BS[name], R_BS[name], atol=1e-12)
            assert calibration.bodies[name] == panda.get_body_by_name(imu_bodies[name]).index
    # an explicit alignment rotation
    R_GX_true = random_rotation(rng)
    R_XS = sensor_world_orientations(panda, q_cal, imu_bodies, R_BS, R_GX_true)
    calibration = calibrate_imus(panda, q_cal, imu_bodies, R_XS, alignment=R_GX_true)
    for name in imu_bodies:
        np.testing.assert_allclose(calibration.R_BS[name], R_BS[name], atol=1e-12)


def test_ned_to_enu_maps_north_east_down_axes():
    np.testing.assert_array_equal(NED_TO_ENU @ [1, 0, 0], [0, 1, 0])  # north
    np.testing.assert_array_equal(NED_TO_ENU @ [0, 1, 0], [1, 0, 0])  # east
    np.testing.assert_array_equal(NED_TO_ENU @ [0, 0, 1], [0, 0, -1])  # down
    assert np.linalg.det(NED_TO_ENU) == pytest.approx(1.0)


@pytest.mark.parametrize("heading", [0.7, -2.5, 3.0])
def test_heading_offset_recovered_then_tracking_recovers_the_trajectory(panda, heading):
    rng = np.random.default_rng(2)
    imu_bodies = {"base": "panda_link0"} | {f"imu{i}": link for i, link in enumerate(LINKS)}
    # the base IMU's -y axis points along the base's forward +x; the rest of its mounting is arbitrary
    R_BS = {"base": spatial.rotation_z(np.pi / 2) @ spatial.rotation_y(rng.uniform(-np.pi, np.pi))}
    R_BS |= {name: random_rotation(rng) for name in imu_bodies if name != "base"}
    R_GX_true = spatial.rotation_z(heading) @ NED_TO_ENU  # a NED device whose north is off by `heading`
    q_cal = PANDA_MID + np.append(rng.uniform(-0.5, 0.5, 7), 0.0)
    R_XS = sensor_world_orientations(panda, q_cal, imu_bodies, R_BS, R_GX_true)
    calibration = calibrate_imus(panda, q_cal, imu_bodies, R_XS, alignment="ned", base_imu="base",
                                 base_heading_axis="-Y")
    assert calibration.heading_angle == pytest.approx(heading, abs=1e-12)
    np.testing.assert_allclose(calibration.R_GX, R_GX_true, atol=1e-12)
    for name in imu_bodies:
        np.testing.assert_allclose(calibration.R_BS[name], R_BS[name], atol=1e-12)
    # Track a trajectory from raw sensor-world readings with the calibrated sensors.
    T = 60
    t = np.linspace(0, 1.2, T)
    Q = np.tile(PANDA_MID, (T, 1))
    for j in range(7):
        Q[:, j] += 0.3 * np.sin(2 * np.pi * 0.5 * t + j)
    names = list(imu_bodies)
    raw = sensor_world_orientations(panda, Q, imu_bodies, R_BS, R_GX_true)
    observations = np.stack([calibration.to_model_world(raw[name]) for name in names], axis=1)
    osensors = calibration.make_orientation_sensors(names, weights={"base": 0.5})
    assert osensors.get_osensor_weight(0) == 0.5 and osensors.get_osensor_name(3) == "imu2"
    assembler = Assembler(panda)
    assembler.adopt_assembly_goal(osensors)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    assembler.set_positions(Q[0])
    tracked = assembler.track_sequence(t, observations)
    assert np.max(np.abs(tracked - Q)) < 1e-8


def test_heading_correction_projects_onto_the_horizontal_plane():
    # base IMU x axis tilted up 30° but pointing north-west in heading: θ rotates it onto +x (east)
    R_GS = spatial.rotation_z(3 * np.pi / 4) @ spatial.rotation_y(-np.pi / 6)
    theta = heading_correction(R_GS, np.eye(3), "x")
    assert theta == pytest.approx(-3 * np.pi / 4)
    h = spatial.rotation_z(theta) @ R_GS[:, 0]
    assert np.arctan2(h[1], h[0]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="vertical"):
        heading_correction(np.eye(3), np.eye(3), "z")


def test_static_window_average(panda):
    rng = np.random.default_rng(3)
    R = random_rotation(rng)
    deltas = rng.normal(scale=0.01, size=(5, 3))
    samples = np.concatenate([spatial.rotvec_to_matrix(deltas) @ R, spatial.rotvec_to_matrix(-deltas) @ R])
    np.testing.assert_allclose(average_rotations(samples), R, atol=1e-7)
    np.testing.assert_allclose(average_rotations(R), R)
    with pytest.raises(ValueError, match=r"\(N, 3, 3\)"):
        average_rotations(np.zeros((0, 3, 3)))
    # calibration averages a window of samples per IMU
    imu_bodies = {"a": LINKS[0]}
    q_cal = PANDA_MID
    R_BS = {"a": random_rotation(rng)}
    R_XS = sensor_world_orientations(panda, q_cal, imu_bodies, R_BS, np.eye(3))["a"]
    window = np.concatenate([spatial.rotvec_to_matrix(deltas) @ R_XS, spatial.rotvec_to_matrix(-deltas) @ R_XS])
    calibration = calibrate_imus(panda, q_cal, imu_bodies, {"a": window})
    np.testing.assert_allclose(calibration.R_BS["a"], R_BS["a"], atol=1e-7)


def test_calibration_errors(panda):
    imu_bodies = {"a": LINKS[0], "b": LINKS[1]}
    R_XS = {"a": np.eye(3), "b": np.eye(3)}
    q_cal = PANDA_MID
    with pytest.raises(ValueError, match=r"expected one of x, -x, y, -y, z, -z"):
        calibrate_imus(panda, q_cal, imu_bodies, R_XS, base_imu="a", base_heading_axis="w")
    with pytest.raises(ValueError, match="both base_imu and base_heading_axis"):
        calibrate_imus(panda, q_cal, imu_bodies, R_XS, base_imu="a")
    with pytest.raises(ValueError, match="not among the IMUs"):
        calibrate_imus(panda, q_cal, imu_bodies, R_XS, base_imu="c", base_heading_axis="x")
    with pytest.raises(ValueError, match="no orientation"):
        calibrate_imus(panda, q_cal, imu_bodies, {"a": np.eye(3)})
    with pytest.raises(ValueError, match="'enu', 'ned'"):
        calibrate_imus(panda, q_cal, imu_bodies, R_XS, alignment="nwu")
    with pytest.raises(ValueError, match="rotation"):
        calibrate_imus(panda, q_cal, imu_bodies, {"a": 2 * np.eye(3), "b": np.eye(3)})
    with pytest.raises(ValueError, match="shape"):
        calibrate_imus(panda, q_cal[:3], imu_bodies, R_XS)
    calibration = calibrate_imus(panda, q_cal, imu_bodies, R_XS)
    with pytest.raises(ValueError, match="was not calibrated"):
        calibration.make_orientation_sensors(["a", "c"])
