"""core/estimator/odometry_input.py: an Odometry pose -> the base joint's coordinates, against the plant's own
forward kinematics (a pose computed from known coordinates gives those coordinates back), and every refusal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros_dofkit.core.errors import EstimatorConfigError, UnknownNameError
from ros_dofkit.core.estimator.config import EstimatorConfig, ImuConfig, OdometryConfig
from ros_dofkit.core.estimator.inputs import REASON_CODE, RejectReason
from ros_dofkit.core.estimator.odometry_input import (
    MEMORY_LENGTH,
    ODOMETRY_OK,
    forget,
    match,
    new_memory,
    odometry_base,
    remember,
    validate_odometries,
    validate_odometry,
)
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.spatial import matrix_to_quat, rotvec_to_matrix


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
        values = np.empty(3)
        assert validate_odometry(p, quaternion, True, base.target, values) == ODOMETRY_OK
        np.testing.assert_allclose(values[:base.target.count], q[base.q_index], atol=1e-12)


def test_floating_base_translation_round_trips_and_the_heading_is_refused():
    plant = quadruped()
    base = odometry_base(plant, config(), art_q(plant))
    start = base.joint.position_start
    assert list(base.q_index) == [start + 4, start + 5, start + 6] and base.art_index.size == 0
    q = np.asarray(plant.default_positions(), dtype=float).copy()
    q[start:start + 4] = matrix_to_quat(rotvec_to_matrix([0.2, -0.4, 1.1]))
    q[start + 4:start + 7] = [1.5, -2.0, 0.45]
    p, quaternion = pose_of_base(plant, base, q)
    values = np.empty(3)
    assert validate_odometry(p, quaternion, True, base.target, values) == ODOMETRY_OK
    np.testing.assert_allclose(values, [1.5, -2.0, 0.45], atol=1e-12)
    with pytest.raises(EstimatorConfigError, match="floating base"):
        odometry_base(plant, config(use_yaw=True), art_q(plant))


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
    values = np.empty((len(cases), 3))
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
    memory = new_memory(len(RejectReason))
    out = np.empty(3)
    assert not match(memory, 1.0, 0.1, out) and np.isnan(out).all()  # nothing heard
    for k in range(40):  # 40 samples at 100 Hz from t = 1.0: the ring keeps the newest MEMORY_LENGTH
        remember(memory, 1.0 + 0.01 * k, np.array([k, 2.0 * k, 3.0 * k]))
    assert memory.count[0] == MEMORY_LENGTH and memory.last_stamp[0] == 1.0 + 0.01 * 39
    assert match(memory, 1.305, 0.1, out) and out.tolist() == [30.0, 60.0, 90.0]  # 1.30 <= 1.305 < 1.31
    assert match(memory, 1.31, 0.1, out) and out[0] == 31.0  # equal stamps match
    assert match(memory, 5.0, 10.0, out) and out[0] == 39.0  # ahead of every sample: the newest
    assert not match(memory, 1.6, 0.1, out) and np.isnan(out).all()  # the newest is older than the timeout
    assert not match(memory, 1.01, 0.1, out)  # before every kept sample (the older ones left the ring)
    forget(memory)
    assert memory.count[0] == 0 and np.isnan(memory.last_stamp[0]) and not match(memory, 1.3, 1.0, out)
