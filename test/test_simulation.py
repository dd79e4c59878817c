"""Tests of ros_dofkit.core.simulation: trajectories, IMU and encoder models against independent truth.

Truth: Pinocchio forward kinematics and classical frame accelerations (an independent implementation), finite
differences of orientations, the REP-145 rest reading, and sample statistics of the configured noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros_dofkit.core import simulation
from ros_dofkit.core.estimator.robot import MODELS_DIR, ModelSpec, build_plant
from ros_dofkit.core.simulation import (
    GAIT_STRIDE_FREQUENCY_HZ,
    NOISE_PRESETS,
    STANDARD_GRAVITY,
    GaitTrajectory,
    SensorNoise,
    SensorSimulator,
    SimulatedImu,
    SimulationError,
    SineTrajectory,
    noise_preset,
)
from ros_dofkit.core.spatial import (
    matrix_to_rotvec,
    quat_to_matrix,
    rotation_x,
    rotation_y,
    rotation_z,
    rotvec_to_matrix,
)

ARM_CENTRE = {"arm_joint2": -0.8, "arm_joint4": -2.2, "arm_joint6": 1.6}


@pytest.fixture(scope="module")
def arm():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


@pytest.fixture(scope="module")
def quadruped():
    return build_plant([ModelSpec("quadruped.urdf", "dog", base_joint="floating")])


def arm_imus():
    return [
        SimulatedImu("upper", "arm_link3", rotation_x(0.4) @ rotation_y(-0.3), [0.03, -0.05, 0.1]),
        SimulatedImu("fore", "arm_link5", rotation_y(1.1), [0.0, 0.08, -0.02]),
        SimulatedImu("hand", "arm_link7", np.eye(3), [0.0, 0.0, 0.05]),
    ]


def test_noise_free_orientation_equals_pinocchio_fk(arm):
    pinocchio = pytest.importorskip("pinocchio")
    model = pinocchio.buildModelFromUrdf(str(MODELS_DIR / "arm7.urdf"))
    data = model.createData()
    sim = SensorSimulator(arm, arm_imus(), trajectory=SineTrajectory(arm, seed=4, centre=ARM_CENTRE), seed=2)
    run = sim.run(2.0)
    for k in range(0, len(run.times), 37):
        q = run.q[k]
        pinocchio.framesForwardKinematics(model, data, q)
        for imu in sim.imus:
            R_WB = data.oMf[model.getFrameId(imu.body)].rotation
            R_GS = quat_to_matrix(run.imu(imu.name).quaternion_wxyz[k])
            np.testing.assert_allclose(R_GS, R_WB @ imu.R_BS, atol=1e-12)


def test_world_alignment_expresses_orientations_in_the_imu_world(arm):
    R_WG = rotation_x(0.7)
    imus = arm_imus()
    aligned = SensorSimulator(arm, imus, R_WG=R_WG, seed=1).run(0.5)
    plain = SensorSimulator(arm, imus, seed=1).run(0.5)
    for name in ("upper", "hand"):
        R_GS = quat_to_matrix(aligned.imu(name).quaternion_wxyz)
        R_WS = quat_to_matrix(plain.imu(name).quaternion_wxyz)
        np.testing.assert_allclose(R_WG @ R_GS, R_WS, atol=1e-12)


@pytest.mark.parametrize("robot", ["arm", "quadruped"])
def test_gyro_equals_finite_difference_of_orientation_in_sensor_frame(robot, request):
    plant = request.getfixturevalue(robot)
    if robot == "arm":
        imus = arm_imus()
    else:
        bodies = [plant.get_body(i).name for i in range(1, plant.num_bodies())]
        imus = [SimulatedImu(f"s{i}", body, rotvec_to_matrix(np.array([0.3, -0.2, 0.5]) * i)) for i, body in
                enumerate(bodies[::3])]
    sim = SensorSimulator(plant, imus, trajectory=SineTrajectory(plant, seed=7), seed=0)
    t = np.linspace(0.3, 6.0, 23)
    h = 1e-5
    R, w_S, _ = sim.sensor_kinematics(t)
    R_minus = sim.sensor_kinematics(t - h)[0]
    R_plus = sim.sensor_kinematics(t + h)[0]
    # Central difference of the orientation, in the sensor frame: R(t-h)^T R(t+h) = exp(2h [w_S]) + O(h^3).
    w_fd = matrix_to_rotvec(np.swapaxes(R_minus, -1, -2) @ R_plus) / (2 * h)
    assert np.max(np.abs(w_S)) > 0.05  # the motion is not trivial
    np.testing.assert_allclose(w_S, w_fd, atol=1e-7)
    assert R.shape == (len(imus), len(t), 3, 3)


def test_accelerometer_matches_pinocchio_classical_acceleration(arm):
    pinocchio = pytest.importorskip("pinocchio")
    model = pinocchio.buildModelFromUrdf(str(MODELS_DIR / "arm7.urdf"))
    data = model.createData()
    imus = arm_imus()
    trajectory = SineTrajectory(arm, seed=9, centre=ARM_CENTRE)
    sim = SensorSimulator(arm, imus, trajectory=trajectory, seed=0)
    t = np.linspace(0.5, 8.0, 11)
    R_WS, _, f_S = sim.sensor_kinematics(t)
    q, v = trajectory.evaluate(t)
    h = 1e-5
    a = (trajectory.evaluate(t + h)[1] - trajectory.evaluate(t - h)[1]) / (2 * h)
    g_W = np.array([0.0, 0.0, -STANDARD_GRAVITY])
    for j in range(len(t)):
        pinocchio.forwardKinematics(model, data, q[j], v[j], a[j])
        pinocchio.updateFramePlacements(model, data)
        for k, imu in enumerate(imus):
            frame = model.getFrameId(imu.body)
            placement = pinocchio.SE3(imu.R_BS, imu.p_BS)
            sensor = model.addFrame(pinocchio.Frame(f"{imu.name}_{j}", model.frames[frame].parentJoint,
                                                    model.frames[frame].placement * placement,
                                                    pinocchio.FrameType.OP_FRAME))
            data = model.createData()
            pinocchio.forwardKinematics(model, data, q[j], v[j], a[j])
            pinocchio.updateFramePlacements(model, data)
            a_S = pinocchio.getFrameClassicalAcceleration(model, data, sensor, pinocchio.ReferenceFrame.LOCAL).linear
            np.testing.assert_allclose(data.oMf[sensor].rotation, R_WS[k, j], atol=1e-12)
            expected = a_S - R_WS[k, j].T @ g_W
            np.testing.assert_allclose(f_S[k, j], expected, atol=2e-4)


def test_accelerometer_at_rest_reads_plus_g_on_the_up_axis(arm):
    still = SineTrajectory(arm, seed=0, centre=ARM_CENTRE, max_amplitude=0.0)
    # A sensor whose z axis points up, and one whose y axis points up (R_WS = R_x(pi/2) turns S's y onto W's z).
    run0 = SensorSimulator(arm, [SimulatedImu("base", "arm_link0"),
                                 SimulatedImu("side", "arm_link0", rotation_x(math.pi / 2))],
                           trajectory=still).run(0.2)
    np.testing.assert_allclose(run0.imu("base").linear_acceleration, np.tile([0, 0, STANDARD_GRAVITY], (21, 1)),
                               atol=1e-9)
    np.testing.assert_allclose(run0.imu("side").linear_acceleration, np.tile([0, STANDARD_GRAVITY, 0], (21, 1)),
                               atol=1e-9)
    np.testing.assert_allclose(run0.imu("base").angular_velocity, 0.0, atol=1e-12)
    # Anywhere on a still arm the reading is R_WS^T (0, 0, g): magnitude g, direction up in the sensor frame.
    run = SensorSimulator(arm, arm_imus(), trajectory=still).run(0.2)
    for readings in run.imus:
        R_WS = quat_to_matrix(readings.quaternion_wxyz)
        up_S = np.einsum("tji,j->ti", R_WS, [0.0, 0.0, 1.0])
        np.testing.assert_allclose(readings.linear_acceleration, STANDARD_GRAVITY * up_S, atol=1e-9)


def test_trajectory_stays_within_joint_limits_and_moves(arm, quadruped):
    for plant in (arm, quadruped):
        trajectory = SineTrajectory(plant, seed=3, max_amplitude=2.0)
        t = np.linspace(0, 60, 3001)
        q, v = trajectory.evaluate(t)
        lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
        assert np.all(q >= lower - 1e-12) and np.all(q <= upper + 1e-12)
        assert np.ptp(q, axis=0).max() > 0.5
        # v == dq/dt for the articulated coordinates (finite-difference check of the analytic rates).
        view = plant.articulated_view()
        dq = np.gradient(q[:, view.q_indices], t, axis=0)
        np.testing.assert_allclose(v[1:-1, view.v_indices], dq[1:-1], atol=2e-3)
    q, _ = SineTrajectory(quadruped, seed=3).evaluate(np.linspace(0, 5, 50))
    np.testing.assert_allclose(np.linalg.norm(q[:, :4], axis=1), 1.0, atol=1e-12)


def test_noise_statistics_match_the_configuration(arm):
    noise = SensorNoise(orientation_deg=1.0, gyro=0.02, accelerometer=0.1, gyro_bias=0.05, dropout=0.1)
    imus = arm_imus()
    run = SensorSimulator(arm, imus, noise=noise, imu_rate_hz=200.0, seed=11).run(40.0)
    total = len(run.times)
    for readings in run.imus:
        kept = len(readings.stamps)
        # Dropouts: binomial(total, 0.1); 5 standard deviations.
        assert abs(kept / total - 0.9) < 5 * math.sqrt(0.09 / total)
        R_true = quat_to_matrix(readings.true_quaternion_wxyz)
        R_meas = quat_to_matrix(readings.quaternion_wxyz)
        error = matrix_to_rotvec(np.swapaxes(R_true, -1, -2) @ R_meas)
        np.testing.assert_allclose(np.std(error, axis=0), math.radians(1.0), rtol=0.05)
        np.testing.assert_allclose(np.mean(error, axis=0), 0.0, atol=5 * math.radians(1.0) / math.sqrt(kept))
        gyro_error = readings.angular_velocity - readings.true_angular_velocity
        np.testing.assert_allclose(np.mean(gyro_error, axis=0), readings.gyro_bias, atol=5 * 0.02 / math.sqrt(kept))
        np.testing.assert_allclose(np.std(gyro_error, axis=0), 0.02, rtol=0.05)
        assert np.linalg.norm(readings.gyro_bias) == pytest.approx(0.05)
        accel_error = readings.linear_acceleration - readings.true_linear_acceleration
        np.testing.assert_allclose(np.std(accel_error, axis=0), 0.1, rtol=0.05)
        assert np.all(np.diff(readings.stamps) > 0)


def test_heading_drift_turns_about_the_vertical_at_the_configured_rate(arm):
    noise = SensorNoise(heading_drift_deg_per_s=0.5)
    run = SensorSimulator(arm, arm_imus(), noise=noise, seed=5).run(10.0)
    for readings in run.imus:
        R_true = quat_to_matrix(readings.true_quaternion_wxyz)
        R_meas = quat_to_matrix(readings.quaternion_wxyz)
        # R_meas = Rz(rate t) R_true: the error, expressed in G, is a rotation about z by rate * t.
        error = matrix_to_rotvec(R_meas @ np.swapaxes(R_true, -1, -2))
        np.testing.assert_allclose(error[:, :2], 0.0, atol=1e-12)
        np.testing.assert_allclose(error[:, 2], readings.heading_drift_rate * readings.stamps, atol=1e-12)
        assert abs(readings.heading_drift_rate) == pytest.approx(math.radians(0.5))


def test_slow_errors_leave_every_other_draw_of_the_seed_unchanged(arm):
    base = SensorNoise(orientation_deg=0.5, gyro=0.01, accelerometer=0.05, gyro_bias=0.005,
                       heading_drift_deg_per_s=0.01, dropout=0.01, stamp_jitter_s=0.0005)
    slow = SensorNoise(**{**base.__dict__, "heading_random_walk_deg_per_sqrt_s": 0.4, "heading_steps_per_min": 2.0,
                          "heading_step_deg": 5.0, "gyro_bias_random_walk": 1e-4})
    before = SensorSimulator(arm, arm_imus(), noise=base, seed=9).run(20.0)
    after = SensorSimulator(arm, arm_imus(), noise=slow, seed=9).run(20.0)
    for a, b in zip(before.imus, after.imus, strict=True):
        np.testing.assert_array_equal(a.stamps, b.stamps)
        np.testing.assert_array_equal(a.linear_acceleration, b.linear_acceleration)
        np.testing.assert_array_equal(a.gyro_bias, b.gyro_bias)
        np.testing.assert_allclose(b.angular_velocity - b.gyro_bias_walk, a.angular_velocity, atol=1e-15)
        np.testing.assert_array_equal(a.heading_error, a.heading_drift_rate * (before.times[a.sample_index]))
        assert not np.array_equal(a.heading_error, b.heading_error)


def test_heading_random_walk_and_steps_turn_each_imu_about_the_vertical(arm):
    rate, sigma_deg = 50.0, 0.4
    noise = SensorNoise(heading_random_walk_deg_per_sqrt_s=sigma_deg)
    run = SensorSimulator(arm, arm_imus(), noise=noise, imu_rate_hz=rate, seed=21).run(600.0)
    walks = []
    for readings in run.imus:
        R_true = quat_to_matrix(readings.true_quaternion_wxyz)
        R_meas = quat_to_matrix(readings.quaternion_wxyz)
        # R_meas = Rz(psi) R_true: a rotation about G's vertical by the recorded heading error.
        np.testing.assert_allclose(R_meas, rotation_z(readings.heading_error) @ R_true, atol=1e-12)
        increments = np.diff(readings.heading_error)
        # Wiener increments over one period: zero mean, standard deviation sigma sqrt(dt) (30,000 samples: 1.5 %).
        np.testing.assert_allclose(np.std(increments), math.radians(sigma_deg) / math.sqrt(rate), rtol=0.03)
        walks.append(readings.heading_error)
    assert not np.allclose(walks[0], walks[1])  # independent per IMU

    steps = SensorNoise(heading_steps_per_min=3.0, heading_step_deg=5.0)
    run = SensorSimulator(arm, arm_imus(), noise=steps, imu_rate_hz=rate, seed=4).run(1200.0)
    counts = []
    for readings in run.imus:
        jumps = np.diff(readings.heading_error)
        moved = jumps[np.abs(jumps) > 0]
        # Every change is a whole number of 5-degree steps; between steps the heading holds.
        np.testing.assert_allclose(np.abs(moved) / math.radians(5.0), np.round(np.abs(moved) / math.radians(5.0)),
                                   atol=1e-9)
        counts.append(np.sum(np.round(np.abs(moved) / math.radians(5.0))))
    # Poisson with mean 3/min x 20 min x 3 IMUs = 180 steps: 5 standard deviations.
    assert abs(sum(counts) - 180) < 5 * math.sqrt(180)


def test_gyro_bias_walks_and_raw_sensors_carry_no_heading_error(arm):
    rate, sigma_b = 100.0, 2e-4
    noise = SensorNoise(gyro_bias=0.01, gyro_bias_random_walk=sigma_b, heading_random_walk_deg_per_sqrt_s=1.0)
    run = SensorSimulator(arm, arm_imus(), noise=noise, imu_rate_hz=rate, seed=8).run(300.0)
    for readings in run.imus:
        error = readings.angular_velocity - readings.true_angular_velocity
        np.testing.assert_allclose(error, readings.gyro_bias + readings.gyro_bias_walk, atol=1e-12)
        np.testing.assert_array_equal(readings.gyro_bias_walk[0], 0.0)
        np.testing.assert_allclose(np.std(np.diff(readings.gyro_bias_walk, axis=0), axis=0),
                                   sigma_b / math.sqrt(rate), rtol=0.05)
        np.testing.assert_array_equal(readings.linear_acceleration, readings.true_linear_acceleration)


def test_stamp_jitter_is_bounded_and_keeps_order(arm):
    run = SensorSimulator(arm, arm_imus(), noise=SensorNoise(stamp_jitter_s=0.002), imu_rate_hz=100.0,
                          seed=5).run(5.0)
    for readings in run.imus:
        offset = readings.stamps - run.times[readings.sample_index]
        assert np.max(np.abs(offset)) <= 0.002 + 1e-12
        assert np.std(offset) > 0.0005
        assert np.all(np.diff(readings.stamps) > 0)


def test_encoders_quantized_noisy_and_at_their_own_rate(arm):
    resolution = 2 * math.pi / 4096
    noise = SensorNoise(encoder_noise=0.0, encoder_resolution=resolution)
    sim = SensorSimulator(arm, arm_imus(), encoder_joints=["arm_joint2", "arm_joint1"], noise=noise,
                          encoder_rate_hz=50.0, seed=1)
    run = sim.run(4.0)
    encoders = run.encoders
    assert encoders.names == ("arm_joint2", "arm_joint1")
    np.testing.assert_allclose(np.diff(encoders.stamps), 0.02)
    steps = encoders.positions / resolution
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-9)
    q, v = sim.trajectory.evaluate(encoders.stamps)
    assert np.max(np.abs(encoders.positions - q[:, [1, 0]])) <= resolution / 2 + 1e-12
    np.testing.assert_allclose(encoders.velocities, v[:, [1, 0]])
    noisy = SensorSimulator(arm, arm_imus(), encoder_joints=["arm_joint1"],
                            noise=SensorNoise(encoder_noise=0.01), seed=1).run(20.0)
    q, _ = sim.trajectory.evaluate(noisy.encoders.stamps)
    assert np.std(noisy.encoders.positions[:, 0] - q[:, 0]) == pytest.approx(0.01, rel=0.1)


def test_same_seed_same_run_and_events_in_stamp_order(arm):
    kwargs = dict(encoder_joints=["arm_joint1"], noise=NOISE_PRESETS["high"], seed=21)
    first = SensorSimulator(arm, arm_imus(), **kwargs).run(2.0)
    second = SensorSimulator(arm, arm_imus(), **kwargs).run(2.0)
    other = SensorSimulator(arm, arm_imus(), encoder_joints=["arm_joint1"], noise=NOISE_PRESETS["high"],
                            seed=22).run(2.0)
    for a, b, c in zip(first.imus, second.imus, other.imus, strict=True):
        np.testing.assert_array_equal(a.quaternion_wxyz, b.quaternion_wxyz)
        np.testing.assert_array_equal(a.stamps, b.stamps)
        assert a.quaternion_wxyz.shape != c.quaternion_wxyz.shape or not np.array_equal(a.quaternion_wxyz,
                                                                                         c.quaternion_wxyz)
    events = first.events()
    stamps = [e[0] for e in events]
    assert stamps == sorted(stamps)
    assert len(events) == sum(len(r.stamps) for r in first.imus) + len(first.encoders.stamps)
    assert not first.q.flags.writeable


def test_configuration_errors_name_the_problem(arm):
    with pytest.raises(SimulationError, match="arm_link3"):
        SensorSimulator(arm, [SimulatedImu("x", "arm_lnk3")])
    with pytest.raises(SimulationError, match="arm_joint1"):
        SensorSimulator(arm, [], encoder_joints=["arm_joint10"])
    with pytest.raises(SimulationError, match="dropout"):
        SensorNoise(dropout=1.0)
    with pytest.raises(SimulationError, match="gyro"):
        SensorNoise(gyro=-1.0)
    with pytest.raises(SimulationError, match="R_BS"):
        SimulatedImu("x", "arm_link3", np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(SimulationError, match="default"):
        noise_preset("loud")
    with pytest.raises(SimulationError, match="unique"):
        SensorSimulator(arm, [SimulatedImu("x", "arm_link3"), SimulatedImu("x", "arm_link5")])
    with pytest.raises(SimulationError, match="arm_joint4"):
        SineTrajectory(arm, centre={"arm_jiont4": 0.0})


def test_long_sessions_compute_the_kinematics_block_by_block_with_the_same_values(monkeypatch):
    """The lower-body model (config/lower_body.yaml's URDF on a floating base, 7 IMUs with lever arms): sensor
    kinematics in blocks of 7 samples (the session's memory is bounded by the block) equal one block bit for bit."""
    plant = build_plant([ModelSpec("lower_body.urdf", "lower_body", base_joint="floating")])
    segments = ("pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
                "right_foot")
    imus = [SimulatedImu(name, name, rotation_z(0.5 * k) @ rotation_x(0.3), [0.02 * k, -0.03, 0.05])
            for k, name in enumerate(segments)]
    noise = SensorNoise(orientation_deg=0.5, gyro=0.01, accelerometer=0.05, gyro_bias=0.005,
                        heading_random_walk_deg_per_sqrt_s=0.39, gyro_bias_random_walk=1e-4)
    whole = SensorSimulator(plant, imus, noise=noise, seed=3).run(2.0)
    monkeypatch.setattr(simulation, "KINEMATICS_BLOCK_SAMPLES", 7)
    blocks = SensorSimulator(plant, imus, noise=noise, seed=3).run(2.0)
    for a, b in zip(whole.imus, blocks.imus, strict=True):
        for field in ("quaternion_wxyz", "angular_velocity", "linear_acceleration", "heading_error"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert len({float(readings.heading_error[-1]) for readings in whole.imus}) == len(segments)


@pytest.fixture(scope="module")
def lower_body():
    return build_plant([ModelSpec("lower_body.urdf", "lower_body", base_joint="floating")])


def test_gait_follows_its_stride_table_the_right_leg_half_a_stride_later(lower_body):
    trajectory = GaitTrajectory(lower_body, seed=0, variability=0.0, standing_s=0.0, start_s=0.0)
    period = 1.0 / GAIT_STRIDE_FREQUENCY_HZ
    t = np.linspace(0.0, 2.0 * period, 4001)
    names = list(trajectory.position_names)
    q, v = trajectory.evaluate(t)
    later, _ = trajectory.evaluate(t + 0.5 * period)
    # no standing start: the walk is continuous through t = 0 (the accelerometer's differences reach t < 0)
    np.testing.assert_allclose(trajectory.evaluate(np.array([-1e-3]))[0], q[:1], atol=5e-3)  # rates < 5 rad/s
    art = lower_body.articulated_view().q_indices
    for joint in ("hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion",
                  "ankle_inversion"):
        left, right = (art[names.index(f"{side}_{joint}")] for side in ("left", "right"))
        np.testing.assert_allclose(q[:, right], later[:, left], atol=1e-12)
    knee = np.degrees(q[:, art[names.index("left_knee_flexion")]])
    hip = np.degrees(q[:, art[names.index("left_hip_flexion")]])
    # the normative curves the table was fitted to: knee ~5 deg at heel strike, ~60 in swing; hip +30 .. -10
    assert knee[0] == pytest.approx(5.0, abs=1.0) and knee.max() == pytest.approx(60.0, abs=2.0)
    assert hip[0] == pytest.approx(30.0, abs=1.0) and hip.min() == pytest.approx(-10.0, abs=2.0)
    lower, upper = lower_body.position_lower_limits(), lower_body.position_upper_limits()
    assert np.all(q[:, art] >= lower[art]) and np.all(q[:, art] <= upper[art])
    # analytic rates: v == dq/dt (central differences) for the joints and the base translation
    view = lower_body.articulated_view()
    dq = np.gradient(q[:, view.q_indices], t, axis=0)
    np.testing.assert_allclose(v[1:-1, view.v_indices], dq[1:-1], atol=2e-3)
    np.testing.assert_allclose(v[1:-1, 3:6], np.gradient(q[:, 4:7], t, axis=0)[1:-1], atol=2e-3)


def test_a_gait_session_starts_standing_in_the_neutral_pose_then_fades_the_walk_in(lower_body):
    trajectory = GaitTrajectory(lower_body, seed=0, standing_s=1.0, start_s=2.0)
    t = np.linspace(0.0, 5.0, 20001)
    q, v = trajectory.evaluate(t)
    standing = t < 1.0
    neutral = np.asarray(lower_body.default_positions())
    np.testing.assert_allclose(q[standing], np.broadcast_to(neutral, q[standing].shape), atol=1e-15)
    assert np.all(v[standing] == 0.0)
    walking, _ = GaitTrajectory(lower_body, seed=0, standing_s=0.0, start_s=0.0).evaluate(t[t >= 3.0])
    np.testing.assert_allclose(q[t >= 3.0], walking, atol=1e-12)
    # the fade-in's rates (r' q_gait + r v_gait) are the derivative of its positions, base included
    view = lower_body.articulated_view()
    np.testing.assert_allclose(v[1:-1, view.v_indices], np.gradient(q[:, view.q_indices], t, axis=0)[1:-1],
                               atol=1e-4)
    np.testing.assert_allclose(v[1:-1, 3:6], np.gradient(q[:, 4:7], t, axis=0)[1:-1], atol=1e-4)
    # the base's angular velocity: R(t + h) R(t - h)^T = exp(2 h [w]x) in the world
    R = np.array([quat_to_matrix(quaternion) for quaternion in q[:, :4]])
    turn = np.array([matrix_to_rotvec(R[k + 1] @ R[k - 1].T) for k in range(1, len(t) - 1)])
    np.testing.assert_allclose(v[1:-1, :3], turn / (t[2] - t[0]), atol=1e-4)


def test_walking_accelerates_the_hip_centres_ten_times_the_slow_sines(lower_body):
    # the pelvis IMU sits 0.1 m behind the hips: its horizontal acceleration is the hip centres' order
    imus = [SimulatedImu("pelvis", "pelvis", np.eye(3), [-0.1, 0.0, 0.05])]
    horizontal = {}
    for name, trajectory in (("gait", GaitTrajectory(lower_body, seed=0, standing_s=0.0)),
                             ("slow", SineTrajectory(lower_body, seed=0, max_amplitude=0.5, max_translation=0.05))):
        R_WS, _, f_S = SensorSimulator(lower_body, imus, trajectory=trajectory).sensor_kinematics(
            np.arange(0.0, 30.0, 0.01))
        f_W = np.einsum("tij,tj->ti", R_WS[0], f_S[0])
        horizontal[name] = np.sqrt(np.mean(np.sum(f_W[:, :2] ** 2, axis=1)))
    # walking: the pelvis' +-1.5 m/s^2 fore-aft and ~0.8 m/s^2 sideways (LOWER_BODY_GAIT's sources)
    assert 0.8 < horizontal["gait"] < 1.6
    assert horizontal["slow"] < 0.2
