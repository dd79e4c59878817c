"""The information bound of benchmarks/heading_bound.py against closed forms: the Kalman and RTS variances of a
random walk observed with constant information, the Monte Carlo of their errors, the relative walks' covariance and
the joint-centre acceleration's information on a case worked by hand."""

import math

import numpy as np
import pytest

from benchmarks.heading_bound import (
    SessionInformation,
    monte_carlo,
    pair_information,
    process_covariance,
    random_walk_bounds,
)
from ros_dofkit.core.simulation import SensorNoise


def steady_state(q_dt: float, f: float) -> tuple:
    """Scalar random walk (increments of variance q_dt) observed with information f per step: the predicted
    variance a solves f a^2 - f q_dt a - q_dt = 0, the filtered P = a - q_dt, and the smoothed P_s = P a / (a + P)
    (the RTS fixed point P_s = P + G^2 (P_s - a), G = P / a). Continuous limit: P ~ sqrt(q / I), P_s ~ P / 2."""
    a = 0.5 * (q_dt + math.sqrt(q_dt * q_dt + 4.0 * q_dt / f))
    P = a - q_dt
    return a, P, P * a / (a + P)


@pytest.mark.parametrize("q_dt, f", [(1e-4, 50.0), (0.3, 2.0)])
def test_constant_information_reaches_the_closed_form_filter_and_smoother_variances(q_dt, f):
    K = 3000
    series = random_walk_bounds(np.full((K, 1, 1), f), 0.5, np.array([[2.0 * q_dt]]), np.zeros((1, 1)))
    a, P, P_s = steady_state(q_dt, f)
    middle = K // 2
    assert series.predicted[middle, 0, 0] == pytest.approx(a, rel=1e-9)
    assert series.filtered[middle, 0, 0] == pytest.approx(P, rel=1e-9)
    assert series.smoothed[middle, 0, 0] == pytest.approx(P_s, rel=1e-9)
    assert series.smoothed[-1, 0, 0] == series.filtered[-1, 0, 0]  # the last step has no future
    assert series.filtered[0, 0, 0] == pytest.approx(q_dt / (1.0 + f * q_dt))  # from a known start


def test_the_continuous_limit_is_the_square_root_law():
    # information rate I per second, walk q per second: P -> sqrt(q / I), the smoother half of it
    q, rate, dt = 4.6e-5, 51.0, 1e-3
    a, P, P_s = steady_state(q * dt, rate * dt)
    assert P == pytest.approx(math.sqrt(q / rate), rel=0.01)
    assert P_s == pytest.approx(0.5 * math.sqrt(q / rate), rel=0.01)


def test_decoupled_offsets_are_bounded_one_by_one():
    # two offsets, each observed on its own: the matrix recursions equal the scalar closed forms per offset
    K, q_dt, f = 2000, 1e-3, np.array([4.0, 400.0])
    series = random_walk_bounds(np.broadcast_to(np.diag(f), (K, 2, 2)), 1.0, q_dt * np.eye(2), np.zeros((2, 2)))
    for k in range(2):
        _, P, P_s = steady_state(q_dt, f[k])
        assert series.filtered[K // 2, k, k] == pytest.approx(P, rel=1e-9)
        assert series.smoothed[K // 2, k, k] == pytest.approx(P_s, rel=1e-9)
        assert series.filtered[K // 2, 0, 1] == 0.0


def test_offsets_relative_to_a_walking_reference_have_the_covariance_of_walk_differences():
    rate2 = math.radians(3.0) ** 2 / 60.0
    walks = np.random.default_rng(4).normal(0.0, math.sqrt(rate2), (400_000, 4))
    np.testing.assert_allclose(np.cov((walks[:, 1:] - walks[:, :1]).T), process_covariance(3, 3.0, True),
                               atol=0.02 * rate2)
    np.testing.assert_allclose(process_covariance(3, 3.0, False), rate2 * np.eye(3))


def test_the_monte_carlo_errors_have_the_bound_variances():
    # one long minute of a scalar walk with a short correlation time (~7 steps): the RMS error of the correctly
    # specified filter and smoother is the square root of the closed-form variances (to a few per cent)
    K, q_dt, f = 6000, 1e-2, 5.0
    info = SessionInformation(information=np.full((K, 1, 1), f), names=("joint",), outer=np.ones((K, 1, 1, 1)),
                              noise=np.zeros((K, 1)), minute=np.zeros(K, dtype=int), columns={"imu": 0},
                              reference=None, acceleration_rms=np.zeros(0), walk=np.zeros((K, 1)))
    series = random_walk_bounds(info.information, 1.0, np.array([[q_dt]]), np.zeros((1, 1)))
    _, P, P_s = steady_state(q_dt, f)
    drawn = monte_carlo(info, series, np.array([[q_dt]]), np.array([0]), 100, seed=1)
    assert drawn["causal"][0] == pytest.approx(math.degrees(math.sqrt(P)), rel=0.04)
    assert drawn["smoothed"][0] == pytest.approx(math.degrees(math.sqrt(P_s)), rel=0.04)
    # on a given walk only the noise is drawn: with no walk at all the smoother averages the whole minute
    fixed = monte_carlo(info, series, np.zeros((K, 1)), np.array([0]), 100, seed=1)
    assert fixed["smoothed"][0] < drawn["smoothed"][0]


def test_the_joint_centre_information_of_a_level_accelerating_pair_is_worked_by_hand():
    # both IMUs level (R_WS = I), no rotation, at the joint centre (r = 0), the centre accelerating by a along x:
    # each side's specific force f = (a, 0, g); the measured direction n = z x v / |v| = y. Per side the error along
    # y: orientation noise eps x f (its y part: g eps_x... sigma_o^2 (g^2 + a^2)) plus the accelerometer's sigma_a^2;
    # information a^2 / (2 (sigma_o^2 (g^2 + a^2) + sigma_a^2)) about d_child - d_parent, h = (1, -1)
    a, g, T = 0.3, 9.81, 4
    noise = SensorNoise(orientation_deg=0.5, gyro=0.01, accelerometer=0.05)
    end = {"R_WS": np.broadcast_to(np.eye(3), (T, 3, 3)), "f": np.tile([a, 0.0, g], (T, 1)), "w": np.zeros((T, 3)),
           "alpha": np.zeros((T, 3)), "r": np.zeros((T, 3))}
    h = np.array([1.0, -1.0])
    information, size = pair_information([(h, {"imu": 1, **end}, {"imu": 0, **end})], noise, 0.01, True)
    per_side = math.radians(0.5) ** 2 * (g * g + a * a) + 0.05 ** 2
    np.testing.assert_allclose(size, a)
    np.testing.assert_allclose(information, np.broadcast_to(a * a / (2.0 * per_side) * np.outer(h, h), (T, 2, 2)),
                               rtol=1e-12)
    # a lever arm along z: the angular acceleration's noise (sigma_g / (sqrt(2) dt) per axis) adds |r|^2 of it
    lever = {**end, "r": np.tile([0.0, 0.0, 0.2], (T, 1))}
    with_alpha, _ = pair_information([(h, {"imu": 1, **lever}, {"imu": 0, **end})], noise, 0.01, True)
    alpha2 = (0.01 / (math.sqrt(2.0) * 0.01)) ** 2 * 0.2 ** 2
    assert with_alpha[0, 0, 0] == pytest.approx(a * a / (2.0 * per_side + alpha2), rel=1e-12)
    without, _ = pair_information([(h, {"imu": 1, **lever}, {"imu": 0, **end})], noise, 0.01, False)
    assert without[0, 0, 0] == pytest.approx(a * a / (2.0 * per_side), rel=1e-12)
