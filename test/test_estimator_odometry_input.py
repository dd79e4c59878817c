"""core/estimator/odometry_input.py: an Odometry pose -> the base joint's coordinates, against the plant's own
forward kinematics (a pose computed from known coordinates gives those coordinates back), and every refusal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros_dofkit.core.errors import EstimatorConfigError, UnknownNameError
from ros_dofkit.core.estimator.config import EstimatorConfig, HeadingEstimation, ImuConfig, OdometryConfig
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.inputs import REASON_CODE, RejectReason
from ros_dofkit.core.estimator.odometry import UNOBSERVED_VARIANCE, SolveCovarianceModel, base_odometries
from ros_dofkit.core.estimator.odometry_input import (
    MATCH,
    MEMORY_LENGTH,
    ODOMETRY_OK,
    VALUES,
    YAW,
    forget,
    match,
    new_memory,
    odometry_base,
    remember,
    validate_odometries,
    validate_odometry,
)
from ros_dofkit.core.estimator.offline import OfflineInputs
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.core.spatial import (
    matrix_to_quat,
    matrix_to_rotvec,
    quat_to_matrix,
    rotation_x,
    rotation_y,
    rotation_z,
)
from ros_dofkit.replay.pipeline import ImuInput, simulation_inputs


def mobile_manipulator():
    return build_plant([ModelSpec("mobile_base.urdf", "base", "planar"),
                        ModelSpec("arm7.urdf", "arm", "fixed", "arm_mount")])


def quadruped():
    return build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])


def config(**odometry):
    return EstimatorConfig(imus=(), odometry=OdometryConfig(**odometry))


def art_q(plant):
    return np.asarray(plant.articulated_view().q_indices)


def pose_of_base(plant, base, q):
    """(p_WB, quaternion_wxyz) of the base link at plant coordinates q, by the plant's forward kinematics."""
    X_WB = plant.calc_body_poses(q)[base.body]
    return X_WB[:3, 3].copy(), matrix_to_quat(X_WB[:3, :3])


@pytest.mark.parametrize("use_yaw", [False, True])
def test_planar_base_coordinates_round_trip_through_the_plants_forward_kinematics(use_yaw):
    plant = mobile_manipulator()
    base = odometry_base(plant, config(use_yaw=use_yaw), art_q(plant))
    assert base.instance == "base" and base.joint.type_name == "planar"
    assert list(base.q_index) == list(range(base.joint.position_start, base.joint.position_start + 2 + use_yaw))
    names = [plant.articulated_view().position_names()[i] for i in base.art_index]
    assert names == ["base_link_x", "base_link_y"] + (["base_link_qz"] if use_yaw else [])
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = np.asarray(plant.default_positions(), dtype=float).copy()
        start = base.joint.position_start
        q[start:start + 3] = rng.uniform(-3, 3, size=3)
        p, quaternion = pose_of_base(plant, base, q)
        values = np.empty(VALUES)
        assert validate_odometry(p, quaternion, True, base.target, values) == ODOMETRY_OK
        np.testing.assert_allclose(values[:base.target.count], q[base.q_index], atol=1e-12)


def test_floating_base_translation_and_yaw_round_trip():
    """A floating base's translation coordinates, and with use_yaw its base link's ZYX yaw (value YAW), from a
    pose built as Rz(yaw) Ry(pitch) Rx(roll); without use_yaw the yaw is not taken (NaN)."""
    plant = quadruped()
    for use_yaw in (False, True):
        base = odometry_base(plant, config(use_yaw=use_yaw), art_q(plant))
        start = base.joint.position_start
        assert list(base.q_index) == [start + 4, start + 5, start + 6] and base.art_index.size == 0
        assert base.target.heading == use_yaw
        q = np.asarray(plant.default_positions(), dtype=float).copy()
        q[start:start + 4] = matrix_to_quat(rotation_z(2.9) @ rotation_y(-0.4) @ rotation_x(0.2))
        q[start + 4:start + 7] = [1.5, -2.0, 0.45]
        p, quaternion = pose_of_base(plant, base, q)
        values = np.empty(VALUES)
        assert validate_odometry(p, quaternion, True, base.target, values) == ODOMETRY_OK
        np.testing.assert_allclose(values[:3], [1.5, -2.0, 0.45], atol=1e-12)
        if use_yaw:
            assert values[YAW] == pytest.approx(2.9, abs=1e-12)
        else:
            assert math.isnan(values[YAW])


def test_bad_messages_are_refused_with_their_reason_and_no_values():
    plant = mobile_manipulator()
    base = odometry_base(plant, config(use_yaw=True), art_q(plant))
    unit = np.array([1.0, 0.0, 0.0, 0.0])
    cases = [
        (np.zeros(3), unit, False, RejectReason.UNKNOWN_FRAME),
        (np.array([0.0, math.nan, 0.0]), unit, True, RejectReason.NON_FINITE),
        (np.array([math.inf, 0.0, 0.0]), unit, True, RejectReason.NON_FINITE),
        (np.zeros(3), np.array([1.0, math.nan, 0.0, 0.0]), True, RejectReason.NON_FINITE),
        (np.zeros(3), np.zeros(4), True, RejectReason.ZERO_QUATERNION),
        (np.zeros(3), np.array([1.1, 0.0, 0.0, 0.0]), True, RejectReason.NON_UNIT_QUATERNION),
    ]
    positions = np.stack([c[0] for c in cases])
    quaternions = np.stack([c[1] for c in cases])
    frames = np.array([c[2] for c in cases])
    code = np.empty(len(cases), dtype=np.int64)
    values = np.empty((len(cases), VALUES))
    validate_odometries(positions, quaternions, frames, base.target, code, values)
    assert [int(c) for c in code] == [REASON_CODE[c[3]] for c in cases]
    assert np.isnan(values).all()


def test_the_base_is_found_or_named():
    plant = mobile_manipulator()
    assert odometry_base(plant, EstimatorConfig(imus=()), art_q(plant)) is None
    with pytest.raises(UnknownNameError, match="'base'"):
        odometry_base(plant, config(model_instance="arm"), art_q(plant))
    two = build_plant([ModelSpec("mobile_base.urdf", "left", "planar"), ModelSpec("mobile_base.urdf", "right",
                                                                                  "planar")])
    with pytest.raises(EstimatorConfigError, match="odometry_instance"):
        odometry_base(two, config(), art_q(two))
    assert odometry_base(two, config(model_instance="right"), art_q(two)).instance == "right"
    with pytest.raises(EstimatorConfigError, match="time_offset_s"):
        OdometryConfig(time_offset_s=2.0)
    with pytest.raises(EstimatorConfigError, match="time_offset_s"):
        ImuConfig("a", "b", time_offset_s=math.nan)


def test_a_cycle_uses_the_newest_sample_not_after_its_stamp_within_the_timeout():
    memory = new_memory()
    out = np.zeros(1, dtype=MATCH)

    def taken(stamp, timeout):
        match(memory[0], stamp, timeout, out[0])
        return None if out["stale"][0] else out["values"][0].tolist()

    assert taken(1.0, 0.1) is None and np.isnan(out["values"]).all()  # nothing heard
    for k in range(40):  # 40 samples at 100 Hz from t = 1.0: the ring keeps the newest MEMORY_LENGTH
        remember(memory[0], 1.0 + 0.01 * k, np.array([k, 2.0 * k, 3.0 * k, -k]))
    assert memory["count"][0] == MEMORY_LENGTH and memory["last_stamp"][0] == 1.0 + 0.01 * 39
    assert taken(1.305, 0.1) == [30.0, 60.0, 90.0, -30.0]  # 1.30 <= 1.305 < 1.31
    assert taken(1.31, 0.1)[0] == 31.0  # equal stamps match
    assert taken(1.31 - 1e-7, 0.1)[0] == 31.0  # within SAME_INSTANT_S: the same instant
    assert taken(5.0, 10.0)[0] == 39.0  # ahead of every sample: the newest
    assert taken(1.6, 0.1) is None and np.isnan(out["values"]).all()  # the newest is older than the timeout
    assert taken(1.01, 0.1) is None  # before every kept sample (the older ones left the ring)
    forget(memory[0])
    assert memory["count"][0] == 0 and np.isnan(memory["last_stamp"][0]) and taken(1.3, 1.0) is None


# ---------------------------------------------------------------------------------------------- through the rules
ODOMETRY_DT = 0.02  # 50 Hz odometry beside 100 Hz IMUs


def simulated(plant, imus, measured, seconds=1.0):
    trajectory = SineTrajectory(plant, seed=4, max_amplitude=0.3, max_translation=0.4)
    return SensorSimulator(plant, imus, measured, trajectory, imu_rate_hz=100.0, encoder_rate_hz=100.0,
                           seed=4).run(seconds, start_s=1.0)


def messages_with_odometry(plant, base, run, imu_offsets, with_clock):
    """(arrival, kind, name, stamp, payload) of the run's IMU samples (stamped late by their IMU's offset, as a
    sensor stamped on arrival), encoders, 50 Hz odometry of the true base pose, and bad odometry messages (a
    future one only with a clock: offline, nothing tells it from a jump ahead); in arrival order (each 3 ms after
    its stamp)."""
    messages = []
    for item in simulation_inputs(run):
        if isinstance(item, ImuInput):
            stamp = item.stamp + imu_offsets.get(item.name, 0.0)
            messages.append((stamp + 0.003, 0, item.name, stamp, (item.quaternion_wxyz, item.angular_velocity)))
        else:
            messages.append((item.stamp + 0.003, 1, "joint_states", item.stamp,
                             (item.names, item.positions, item.velocities)))
    times = np.asarray(run.times)
    for k in range(0, len(times), 2):
        X_WB = plant.calc_body_poses(run.q[k])[base.body]
        messages.append((times[k] + 0.003, 2, "odometry", times[k], (X_WB[:3, 3], matrix_to_quat(X_WB[:3, :3]),
                                                                      True)))
    k = len(times) // 2
    t = times[k] + 0.001
    good = messages[-1][4]
    messages += [
        (t + 0.003, 2, "odometry", t, (np.array([math.nan, 0.0, 0.0]), good[1], True)),  # non_finite
        (t + 0.003, 2, "odometry", t, (good[0], good[1], False)),  # unknown_frame
        (t + 0.003, 2, "odometry", t, (good[0], np.zeros(4), True)),  # zero_quaternion
        (t + 0.004, 2, "odometry", t - 0.5, good),  # stale (behind the clock), or out of order without a clock
        (times[k] + 0.0031, 2, "odometry", times[k], good),  # repeated_stamp (k is even: an odometry instant)
    ] + ([(t + 0.005, 2, "odometry", t + 0.9, good)] if with_clock else [])  # future_stamp
    messages.sort(key=lambda m: m[0])
    return messages


def stream(estimator, messages, with_clock):
    results = []
    for arrival, kind, name, stamp, payload in messages:
        now = arrival if with_clock else None
        if kind == 0:
            out = estimator.process_imu(name, stamp, payload[0], payload[1],
                                        orientation_present=payload[2:] != (False,), now=now)[1]
        elif kind == 1:
            out = estimator.process_joint_state(payload[0], payload[1], payload[2], stamp=stamp, now=now)[1]
        else:
            out = estimator.process_odometry(stamp, payload[0], payload[1], frames_match=payload[2], now=now)[1]
        results += out
    return results


def streaming_equals_batch(plant, config, estimator, messages, with_clock):
    """``messages`` through the node's path (``estimator``, one message at a time) and replay's (a new Estimator of
    ``config``, one window): asserts the same bits; returns the streamed results."""
    streaming = stream(estimator, messages, with_clock)
    batch = list(Estimator(plant, config).run(as_window(messages, list(config.imu_names), with_clock)).results())
    assert len(batch) == len(streaming) > 90
    for expected, got in zip(streaming, batch, strict=True):
        assert got.stamp == expected.stamp
        np.testing.assert_array_equal(got.q, expected.q)
        np.testing.assert_array_equal(got.v, expected.v)
    return streaming


def as_window(messages, imu_names, with_clock):
    kind = np.array([m[1] for m in messages], dtype=np.int64)
    rows = [[m for m in messages if m[1] == k] for k in range(3)]
    row = np.empty(len(messages), dtype=np.int64)
    for k in range(3):
        row[kind == k] = np.arange(len(rows[k]))
    imu, js, odom = rows
    return OfflineInputs(
        kind=kind, row=row, imu_sensor=np.array([imu_names.index(m[2]) for m in imu], dtype=np.int64),
        imu_stamp=np.array([m[3] for m in imu]), imu_quaternion_wxyz=np.array([m[4][0] for m in imu]),
        imu_angular_velocity=np.array([m[4][1] for m in imu]),
        imu_orientation_present=np.array([m[4][2:] != (False,) for m in imu], bool),
        imu_angular_velocity_present=np.ones(len(imu), bool), js_stamp=np.array([m[3] for m in js]),
        js_names=[tuple(m[4][0]) for m in js], js_positions=[m[4][1] for m in js],
        js_velocities=[m[4][2] for m in js], stamp_ns=np.array([round(m[3] * 1e9) for m in messages]),
        now=np.array([m[0] if with_clock else np.nan for m in messages]),
        odom_stamp=np.array([m[3] for m in odom]), odom_position=np.array([m[4][0] for m in odom]),
        odom_quaternion_wxyz=np.array([m[4][1] for m in odom]), odom_frames_match=np.array([m[4][2] for m in odom]))


@pytest.mark.parametrize("with_clock", [True, False])
def test_planar_base_follows_the_odometry_streaming_equals_batch_bit_for_bit(with_clock):
    """The mobile manipulator's base x, y from 50 Hz odometry (and its heading with use_yaw), the base IMU stamped
    8 ms late and corrected by its time offset: every cycle's base coordinates are the true ones at the newest
    odometry stamp not after the cycle's, the estimated joints track the truth, bad odometry is dropped and
    counted by reason, and the streaming and batch entry points give the same bits."""
    plant = mobile_manipulator()
    for use_yaw in (False, True):
        imus = (ImuConfig("base", "base_imu_link", time_offset_s=0.008), ImuConfig("forearm", "arm_link5"),
                ImuConfig("hand", "arm_link7"))
        config = EstimatorConfig(imus=imus, estimated_joints={"base": "none" if use_yaw else ("base_link_qz",),
                                                              "arm": ("arm_joint4", "arm_joint5", "arm_joint6",
                                                                      "arm_joint7")},
                                 odometry=OdometryConfig(use_yaw=use_yaw), sync_tolerance_s=1e-4, accuracy=1e-9)
        estimator = Estimator(plant, config)
        base = estimator.odometry_base
        names = list(plant.articulated_view().position_names())
        # Encoders on every coordinate neither estimated nor set by the odometry (the wheels, arm joints 1-3).
        measured = [n for i, n in enumerate(names) if not estimator.estimated_mask[i] and i not in base.art_index]
        run = simulated(plant, [SimulatedImu(i.name, i.body) for i in imus], measured)
        messages = messages_with_odometry(plant, base, run, {"base": 0.008}, with_clock)
        streaming = streaming_equals_batch(plant, config, estimator, messages, with_clock)
        counts = estimator.reject_counts_by_source()
        expected_counts = {("odometry", reason): 1 for reason in ("non_finite", "unknown_frame", "zero_quaternion",
                                                                  "repeated_stamp")}
        expected_counts.update({("odometry", "stale_stamp"): 1, ("odometry", "future_stamp"): 1} if with_clock
                               else {("odometry", "out_of_order"): 1})
        assert {key: n for key, n in counts.items() if key[0] == "odometry"} == expected_counts
        times = np.asarray(run.times)
        odometry_times = times[::2]
        for result in streaming[10:]:
            k = int(np.argmin(np.abs(times - result.stamp)))
            assert abs(times[k] - result.stamp) < 1e-9  # the base IMU's corrected stamps are the true instants
            j = np.flatnonzero(odometry_times <= result.stamp + 1e-12)[-1] * 2
            np.testing.assert_allclose(result.q[base.q_index], run.q[j, base.q_index], atol=1e-9)
            if j == k:  # odometry of this very instant: every coordinate is the truth (else the heading is 10 ms old)
                np.testing.assert_allclose(result.q, run.q[k], atol=1e-6)


def test_when_the_odometry_stops_the_base_holds_its_last_value_through_held_and_solved_cycles():
    """A stretch of IMU messages without orientation (gyro only: the cycles observe nothing and hold q, with the
    odometry's base coordinates of their instants), during which the odometry stops: from the first cycle with no
    odometry within the timeout on, held or solved, the base holds the last odometry's pose, in the batch path's
    chunk as cycle by cycle, bit for bit. (Before, such a cycle put the base at its default, the value of an encoder
    that never reported it, and the batch path's next solved frame took the pose of the chunk's last solved frame.)"""
    plant = mobile_manipulator()
    imus = (ImuConfig("base", "base_imu_link"), ImuConfig("forearm", "arm_link5"), ImuConfig("hand", "arm_link7"))
    config = EstimatorConfig(imus=imus, estimated_joints={"base": ("base_link_qz",), "arm": (
        "arm_joint4", "arm_joint5", "arm_joint6", "arm_joint7")}, odometry=OdometryConfig(), sync_tolerance_s=1e-4,
        accuracy=1e-9)
    estimator = Estimator(plant, config)
    base = estimator.odometry_base
    names = list(plant.articulated_view().position_names())
    measured = [n for i, n in enumerate(names) if not estimator.estimated_mask[i] and i not in base.art_index]
    run = simulated(plant, [SimulatedImu(i.name, i.body) for i in imus], measured)
    messages = []
    for arrival, kind, name, stamp, payload in messages_with_odometry(plant, base, run, {}, False):
        if kind == 2 and stamp >= 1.49:
            continue  # the odometry stops after 1.48 s
        if kind == 0 and 1.40 <= stamp < 1.60:
            payload = (*payload, False)  # orientation absent: nothing observed in [1.40, 1.60)
        messages.append((arrival, kind, name, stamp, payload))
    streaming = streaming_equals_batch(plant, config, estimator, messages, False)
    held = [r for r in streaming if 1.40 <= r.stamp < 1.60]
    assert held and all(not r.solved for r in held)
    after = next(r for r in streaming if r.stamp >= 1.60)
    assert after.solved
    last = int(np.argmin(np.abs(np.asarray(run.times) - 1.48)))  # the last odometry message's instant
    for result in [r for r in held if r.stamp > 1.58 + 1e-9] + [after]:  # no odometry within 0.1 s any more
        np.testing.assert_allclose(result.q[base.q_index], run.q[last, base.q_index], atol=1e-12)
    assert not np.allclose(held[0].q[base.q_index], run.q[last, base.q_index])  # the base moved meanwhile


def test_floating_base_translation_from_odometry_rotation_from_the_imu_with_time_offsets():
    """The quadruped: the trunk translation from odometry, its rotation from the trunk IMU; the encoders and the
    odometry stamped 5 ms and 12 ms late and corrected by their offsets. Every cycle's trunk position is the true
    one at the newest odometry instant not after it, every other coordinate is the truth; streaming equals batch
    bit for bit."""
    plant = quadruped()
    legs = list(plant.articulated_view().position_names())
    config = EstimatorConfig(imus=(ImuConfig("trunk", "trunk_imu_link"),), estimated_joints={"quadruped": "none"},
                             odometry=OdometryConfig(time_offset_s=0.012), joint_state_time_offset_s=0.005,
                             sync_tolerance_s=1e-4, sync_joint_states=True, accuracy=1e-9)
    estimator = Estimator(plant, config)
    base = estimator.odometry_base
    run = simulated(plant, [SimulatedImu("trunk", "trunk_imu_link")], legs)
    messages = []
    for m in messages_with_odometry(plant, base, run, {}, True):
        if m[1] == 1:
            m = (m[0] + 0.005, 1, m[2], m[3] + 0.005, m[4])
        elif m[1] == 2:  # stamped late, delivered before the instant's IMU sample (so that the cycle can use it)
            m = (m[0] - 0.002, 2, m[2], m[3] + 0.012, m[4])
        messages.append(m)
    messages.sort(key=lambda m: m[0])
    streaming = streaming_equals_batch(plant, config, estimator, messages, True)
    times = np.asarray(run.times)
    for result in streaming[10:]:
        k = int(np.argmin(np.abs(times - result.stamp)))
        assert abs(times[k] - result.stamp) < 1e-9
        j = np.flatnonzero(times[::2] <= result.stamp + 1e-12)[-1] * 2
        np.testing.assert_allclose(result.q[base.q_index], run.q[j, base.q_index], atol=1e-9)
        others = np.setdiff1d(np.arange(plant.num_positions()), base.q_index)
        np.testing.assert_allclose(result.q[others], run.q[k, others], atol=1e-6)


def test_a_time_offset_moves_the_stamp_every_rule_sees():
    """stamp' = stamp - offset, in integer nanoseconds: the cycle carries stamp', and the future check (against the
    receive clock) judges stamp', as does the status detail."""
    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    config = EstimatorConfig(imus=(ImuConfig("hand", "arm_link7", time_offset_s=0.008),), future_tolerance_s=0.05)
    estimator = Estimator(plant, config)
    unit, rate = [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    status, results = estimator.process_imu("hand", 1.008, unit, rate, now=1.0)
    assert status.ok and [r.stamp for r in results] == [1.0]
    status, _ = estimator.process_imu("hand", 1.059, unit, rate, now=1.0)  # 1.051 > 1.0 + 0.05
    assert status.reason is RejectReason.FUTURE_STAMP and "stamp 1.051000 s" in status.detail
    status, results = estimator.process_imu("hand", 1.057, unit, rate, now=1.0)  # 1.049: accepted
    assert status.ok and [r.stamp for r in results] == [1_049_000_000 * 1e-9]  # from integer nanoseconds


def drifting_headings(plant, base, run, relative):
    """:func:`messages_with_odometry` (with a clock) whose IMU samples are seen in earth frames turned about the
    vertical by a common 0.7 rad + 3 deg/s plus ``relative`` {name: rad} (0 for those not named), and whose
    odometry is delivered before its instant's IMU samples (so that the instant's cycle can use it)."""
    messages = []
    for arrival, kind, name, stamp, payload in messages_with_odometry(plant, base, run, {}, True):
        if kind == 0:
            R_GS = rotation_z(0.7 + math.radians(3.0) * stamp + relative.get(name, 0.0)) @ quat_to_matrix(payload[0])
            payload = (matrix_to_quat(R_GS), payload[1])
        elif kind == 2:
            arrival -= 0.002
        messages.append((arrival, kind, name, stamp, payload))
    messages.sort(key=lambda m: m[0])
    return messages


def test_floating_base_yaw_follows_the_odometry_while_the_imus_share_a_drifting_heading():
    """The quadruped with a trunk IMU and IMUs on the front-left thigh and shank estimating that leg (the other legs
    measured). Every IMU's earth frame shares a heading offset of 0.7 rad that drifts at 3 deg/s (their common
    heading, which no magnetometer fixes); the odometry carries the true trunk pose. With odometry_yaw the solve
    stays in the IMUs' frame and each solution is turned about the vertical: in every cycle whose odometry is of
    its own instant the published trunk orientation and angular velocity are the truth's; the estimated joints are
    bit for bit those solved without the odometry's yaw (the solve is invariant to the common heading), the sensor
    errors too (every body turned with the trunk); the node's path equals replay's bit for bit. The Odometry
    output's yaw variance is the unobserved one (the yaw is a copy of the input's), roll and pitch the solve's."""
    plant = quadruped()
    imus = (ImuConfig("trunk", "trunk_imu_link"), ImuConfig("thigh", "fl_thigh"), ImuConfig("shank", "fl_shank"))
    leg = ("fl_hip_abduction", "fl_hip_flexion", "fl_knee")
    measured = [n for n in plant.articulated_view().position_names() if n not in leg]
    run = simulated(plant, [SimulatedImu(i.name, i.body) for i in imus], measured)
    results = {}
    for use_yaw in (False, True):
        config = EstimatorConfig(imus=imus, estimated_joints={"quadruped": leg},
                                 odometry=OdometryConfig(use_yaw=use_yaw), sync_tolerance_s=1e-4, accuracy=1e-9)
        estimator = Estimator(plant, config)
        messages = drifting_headings(plant, estimator.odometry_base, run, {})
        streaming = streaming_equals_batch(plant, config, estimator, messages, True)
        results[use_yaw] = streaming
        # the Odometry output: the yaw is the input's, so its variance is the unobserved one; roll, pitch solved
        covariances = SolveCovarianceModel(estimator, 1e-4, 1e-4).covariances(streaming[-1])
        base = base_odometries(plant)[0]
        pose = base.covariance(streaming[-1].X_WB[base.body][:3, :3], covariances).pose
        assert (pose[5, 5] == UNOBSERVED_VARIANCE) == use_yaw and pose[3, 3] < 1.0 and pose[4, 4] < 1.0
    joint = plant.floating_base_joints()[0]
    qs, vs = joint.position_start, joint.velocity_start
    rotation = np.arange(qs, qs + 4)
    times = np.asarray(run.times)
    checked = 0
    for turned, plain in zip(results[True], results[False], strict=True):
        others = np.setdiff1d(np.arange(plant.num_positions()), rotation)
        np.testing.assert_array_equal(turned.q[others], plain.q[others])
        for name in turned.sensor_errors_deg:
            assert turned.sensor_errors_deg[name] == pytest.approx(plain.sensor_errors_deg[name], abs=1e-6)
        k = int(np.argmin(np.abs(times - turned.stamp)))
        if k % 2 or k < 10:  # the odometry (every other instant) of another instant: its yaw is 10 ms old
            continue
        R_true, R_turned = quat_to_matrix(run.q[k, rotation]), quat_to_matrix(turned.q[rotation])
        assert np.linalg.norm(matrix_to_rotvec(R_true.T @ R_turned)) < 1e-6
        heading = 0.7 + math.radians(3.0) * turned.stamp  # without odometry_yaw: the IMUs' heading, Rz(h) R_true
        assert abs(np.linalg.norm(matrix_to_rotvec(R_true.T @ quat_to_matrix(plain.q[rotation]))) - heading) < 1e-6
        np.testing.assert_allclose(turned.v[vs:vs + 3], run.v[k, vs:vs + 3], atol=1e-6)
        np.testing.assert_allclose(turned.q, run.q[k], atol=1e-6)
        checked += 1
    assert checked > 40


def test_floating_base_yaw_from_odometry_with_the_heading_filter_on():
    """The two halves of the heading: the IMUs' earth frames share a drifting offset (0.7 rad + 3 deg/s) and the
    thigh's and shank's differ from the trunk's by 0.03 and -0.02 rad. The heading filter (reference: the trunk)
    estimates the relative offsets, which no common turn removes, and the odometry sets the common heading, which
    the filter cannot observe: after 1 s the trunk orientation and the leg joints are the truth's within 1e-3 deg,
    the filter's offsets are the simulated ones, and the node's path equals replay's bit for bit."""
    plant = quadruped()
    imus = (ImuConfig("trunk", "trunk_imu_link"), ImuConfig("thigh", "fl_thigh"), ImuConfig("shank", "fl_shank"))
    leg = ("fl_hip_abduction", "fl_hip_flexion", "fl_knee")
    measured = [n for n in plant.articulated_view().position_names() if n not in leg]
    run = simulated(plant, [SimulatedImu(i.name, i.body) for i in imus], measured, seconds=3.0)
    relative = {"trunk": 0.0, "thigh": 0.03, "shank": -0.02}
    config = EstimatorConfig(
        imus=imus, estimated_joints={"quadruped": leg}, odometry=OdometryConfig(use_yaw=True), sync_tolerance_s=1e-4,
        accuracy=1e-9, heading_estimation=HeadingEstimation(enabled=True, reference_imu="trunk", initial_deg=5.0,
                                                            acceleration_noise=0.0, gyro_bias_time_constant_s=0.0))
    estimator = Estimator(plant, config)
    messages = drifting_headings(plant, estimator.odometry_base, run, relative)
    streaming = streaming_equals_batch(plant, config, estimator, messages, True)
    times = np.asarray(run.times)
    checked = 0
    for result in streaming:
        k = int(np.argmin(np.abs(times - result.stamp)))
        if k % 2 or k < 100:  # an odometry of its own instant, after the filter's first second
            continue
        R_true, R = quat_to_matrix(run.q[k, :4]), quat_to_matrix(result.q[:4])
        assert math.degrees(np.linalg.norm(matrix_to_rotvec(R_true.T @ R))) < 1e-3
        assert math.degrees(np.max(np.abs(result.q[7:] - run.q[k, 7:]))) < 1e-3
        checked += 1
    assert checked > 90
    offsets = {name: value["heading_offset_rad"] for name, value in estimator.heading_estimates().items()}
    assert offsets == pytest.approx(relative, abs=1e-5)
