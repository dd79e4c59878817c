"""PlanarJoint, case by case from SPEC §2 (Drake's PlanarJoint) and §9.3 (projection of a full transform)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros_dofkit.core import spatial
from ros_dofkit.core.multibody import (
    PLANAR_TILT_TOLERANCE,
    PLANAR_TRANSLATION_TOLERANCE,
    JointNotSupportedError,
    MultibodyIndexError,
    MultibodyPlant,
    MultibodyValueError,
    PlanarJoint,
    PlantFinalizedError,
    RevoluteJoint,
)

X_WF = spatial.make_transform(spatial.rpy_to_matrix([0.3, -0.2, 0.5]), [0.4, -0.1, 0.2])
X_BM = spatial.make_transform(spatial.rotation_x(0.7), [0.05, 0.0, -0.1])


def make_plant(damping=(0.1, 0.2, 0.3), finalize=True):
    plant = MultibodyPlant("planar_test")
    instance = plant.add_model_instance("puck")
    body = plant.add_body("puck_body", instance)
    F = plant.add_frame("table", plant.get_body(0), X_WF)
    M = plant.add_frame("puck_mount", body, X_BM)
    joint = plant.add_joint(PlanarJoint("slide", F, M, damping))
    if finalize:
        plant.finalize()
    return plant, joint


def test_type_name_dofs_and_suffixes():
    plant, joint = make_plant()
    assert PlanarJoint.TYPE_NAME == "planar" and joint.type_name == "planar"
    assert (joint.num_positions, joint.num_velocities) == (3, 3)
    assert [joint.position_suffix(i) for i in range(3)] == ["x", "y", "qz"]
    assert [joint.velocity_suffix(i) for i in range(3)] == ["vx", "vy", "wz"]
    for bad in (3, -1):
        with pytest.raises(MultibodyIndexError, match=r"\[0, 3\)"):
            joint.position_suffix(bad)
        with pytest.raises(IndexError):
            joint.velocity_suffix(bad)
    assert joint.can_rotate() and joint.can_translate()
    assert joint.is_velocity_equal_to_qdot() and plant.is_velocity_equal_to_qdot()
    assert plant.position_names() == ["slide_x", "slide_y", "slide_qz"]
    assert plant.velocity_names() == ["slide_vx", "slide_vy", "slide_wz"]


def test_damping_construction_and_state_parameter():
    plant, joint = make_plant(damping=(0.1, 0.2, 0.3))
    np.testing.assert_array_equal(joint.default_damping(), [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(joint.damping, [0.1, 0.2, 0.3])
    state = plant.create_default_state()
    np.testing.assert_array_equal(joint.get_damping_vector(state), [0.1, 0.2, 0.3])
    assert joint.set_damping_vector(state, [1.0, 2.0, 3.0]) is joint
    np.testing.assert_array_equal(joint.get_damping_vector(state), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(joint.default_damping(), [0.1, 0.2, 0.3])  # the default is untouched
    np.testing.assert_array_equal(joint.get_damping_vector(plant.create_default_state()), [0.1, 0.2, 0.3])
    with pytest.raises(MultibodyValueError, match=">= 0"):
        joint.set_damping_vector(state, [1.0, -2.0, 3.0])
    with pytest.raises(MultibodyValueError, match="3 values"):
        joint.set_damping_vector(state, [1.0, 2.0])
    with pytest.raises(PlantFinalizedError):
        joint.set_default_damping_vector([1.0, 1.0, 1.0])


def test_negative_or_misshaped_damping_is_rejected_at_construction():
    plant = MultibodyPlant()
    body = plant.add_body("b", plant.add_model_instance("m"))
    with pytest.raises(MultibodyValueError, match=">= 0"):
        PlanarJoint("p", plant.get_body(0), body, [0.0, -0.1, 0.0])
    with pytest.raises(MultibodyValueError, match="3-vector"):
        PlanarJoint("p", plant.get_body(0), body, 0.5)
    with pytest.raises(MultibodyValueError, match="3 values"):
        PlanarJoint("p", plant.get_body(0), body, [0.0, 0.1])
    joint = PlanarJoint("p", plant.get_body(0), body)
    np.testing.assert_array_equal(joint.default_damping(), np.zeros(3))
    joint.set_default_damping_vector([0.5, 0.5, 0.25])
    np.testing.assert_array_equal(joint.default_damping(), [0.5, 0.5, 0.25])


def test_default_translation_rotation_and_pose():
    _, joint = make_plant(finalize=False)
    np.testing.assert_array_equal(joint.default_positions, np.zeros(3))
    joint.set_default_rotation(0.4)
    joint.set_default_translation([1.0, 2.0])
    np.testing.assert_array_equal(joint.get_default_translation(), [1.0, 2.0])
    assert joint.get_default_rotation() == 0.4
    joint.set_default_rotation(-7.0)  # not wrapped, translation kept
    np.testing.assert_array_equal(joint.default_positions, [1.0, 2.0, -7.0])
    joint.set_default_translation([-3.0, 0.5])  # rotation kept
    np.testing.assert_array_equal(joint.default_positions, [-3.0, 0.5, -7.0])
    joint.set_default_pose([0.25, -0.5], 1.25)
    np.testing.assert_array_equal(joint.default_positions, [0.25, -0.5, 1.25])
    with pytest.raises(MultibodyValueError, match="3 values"):
        joint.set_default_positions([1.0, 2.0])
    with pytest.raises(MultibodyValueError, match="2 values"):
        joint.set_default_translation([1.0, 2.0, 3.0])


def test_limits_are_checked_and_never_move_defaults():
    _, joint = make_plant(finalize=False)
    for getter in ("position", "velocity", "acceleration"):
        assert np.all(getattr(joint, f"{getter}_lower_limits") == -np.inf)
        assert np.all(getattr(joint, f"{getter}_upper_limits") == np.inf)
    joint.set_default_pose([5.0, 5.0], 5.0)
    joint.set_position_limits([-1, -1, -1], [1, 1, 1])
    np.testing.assert_array_equal(joint.default_positions, [5.0, 5.0, 5.0])  # out-of-limit default is kept
    joint.set_default_pose([-4.0, 3.0], 2.0)  # and accepted
    np.testing.assert_array_equal(joint.default_positions, [-4.0, 3.0, 2.0])
    joint.set_velocity_limits([-2, -2, -3], [2, 2, 3])
    joint.set_acceleration_limits([-9, -9, -9], [9, 9, 9])
    np.testing.assert_array_equal(joint.velocity_upper_limits, [2, 2, 3])
    np.testing.assert_array_equal(joint.acceleration_lower_limits, [-9, -9, -9])
    for setter in (joint.set_position_limits, joint.set_velocity_limits, joint.set_acceleration_limits):
        with pytest.raises(MultibodyValueError, match="3 values"):
            setter([-1, -1], [1, 1])
        with pytest.raises(MultibodyValueError, match="exceed"):
            setter([-1, 2, -1], [1, 1, 1])
    np.testing.assert_array_equal(joint.position_upper_limits, [1, 1, 1])  # failed calls changed nothing


def test_state_accessors_chain_and_do_not_clamp_or_wrap():
    plant, joint = make_plant()
    joint.set_position_limits([-1, -1, -1], [1, 1, 1])
    state = plant.create_default_state()
    assert joint.set_translation(state, [3.0, -4.0]).set_rotation(state, 10.0) is joint
    np.testing.assert_array_equal(joint.get_translation(state), [3.0, -4.0])
    assert joint.get_rotation(state) == 10.0
    np.testing.assert_array_equal(state.q, [3.0, -4.0, 10.0])
    assert joint.set_pose(state, [0.5, 0.25], -9.0) is joint
    np.testing.assert_array_equal(state.q, [0.5, 0.25, -9.0])
    assert joint.set_translational_velocity(state, [0.1, 0.2]).set_angular_velocity(state, -0.3) is joint
    np.testing.assert_array_equal(joint.get_translational_velocity(state), [0.1, 0.2])
    assert joint.get_angular_velocity(state) == -0.3
    np.testing.assert_array_equal(state.v, [0.1, 0.2, -0.3])


def test_pose_and_spatial_velocity_from_state():
    plant, joint = make_plant()
    state = plant.create_default_state()
    joint.set_pose(state, [0.3, -0.7], 2.5)
    joint.set_translational_velocity(state, [1.5, -2.0]).set_angular_velocity(state, 0.75)
    expected = spatial.make_transform(spatial.rotation_z(2.5), [0.3, -0.7, 0.0])
    np.testing.assert_allclose(joint.get_pose(state), expected, atol=1e-15)
    np.testing.assert_array_equal(joint.get_spatial_velocity(state), [0, 0, 0.75, 1.5, -2.0, 0])
    # the child body: X_WB = X_WF X_FM inv(X_BM)
    X_WB = plant.calc_body_poses(state.q)[1]
    np.testing.assert_allclose(X_WB, X_WF @ expected @ spatial.invert_transform(X_BM), atol=1e-14)


def test_set_default_pose_projects_an_in_plane_transform():
    _, joint = make_plant(finalize=False)
    X = spatial.make_transform(spatial.rotation_z(-2.9), [1.25, -0.5, 0.0])
    joint.set_default_pose(X)
    np.testing.assert_allclose(joint.default_positions, [1.25, -0.5, -2.9], atol=1e-15)
    np.testing.assert_allclose(joint.get_default_pose(), X, atol=1e-15)
    # within tolerance: accepted, out-of-plane parts dropped
    nearly = spatial.make_transform(
        spatial.rotation_x(0.5 * PLANAR_TILT_TOLERANCE) @ spatial.rotation_z(0.3),
        [0.1, 0.2, 0.5 * PLANAR_TRANSLATION_TOLERANCE],
    )
    joint.set_default_pose(nearly)
    np.testing.assert_allclose(joint.default_positions, [0.1, 0.2, math.atan2(nearly[1, 0], nearly[0, 0])])


@pytest.mark.parametrize(
    "X, message",
    [
        (spatial.make_transform(None, [0.0, 0.0, 10 * PLANAR_TRANSLATION_TOLERANCE]), "leaves the joint plane"),
        (spatial.make_transform(spatial.rotation_y(10 * PLANAR_TILT_TOLERANCE)), "tilts"),
        (spatial.make_transform(spatial.rotation_x(math.pi)), "tilts"),
    ],
)
def test_set_default_pose_rejects_out_of_plane_transforms(X, message):
    _, joint = make_plant(finalize=False)
    joint.set_default_pose([0.5, 0.5], 0.5)
    with pytest.raises(MultibodyValueError, match=message):
        joint.set_default_pose(X)
    np.testing.assert_array_equal(joint.default_positions, [0.5, 0.5, 0.5])
    with pytest.raises(MultibodyValueError, match="4x4|shape"):
        joint.set_default_pose(np.eye(3))


def test_set_pose_from_transform_at_run_time_and_spatial_velocity_setter_refused():
    plant, joint = make_plant()
    state = plant.create_default_state()
    joint.set_pose(state, spatial.make_transform(spatial.rotation_z(0.2), [1.0, 2.0, 0.0]))
    np.testing.assert_allclose(state.q, [1.0, 2.0, 0.2], atol=1e-15)
    with pytest.raises(MultibodyValueError, match="leaves the joint plane"):
        joint.set_pose(state, spatial.make_transform(None, [0, 0, 1.0]))
    with pytest.raises(JointNotSupportedError, match="planar joint 'slide'"):
        joint.set_spatial_velocity(state, np.zeros(6))


def test_random_pose_distribution_is_reproducible_and_keeps_velocity_zero():
    plant, joint = make_plant()
    state = plant.create_default_state()
    joint.set_default_pose([0.5, -0.5], 0.25)
    plant.set_random_state(state, np.random.default_rng(0))  # no distribution: the defaults
    np.testing.assert_array_equal(state.q, [0.5, -0.5, 0.25])
    joint.set_random_pose_distribution(
        [lambda g: g.uniform() + 1.0, lambda g: g.uniform(-3.0, -2.0)], lambda g: g.normal(scale=10.0)
    )
    state.v[:] = 7.0
    samples = []
    generator = np.random.default_rng(42)
    for _ in range(200):
        plant.set_random_state(state, generator)
        samples.append(state.q.copy())
        np.testing.assert_array_equal(state.v, np.zeros(3))
    samples = np.array(samples)
    assert np.all((samples[:, 0] >= 1.0) & (samples[:, 0] <= 2.0))
    assert np.all((samples[:, 1] >= -3.0) & (samples[:, 1] <= -2.0))
    assert np.ptp(samples[:, 2]) > 10.0  # fresh samples, θ not wrapped
    assert len(np.unique(samples[:, 0])) == 200
    again = plant.create_default_state()
    plant.set_random_state(again, np.random.default_rng(42))
    np.testing.assert_array_equal(again.q, samples[0])
    with pytest.raises(TypeError, match="callable"):
        joint.set_random_pose_distribution([1.0, lambda g: 0.0], lambda g: 0.0)
    with pytest.raises(MultibodyValueError, match="two callables"):
        joint.set_random_pose_distribution([lambda g: 0.0], lambda g: 0.0)


def test_n_matrices_are_identity_and_jacobian_in_parent_frame():
    plant, joint = make_plant()
    q = np.array([0.3, -0.2, 1.1])
    np.testing.assert_array_equal(plant.calc_n_matrix(q), np.eye(3))
    np.testing.assert_array_equal(plant.calc_n_plus_matrix(q), np.eye(3))
    # translational rates are along F's axes, whatever θ is
    J = plant.calc_jacobian(q, joint.frame_on_child)
    np.testing.assert_allclose(J[3:, 0], X_WF[:3, 0], atol=1e-15)
    np.testing.assert_allclose(J[3:, 1], X_WF[:3, 1], atol=1e-15)
    np.testing.assert_allclose(J[:3, 2], X_WF[:3, 2], atol=1e-15)
    np.testing.assert_allclose(J[3:, 2], 0.0, atol=1e-15)  # Mo is on the rotation axis


def test_planar_joint_between_moving_bodies_and_revolute_child():
    """A planar joint deeper in a tree (F on a moving body), checked by finite differences."""
    plant = MultibodyPlant()
    instance = plant.add_model_instance("chain")
    a = plant.add_body("a", instance)
    b = plant.add_body("b", instance)
    c = plant.add_body("c", instance)
    plant.add_joint(RevoluteJoint("hinge", plant.get_body(0), a, [0, 1, 0]))
    plant.add_joint(PlanarJoint("slide", plant.add_frame("slide_F", a, X_WF), b))
    plant.add_joint(RevoluteJoint("tip", plant.add_frame("tip_F", b, X_BM), c, [1, 0, 0]))
    plant.finalize()
    q = np.array([0.4, 0.2, -0.3, 2.0, -0.6])
    p_CQ = np.array([0.1, 0.2, 0.3])
    J = plant.calc_jacobian(q, c, p_CQ)
    eps = 1e-6
    for i in range(5):
        dq = np.zeros(5)
        dq[i] = eps
        Xp, Xm = plant.calc_frame_pose(q + dq, c), plant.calc_frame_pose(q - dq, c)
        np.testing.assert_allclose(spatial.matrix_to_rotvec(Xp[:3, :3] @ Xm[:3, :3].T) / (2 * eps), J[:3, i],
                                   atol=1e-8)
        np.testing.assert_allclose(((Xp - Xm)[:3, :3] @ p_CQ + (Xp - Xm)[:3, 3]) / (2 * eps), J[3:, i], atol=1e-8)
