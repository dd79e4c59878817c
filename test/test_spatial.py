"""ros_dofkit.core.spatial: matrix_to_quat's compiled path gives scipy's results (the independent reference) for
every case scipy distinguishes, and leaves the cases it does not handle to scipy; the quaternion tolerance rule
(quat_validity / quat_normalize, SPEC 9.7) on its boundary cases; the one-quaternion paths of quat_multiply,
quat_conjugate, quat_to_rotvec and rotvec_to_quat give the batched path's bits, and scipy's rotations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ros_dofkit.core.spatial import (
    QUAT_NORM_TOLERANCE,
    QuaternionError,
    matrix_to_quat,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_matrix,
    quat_to_rotvec,
    quat_validity,
    rotvec_to_quat,
)


def _scipy(R) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    q = Rotation.from_matrix(R.reshape(-1, 3, 3)).as_quat(scalar_first=True)
    return np.where(q[:, :1] < 0.0, -q, q).reshape(R.shape[:-2] + (4,))


def _special_rotations() -> np.ndarray:
    rng = np.random.default_rng(7)
    half_turns = [Rotation.from_rotvec(np.pi * a / np.linalg.norm(a)).as_matrix() for a in rng.normal(size=(20, 3))]
    near_half_turns = [Rotation.from_rotvec((np.pi - 1e-9) * a / np.linalg.norm(a)).as_matrix()
                       for a in rng.normal(size=(10, 3))]
    axis_half_turns = [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    # Ties between pivots: rotations about the diagonal directions by 120 degrees permute the axes (R00 = R11 = R22).
    permutations = [np.roll(np.eye(3), 1, axis=0), np.roll(np.eye(3), 2, axis=0)]
    tiny = [Rotation.from_rotvec(1e-12 * a).as_matrix() for a in rng.normal(size=(5, 3))]
    return np.array([np.eye(3), *axis_half_turns, *permutations, *half_turns, *near_half_turns, *tiny])


def test_batches_of_any_size_equal_scipy_to_1e_15():
    matrices = np.concatenate([Rotation.random(5000, random_state=3).as_matrix(), _special_rotations()])
    for size in (1, 2, 7, 64, 65, 300):
        for start in range(0, len(matrices) - size, size * 13 + 1):
            batch = matrices[start:start + size]
            np.testing.assert_allclose(matrix_to_quat(batch), _scipy(batch), rtol=0, atol=1e-15)


def test_special_rotations_equal_scipy_and_round_trip():
    R = _special_rotations()
    q = matrix_to_quat(R)
    np.testing.assert_allclose(q, _scipy(R), rtol=0, atol=1e-15)
    assert np.all(q[:, 0] >= 0.0)
    np.testing.assert_allclose(quat_to_matrix(q), R, atol=1e-12)


def test_shapes_single_nested_and_large_batches():
    R = Rotation.random(2 * 3 * 4, random_state=5).as_matrix()
    assert matrix_to_quat(R[0]).shape == (4,)
    np.testing.assert_allclose(matrix_to_quat(R[0]), _scipy(R[0]), rtol=0, atol=1e-15)
    nested = R.reshape(2, 3, 4, 3, 3)
    np.testing.assert_allclose(matrix_to_quat(nested), _scipy(nested), rtol=0, atol=1e-15)
    large = Rotation.random(300, random_state=6).as_matrix()
    np.testing.assert_allclose(matrix_to_quat(large), _scipy(large), rtol=0, atol=1e-15)
    assert matrix_to_quat(np.zeros((0, 3, 3))).shape == (0, 4)


def test_non_orthonormal_matrices_are_projected_as_scipy_does():
    rng = np.random.default_rng(11)
    R = Rotation.random(3, random_state=8).as_matrix()
    R[1] += 1e-6 * rng.normal(size=(3, 3))  # fails the 1e-12 orthonormality test: scipy projects it (SVD)
    np.testing.assert_allclose(matrix_to_quat(R), _scipy(R), rtol=0, atol=1e-15)
    scaled = 1.001 * R[0]
    np.testing.assert_allclose(matrix_to_quat(scaled), _scipy(scaled), rtol=0, atol=1e-15)


def test_improper_matrices_raise_scipys_value_error():
    reflection = np.diag([1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="determinant"):
        matrix_to_quat(reflection)
    with pytest.raises(ValueError, match="determinant"):
        matrix_to_quat(np.stack([np.eye(3), np.zeros((3, 3))]))


def test_quat_to_matrix_single_equals_the_batched_path_bit_for_bit():
    rng = np.random.default_rng(12)
    quaternions = np.concatenate([rng.normal(size=(500, 4)), [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [-0.0, 0, 0, -1.0]]])
    quaternions[:400] /= np.linalg.norm(quaternions[:400], axis=1, keepdims=True)  # unit, and some not (no check)
    batched = quat_to_matrix(quaternions)
    for q, R in zip(quaternions, batched, strict=True):
        single = quat_to_matrix(q)
        assert single.shape == (3, 3) and single.dtype == np.float64
        np.testing.assert_array_equal(single, R)
        np.testing.assert_array_equal(quat_to_matrix(list(q)), R)
    np.testing.assert_allclose(quat_to_matrix(quaternions[:400]), Rotation.from_quat(
        quaternions[:400], scalar_first=True).as_matrix(), atol=1e-15)


def _one_quaternion_cases() -> tuple[np.ndarray, np.ndarray]:
    """Unit quaternions (both signs of w, near identity below and above the series' switch, half turns, signed
    zeros) and rotation vectors (tiny to beyond a turn)."""
    rng = np.random.default_rng(21)
    quaternions = rng.normal(size=(400, 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    small = np.concatenate([np.ones((6, 1)), np.array([1e-9, 3e-7, 9.9e-7, 1e-6, 2e-6, 1e-3])[:, None]
                            * rng.normal(size=(6, 3))], axis=1)
    special = [[1.0, 0, 0, 0], [-1.0, 0, 0, 0], [0.0, 1, 0, 0], [-0.0, 0, 0, -1], [0.0, -0.0, 0.6, 0.8]]
    quaternions = np.concatenate([quaternions, small / np.linalg.norm(small, axis=1, keepdims=True), special,
                                  -small])
    vectors = np.concatenate([rng.normal(size=(300, 3)) * rng.choice([1e-9, 1e-7, 1e-3, 1.0, 4.0], (300, 1)),
                              np.zeros((1, 3)), [[np.pi, 0, 0], [0, 0, -2 * np.pi]]])
    return quaternions, vectors


def test_one_quaternion_paths_equal_the_batched_path_bit_for_bit():
    quaternions, vectors = _one_quaternion_cases()
    others = np.roll(quaternions, 3, axis=0)
    products, conjugates = quat_multiply(quaternions, others), quat_conjugate(quaternions)
    logs, exps = quat_to_rotvec(quaternions), rotvec_to_quat(vectors)
    for q, r, product, conjugate, log in zip(quaternions, others, products, conjugates, logs, strict=True):
        np.testing.assert_array_equal(quat_multiply(q, r), product)
        np.testing.assert_array_equal(quat_conjugate(q), conjugate)
        np.testing.assert_array_equal(quat_to_rotvec(q), log)
        assert quat_multiply(list(q), tuple(r)).shape == (4,) and quat_to_rotvec(list(q)).shape == (3,)
    for r, exp in zip(vectors, exps, strict=True):
        np.testing.assert_array_equal(rotvec_to_quat(r), exp)
        assert rotvec_to_quat(list(r)).dtype == np.float64


def test_one_quaternion_paths_match_scipy_and_the_rotation_group():
    quaternions, vectors = _one_quaternion_cases()
    for q, r in zip(quaternions[:50], vectors[:50], strict=True):
        # R(q ⊗ p) = R(q) R(p); q ⊗ q* = identity; the logarithm and the exponential are scipy's rotation vector
        p = rotvec_to_quat(r)
        np.testing.assert_allclose(quat_to_matrix(quat_multiply(q, p)), quat_to_matrix(q) @ quat_to_matrix(p),
                                   atol=1e-15)
        np.testing.assert_allclose(quat_multiply(q, quat_conjugate(q)), [1.0, 0, 0, 0], atol=1e-15)
        np.testing.assert_allclose(quat_to_rotvec(q), Rotation.from_quat(q, scalar_first=True).as_rotvec(),
                                   atol=1e-14)
        np.testing.assert_allclose(quat_to_matrix(p), Rotation.from_rotvec(r).as_matrix(), atol=1e-14)
    # about z by an angle a: (cos a/2, 0, 0, sin a/2); the logarithm takes the shorter way round, q and -q alike
    a = 2.5
    np.testing.assert_allclose(rotvec_to_quat([0.0, 0.0, a]), [np.cos(a / 2), 0, 0, np.sin(a / 2)], atol=1e-16)
    np.testing.assert_allclose(quat_to_rotvec(-rotvec_to_quat([0.0, 0.0, a])), [0, 0, a], atol=1e-15)
    np.testing.assert_allclose(quat_to_rotvec(rotvec_to_quat([0.0, 0.0, 2 * np.pi - a])), [0, 0, -a], atol=1e-14)


def test_quaternion_rule_accepts_near_unit_and_names_the_first_bad_entry():
    tol = QUAT_NORM_TOLERANCE
    q = np.array([[1.0, 0, 0, 0], [0, 0, 0, 1 + 0.99 * tol], [0, 0, 0, 1 + 1.01 * tol], [0, 0, 0, 0],
                  [np.nan, 0, 0, 1], [np.inf, 0, 0, 0]])
    ok, norm = quat_validity(q)
    assert ok.tolist() == [True, True, False, False, False, False]
    np.testing.assert_allclose(norm[:4], [1.0, 1 + 0.99 * tol, 1 + 1.01 * tol, 0.0])
    assert np.isnan(norm[4:]).all()
    np.testing.assert_array_equal(quat_normalize(q[1]), [0, 0, 0, 1])
    for row, reason in [(2, "norm 1.00101 is not within 0.001 of 1"), (3, "zero"), (4, "non-finite")]:
        batch = np.tile(q[0], (2, 3, 1))
        batch[1, 2] = q[row]
        with pytest.raises(QuaternionError, match=reason) as info:
            quat_normalize(batch)
        assert "batch index (1, 2)" in str(info.value)
