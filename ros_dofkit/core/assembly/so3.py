"""Rotation-error math of the orientation-sensor assembly condition (reference NumPy implementation).

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy and ``core.spatial`` only.

For an orientation sensor S with current orientation ``R_GS`` and observed orientation ``R_GO`` (both in
ground G), Simbody's OrientationSensors measures the error rotation ``R_SO = R_GSᵀ R_GO`` (expressed in S) by
its angle-axis ``(a, n̂_S)``. ros_dofkit works with the *rotation-error vector expressed in G*,

    φ_G = a · R_GS n̂_S = log(R_GO R_GSᵀ)        (|φ_G| = |a| in [0, π]),

because a small rotation δ_G of the sensor's body (``R_GS -> exp([δ_G]x) R_GS``, δ_G = J_ω δv) changes it as

    φ_G(δ) = log(exp([φ_G]x) exp(-[δ_G]x)) = φ_G - J_r⁻¹(φ_G) δ_G + O(|δ|²),

with ``J_r⁻¹`` the inverse right Jacobian of SO(3). Hence ∂φ_G/∂v = -J_r⁻¹(φ_G) J_ω, and since
``J_r⁻¹(φ)ᵀ φ = φ`` the gradient of ½ a² with respect to δ_G is -φ_G = -a n̂_G: Simbody's body torque
``τ_G = R_GS (-a n̂_S)`` (SPEC section 3.4). Everything here is batched over leading axes.
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core import spatial

# Below this angle the series of the J_r⁻¹ coefficient is used; its truncation error (θ⁴/30240) is far below eps.
_SERIES_ANGLE = 1e-3


def simbody_rotation_angle(R_SO) -> np.ndarray:
    """Angle of a rotation as Simbody computes it: ``a = 2 atan2(|v|, w)`` of its quaternion, mapped into (−π, π].

    The quaternion is taken with ``w >= 0`` so the result lies in [0, π] (``a`` and the axis flip sign together,
    which leaves ``a n̂`` and ``a²`` unchanged). Simbody: ``Rotation::convertRotationToAngleAxis``.
    """
    quat = spatial.matrix_to_quat(R_SO)
    return 2.0 * np.arctan2(np.linalg.norm(quat[..., 1:], axis=-1), quat[..., 0])


def rotation_error_vector(R_GS, R_GO) -> np.ndarray:
    """``φ_G = a n̂_G``: the rotation carrying the sensor S onto the observation O, as a rotation vector in G.

    ``(a, n̂_S)`` is the angle-axis of ``R_SO = R_GSᵀ R_GO``; ``n̂_G = R_GS n̂_S``. Shapes ``(..., 3, 3)`` ->
    ``(..., 3)``.
    """
    R_GS = np.asarray(R_GS, dtype=float)
    R_GO = np.asarray(R_GO, dtype=float)
    R_SO = np.swapaxes(R_GS, -1, -2) @ R_GO
    phi_S = spatial.matrix_to_rotvec(R_SO)
    return (R_GS @ phi_S[..., None])[..., 0]


def inverse_right_jacobian_coefficient(theta) -> np.ndarray:
    """``c(θ) = (1 - (θ/2) cot(θ/2)) / θ²`` so that ``J_r⁻¹(φ) = I + ½[φ]x + c(θ)[φ]x²`` (θ = |φ|).

    Equal to ``1/θ² - (1 + cos θ) / (2 θ sin θ)``; finite on [0, π] (1/12 at 0, 1/π² at π).
    """
    theta = np.asarray(theta, dtype=float)
    small = theta < _SERIES_ANGLE
    safe = np.where(small, 1.0, theta)
    half = 0.5 * safe
    exact = (1.0 - half * np.cos(half) / np.sin(half)) / (safe * safe)
    series = 1.0 / 12.0 + theta * theta / 720.0
    return np.where(small, series, exact)


def inverse_right_jacobian(phi) -> np.ndarray:
    """``J_r⁻¹(φ) = I + ½[φ]x + c(|φ|)[φ]x²``: maps a right-perturbation of exp(φ) to the change of φ.

    Defining property: ``log(exp([φ]x) exp([η]x)) = φ + J_r⁻¹(φ) η + O(|η|²)``. Shapes ``(..., 3)`` ->
    ``(..., 3, 3)``.
    """
    phi = np.asarray(phi, dtype=float)
    S = spatial.skew(phi)
    c = inverse_right_jacobian_coefficient(np.linalg.norm(phi, axis=-1))
    return np.eye(3) + 0.5 * S + c[..., None, None] * (S @ S)


def is_rotation_matrix(R, tolerance: float = 1e-6) -> bool:
    """True when ``R`` is 3x3, finite, ``|RᵀR - I|_max <= tolerance`` and ``|det R - 1| <= tolerance``."""
    R = np.asarray(R, dtype=float)
    if R.shape != (3, 3) or not np.all(np.isfinite(R)):
        return False
    return bool(np.max(np.abs(R.T @ R - np.eye(3))) <= tolerance and abs(np.linalg.det(R) - 1.0) <= tolerance)
