"""The compiled solver's reused state gives what a fresh computation gives, bit for bit: incremental kinematics
(only bodies whose coordinates moved are recomputed, bodies no sensor depends on are skipped) against full forward
kinematics; the workspaces of track_sequence and of track()'s compiled Tracker, reused by every frame, against
fresh ones; and the body poses
track_sequence hands out against forward kinematics at each solution, warmed up beforehand or not."""

from __future__ import annotations

import numpy as np
import pytest

from imu_scenarios import imu_setup, observe
from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import AssemblyValueError, Markers, kernels
from ros_dofkit.core.multibody import MultibodyPlant, compiled

MODELS = {
    # Panda: revolute joints and a prismatic finger with a mimic twin; planar base; Talos: floating base, 30+ dofs
    "panda": ("panda", "fixed", ["panda_link3", "panda_link5", "panda_hand"]),
    "panda_planar": ("panda", "planar", ["panda_link0", "panda_link4", "panda_link7"]),
    "talos": ("talos", "floating", ["base_link", "arm_left_4_link", "leg_right_4_link"]),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    robot, base, links = MODELS[request.param]
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path(robot)), base_joint=base)
    plant.finalize()
    return request.param, plant, links


def tree_tuple(plant):
    tree = plant.tree
    return tree.kernel_arguments()


def random_q(plant, rng, scale=0.8):
    dv = rng.uniform(-scale, scale, plant.num_velocities())
    return plant.integrate_positions(plant.default_positions().copy(), dv)


def test_incremental_kinematics_equal_full_forward_kinematics_bit_for_bit(model):
    name, plant, links = model
    rng = np.random.default_rng(31)
    osensors, assembler = imu_setup(plant, links, rng, weights=rng.uniform(0.5, 2.0, len(links)))
    assembler.calc_residuals(need_jacobian=False)  # builds the kernels' arrays
    tree, sensors = tree_tuple(plant), assembler._sensors()
    work = kernels.make_work(tree, sensors)
    needed = work[8][0]
    on_a_path = {0}
    for link in links:
        body = plant.get_body_by_name(link).index
        while body > 0:
            on_a_path.add(body)
            body = int(plant.tree.parent[body])
    assert set(np.flatnonzero(needed)) | {0} == on_a_path
    if name != "panda_planar":
        assert not needed.all()  # some bodies are skipped by the solver's evaluations
    nb = plant.num_bodies()
    X_WB, R_WF, p_WM = np.empty((nb, 4, 4)), np.empty((nb, 3, 3)), np.empty((nb, 3))
    q = random_q(plant, rng)
    for step in range(40):
        kind = step % 5
        if kind == 0:
            q = random_q(plant, rng)
        elif kind in (1, 2):  # a few coordinates move, the rest stay: most bodies are reused
            q = plant.integrate_positions(q, np.where(rng.random(plant.num_velocities()) < 0.2,
                                                      rng.normal(scale=0.3, size=plant.num_velocities()), 0.0))
        elif kind == 3:
            pass  # the same q again: nothing to recompute
        every_body = bool(step % 2)
        kernels.update_kinematics(tree, q, work, every_body)
        compiled.forward_kinematics(tree, q, X_WB, R_WF, p_WM)
        bodies = np.arange(nb) if every_body else np.flatnonzero(needed | (np.arange(nb) == 0))
        np.testing.assert_array_equal(work[0][bodies], X_WB[bodies])
        np.testing.assert_array_equal(work[1][bodies], R_WF[bodies])
        np.testing.assert_array_equal(work[2][bodies], p_WM[bodies])
    # a NaN coordinate counts as moved, in and out
    q_nan = q.copy()
    q_nan[-1] = np.nan
    for q_next in (q_nan, q):
        kernels.update_kinematics(tree, q_next, work, True)
        compiled.forward_kinematics(tree, q_next, X_WB, R_WF, p_WM)
        np.testing.assert_array_equal(work[0], X_WB)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_track_sequence_body_poses_are_forward_kinematics_at_each_solution(model, backend):
    name, plant, links = model
    rng = np.random.default_rng(32)
    osensors, assembler = imu_setup(plant, links, rng, backend, weights=rng.uniform(0.5, 2.0, len(links)))
    assembler.set_accuracy(1e-6)
    T = 12
    Q_true = np.array([random_q(plant, rng, 0.3) for _ in range(T)])
    R_GO = observe(plant, osensors, Q_true)
    R_GO[4, 1] = np.nan  # a dropout: that sensor's rows are skipped this frame
    assembler.set_positions(Q_true[0])
    poses = np.full((T, plant.num_bodies(), 4, 4), np.nan)
    Q = assembler.track_sequence(np.arange(T) * 0.01, R_GO, body_poses=poses)
    tree = tree_tuple(plant)
    X_WB = np.empty((plant.num_bodies(), 4, 4))
    R_WF, p_WM = np.empty((plant.num_bodies(), 3, 3)), np.empty((plant.num_bodies(), 3))
    for t in range(T):
        compiled.forward_kinematics(tree, Q[t], X_WB, R_WF, p_WM)
        np.testing.assert_array_equal(poses[t], X_WB)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_warming_the_body_poses_kernel_changes_no_later_result(model, backend):
    """Assembler.warm_body_poses (precompile's warm-up of body_poses' kernel), run at another configuration, leaves
    the next track_sequence's solutions and poses bit for bit those of an Assembler never warmed."""
    _, plant, links = model
    runs = []
    for warm in (False, True):
        rng = np.random.default_rng(34)
        osensors, assembler = imu_setup(plant, links, rng, backend, weights=rng.uniform(0.5, 2.0, len(links)))
        Q_true = np.array([random_q(plant, rng, 0.3) for _ in range(6)])
        R_GO = observe(plant, osensors, Q_true)
        assembler.set_positions(random_q(plant, rng))
        if warm:
            assembler.warm_body_poses()
        assembler.set_positions(Q_true[0])
        poses = np.full((6, plant.num_bodies(), 4, 4), np.nan)
        runs.append((assembler.track_sequence(np.arange(6) * 0.01, R_GO, body_poses=poses), poses))
    for unwarmed, warmed in zip(*runs, strict=True):
        np.testing.assert_array_equal(warmed, unwarmed)


def test_track_sequence_checks_body_poses(model):
    _, plant, links = model
    rng = np.random.default_rng(33)
    osensors, assembler = imu_setup(plant, links, rng, weights=rng.uniform(0.5, 2.0, len(links)))
    q = random_q(plant, rng, 0.3)
    R_GO = observe(plant, osensors, np.array([q, q]))
    nb = plant.num_bodies()
    for bad in (np.empty((2, nb, 4, 4), dtype=np.float32), np.empty((3, nb, 4, 4)), np.empty((2, nb, 4, 4, 2))[..., 0],
                [[np.eye(4)] * nb] * 2):
        with pytest.raises(AssemblyValueError, match="body_poses"):
            assembler.track_sequence([0.0, 0.1], R_GO, body_poses=bad)


@pytest.mark.parametrize("hard_markers", [False, True])
def test_reused_workspaces_give_the_fresh_solve_bit_for_bit(model, hard_markers):
    """track_sequence (one set of workspaces for every frame, incremental kinematics), track() per frame (the
    Assembler's compiled Tracker, reused from frame to frame) and track() after uninitialize() at every frame (a
    fresh Tracker: fresh workspaces, full kinematics): the same iterates, so equal q, goals and statistics."""
    name, plant, links = model
    results = []
    for mode in ("sequence", "track", "fresh"):
        rng = np.random.default_rng(34)
        osensors, assembler = imu_setup(plant, links, rng, weights=rng.uniform(0.5, 2.0, len(links)))
        markers = Markers()
        markers.add_marker("tip", links[-1], [0.0, 0.0, 0.05])
        if hard_markers:
            assembler.adopt_assembly_error(markers)
        else:
            assembler.adopt_assembly_goal(markers, 0.5)
        assembler.set_accuracy(1e-6)
        T = 10
        Q_true = np.array([random_q(plant, rng, 0.3) for _ in range(T)])
        R_GO = observe(plant, osensors, Q_true)
        R_GO = spatial.rotvec_to_matrix(rng.normal(scale=0.01, size=R_GO.shape[:-2] + (3,))) @ R_GO  # noise
        R_GO[3:5, 0] = np.nan
        X = plant.calc_body_poses(Q_true)[:, plant.get_body_by_name(links[-1]).index]
        p_GO = (X[:, :3, :3] @ np.array([0.0, 0.0, 0.05]) + X[:, :3, 3])[:, None]
        assembler.set_positions(Q_true[0])
        assembler.reset_stats()
        if mode == "sequence":
            Q, info = assembler.track_sequence(np.arange(T) * 0.01, {osensors: R_GO, markers: p_GO}, return_info=True)
            goals = info["goal"]
        else:
            Q, goals = np.empty((T, plant.num_positions())), np.empty(T)
            for t in range(T):
                osensors.move_all_observations(R_GO[t])
                markers.move_all_observations(p_GO[t])
                if mode == "fresh":
                    assembler.uninitialize()
                goals[t] = assembler.track(t * 0.01)
                Q[t] = assembler.get_positions()
        stats = (assembler.get_num_goal_evals(), assembler.get_num_goal_gradient_evals(),
                 assembler.get_num_assembly_steps())
        results.append((Q, goals, stats))
    for other in results[1:]:
        np.testing.assert_array_equal(results[0][0], other[0])
        np.testing.assert_array_equal(results[0][1], other[1])
        assert results[0][2] == other[2]
