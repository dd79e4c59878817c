"""Kinematics of the multibody plant: FK and frame Jacobians against finite differences (perturbing with
integrate_positions, so floating bases are handled on their manifold), the flat-array path against the readable
reference to 1e-12, the v <-> q̇ maps, integrate/difference round trips and batching; the compiled position
difference (``compiled.position_differences``, the estimator's velocity finite differences) against the plant's and
as the derivative of a curve.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.multibody import MultibodyPlant
from ros_dofkit.core.multibody.compiled import position_differences
from ros_dofkit.core.multibody.kinematics import reference_body_poses, reference_jacobian

FIXTURES = Path(__file__).parent / "fixtures" / "urdf"


def build(spec: str, add_extras=None) -> MultibodyPlant:
    """Load one of PLANT_SPECS; ``add_extras(plant)`` may add frames before finalize."""
    source, base_joint = PLANT_SPECS[spec]
    plant = MultibodyPlant()
    plant.add_urdf(source() if callable(source) else source, base_joint=base_joint)
    if add_extras is not None:
        add_extras(plant)
    plant.finalize()
    return plant


def random_configuration(plant: MultibodyPlant, rng: np.random.Generator) -> np.ndarray:
    """Inside finite limits, N(0, 1) where unlimited; quaternions of floating joints random unit."""
    q = plant.default_positions()
    lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
    finite = np.isfinite(lower) & np.isfinite(upper)
    q[finite] = rng.uniform(lower[finite], upper[finite])
    q[~finite] = rng.normal(size=(~finite).sum())
    for joint in plant.floating_base_joints():
        quat = rng.normal(size=4)
        q[joint.position_start:joint.position_start + 4] = quat / np.linalg.norm(quat)
    return q


PLANT_SPECS = {
    "panda": (lambda: urdf_path("panda"), "fixed"),
    "anymal_floating": (lambda: urdf_path("anymal"), "floating"),
    "talos_full_mimic": (lambda: urdf_path("talos_full"), "floating"),
    "tiago_prismatic": (lambda: urdf_path("tiago"), "fixed"),
    "mobile_arm_planar_base": (FIXTURES / "mobile_arm.urdf", "planar"),
    "mobile_arm_floating_base": (FIXTURES / "mobile_arm.urdf", "floating"),
    "flyer_world_link": (FIXTURES / "floating_world.urdf", None),
}


@pytest.fixture(scope="module", params=sorted(PLANT_SPECS))
def spec(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def plant(spec) -> MultibodyPlant:
    return build(spec)


def test_world_pose_is_identity_and_rotations_are_proper(plant):
    q = random_configuration(plant, np.random.default_rng(0))
    X = plant.calc_body_poses(q)
    assert X.shape == (plant.num_bodies(), 4, 4)
    np.testing.assert_array_equal(X[0], np.eye(4))
    R = X[:, :3, :3]
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)


def test_flat_tree_path_matches_reference(plant):
    rng = np.random.default_rng(1)
    q = np.stack([random_configuration(plant, rng) for _ in range(3)])
    np.testing.assert_allclose(plant.calc_body_poses(q), reference_body_poses(plant, q), rtol=0, atol=1e-12)
    for body_index in rng.choice(np.arange(1, plant.num_bodies()), size=min(6, plant.num_bodies() - 1), replace=False):
        body = plant.get_body(int(body_index))
        p_BQ = rng.normal(size=3)
        np.testing.assert_allclose(
            plant.calc_jacobian(q, body, p_BQ), reference_jacobian(plant, q, body.index, p_BQ), rtol=0, atol=1e-12
        )


def _leaf_bodies(plant: MultibodyPlant, count: int, rng) -> list[int]:
    parents = {plant.get_inboard_joint(b).parent_body.index for b in range(1, plant.num_bodies())}
    leaves = [b for b in range(1, plant.num_bodies()) if b not in parents]
    chosen = rng.choice(leaves, size=min(count, len(leaves)), replace=False)
    return [int(b) for b in chosen]


def test_jacobian_matches_finite_differences(plant):
    rng = np.random.default_rng(2)
    eps = 1e-6
    for _ in range(2):
        q = random_configuration(plant, rng)
        for body_index in _leaf_bodies(plant, 4, rng):
            frame = plant.get_body(body_index)
            p_BQ = rng.normal(scale=0.2, size=3)
            J = plant.calc_jacobian(q, frame, p_BQ)
            J_fd = np.zeros_like(J)
            for i in range(plant.num_velocities()):
                dv = np.zeros(plant.num_velocities())
                dv[i] = eps
                X_plus = plant.calc_frame_pose(plant.integrate_positions(q, dv), frame)
                X_minus = plant.calc_frame_pose(plant.integrate_positions(q, -dv), frame)
                J_fd[:3, i] = spatial.matrix_to_rotvec(X_plus[:3, :3] @ X_minus[:3, :3].T) / (2 * eps)
                p_plus = X_plus[:3, :3] @ p_BQ + X_plus[:3, 3]
                p_minus = X_minus[:3, :3] @ p_BQ + X_minus[:3, 3]
                J_fd[3:, i] = (p_plus - p_minus) / (2 * eps)
            np.testing.assert_allclose(J, J_fd, rtol=0, atol=1e-7)
            np.testing.assert_array_equal(plant.calc_angular_jacobian(q, frame), J[:3])


def test_fixed_frame_jacobian_and_pose(spec, plant):
    """A frame added with an offset: pose = X_WB X_BF, Jacobian at its origin = body Jacobian at p_BF."""
    rng = np.random.default_rng(3)
    q = random_configuration(plant, rng)
    body = plant.get_body(_leaf_bodies(plant, 1, rng)[0])
    X_BF = spatial.make_transform(spatial.rotvec_to_matrix(rng.normal(size=3)), rng.normal(size=3))
    with_frame = build(spec, lambda p: p.add_frame("imu", p.get_body_by_name(body.name), X_BF))
    frame = with_frame.get_frame_by_name("imu")
    assert frame.index == with_frame.num_frames() - 1 and with_frame.get_frame(frame.index) is frame
    np.testing.assert_allclose(with_frame.calc_frame_pose(q, frame), plant.calc_body_poses(q)[body.index] @ X_BF,
                               atol=1e-12)
    np.testing.assert_array_equal(with_frame.calc_frame_pose(q, "imu"), with_frame.calc_frame_pose(q, frame))
    np.testing.assert_allclose(with_frame.calc_jacobian(q, frame), plant.calc_jacobian(q, body, X_BF[:3, 3]),
                               atol=1e-12)
    p_FoQ_F = rng.normal(size=3)
    np.testing.assert_allclose(with_frame.calc_jacobian(q, frame, p_FoQ_F),
                               plant.calc_jacobian(q, body, X_BF[:3, :3] @ p_FoQ_F + X_BF[:3, 3]), atol=1e-12)
    poses = with_frame.calc_frame_poses(q, [frame, body.name])
    np.testing.assert_allclose(poses[0], with_frame.calc_frame_pose(q, frame), atol=0)
    np.testing.assert_allclose(poses[1], plant.calc_body_poses(q)[body.index], atol=0)


def test_n_matrix_is_derivative_of_integrate(plant):
    rng = np.random.default_rng(4)
    q = random_configuration(plant, rng)
    N = plant.calc_n_matrix(q)
    assert N.shape == (plant.num_positions(), plant.num_velocities())
    eps = 1e-6
    for i in range(plant.num_velocities()):
        dv = np.zeros(plant.num_velocities())
        dv[i] = eps
        column = (plant.integrate_positions(q, dv) - plant.integrate_positions(q, -dv)) / (2 * eps)
        np.testing.assert_allclose(column, N[:, i], atol=1e-8)
    N_plus = plant.calc_n_plus_matrix(q)
    np.testing.assert_allclose(N_plus @ N, np.eye(plant.num_velocities()), atol=1e-12)
    v = rng.normal(size=plant.num_velocities())
    np.testing.assert_allclose(plant.map_velocity_to_qdot(q, v), N @ v, atol=1e-14)
    np.testing.assert_allclose(plant.map_qdot_to_velocity(q, N @ v), v, atol=1e-12)


def test_integrate_and_difference_are_inverse(plant):
    rng = np.random.default_rng(5)
    q0 = random_configuration(plant, rng)
    dv = rng.normal(scale=0.5, size=plant.num_velocities())
    q1 = plant.integrate_positions(q0, dv)
    np.testing.assert_allclose(plant.position_difference(q0, q1), dv, atol=1e-12)
    q2 = random_configuration(plant, rng)
    q2_again = plant.integrate_positions(q0, plant.position_difference(q0, q2))
    # quaternions may come back with the opposite sign; compare the poses they produce
    np.testing.assert_allclose(plant.calc_body_poses(q2_again), plant.calc_body_poses(q2), atol=1e-12)


def _compiled_differences(plant, Q0, Q1) -> np.ndarray:
    out = np.full((len(Q0), plant.num_velocities()), np.nan)
    position_differences(plant.tree.kernel_arguments(), np.ascontiguousarray(Q0), np.ascontiguousarray(Q1), out)
    return out


def test_compiled_position_difference_equals_the_plants(plant):
    rng = np.random.default_rng(15)
    Q0 = np.array([random_configuration(plant, rng) for _ in range(40)])
    steps = rng.normal(scale=0.3, size=(40, plant.num_velocities())) * rng.choice([1e-9, 1e-4, 1.0], (40, 1))
    Q1 = np.concatenate([plant.integrate_positions(Q0[:20], steps[:20]),
                         [random_configuration(plant, rng) for _ in range(19)], Q0[-1:]])
    for q in Q1[20:30]:  # the quaternion's other sign: the same rotation, the shorter way round either way
        for joint in plant.floating_base_joints():
            q[joint.position_start:joint.position_start + 4] *= -1.0
    compiled = _compiled_differences(plant, Q0, Q1)
    reference = plant.position_difference(Q0, Q1)
    # the same operations in the same order; only atan2 may differ by an ulp (NumPy's SIMD loop vs libm)
    np.testing.assert_allclose(compiled, reference, rtol=4e-16, atol=1e-18)
    np.testing.assert_allclose(compiled[:20], steps[:20], atol=1e-12)
    np.testing.assert_allclose(compiled[-1], 0.0, atol=1e-15)  # q ⊖ q: the rounding of quat ⊗ quat* only
    for c in range(len(Q0)):  # row by row the same bits as the batch
        np.testing.assert_array_equal(_compiled_differences(plant, Q0[c:c + 1], Q1[c:c + 1])[0], compiled[c])


def test_compiled_position_difference_is_the_velocity_of_a_curve(plant):
    """(q(t + h) ⊖ q(t - h)) / 2h -> N⁺(q) q̇ along q(t) = normalized(q0 + t q̇0) (the quaternion's curve on the
    sphere); for a floating base's constant angular velocity (q(t) = exp(t ω) ⊗ q0) every step gives ω exactly."""
    rng = np.random.default_rng(16)
    q0 = random_configuration(plant, rng)
    qdot = rng.normal(size=plant.num_positions())

    def curve(t):
        q = q0 + t * qdot
        for joint in plant.floating_base_joints():
            quat = q[joint.position_start:joint.position_start + 4]
            quat /= np.linalg.norm(quat)
        return q

    h = 1e-5
    central = _compiled_differences(plant, curve(-h)[None], curve(h)[None])[0] / (2 * h)
    expected = plant.map_qdot_to_velocity(q0, (curve(1e-7) - curve(-1e-7)) / 2e-7)
    np.testing.assert_allclose(central, expected, atol=1e-6)
    v = rng.normal(size=plant.num_velocities())
    Q = plant.integrate_positions(np.repeat(q0[None], 4, axis=0), np.arange(4)[:, None] * 0.01 * v)
    np.testing.assert_allclose(_compiled_differences(plant, Q[:-1], Q[1:]) / 0.01, np.repeat(v[None], 3, 0),
                               atol=1e-10)


def test_batches_keep_leading_axes(plant):
    rng = np.random.default_rng(6)
    q = np.stack([[random_configuration(plant, rng) for _ in range(3)] for _ in range(2)])
    poses = plant.calc_body_poses(q)
    assert poses.shape == (2, 3, plant.num_bodies(), 4, 4)
    body = plant.get_body(plant.num_bodies() - 1)
    J = plant.calc_jacobian(q, body)
    assert J.shape == (2, 3, 6, plant.num_velocities())
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(poses[a, b], plant.calc_body_poses(q[a, b]), atol=0)
            np.testing.assert_allclose(J[a, b], plant.calc_jacobian(q[a, b], body), atol=0)
    assert plant.calc_n_matrix(q).shape == (2, 3, plant.num_positions(), plant.num_velocities())
    assert plant.integrate_positions(q, np.zeros(plant.num_velocities())).shape == q.shape


def test_spatial_velocity_is_pose_derivative_and_jacobian_times_v(plant):
    """Drake's EvalBodySpatialVelocityInWorld: [w_WB_W; v_WBo_W], against a central difference of the body pose
    along q(t) = integrate(q, t v) (the motion with generalized velocity v) and against calc_jacobian @ v."""
    rng = np.random.default_rng(7)
    q = random_configuration(plant, rng)
    v = rng.normal(size=plant.num_velocities())
    h = 1e-6
    X_plus = plant.calc_body_poses(plant.integrate_positions(q, h * v))
    X_minus = plant.calc_body_poses(plant.integrate_positions(q, -h * v))
    for body_index in _leaf_bodies(plant, 4, rng):
        body = plant.get_body(body_index)
        V = plant.calc_spatial_velocity(q, v, body)
        assert V.shape == (6,)
        w_fd = spatial.matrix_to_rotvec(X_plus[body_index, :3, :3] @ X_minus[body_index, :3, :3].T) / (2 * h)
        v_fd = (X_plus[body_index, :3, 3] - X_minus[body_index, :3, 3]) / (2 * h)
        np.testing.assert_allclose(V, np.concatenate([w_fd, v_fd]), rtol=0, atol=1e-6)
        np.testing.assert_allclose(V, plant.calc_jacobian(q, body) @ v, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(plant.calc_spatial_velocity(q, v, body.name), V)
    # batched: q and v broadcast over leading axes
    Q = np.stack([random_configuration(plant, rng) for _ in range(3)])
    body = plant.get_body(plant.num_bodies() - 1)
    V = plant.calc_spatial_velocity(Q, v, body)
    assert V.shape == (3, 6)
    for k in range(3):
        np.testing.assert_allclose(V[k], plant.calc_spatial_velocity(Q[k], v, body), atol=1e-14)
    with pytest.raises(ValueError, match=f"v: expected shape \\(..., {plant.num_velocities()}\\)"):
        plant.calc_spatial_velocity(q, np.zeros(plant.num_velocities() + 1), body)


def test_floating_quaternion_rule_of_the_kinematics():
    """SPEC 9.7, as core.state: a floating quaternion within QUAT_NORM_TOLERANCE of unit length is normalized; a
    zero, non-finite or farther one raises QuaternionError naming joint and batch index (not NaN poses)."""
    plant = build("anymal_floating")
    joint = plant.floating_base_joints()[0]
    qs = joint.position_start
    rng = np.random.default_rng(8)
    q = random_configuration(plant, rng)
    body = plant.get_body(plant.num_bodies() - 1)
    near = q.copy()
    near[qs:qs + 4] *= 1.0 + 0.9 * spatial.QUAT_NORM_TOLERANCE
    np.testing.assert_allclose(plant.calc_body_poses(near), plant.calc_body_poses(q), rtol=0, atol=1e-14)
    np.testing.assert_allclose(plant.calc_jacobian(near, body), plant.calc_jacobian(q, body), rtol=0, atol=1e-14)
    bad_values = {"zero": [0.0, 0.0, 0.0, 0.0], "nan": [np.nan, 0.0, 0.0, 0.0], "long": [1.01, 0.0, 0.0, 0.0]}
    reasons = {"zero": "quaternion is zero", "nan": "non-finite", "long": "norm 1.01 is not within 0.001 of 1"}
    calls = [
        lambda q: plant.calc_body_poses(q),
        lambda q: plant.calc_frame_pose(q, body),
        lambda q: plant.calc_frame_poses(q, [body]),
        lambda q: plant.calc_jacobian(q, body),
        lambda q: plant.calc_angular_jacobian(q, body),
        lambda q: plant.calc_spatial_velocity(q, np.zeros(plant.num_velocities()), body),
    ]
    for kind, quat in bad_values.items():
        batch = np.tile(q, (2, 3, 1))
        batch[1, 2, qs:qs + 4] = quat
        for call in calls:
            with np.errstate(all="raise"):  # no NumPy warning on the way: the check comes first
                with pytest.raises(spatial.QuaternionError, match=reasons[kind]) as info:
                    call(batch)
            assert repr(joint.name) in str(info.value) and "batch index (1, 2)" in str(info.value)
            assert isinstance(info.value, ValueError)


def test_reference_kinematics_and_joint_pose_apply_the_same_quaternion_rule():
    plant = build("anymal_floating")
    joint = plant.floating_base_joints()[0]
    state = plant.create_default_state()
    state.q[joint.position_start:joint.position_start + 4] = [1.0005, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(joint.get_pose(state), np.eye(4), atol=1e-15)
    state.q[joint.position_start:joint.position_start + 4] = 0.0
    with np.errstate(all="raise"), pytest.raises(spatial.QuaternionError, match=f"floating joint {joint.name!r}"):
        joint.get_pose(state)
    with np.errstate(all="raise"), pytest.raises(spatial.QuaternionError, match="quaternion is zero"):
        reference_body_poses(plant, state.q)
