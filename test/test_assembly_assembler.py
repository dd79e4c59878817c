"""Tests of the Assembler (SPEC 3.6): configuration recovered from synthetic IMU observations (Panda, Talos with a
floating base), convergence rate, tracking, locks, bounds, hard errors, revert-on-worse, failures, statistics, and
the compiled back end against the reference back end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from imu_scenarios import imu_setup, observe
from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import (
    AssembleFailed,
    Assembler,
    AssemblyIndexError,
    AssemblyValueError,
    Markers,
    OrientationSensors,
    TrackFailed,
)
from ros_dofkit.core.dof_mask import DofMask
from ros_dofkit.core.multibody import MultibodyPlant

PANDA_LINKS = ["panda_link3", "panda_link5", "panda_link7", "panda_hand"]
PANDA_MID = np.array([0.0, -0.8, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02])  # away from the q2 = 0 singularity
TALOS_LINKS = [
    "base_link", "torso_2_link", "head_2_link",
    "arm_left_2_link", "arm_left_4_link", "arm_left_5_link", "arm_left_7_link",
    "arm_right_2_link", "arm_right_4_link", "arm_right_5_link", "arm_right_7_link",
    "leg_left_1_link", "leg_left_3_link", "leg_left_4_link", "leg_left_6_link",
    "leg_right_1_link", "leg_right_3_link", "leg_right_4_link", "leg_right_6_link",
]


@pytest.fixture(scope="module")
def panda():
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path("panda")))
    plant.finalize()
    return plant


@pytest.fixture(scope="module")
def talos():
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path("talos")), base_joint="floating")
    plant.finalize()
    return plant


def random_panda_q(rng, scale=0.6):
    q = PANDA_MID.copy()
    q[:7] += rng.uniform(-scale, scale, 7)
    return q


def configuration_error(plant, q, q_true):
    """Largest |dv| between two configurations (so q and -q quaternions compare equal)."""
    return float(np.max(np.abs(plant.position_difference(q_true, q))))


# -- setup validation ---------------------------------------------------------------------------------------------
def test_accuracy_and_tolerance_rules(panda):
    assembler = Assembler(panda)
    assert assembler.get_accuracy_in_use() == 1e-3
    assert assembler.get_error_tolerance_in_use() == 1e-4
    for bad in (-0.1, 1.0, 2.0, math.nan):
        with pytest.raises(ValueError, match="0 <= accuracy < 1"):
            assembler.set_accuracy(bad)
    assembler.set_accuracy(1e-5)
    assert assembler.get_accuracy_in_use() == 1e-5
    assert assembler.get_error_tolerance_in_use() == pytest.approx(1e-6)
    assembler.set_error_tolerance(1e-9)
    assert assembler.get_error_tolerance_in_use() == 1e-9
    assembler.set_accuracy(0.0)
    assert assembler.get_accuracy_in_use() == 1e-3
    assembler.set_error_tolerance(0.0)
    assert assembler.get_error_tolerance_in_use() == 1e-4
    for bad in (-1e-3, math.nan, math.inf):
        with pytest.raises(ValueError, match="tolerance"):
            assembler.set_error_tolerance(bad)
    with pytest.raises(ValueError, match="max_iterations"):
        assembler.set_max_iterations(0)


def test_condition_weight_rules(panda):
    assembler = Assembler(panda)
    osensors = OrientationSensors()
    for bad in (-1.0, math.nan, None, "1"):
        with pytest.raises(ValueError, match="weight"):
            assembler.adopt_assembly_goal(osensors, bad)
    with pytest.raises(TypeError, match="OrientationSensors or Markers"):
        assembler.adopt_assembly_goal(object())
    index = assembler.adopt_assembly_goal(osensors, 0.0)
    assert assembler.get_assembly_condition_weight(index) == 0.0
    with pytest.raises(ValueError, match="already adopted"):
        assembler.adopt_assembly_goal(osensors)
    markers = Markers()
    assembler.adopt_assembly_error(markers)
    assert math.isinf(assembler.get_assembly_condition_weight(markers))
    with pytest.raises(AssemblyIndexError):
        assembler.get_assembly_condition_weight(5)
    with pytest.raises(ValueError, match="weight"):
        assembler.set_assembly_condition_weight(markers, -2.0)


def test_zero_weight_condition_is_ignored(panda):
    rng = np.random.default_rng(1)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    osensors.move_all_observations(observe(panda, osensors, random_panda_q(rng)))
    assert assembler.calc_current_goal() > 0.1
    assembler.set_assembly_condition_weight(osensors, 0.0)
    assert assembler.calc_current_goal() == 0.0
    assert assembler.assemble() == 0.0
    np.testing.assert_array_equal(assembler.get_positions(), panda.default_positions())


def test_set_positions_validates_and_normalizes_quaternions(panda, talos):
    assembler = Assembler(panda)
    with pytest.raises(ValueError, match=r"shape \(8,\)"):
        assembler.set_positions(np.zeros(7))
    with pytest.raises(ValueError, match="non-finite"):
        assembler.set_positions(np.full(8, np.nan))
    assembler = Assembler(talos)
    q = talos.default_positions().copy()
    q[:4] = [1.0005, 0.0, 0.0, 0.0]
    assembler.set_positions(q)
    np.testing.assert_allclose(assembler.get_positions()[:4], [1, 0, 0, 0], atol=1e-15)
    q[:4] = 0.0
    with pytest.raises(ValueError):
        assembler.set_positions(q)


# -- recovery from exact observations ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_assemble_recovers_random_panda_configurations(panda, backend):
    rng = np.random.default_rng(2)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng, backend)
    assembler.lock_positions([7])  # the finger moves no IMU
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    for _ in range(5 if backend == "compiled" else 2):
        q_true = random_panda_q(rng)
        osensors.move_all_observations(observe(panda, osensors, q_true))
        assembler.set_positions(PANDA_MID)
        goal = assembler.assemble()
        assert goal < 1e-20
        assert configuration_error(panda, assembler.get_positions(), q_true) < 1e-8
        assert max(osensors.find_current_osensor_error(i) for i in range(4)) < 1e-9


def test_assemble_from_default_pose_to_a_pose_one_radian_away(panda):
    rng = np.random.default_rng(3)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    recovered = 0
    for _ in range(5):
        direction = rng.normal(size=7)
        q_true = PANDA_MID.copy()
        q_true[:7] += 1.0 * direction / np.linalg.norm(direction)
        osensors.move_all_observations(observe(panda, osensors, q_true))
        assembler.set_positions(PANDA_MID)
        assembler.assemble()
        recovered += configuration_error(panda, assembler.get_positions(), q_true) < 1e-6
    assert recovered == 5


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_assemble_recovers_floating_base_humanoid(talos, backend):
    rng = np.random.default_rng(4)
    osensors, assembler = imu_setup(talos, TALOS_LINKS, rng, backend)
    markers = Markers("feet")
    markers.add_marker("base", "base_link", [0.0, 0.0, 0.0])
    assembler.adopt_assembly_goal(markers)  # orientations alone cannot see the base translation
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    q_true = talos.integrate_positions(talos.default_positions(), rng.uniform(-0.5, 0.5, talos.num_velocities()))
    osensors.move_all_observations(observe(talos, osensors, q_true))
    markers.move_all_observations(talos.calc_body_poses(q_true)[talos.get_body_by_name("base_link").index, :3, 3][None])
    assembler.assemble()
    q = assembler.get_positions()
    assert abs(np.linalg.norm(q[:4]) - 1.0) < 1e-14
    # every dof that moves an IMU is recovered (the gripper/finger-less Talos has IMUs on every chain up to the
    # links listed, so compare only the coordinates the observations determine: base + the observed chains)
    observable = set(range(6))
    for link in TALOS_LINKS[1:]:
        J = talos.calc_angular_jacobian(q_true, talos.get_body_by_name(link))
        observable.update(np.flatnonzero(np.any(np.abs(J) > 1e-12, axis=0)).tolist())
    dv = talos.position_difference(q_true, q)
    assert np.max(np.abs(dv[sorted(observable)])) < 1e-8


def test_quadratic_convergence_on_a_zero_residual_problem(panda):
    rng = np.random.default_rng(5)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-15)
    assembler.set_error_tolerance(1e-300)
    q_true = random_panda_q(rng, 0.4)
    osensors.move_all_observations(observe(panda, osensors, q_true))
    start = q_true.copy()
    start[:7] += rng.uniform(-0.15, 0.15, 7)
    errors = []
    for iterations in range(1, 6):
        assembler.set_max_iterations(iterations)
        assembler.set_positions(start)
        assembler.assemble()
        errors.append(configuration_error(panda, assembler.get_positions(), q_true))
    errors = np.array(errors)
    significant = errors[errors > 1e-13]
    assert len(significant) >= 3
    # e_{k+1} <= C e_k² with a moderate C, and the rate is superlinear
    ratios = significant[1:] / significant[:-1] ** 2
    assert np.all(ratios < 10.0), (errors, ratios)
    assert significant[-1] / significant[-2] < 1e-2


# -- tracking -------------------------------------------------------------------------------------------------------
def smooth_panda_trajectory(T=200, duration=2.0):
    t = np.linspace(0.0, duration, T)
    Q = np.tile(PANDA_MID, (T, 1))
    for j in range(7):
        Q[:, j] += 0.4 * np.sin(2 * np.pi * (0.3 + 0.07 * j) * t + j)
    return t, Q


def test_track_follows_a_smooth_trajectory_and_track_sequence_matches(panda):
    rng = np.random.default_rng(6)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-5)
    assembler.set_error_tolerance(1e-12)
    t, Q = smooth_panda_trajectory()
    R_GO = observe(panda, osensors, Q)
    assembler.set_positions(Q[0])
    osensors.move_all_observations(R_GO[0])
    assembler.assemble()
    tracked = np.empty_like(Q)
    assembler.reset_stats()
    for k in range(len(t)):
        osensors.move_all_observations(R_GO[k])
        assembler.track(t[k])
        tracked[k] = assembler.get_positions()
    assert assembler.get_time() == t[-1]
    assert np.max(np.abs(tracked - Q)) < 1e-8
    # warm start: a few iterations per frame, not a cold solve
    assert assembler.get_num_assembly_steps() <= 4 * len(t)
    # the compiled sequence loop gives the same frames
    assembler.set_positions(Q[0])
    Q_seq, info = assembler.track_sequence(t, R_GO, return_info=True)
    np.testing.assert_allclose(Q_seq, tracked, atol=1e-12)
    assert np.all(info["status"] == 0) and np.all(info["goal"] < 1e-18)
    np.testing.assert_array_equal(assembler.get_positions(), Q_seq[-1])
    np.testing.assert_array_equal(osensors.get_all_observations(), R_GO[-1])


def test_track_sequence_compiled_equals_reference_backend_with_noise_and_dropouts(panda):
    t, Q = smooth_panda_trajectory(T=40)
    results = []
    for backend in ("compiled", "reference"):
        rng = np.random.default_rng(7)
        osensors, assembler = imu_setup(panda, PANDA_LINKS, rng, backend, weights=[1.0, 2.0, 0.5, 1.0])
        assembler.lock_positions([7])
        assembler.set_accuracy(1e-7)
        R_GO = observe(panda, osensors, Q)
        noise = spatial.rotvec_to_matrix(rng.normal(scale=0.01, size=R_GO.shape[:-2] + (3,)))
        R_GO = noise @ R_GO
        R_GO[5:9, 1] = np.nan  # a sensor drops out for a few frames
        assembler.set_positions(Q[0])
        results.append(assembler.track_sequence(t, R_GO))
    # the two back ends take the same iterations up to rounding: equal to the accuracy asked for
    np.testing.assert_allclose(results[0], results[1], atol=1e-7)
    # with noisy data each frame's solution fits the observations at least as well as the truth does
    for k in range(len(t)):
        osensors.move_all_observations(R_GO[k])
        assert osensors.calc_goal(results[0][k]) <= osensors.calc_goal(Q[k]) + 1e-12


def test_track_sequence_checks_shapes_and_multiple_conditions(panda):
    rng = np.random.default_rng(8)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    with pytest.raises(ValueError, match=r"must have shape \(3, 4, 3, 3\)"):
        assembler.track_sequence([0, 1, 2], np.zeros((3, 3, 3, 3)))
    markers = Markers()
    markers.add_marker("hand", "panda_hand", [0, 0, 0.1])
    assembler.adopt_assembly_goal(markers)
    with pytest.raises(ValueError, match="dict"):
        assembler.track_sequence([0], np.zeros((1, 4, 3, 3)))
    t, Q = smooth_panda_trajectory(T=20)
    X = panda.calc_body_poses(Q)[:, panda.get_body_by_name("panda_hand").index]
    p_GO = (X[:, :3, :3] @ np.array([0, 0, 0.1]) + X[:, :3, 3])[:, None]
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    assembler.set_positions(Q[0])
    Q_seq = assembler.track_sequence(t, {osensors: observe(panda, osensors, Q), markers: p_GO})
    assert np.max(np.abs(Q_seq[:, :7] - Q[:, :7])) < 1e-8


# -- locks and bounds -------------------------------------------------------------------------------------------
def test_locks_by_index_joint_and_dof_mask(panda):
    rng = np.random.default_rng(9)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    q_true = random_panda_q(rng)
    osensors.move_all_observations(observe(panda, osensors, q_true))
    start = PANDA_MID.copy()
    assembler.lock_positions([1])
    assembler.lock_joint("panda_joint4")
    view = panda.articulated_view()
    assembler.lock_dof_mask(DofMask([False] * 5 + [True, False, True]), view)
    assert [assembler.is_locked(i) for i in range(8)] == [False, True, False, True, False, True, False, True]
    assembler.set_positions(start)
    assembler.assemble()
    q = assembler.get_positions()
    np.testing.assert_array_equal(q[[1, 3, 5, 7]], start[[1, 3, 5, 7]])
    assert np.any(np.abs(q[[0, 2, 4, 6]] - start[[0, 2, 4, 6]]) > 1e-3)
    assembler.unlock_joint(panda.get_joint_by_name("panda_joint4"))
    assembler.unlock_positions([1])
    assembler.unlock_dof_mask(DofMask([False] * 5 + [True, False, False]), view)
    assert [assembler.is_locked(i) for i in range(8)] == [False] * 7 + [True]
    with pytest.raises(ValueError, match="does not match"):
        assembler.lock_dof_mask(DofMask([True, False]), view)
    with pytest.raises(IndexError):
        assembler.lock_positions([8])
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    assembler.assemble()
    assert configuration_error(panda, assembler.get_positions(), q_true) < 1e-8


def test_floating_base_translation_lock_as_opensense_does(talos):
    rng = np.random.default_rng(10)
    osensors, assembler = imu_setup(talos, TALOS_LINKS, rng)
    base = talos.floating_base_joints()[0]
    translation = list(range(base.position_start + 4, base.position_start + 7))
    assembler.lock_positions(translation)
    assert all(assembler.is_locked(i) for i in translation)
    assert not any(assembler.is_locked(i) for i in range(base.position_start, base.position_start + 4))
    q_true = talos.integrate_positions(talos.default_positions(), rng.uniform(-0.4, 0.4, talos.num_velocities()))
    osensors.move_all_observations(observe(talos, osensors, q_true))
    start = talos.default_positions().copy()
    start[translation] = [0.1, -0.2, 1.0]
    assembler.set_positions(start)
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    assembler.assemble()
    q = assembler.get_positions()
    np.testing.assert_array_equal(q[translation], [0.1, -0.2, 1.0])
    # orientations do not depend on the base translation, so every IMU matches exactly anyway
    assert max(osensors.find_current_osensor_error(i) for i in range(len(TALOS_LINKS))) < 1e-9
    # a quaternion component locks the whole base rotation
    assembler.lock_positions([base.position_start + 2])
    assert all(assembler.is_locked(i) for i in range(base.position_start, base.position_start + 4))


def test_bounds_are_respected_at_the_solution(panda):
    rng = np.random.default_rng(11)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    assembler.lock_positions([7])
    q_true = PANDA_MID.copy()
    q_true[0] = 0.5
    q_true[2] = -0.4
    osensors.move_all_observations(observe(panda, osensors, q_true))
    assembler.restrict_q(0, -1.0, 0.3)   # the truth is outside: the solution must sit on the bound
    assembler.restrict_q(2, -0.2, 0.2)
    assert assembler.get_q_bounds(0) == (-1.0, 0.3)
    assembler.set_accuracy(1e-8)
    assembler.assemble()
    q = assembler.get_positions()
    assert q[0] == pytest.approx(0.3, abs=1e-15) and q[0] <= 0.3
    assert -0.2 <= q[2] <= 0.2
    # first-order optimality (KKT): zero gradient off the bounds; at a bound, a gradient pushing outward
    gradient = osensors.calc_goal_gradient(q, wrt="v")
    assert gradient[0] < -1e-3
    for i in range(7):
        at_lower = i == 2 and q[2] == -0.2
        at_upper = i == 0 or (i == 2 and q[2] == 0.2)
        if at_upper:
            assert gradient[i] <= 0
        elif at_lower:
            assert gradient[i] >= 0
        else:
            assert abs(gradient[i]) < 1e-6, (i, gradient)
    # same from the other side, starting outside the bounds (the start is projected)
    start = PANDA_MID.copy()
    start[0] = 2.0
    assembler.set_positions(start)
    assembler.assemble()
    assert assembler.get_positions()[0] == pytest.approx(0.3, abs=1e-15)
    # bounds rules
    with pytest.raises(ValueError, match="lo <= hi"):
        assembler.restrict_q(1, 0.5, 0.4)
    with pytest.raises(ValueError, match="lo <= hi"):
        assembler.restrict_q(1, math.nan, 0.4)
    assembler.unrestrict_q(0)
    assert assembler.get_q_bounds(0) == (-math.inf, math.inf)
    # a bound on a locked q is ignored
    assembler.lock_positions([2])
    start = PANDA_MID.copy()
    start[2] = 1.0
    assembler.set_positions(start)
    assembler.assemble()
    assert assembler.get_positions()[2] == 1.0


def test_quaternion_components_cannot_be_bounded_and_joint_limits(talos, panda):
    assembler = Assembler(talos)
    with pytest.raises(ValueError, match="quaternion component"):
        assembler.restrict_q(1, -0.5, 0.5)
    assembler.use_joint_limits()
    lower, upper = talos.position_lower_limits(), talos.position_upper_limits()
    for i in range(7, talos.num_positions()):
        if np.isfinite(lower[i]):
            assert assembler.get_q_bounds(i) == (lower[i], upper[i])
    # joint limits hold at the solution when the observations ask for more
    rng = np.random.default_rng(12)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    assembler.use_joint_limits()
    q_true = PANDA_MID.copy()
    q_true[5] = 4.2  # beyond joint 6's upper limit 3.7525
    osensors.move_all_observations(observe(panda, osensors, q_true))
    assembler.assemble()
    q = assembler.get_positions()
    assert np.all(q >= panda.position_lower_limits()) and np.all(q <= panda.position_upper_limits())
    assert q[5] == pytest.approx(panda.position_upper_limits()[5], abs=1e-12)


# -- hard errors, revert, failures ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_hard_orientation_errors_converge_to_zero(panda, backend):
    rng = np.random.default_rng(13)
    osensors = OrientationSensors()
    for link in PANDA_LINKS:
        osensors.add_osensor(link, link, spatial.rotvec_to_matrix(rng.normal(size=3)))
    assembler = Assembler(panda, backend=backend)
    assembler.adopt_assembly_error(osensors)
    assembler.lock_positions([7])
    assembler.set_error_tolerance(1e-11)
    q_true = random_panda_q(rng)
    osensors.move_all_observations(observe(panda, osensors, q_true))
    assembler.set_positions(PANDA_MID)
    assembler.assemble()
    assert assembler.calc_current_error_norm() <= 1e-11
    assert assembler.calc_current_goal() == 0.0  # no goals adopted
    assert configuration_error(panda, assembler.get_positions(), q_true) < 1e-9


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_goal_minimized_on_the_hard_error_manifold(panda, backend):
    """IMU goals with noise + one marker as a hard error: the error vanishes and the goal's gradient is orthogonal
    to the constraint manifold (first-order optimality)."""
    rng = np.random.default_rng(14)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng, backend)
    markers = Markers()
    markers.add_marker("tcp", "panda_hand", [0.0, 0.0, 0.1])
    assembler.adopt_assembly_error(markers)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-8)
    assembler.set_error_tolerance(1e-10)
    q_true = random_panda_q(rng)
    R_GO = spatial.rotvec_to_matrix(rng.normal(scale=0.05, size=(4, 3))) @ observe(panda, osensors, q_true)
    osensors.move_all_observations(R_GO)
    X = panda.calc_body_poses(q_true)[panda.get_body_by_name("panda_hand").index]
    markers.move_all_observations((X[:3, :3] @ [0.0, 0.0, 0.1] + X[:3, 3])[None])
    assembler.set_positions(PANDA_MID)
    assembler.assemble()
    q = assembler.get_positions()
    assert assembler.calc_current_error_norm() <= 1e-10
    gradient = osensors.calc_goal_gradient(q, wrt="v")[:7]
    C = markers.calc_error_jacobian(q)[:, :7]
    _, _, Vt = np.linalg.svd(C)
    null_space = Vt[3:].T
    assert np.max(np.abs(null_space.T @ gradient)) < 1e-7
    assert np.max(np.abs(gradient)) > 1e-4  # the constraint is active: the plain gradient is not zero


TWO_LINK_URDF = """<robot name="two_link">
  <link name="base"/><link name="link1"/><link name="link2"/>
  <joint name="j1" type="continuous"><parent link="base"/><child link="link1"/><axis xyz="0 0 1"/></joint>
  <joint name="j2" type="continuous"><parent link="link1"/><child link="link2"/><origin xyz="1 0 0"/>
    <axis xyz="0 0 1"/></joint>
</robot>"""


@pytest.fixture
def two_link():
    plant = MultibodyPlant()
    plant.add_urdf(TWO_LINK_URDF)
    plant.finalize()
    return plant


def conflicting_problem(plant, backend):
    """j1 only: a hard marker wants q1 = +δc, a goal IMU wants q1 = -δg; the start q1 = 0 is feasible."""
    tolerance = 1e-4
    delta_c, delta_g = 0.5 * tolerance, 0.01
    markers = Markers()
    markers.add_marker("tip", "link1", [1.0, 0.0, 0.0])
    osensors = OrientationSensors()
    osensors.add_osensor("imu", "link1", np.eye(3))
    assembler = Assembler(plant, backend=backend)
    assembler.adopt_assembly_error(markers)
    assembler.adopt_assembly_goal(osensors)
    assembler.lock_joint("j2")
    assembler.set_error_tolerance(tolerance)
    markers.move_all_observations(np.array([[math.cos(delta_c), math.sin(delta_c), 0.0]]))
    osensors.move_all_observations(spatial.rotation_z(-delta_g)[None])
    return assembler, delta_c, delta_g


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_assemble_reverts_when_a_feasible_start_got_worse_and_track_does_not(two_link, backend):
    assembler, delta_c, delta_g = conflicting_problem(two_link, backend)
    start_goal = assembler.calc_current_goal()
    assert start_goal == pytest.approx(delta_g**2 / 2)
    assert 0 < assembler.calc_current_error_norm() <= 1e-4
    assert assembler.assemble() == pytest.approx(start_goal)
    np.testing.assert_array_equal(assembler.get_positions(), [0.0, 0.0])
    goal = assembler.track(0.5)
    assert assembler.get_positions()[0] == pytest.approx(delta_c, abs=1e-9)
    assert goal == pytest.approx((delta_c + delta_g) ** 2 / 2, rel=1e-6)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_unreachable_hard_errors_raise_assemble_failed_and_track_failed(two_link, backend):
    markers = Markers()
    markers.add_marker("tip", "link2", [1.0, 0.0, 0.0])
    assembler = Assembler(two_link, backend=backend)
    assembler.adopt_assembly_error(markers)
    markers.move_all_observations(np.array([[5.0, 0.0, 0.0]]))  # the arm reaches 2 m
    with pytest.raises(AssembleFailed, match=r"achieved error norm .* required tolerance is 0.0001"):
        assembler.assemble()
    with pytest.raises(TrackFailed, match="tolerance"):
        assembler.track(1.0)
    frames = np.array([[[1.5, 0.5, 0.0]], [[5.0, 0.0, 0.0]], [[1.0, 1.0, 0.0]]])
    assembler.set_positions([0.0, 0.3])
    with pytest.raises(TrackFailed, match="frame 1"):
        assembler.track_sequence([0.0, 0.1, 0.2], frames)


def test_markers_and_osensors_on_the_same_body_recover_the_configuration(panda):
    rng = np.random.default_rng(15)
    osensors, assembler = imu_setup(panda, PANDA_LINKS[:2], rng)
    markers = Markers()
    for link in ["panda_link5", "panda_hand"]:  # panda_link5 also carries an IMU
        markers.add_marker(link, link, rng.normal(scale=0.1, size=3), weight=4.0)
    assembler.adopt_assembly_goal(markers, 10.0)
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-7)
    assembler.set_error_tolerance(1e-12)
    q_true = random_panda_q(rng)
    osensors.move_all_observations(observe(panda, osensors, q_true))
    X = panda.calc_body_poses(q_true)
    markers.move_all_observations(np.array([
        X[markers.get_marker_body(i), :3, :3] @ markers.get_marker_station(i) + X[markers.get_marker_body(i), :3, 3]
        for i in range(2)
    ]))
    assembler.set_positions(PANDA_MID)
    assembler.assemble()
    assert configuration_error(panda, assembler.get_positions(), q_true) < 1e-8
    assert markers.find_current_marker_error(1) < 1e-9


def test_statistics(panda):
    rng = np.random.default_rng(16)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng)
    osensors.move_all_observations(observe(panda, osensors, random_panda_q(rng)))
    assert assembler.get_num_initializations() == 0
    assembler.assemble()
    assert assembler.get_num_initializations() == 1
    steps = assembler.get_num_assembly_steps()
    assert steps > 0
    assert assembler.get_num_goal_evals() > steps
    assert assembler.get_num_goal_gradient_evals() >= steps
    assert assembler.get_num_error_evals() == assembler.get_num_goal_evals()
    assert assembler.get_num_error_jacobian_evals() == assembler.get_num_goal_gradient_evals()
    assembler.reset_stats()
    assert assembler.get_num_assembly_steps() == 0 and assembler.get_num_goal_evals() == 0
    assert assembler.get_num_initializations() == 1
    assembler.lock_positions([7])
    assembler.track()
    assert assembler.get_num_initializations() == 2


CHANGES = {
    "max_iterations": lambda assembler, osensors: assembler.set_max_iterations(1),
    "accuracy": lambda assembler, osensors: assembler.set_accuracy(1e-9),
    "tolerance": lambda assembler, osensors: assembler.set_error_tolerance(1.0),  # the start short-circuits
    "weight": lambda assembler, osensors: osensors.change_osensor_weight(1, 30.0),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_settings_and_weights_changed_between_frames_take_effect(panda, change):
    """The compiled per-frame state is built once and kept from frame to frame: a setting or a sensor weight
    changed after it was built must be what the next solve uses, as on an Assembler set up with it from the start
    (bit for bit), and must change the result."""
    q_true = random_panda_q(np.random.default_rng(17))
    tilt = spatial.rotvec_to_matrix([0.0, 0.0, 0.1])  # a goal > 0 at the solution: weights matter
    results = []
    for when in ("late", "early", "never"):
        osensors, assembler = imu_setup(panda, PANDA_LINKS, np.random.default_rng(18))
        assembler.lock_positions([7])
        osensors.move_all_observations(observe(panda, osensors, q_true))
        if when == "late":
            assembler.set_positions(PANDA_MID)
            assembler.track()  # builds the compiled state before the change
        if when != "never":
            CHANGES[change](assembler, osensors)
        R_GO = observe(panda, osensors, q_true)
        R_GO[0] = tilt @ R_GO[0]
        osensors.move_all_observations(R_GO)
        assembler.set_positions(PANDA_MID)
        assembler.reset_stats()
        goal = assembler.track()
        results.append((assembler.get_positions(), goal, assembler.get_num_assembly_steps()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1:] == results[1][1:]
    assert not np.array_equal(results[0][0], results[2][0])


def test_assembler_requires_a_finalized_plant():
    plant = MultibodyPlant()
    with pytest.raises(RuntimeError, match="finalized"):
        Assembler(plant)
    with pytest.raises(AssemblyValueError, match="backend"):
        plant.add_urdf(TWO_LINK_URDF)
        plant.finalize()
        Assembler(plant, backend="fast")


def test_dof_mask_over_the_articulated_view_of_a_floating_robot(talos):
    """Lock every articulated joint with one mask (Drake's make_from_model over the articulated view): only the
    floating base stays free, and its orientation is recovered from the IMUs."""
    rng = np.random.default_rng(17)
    osensors, assembler = imu_setup(talos, TALOS_LINKS, rng)
    view = talos.articulated_view()
    mask = DofMask.make_from_model(view, talos.get_model_instance_name(1))
    assert mask.size() == talos.num_positions() - 7 and mask.count() == mask.size()
    assembler.lock_dof_mask(mask, view)
    base = talos.floating_base_joints()[0]
    free = [i for i in range(talos.num_positions()) if not assembler.is_locked(i)]
    assert free == list(range(base.position_start, base.position_start + 7))
    q_true = talos.default_positions().copy()
    q_true[:4] = spatial.rotvec_to_quat(np.array([0.3, -0.2, 1.1]))
    osensors.move_all_observations(observe(talos, osensors, q_true))
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    assembler.assemble()
    assert configuration_error(talos, assembler.get_positions(), q_true) < 1e-9
    # unlocking the mask frees the joints again
    assembler.unlock_dof_mask(mask, view)
    assert not any(assembler.is_locked(i) for i in range(talos.num_positions()))


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_track_sequence_with_per_frame_locked_positions(panda, backend):
    """Encoders measure joints 4 and 5 (locked, values per frame); the IMUs estimate the others."""
    rng = np.random.default_rng(18)
    osensors, assembler = imu_setup(panda, PANDA_LINKS, rng, backend)
    assembler.lock_positions([3, 4, 7])
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    t, Q = smooth_panda_trajectory(T=50)
    encoders = np.full_like(Q, np.nan)
    encoders[:, [3, 4]] = Q[:, [3, 4]]
    encoders[20, 3] = np.nan  # a dropped encoder reading keeps the previous value
    assembler.set_positions(Q[0])
    Q_seq = assembler.track_sequence(t, observe(panda, osensors, Q), positions=encoders)
    np.testing.assert_array_equal(Q_seq[:, 4], Q[:, 4])
    assert Q_seq[20, 3] == Q[19, 3]
    frames = np.arange(len(t)) != 20
    assert np.max(np.abs(Q_seq[frames][:, :7] - Q[frames][:, :7])) < 1e-8
    with pytest.raises(ValueError, match=r"positions must have shape \(50, 8\)"):
        assembler.track_sequence(t, observe(panda, osensors, Q), positions=encoders[:, :7])


def test_planar_mobile_base_with_imus_and_a_marker():
    """A Panda on a planar base (x, y, θ): IMUs give θ and the arm, one marker on the base gives x, y."""
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path("panda")), base_joint="planar")
    plant.finalize()
    rng = np.random.default_rng(19)
    osensors, assembler = imu_setup(plant, ["panda_link0"] + PANDA_LINKS, rng)
    markers = Markers()
    markers.add_marker("base", "panda_link0", [0.2, 0.0, 0.0])
    assembler.adopt_assembly_goal(markers)
    assembler.lock_positions([plant.num_positions() - 1])  # the finger
    assembler.set_accuracy(1e-7)
    assembler.set_error_tolerance(1e-12)
    start = np.concatenate([[0.0, 0.0, 0.0], PANDA_MID])
    q_true = start.copy()
    q_true[:3] = [1.5, -0.7, 2.0]
    q_true[3:10] += rng.uniform(-0.4, 0.4, 7)
    osensors.move_all_observations(observe(plant, osensors, q_true))
    X = plant.calc_body_poses(q_true)[plant.get_body_by_name("panda_link0").index]
    markers.move_all_observations((X[:3, :3] @ [0.2, 0.0, 0.0] + X[:3, 3])[None])
    assembler.set_positions(start)
    assembler.assemble()
    assert configuration_error(plant, assembler.get_positions(), q_true) < 1e-8


# -- per-frame observation weights (an IMU's covariance, issue 13) ----------------------------------------------
ONE_BODY_URDF = """<robot name="one_body"><link name="body"/></robot>"""


def two_sensor_body(backend):
    """A free-floating body with two orientation sensors (R_BS = I) whose observations disagree by 0.8 rad."""
    plant = MultibodyPlant()
    plant.add_urdf(ONE_BODY_URDF, base_joint="floating")
    plant.finalize()
    osensors = OrientationSensors()
    osensors.add_osensor("a", "body", np.eye(3), weight=2.0)
    osensors.add_osensor("b", "body", np.eye(3), weight=1.0)
    assembler = Assembler(plant, backend=backend)
    assembler.adopt_assembly_goal(osensors)
    assembler.lock_positions([4, 5, 6])
    assembler.set_accuracy(1e-9)
    R_a = spatial.rotvec_to_matrix([0.1, -0.2, 0.3])
    R_b = R_a @ spatial.rotvec_to_matrix([0.5, 0.4, -0.45])
    osensors.move_all_observations(np.stack([R_a, R_b]))
    return plant, osensors, assembler, R_a, R_b


def weighted_mean_rotation(R_a, R_b, w_a, w_b):
    """The minimizer of w_a |log(R_aᵀ R)|² + w_b |log(R_bᵀ R)|²: the point of the geodesic from R_a to R_b at the
    fraction w_b / (w_a + w_b) (on a geodesic the two distances are t θ and (1 - t) θ)."""
    return R_a @ spatial.rotvec_to_matrix(w_b / (w_a + w_b) * spatial.matrix_to_rotvec(R_a.T @ R_b))


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_observation_weights_give_the_weighted_mean_rotation(backend):
    plant, osensors, assembler, R_a, R_b = two_sensor_body(backend)
    for factors in ([1.0, 1.0], [1.0, 0.01], [0.01, 1.0], [3.0, 7.0]):
        assembler.set_observation_weights(factors)
        np.testing.assert_array_equal(assembler.get_observation_weights(), factors)
        assembler.set_positions(plant.default_positions())
        assembler.assemble()
        R = plant.calc_body_poses(assembler.get_positions())[1][:3, :3]
        expected = weighted_mean_rotation(R_a, R_b, 2.0 * factors[0], 1.0 * factors[1])
        assert np.degrees(np.linalg.norm(spatial.matrix_to_rotvec(expected.T @ R))) < 1e-5
    # 100x the covariance of b: b pulls 100x less (its share of the 0.8-rad disagreement falls 100x, near enough)
    assembler.set_observation_weights([1.0, 0.01])
    assembler.assemble()
    pulled = spatial.matrix_to_rotvec(R_a.T @ plant.calc_body_poses(assembler.get_positions())[1][:3, :3])
    share = np.linalg.norm(pulled) / np.linalg.norm(spatial.matrix_to_rotvec(R_a.T @ R_b))
    assert share == pytest.approx(0.01 / 2.01, rel=1e-6)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_track_sequence_observation_weights_equal_frame_by_frame_tracking(backend):
    """Per-frame factors through track_sequence are what set_observation_weights + track() give frame by frame,
    bit for bit, without a new compiled Tracker; without factors the result is that of factors 1."""
    plant, osensors, assembler, R_a, R_b = two_sensor_body(backend)
    rng = np.random.default_rng(5)
    T = 6
    factors = rng.uniform(0.01, 10.0, (T, 2))
    observations = np.repeat(np.stack([R_a, R_b])[None], T, axis=0)
    start = plant.default_positions()
    assembler.set_positions(start)
    Q = assembler.track_sequence(np.arange(T, dtype=float), observations, observation_weights=factors)
    np.testing.assert_array_equal(assembler.get_observation_weights(), factors[-1])
    frame_by_frame = []
    assembler.set_positions(start)
    for t in range(T):
        assembler.set_observation_weights(factors[t])
        assembler.track(float(t))
        frame_by_frame.append(assembler.get_positions())
    np.testing.assert_array_equal(Q, np.array(frame_by_frame))
    for t in range(T):
        R = plant.calc_body_poses(Q[t])[1][:3, :3]
        expected = weighted_mean_rotation(R_a, R_b, 2.0 * factors[t, 0], factors[t, 1])
        assert np.degrees(np.linalg.norm(spatial.matrix_to_rotvec(expected.T @ R))) < 1e-5
    for bad in ([1.0, 0.0], [1.0, np.nan], [1.0, -2.0], [1.0, np.inf]):
        with pytest.raises(AssemblyValueError, match="finite and > 0"):
            assembler.set_observation_weights(bad)
    with pytest.raises(AssemblyValueError, match=r"shape \(2,\)"):
        assembler.set_observation_weights([1.0])
    with pytest.raises(AssemblyValueError, match=r"shape \(3, 2\)"):
        assembler.track_sequence(np.arange(3.0), observations[:3], observation_weights=np.ones((2, 2)))


def test_observation_weights_of_one_leave_the_solve_bit_for_bit(panda):
    """Factors of 1 (the default) change nothing: the same bits as an Assembler that never heard of them."""
    q_true = random_panda_q(np.random.default_rng(3))
    results = []
    for weighted in (False, True):
        osensors, assembler = imu_setup(panda, PANDA_LINKS, np.random.default_rng(4))
        assembler.lock_positions([7])
        R_GO = observe(panda, osensors, q_true)
        R_GO[0] = spatial.rotvec_to_matrix([0.0, 0.05, 0.1]) @ R_GO[0]
        frames = np.repeat(R_GO[None], 3, axis=0)
        assembler.set_positions(PANDA_MID)
        weights = np.ones((3, len(PANDA_LINKS))) if weighted else None
        results.append(assembler.track_sequence(np.arange(3.0), frames, observation_weights=weights))
    np.testing.assert_array_equal(results[0], results[1])


def test_frame_tracking_gives_track_sequences_frames_and_follows_re_initialization(talos):
    """kernels.track_frames over Assembler.frame_tracking()'s record, one frame at a time from the start
    set_positions leaves, gives track_sequence's solutions and poses bit for bit (a floating base); the record is
    reused until the Assembler re-initializes (a new lock: the locked coordinates in the new record); the reference
    backend has none."""
    from ros_dofkit.core.assembly import AssemblyStateError, kernels

    rng = np.random.default_rng(11)
    osensors, assembler = imu_setup(talos, TALOS_LINKS, rng)
    q0 = talos.default_positions()
    q0[7:] = rng.uniform(-0.2, 0.2, talos.num_positions() - 7)  # q = (quaternion, translation, joints)
    Q_true = np.tile(q0, (3, 1))
    Q_true[:, 7:] += 0.01 * np.arange(3)[:, None]
    R_GO = observe(talos, osensors, Q_true)
    assembler.lock_positions([4, 5, 6])  # the base's translation (after its quaternion), as the estimator holds it
    assembler.set_positions(q0)
    osensors.move_all_observations(R_GO[0])
    assembler.assemble()
    start = assembler.get_positions()
    Q_seq = assembler.track_sequence(np.arange(1.0, 3.0), R_GO[1:], positions=np.tile(start, (2, 1)),
                                     body_poses=(poses := np.empty((2, talos.num_bodies(), 4, 4))))
    frames = assembler.frame_tracking()
    assert frames is assembler.frame_tracking()
    np.testing.assert_array_equal(frames.held_q, [4, 5, 6])
    np.testing.assert_array_equal(frames.floating_q, [0])
    assert not frames.held_floating
    q = start.copy()
    for t in range(2):
        Q, X_WB = np.empty((1, len(q))), np.empty((1, talos.num_bodies(), 4, 4))
        failed = kernels.track_frames(frames.tracker, q, R_GO[1 + t][None], np.empty((1, 0, 3)),
                                      np.empty((0, R_GO.shape[1])), frames.held_q, start[None], Q, np.empty(1),
                                      np.empty(1), np.empty(1, np.int64), X_WB)
        assert failed == -1
        np.testing.assert_array_equal(Q[0], Q_seq[t])
        np.testing.assert_array_equal(X_WB[0], poses[t])
        q = Q[0].copy()
    assembler.lock_positions([0, 1, 2, 3])  # the base's rotation too: a new problem, a new record
    relocked = assembler.frame_tracking()
    assert relocked is not frames and relocked.held_floating
    np.testing.assert_array_equal(relocked.held_q, np.arange(7))
    _, reference = imu_setup(talos, TALOS_LINKS[:4], rng, backend="reference")
    with pytest.raises(AssemblyStateError, match="reference backend"):
        reference.frame_tracking()
