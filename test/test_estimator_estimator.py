"""Tests of the estimator cycle (ros_dofkit.core.estimator.estimator.Estimator) on the shipped robots with
synthetic sensor streams generated from known trajectories: tracking accuracy, measured vs estimated dofs, gyro
velocities, floating and planar bases, stale sensors, reliability rules (drop + count), clock jumps."""

import dataclasses
import math

import numpy as np
import pytest

from ros_dofkit.core.estimator import CALIBRATE, EstimatorConfig, EstimatorConfigError, ImuConfig, UnknownNameError
from ros_dofkit.core.estimator.estimator import Estimator, rotation_angle_between
from ros_dofkit.core.estimator.inputs import RejectReason
from ros_dofkit.core.estimator.offline import OfflineInputs
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_y, rotation_z, rotvec_to_matrix

ARM_IMUS = (
    ImuConfig("upper_arm", "arm_link3"),
    ImuConfig("forearm", "arm_link5", mounting=rotation_x(0.5)),
    ImuConfig("wrist", "arm_link6", mounting=rotation_y(-0.4) @ rotation_z(1.0)),
    ImuConfig("hand", "arm_link7"),
)
ARM_ESTIMATED = ("arm_joint3", "arm_joint4", "arm_joint5", "arm_joint6", "arm_joint7")
DT = 0.002


@pytest.fixture(scope="module")
def arm_plant():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


def arm_trajectory(t):
    """A smooth arm motion inside the joint limits: q(t), qd(t)."""
    q0 = np.array([0.1, -0.8, 0.2, -1.5, 0.1, 1.2, 0.3])  # away from the q2 = 0 singularity (axes 1, 3 aligned)
    phase = 2 * np.pi * 0.7 * t + np.arange(7)
    return q0 + 0.3 * np.sin(phase), 0.3 * 2 * np.pi * 0.7 * np.cos(phase)


def sensor_readings(plant, imus, q, v):
    """Exact IMU readings for the plant at (q, v): {name: (quaternion wxyz of R_GS, w_S)}."""
    X_WB = plant.calc_body_poses(q)
    readings = {}
    for imu in imus:
        body = plant.get_body_by_name(imu.body)
        R_WS = X_WB[body.index, :3, :3] @ np.asarray(imu.mounting)
        w_W = plant.calc_angular_jacobian(q, body) @ v
        readings[imu.name] = (matrix_to_quat(R_WS), R_WS.T @ w_W)
    return readings


def feed(estimator, plant, imus, q, v, t, encoder_names, encoder_indices, skip=()):
    estimator.add_joint_state(encoder_names, q[encoder_indices], v[encoder_indices], stamp=t)
    for name, (quaternion, gyro) in sensor_readings(plant, imus, q, v).items():
        if name not in skip:
            assert estimator.add_imu(name, t, quaternion, gyro).ok
    return estimator


@pytest.fixture(scope="module")
def arm_run(arm_plant):
    """Run the arm estimator over 0.4 s of motion; return the results and the truth."""
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ARM_ESTIMATED})
    estimator = Estimator(arm_plant, config)
    results, truth = [], []
    for k in range(200):
        t = k * DT
        q, v = arm_trajectory(t)
        feed(estimator, arm_plant, ARM_IMUS, q, v, t, ["arm_joint1", "arm_joint2"], [0, 1])
        assert estimator.ready()
        results.append(estimator.step())
        truth.append((q, v))
    return estimator, results, truth


def test_arm_tracks_truth(arm_run):
    _, results, truth = arm_run
    for result, (q, _) in zip(results, truth, strict=True):
        assert result.solved and result.failure == ""
        np.testing.assert_allclose(result.q, q, atol=1e-6)
        assert max(result.sensor_errors_deg.values()) < 1e-4
    assert results[0].tracking_reset and not results[1].tracking_reset
    assert [r.cycle for r in results[:3]] == [1, 2, 3]
    assert results[5].stamp == pytest.approx(5 * DT)


def test_arm_measured_joints_are_the_encoder_values(arm_run):
    _, results, truth = arm_run
    for result, (q, _) in zip(results, truth, strict=True):
        assert result.q[0] == q[0] and result.q[1] == q[1]


def test_arm_velocities_from_gyros_and_encoders(arm_run):
    _, results, truth = arm_run
    for result, (_, v) in zip(results[1:], truth[1:], strict=True):
        np.testing.assert_allclose(result.v, v, atol=1e-5)
        np.testing.assert_array_equal(result.velocity_from_gyro, [False, False, True, True, True, True, True])


def test_arm_result_is_immutable(arm_run):
    _, results, _ = arm_run
    result = results[-1]
    for array in (result.q, result.v, result.X_WB, result.velocity_from_gyro):
        assert not array.flags.writeable
    with pytest.raises(AttributeError):
        result.q = np.zeros(7)
    assert result.position_names == tuple(f"arm_joint{i}" for i in range(1, 8))


def test_arm_masks(arm_run):
    estimator, _, _ = arm_run
    assert list(estimator.instance_masks) == ["arm"]
    assert estimator.instance_masks["arm"] == [True] * 7
    assert estimator.estimated_mask == [False, False, True, True, True, True, True]


def test_velocity_falls_back_to_finite_differences_without_encoder_velocity(arm_plant):
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ARM_ESTIMATED})
    estimator = Estimator(arm_plant, config)
    results = []
    for k in range(3):
        t = k * DT
        q, v = arm_trajectory(t)
        estimator.add_joint_state(["arm_joint1", "arm_joint2"], q[:2], None, stamp=t)
        for name, (quaternion, _) in sensor_readings(arm_plant, ARM_IMUS, q, v).items():
            estimator.add_imu(name, t, quaternion, None, angular_velocity_present=False)
        results.append(estimator.step())
    np.testing.assert_array_equal(results[0].v, 0.0)  # first cycle: nothing to difference against
    expected = (results[2].q - results[1].q) / DT
    np.testing.assert_allclose(results[2].v, expected, rtol=1e-9, atol=1e-9)
    assert not results[2].velocity_from_gyro.any()


def test_arm_from_pinocchio_panda_truth(arm_plant):
    """IMU orientations computed by Pinocchio on example-robot-data's Panda drive the estimator on arm7.urdf (which
    is written from the Panda's published DH table): the estimate equals the Panda's joint angles."""
    pin = pytest.importorskip("pinocchio")
    from robot_models import urdf_path

    model = pin.buildModelFromUrdf(str(urdf_path("panda")))
    data = model.createData()
    links = {"upper_arm": "panda_link3", "forearm": "panda_link5", "wrist": "panda_link6", "hand": "panda_link7"}
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": "all"})
    estimator = Estimator(arm_plant, config)
    for k in range(20):
        q, _ = arm_trajectory(k * 0.01)
        pin.framesForwardKinematics(model, data, np.concatenate([q, [0.0, 0.0]]))
        for imu in ARM_IMUS:
            R_WS = data.oMf[model.getFrameId(links[imu.name])].rotation @ imu.mounting
            estimator.add_imu(imu.name, k * 0.01, matrix_to_quat(R_WS))
        result = estimator.step()
        np.testing.assert_allclose(result.q, q, atol=1e-6)


def test_mobile_manipulator_planar_base_and_instances():
    plant = build_plant([ModelSpec("mobile_base.urdf", "base", "planar"),
                         ModelSpec("arm7.urdf", "arm", "fixed", "arm_mount")])
    imus = (ImuConfig("base", "base_imu_link", model_instance="base"),
            ImuConfig("forearm", "arm_link5", model_instance="arm"),
            ImuConfig("hand", "arm_link7", model_instance="arm", mounting=rotation_x(0.3)))
    config = EstimatorConfig(imus=imus, estimated_joints={
        "base": ["base_link_qz"], "arm": ["arm_joint4", "arm_joint5", "arm_joint6", "arm_joint7"]})
    estimator = Estimator(plant, config)
    names = list(plant.position_names())
    assert estimator.instance_masks["base"] == [True] * 5 + [False] * 7
    assert estimator.instance_masks["arm"] == [False] * 5 + [True] * 7
    assert estimator.estimated_mask == [False, False, True, False, False, False, False, False] + [True] * 4
    measured = [i for i, m in enumerate(estimator.estimated_mask) if not m]
    for k in range(30):
        t = k * DT
        q_arm, v_arm = arm_trajectory(t)
        q = np.concatenate([[1.0 + 0.2 * t, -0.5, 0.3 + 0.5 * t, 2.0 * t, -1.0 * t], q_arm])
        v = np.concatenate([[0.2, 0.0, 0.5, 2.0, -1.0], v_arm])
        estimator.add_joint_state([names[i] for i in measured], q[measured], v[measured], stamp=t)
        for name, (quaternion, gyro) in sensor_readings(plant, imus, q, v).items():
            estimator.add_imu(name, t, quaternion, gyro)
        result = estimator.step()
        np.testing.assert_allclose(result.q, q, atol=1e-6)
        if k:
            np.testing.assert_allclose(result.v, v, atol=1e-5)


def test_floating_base_orientation_estimated_translation_held():
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    imus = (ImuConfig("trunk", "trunk_imu_link", mounting=rotation_z(np.pi / 2)),)
    estimator = Estimator(plant, EstimatorConfig(imus=imus, estimated_joints={"quadruped": "none"}))
    joint_names = list(plant.position_names())[7:]
    default = plant.default_positions()
    for k in range(30):
        t = k * DT
        w_W = np.array([0.3, -0.2, 0.8])
        R_WB = rotvec_to_matrix(w_W * t) @ rotation_x(0.1)
        legs = 0.2 * np.sin(t + np.arange(12)) - 0.5 * np.isin(np.arange(12), [2, 5, 8, 11])
        q = np.concatenate([matrix_to_quat(R_WB), default[4:7], legs])
        v = np.concatenate([w_W, np.zeros(3), 0.2 * np.cos(t + np.arange(12))])
        estimator.add_joint_state(joint_names, legs, v[6:], stamp=t)
        (quaternion, gyro), = sensor_readings(plant, imus, q, v).values()
        estimator.add_imu("trunk", t, quaternion, gyro)
        result = estimator.step()
        R_est = plant.calc_body_poses(result.q)[plant.get_body_by_name("trunk").index, :3, :3]
        assert rotation_angle_between(R_est, R_WB) < 1e-6
        np.testing.assert_array_equal(result.q[4:7], default[4:7])
        np.testing.assert_array_equal(result.q[7:], legs)
        np.testing.assert_allclose(result.v[:3], w_W, atol=1e-7)
        assert result.velocity_from_gyro[:3].all() and not result.velocity_from_gyro[3:].any()


def test_stale_sensor_is_reported_tracking_continues_and_resumes(arm_plant):
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ["arm_joint6", "arm_joint7"]},
                             stale_timeout_s=0.02)
    estimator = Estimator(arm_plant, config)
    encoders = ["arm_joint1", "arm_joint2", "arm_joint3", "arm_joint4", "arm_joint5"]
    stale_cycles, outputs_while_silent = 0, 0
    for k in range(60):
        t = k * DT
        q, v = arm_trajectory(t)
        silent = 15 <= k < 40
        feed(estimator, arm_plant, ARM_IMUS, q, v, t, encoders, [0, 1, 2, 3, 4], skip=("wrist",) if silent else ())
        if not silent or t - 16 * DT > 0.02 + 1e-9:
            # A stale sensor never blocks the cycle (staleness is judged at the previous cycle, at most two
            # samples back while the late sensor halves the cycle rate).
            assert estimator.ready()
        if not estimator.ready():
            continue  # waiting for the late sensor, at most one sample period
        result = estimator.step()
        outputs_while_silent += silent
        if silent and t - 14 * DT > 0.02 + 1e-9:
            assert result.stale_sensors == ("wrist",)
            assert math.isnan(result.sensor_errors_deg["wrist"])
            assert "wrist" not in result.observed_sensors
            stale_cycles += 1
        if k >= 40:
            assert result.stale_sensors == ()
            assert result.sensor_errors_deg["wrist"] < 1e-4
        late_but_live = silent and not result.stale_sensors
        # A late sensor's last sample counts until it is stale (it lags the motion by < stale_timeout); once
        # stale it is dropped and the hand IMU alone observes joints 6-7 exactly.
        np.testing.assert_allclose(result.q, q, atol=1e-2 if late_but_live else 1e-6)
    assert stale_cycles >= 13  # k = 25..39 have a wrist sample (k = 14) older than 0.02 s; a few may wait
    assert outputs_while_silent >= 18  # late phase: every other cycle still produces output


def test_ready_waits_for_every_live_sensor(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    assert not estimator.ready()
    for name in ["upper_arm", "forearm", "wrist", "hand"]:
        estimator.add_imu(name, 0.0, *readings[name])
    assert estimator.ready()
    estimator.step()
    assert not estimator.ready()
    estimator.add_imu("hand", DT, *readings["hand"])
    assert not estimator.ready()
    estimator.add_imu("hand", 2 * DT, *readings["hand"])
    assert estimator.statistics()["overwritten_samples"] == 1


def test_bad_inputs_are_dropped_counted_and_change_nothing(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ARM_ESTIMATED}))
    q, v = arm_trajectory(0.0)
    feed(estimator, arm_plant, ARM_IMUS, q, v, 1.0, ["arm_joint1", "arm_joint2"], [0, 1])
    good = estimator.step()
    bad_calls = [
        (RejectReason.MISMATCHED_ARRAYS, lambda: estimator.add_joint_state(["arm_joint1"], [0.1, 0.2], stamp=1.1)),
        (RejectReason.NON_FINITE, lambda: estimator.add_joint_state(["arm_joint1"], [np.nan], stamp=1.1)),
        (RejectReason.DUPLICATE_NAME, lambda: estimator.add_joint_state(["arm_joint1"] * 2, [0, 0], stamp=1.1)),
        (RejectReason.UNKNOWN_NAME, lambda: estimator.add_joint_state(["finger"], [0.0], stamp=1.1)),
        (RejectReason.EMPTY, lambda: estimator.add_joint_state([], [], stamp=1.1)),
        (RejectReason.OUT_OF_ORDER, lambda: estimator.add_joint_state(["arm_joint1"], [0.5], stamp=0.9)),
        (RejectReason.FUTURE_STAMP, lambda: estimator.add_joint_state(["arm_joint1"], [0.5], stamp=9.0, now=1.1)),
        (RejectReason.STALE_STAMP, lambda: estimator.add_joint_state(["arm_joint1"], [0.5], stamp=1.0, now=1.5)),
        (RejectReason.ZERO_QUATERNION, lambda: estimator.add_imu("hand", 1.1, [0, 0, 0, 0])),
        (RejectReason.NON_UNIT_QUATERNION, lambda: estimator.add_imu("hand", 1.1, [0.5, 0, 0, 0])),
        (RejectReason.NON_FINITE, lambda: estimator.add_imu("hand", 1.1, [np.inf, 0, 0, 0])),
        (RejectReason.NON_FINITE, lambda: estimator.add_imu("hand", float("nan"), [1, 0, 0, 0])),
        (RejectReason.OUT_OF_ORDER, lambda: estimator.add_imu("hand", 0.95, [1, 0, 0, 0])),
        (RejectReason.UNKNOWN_SENSOR, lambda: estimator.add_imu("elbow", 1.1, [1, 0, 0, 0])),
        (RejectReason.ORIENTATION_ABSENT, lambda: estimator.add_imu("hand", 1.1, None, None, False, False)),
    ]
    before = estimator.reject_counts()
    for reason, call in bad_calls:
        status = call()
        assert not status.accepted and status.reason is reason, (reason, status)
        assert status.detail
    after = estimator.reject_counts()
    expected = {r.value: sum(1 for reason, _ in bad_calls if reason is r) for r in RejectReason}
    assert {k: after[k] - before[k] for k in after} == expected
    assert not estimator.ready()  # nothing of the bad input counts as new data
    again = estimator.step()
    np.testing.assert_array_equal(again.q, good.q)
    assert ("hand", "zero_quaternion") in estimator.reject_counts_by_source()


def test_partial_joint_states_merge_and_unknown_names_are_ignored(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=(), estimated_joints={"arm": "none"}))
    estimator.add_joint_state(["arm_joint1", "arm_joint2"], [0.1, 0.2], stamp=0.0)
    status = estimator.add_joint_state(["gripper", "arm_joint7"], [9.0, 0.7], stamp=0.0)
    assert status.accepted and status.reason is RejectReason.UNKNOWN_NAME
    result = estimator.step()
    np.testing.assert_array_equal(result.q, [0.1, 0.2, 0, 0, 0, 0, 0.7])
    assert result.missing_encoders == ("arm_joint3", "arm_joint4", "arm_joint5", "arm_joint6")
    assert not result.solved and "no IMU" in result.failure


def test_orientation_absent_keeps_gyro(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    for name, (quaternion, gyro) in readings.items():
        status = estimator.add_imu(name, 0.0, quaternion, gyro, orientation_present=(name != "hand"))
        assert status.accepted
    result = estimator.step()
    assert "hand" not in result.observed_sensors and math.isnan(result.sensor_errors_deg["hand"])
    assert estimator.reject_counts()["orientation_absent"] == 1


def test_clock_jump_back_resets_tracking(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    for t, now in ((5.0, 5.0), (5.002, 5.002)):
        for name, reading in readings.items():
            estimator.add_imu(name, t, *reading, now=now)
        estimator.step()
    for name, reading in readings.items():  # the bag loops: clock and stamps start again
        assert estimator.add_imu(name, 0.0, *reading, now=0.0).ok
    result = estimator.step()
    assert result.tracking_reset and estimator.statistics()["resets"] == 1
    assert estimator.reject_counts()["clock_jump_back"] == 1
    np.testing.assert_allclose(result.q, q, atol=1e-6)
    np.testing.assert_allclose(result.v, v, atol=1e-6)  # gyros, not a finite difference across the jump


def test_offline_stamp_jump_resets_but_small_step_back_is_out_of_order(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, stamp_jump_reset_s=1.0))
    q, v = arm_trajectory(0.0)
    quaternion, gyro = sensor_readings(arm_plant, ARM_IMUS, q, v)["hand"]
    assert estimator.add_imu("hand", 10.0, quaternion, gyro).ok
    assert estimator.add_imu("hand", 9.5, quaternion, gyro).reason is RejectReason.OUT_OF_ORDER
    assert estimator.add_imu("hand", 2.0, quaternion, gyro).ok
    assert estimator.statistics()["resets"] == 1


def test_uncalibrated_sensor_is_reported_and_not_used(arm_plant):
    imus = (*ARM_IMUS[:3], ImuConfig("hand", "arm_link7", mounting=CALIBRATE))
    estimator = Estimator(arm_plant, EstimatorConfig(imus=imus))
    q, v = arm_trajectory(0.0)
    for name, reading in sensor_readings(arm_plant, ARM_IMUS, q, v).items():
        estimator.add_imu(name, 0.0, *reading)
    result = estimator.step()
    assert result.uncalibrated_sensors == ("hand",)
    assert estimator.mounting("hand") is None
    assert result.observed_sensors == ("upper_arm", "forearm", "wrist")


@pytest.mark.parametrize(
    "config, error, fragment",
    [
        (EstimatorConfig(imus=(ImuConfig("a", "arm_lnk3"),)), UnknownNameError, "did you mean 'arm_link3'"),
        (EstimatorConfig(estimated_joints={"armm": "all"}), UnknownNameError, "did you mean 'arm'"),
        (EstimatorConfig(estimated_joints={"arm": ["arm_joint9"]}), UnknownNameError, "arm_joint1"),
        (EstimatorConfig(imus=(ImuConfig("a", "arm_link3", model_instance="base"),)), UnknownNameError, "'arm'"),
    ],
)
def test_config_checked_against_the_robot(arm_plant, config, error, fragment):
    with pytest.raises(error) as info:
        Estimator(arm_plant, config)
    assert fragment in str(info.value)


def test_floating_joint_cannot_be_listed_and_plant_must_be_finalized():
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    with pytest.raises(EstimatorConfigError, match="floating"):
        Estimator(plant, EstimatorConfig(estimated_joints={"quadruped": ["trunk"]}))
    from ros_dofkit.core.multibody import MultibodyPlant

    with pytest.raises(EstimatorConfigError, match="finalized"):
        Estimator(MultibodyPlant(), EstimatorConfig())
    with pytest.raises(TypeError):
        Estimator(plant, {"imus": []})


def test_step_without_any_input_needs_a_stamp(arm_plant):
    from ros_dofkit.core.estimator.estimator import EstimatorStateError

    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    with pytest.raises(EstimatorStateError):
        estimator.step()
    result = estimator.step(0.5)
    assert result.stale_sensors == ("upper_arm", "forearm", "wrist", "hand")


def test_rotation_angle_between_matches_rotvec_norm():
    rng = np.random.default_rng(4)
    for angle in [0.0, 1e-9, 1e-4, 0.5, 3.0, np.pi - 1e-7]:
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        R_A = rotvec_to_matrix(rng.normal(size=3))
        assert rotation_angle_between(R_A, R_A @ rotvec_to_matrix(angle * axis)) == pytest.approx(angle, abs=1e-12)


def test_calibrate_computes_unknown_mounting_from_static_window(arm_plant):
    from ros_dofkit.core.estimator.estimator import CalibrationError

    R_BS_true = rotation_y(-0.4) @ rotation_z(1.0)
    imus = (*ARM_IMUS[:2], ImuConfig("wrist", "arm_link6", mounting=CALIBRATE), ARM_IMUS[3])
    truth_imus = (*ARM_IMUS[:2], ImuConfig("wrist", "arm_link6", mounting=R_BS_true), ARM_IMUS[3])
    estimator = Estimator(arm_plant, EstimatorConfig(imus=imus, estimated_joints={"arm": ARM_ESTIMATED},
                                                     calibration_window=5))
    with pytest.raises(CalibrationError, match="no orientation samples"):
        estimator.calibrate()
    # Calibration pose: default positions in the estimated joints, encoders in the measured ones.
    q_cal = arm_plant.default_positions().copy()
    q_cal[:2] = [0.3, -0.6]
    rng = np.random.default_rng(5)
    for k in range(5):
        estimator.add_joint_state(["arm_joint1", "arm_joint2"], q_cal[:2], stamp=k * DT)
        for name, (quaternion, _) in sensor_readings(arm_plant, truth_imus, q_cal, np.zeros(7)).items():
            jitter = rotvec_to_matrix(rng.normal(scale=1e-4, size=3))  # sensor noise, well under the 2 deg limit
            estimator.add_imu(name, k * DT, matrix_to_quat(quat_to_matrix(quaternion) @ jitter))
        estimator.step()
    result = estimator.calibrate()
    assert set(result.R_BS) == {"wrist"} and result.num_samples["wrist"] == 5
    assert math.degrees(rotation_angle_between(result.R_BS["wrist"], R_BS_true)) < 0.02
    np.testing.assert_allclose(estimator.mounting("wrist"), result.R_BS["wrist"])
    np.testing.assert_array_equal(result.q_cal, q_cal)
    assert result.heading_angle == 0.0 and result.max_spread_deg < 0.1
    # The calibrated IMU is used from now on.
    q, v = arm_trajectory(0.1)
    feed(estimator, arm_plant, truth_imus, q, v, 1.0, ["arm_joint1", "arm_joint2"], [0, 1])
    step = estimator.step()
    assert "wrist" in step.observed_sensors and step.uncalibrated_sensors == () and step.tracking_reset
    np.testing.assert_allclose(step.q, q, atol=1e-3)


def test_calibrate_uses_only_its_window_and_refuses_a_stale_imu(arm_plant):
    """Issue 17.2: a silent IMU's old samples (another pose) are not calibration data."""
    from ros_dofkit.core.estimator.estimator import CalibrationError

    R_BS_true = rotation_y(-0.4) @ rotation_z(1.0)
    imus = (*ARM_IMUS[:2], ImuConfig("wrist", "arm_link6", mounting=CALIBRATE), ARM_IMUS[3])
    truth_imus = (*ARM_IMUS[:2], ImuConfig("wrist", "arm_link6", mounting=R_BS_true), ARM_IMUS[3])
    estimator = Estimator(arm_plant, EstimatorConfig(imus=imus, estimated_joints={"arm": ARM_ESTIMATED},
                                                     calibration_window=20, stale_timeout_s=0.05))
    pose_a, pose_b = arm_plant.default_positions().copy(), arm_plant.default_positions().copy()
    pose_a[:2], pose_b[:2] = [0.3, -0.6], [0.9, -0.2]

    def hold(pose, stamps, skip=()):
        for t in stamps:
            estimator.add_joint_state(["arm_joint1", "arm_joint2"], pose[:2], stamp=t)
            for name, (quaternion, _) in sensor_readings(arm_plant, truth_imus, pose, np.zeros(7)).items():
                if name not in skip:
                    estimator.add_imu(name, t, quaternion)

    hold(pose_a, [k * DT for k in range(15)])  # the wrist's window fills at pose A ...
    hold(pose_b, [0.5 + k * DT for k in range(10)], skip=("wrist",))  # ... then it falls silent; robot at pose B
    with pytest.raises(CalibrationError, match=r"\['wrist'\] are stale"):
        estimator.calibrate()
    hold(pose_b, [0.6 + k * DT for k in range(4)])  # the wrist resumes at pose B: its pose A samples are not used
    result = estimator.calibrate()
    assert result.num_samples["wrist"] == 4
    assert math.degrees(rotation_angle_between(result.R_BS["wrist"], R_BS_true)) < 1e-6


def test_calibrate_refuses_a_moving_window(arm_plant):
    from ros_dofkit.core.estimator.estimator import CalibrationError

    imus = (ImuConfig("hand", "arm_link7", mounting=CALIBRATE),)
    estimator = Estimator(arm_plant, EstimatorConfig(imus=imus, calibration_window=10))
    for k in range(10):
        estimator.add_imu("hand", k * DT, matrix_to_quat(rotation_z(0.01 * k)))
    with pytest.raises(CalibrationError, match="moved during the calibration window"):
        estimator.calibrate()
    assert estimator.mounting("hand") is None
    estimator_no_work = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    with pytest.raises(CalibrationError, match="nothing to calibrate"):
        estimator_no_work.calibrate()
    with pytest.raises(UnknownNameError, match="hand"):
        estimator_no_work.calibrate(sensors=["hnd"])


def test_calibrate_heading_aligns_imu_world_with_model_world():
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    imus = (ImuConfig("trunk", "trunk_imu_link"),)
    config = EstimatorConfig(imus=imus, estimated_joints={"quadruped": "none"}, heading_reference="trunk",
                             heading_axis="x")
    estimator = Estimator(plant, config)
    yaw = 0.7  # the IMU's world (ENU) is turned by 0.7 rad about z from the model world
    R_WG_true = rotation_z(yaw)
    q_cal = plant.default_positions()
    (quaternion, _), = sensor_readings(plant, imus, q_cal, np.zeros(18)).values()
    for k in range(3):
        estimator.add_imu("trunk", k * DT, matrix_to_quat(R_WG_true.T @ quat_to_matrix(quaternion)))
    result = estimator.calibrate()
    assert result.heading_angle == pytest.approx(yaw, abs=1e-9)
    np.testing.assert_allclose(estimator.R_WG, R_WG_true, atol=1e-9)
    np.testing.assert_allclose(estimator.mounting("trunk"), np.eye(3))  # fixed mountings stay
    # Tracking now reports the trunk's true yaw from readings in the turned IMU world.
    R_WB = rotation_z(-0.4) @ rotation_y(0.2)
    q = np.concatenate([matrix_to_quat(R_WB), q_cal[4:]])
    (quaternion, gyro), = sensor_readings(plant, imus, q, np.zeros(18)).values()
    estimator.add_imu("trunk", 1.0, matrix_to_quat(R_WG_true.T @ quat_to_matrix(quaternion)), gyro)
    step = estimator.step()
    R_est = plant.calc_body_poses(step.q)[plant.get_body_by_name("trunk").index, :3, :3]
    assert rotation_angle_between(R_est, R_WB) < 1e-6


def test_update_settings_changes_tuning_and_refuses_structure(arm_plant):
    import dataclasses

    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ARM_ESTIMATED})
    estimator = Estimator(arm_plant, config)
    estimator.update_settings(dataclasses.replace(config, stale_timeout_s=0.5, R_WG=rotation_z(0.2),
                                                  accuracy=1e-6, calibration_window=3))
    assert estimator.config.stale_timeout_s == 0.5
    np.testing.assert_allclose(estimator.R_WG, rotation_z(0.2))
    for k in range(5):
        estimator.add_imu("hand", k * DT, [1.0, 0.0, 0.0, 0.0])
    assert len(estimator._windows["hand"]) == 3
    with pytest.raises(EstimatorConfigError, match="build a new one"):
        estimator.update_settings(dataclasses.replace(config, estimated_joints={"arm": "all"}))
    with pytest.raises(EstimatorConfigError, match="build a new one"):
        estimator.update_settings(dataclasses.replace(config, imus=ARM_IMUS[:3]))
    with pytest.raises(TypeError):
        estimator.update_settings({})


def test_result_not_initialized_until_a_solve(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    estimator.add_joint_state(["arm_joint1"], [0.1], stamp=0.0)
    assert not estimator.step().initialized
    q, v = arm_trajectory(0.0)
    feed(estimator, arm_plant, ARM_IMUS, q, v, DT, ["arm_joint1"], [0])
    assert estimator.step().initialized
    measured_only = Estimator(arm_plant, EstimatorConfig(estimated_joints={"arm": "none"}))
    measured_only.add_joint_state(["arm_joint1"], [0.1], stamp=0.0)
    assert measured_only.step().initialized  # nothing to estimate


def test_first_cycle_waits_for_all_imus_until_the_stale_timeout(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, stale_timeout_s=0.01))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    estimator.add_imu("hand", 0.0, *readings["hand"])
    assert not estimator.ready()  # the others have not been heard from yet
    estimator.add_imu("wrist", 0.0, *readings["wrist"])
    assert not estimator.ready()
    estimator.add_imu("hand", 0.02, *readings["hand"])  # past the timeout: the silent ones are stale now
    assert estimator.ready()
    assert estimator.step().stale_sensors == ("upper_arm", "forearm", "wrist")


def test_sync_joint_states_waits_for_the_encoders(arm_plant):
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": ARM_ESTIMATED}, sync_joint_states=True)
    estimator = Estimator(arm_plant, config)
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    for name, reading in readings.items():
        estimator.add_imu(name, 0.0, *reading)
    assert not estimator.ready()  # encoders expected at start
    estimator.add_joint_state(["arm_joint1", "arm_joint2"], q[:2], stamp=0.0)
    assert estimator.ready()
    np.testing.assert_allclose(estimator.step().q, q, atol=1e-6)
    for name, reading in readings.items():
        estimator.add_imu(name, DT, *reading)
    assert not estimator.ready()  # the joint states are arriving: wait for this instant's
    estimator.add_joint_state(["arm_joint1", "arm_joint2"], q[:2], stamp=DT)
    assert estimator.ready()
    estimator.step()
    for name, reading in readings.items():  # encoders go silent ...
        estimator.add_imu(name, 1.0, *reading)
    assert not estimator.ready()  # ... after a pause every source is waited for, one sample period at most:
    estimator.add_imu("hand", 1.0 + DT, *readings["hand"])
    assert estimator.ready()
    estimator.step()
    for name, reading in readings.items():  # from now on the IMUs alone drive the cycle
        estimator.add_imu(name, 1.0 + 2 * DT, *reading)
    assert estimator.ready()


def test_process_imu_waits_a_bounded_time_for_late_samples_and_drops_repeats(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    q0, v0 = arm_trajectory(0.0)
    q1, v1 = arm_trajectory(DT)
    first = sensor_readings(arm_plant, ARM_IMUS, q0, v0)
    second = sensor_readings(arm_plant, ARM_IMUS, q1, v1)
    outputs = []
    for name in ["upper_arm", "forearm", "wrist", "hand"]:
        status, results = estimator.process_imu(name, 0.0, *first[name])
        assert status.ok
        outputs += results
    assert len(outputs) == 1 and outputs[0].stamp == 0.0
    np.testing.assert_allclose(outputs[0].q, q0, atol=1e-6)
    # The hand runs ahead while the others' samples of DT are late: nothing is overwritten, no instants are mixed,
    # and instant DT waits for them until an input stale_timeout_s (0.1 s) after it arrives (the bounded wait).
    for k in range(1, 51):
        _, results = estimator.process_imu("hand", k * DT, *second["hand"])
        assert results == ()
    _, results = estimator.process_imu("hand", 0.1 + 1.25 * DT, *second["hand"])
    assert [result.stamp for result in results] == [DT]  # the waited instant ran without the late samples
    assert estimator.statistics()["overwritten_samples"] == 0 and estimator.statistics()["flushed_cycles"] == 1
    # A sample of an instant that ran without it is late: dropped, counted as overwritten.
    status, results = estimator.process_imu("wrist", DT, *second["wrist"])
    assert status.ok and results == ()
    assert estimator.statistics()["overwritten_samples"] == 1
    # A repeated stamp is dropped and counted: one output per stamp (tf2 warns about repeated data).
    status, results = estimator.process_imu("hand", 0.1 + 1.25 * DT, *second["hand"])
    assert not status.accepted and status.reason is RejectReason.REPEATED_STAMP and results == ()
    assert estimator.reject_counts_by_source()[("hand", "repeated_stamp")] == 1


def test_synchronized_mode_heals_a_phase_shift(arm_plant):
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": "all"}, sync_tolerance_s=1e-4)
    estimator = Estimator(arm_plant, config)
    names = ["upper_arm", "forearm", "wrist", "hand"]

    def readings(k):
        q, v = arm_trajectory(k * DT)
        return q, sensor_readings(arm_plant, ARM_IMUS, q, v)

    q, r = readings(0)
    for name in names:
        estimator.process_imu(name, 0.0, *r[name])
    estimator.process_imu("hand", DT, *readings(1)[1]["hand"])  # the hand runs one instant ahead
    results = []
    for k in range(1, 5):
        q, r = readings(k)
        for name in names:
            _, out = estimator.process_imu(name, k * DT, *r[name])
            results += [(res, q) for res in out]
    # Every cycle solves one instant exactly, with all four sensors.
    assert [res.stamp for res, _ in results] == pytest.approx([DT, 2 * DT, 3 * DT, 4 * DT])
    for res, q in results:
        assert res.observed_sensors == tuple(names)
        np.testing.assert_allclose(res.q, q, atol=1e-6)


def test_synchronized_mode_solves_every_instant_despite_interleaving(arm_plant):
    """Samples of consecutive instants arriving interleaved across sensors (as an executor that lags takes them)
    are queued: every instant is solved exactly once with its own samples, nothing is dropped."""
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints={"arm": "all"}, sync_tolerance_s=1e-4)
    estimator = Estimator(arm_plant, config)
    names = ["upper_arm", "forearm", "wrist", "hand"]
    truth = {k: arm_trajectory(k * DT) for k in range(8)}
    samples = {k: sensor_readings(arm_plant, ARM_IMUS, *truth[k]) for k in truth}
    # Arrival order: sensor i of instant k arrives after sensor 0 of instant k + 1 (round-robin lag).
    order = [(k, name) for k in range(8) for name in names]
    order.sort(key=lambda item: item[0] + (0.75 if item[1] != "upper_arm" else 0.0))
    results = []
    for k, name in order:
        _, out = estimator.process_imu(name, k * DT, *samples[k][name])
        results += out
    assert [round(r.stamp / DT) for r in results] == list(range(8))
    for result in results:
        assert result.observed_sensors == tuple(names)
        np.testing.assert_allclose(result.q, truth[round(result.stamp / DT)][0], atol=1e-6)
    assert estimator.statistics()["overwritten_samples"] == 0


def test_joint_limits_bound_the_estimate_only_when_enabled(arm_plant):
    imus = (ImuConfig("hand", "arm_link7"),)
    q_target = arm_plant.default_positions().copy()
    q_target[6] = 2.95  # beyond arm_joint7's upper limit 2.8973
    R_WS = arm_plant.calc_body_poses(q_target)[arm_plant.get_body_by_name("arm_link7").index, :3, :3]
    for use_limits, expected in ((True, 2.8973), (False, 2.95)):
        config = EstimatorConfig(imus=imus, estimated_joints={"arm": ["arm_joint7"]}, use_joint_limits=use_limits)
        estimator = Estimator(arm_plant, config)
        estimator.add_joint_state([f"arm_joint{i}" for i in range(1, 7)], q_target[:6], stamp=0.0)
        estimator.add_imu("hand", 0.0, matrix_to_quat(R_WS))
        assert estimator.step().q[6] == pytest.approx(expected, abs=1e-6)


def test_zero_weight_imu_is_not_used_by_the_solve(arm_plant):
    imus = (ImuConfig("hand", "arm_link7"), ImuConfig("wrist", "arm_link6", weight=0.0))
    estimator = Estimator(arm_plant, EstimatorConfig(imus=imus, estimated_joints={"arm": "none"}))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, imus, q, v)
    estimator.add_joint_state([f"arm_joint{i}" for i in range(1, 8)], q, stamp=0.0)
    for name, reading in readings.items():
        estimator.add_imu(name, 0.0, *reading)
    result = estimator.step()
    assert result.observed_sensors == ("hand",) and math.isnan(result.sensor_errors_deg["wrist"])


def test_streaming_results_equal_batch_results_field_by_field():
    """Every field of every cycle (but the solve's wall time) is the same bits whether the inputs are offered one
    message at a time (the node's streaming cycle) or as one window: a floating base with measured and estimated
    leg joints, a world alignment that is not the identity, an IMU that goes stale, a gyro-only IMU and cycles
    with only its samples (nothing observed), and a stamp jump that resets tracking. Streaming builds no batch run
    for an ordinary cycle."""
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    imus = (ImuConfig("trunk", "trunk_imu_link", mounting=rotation_z(np.pi / 2)), ImuConfig("shank", "fl_shank"),
            ImuConfig("thigh", "fr_thigh", mounting=rotation_x(0.4), weight=0.0))  # gyro only
    config = EstimatorConfig(imus=imus, estimated_joints={"quadruped": ["fl_knee", "fl_hip_flexion", "fr_hip_flexion"]},
                             R_WG=rotation_z(0.3), stale_timeout_s=0.005)
    names = list(plant.position_names())
    estimated = {plant.get_joint_by_name(j).position_start for j in config.estimated_joints["quadruped"]}
    measured = [i for i in range(7, plant.num_positions()) if i not in estimated]
    default = plant.default_positions()
    messages = []  # (stamp, kind, name, payload)
    for k in range(40):
        t = (10.0 if k < 25 else 5.0) + k * DT  # a jump back at k = 25: tracking restarts
        R_WB = rotvec_to_matrix(np.array([0.3, -0.2, 0.8]) * k * DT) @ rotation_x(0.1)
        legs = 0.2 * np.sin(3 * t + np.arange(12)) - 0.5 * np.isin(np.arange(12), [2, 5, 8, 11])
        q = np.concatenate([matrix_to_quat(R_WB), default[4:7], legs])
        v = np.concatenate([[0.3, -0.2, 0.8], np.zeros(3), 0.6 * np.cos(3 * t + np.arange(12))])
        messages.append((t, 1, "joint_states", (q[measured], v[[i - 1 for i in measured]])))
        for name, (quaternion, gyro) in sensor_readings(plant, imus, q, v).items():
            if name == "shank" and 8 <= k < 14 or 30 <= k < 36 and name != "thigh":  # stale; then gyro only
                continue
            messages.append((t, 0, name, (rotation_z(0.3).T @ quat_to_matrix(quaternion), gyro)))
    streaming_estimator = Estimator(plant, config)
    batch_runs = []
    original = Estimator._solve_cycles

    def solve_cycles(self, *args, **kwargs):
        batch_runs.append(self)
        return original(self, *args, **kwargs)

    streaming = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Estimator, "_solve_cycles", solve_cycles)
        for t, kind, name, payload in messages:
            if kind == 0:
                streaming += streaming_estimator.process_imu(name, t, matrix_to_quat(payload[0]), payload[1])[1]
            else:
                streaming += streaming_estimator.process_joint_state([names[i] for i in measured], *payload,
                                                                     stamp=t)[1]
    imu_rows = [m for m in messages if m[1] == 0]
    js_rows = [m for m in messages if m[1] == 1]
    kind = np.array([m[1] for m in messages], dtype=np.int64)
    row = np.empty(len(messages), dtype=np.int64)
    row[kind == 0], row[kind == 1] = np.arange(len(imu_rows)), np.arange(len(js_rows))
    index = {imu.name: i for i, imu in enumerate(imus)}
    batch = list(Estimator(plant, config).run(OfflineInputs(
        kind=kind, row=row, imu_sensor=np.array([index[m[2]] for m in imu_rows], dtype=np.int64),
        imu_stamp=np.array([m[0] for m in imu_rows]),
        imu_quaternion_wxyz=np.array([matrix_to_quat(m[3][0]) for m in imu_rows]),
        imu_angular_velocity=np.array([m[3][1] for m in imu_rows]),
        imu_orientation_present=np.ones(len(imu_rows), bool),
        imu_angular_velocity_present=np.ones(len(imu_rows), bool), js_stamp=np.array([m[0] for m in js_rows]),
        js_names=[tuple(names[i] for i in measured)] * len(js_rows), js_positions=[m[3][0] for m in js_rows],
        js_velocities=[m[3][1] for m in js_rows])).results())
    assert len(streaming) == len(batch) >= 38
    assert any(r.tracking_reset for r in batch[20:]) and any(r.stale_sensors == ("shank",) for r in batch)
    assert any(not r.observed_sensors for r in batch)
    assert len(batch_runs) < len(batch) // 4  # the reset, the assembles, the cycle with nothing observed
    for got, expected in zip(streaming, batch, strict=True):
        for item in dataclasses.fields(expected):
            if item.name == "solve_time_s":
                continue
            a, b = getattr(got, item.name), getattr(expected, item.name)
            if isinstance(b, dict):
                assert list(a) == list(b)
                a, b = list(a.values()), list(b.values())
            if isinstance(b, (np.ndarray, list)):
                np.testing.assert_array_equal(a, b, err_msg=f"cycle {expected.cycle}: {item.name}")
            else:
                assert a == b, f"cycle {expected.cycle}: {item.name}"


# -- weighting by the IMU's orientation covariance (issue 13, REP-145) -------------------------------------------
def isotropic(variance):
    """An orientation_covariance (9,) row-major of ``variance`` per axis (0: REP-145's "unknown")."""
    return (variance * np.eye(3)).reshape(-1)


def test_a_100x_covariance_pulls_100x_less_on_two_disagreeing_hand_imus(arm_plant):
    """Two IMUs on the hand whose orientations disagree by 0.6 rad, every arm joint estimated: the solved hand
    orientation is the weighted mean rotation, the point of the geodesic from a's observation to b's at
    w_b / (w_a + w_b), with w = weight x stddev² / (trace(Σ)/3) (the estimator's docstring); an all-zero covariance
    keeps the configured weight, and with the weighting off the covariances are not read."""
    hand = arm_plant.get_body_by_name("arm_link7").index
    q0 = arm_trajectory(0.0)[0]
    R_a = arm_plant.calc_body_poses(q0)[hand][:3, :3]
    R_b = R_a @ rotvec_to_matrix([0.3, -0.4, 0.35])
    imus = (ImuConfig("a", "arm_link7"), ImuConfig("b", "arm_link7", weight=2.0))
    s2 = 0.01 ** 2  # imu_orientation_stddev² (the default)
    cases = [(True, 1e-4, 1e-2, 1.0, 2.0 * s2 / 1e-2),  # b's covariance 100x a's: 100x less pull
             (True, 0.0, 4e-4, 1.0, 2.0 * s2 / 4e-4),  # a unknown: its configured weight
             (True, 0.0, 0.0, 1.0, 2.0),
             (False, 1e-4, 1e-2, 1.0, 2.0)]  # off: configured weights
    for weighting, var_a, var_b, w_a, w_b in cases:
        estimator = Estimator(arm_plant, EstimatorConfig(imus=imus, imu_covariance_weighting=weighting,
                                                         accuracy=1e-10, sync_tolerance_s=1e-6))
        results = []
        for k in range(4):
            for name, R, variance in (("a", R_a, var_a), ("b", R_b, var_b)):
                status, out = estimator.process_imu(name, 0.01 * k, matrix_to_quat(R), np.zeros(3),
                                                    orientation_covariance=isotropic(variance))
                assert status.ok
                results += out
        last = results[-1]
        assert last.sensor_weights == pytest.approx({"a": w_a, "b": w_b}, rel=1e-12)
        expected = R_a @ rotvec_to_matrix(w_b / (w_a + w_b) * np.array([0.3, -0.4, 0.35]))
        assert math.degrees(rotation_angle_between(expected, last.X_WB[hand][:3, :3])) < 1e-4, (weighting, var_b)


def noisy_arm_messages(plant, seconds=0.6, seed=7):
    """(stamp, name, quaternion, gyro, covariance) of the arm's four IMUs at 100 Hz: each sample's orientation
    perturbed by a rotation of the variance its covariance states (per sample, 1e-6 to 1e-2 rad²; the upper arm's
    covariance all zeros, unknown), and three samples with a covariance that is no covariance."""
    rng = np.random.default_rng(seed)
    messages = []
    for k in range(int(seconds / 0.01)):
        t = 0.01 * k
        q, v = arm_trajectory(t)
        for name, (quaternion, gyro) in sensor_readings(plant, ARM_IMUS, q, v).items():
            variance = 0.0 if name == "upper_arm" else 10.0 ** rng.uniform(-6, -2)
            noise = rotvec_to_matrix(rng.normal(0.0, math.sqrt(variance or 1e-6), 3))
            messages.append((t, name, matrix_to_quat(quat_to_matrix(quaternion) @ noise), gyro, isotropic(variance)))
    bad = [np.full(9, np.nan), isotropic(1e-4) * np.array([1, 0, 0, 0, -1, 0, 0, 0, 1]),
           isotropic(1e-4) + np.array([0, 5e-5, 0, 0, 0, 0, 0, 0, 0])]  # non-finite, negative, asymmetric
    for j, covariance in enumerate(bad):
        t, name, quaternion, gyro, _ = messages[40 + 9 * j]
        messages[40 + 9 * j] = (t, name, quaternion, gyro, covariance)
    return messages


def test_covariance_weights_streaming_equal_batch_bit_for_bit_and_bad_covariances_are_counted(arm_plant):
    """Per-sample covariances through the node's path (process_imu, one message at a time) and replay's (feed, a
    window) give the same bits, weights included; the three bad covariances are dropped and counted under their
    IMUs as bad_covariance; the weighting moves the result and brings it nearer the truth; off, the covariances
    are not read (nothing is dropped)."""
    from ros_dofkit.core.estimator.offline import OfflineInputs

    messages = noisy_arm_messages(arm_plant)
    names = [imu.name for imu in ARM_IMUS]
    window = OfflineInputs(
        kind=np.zeros(len(messages), np.int64), row=np.arange(len(messages)),
        imu_sensor=np.array([names.index(m[1]) for m in messages]), imu_stamp=np.array([m[0] for m in messages]),
        imu_quaternion_wxyz=np.array([m[2] for m in messages]), imu_angular_velocity=np.array([m[3] for m in messages]),
        imu_orientation_present=np.ones(len(messages), bool), imu_angular_velocity_present=np.ones(len(messages), bool),
        js_stamp=np.zeros(0), js_names=[], js_positions=[], js_velocities=[],
        imu_orientation_covariance=np.array([m[4] for m in messages]))
    errors = {}
    for weighting in (True, False):
        config = EstimatorConfig(imus=ARM_IMUS, imu_covariance_weighting=weighting, sync_tolerance_s=1e-6,
                                 accuracy=1e-9)
        estimator = Estimator(arm_plant, config)
        streaming, statuses = [], []
        for t, name, quaternion, gyro, covariance in messages:
            status, out = estimator.process_imu(name, t, quaternion, gyro, orientation_covariance=covariance)
            statuses.append(status)
            streaming += out
        run = Estimator(arm_plant, config).run(window)
        batch = list(run.results())
        assert len(batch) == len(streaming) > 50
        for expected, got in zip(streaming, batch, strict=True):
            assert got.stamp == expected.stamp and got.sensor_weights == expected.sensor_weights
            np.testing.assert_array_equal(got.q, expected.q)
            np.testing.assert_array_equal(got.v, expected.v)
        bad = {(m[1], "bad_covariance"): 1 for m in (messages[40], messages[49], messages[58])}
        counts = estimator.reject_counts_by_source()
        assert counts == run.counts_by_source
        if weighting:
            assert counts == bad
            assert [s.reason for s in statuses].count(RejectReason.BAD_COVARIANCE) == 3
            assert "negative variances" in statuses[49].detail and "asymmetric" in statuses[58].detail
            for result in streaming:  # weight = stddev² / variance; the upper arm's unknown: its weight 1
                assert result.sensor_weights.get("upper_arm", 1.0) == 1.0
        else:
            assert counts == {} and all(s.ok for s in statuses)
            assert set(batch[-1].sensor_weights.values()) == {1.0}
        errors[weighting] = np.sqrt(np.mean([(r.q - arm_trajectory(r.stamp)[0]) ** 2 for r in streaming[5:]]))
    print(f"RMS joint error with / without covariance weighting: {errors[True]:.5f} / {errors[False]:.5f} rad")
    assert errors[True] < 0.85 * errors[False]
