"""core/estimator/odometry.py: the child-frame twist, the least-squares covariance and the unconstrained coordinates
against independent truth (core/state's twist, Monte Carlo of a linear problem, analytic ranks), and the odometry
covariance against the empirical error spread of the estimator over a simulated noisy run."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ros_dofkit.core.estimator.config import EstimatorConfig, ImuConfig
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.odometry import (
    UNOBSERVED_VARIANCE,
    OdometryInputError,
    SolveCovarianceModel,
    child_frame_twist,
    floating_base_covariance,
    least_squares_covariance,
    unconstrained_coordinates,
    unconstrained_estimated_coordinates,
)
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.simulation import SensorNoise, SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.core.spatial import matrix_to_quat, matrix_to_rotvec, quat_to_matrix, rotation_x, rotvec_to_matrix
from ros_dofkit.core.state.floating_base import child_twist_from_base_velocities
from ros_dofkit.replay.pipeline import ImuInput, ReplayLoop, simulation_inputs


def random_rotation(rng):
    return rotvec_to_matrix(rng.normal(size=3))


def test_child_frame_twist_matches_core_state_and_rotates_a_tilted_joint_frame():
    rng = np.random.default_rng(0)
    R_WB = np.stack([random_rotation(rng) for _ in range(5)])
    v = rng.normal(size=(5, 6))
    twist = child_frame_twist(R_WB, np.eye(3), v)
    from ros_dofkit.core.spatial import matrix_to_quat

    q_base = np.concatenate([matrix_to_quat(R_WB), np.zeros((5, 3))], axis=1)
    linear, angular = child_twist_from_base_velocities(q_base, v)  # an independent implementation (F = W)
    np.testing.assert_allclose(twist.linear, linear, atol=1e-12)
    np.testing.assert_allclose(twist.angular, angular, atol=1e-12)
    R_WF = rotation_x(0.7)  # a joint frame turned in the world: velocities in F are rotated into W first
    tilted = child_frame_twist(R_WB[0], R_WF, v[0])
    np.testing.assert_allclose(tilted.angular, R_WB[0].T @ R_WF @ v[0, :3], atol=1e-12)
    np.testing.assert_allclose(tilted.linear, R_WB[0].T @ R_WF @ v[0, 3:], atol=1e-12)
    with pytest.raises(OdometryInputError, match="v_joint"):
        child_frame_twist(R_WB[0], R_WF, v[0, :3])


def test_least_squares_covariance_matches_monte_carlo_of_the_weighted_solve():
    """A linear weighted least squares with known noise: the empirical covariance of its estimates over many
    noise draws equals the sandwich formula, and a coordinate that is not free keeps 0."""
    rng = np.random.default_rng(1)
    k, nv = 4, 6
    J = rng.normal(size=(k, 3, nv))
    free = np.array([True, True, False, True, True, True])
    weights = np.array([1.0, 4.0, 0.5, 2.0])
    sigma = np.array([0.01, 0.02, 0.005, 0.03])
    A = J[:, :, free]
    H = np.einsum("k,kai,kaj->ij", weights, A, A)
    draws = 20000
    noise = rng.normal(size=(draws, k, 3)) * sigma[None, :, None]
    estimates = np.linalg.solve(H, np.einsum("k,kai,nka->in", weights, A, noise)).T
    empirical = np.cov(estimates, rowvar=False)
    predicted = least_squares_covariance(J, weights, sigma**2, free)
    np.testing.assert_allclose(predicted[np.ix_(free, free)], empirical, atol=0.05 * np.abs(empirical).max())
    assert np.all(predicted[~free] == 0) and np.all(predicted[:, ~free] == 0)
    # Inverse-variance weights: the covariance is the inverse normal matrix.
    inverse_weights = 1 / sigma**2
    H = np.einsum("k,kai,kaj->ij", inverse_weights, A, A)
    np.testing.assert_allclose(least_squares_covariance(J, inverse_weights, sigma**2, free)[np.ix_(free, free)],
                               np.linalg.inv(H), rtol=1e-9)


def test_unobserved_directions_get_the_large_variance():
    """Three revolute joints about the same axis under one IMU: only their sum is observed; the covariance has
    the unobserved variance along the two directions that keep the sum."""
    J = np.zeros((1, 3, 3))
    J[0, 2, :] = 1.0  # w_z = v1 + v2 + v3
    sigma = least_squares_covariance(J, [1.0], [1e-4], np.ones(3, dtype=bool))
    s = np.ones(3) / math.sqrt(3)
    # H = 3 s s^T: the observed direction s has variance 1e-4 / 3 (up to the large null-space part rounded into it)
    assert s @ sigma @ s == pytest.approx(1e-4 / 3, rel=1e-5)
    d = np.array([1.0, -1.0, 0.0]) / math.sqrt(2)
    assert d @ sigma @ d == pytest.approx(UNOBSERVED_VARIANCE, rel=1e-9)


def test_unconstrained_coordinates_analytic_cases():
    names = ["a", "b", "c"]
    same_axis = np.zeros((1, 3, 3))
    same_axis[0, 2, :] = 1.0
    assert unconstrained_coordinates(same_axis, np.ones(3, dtype=bool), names) == ("a", "b", "c")
    # One IMU per link: each joint's column is seen by the IMU of its link, the stack has full column rank.
    per_link = np.zeros((3, 3, 3))
    for i in range(3):
        per_link[i, 2, :i + 1] = 1.0
    assert unconstrained_coordinates(per_link, np.ones(3, dtype=bool), names) == ()
    # A coordinate that is not free is never reported.
    assert unconstrained_coordinates(same_axis, np.array([False, True, False]), names) == ()
    with pytest.raises(OdometryInputError, match="names"):
        unconstrained_coordinates(same_axis, np.ones(3, dtype=bool), names[:2])


def test_one_imu_on_an_eight_joint_chain_leaves_joints_unconstrained():
    """The arm with one hand IMU: three angular components for five estimated joints (rank 3 < 5)."""
    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    config = EstimatorConfig(imus=(ImuConfig("hand", "arm_link7"),),
                             estimated_joints={"arm": tuple(f"arm_joint{i}" for i in range(3, 8))})
    estimator = Estimator(plant, config)
    model = SolveCovarianceModel(estimator, 1e-4, 1e-4)
    q = plant.default_positions().copy()
    q[:7] = [0.1, -0.5, 0.2, -1.2, 0.3, 0.9, 0.1]
    J = model.jacobians(q, ["hand"])
    free = np.zeros(7, dtype=bool)
    free[2:] = True
    unconstrained = unconstrained_coordinates(J, free, plant.position_names())
    assert len(unconstrained) >= 2 and set(unconstrained) <= {f"arm_joint{i}" for i in range(3, 8)}
    np.testing.assert_allclose(J[0], plant.calc_angular_jacobian(q, plant.get_body_by_name("arm_link7")),
                               atol=1e-12)


@pytest.fixture(scope="module")
def quadruped_run():
    """A quadruped with two trunk IMUs of unequal weight, legs measured, noisy orientations and gyros."""
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    legs = list(plant.articulated_view().position_names())
    noise = SensorNoise(orientation_deg=0.5, gyro=0.01)
    trajectory = SineTrajectory(plant, seed=3, max_amplitude=0.3, max_translation=0.0)
    imus = [SimulatedImu("a", "trunk_imu_link"), SimulatedImu("b", "trunk", R_BS=rotation_x(0.4))]
    run = SensorSimulator(plant, imus, legs, trajectory, noise=noise, imu_rate_hz=100.0, encoder_rate_hz=100.0,
                          seed=5).run(12.0)
    config = EstimatorConfig(
        imus=(ImuConfig("a", "trunk_imu_link", weight=1.0), ImuConfig("b", "trunk", mounting=rotation_x(0.4),
                                                                      weight=4.0)),
        estimated_joints={"quadruped": "none"}, accuracy=1e-9, sync_tolerance_s=1e-6)
    loop = ReplayLoop(Estimator(plant, config))
    for item in simulation_inputs(run):
        loop.feed(item)
    return plant, noise, run, loop


def trunk_cycles(loop, run, qs):
    """(result, k, R_est, rotation error in the world frame) of the replayed cycles after the first 20 that match a
    simulated instant k and observe both trunk IMUs; ``qs`` the trunk quaternion's first coordinate."""
    index = {round(t, 6): k for k, t in enumerate(run.times)}
    for result in loop.results[20:]:
        k = index.get(round(result.stamp, 6))
        if k is None or len(result.observed_sensors) != 2:
            continue
        R_true = quat_to_matrix(run.q[k, qs:qs + 4])
        R_est = quat_to_matrix(result.q[qs:qs + 4])
        yield result, k, R_est, matrix_to_rotvec(R_est @ R_true.T)


def test_odometry_covariance_matches_the_empirical_spread_of_a_simulated_run(quadruped_run):
    plant, noise, run, loop = quadruped_run
    joint = plant.floating_base_joints()[0]
    qs, vs = joint.position_start, joint.velocity_start
    R_WF = np.asarray(joint.frame_on_parent.X_BF)[:3, :3]
    s_orientation = math.radians(noise.orientation_deg)
    model = SolveCovarianceModel(loop.estimator, s_orientation**2, noise.gyro**2)
    rotation_errors, rate_errors, predicted_pose, predicted_twist = [], [], [], []
    for result, k, R_est, error in trunk_cycles(loop, run, qs):
        rotation_errors.append(error)  # small rotation in the world (header) frame
        rate_errors.append(R_est.T @ (result.v[vs:vs + 3] - run.v[k, vs:vs + 3]))  # in the child frame
        covariance = floating_base_covariance(vs, R_WF, R_est, *(lambda c: (c.orientation, c.velocity))(
            model.covariances(result)))
        predicted_pose.append(covariance.pose)
        predicted_twist.append(covariance.twist)
    assert len(rotation_errors) > 1000
    pose = np.mean(predicted_pose, axis=0)
    twist = np.mean(predicted_twist, axis=0)
    empirical_rotation = np.var(np.array(rotation_errors), axis=0)
    empirical_rate = np.var(np.array(rate_errors), axis=0)
    # Two sensors of weights 1 and 4 on one rigid body: s^2 (1 + 16) / 25 per axis; gyros unweighted: s_g^2 / 2.
    np.testing.assert_allclose(np.diag(pose)[3:], s_orientation**2 * 17 / 25, rtol=1e-6)
    np.testing.assert_allclose(np.diag(twist)[3:], noise.gyro**2 / 2, rtol=1e-6)
    ratio_rotation = np.diag(pose)[3:] / empirical_rotation
    ratio_rate = np.diag(twist)[3:] / empirical_rate
    print(f"predicted / empirical variance: rotation {ratio_rotation}, angular velocity {ratio_rate}")
    assert np.all((ratio_rotation > 0.5) & (ratio_rotation < 2.0)), (ratio_rotation, empirical_rotation)
    assert np.all((ratio_rate > 0.5) & (ratio_rate < 2.0)), (ratio_rate, empirical_rate)
    # The held translation and its velocity: the unobserved variance, never 0.
    assert np.all(np.diag(pose)[:3] == UNOBSERVED_VARIANCE) and np.all(np.diag(twist)[:3] == UNOBSERVED_VARIANCE)


@pytest.mark.parametrize("config, expected", [("arm_4imu.yaml", ()), ("lower_body.yaml", ()), ("quadruped.yaml", ())])
def test_the_shipped_configurations_have_no_unconstrained_coordinates(config, expected):
    """Their IMUs determine every estimated coordinate: the node starts without the warning."""
    from pathlib import Path

    from ros_dofkit.replay.setup import ReplaySetup

    setup = ReplaySetup.from_parameter_file(Path(__file__).resolve().parents[1] / "config" / config)
    assert unconstrained_estimated_coordinates(Estimator(setup.plant, setup.config)) == expected


def test_one_hand_imu_leaves_the_arm_joints_unconstrained():
    """Three orientation components cannot separate five joints; a weight-0 IMU constrains none."""
    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    joints = tuple(f"arm_joint{i}" for i in range(3, 8))
    estimator = Estimator(plant, EstimatorConfig(imus=(ImuConfig("hand", "arm_link7"),),
                                                 estimated_joints={"arm": joints}))
    unconstrained = unconstrained_estimated_coordinates(estimator)
    assert len(unconstrained) >= 2 and set(unconstrained) <= set(joints)
    silent = Estimator(plant, EstimatorConfig(imus=(ImuConfig("hand", "arm_link7", weight=0.0),),
                                              estimated_joints={"arm": joints}))
    assert unconstrained_estimated_coordinates(silent) == joints


@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0), (2.0, 2.0, 2.0), (1.0, 3.0, 0.5)])
def test_a_cycles_compiled_covariances_equal_the_least_squares_of_its_jacobians(weights):
    """SolveCovarianceModel's compiled cycle (one eigendecomposition for equal weights, two otherwise) against
    least_squares_covariance of the same sensors' Jacobians, on the arm with three IMUs at a generic pose."""
    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    bodies = ("arm_link3", "arm_link5", "arm_link7")
    imus = tuple(ImuConfig(f"s{i}", body, weight=w) for i, (body, w) in enumerate(zip(bodies, weights, strict=True)))
    estimator = Estimator(plant, EstimatorConfig(imus=imus))
    for imu in imus:
        estimator.add_imu(imu.name, 0.0, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    result = estimator.step(0.0)
    q = plant.default_positions().copy()
    q[:7] = [0.3, -0.7, 0.4, -1.5, 0.2, 1.1, -0.3]
    result = dataclasses.replace(result, q=q, observed_sensors=("s0", "s1", "s2"))
    model = SolveCovarianceModel(estimator, 2e-4, 3e-4)
    covariances = model.covariances(result)
    J = model.jacobians(q, ["s0", "s1", "s2"])
    np.testing.assert_allclose(covariances.orientation, least_squares_covariance(J, weights, np.full(3, 2e-4),
                                                                                 model.free), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(covariances.velocity, least_squares_covariance(J, np.ones(3), np.full(3, 3e-4),
                                                                              model.free), rtol=1e-7, atol=1e-12)
    # Two of seven joints unobserved with one IMU: the unobserved variance appears, in both.
    single = model.covariances(dataclasses.replace(result, observed_sensors=("s0",)))
    assert single.orientation.max() > 1e5 and single.velocity.max() > 1e5


def test_covariance_weighted_odometry_covariance_matches_the_empirical_spread():
    """imu_covariance_weighting on a quadruped whose two trunk IMUs (equal configured weights) are 0.5 and 5 deg
    noisy, each message stating its variance: the solve is the inverse-variance weighted one, so the trunk's
    orientation error spreads by 1/(1/v_a + 1/v_b) per axis, which the Odometry covariance predicts (within a
    factor of 2 of the empirical spread), and the error is far smaller than with the configured weights alone
    (there (v_a + v_b)/4, about 25 times v_a)."""
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    legs = list(plant.articulated_view().position_names())
    trajectory = SineTrajectory(plant, seed=3, max_amplitude=0.3, max_translation=0.0)
    mounting = rotation_x(0.4)
    run = SensorSimulator(plant, [SimulatedImu("a", "trunk_imu_link"), SimulatedImu("b", "trunk", R_BS=mounting)],
                          legs, trajectory, noise=SensorNoise(gyro=0.01), imu_rate_hz=100.0, encoder_rate_hz=100.0,
                          seed=5).run(6.0)
    stddev = {"a": math.radians(0.5), "b": math.radians(5.0)}
    rng = np.random.default_rng(11)
    items = []
    for item in simulation_inputs(run):
        if isinstance(item, ImuInput) and item.orientation_present:
            R = quat_to_matrix(item.quaternion_wxyz) @ rotvec_to_matrix(rng.normal(0.0, stddev[item.name], 3))
            item = dataclasses.replace(item, quaternion_wxyz=matrix_to_quat(R),
                                       orientation_covariance=(stddev[item.name] ** 2 * np.eye(3)).reshape(-1))
        items.append(item)
    joint = plant.floating_base_joints()[0]
    qs, vs = joint.position_start, joint.velocity_start
    R_WF = np.asarray(joint.frame_on_parent.X_BF)[:3, :3]
    spread = {}
    for weighting in (True, False):
        config = EstimatorConfig(imus=(ImuConfig("a", "trunk_imu_link"), ImuConfig("b", "trunk", mounting=mounting)),
                                 estimated_joints={"quadruped": "none"}, accuracy=1e-9, sync_tolerance_s=1e-6,
                                 imu_covariance_weighting=weighting, imu_orientation_stddev=stddev["a"])
        loop = ReplayLoop(Estimator(plant, config))
        for item in items:
            loop.feed(item)
        model = SolveCovarianceModel(loop.estimator, stddev["a"] ** 2, 0.01 ** 2)
        errors, predicted = [], []
        for result, _, R_est, error in trunk_cycles(loop, run, qs):
            errors.append(error)
            covariances = model.covariances(result)
            predicted.append(np.diag(floating_base_covariance(vs, R_WF, R_est, covariances.orientation,
                                                              covariances.velocity).pose)[3:])
        assert len(errors) > 500
        spread[weighting] = np.var(np.array(errors), axis=0)
        if weighting:  # the model knows each sample's noise only through the weights
            np.testing.assert_allclose(np.mean(predicted, axis=0),
                                       1.0 / (1.0 / stddev["a"] ** 2 + 1.0 / stddev["b"] ** 2), rtol=1e-6)
            ratio = np.mean(predicted, axis=0) / spread[True]
        else:  # equal weights: the mean of the two errors
            ratio = (stddev["a"] ** 2 + stddev["b"] ** 2) / 4.0 / spread[False]
        print(f"weighting {weighting}: predicted / empirical variance {ratio}")
        assert np.all((ratio > 0.5) & (ratio < 2.0)), (ratio, spread[weighting])
    assert np.all(spread[True] < 0.1 * spread[False])
