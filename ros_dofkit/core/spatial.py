"""Rotations, quaternions and rigid transforms, batched over leading axes.

Where you are: ``ros_dofkit.core``, at the bottom: imports NumPy and numba (SciPy lazily, for one reference path)
and no other package module; every layer uses it.

Conventions (DESIGN.md):

* Quaternions are scalar-first ``(w, x, y, z)`` and Hamilton (``i*j = k``). They appear as
  ``(x, y, z, w)`` only at the ROS edge (``ros_dofkit.ros``).
* ``R_AB`` is the orientation of frame B in frame A: it maps a vector expressed in B to A,
  ``v_A = R_AB @ v_B``. ``X_AB`` is the 4x4 homogeneous pose of B in A.
* Every function accepts arrays with any number of leading batch axes: a quaternion argument has
  shape ``(..., 4)``, a rotation ``(..., 3, 3)``, a vector ``(..., 3)``, a transform ``(..., 4, 4)``.

Everything here is a formula, not policy, except :func:`quat_normalize`, which implements the
project's tolerance rule for quaternions that arrive from outside (SPEC section 9.7).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: A quaternion whose norm differs from 1 by more than this is rejected rather than normalized.
QUAT_NORM_TOLERANCE = 1e-3

# Below this rotation angle the series expansions are used (their truncation error is far below
# double precision there).
_SMALL_ANGLE = 1e-6


class QuaternionError(ValueError):
    """A quaternion is zero, not finite, or too far from unit length to be a rotation."""


def quat_validity(q, tolerance: float = QUAT_NORM_TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
    """``(ok, norm)`` per quaternion of ``q`` (..., 4): ``ok`` is True when every entry is finite and
    ``| |q| - 1 | <= tolerance`` (so a zero quaternion is never ok); ``norm`` is ``|q|`` (NaN where an entry is
    not finite). The rule of :func:`quat_normalize`, for callers that must name the offending entry themselves.
    """
    q = np.asarray(q, dtype=float)
    finite = np.all(np.isfinite(q), axis=-1)
    norm = np.where(finite, np.linalg.norm(np.where(finite[..., None], q, 0.0), axis=-1), np.nan)
    with np.errstate(invalid="ignore"):
        ok = finite & (norm > 0.0) & (np.abs(norm - 1.0) <= tolerance)
    return ok, norm


def describe_quaternion_problem(quat, norm: float, tolerance: float = QUAT_NORM_TOLERANCE) -> str:
    """Why one quaternion failed :func:`quat_validity`: non-finite, zero, or its norm outside the tolerance."""
    quat = np.asarray(quat, dtype=float)
    if not np.all(np.isfinite(quat)):
        return f"quaternion {quat.tolist()} has a non-finite entry"
    if norm == 0.0:
        return "quaternion is zero (no rotation)"
    return f"quaternion norm {norm:.6g} is not within {tolerance:g} of 1"


def quat_normalize(q, tolerance: float = QUAT_NORM_TOLERANCE) -> np.ndarray:
    """Return ``q / |q|`` after checking that ``q`` is a plausible unit quaternion.

    A quaternion is accepted when every entry is finite and ``| |q| - 1 | <= tolerance``; the
    result is exactly normalized. Raises :class:`QuaternionError` naming the offending norm (and
    batch index) otherwise. Pass ``tolerance=np.inf`` to accept any finite nonzero quaternion.
    """
    q = np.asarray(q, dtype=float)
    if q.shape[-1:] != (4,):
        raise QuaternionError(f"expected a quaternion (w, x, y, z) of shape (..., 4), got shape {q.shape}")
    ok, norm = quat_validity(q, tolerance)
    if not np.all(ok):
        index = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
        raise QuaternionError(
            f"{describe_quaternion_problem(q[index], float(norm[index]), tolerance)} at batch index {index}; "
            "a zero, non-finite or non-unit quaternion is not a rotation"
        )
    return q / norm[..., None]


def quat_conjugate(q) -> np.ndarray:
    """Conjugate ``(w, -x, -y, -z)``; the inverse of a unit quaternion."""
    q = np.asarray(q, dtype=float)
    if q.shape == (4,):  # one quaternion: x * -1.0 is -x exactly
        w, x, y, z = q.tolist()
        return np.array([w, -x, -y, -z])
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_multiply(q, r) -> np.ndarray:
    """Hamilton product ``q ⊗ r``; for unit quaternions R(q ⊗ r) = R(q) R(r)."""
    q = np.asarray(q, dtype=float)
    r = np.asarray(r, dtype=float)
    if q.shape == r.shape == (4,):
        # One pair (the per-cycle case): the expression below on Python floats, the same IEEE operations in the
        # same order, so the same bits, at a tenth of the array path's cost (moveaxis and stack dominate it).
        w1, x1, y1, z1 = q.tolist()
        w2, x2, y2, z2 = r.tolist()
        return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                         w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                         w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                         w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    w1, x1, y1, z1 = np.moveaxis(q, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(r, -1, 0)
    return np.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        axis=-1,
    )


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (no normalization is done here)."""
    q = np.asarray(q, dtype=float)
    if q.shape == (4,):
        # One quaternion (the estimator's per-sample case): the same operations on Python floats give the same
        # IEEE results as the array path below at a fifth of its cost.
        w, x, y, z = q.tolist()
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    w, x, y, z = np.moveaxis(q, -1, 0)
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - w * z)
    R[..., 0, 2] = 2 * (x * z + w * y)
    R[..., 1, 0] = 2 * (x * y + w * z)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - w * x)
    R[..., 2, 0] = 2 * (x * z - w * y)
    R[..., 2, 1] = 2 * (y * z + w * x)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


@njit(cache=True)
def matrix_to_quat_into(R, q):  # pragma: no cover - compiled
    """scipy's ``Rotation.from_matrix`` for proper orthonormal matrices R (n, 3, 3) into q (n, 4) as (w, x, y, z).

    Markley's method as scipy implements it: pivot on the largest of (R00, R11, R22, trace) (the first on a tie);
    with pivot i (j, k the next axes cyclically) q_i = 1 - trace + 2 R_ii, q_j = R_ji + R_ij, q_k = R_ki + R_ik,
    w = R_kj - R_jk; with the trace, (x, y, z) = (R21 - R12, R02 - R20, R10 - R01), w = 1 + trace; then
    normalized. Returns False (q unspecified) when a matrix fails scipy's orthonormality test (|R R^T - I| <=
    1e-12 + 1e-5 |I| elementwise) or has det <= 0: scipy then projects it (SVD) or raises, so the caller lets
    scipy do it. The quaternions written are canonicalized to w >= 0 (negated where w < 0)."""
    for m in range(R.shape[0]):
        A = R[m]
        for a in range(3):
            for b in range(3):
                g = A[a, 0] * A[b, 0] + A[a, 1] * A[b, 1] + A[a, 2] * A[b, 2]
                if a == b:
                    if not abs(g - 1.0) <= 1e-12 + 1e-5:
                        return False
                elif not abs(g) <= 1e-12:
                    return False
        det = (A[0, 0] * (A[1, 1] * A[2, 2] - A[1, 2] * A[2, 1]) - A[0, 1] * (A[1, 0] * A[2, 2] - A[1, 2] * A[2, 0])
               + A[0, 2] * (A[1, 0] * A[2, 1] - A[1, 1] * A[2, 0]))
        if not det > 0.0:
            return False
        trace = A[0, 0] + A[1, 1] + A[2, 2]
        choice = 3
        best = trace
        for d in range(2, -1, -1):  # the first maximum wins, as argmax([R00, R11, R22, trace])
            if A[d, d] >= best:
                best = A[d, d]
                choice = d
        # Scalars, not a 4-array per matrix (an allocation each); the same operations in the same order.
        if choice < 3:
            i = choice
            j = (i + 1) % 3
            k = (j + 1) % 3
            qi = 1.0 - trace + 2.0 * A[i, i]
            qj = A[j, i] + A[i, j]
            qk = A[k, i] + A[i, k]
            w = A[k, j] - A[j, k]
            if i == 0:
                x, y, z = qi, qj, qk
            elif i == 1:
                x, y, z = qk, qi, qj
            else:
                x, y, z = qj, qk, qi
        else:
            x = A[2, 1] - A[1, 2]
            y = A[0, 2] - A[2, 0]
            z = A[1, 0] - A[0, 1]
            w = 1.0 + trace
        norm = np.sqrt(x ** 2 + y ** 2 + z ** 2 + w ** 2)
        # Canonical sign (w >= 0) here: negation is exact, as the caller's flip of the whole array was.
        sign = -1.0 if w / norm < 0.0 else 1.0
        q[m, 0] = sign * (w / norm)
        q[m, 1] = sign * (x / norm)
        q[m, 2] = sign * (y / norm)
        q[m, 3] = sign * (z / norm)
    return True


def matrix_to_quat(R) -> np.ndarray:
    """Unit quaternion of a rotation matrix, canonicalized to ``w >= 0``.

    Same results as ``scipy.spatial.transform.Rotation.from_matrix`` (a non-orthonormal matrix is projected
    onto SO(3) by scipy, det <= 0 raises its ValueError); proper rotations are computed by a compiled kernel at any
    batch size (scipy's per-call cost, 0.1-0.2 ms, dominated the node's few matrices per cycle, and its per-matrix
    cost a whole replay's output), scipy only for the matrices the kernel declines."""
    R = np.asarray(R, dtype=float)
    batch = R.shape[:-2]
    R = np.ascontiguousarray(R.reshape(-1, 3, 3))
    q = np.empty((R.shape[0], 4))
    if not matrix_to_quat_into(R, q):
        # Imported here, on the rare path: scipy.spatial adds ~0.2 s to every process that imports this module.
        from scipy.spatial.transform import Rotation

        q = Rotation.from_matrix(R).as_quat(scalar_first=True)
        q = np.where(q[:, :1] < 0.0, -q, q)
    return q.reshape(batch + (4,))


def quat_rotate(q, p) -> np.ndarray:
    """Rotate vector ``p`` by unit quaternion ``q``: ``R(q) @ p``."""
    q = np.asarray(q, dtype=float)
    p = np.asarray(p, dtype=float)
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, p)
    return p + w * t + np.cross(u, t)


def skew(w) -> np.ndarray:
    """Cross-product matrix ``[w]x`` with ``[w]x @ p == cross(w, p)``."""
    w = np.asarray(w, dtype=float)
    S = np.zeros(w.shape[:-1] + (3, 3))
    S[..., 0, 1] = -w[..., 2]
    S[..., 0, 2] = w[..., 1]
    S[..., 1, 0] = w[..., 2]
    S[..., 1, 2] = -w[..., 0]
    S[..., 2, 0] = -w[..., 1]
    S[..., 2, 1] = w[..., 0]
    return S


def rotvec_to_quat(r) -> np.ndarray:
    """Exponential map: rotation vector ``r = θ n̂`` to ``(cos θ/2, sin(θ/2) n̂)``."""
    r = np.asarray(r, dtype=float)
    if r.shape == (3,):
        # One vector: the array path's operations on Python floats (the norm summed left to right as NumPy's
        # reduction does, sin and cos through NumPy's own scalar loops), the same bits.
        x, y, z = r.tolist()
        theta = math.sqrt(x * x + y * y + z * z)
        half = 0.5 * theta
        scale = 0.5 - theta * theta / 48.0 if theta < _SMALL_ANGLE else float(np.sin(half)) / theta
        return np.array([float(np.cos(half)), scale * x, scale * y, scale * z])
    theta = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * theta
    small = theta < _SMALL_ANGLE
    # sin(θ/2)/θ, with its Taylor series 1/2 - θ²/48 near zero.
    scale = np.where(small, 0.5 - theta * theta / 48.0, np.sin(half) / np.where(small, 1.0, theta))
    return np.concatenate([np.cos(half), scale * r], axis=-1)


def quat_to_rotvec(q) -> np.ndarray:
    """Logarithm map of a unit quaternion: rotation vector ``θ n̂`` with ``θ`` in ``[0, π]``.

    ``q`` and ``-q`` give the same result (the shorter rotation is returned).
    """
    q = np.asarray(q, dtype=float)
    if q.shape == (4,):
        # One quaternion: the array path's operations on Python floats (atan2 through NumPy's scalar loop, whose
        # SIMD kernel can differ from libm's by an ulp), the same bits.
        w, x, y, z = q.tolist()
        if w < 0.0:
            w, x, y, z = -w, -x, -y, -z
        s = math.sqrt(x * x + y * y + z * z)
        scale = 2.0 / w if s < _SMALL_ANGLE else 2.0 * float(np.arctan2(s, w)) / s
        return np.array([scale * x, scale * y, scale * z])
    q = np.where(q[..., :1] < 0.0, -q, q)
    w = q[..., :1]
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    theta = 2.0 * np.arctan2(s, w)
    small = s < _SMALL_ANGLE
    # θ/sin(θ/2) with its series 2 + θ²/12 near zero (there w ≈ 1, θ ≈ 2 s).
    scale = np.where(small, 2.0 / np.where(small, w, 1.0), theta / np.where(small, 1.0, s))
    return scale * v


def rotvec_to_matrix(r) -> np.ndarray:
    """Rodrigues' formula, via the quaternion."""
    return quat_to_matrix(rotvec_to_quat(r))


def matrix_to_rotvec(R) -> np.ndarray:
    """Rotation vector of a rotation matrix, angle in ``[0, π]``."""
    return quat_to_rotvec(matrix_to_quat(R))


def rotation_angle(R) -> np.ndarray:
    """Rotation angle in ``[0, π]`` of ``R`` (use ``R_AB.T @ R_AC`` for the angle between B and C)."""
    R = np.asarray(R, dtype=float)
    return np.linalg.norm(matrix_to_rotvec(R), axis=-1)


def rotation_x(angle) -> np.ndarray:
    """``R_x(angle)``, batched over the shape of ``angle``."""
    c, s = np.cos(angle), np.sin(angle)
    one, zero = np.ones_like(c), np.zeros_like(c)
    return np.stack([np.stack([one, zero, zero], -1), np.stack([zero, c, -s], -1), np.stack([zero, s, c], -1)], -2)


def rotation_y(angle) -> np.ndarray:
    """``R_y(angle)``, batched over the shape of ``angle``."""
    c, s = np.cos(angle), np.sin(angle)
    one, zero = np.ones_like(c), np.zeros_like(c)
    return np.stack([np.stack([c, zero, s], -1), np.stack([zero, one, zero], -1), np.stack([-s, zero, c], -1)], -2)


def rotation_z(angle) -> np.ndarray:
    """``R_z(angle)``, batched over the shape of ``angle``."""
    c, s = np.cos(angle), np.sin(angle)
    one, zero = np.ones_like(c), np.zeros_like(c)
    return np.stack([np.stack([c, -s, zero], -1), np.stack([s, c, zero], -1), np.stack([zero, zero, one], -1)], -2)


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF / REP-103 fixed-axis roll-pitch-yaw: ``R = R_z(yaw) R_y(pitch) R_x(roll)``."""
    rpy = np.asarray(rpy, dtype=float)
    return rotation_z(rpy[..., 2]) @ rotation_y(rpy[..., 1]) @ rotation_x(rpy[..., 0])


def make_transform(R=None, p=None) -> np.ndarray:
    """4x4 pose from a rotation (default identity) and a translation (default zero)."""
    R = np.eye(3) if R is None else np.asarray(R, dtype=float)
    p = np.zeros(3) if p is None else np.asarray(p, dtype=float)
    batch = np.broadcast_shapes(R.shape[:-2], p.shape[:-1])
    X = np.zeros(batch + (4, 4))
    X[..., :3, :3] = R
    X[..., :3, 3] = p
    X[..., 3, 3] = 1.0
    return X


def invert_transform(X) -> np.ndarray:
    """``X_BA`` from ``X_AB``, using the orthogonality of the rotation block."""
    X = np.asarray(X, dtype=float)
    Rt = np.swapaxes(X[..., :3, :3], -1, -2)
    return make_transform(Rt, -(Rt @ X[..., :3, 3:4])[..., 0])
