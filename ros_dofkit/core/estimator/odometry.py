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
from numba import njit

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
    sigma_free = np.empty((n, n))
    _sandwich(np.ascontiguousarray(J.reshape(3 * k, n)), np.repeat(w, 3), np.repeat(w * w * s2, 3),
              UNOBSERVED_VARIANCE, RANK_TOLERANCE, sigma_free)
    index = np.flatnonzero(free)
    sigma[index[:, None], index] = sigma_free
    return sigma


@njit(cache=True, inline="always", error_model="numpy")
def _normal_matrices(A, w, m, H, M):
    """H = Aᵀ diag(w) A and M = Aᵀ diag(m) A (A (r, n); w, m (r,))."""
    r, n = A.shape
    for i in range(n):
        for j in range(i, n):
            h = 0.0
            g = 0.0
            for k in range(r):
                product = A[k, i] * A[k, j]
                h += w[k] * product
                g += m[k] * product
            H[i, j] = h
            H[j, i] = h
            M[i, j] = g
            M[j, i] = g


@njit(cache=True, inline="always", error_model="numpy")
def _pseudo_inverse(H, rank_tolerance, H_plus, null):
    """H⁺ over the eigenvectors of the symmetric H whose eigenvalue exceeds ``rank_tolerance`` times the largest,
    and ``null`` = V₀ V₀ᵀ the projector onto the others."""
    n = H.shape[0]
    eigenvalues, V = np.linalg.eigh(H)
    largest = max(eigenvalues[n - 1], 1e-300)
    H_plus[:, :] = 0.0
    null[:, :] = 0.0
    for e in range(n):
        seen = eigenvalues[e] > rank_tolerance * largest
        scale = 1.0 / eigenvalues[e] if seen else 1.0
        target = H_plus if seen else null
        for i in range(n):
            for j in range(n):
                target[i, j] += V[i, e] * V[j, e] * scale


@njit(cache=True, inline="always", error_model="numpy")
def _sandwich(A, w, m, unobserved, rank_tolerance, out):
    """out (n, n) = H⁺ M H⁺ + ``unobserved`` V₀ V₀ᵀ with H = Aᵀ diag(w) A, M = Aᵀ diag(m) A (the module
    docstring's formula, compiled: one cycle's covariance costs microseconds)."""
    n = A.shape[1]
    H, M, H_plus, null = np.empty((n, n)), np.empty((n, n)), np.empty((n, n)), np.empty((n, n))
    _normal_matrices(A, w, m, H, M)
    _pseudo_inverse(H, rank_tolerance, H_plus, null)
    out[:, :] = H_plus @ M @ H_plus + unobserved * null


@njit(cache=True, error_model="numpy")
def _cycle_covariances(tree, q, bodies, weights, orientation_variances, velocity_variance, free, unobserved,
                       rank_tolerance, sigma_orientation, sigma_velocity):
    """Both covariances of one cycle at ``q`` (:meth:`SolveCovarianceModel.covariances`): the sensors on ``bodies``
    with orientation ``weights`` and per-axis noise ``orientation_variances``; the gyro solve unweighted. ``free``
    (n,) the free velocity indices; the outputs (nv, nv) are zero outside them."""
    nb = tree.parent.shape[0]
    nv = sigma_orientation.shape[0]
    X_WB, R_WF, p_WM = np.empty((nb, 4, 4)), np.empty((nb, 3, 3)), np.empty((nb, 3))
    kinematics.forward_kinematics(tree, q, X_WB, R_WF, p_WM)
    k, n = bodies.shape[0], free.shape[0]
    A = np.empty((3 * k, n))
    J = np.empty((6, nv))
    origin = np.zeros(3)
    w = np.empty(3 * k)
    m = np.empty(3 * k)
    for i in range(k):
        kinematics.point_jacobian(tree, R_WF, p_WM, bodies[i], origin, False, J)
        for a in range(3):
            for j in range(n):
                A[3 * i + a, j] = J[a, free[j]]
            w[3 * i + a] = weights[i]
            m[3 * i + a] = weights[i] * weights[i] * orientation_variances[i]
    sigma_orientation[:, :] = 0.0
    sigma_velocity[:, :] = 0.0
    if n == 0:
        return
    equal = True
    for i in range(k):
        equal = equal and weights[i] == weights[0]
    orientation, velocity = np.empty((n, n)), np.empty((n, n))
    if equal and k > 0 and weights[0] > 0.0:
        # Equal weights c: H_o = c H_v, so one eigendecomposition serves both solves (the common case; each costs
        # tens of microseconds): Σ_o = H_o⁺ M_o H_o⁺ + U N and Σ_v = s_v² H_v⁺ + U N = s_v² c H_o⁺ + U N.
        H, M, H_plus, null = np.empty((n, n)), np.empty((n, n)), np.empty((n, n)), np.empty((n, n))
        _normal_matrices(A, w, m, H, M)
        _pseudo_inverse(H, rank_tolerance, H_plus, null)
        orientation[:, :] = H_plus @ M @ H_plus + unobserved * null
        velocity[:, :] = (velocity_variance * weights[0]) * H_plus + unobserved * null
    else:
        _sandwich(A, w, m, unobserved, rank_tolerance, orientation)
        w[:] = 1.0
        m[:] = velocity_variance
        _sandwich(A, w, m, unobserved, rank_tolerance, velocity)
    for i in range(n):
        for j in range(n):
            sigma_orientation[free[i], free[j]] = orientation[i, j]
            sigma_velocity[free[i], free[j]] = velocity[i, j]


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


def planar_base_covariance(v_start: int, R_WF, R_WB, sigma_orientation, sigma_velocity, free) -> OdometryCovariance:
    """Odometry covariances of the planar joint whose velocities (ẋ, ẏ, θ̇) start at ``v_start``: the heading θ and
    its rate have the solves' variances where the IMUs estimate them (``free`` (nv,) bool), else
    :data:`UNOBSERVED_VARIANCE`, like every other component: x, y (measured or held) and their rates, and z, roll,
    pitch, which the joint holds (robot_localization's ``two_d_mode`` ignores them). Rotated as in
    :func:`floating_base_covariance` (rotation in the header frame, rates in the child frame)."""
    R_WF = np.asarray(R_WF, dtype=float)
    R_BF = np.asarray(R_WB, dtype=float).T @ R_WF
    k = v_start + 2
    heading = float(np.asarray(sigma_orientation)[k, k]) if free[k] else UNOBSERVED_VARIANCE
    rate = float(np.asarray(sigma_velocity)[k, k]) if free[k] else UNOBSERVED_VARIANCE
    pose = UNOBSERVED_VARIANCE * np.eye(6)
    twist = UNOBSERVED_VARIANCE * np.eye(6)
    pose[3:, 3:] = R_WF @ np.diag([UNOBSERVED_VARIANCE, UNOBSERVED_VARIANCE, heading]) @ R_WF.T
    twist[3:, 3:] = R_BF @ np.diag([UNOBSERVED_VARIANCE, UNOBSERVED_VARIANCE, rate]) @ R_BF.T
    return OdometryCovariance(pose=pose, twist=twist)


@dataclass(frozen=True, eq=False)
class BaseOdometry:
    """The Odometry output of one planar or floating base joint attached to the world (:func:`base_odometries`):
    pose X_WB of its child body ``body`` in the frame the base hangs from, twist in B (REP-105), covariances from
    the solve. ``R_WF`` the joint's parent frame in the world; ``v_start`` its first velocity."""

    joint: object
    body: int
    planar: bool
    v_start: int
    R_WF: np.ndarray

    def joint_velocities(self, v) -> np.ndarray:
        """(..., 6) = [w_FM_F, v_FM_F] from plant velocities ``v`` (..., nv): a planar joint's (ẋ, ẏ, θ̇) is
        [0, 0, θ̇, ẋ, ẏ, 0]."""
        v = np.asarray(v, dtype=float)
        if not self.planar:
            return v[..., self.v_start:self.v_start + 6]
        out = np.zeros(v.shape[:-1] + (6,))
        out[..., 2] = v[..., self.v_start + 2]
        out[..., 3:5] = v[..., self.v_start:self.v_start + 2]
        return out

    def twist(self, R_WB, v) -> ChildTwist:
        """:func:`child_frame_twist` of the base at ``R_WB`` (..., 3, 3) with plant velocities ``v`` (..., nv)."""
        return child_frame_twist(R_WB, self.R_WF, self.joint_velocities(v))

    def covariance(self, R_WB, covariances: SolveCovariances) -> OdometryCovariance:
        """The message's covariances at ``R_WB`` from a cycle's solve covariances."""
        if self.planar:
            return planar_base_covariance(self.v_start, self.R_WF, R_WB, covariances.orientation,
                                          covariances.velocity, covariances.free)
        return floating_base_covariance(self.v_start, self.R_WF, R_WB, covariances.orientation, covariances.velocity)


def base_odometries(plant) -> tuple:
    """A :class:`BaseOdometry` per planar or floating joint whose parent is the world body, in joint order."""
    bases = []
    for index in range(plant.num_joints()):
        joint = plant.get_joint(index)
        if joint.type_name in ("planar", "quaternion_floating") and joint.parent_body.index == 0:
            bases.append(BaseOdometry(joint=joint, body=joint.child_body.index, planar=joint.type_name == "planar",
                                      v_start=joint.velocity_start,
                                      R_WF=np.asarray(joint.frame_on_parent.X_BF, dtype=float)[:3, :3].copy()))
    return tuple(bases)


def free_velocities(estimator) -> np.ndarray:
    """(nv,) bool: the velocities an :class:`~ros_dofkit.core.estimator.estimator.Estimator` solves for (its
    estimated articulated coordinates, and the rotation of every floating base, which is always estimated)."""
    return estimator.setup.free_v.copy()


@dataclass(frozen=True)
class SolveCovariances:
    """``orientation`` and ``velocity`` (nv, nv): :func:`least_squares_covariance` of one cycle's two solves;
    ``free`` (nv,) bool the velocities they solved for (the others are 0 here, not known)."""

    orientation: np.ndarray
    velocity: np.ndarray
    free: np.ndarray


class SolveCovarianceModel:
    """The covariances of an estimator's cycles, from its IMUs' angular Jacobians at each cycle's solution.

    ``orientation_variance`` (rad^2) and ``angular_velocity_variance`` ((rad/s)^2) are the per-axis noise of
    every IMU's orientation and gyro; the orientation solve's weights are the IMUs' configured ``weight``. Only
    the IMUs observed in a cycle take part (a stale or uncalibrated one constrains nothing). ``free`` (nv,) bool
    is :func:`free_velocities` of the estimator.

    With ``imu_covariance_weighting`` a cycle's weights are ``w_i = weight_i f_i`` with ``f_i = s² / v_i``
    (``Estimator._weight_factors``, ``s²`` = ``orientation_variance``, ``v_i`` the message's mean variance):
    sensor i's noise is then ``v_i = s² weight_i / w_i`` (``s²`` where its covariance was unknown, f_i = 1), and
    with equal configured weights the orientation covariance is ``(sum_i J_iᵀ J_i / v_i)⁺``.

    A floating base whose yaw comes from the odometry (``odometry_yaw``) publishes the odometry's yaw, not this
    solve's: its rotation about the world's vertical gets :data:`UNOBSERVED_VARIANCE` (as the translation the
    odometry gives), so that a filter fusing both counts the odometry once; roll and pitch keep the solve's.
    """

    def __init__(self, estimator, orientation_variance: float, angular_velocity_variance: float):
        for name, value in (("orientation_variance", orientation_variance),
                            ("angular_velocity_variance", angular_velocity_variance)):
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise OdometryInputError(f"{name}: expected a finite number > 0, got {value!r}")
        self._estimator = estimator
        self._tree = estimator.plant.tree.kernel_arguments()
        self.free = free_velocities(estimator)
        self._free_index = np.flatnonzero(self.free).astype(np.int64)
        self._names = estimator.config.imu_names
        self._bodies = np.array([estimator.imu_body(name).index for name in self._names], dtype=np.int64)
        self._weights = np.array([imu.weight for imu in estimator.config.imus], dtype=float)
        base = estimator.odometry_base
        # A floating base's yaw taken from the odometry (odometry_input): not this solve's, a copy of the input's.
        self._yaw_copied = None if base is None or not base.target.heading else (
            base.joint.velocity_start, base.target.X_FW[:3, 2].copy())  # (first velocity, world vertical in F)
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
        """The covariances of ``result``'s cycle (an EstimatorResult, its ``sensor_weights``)."""
        used = result.sensor_weights
        observed = set(result.observed_sensors)
        return self.at(result.q, np.array([name in observed for name in self._names], dtype=bool),
                       np.array([used.get(name, 0.0) for name in self._names]) if used else None)

    def at(self, q, observed, weights=None) -> SolveCovariances:
        """The covariances of a cycle solved at ``q`` (nq,) with the IMUs ``observed`` (n_imu,) bool in
        configuration order (an OfflineRun's row) and their ``weights`` in the solve (n_imu,; an OfflineRun's
        ``weights`` row; None: the configured weights), compiled (:func:`_cycle_covariances`)."""
        nv = self.free.size
        orientation, velocity = np.empty((nv, nv)), np.empty((nv, nv))
        configured = self._weights[observed]
        used = configured if weights is None else np.asarray(weights, dtype=float)[observed]
        with np.errstate(divide="ignore", invalid="ignore"):
            noise = self._orientation_variance * np.where(used > 0.0, configured / used, 1.0)
        _cycle_covariances(self._tree, np.ascontiguousarray(q, dtype=float), self._bodies[observed],
                           np.ascontiguousarray(used), noise, self._angular_velocity_variance,
                           self._free_index, UNOBSERVED_VARIANCE, RANK_TOLERANCE, orientation, velocity)
        if self._yaw_copied is not None:
            start, n = self._yaw_copied  # Σ_F <- P Σ_F P + U n nᵀ, P = I - n nᵀ (n: the vertical in F)
            block = slice(start, start + 3)
            P = np.eye(3) - np.outer(n, n)
            orientation[block, block] = P @ orientation[block, block] @ P + UNOBSERVED_VARIANCE * np.outer(n, n)
        return SolveCovariances(orientation=orientation, velocity=velocity, free=self.free)


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
