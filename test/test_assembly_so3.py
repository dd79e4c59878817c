"""Tests of the rotation-error math of the assembly condition (ros_dofkit/core/assembly/so3.py) and of its compiled
twins in kernels.py: the error vector's definition, the inverse right Jacobian's defining property by finite
differences, and NumPy == numba to 1e-12 including near 0 and near π; the compiled Cholesky solve and the inverse's
diagonal from its factor."""

from __future__ import annotations

import numpy as np
import pytest

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import kernels, so3


def random_rotation(rng, angle=None):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = rng.uniform(0, np.pi) if angle is None else angle
    return spatial.rotvec_to_matrix(angle * axis)


def test_error_vector_is_axis_angle_of_sensor_to_observation_rotation_expressed_in_ground():
    rng = np.random.default_rng(1)
    for _ in range(20):
        R_GS = random_rotation(rng)
        phi_S = rng.normal(size=3)
        phi_S *= rng.uniform(0, 3.0) / np.linalg.norm(phi_S)
        R_GO = R_GS @ spatial.rotvec_to_matrix(phi_S)  # R_SO = exp(phi_S)
        phi_G = so3.rotation_error_vector(R_GS, R_GO)
        np.testing.assert_allclose(phi_G, R_GS @ phi_S, atol=1e-12)
        # and R_GO = exp(phi_G) R_GS
        np.testing.assert_allclose(spatial.rotvec_to_matrix(phi_G) @ R_GS, R_GO, atol=1e-12)


def test_simbody_angle_is_in_zero_pi_and_equals_the_rotation_angle():
    rng = np.random.default_rng(2)
    for angle in [0.0, 1e-9, 0.3, 2.0, np.pi - 1e-9, np.pi]:
        R = random_rotation(rng, angle)
        assert so3.simbody_rotation_angle(R) == pytest.approx(angle, abs=1e-8)
    # 90 degrees about z
    assert so3.simbody_rotation_angle(spatial.rotation_z(np.pi / 2)) == pytest.approx(np.pi / 2, abs=1e-15)


@pytest.mark.parametrize("angle", [0.0, 1e-7, 1e-4, 0.5, 1.5, 2.5, 3.0, np.pi - 1e-3])
def test_inverse_right_jacobian_by_finite_differences(angle):
    rng = np.random.default_rng(3)
    axis = rng.normal(size=3)
    phi = angle * axis / np.linalg.norm(axis)
    J = so3.inverse_right_jacobian(phi)
    h = 1e-6
    numeric = np.empty((3, 3))
    for k in range(3):
        eta = np.zeros(3)
        eta[k] = h
        plus = spatial.matrix_to_rotvec(spatial.rotvec_to_matrix(phi) @ spatial.rotvec_to_matrix(eta))
        minus = spatial.matrix_to_rotvec(spatial.rotvec_to_matrix(phi) @ spatial.rotvec_to_matrix(-eta))
        numeric[:, k] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(J, numeric, atol=2e-7)
    # J_r⁻¹(φ)ᵀ φ = φ: why the goal gradient is simply -φ (Simbody's torque).
    np.testing.assert_allclose(J.T @ phi, phi, atol=1e-14)


def test_coefficient_series_and_exact_forms_meet():
    theta = np.array([0.999e-3, 1.001e-3])
    c = so3.inverse_right_jacobian_coefficient(theta)
    exact = 1 / theta**2 - (1 + np.cos(theta)) / (2 * theta * np.sin(theta))
    np.testing.assert_allclose(c, exact, rtol=1e-9)
    assert so3.inverse_right_jacobian_coefficient(0.0) == pytest.approx(1 / 12)
    assert so3.inverse_right_jacobian_coefficient(np.pi) == pytest.approx(1 / np.pi**2)


def test_compiled_log_and_jacobian_agree_with_reference():
    rng = np.random.default_rng(4)
    angles = [0.0, 1e-12, 1e-7, 1e-5, 1e-3, 0.7, 2.0, 3.0, np.pi - 1e-6, np.pi]
    for angle in angles + list(rng.uniform(0, np.pi, 30)):
        R = random_rotation(rng, angle)
        out = np.empty(3)
        kernels._rotation_log(R, out)
        np.testing.assert_allclose(out, spatial.matrix_to_rotvec(R), atol=1e-12 if angle < np.pi - 1e-3 else 1e-7)
        Jr = np.empty((3, 3))
        kernels._inverse_right_jacobian(out, Jr)
        np.testing.assert_allclose(Jr, so3.inverse_right_jacobian(out), atol=1e-12)


def test_compiled_cholesky_solves_spd_system_and_rejects_indefinite():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(9, 6))
    H = A.T @ A + 1e-3 * np.eye(6)
    b = rng.normal(size=6)
    x = np.empty(6)
    assert kernels._cholesky_solve(H.copy(), b, 6, x)
    np.testing.assert_allclose(H @ x, b, atol=1e-10)
    assert not kernels._cholesky_solve(-np.eye(3), np.ones(3), 3, np.empty(3))


def test_compiled_inverse_diagonal_is_the_unit_vector_solve_bit_for_bit():
    """(H⁻¹)_jj from one factor: numpy's inverse, and kernels.cholesky_substitute of e_j to the bit (the same
    operations without the exact zeros)."""
    rng = np.random.default_rng(6)
    A = rng.normal(size=(40, 12)) * (rng.random((40, 12)) < 0.4)  # sparse, as gyro Jacobians are
    H = A.T @ A + 1e-3 * np.eye(12)
    L = H.copy()
    assert kernels.cholesky_factor(L, 12)
    inverse = np.linalg.inv(H)
    work, column = np.full(12, np.nan), np.empty(12)
    for j in range(12):
        unit = np.zeros(12)
        unit[j] = 1.0
        kernels.cholesky_substitute(L, unit, 12, column)
        assert kernels.cholesky_inverse_diagonal(L, 12, j, work) == column[j]
        np.testing.assert_allclose(column[j], inverse[j, j], rtol=1e-9)


def test_is_rotation_matrix():
    assert so3.is_rotation_matrix(np.eye(3))
    assert not so3.is_rotation_matrix(np.diag([1.0, 1.0, -1.0]))  # reflection
    assert not so3.is_rotation_matrix(2 * np.eye(3))
    assert not so3.is_rotation_matrix(np.full((3, 3), np.nan))
    assert not so3.is_rotation_matrix(np.eye(4))
