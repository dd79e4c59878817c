"""Joint kinematics one joint at a time, as properties over random inputs (hypothesis): X_FM against its
definition, the motion subspace against the derivative of X_FM, N / N⁺ and integrate / difference round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros_dofkit.core import spatial
from ros_dofkit.core.multibody import (
    MultibodyPlant,
    PlanarJoint,
    PrismaticJoint,
    QuaternionFloatingJoint,
    RevoluteJoint,
)

finite = st.floats(-10.0, 10.0, allow_nan=False)
angle = st.floats(-3 * math.pi, 3 * math.pi, allow_nan=False)
vector3 = st.tuples(finite, finite, finite)
unit_axis = vector3.filter(lambda a: np.linalg.norm(a) > 1e-3)
quaternion = st.tuples(finite, finite, finite, finite).filter(lambda q: np.linalg.norm(q) > 1e-3)


def _bodies():
    plant = MultibodyPlant()
    body = plant.add_body("b", plant.add_model_instance("m"))
    return plant.get_body(0), body


def _spatial_velocity_by_differences(joint, q, v, eps=1e-6):
    """[w_FM_F; v_FMo_F] from X_FM along q(t) = integrate(q, t v)."""
    Xp = joint.calc_X_FM(joint.integrate(q, eps * v))
    Xm = joint.calc_X_FM(joint.integrate(q, -eps * v))
    w = spatial.matrix_to_rotvec(Xp[:3, :3] @ Xm[:3, :3].T) / (2 * eps)
    return np.concatenate([w, (Xp[:3, 3] - Xm[:3, 3]) / (2 * eps)])


@settings(max_examples=40, deadline=None)
@given(axis=unit_axis, theta=angle, rate=finite)
def test_revolute_rotates_about_its_axis(axis, theta, rate):
    joint = RevoluteJoint("r", *_bodies(), axis)
    a = np.array(axis) / np.linalg.norm(axis)
    X = joint.calc_X_FM([theta])
    np.testing.assert_allclose(X[:3, :3] @ a, a, atol=1e-12)
    np.testing.assert_allclose(X[:3, 3], 0.0)
    K = spatial.skew(a)  # Rodrigues: R = I + sin θ [a]x + (1 - cos θ) [a]x²
    np.testing.assert_allclose(X[:3, :3], np.eye(3) + math.sin(theta) * K + (1 - math.cos(theta)) * K @ K,
                               atol=1e-12)
    V = joint.calc_motion_subspace([theta]) @ [rate]
    np.testing.assert_allclose(V, _spatial_velocity_by_differences(joint, np.array([theta]), np.array([rate])),
                               atol=1e-6 * (1 + abs(rate)))


@settings(max_examples=40, deadline=None)
@given(axis=unit_axis, d=finite)
def test_prismatic_translates_along_its_axis(axis, d):
    joint = PrismaticJoint("p", *_bodies(), axis)
    X = joint.calc_X_FM([d])
    np.testing.assert_allclose(X, spatial.make_transform(None, d * np.array(axis) / np.linalg.norm(axis)),
                               atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(x=finite, y=finite, theta=angle, v=vector3)
def test_planar_pose_projection_round_trip_and_velocity(x, y, theta, v):
    joint = PlanarJoint("p", *_bodies())
    X = joint.calc_X_FM([x, y, theta])
    x_p, y_p, theta_p = joint.project_pose(X)
    np.testing.assert_allclose([x_p, y_p], [x, y], atol=1e-12)
    assert -math.pi <= theta_p <= math.pi and abs(math.remainder(theta_p - theta, 2 * math.pi)) < 1e-9
    V = joint.calc_motion_subspace([x, y, theta]) @ np.array(v)
    np.testing.assert_allclose(V, [0, 0, v[2], v[0], v[1], 0])
    np.testing.assert_allclose(V, _spatial_velocity_by_differences(joint, np.array([x, y, theta]), np.array(v)),
                               atol=1e-6 * (1 + np.abs(v).max()))


@settings(max_examples=40, deadline=None)
@given(quat=quaternion, p=vector3, w=vector3, u=vector3)
def test_floating_maps_and_round_trips(quat, p, w, u):
    joint = QuaternionFloatingJoint("f", *_bodies())
    q = np.concatenate([np.array(quat) / np.linalg.norm(quat), p])
    v = np.concatenate([w, u]) / 10.0
    N, N_plus = joint.calc_n_matrix(q), joint.calc_n_plus_matrix(q)
    np.testing.assert_allclose(N_plus @ N, np.eye(6), atol=1e-12)
    eps = 1e-6
    np.testing.assert_allclose((joint.integrate(q, eps * v) - joint.integrate(q, -eps * v)) / (2 * eps), N @ v,
                               atol=1e-8)
    np.testing.assert_allclose(_spatial_velocity_by_differences(joint, q, v), v, atol=1e-7)
    q1 = joint.integrate(q, v)
    np.testing.assert_allclose(np.linalg.norm(q1[:4]), 1.0, atol=1e-12)
    np.testing.assert_allclose(joint.difference(q, q1), v, atol=1e-9)
    X = joint.calc_X_FM(q)
    np.testing.assert_allclose(X[:3, :3], spatial.quat_to_matrix(q[:4]), atol=1e-12)
    np.testing.assert_allclose(X[:3, 3], p)
    # a stored quaternion within QUAT_NORM_TOLERANCE of unit length is normalized; farther ones raise (SPEC 9.7)
    np.testing.assert_allclose(joint.calc_X_FM(np.concatenate([1.0009 * q[:4], p])), X, atol=1e-12)
    with pytest.raises(spatial.QuaternionError, match="norm 3 is not within"):
        joint.calc_X_FM(np.concatenate([3.0 * q[:4], p]))
