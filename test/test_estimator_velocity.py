"""Tests of the gyro velocity least squares (ros_dofkit.core.estimator.velocity) against exact truth: synthetic
Jacobians, and the real Panda arm with Pinocchio computing the angular Jacobians and the true body rates; the
estimator's compiled copy (``offline.kinematics_and_velocities``, sparse normal equations) against it on the G1."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.estimator.offline import kinematics_and_velocities
from ros_dofkit.core.estimator.velocity import (
    VelocityInputError,
    solve_velocities_from_gyros,
)
from ros_dofkit.core.multibody import MultibodyPlant


def _robots_dir() -> Path:
    site_packages = Path(sysconfig.get_paths(vars={"base": sys.prefix})["purelib"])
    return site_packages / "cmeel.prefix/share/example-robot-data/robots"


def test_full_rank_recovers_true_velocity():
    rng = np.random.default_rng(0)
    J = rng.normal(size=(4, 3, 6))
    v_true = rng.normal(size=6)
    w = J @ v_true
    solution = solve_velocities_from_gyros(J, w, np.ones(6, bool), np.zeros(6), 1e-10)
    np.testing.assert_allclose(solution.v, v_true, atol=1e-7)
    assert solution.from_gyro.all()


def test_unobserved_and_locked_dofs_keep_the_prior():
    rng = np.random.default_rng(1)
    J = rng.normal(size=(2, 3, 5))
    J[:, :, 3] = 0.0  # no gyro sees dof 3 (e.g. a prismatic joint)
    v_true = rng.normal(size=5)
    w = J @ v_true
    prior = v_true + np.array([0.0, 0.0, 0.0, 0.25, 0.0])  # dof 3's prior is off; only the prior can say it
    free = np.array([True, True, True, True, False])  # dof 4 measured: fixed at its prior value
    solution = solve_velocities_from_gyros(J, w, free, prior, 1e-9)
    np.testing.assert_allclose(solution.v[[0, 1, 2]], v_true[[0, 1, 2]], atol=1e-6)
    assert solution.v[3] == pytest.approx(prior[3])
    assert solution.v[4] == prior[4]
    np.testing.assert_array_equal(solution.from_gyro, [True, True, True, False, False])


def test_locked_dof_motion_is_removed_from_the_measurement():
    # Two revolute joints about z in series: the sensor on the second body sees qd0 + qd1.
    J = np.array([[[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]])
    w = np.array([[0.0, 0.0, 3.0]])
    solution = solve_velocities_from_gyros(J, w, np.array([False, True]), np.array([1.0, 0.0]), 1e-12)
    np.testing.assert_allclose(solution.v, [1.0, 2.0], atol=1e-9)


def test_no_sensor_or_nothing_free_returns_prior():
    prior = np.array([1.0, 2.0])
    solution = solve_velocities_from_gyros(np.zeros((0, 3, 2)), np.zeros((0, 3)), np.ones(2, bool), prior)
    np.testing.assert_array_equal(solution.v, prior)
    assert not solution.from_gyro.any()
    solution = solve_velocities_from_gyros(np.ones((1, 3, 2)), np.ones((1, 3)), np.zeros(2, bool), prior)
    np.testing.assert_array_equal(solution.v, prior)


@pytest.mark.parametrize(
    "J, w, free, prior, lam",
    [
        (np.zeros((1, 3, 2)), np.zeros((1, 3)), np.ones(3, bool), np.zeros(2), 1e-6),
        (np.zeros((1, 3, 2)), np.zeros((2, 3)), np.ones(2, bool), np.zeros(2), 1e-6),
        (np.zeros((3, 2)), np.zeros((1, 3)), np.ones(2, bool), np.zeros(2), 1e-6),
        (np.zeros((1, 3, 2)), np.zeros((1, 3)), np.ones(2, bool), np.zeros(2), 0.0),
    ],
)
def test_shape_errors(J, w, free, prior, lam):
    with pytest.raises(VelocityInputError):
        solve_velocities_from_gyros(J, w, free, prior, lam)


def test_panda_gyros_give_joint_rates_pinocchio_truth():
    pin = pytest.importorskip("pinocchio")
    robots = _robots_dir()
    model = pin.buildModelFromUrdf(str(robots / "panda_description/urdf/panda.urdf"))
    data = model.createData()
    rng = np.random.default_rng(3)
    q = pin.randomConfiguration(model)
    v = rng.normal(size=model.nv)
    pin.forwardKinematics(model, data, q, v)
    pin.computeJointJacobians(model, data, q)
    sensor_frames = ["panda_link3", "panda_link5", "panda_link7", "panda_hand"]
    jacobians, gyros_W = [], []
    for name in sensor_frames:
        frame = model.getFrameId(name)
        pin.updateFramePlacements(model, data)
        J = pin.getFrameJacobian(model, data, frame, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        R_WB = data.oMf[frame].rotation
        w_B = pin.getFrameVelocity(model, data, frame, pin.ReferenceFrame.LOCAL).angular  # what a gyro measures
        jacobians.append(J[3:6])
        gyros_W.append(R_WB @ w_B)
    # panda.urdf has 7 arm joints + 2 finger joints; the fingers do not rotate any sensor.
    free = np.ones(model.nv, bool)
    prior = np.zeros(model.nv)
    solution = solve_velocities_from_gyros(np.stack(jacobians), np.stack(gyros_W), free, prior, 1e-10)
    np.testing.assert_allclose(solution.v[:7], v[:7], atol=1e-6)
    assert solution.from_gyro[:7].all() and not solution.from_gyro[7:].any()
    np.testing.assert_array_equal(solution.v[7:], 0.0)


def test_the_estimators_compiled_solve_equals_this_one_on_a_humanoid():
    """kinematics_and_velocities (one cycle, its poses from forward kinematics) against solve_velocities_from_gyros
    on the G1 on a floating base: random configurations, mountings, prior, a subset of the gyros and of the free
    velocities (more free velocities than the gyros see: the prior holds the rest)."""
    plant = MultibodyPlant()
    plant.add_urdf(urdf_path("g1"), base_joint="floating")
    plant.finalize()
    rng = np.random.default_rng(9)
    nv, nb, n_imu = plant.num_velocities(), plant.num_bodies(), 14
    bodies = np.sort(rng.choice(np.arange(1, nb), n_imu, replace=False)).astype(np.int64)
    R_BS = spatial.rotvec_to_matrix(rng.normal(size=(n_imu, 3)))
    for _ in range(4):
        q = plant.default_positions() + 0.3 * rng.normal(size=plant.num_positions())
        q[:4] /= np.linalg.norm(q[:4])
        v_true, prior = rng.normal(size=nv), rng.normal(size=nv)
        R_WB = plant.calc_body_poses(q)[bodies, :3, :3]
        J_w = np.stack([plant.calc_jacobian(q, plant.get_body(int(b)).body_frame)[:3] for b in bodies])
        w_W = J_w @ v_true
        w_S = np.einsum("nji,nj->ni", R_WB @ R_BS, w_W)  # what each gyro measures, in its own frame
        use = rng.random(n_imu) < 0.8
        free = rng.random(nv) < 0.9
        reference = solve_velocities_from_gyros(J_w[use], w_W[use], free, prior, 1e-3)
        V, from_gyro = np.empty((1, nv)), np.zeros((1, nv), bool)
        assert kinematics_and_velocities(plant.tree.kernel_arguments(), q[None], np.zeros(1, bool), prior[None],
                                         use[None], w_S[None], bodies, R_BS, free, 1e-3, np.empty((1, nb, 4, 4)), V,
                                         from_gyro)
        np.testing.assert_allclose(V[0], reference.v, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(from_gyro[0], reference.from_gyro)
        assert 10 < from_gyro.sum() < free.sum()  # most, not all, of the free velocities are seen by the gyros
        np.testing.assert_array_equal(V[0, ~free], prior[~free])


def test_the_compiled_solve_compiles_from_an_empty_kernel_cache(tmp_path):
    """kinematics_and_velocities' loop is compiled without numba's reference counting, and numba compiles every
    function it calls the same way: a callee that allocates is refused then. Only a process that compiles it anew
    shows that (the package's kernel cache hides it), so the humanoid case above runs again with an empty cache."""
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "kernels"))
    test = f"{Path(__file__).resolve()}::test_the_estimators_compiled_solve_equals_this_one_on_a_humanoid"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], env=environment,
                            cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
