"""Analytic derivatives of the assembly conditions against central finite differences on real robots (the Panda arm
fixed and on a planar base, the Talos humanoid with a floating base), near and far (2-3 rad) from the solution,
and the compiled residuals and Jacobians against the readable reference to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import Assembler, Markers, OrientationSensors
from ros_dofkit.core.multibody import MultibodyPlant

PANDA_LINKS = ["panda_link2", "panda_link3", "panda_link5", "panda_link7", "panda_hand"]
TALOS_LINKS = ["base_link", "torso_2_link", "arm_left_4_link", "arm_right_7_link", "leg_left_4_link",
               "leg_right_6_link", "head_2_link"]


BASE_JOINTS = {"panda": "fixed", "talos": "floating", "panda_planar": "planar"}


def make_plant(robot):
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path(robot.removesuffix("_planar"))), base_joint=BASE_JOINTS[robot])
    plant.finalize()
    return plant


@pytest.fixture(scope="module", params=list(BASE_JOINTS))
def robot(request):
    plant = make_plant(request.param)
    links = TALOS_LINKS if request.param == "talos" else PANDA_LINKS
    return request.param, plant, links


def random_configuration(plant, rng, scale=0.8):
    q = plant.default_positions().copy()
    return plant.integrate_positions(q, rng.uniform(-scale, scale, plant.num_velocities()))


def sensors_with_observations(plant, links, q_obs, rng, error_angle=None):
    """OrientationSensors on ``links`` (random R_BS, weights) observed at q_obs, optionally rotated by error_angle."""
    osensors = OrientationSensors()
    markers = Markers()
    for link in links:
        osensors.add_osensor(f"imu_{link}", link, spatial.rotvec_to_matrix(rng.normal(size=3)), rng.uniform(0.5, 2))
        markers.add_marker(f"mk_{link}", link, rng.normal(scale=0.1, size=3), rng.uniform(0.5, 2))
    X_WB = plant.calc_body_poses(q_obs)
    R_GO = []
    p_GO = []
    for i, link in enumerate(links):
        b = plant.get_body_by_name(link).index
        R = X_WB[b, :3, :3] @ osensors.get_osensor_station(i)
        if error_angle is not None:
            axis = rng.normal(size=3)
            R = spatial.rotvec_to_matrix(error_angle * axis / np.linalg.norm(axis)) @ R
        R_GO.append(R)
        p_GO.append(X_WB[b, :3, :3] @ markers.get_marker_station(i) + X_WB[b, :3, 3] + rng.normal(scale=0.05, size=3))
    return osensors, markers, np.array(R_GO), np.array(p_GO)


def fd_wrt_v(plant, f, q, h=1e-6):
    """Central differences of f along each generalized velocity: d/dε f(q ⊕ ε e_k)."""
    columns = []
    for k in range(plant.num_velocities()):
        dv = np.zeros(plant.num_velocities())
        dv[k] = h
        plus = np.asarray(f(plant.integrate_positions(q, dv)))
        minus = np.asarray(f(plant.integrate_positions(q, -dv)))
        columns.append((plus - minus) / (2 * h))
    return np.stack(columns, axis=-1)


@pytest.mark.parametrize("error_angle", [None, 0.3, 2.5, 3.0])
def test_goal_gradient_and_error_jacobian_match_finite_differences(robot, error_angle):
    name, plant, links = robot
    rng = np.random.default_rng(10)
    q_obs = random_configuration(plant, rng)
    osensors, markers, R_GO, p_GO = sensors_with_observations(plant, links, q_obs, rng, error_angle)
    R_GO[1] = np.nan  # one unobserved sensor
    assembler = Assembler(plant)
    assembler.adopt_assembly_goal(osensors)
    assembler.adopt_assembly_goal(markers, 2.0)
    osensors.move_all_observations(R_GO)
    markers.move_all_observations(p_GO)
    for _ in range(2):
        q = random_configuration(plant, rng, 0.4) if error_angle is None else q_obs
        if error_angle is not None:
            # far from the solution: the per-sensor errors really are ~error_angle
            assembler.set_positions(q)
            errors = [osensors.find_current_osensor_error(i) for i in range(len(links)) if i != 1]
            assert min(errors) == pytest.approx(error_angle, abs=1e-9)
        for condition in (osensors, markers):
            gradient_v = condition.calc_goal_gradient(q, wrt="v")
            np.testing.assert_allclose(gradient_v, fd_wrt_v(plant, condition.calc_goal, q), atol=1e-7)
            jacobian = condition.calc_error_jacobian(q)
            np.testing.assert_allclose(jacobian, fd_wrt_v(plant, condition.calc_errors, q), atol=2e-7)
            # the goal gradient is the Jacobian-transpose of the errors, normalized (J_r⁻¹ᵀ φ = φ)
            errors = condition.calc_errors(q)
            _, _, _, weights, observations = condition.active_observations()
            observed = condition.is_observed(observations)
            np.testing.assert_allclose(jacobian.T @ errors / weights[observed].sum(), gradient_v, atol=1e-12)
            # w.r.t. q: dgoal/dq · N(q) = dgoal/dv, and central differences along random directions of q
            gradient_q = condition.calc_goal_gradient(q, wrt="q")
            np.testing.assert_allclose(gradient_q @ plant.calc_n_matrix(q), gradient_v, atol=1e-12)
            for _ in range(3):
                direction = rng.normal(size=plant.num_positions())
                h = 1e-6
                numeric = (condition.calc_goal(q + h * direction) - condition.calc_goal(q - h * direction)) / (2 * h)
                assert gradient_q @ direction == pytest.approx(numeric, abs=1e-7)


def test_simbody_torque_form_of_the_gradient(robot):
    """∂goal/∂v = Σ J_ω(B)ᵀ τ_B / Σw with τ_G = R_GS(−w a n̂_S) (SPEC 3.4), computed here independently."""
    name, plant, links = robot
    rng = np.random.default_rng(11)
    q_obs = random_configuration(plant, rng)
    osensors, _, R_GO, _ = sensors_with_observations(plant, links, q_obs, rng, 1.0)
    Assembler(plant).adopt_assembly_goal(osensors)
    osensors.move_all_observations(R_GO)
    q = random_configuration(plant, rng)
    X_WB = plant.calc_body_poses(q)
    gradient = np.zeros(plant.num_velocities())
    total = 0.0
    for i, link in enumerate(links):
        b = plant.get_body_by_name(link)
        R_GS = X_WB[b.index, :3, :3] @ osensors.get_osensor_station(i)
        R_SO = R_GS.T @ R_GO[i]
        # angle-axis from the quaternion as Simbody does
        quat = spatial.matrix_to_quat(R_SO)
        a = 2 * np.arctan2(np.linalg.norm(quat[1:]), quat[0])
        n_S = quat[1:] / np.linalg.norm(quat[1:])
        w = osensors.get_osensor_weight(i)
        tau_G = R_GS @ (-w * a * n_S)
        gradient += plant.calc_angular_jacobian(q, b).T @ tau_G
        total += w
    np.testing.assert_allclose(osensors.calc_goal_gradient(q, wrt="v"), gradient / total, atol=1e-12)


@pytest.mark.parametrize("hard", [False, True])
def test_compiled_residuals_equal_reference(robot, hard):
    name, plant, links = robot
    rng = np.random.default_rng(12)
    results = []
    for backend in ("compiled", "reference"):
        rng = np.random.default_rng(12)
        q_obs = random_configuration(plant, rng)
        osensors, markers, R_GO, p_GO = sensors_with_observations(plant, links, q_obs, rng, 0.7)
        R_GO[2] = np.nan
        p_GO[0, 1] = np.nan
        assembler = Assembler(plant, backend=backend)
        assembler.adopt_assembly_goal(osensors, 1.5)
        if hard:
            assembler.adopt_assembly_error(markers)
        else:
            assembler.adopt_assembly_goal(markers, 0.5)
        osensors.move_all_observations(R_GO)
        markers.move_all_observations(p_GO)
        q = random_configuration(plant, rng)
        results.append(assembler.calc_residuals(q))
        # the objective equals Σ W_c goal_c of the conditions' own goals
        r_g = results[-1][0]
        expected = 1.5 * osensors.calc_goal(q) + (0.0 if hard else 0.5 * markers.calc_goal(q))
        assert 0.5 * r_g @ r_g == pytest.approx(expected, rel=1e-12)
    for compiled, reference in zip(*results, strict=True):
        assert compiled.shape == reference.shape
        np.testing.assert_allclose(compiled, reference, atol=1e-12, rtol=0)
    assert results[0][2].shape == ((len(links) * 3,) if hard else (0,))


def test_compiled_forward_kinematics_and_jacobians_equal_plant(robot):
    from ros_dofkit.core.multibody import compiled

    name, plant, links = robot
    rng = np.random.default_rng(13)
    tree = plant.tree
    packed = tree.kernel_arguments()
    nb = plant.num_bodies()
    for _ in range(3):
        q = random_configuration(plant, rng, 1.5)
        X_WB = np.empty((nb, 4, 4))
        R_WF = np.empty((nb, 3, 3))
        p_WM = np.empty((nb, 3))
        compiled.forward_kinematics(packed, q, X_WB, R_WF, p_WM)
        np.testing.assert_allclose(X_WB, plant.calc_body_poses(q), atol=1e-12)
        J = np.empty((6, plant.num_velocities()))
        for b in range(1, nb):
            p_BQ = rng.normal(size=3)
            p_WQ = X_WB[b, :3, :3] @ p_BQ + X_WB[b, :3, 3]
            compiled.point_jacobian(packed, R_WF, p_WM, b, p_WQ, True, J)
            np.testing.assert_allclose(J, plant.calc_jacobian(q, plant.get_body(b), p_BQ), atol=1e-12)
        dv = rng.normal(size=plant.num_velocities())
        out = np.empty_like(q)
        compiled.integrate_positions(packed, q, dv, out)
        np.testing.assert_allclose(out, plant.integrate_positions(q, dv), atol=1e-12)
