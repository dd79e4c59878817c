"""Odometry of a floating base from the estimator's solve: the child-frame twist, and covariances a filter can use.

You are in the ROS-free estimator core: numpy and the estimator's own compiled kinematics, nothing of ROS. The node
(``ros_dofkit.ros.estimator_messages``) turns these arrays into ``nav_msgs/Odometry``, offline replay takes the
twist from here too; robot_localization fuses such a message only when its covariances say what is known, so they
are computed here from the same least squares the estimator solves.

**Twist (REP-105: expressed in the child frame B).** A floating joint's velocities are ``v = [w_FM_F, v_FM_F]``
with its parent frame F fixed in the world W and M = B, so

    w_WB_B = R_WB^T R_WF w_FM_F,        v_WBo_B = R_WB^T R_WF v_FM_F.

**Covariance of a weighted least squares.** The estimator's orientation solve minimizes
``sum_i w_i |e_i(q)|^2`` over the free coordinates, ``e_i`` the rotation-vector error of IMU i (3 components,
expressed in W) with angular Jacobian ``J_i`` (3 x nv, restricted to the free columns). Linearized at the
solution (Gauss-Newton), a measurement error ``n_i`` (isotropic, variance ``s_i^2`` per axis) moves the estimate by
``dq = H^+ sum_i w_i J_i^T n_i`` with the normal matrix ``H = sum_i w_i J_i^T J_i``; hence

    Sigma_q = H^+ ( sum_i w_i^2 s_i^2 J_i^T J_i ) H^+

which is ``H^+`` when the weights are the inverse variances (``w_i = 1 / s_i^2``) and
``s^2 (sum_i J_i^T J_i)^+`` for equal weights and noise. The gyro solve (``velocity.py``) is the same least squares
with ``w_i = 1`` and the gyro noise (its prior weight is negligible), so the same function gives the
velocity covariance. Directions of the free coordinates no sensor sees (the null space of H) get
:data:`UNOBSERVED_VARIANCE`; coordinates that are not free (measured, held) are not random in this solve and keep
0 here: the caller says what they are (a held base translation is unobserved, never 0).

**Which coordinates no IMU constrains.** A free coordinate k is determined by the IMUs iff the unit vector e_k
lies in the row space of the stacked Jacobian, i.e. the resolution matrix ``P = J^+ J`` has ``P_kk = 1``; with one
IMU and eight free joints the rank is 3 and most ``P_kk`` are below 1 (:func:`unconstrained_coordinates`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The compiled kinematics (forward kinematics + angular Jacobians in microseconds): the same numbers the
# estimator's solve used, at a cost a 500 Hz cycle affords.
from ros_dofkit.core.multibody import compiled as kinematics

#: Variance given to a component no sensor observes (rad^2, m^2, (rad/s)^2 or (m/s)^2): large enough for a
#: filter to ignore it, finite so that the matrix stays usable (robot_localization rejects neither).
UNOBSERVED_VARIANCE = 1.0e6

#: Relative eigenvalue of the normal matrix below which a direction counts as unobserved.
RANK_TOLERANCE = 1e-9


class OdometryInputError(ValueError):
    """Arrays given to the odometry functions have inconsistent shapes or values."""


@dataclass(frozen=True)
class ChildTwist:
    """A twist expressed in the child frame B: ``linear`` = v_WBo_B (..., 3), ``angular`` = w_WB_B (..., 3)."""

    linear: np.ndarray
    angular: np.ndarray


@dataclass(frozen=True)
class OdometryCovariance:
    """Row-major 6x6 covariances of ``nav_msgs/Odometry``, order (x, y, z, rot x, rot y, rot z): ``pose`` in the
    header (odometry) frame, ``twist`` in the child frame."""

    pose: np.ndarray
    twist: np.ndarray


def child_frame_twist(R_WB, R_WF, v_joint) -> ChildTwist:
    """The Odometry twist of a floating joint: ``R_WB`` (..., 3, 3), ``R_WF`` (3, 3) of its parent frame,
    ``v_joint`` (..., 6) = [w_FM_F, v_FM_F]; leading axes broadcast (one cycle or a whole run at once)."""
    R_WB = np.asarray(R_WB, dtype=float)
    v_joint = np.asarray(v_joint, dtype=float)
    if R_WB.shape[-2:] != (3, 3) or v_joint.shape[-1] != 6 or np.shape(R_WF) != (3, 3):
        raise OdometryInputError(f"expected R_WB (..., 3, 3), R_WF (3, 3), v_joint (..., 6); got {R_WB.shape}, "
                                 f"{np.shape(R_WF)}, {v_joint.shape}")
    R_BF = np.swapaxes(R_WB, -1, -2) @ np.asarray(R_WF, dtype=float)
    return ChildTwist(linear=np.einsum("...ij,...j->...i", R_BF, v_joint[..., 3:]),
                      angular=np.einsum("...ij,...j->...i", R_BF, v_joint[..., :3]))


def _stacked(jacobians, free) -> tuple[np.ndarray, np.ndarray]:
    J = np.asarray(jacobians, dtype=float)
    free = np.asarray(free, dtype=bool)
    if J.ndim != 3 or J.shape[1] != 3 or free.shape != (J.shape[2],):
        raise OdometryInputError(f"expected jacobians (k, 3, nv) and free (nv,), got {J.shape} and {free.shape}")
    return J[:, :, free], free


def least_squares_covariance(jacobians, weights, noise_variances, free) -> np.ndarray:
    """``Sigma`` (nv, nv) of the weighted least squares of the module docstring.

    Args:
        jacobians: (k, 3, nv) angular Jacobians of the k sensors that took part (at the solution).
        weights: (k,) their weights ``w_i`` >= 0 in the solve.
        noise_variances: (k,) per-axis variance ``s_i^2`` of each sensor's error (rad^2, or (rad/s)^2 for gyros).
        free: (nv,) bool, the coordinates solved for; the rows and columns of the others stay 0.
    """
    J, free = _stacked(jacobians, free)
    w = np.asarray(weights, dtype=float).reshape(-1)
    s2 = np.asarray(noise_variances, dtype=float).reshape(-1)
    if w.shape != (J.shape[0],) or s2.shape != (J.shape[0],) or not (w.min(initial=0.0) >= 0 <= s2.min(
            initial=0.0) and np.isfinite(w.sum() + s2.sum())):
        raise OdometryInputError(f"expected {J.shape[0]} finite weights and noise variances >= 0, got {w!r} and "
                                 f"{s2!r}")
    k, n = J.shape[0], J.shape[2]
    sigma = np.zeros((free.size, free.size))
    if n == 0:
        return sigma
    # Plain 2-D products: a cycle's matrices are tiny, and einsum/tensordot cost more in call overhead than in work.
    A = J.reshape(3 * k, n)
    A_T = A.T
    H = (A_T * np.repeat(w, 3)) @ A
    M = (A_T * np.repeat(w * w * s2, 3)) @ A
    eigenvalues, V = np.linalg.eigh(H)
    observed = eigenvalues > RANK_TOLERANCE * max(float(eigenvalues[-1]), 1e-300)
    V_seen = V[:, observed]
    H_plus = (V_seen / eigenvalues[observed]) @ V_seen.T
    V_null = V[:, ~observed]
    sigma_free = H_plus @ M @ H_plus + UNOBSERVED_VARIANCE * (V_null @ V_null.T)
    index = np.flatnonzero(free)
    sigma[index[:, None], index] = sigma_free
    return sigma


def unconstrained_coordinates(jacobians, free, names, tolerance: float = 1e-6) -> tuple:
    """Names of the free coordinates the sensors do not fully determine (``P_kk < 1 - tolerance`` with the
    resolution matrix ``P = J^+ J`` of the stacked angular Jacobians, restricted to the free columns), in order."""
    J, free = _stacked(jacobians, free)
    names = list(names)
    if len(names) != free.size:
        raise OdometryInputError(f"expected {free.size} coordinate names, got {len(names)}")
    A = J.reshape(-1, J.shape[2])
    P = np.linalg.pinv(A, rcond=1e-10) @ A if A.size else np.zeros((J.shape[2], J.shape[2]))
    free_names = [name for name, keep in zip(names, free, strict=True) if keep]
    return tuple(name for name, p in zip(free_names, np.diag(P), strict=True) if p < 1.0 - tolerance)


def floating_base_covariance(v_start: int, R_WF, R_WB, sigma_orientation, sigma_velocity) -> OdometryCovariance:
    """Odometry covariances of the floating joint whose velocities start at ``v_start``.

    ``sigma_orientation`` and ``sigma_velocity`` (nv, nv) come from :func:`least_squares_covariance` of the
    orientation and gyro solves. The rotation block ``Sigma_F`` (small rotations in the joint's parent frame F) is
    turned into the header frame W as ``R_WF Sigma_F R_WF^T``, the angular-velocity block into the child frame B as
    ``R_BF Sigma R_BF^T``. The orientation sensors observe neither the base translation (held) nor its velocity
    (finite differences of a held value): those blocks are :data:`UNOBSERVED_VARIANCE` on the diagonal.
    """
    R_WF = np.asarray(R_WF, dtype=float)
    R_BF = np.asarray(R_WB, dtype=float).T @ R_WF
    rotation = slice(v_start, v_start + 3)
    pose = np.zeros((6, 6))
    twist = np.zeros((6, 6))
    pose[:3, :3] = twist[:3, :3] = UNOBSERVED_VARIANCE * np.eye(3)
    pose[3:, 3:] = R_WF @ np.asarray(sigma_orientation)[rotation, rotation] @ R_WF.T
    twist[3:, 3:] = R_BF @ np.asarray(sigma_velocity)[rotation, rotation] @ R_BF.T
    return OdometryCovariance(pose=pose, twist=twist)


def free_velocities(estimator) -> np.ndarray:
    """(nv,) bool: the velocities an :class:`~ros_dofkit.core.estimator.estimator.Estimator` solves for (its
    estimated articulated coordinates, and the rotation of every floating base, which is always estimated)."""
    return estimator.setup.free_v.copy()


@dataclass(frozen=True)
class SolveCovariances:
    """``orientation`` and ``velocity`` (nv, nv): :func:`least_squares_covariance` of one cycle's two solves."""

    orientation: np.ndarray
    velocity: np.ndarray


class SolveCovarianceModel:
    """The covariances of an estimator's cycles, from its IMUs' angular Jacobians at each cycle's solution.

    ``orientation_variance`` (rad^2) and ``angular_velocity_variance`` ((rad/s)^2) are the per-axis noise of
    every IMU's orientation and gyro; the orientation solve's weights are the IMUs' configured ``weight``. Only
    the IMUs observed in a cycle take part (a stale or uncalibrated one constrains nothing). ``free`` (nv,) bool
    is :func:`free_velocities` of the estimator.
    """

    def __init__(self, estimator, orientation_variance: float, angular_velocity_variance: float):
        for name, value in (("orientation_variance", orientation_variance),
                            ("angular_velocity_variance", angular_velocity_variance)):
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise OdometryInputError(f"{name}: expected a finite number > 0, got {value!r}")
        self._estimator = estimator
        self._tree = estimator.plant.tree.kernel_arguments()
        self.free = free_velocities(estimator)
        self._orientation_variance = float(orientation_variance)
        self._angular_velocity_variance = float(angular_velocity_variance)

    def jacobians(self, q, sensors) -> np.ndarray:
        """(k, 3, nv) angular Jacobians of the bodies carrying ``sensors`` (IMU names) at ``q``."""
        nb, nv = self._tree.parent.shape[0], self.free.size
        X_WB, R_WF, p_WM = np.empty((nb, 4, 4)), np.empty((nb, 3, 3)), np.empty((nb, 3))
        kinematics.forward_kinematics(self._tree, np.ascontiguousarray(q, dtype=float), X_WB, R_WF, p_WM)
        J = np.empty((6, nv))
        jacobians = np.empty((len(sensors), 3, nv))
        for k, name in enumerate(sensors):
            kinematics.point_jacobian(self._tree, R_WF, p_WM, self._estimator.imu_body(name).index, np.zeros(3),
                                      False, J)
            jacobians[k] = J[:3]
        return jacobians

    def covariances(self, result) -> SolveCovariances:
        """The covariances of ``result``'s cycle (an EstimatorResult)."""
        sensors = tuple(result.observed_sensors)
        J = self.jacobians(result.q, sensors)
        weights = {imu.name: imu.weight for imu in self._estimator.config.imus}
        k = len(sensors)
        return SolveCovariances(
            orientation=least_squares_covariance(J, [weights[name] for name in sensors],
                                                 np.full(k, self._orientation_variance), self.free),
            velocity=least_squares_covariance(J, np.ones(k), np.full(k, self._angular_velocity_variance),
                                              self.free),
        )


def unconstrained_estimated_coordinates(estimator, offset: float = 0.3) -> tuple:
    """The velocity names of the free coordinates that the IMUs with a weight do not constrain
    (:func:`unconstrained_coordinates`), at a generic pose near the default: each articulated coordinate moved by
    ``offset`` (rad or m) inside its limits, so that a default pose that happens to align joint axes (a singular
    configuration) does not report coordinates every other pose determines."""
    plant = estimator.plant
    q = np.asarray(plant.default_positions(), dtype=float).copy()
    view = estimator.articulated_view
    q_art = np.asarray(view.q_indices)
    lower, upper = (np.asarray(limits, dtype=float)[q_art] for limits in
                    (plant.position_lower_limits(), plant.position_upper_limits()))
    q[q_art] = np.clip(q[q_art] + offset, lower, upper)
    sensors = [imu.name for imu in estimator.config.imus if imu.weight > 0]
    model = SolveCovarianceModel(estimator, 1.0, 1.0)
    J = model.jacobians(q, sensors)
    return unconstrained_coordinates(J, model.free, plant.velocity_names())
