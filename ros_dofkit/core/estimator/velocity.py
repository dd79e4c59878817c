"""Generalized velocities from gyros: least squares through the angular Jacobians, finite differences elsewhere.

You are in the ROS-free estimator core. Each gyro measures w_S (the angular velocity of its sensor frame S,
expressed in S, REP-145). In the model world that is

    w_WS_W = R_WS(q) w_S = J_w,B(q) v          (J_w,B: angular Jacobian of the sensor's body B, 3 x nv)

Stacking the k sensors gives A v = b. The estimator knows some velocities already (measured dofs: encoder
velocities or finite differences) and wants the free ones. With a prior v0 (finite differences of q) we solve

    min over dv_free   sum_k |A_k,free dv_free - (b_k - A_k v0)|^2 + lam |dv_free|^2,   v = v0 + dv

so directions the gyros see are fixed by the gyros (lam is tiny) and directions they cannot see (prismatic
joints, base translation, joints no sensor is downstream of, or more dofs than gyro components) keep the
finite-difference value. The resolution matrix R = (A^T A + lam I)^-1 A^T A tells which is which: a dof whose
diagonal entry exceeds 1/2 is reported as gyro-determined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class VelocityInputError(ValueError):
    """Arrays given to the velocity solver have inconsistent shapes."""


@dataclass(frozen=True)
class VelocitySolution:
    """``v`` (nv,) and ``from_gyro`` (nv,) bool: True where the gyros determined the value."""

    v: np.ndarray
    from_gyro: np.ndarray


def solve_velocities_from_gyros(J_w_W, w_W, free, v_prior, regularization: float = 1e-6) -> VelocitySolution:
    """Solve the regularized least squares above.

    Args:
        J_w_W: (k, 3, nv) angular Jacobians (rows w_WB_W with respect to v) of the k sensors' bodies.
        w_W: (k, 3) measured angular velocities expressed in W (R_WS w_S).
        free: (nv,) bool, the velocities to solve for; the others stay at ``v_prior``.
        v_prior: (nv,) prior velocities (finite differences, encoder velocities for measured dofs).
        regularization: lam > 0, the weight of the prior.
    """
    J = np.asarray(J_w_W, dtype=float)
    w = np.asarray(w_W, dtype=float)
    free = np.asarray(free, dtype=bool)
    v_prior = np.asarray(v_prior, dtype=float)
    nv = v_prior.shape[0] if v_prior.ndim == 1 else -1
    if v_prior.ndim != 1 or free.shape != (nv,):
        raise VelocityInputError(
            f"expected v_prior (nv,) and free (nv,), got shapes {v_prior.shape} and {free.shape}"
        )
    if J.ndim != 3 or J.shape[1:] != (3, nv) or w.shape != (J.shape[0], 3):
        raise VelocityInputError(
            f"expected J_w_W (k, 3, {nv}) and w_W (k, 3), got shapes {J.shape} and {w.shape}"
        )
    if not regularization > 0.0:
        raise VelocityInputError(f"regularization must be > 0, got {regularization!r}")
    from_gyro = np.zeros(nv, dtype=bool)
    if J.shape[0] == 0 or not np.any(free):
        return VelocitySolution(v_prior.copy(), from_gyro)
    A = J.reshape(-1, nv)
    residual = w.reshape(-1) - A @ v_prior
    A_free = A[:, free]
    normal = A_free.T @ A_free
    lhs = normal + regularization * np.eye(normal.shape[0])
    dv_free = np.linalg.solve(lhs, A_free.T @ residual)
    v = v_prior.copy()
    v[free] += dv_free
    resolution = np.linalg.solve(lhs, normal)
    from_gyro[np.flatnonzero(free)] = np.diag(resolution) > 0.5
    return VelocitySolution(v, from_gyro)
