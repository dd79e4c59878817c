"""Tests of ros_dofkit.core.state.floating_base and .converters: Drake <-> body-axes <-> ROS conventions.

Truth comes from outside the module under test: finite differences of a quaternion trajectory, Pinocchio's
free-flyer (whose velocity is in the LOCAL body frame for both parts), and analytic motions.
"""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros_dofkit.core.spatial import QuaternionError, quat_conjugate, quat_multiply, quat_to_matrix, rotvec_to_quat
from ros_dofkit.core.state import (
    FixedBaseSpace,
    FixedBaseStateConverter,
    FloatingBaseSpace,
    FloatingBaseStateConverter,
    ProductSpace,
    StateDimensionError,
    angular_velocity_body_to_world,
    angular_velocity_world_to_body,
    base_positions_from_pose,
    base_velocities_from_child_twist,
    base_velocities_from_world_twist,
    child_twist_from_base_velocities,
    drake_ndarray_reformat,
    drake_to_state,
    pose_from_base_positions,
    quat_wxyz_to_xyzw,
    quat_xyzw_to_wxyz,
    state_ndarray_reformat,
    state_to_drake,
    world_twist_from_base_velocities,
)


def random_unit_quaternions(rng, batch):
    q = rng.normal(size=batch + (4,))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def random_drake_floating(rng, batch, n_joints):
    q = np.concatenate([random_unit_quaternions(rng, batch), rng.normal(size=batch + (3 + n_joints,))], axis=-1)
    v = rng.normal(size=batch + (6 + n_joints,))
    return q, v


batch_shapes = st.sampled_from([(), (1,), (5,), (3, 2)])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batch=batch_shapes, n_joints=st.integers(0, 4))
def test_floating_conversion_round_trips_exactly(seed, batch, n_joints):
    rng = np.random.default_rng(seed)
    q_d, v_d = random_drake_floating(rng, batch, n_joints)
    q, v = FloatingBaseStateConverter.drake_to_state(q_d, v_d)
    assert q.shape == q_d.shape and v.shape == v_d.shape
    np.testing.assert_allclose(q, q_d, atol=1e-15)  # configuration is Drake's
    np.testing.assert_array_equal(v[..., 3:], v_d[..., 3:])  # linear velocity and joints pass through
    q_back, v_back = FloatingBaseStateConverter.state_to_drake(q, v)
    np.testing.assert_allclose(q_back, q_d, atol=1e-15)
    np.testing.assert_allclose(v_back, v_d, atol=1e-13)
    # and the other direction
    _, v2 = FloatingBaseStateConverter.drake_to_state(*FloatingBaseStateConverter.state_to_drake(q_d, v_d))
    np.testing.assert_allclose(v2, v_d, atol=1e-13)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batch=batch_shapes, n=st.integers(0, 5))
def test_fixed_conversion_is_a_copy(seed, batch, n):
    rng = np.random.default_rng(seed)
    q_d, v_d = rng.normal(size=batch + (n,)), rng.normal(size=batch + (n,))
    q, v = FixedBaseStateConverter.drake_to_state(q_d, v_d)
    np.testing.assert_array_equal(q, q_d)
    np.testing.assert_array_equal(v, v_d)
    q[...] = 7.0
    assert not np.any(q_d == 7.0)  # a copy, not a view
    q_b, v_b = state_to_drake(*drake_to_state(q_d, v_d, FixedBaseSpace(n)), FixedBaseSpace(n))
    np.testing.assert_array_equal(q_b, q_d)
    np.testing.assert_array_equal(v_b, v_d)


def quaternion_trajectory(t):
    """A smooth, non-planar orientation trajectory (independent of the module under test)."""
    t = np.asarray(t, dtype=float)[..., None]
    r = np.concatenate([0.3 + 0.8 * t, -0.5 + 0.4 * t**2, 1.1 * np.sin(2.0 * t)], axis=-1)
    return rotvec_to_quat(r)


def test_body_and_world_angular_velocity_match_quaternion_finite_differences():
    h = 1e-6
    for t in (0.0, 0.37, 1.9):
        quat = quaternion_trajectory(t)
        quat_dot = (quaternion_trajectory(t + h) - quaternion_trajectory(t - h)) / (2 * h)
        # ω_W from q̇ ⊗ q*, ω_B from q* ⊗ q̇ (both times 2, vector part).
        w_W = 2.0 * quat_multiply(quat_dot, quat_conjugate(quat))[1:]
        w_B = 2.0 * quat_multiply(quat_conjugate(quat), quat_dot)[1:]
        # cross-check the pair through finite differences of the rotation matrix: [ω_W]x = Ṙ Rᵀ.
        R = quat_to_matrix(quat)
        R_dot = (quat_to_matrix(quaternion_trajectory(t + h)) - quat_to_matrix(quaternion_trajectory(t - h))) / (2 * h)
        S = R_dot @ R.T
        np.testing.assert_allclose([S[2, 1], S[0, 2], S[1, 0]], w_W, atol=1e-7)

        q_drake = np.concatenate([quat, [1.0, 2.0, 3.0, 0.4]])
        v_drake = np.concatenate([w_W, [0.1, 0.2, 0.3, -0.7]])
        _, v_state = FloatingBaseStateConverter.drake_to_state(q_drake, v_drake)
        np.testing.assert_allclose(v_state[:3], w_B, atol=1e-7)
        np.testing.assert_allclose(angular_velocity_world_to_body(quat, w_W), w_B, atol=1e-7)
        np.testing.assert_allclose(angular_velocity_body_to_world(quat, w_B), w_W, atol=1e-7)
        assert np.linalg.norm(w_B - w_W) > 0.1  # the test would notice a missing rotation


def pinocchio_free_flyer():
    model = pin.Model()
    joint = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
    model.appendBodyToJoint(joint, pin.Inertia.Random(), pin.SE3.Identity())
    model.addFrame(pin.Frame("base_frame", joint, 0, pin.SE3.Identity(), pin.FrameType.OP_FRAME))
    return model, model.createData()


def test_floating_conventions_against_pinocchio_free_flyer():
    model, data = pinocchio_free_flyer()
    rng = np.random.default_rng(3)
    for _ in range(5):
        q_pin = pin.randomConfiguration(model, -np.ones(7), np.ones(7))
        v_pin = rng.normal(size=6)  # [v_WBo_B, w_WB_B]: LOCAL frame, linear first
        pin.forwardKinematics(model, data, q_pin, v_pin)
        pin.updateFramePlacements(model, data)
        frame = model.getFrameId("base_frame")
        world = pin.getFrameVelocity(model, data, frame, pin.LOCAL_WORLD_ALIGNED)  # both parts in W axes
        R_WB = data.oMf[frame].rotation
        p_WB = data.oMf[frame].translation

        quat_wxyz = quat_xyzw_to_wxyz(q_pin[3:7])  # Pinocchio stores (x, y, z, w) after the position
        q_drake = np.concatenate([quat_wxyz, q_pin[:3]])
        np.testing.assert_allclose(quat_to_matrix(quat_wxyz), R_WB, atol=1e-12)
        np.testing.assert_allclose(q_drake[4:], p_WB, atol=1e-12)

        # Drake's v is V_WB in W (ω first): exactly Pinocchio's LOCAL_WORLD_ALIGNED velocity.
        v_drake = np.concatenate([world.angular, world.linear])
        # dair_pll state: angular in body axes (Pinocchio LOCAL angular), linear in world axes.
        _, v_state = FloatingBaseStateConverter.drake_to_state(q_drake, v_drake)
        np.testing.assert_allclose(v_state[:3], v_pin[3:], atol=1e-12)
        np.testing.assert_allclose(v_state[3:], world.linear, atol=1e-12)
        # Odometry twist: both parts in the child frame = Pinocchio's LOCAL velocity.
        linear_B, angular_B = child_twist_from_base_velocities(q_drake, v_drake)
        np.testing.assert_allclose(linear_B, v_pin[:3], atol=1e-12)
        np.testing.assert_allclose(angular_B, v_pin[3:], atol=1e-12)
        np.testing.assert_allclose(base_velocities_from_child_twist(q_drake, v_pin[:3], v_pin[3:]), v_drake, atol=1e-12)
        # ROS pose: Pinocchio's quaternion is in ROS order already.
        position, quat_xyzw = pose_from_base_positions(q_drake)
        np.testing.assert_allclose(position, q_pin[:3], atol=1e-15)
        np.testing.assert_allclose(quat_xyzw, q_pin[3:7], atol=1e-15)


def test_odometry_twist_of_a_yawed_body_moving_along_its_own_x_axis():
    yaw, speed, yaw_rate = 0.7, 2.0, 0.3
    q_base = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2), 5.0, -1.0, 0.2])
    v_base = np.array([0.0, 0.0, yaw_rate, speed * np.cos(yaw), speed * np.sin(yaw), 0.0])  # [w_W, v_W]
    linear_B, angular_B = child_twist_from_base_velocities(q_base, v_base)
    np.testing.assert_allclose(linear_B, [speed, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(angular_B, [0.0, 0.0, yaw_rate], atol=1e-15)
    # World twist (Drake translator convention) keeps the world axes.
    linear_W, angular_W = world_twist_from_base_velocities(v_base)
    np.testing.assert_allclose(linear_W, v_base[3:])
    np.testing.assert_allclose(angular_W, v_base[:3])
    np.testing.assert_array_equal(base_velocities_from_world_twist(linear_W, angular_W), v_base)
    # pitched body climbing along its own x axis: linear_B = (s, 0, 0) again, w_B = pitch rate about y.
    pitch = -0.4
    q_pitch = np.array([np.cos(pitch / 2), 0.0, np.sin(pitch / 2), 0.0, 0.0, 0.0, 0.0])
    v_pitch = np.array([0.0, 0.5, 0.0, speed * np.cos(pitch), 0.0, -speed * np.sin(pitch)])
    linear_B, angular_B = child_twist_from_base_velocities(q_pitch, v_pitch)
    np.testing.assert_allclose(linear_B, [speed, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(angular_B, [0.0, 0.5, 0.0], atol=1e-15)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batch=batch_shapes)
def test_ros_pose_and_twist_round_trips_batched(seed, batch):
    rng = np.random.default_rng(seed)
    q_base, v_base = random_drake_floating(rng, batch, 0)
    position, quat_xyzw = pose_from_base_positions(q_base)
    assert position.shape == batch + (3,) and quat_xyzw.shape == batch + (4,)
    np.testing.assert_allclose(base_positions_from_pose(position, quat_xyzw), q_base, atol=1e-15)
    linear_B, angular_B = child_twist_from_base_velocities(q_base, v_base)
    np.testing.assert_allclose(base_velocities_from_child_twist(q_base, linear_B, angular_B), v_base, atol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(linear_B, axis=-1), np.linalg.norm(v_base[..., 3:], axis=-1), rtol=1e-12)


def test_quaternion_order_at_the_edge():
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)  # 90 degrees about z
    np.testing.assert_array_equal(quat_wxyz_to_xyzw([c, 0, 0, s]), [0, 0, s, c])
    np.testing.assert_array_equal(quat_xyzw_to_wxyz([0, 0, s, c]), [c, 0, 0, s])
    position, quat_xyzw = pose_from_base_positions([1, 0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(quat_xyzw, [0, 0, 0, 1])
    np.testing.assert_array_equal(position, [1, 2, 3])


def test_non_unit_quaternions_within_tolerance_are_normalized():
    q_d = np.array([1.0005, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.5])
    v_d = np.array([0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 1.0])
    q, v = FloatingBaseStateConverter.drake_to_state(q_d, v_d)
    np.testing.assert_allclose(q[:4], [1.0, 0.0, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(v[:3], v_d[:3], atol=1e-15)  # not scaled by |q|^2 as the raw formula would
    _, quat_xyzw = pose_from_base_positions(q_d[:7])
    assert np.linalg.norm(quat_xyzw) == pytest.approx(1.0, abs=1e-15)
    q_from_pose = base_positions_from_pose([0, 0, 0], [0.0, 0.0, 0.0, 0.9995])
    np.testing.assert_allclose(q_from_pose[:4], [1.0, 0.0, 0.0, 0.0], atol=1e-15)


@pytest.mark.parametrize(
    "quat",
    [[0.0, 0.0, 0.0, 0.0], [np.nan, 0.0, 0.0, 1.0], [np.inf, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0]],
    ids=["zero", "nan", "inf", "far-from-unit"],
)
def test_bad_quaternions_raise(quat):
    q_d = np.concatenate([quat, [0.0, 0.0, 0.0]])
    v_d = np.zeros(6)
    with pytest.raises(QuaternionError):
        FloatingBaseStateConverter.drake_to_state(q_d, v_d)
    with pytest.raises(QuaternionError):
        FloatingBaseStateConverter.state_to_drake(q_d, v_d)
    with pytest.raises(QuaternionError):
        child_twist_from_base_velocities(q_d, v_d)
    with pytest.raises(QuaternionError):
        base_positions_from_pose([0, 0, 0], quat_wxyz_to_xyzw(quat))
    # one bad entry in a batch rejects the call
    batch = np.tile(np.array([1.0, 0, 0, 0, 0, 0, 0]), (3, 1))
    batch[1] = q_d
    with pytest.raises(QuaternionError):
        FloatingBaseStateConverter.drake_to_state(batch, np.zeros((3, 6)))


def test_size_errors_name_both_sizes():
    with pytest.raises(StateDimensionError, match=r"len\(q\) - len\(v\) == 1"):
        FloatingBaseStateConverter.drake_to_state(np.zeros(8), np.zeros(8))
    with pytest.raises(StateDimensionError, match="len\\(q\\) >= 7"):
        FloatingBaseStateConverter.drake_to_state(np.zeros(6), np.zeros(5))
    with pytest.raises(StateDimensionError, match="length 9 .* length 8"):
        drake_to_state(np.zeros(8), np.zeros(7), FloatingBaseSpace(2))
    with pytest.raises(TypeError, match="FloatingBaseSpace or a FixedBaseSpace"):
        drake_to_state(np.zeros(1), np.zeros(1), ProductSpace([FixedBaseSpace(1)]))
    with pytest.raises(StateDimensionError, match="v_base: expected last axis of length 6, got shape \\(5,\\)"):
        child_twist_from_base_velocities(np.array([1.0, 0, 0, 0, 0, 0, 0]), np.zeros(5))


def test_dispatch_matches_the_converter_classes():
    rng = np.random.default_rng(0)
    q_d, v_d = random_drake_floating(rng, (4,), 3)
    expected = FloatingBaseStateConverter.drake_to_state(q_d, v_d)
    got = drake_to_state(q_d, v_d, FloatingBaseSpace(3))
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_reformat_helpers():
    x = np.arange(6.0)
    row = state_ndarray_reformat(x)
    assert row.shape == (1, 6)
    row[0, 0] = 99.0
    assert x[0] == 0.0  # copy
    flat = drake_ndarray_reformat(row)
    assert flat.shape == (6,)
    flat[1] = 99.0
    assert row[0, 1] == 1.0
    np.testing.assert_array_equal(drake_ndarray_reformat(state_ndarray_reformat(x)), x)
    assert drake_ndarray_reformat(np.zeros((1, 1, 4))).shape == (4,)
    with pytest.raises(StateDimensionError, match="batch of 2 states"):
        state_ndarray_reformat(np.zeros((2, 3)))
    with pytest.raises(StateDimensionError, match="batch of 3 states"):
        drake_ndarray_reformat(np.zeros((3, 3)))
