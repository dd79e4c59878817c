"""Compiled (numba) kernels of the assembly solver: kinematics over ``plant.tree``, residuals, the LM loop, tracking.

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy and numba only: the compiled path reads
``plant.tree``'s arrays, not the plant.

Everything the Assembler does per iteration runs here without Python in the loop. The readable statement of the
same math is in ``orientation_sensors.py`` / ``markers.py`` (residuals and Jacobians through the plant's public
kinematics) and ``Assembler._solve_reference`` (the same iteration in Python); tests hold the two paths together.

Data layout (built by :class:`ros_dofkit.core.assembly.assembler.Assembler` at initialization; tuples of arrays):

* ``tree``: the plant's ``KinematicTree.kernel_arguments()`` (a ``KernelTree`` named record of its arrays); the
  kinematics over it (forward kinematics, point Jacobians, integration) are ``ros_dofkit.core.multibody.compiled``.
* ``sensors = (rs_body, rs_R_BS, rs_row, rs_hard, rs_obs_slot, rs_weight, rs_cond, mk_body, mk_p_BS, mk_row,
  mk_hard, mk_obs_slot, mk_weight, mk_cond, cond_weight)``: the active rotation sensors (rs, all adopted
  OrientationSensors concatenated) and markers (mk): body, station, first of their 3 rows in the goal or the error
  block, 1 for a hard-error condition, observation slot, weight, condition index; and each condition's weight W_c.
* ``frame = (rs_obs, rs_scale, mk_obs, mk_scale, total)``: per frame, each active sensor's observation and row
  scale (√(W_c w / Σw_c) for goals, √w for errors, 0 when unobserved) and each condition's Σw; filled by
  :func:`gather_frame`. A rotation sensor's w there is its weight times its observation slot's factor of the frame
  (the Tracker's ``obs_weight``, 1 unless the caller weights observations frame by frame, e.g. by the IMU's
  covariance).
* ``work = (X_WB, R_WF, p_WM, rs_phi, mk_p, scratch, J6, q_last, flags)`` (:func:`make_work`): kinematics of the
  last evaluation (of the bodies the sensors depend on; :func:`update_kinematics` recomputes only bodies whose
  coordinates changed), each rotation sensor's φ and each marker's p_GS, and scratch space.
* ``solver_work`` (:func:`make_solver_work`): the solver's Jacobians, trial point and linear-algebra buffers.
  Workspaces are created once per :class:`Tracker` (:func:`make_tracker`, kept by the Assembler from one
  initialization to the next) and reused by every frame and iteration of track_one and track_frames; they carry
  nothing that changes a result (tests compare with fresh ones bit for bit).
* ``problem = (m_goal, m_err, nv, free_v, bound_q, lo, hi)``: residual sizes, the free velocities, and for a free
  velocity whose q̇ is a coordinate's, ``bound_q[j]`` (that q index, -1 otherwise) with ``lo[j] <= q <= hi[j]``.
* ``settings = (accuracy, tolerance, use_rms, max_iterations, lam0)``.

Residuals: rotation rows ``s φ`` with ``φ = log(R_GO R_GSᵀ)`` (in G) and Jacobian ``-s J_r⁻¹(φ) J_ω``; marker
rows ``s (p_GS - p_GO)`` and Jacobian ``s J_v(S)``. The goal part ``r_g`` gives the objective ``½|r_g|²`` =
Σ_c W_c goal_c; the error part ``r_c`` holds the hard errors.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.experimental import structref

from ros_dofkit.core.multibody.compiled import (
    _kinematics_sweep,
    _set_world_kinematics,
    add_rotated_angular_columns,
    integrate_positions,
    point_jacobian,
)
from ros_dofkit.core.multibody.tree import JOINT_PLANAR, JOINT_QUATERNION_FLOATING, JOINT_WELD

# Solver status codes returned by solve().
STATUS_CONVERGED = 0
STATUS_MAX_ITERATIONS = 1
STATUS_STALLED = 2  # no step decreases the merit any more (damping ran away)

_SERIES_ANGLE = 1e-3
_MU_FLOOR = 1e-10  # relative to 1 + max diag(AᵀA): keeps the damped normal matrix positive definite
_LAMBDA_MIN = 1e-8
_LAMBDA_MAX = 1e16


# ----------------------------------------------------------------------------------------------------------------
# Small dense helpers (explicit loops: no temporaries in the hot path)
#
# Performance notes for everything below. numba reference-counts every array a function receives (tuple members
# included) and every view it creates; its pruning pass removes those atomic increments / decrements only in
# functions that call no other compiled function and have no exception exits. Measured here, the leftovers took a
# quarter of a tracking frame. Hence: helpers are inlined at the numba IR level (``inline="always"``) and take
# (array, index) instead of views; the per-evaluation kernels are such leaves, compiled with
# ``error_model="numpy"`` (no ZeroDivisionError exits; every divisor in them is positive by construction, so
# results are unchanged); and the solver's loop lives in one function (solve is inlined into solve_frame, which
# track_one and track_frames call: compiled once, and its one Tracker argument is counted once per frame).
# The per-evaluation leaves (evaluate_residuals, evaluate_jacobians, gather_frame) take the Tracker record instead
# of its ~40 arrays: numba increfs every array argument before a call and decrefs it after, and these atomic
# calls (NRT_incref / NRT_decref) were 18 % of a tracked Panda frame's time (perf, before the change).
# ----------------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _rotation_log(R, out):
    """out = rotation vector of the 3x3 R (:func:`_rotation_vector`)."""
    E = np.empty((1, 3, 3))
    for i in range(3):
        for j in range(3):
            E[0, i, j] = R[i, j]
    out[0], out[1], out[2] = _rotation_vector(E, 0)


@njit(cache=True, inline="always", error_model="numpy")
def _rotation_vector(R, r):
    """Rotation vector of R[r] (angle in [0, π]) via the quaternion, angle = 2 atan2(|v|, w) (Simbody)."""
    trace = R[r, 0, 0] + R[r, 1, 1] + R[r, 2, 2]
    # Shepperd's method: pick the largest of 4w², 4x², 4y², 4z² for a well-conditioned square root (the divisor
    # is then >= 1/2 for a rotation).
    if trace >= R[r, 0, 0] and trace >= R[r, 1, 1] and trace >= R[r, 2, 2]:
        w = 0.5 * math.sqrt(max(1.0 + trace, 0.0))
        f = 0.25 / w
        x = (R[r, 2, 1] - R[r, 1, 2]) * f
        y = (R[r, 0, 2] - R[r, 2, 0]) * f
        z = (R[r, 1, 0] - R[r, 0, 1]) * f
    elif R[r, 0, 0] >= R[r, 1, 1] and R[r, 0, 0] >= R[r, 2, 2]:
        x = 0.5 * math.sqrt(max(1.0 + R[r, 0, 0] - R[r, 1, 1] - R[r, 2, 2], 0.0))
        f = 0.25 / x
        w = (R[r, 2, 1] - R[r, 1, 2]) * f
        y = (R[r, 0, 1] + R[r, 1, 0]) * f
        z = (R[r, 0, 2] + R[r, 2, 0]) * f
    elif R[r, 1, 1] >= R[r, 2, 2]:
        y = 0.5 * math.sqrt(max(1.0 - R[r, 0, 0] + R[r, 1, 1] - R[r, 2, 2], 0.0))
        f = 0.25 / y
        w = (R[r, 0, 2] - R[r, 2, 0]) * f
        x = (R[r, 0, 1] + R[r, 1, 0]) * f
        z = (R[r, 1, 2] + R[r, 2, 1]) * f
    else:
        z = 0.5 * math.sqrt(max(1.0 - R[r, 0, 0] - R[r, 1, 1] + R[r, 2, 2], 0.0))
        f = 0.25 / z
        w = (R[r, 1, 0] - R[r, 0, 1]) * f
        x = (R[r, 0, 2] + R[r, 2, 0]) * f
        y = (R[r, 1, 2] + R[r, 2, 1]) * f
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    if s < 1e-6:
        scale = 2.0 / w  # θ / sin(θ/2) -> 2/w; the next term is O(θ²)·s, below double precision here
    else:
        scale = 2.0 * math.atan2(s, w) / s
    return scale * x, scale * y, scale * z


@njit(cache=True, inline="always", error_model="numpy")
def _inverse_right_jacobian(phi, out):
    """out = J_r⁻¹(φ) = I + ½[φ]x + c(θ)[φ]x², c = (1 - (θ/2)cot(θ/2))/θ²."""
    theta = math.sqrt(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2])
    if theta < _SERIES_ANGLE:
        c = 1.0 / 12.0 + theta * theta / 720.0
    else:
        half = 0.5 * theta
        c = (1.0 - half * math.cos(half) / math.sin(half)) / (theta * theta)
    x, y, z = phi[0], phi[1], phi[2]
    # [φ]x² = φφᵀ - θ² I
    out[0, 0] = 1.0 + c * (x * x - theta * theta)
    out[0, 1] = -0.5 * z + c * x * y
    out[0, 2] = 0.5 * y + c * x * z
    out[1, 0] = 0.5 * z + c * y * x
    out[1, 1] = 1.0 + c * (y * y - theta * theta)
    out[1, 2] = -0.5 * x + c * y * z
    out[2, 0] = -0.5 * y + c * z * x
    out[2, 1] = 0.5 * x + c * z * y
    out[2, 2] = 1.0 + c * (z * z - theta * theta)


@njit(cache=True, inline="always", error_model="numpy")
def cholesky_factor(H, n):
    """H = L Lᵀ for the leading n x n block of a symmetric positive definite H, L into H's lower triangle (in
    place). Returns False when a pivot is not positive (H not positive definite to working precision).

    Column j: ``L_jj = √(H_jj - Σ_{k<j} L_jk²)``, ``L_ij = (H_ij - Σ_{k<j} L_ik L_jk) / L_jj`` (i > j), each sum in
    ascending k. Four rows' sums run side by side (each still in ascending k: the same bits as one after the
    other), so that the processor overlaps four dependent chains of subtractions instead of waiting on one."""
    for j in range(n):
        d = H[j, j]
        for k in range(j):
            d -= H[j, k] * H[j, k]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        H[j, j] = d
        first = j + 1
        while first + 3 < n:  # four rows' sums side by side: four independent chains, the same order in each
            i = first
            s0, s1, s2, s3 = H[i, j], H[i + 1, j], H[i + 2, j], H[i + 3, j]
            for k in range(j):
                h = H[j, k]
                s0 -= H[i, k] * h
                s1 -= H[i + 1, k] * h
                s2 -= H[i + 2, k] * h
                s3 -= H[i + 3, k] * h
            H[i, j], H[i + 1, j], H[i + 2, j], H[i + 3, j] = s0 / d, s1 / d, s2 / d, s3 / d
            first += 4
        for i in range(first, n):
            s = H[i, j]
            for k in range(j):
                s -= H[i, k] * H[j, k]
            H[i, j] = s / d
    return True


@njit(cache=True, inline="always", error_model="numpy")
def cholesky_substitute(L, b, n, out):
    """Solve L Lᵀ out = b with the factor :func:`cholesky_factor` left in L's lower triangle (one factor serves
    several right-hand sides)."""
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * out[k]
        out[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = out[i]
        for k in range(i + 1, n):
            s -= L[k, i] * out[k]
        out[i] = s / L[i, i]


@njit(cache=True, inline="always", error_model="numpy")
def cholesky_inverse_diagonal(L, n, j, work):
    """(H⁻¹)_jj with the factor of H = L Lᵀ left in L's lower triangle: :func:`cholesky_substitute` of the unit
    vector e_j, whose forward pass is zero before j and whose backward pass is needed down to j only; the same
    operations in the same order otherwise (the skipped terms are exact zeros), so the same bits at about a third
    of the work when every j is asked for. ``work`` (n,) is scratch."""
    for i in range(j, n):
        s = 1.0 if i == j else 0.0
        for k in range(j, i):
            s -= L[i, k] * work[k]
        work[i] = s / L[i, i]
    for i in range(n - 1, j - 1, -1):
        s = work[i]
        for k in range(i + 1, n):
            s -= L[k, i] * work[k]
        work[i] = s / L[i, i]
    return work[j]


@njit(cache=True, inline="always", error_model="numpy")
def _cholesky_solve(H, b, n, out):
    """Solve H out = b for the leading n x n block of a symmetric positive definite H (H is overwritten by its
    factor). Returns False when a pivot is not positive (H not positive definite to working precision)."""
    if not cholesky_factor(H, n):
        return False
    cholesky_substitute(H, b, n, out)
    return True


# ----------------------------------------------------------------------------------------------------------------
# Kinematics over the flat tree
# ----------------------------------------------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy")
def update_kinematics(tree, q, work, every_body):
    """Bring the kinematics in ``work`` (see :func:`make_work`) to configuration q, recomputing only what changed.

    A body is recomputed when its joint's coordinates differ from those of the previous update (NaN counts as
    changed), when its parent was recomputed, or when its rows are not valid; the others keep their rows, which
    already are the values at q (a body's pose depends only on its joint's coordinates and its parent's pose),
    so the result is bit for bit that of :func:`forward_kinematics`. Unless ``every_body``, bodies that no sensor
    of the workspace depends on (not on a path from a sensor's body to the world) are skipped and marked not valid.
    """
    _kinematics_sweep(tree, q, work[0], work[1], work[2], work[5], work[8], work[7], True, every_body)
    q_last = work[7]
    for i in range(q.shape[0]):
        q_last[i] = q[i]


# ----------------------------------------------------------------------------------------------------------------
# Residuals
# ----------------------------------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def evaluate_residuals(tracker, q, r_g, r_c):
    """Kinematics at q into the tracker's ``work`` (:func:`update_kinematics`: the sensors' bodies and their
    ancestors) and the goal / error residuals r_g, r_c at its ``frame`` (rows of an unobserved sensor, scale 0, are
    zero). Also keeps each rotation sensor's φ and each marker's p_GS in ``work`` for the Jacobians."""
    tree, sensors, frame, work = tracker.tree, tracker.sensors, tracker.frame, tracker.work
    rs_body, rs_R_BS, rs_row, rs_hard = sensors[0], sensors[1], sensors[2], sensors[3]
    mk_body, mk_p_BS, mk_row, mk_hard = sensors[7], sensors[8], sensors[9], sensors[10]
    rs_obs, rs_scale, mk_obs, mk_scale = frame[0], frame[1], frame[2], frame[3]
    X_WB, rs_phi, mk_p, S = work[0], work[3], work[4], work[5]
    update_kinematics(tree, q, work, False)
    r_g[:] = 0.0
    r_c[:] = 0.0
    for k in range(rs_body.shape[0]):
        s = rs_scale[k]
        if s == 0.0:
            continue
        b = rs_body[k]
        # S[3] = R_GS = R_WB R_BS; S[4] = E = R_GO R_GSᵀ; φ = log(E) in G
        for i in range(3):
            for j in range(3):
                S[3, i, j] = X_WB[b, i, 0] * rs_R_BS[k, 0, j] + X_WB[b, i, 1] * rs_R_BS[k, 1, j] + \
                    X_WB[b, i, 2] * rs_R_BS[k, 2, j]
        for i in range(3):
            for j in range(3):
                S[4, i, j] = rs_obs[k, i, 0] * S[3, j, 0] + rs_obs[k, i, 1] * S[3, j, 1] + \
                    rs_obs[k, i, 2] * S[3, j, 2]
        phi0, phi1, phi2 = _rotation_vector(S, 4)
        rs_phi[k, 0] = phi0
        rs_phi[k, 1] = phi1
        rs_phi[k, 2] = phi2
        row = rs_row[k]
        if rs_hard[k]:
            r_c[row] = s * phi0
            r_c[row + 1] = s * phi1
            r_c[row + 2] = s * phi2
        else:
            r_g[row] = s * phi0
            r_g[row + 1] = s * phi1
            r_g[row + 2] = s * phi2
    for k in range(mk_body.shape[0]):
        s = mk_scale[k]
        if s == 0.0:
            continue
        b = mk_body[k]
        row = mk_row[k]
        for i in range(3):
            p = X_WB[b, i, 0] * mk_p_BS[k, 0] + X_WB[b, i, 1] * mk_p_BS[k, 1] + X_WB[b, i, 2] * mk_p_BS[k, 2] + \
                X_WB[b, i, 3]
            mk_p[k, i] = p
            if mk_hard[k]:
                r_c[row + i] = s * (p - mk_obs[k, i])
            else:
                r_g[row + i] = s * (p - mk_obs[k, i])


@njit(cache=True, error_model="numpy")
def evaluate_jacobians(tracker, J_g, J_c):
    """∂r_g/∂v and ∂r_c/∂v at the configuration of the tracker's last :func:`evaluate_residuals`:
    rotation rows ``-s J_r⁻¹(φ) J_ω(B)``, marker rows ``s J_v(S)``."""
    tree, sensors, frame, work = tracker.tree, tracker.sensors, tracker.frame, tracker.work
    rs_body, rs_row, rs_hard = sensors[0], sensors[2], sensors[3]
    mk_body, mk_row, mk_hard = sensors[7], sensors[9], sensors[10]
    rs_scale, mk_scale = frame[1], frame[3]
    R_WF, p_WM, rs_phi, mk_p = work[1], work[2], work[3], work[4]
    nv = J_g.shape[1]
    J_g[:, :] = 0.0
    J_c[:, :] = 0.0
    Jr = work[5][3]  # a 3x3 block of the workspace's scratch
    J6 = work[6]
    for k in range(rs_body.shape[0]):
        s = rs_scale[k]
        if s == 0.0:
            continue
        _inverse_right_jacobian(rs_phi[k], Jr)
        add_rotated_angular_columns(tree, R_WF, rs_body[k], Jr, -s, J_c if rs_hard[k] else J_g, rs_row[k])
    for k in range(mk_body.shape[0]):
        s = mk_scale[k]
        if s == 0.0:
            continue
        point_jacobian(tree, R_WF, p_WM, mk_body[k], mk_p[k], True, J6)
        Jm = J_c if mk_hard[k] else J_g
        row = mk_row[k]
        for i in range(3):
            for c in range(nv):
                Jm[row + i, c] = s * J6[3 + i, c]


@njit(cache=True, inline="always")
def _goal(r_g):
    """F = ½|r_g|² (a loop: numba's np.dot of two vectors calls BLAS, whose set-up costs more than these few rows)."""
    s = 0.0
    for i in range(r_g.shape[0]):
        s += r_g[i] * r_g[i]
    return 0.5 * s


@njit(cache=True, inline="always")
def error_norm(r_c, use_rms):
    """Max-abs norm of the hard errors (RMS sqrt(Σe²/n) if use_rms); 0 when there are none."""
    n = r_c.shape[0]
    if n == 0:
        return 0.0
    if use_rms:
        s = 0.0
        for i in range(n):
            s += r_c[i] * r_c[i]
        return math.sqrt(s / n)
    m = 0.0
    for i in range(n):
        m = max(m, abs(r_c[i]))
    return m


# ----------------------------------------------------------------------------------------------------------------
# The step (shared by the compiled and the reference solver)
# ----------------------------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _normal_equations(A, n, r, lam, H, g):
    """H = AᵀA (lower and upper), g = -Aᵀr over the first n columns of A (leading n x n block of H), row by row
    skipping zero entries (a sensor's Jacobian row is zero outside the dofs between its body and the world).
    Returns the damping μ = λ|g| + μ_floor(1 + max diag H)."""
    m = A.shape[0]
    for i in range(n):
        g[i] = 0.0
        for j in range(i + 1):
            H[i, j] = 0.0
    # Three rows at a time (a sensor's rows), each entry's sum still in row order: the same bits as row by row, at a
    # third of the loads and stores of H. A product of a zero entry adds ±0, which leaves the sum as it is (a sum
    # that starts at +0 never becomes -0), so a column is skipped only where all three rows are zero.
    rows = 0  # rows done
    while rows + 2 < m:
        k = rows
        r0, r1, r2 = r[k], r[k + 1], r[k + 2]
        for i in range(n):
            a0, a1, a2 = A[k, i], A[k + 1, i], A[k + 2, i]
            if a0 == 0.0 and a1 == 0.0 and a2 == 0.0:
                continue
            g[i] = ((g[i] - a0 * r0) - a1 * r1) - a2 * r2
            for j in range(i + 1):
                H[i, j] = ((H[i, j] + a0 * A[k, j]) + a1 * A[k + 1, j]) + a2 * A[k + 2, j]
        rows += 3
    for k in range(rows, m):
        rk = r[k]
        for i in range(n):
            a = A[k, i]
            if a == 0.0:
                continue
            g[i] -= a * rk
            for j in range(i + 1):
                H[i, j] += a * A[k, j]
    diag_max = 0.0
    gnorm = 0.0
    for i in range(n):
        diag_max = max(diag_max, H[i, i])
        gnorm += g[i] * g[i]
        for j in range(i):
            H[j, i] = H[i, j]
    return lam * math.sqrt(gnorm) + _MU_FLOOR * (1.0 + diag_max)


@njit(cache=True)
def compute_step(A, r_g, C, r_c, lam, d):
    """Damped Gauss-Newton step d on the columns of A (goal Jacobian) and C (error Jacobian); returns False on failure.

    Without errors (C has no rows): ``(AᵀA + μI) d = -Aᵀ r_g`` with ``μ = λ |Aᵀ r_g| + μ_floor`` (Levenberg-
    Marquardt with the damping proportional to the gradient norm, which keeps quadratic convergence on
    zero-residual problems). With errors: the null-space form of the equality-constrained Gauss-Newton step
    (the KKT solution when C has full row rank): ``d_c = -C⁺_μ r_c`` (damped pseudo-inverse from the SVD of C),
    then the goal is minimized over the null space Z of C: ``d = d_c + Z y``,
    ``(ZᵀAᵀAZ + μI) y = -ZᵀAᵀ(r_g + A d_c)``.
    """
    if C.shape[0] == 0:
        n = A.shape[1]
        return _unconstrained_step(A, n, r_g, lam, d, np.empty((n, n)), np.empty(n))
    return _constrained_step(A, r_g, C, r_c, lam, d)


@njit(cache=True, inline="always", error_model="numpy")
def _unconstrained_step(A, n, r_g, lam, d, H, g):
    """:func:`compute_step` without hard errors on the first n columns of A (d[:n] is the step), with the normal
    matrix and the gradient in the leading blocks of given buffers H (>= n x n) and g (>= n): the solver's
    workspace holds them at the largest size, reused at every iteration. With n = 0 every loop is empty and the
    empty step is found (no early return: one would keep numba's reference counting in the solver's leaf)."""
    mu = _normal_equations(A, n, r_g, lam, H, g)
    for i in range(n):
        H[i, i] += mu
    return _cholesky_solve(H, g, n, d)


@njit(cache=True)
def _constrained_step(A, r_g, C, r_c, lam, d):
    """:func:`compute_step` with hard errors (C has rows): the null-space step."""
    m, n = A.shape
    mc = C.shape[0]
    if n == 0:
        return True
    # SVD of C (mc x n).
    U, sv, Vt = np.linalg.svd(C)
    ns = sv.shape[0]
    smax = sv[0] if ns > 0 else 0.0
    rank = 0
    for i in range(ns):
        if sv[i] > 1e-12 * max(smax, 1.0):
            rank += 1
    cg = 0.0  # |Cᵀ r_c| for the damping of the error step
    for j in range(n):
        s = 0.0
        for k in range(mc):
            s += C[k, j] * r_c[k]
        cg += s * s
    mu_c = lam * math.sqrt(cg)
    d[:n] = 0.0
    for i in range(rank):
        s = 0.0
        for k in range(mc):
            s += U[k, i] * r_c[k]
        f = -s * sv[i] / (sv[i] * sv[i] + mu_c)
        for j in range(n):
            d[j] += f * Vt[i, j]
    nz = n - rank
    if m == 0 or nz == 0:
        return True
    # Goal in the null space of C.
    B = np.zeros((m, nz))
    for k in range(m):
        for z in range(nz):
            s = 0.0
            for j in range(n):
                s += A[k, j] * Vt[rank + z, j]
            B[k, z] = s
    rr = np.empty(m)
    for k in range(m):
        s = r_g[k]
        for j in range(n):
            s += A[k, j] * d[j]
        rr[k] = s
    H = np.empty((nz, nz))
    g = np.empty(nz)
    mu = _normal_equations(B, nz, rr, lam, H, g)
    for i in range(nz):
        H[i, i] += mu
    y = np.empty(nz)
    if not _cholesky_solve(H, g, nz, y):
        return False
    for j in range(n):
        s = 0.0
        for z in range(nz):
            s += Vt[rank + z, j] * y[z]
        d[j] += s
    return True


@njit(cache=True, inline="always")
def select_active_bounds(q, g_free, bound_q, lo, hi, active):
    """Mark free variables sitting on a bound with the goal gradient pushing outward (they are held this step)."""
    for j in range(bound_q.shape[0]):
        active[j] = False
        k = bound_q[j]
        if k < 0:
            continue
        if q[k] <= lo[j] + 1e-12 * (1.0 + abs(lo[j])) and g_free[j] > 0.0:
            active[j] = True
        elif q[k] >= hi[j] - 1e-12 * (1.0 + abs(hi[j])) and g_free[j] < 0.0:
            active[j] = True


@njit(cache=True, inline="always")
def clip_to_bounds(q, bound_q, lo, hi):
    """Clip the bounded coordinates of q into [lo, hi]; returns True if anything changed."""
    changed = False
    for j in range(bound_q.shape[0]):
        k = bound_q[j]
        if k >= 0:
            if q[k] < lo[j]:
                q[k] = lo[j]
                changed = True
            elif q[k] > hi[j]:
                q[k] = hi[j]
                changed = True
    return changed


@njit(cache=True, inline="always")
def accept_step(F, F_new, e, e_new, tolerance, has_errors):
    """Acceptance rule: goals only, the goal must decrease; with hard errors (filter rule) the error norm must not
    grow beyond max(e, tolerance/2) and either the goal decreases or the error norm decreases."""
    if not has_errors:
        return F_new < F
    if e_new > max(e, 0.5 * tolerance):
        return False
    return F_new < F or e_new < (1.0 - 1e-4) * e


# ----------------------------------------------------------------------------------------------------------------
# The solver loop
# ----------------------------------------------------------------------------------------------------------------
@njit(cache=True)
def tree_sizes(tree):
    """(nq, nv) of the flat tree: one past the last coordinate / velocity any joint reads."""
    joint_type, q_start, v_start = tree.joint_type, tree.q_start, tree.v_start
    nq = 0
    nv = 0
    for b in range(joint_type.shape[0]):
        if q_start[b] < 0:
            continue
        kind = joint_type[b]
        if kind == JOINT_PLANAR:
            nq = max(nq, q_start[b] + 3)
            nv = max(nv, v_start[b] + 3)
        elif kind == JOINT_QUATERNION_FLOATING:
            nq = max(nq, q_start[b] + 7)
            nv = max(nv, v_start[b] + 6)
        elif kind != JOINT_WELD:
            nq = max(nq, q_start[b] + 1)
            nv = max(nv, v_start[b] + 1)
    return nq, nv


@njit(cache=True)
def make_work(tree, sensors):
    """Kinematics workspace of one sensor set, ``(X_WB, R_WF, p_WM, rs_phi, mk_p, scratch, J6, q_last, flags)``:
    kinematics of the last evaluation, φ per rotation sensor, p_GS per marker, scratch (5, 4, 4) (FK's three
    temporaries and two 3x3 matrices of the residuals and Jacobians), a (6, nv) point Jacobian, and the state of
    :func:`update_kinematics`: the q of the last update and flags (3, nb) = (needed: on a path from a sensor's
    body to the world; valid: rows hold the kinematics at q_last; changed: recomputed by the last update).

    The world's rows are set here and never change; every other body starts not valid."""
    parent = tree.parent
    nb = parent.shape[0]
    nq, nv = tree_sizes(tree)
    X_WB = np.empty((nb, 4, 4))
    R_WF = np.empty((nb, 3, 3))
    p_WM = np.empty((nb, 3))
    _set_world_kinematics(X_WB, R_WF, p_WM)
    flags = np.zeros((3, nb), dtype=np.bool_)
    flags[1, 0] = True
    for bodies in (sensors[0], sensors[7]):
        for k in range(bodies.shape[0]):
            b = bodies[k]
            while b > 0 and not flags[0, b]:
                flags[0, b] = True
                b = parent[b]
    return (X_WB, R_WF, p_WM, np.zeros((sensors[0].shape[0], 3)), np.zeros((sensors[7].shape[0], 3)),
            np.empty((5, 4, 4)), np.empty((6, nv)), np.empty(nq), flags)


@njit(cache=True)
def make_solver_work(problem, nq):
    """The solver's buffers, allocated once per Tracker (:func:`make_tracker`) and reused by every frame and
    iteration: ``(J_g, J_c, r_g2, r_c2, q_trial, dv, g_free, active, A, C, d, H, g)``, where A (m_goal, n),
    C (m_err, n), d (n), H (n, n) and g (n) have the largest step's size (n = number of free velocities) and each
    iteration uses their leading columns / blocks."""
    m_goal, m_err, nv_full, free_v = problem[0], problem[1], problem[2], problem[3]
    n = free_v.shape[0]
    return (np.empty((m_goal, nv_full)), np.empty((m_err, nv_full)), np.empty(m_goal), np.empty(m_err),
            np.empty(nq), np.zeros(nv_full), np.empty(n), np.zeros(n, dtype=np.bool_), np.empty((m_goal, n)),
            np.empty((m_err, n)), np.empty(n), np.empty((n, n)), np.empty(n))


# The solver loop's pieces below take the tracker and read its arrays themselves: each is a leaf (it calls no other
# compiled function), where numba prunes most of its reference counting (all of it in clip_start, free_gradient,
# free_columns and trial_point; a few counts stay in the step's code), whereas every array the loop itself read out of
# the tracker's records was counted at each frame (an atomic increment and decrement each; NRT_incref / NRT_decref were
# ~18 % of a tracked Panda frame's samples before, ~12 % after: perf). Divisors in them are positive by construction
# (error_model="numpy", as the evaluation leaves).
@njit(cache=True)
def loop_buffers(tracker):
    """(J_g, J_c, r_g2, r_c2, q_trial) of the tracker's ``solver_work``, the arrays the loop itself passes on: five
    references instead of the workspace's fourteen (binding a tuple counts a reference to each of its arrays)."""
    work = tracker.solver_work
    return work[0], work[1], work[2], work[3], work[4]


@njit(cache=True, error_model="numpy")
def clip_start(tracker, q):
    """Clip q into the bounds of the tracker's problem (:func:`clip_to_bounds`); returns True if anything changed."""
    problem = tracker.problem
    return clip_to_bounds(q, problem[4], problem[5], problem[6])


@njit(cache=True, error_model="numpy")
def free_gradient(tracker, q, r_g):
    """One iteration's free set: the goal gradient over the free velocities, ``g_free = J_gᵀ r_g``, and the
    variables held on a bound (:func:`select_active_bounds`). Returns (n_step, max |g_free| over the free ones), n_step
    the number of free ones (the step's columns: :func:`free_columns`)."""
    problem, work = tracker.problem, tracker.solver_work  # each record read once (see the note above)
    m_goal, free_v, bound_q, lo, hi = problem[0], problem[3], problem[4], problem[5], problem[6]
    J_g, g_free, active = work[0], work[6], work[7]
    nv = free_v.shape[0]
    for j in range(nv):
        c = free_v[j]
        s = 0.0
        for k in range(m_goal):
            s += J_g[k, c] * r_g[k]
        g_free[j] = s
    select_active_bounds(q, g_free, bound_q, lo, hi, active)
    n_step = 0
    gmax = 0.0
    for j in range(nv):
        if not active[j]:
            gmax = max(gmax, abs(g_free[j]))
            n_step += 1
    return n_step, gmax


@njit(cache=True, error_model="numpy")
def free_columns(tracker):
    """The free (not held: :func:`free_gradient`) columns of J_g and J_c into the first n_step of A and C, and
    d[:n_step] = 0. A leaf of its own rather than free_gradient's tail: with the three loops in one function (then
    named free_set) numba kept 8 of its reference counts per iteration (optimised IR); apart, neither keeps any, and
    a converged iteration skips the copy. (The new names also keep a stale numba cache of a module that inlines
    :func:`solve`, e.g. core/estimator/stream.py's, from linking its old loop against a free_set that no longer
    copies the columns.)"""
    problem, work = tracker.problem, tracker.solver_work
    m_goal, m_err, free_v = problem[0], problem[1], problem[3]
    J_g, J_c, active, A, C, d = work[0], work[1], work[7], work[8], work[9], work[10]
    col = 0
    for j in range(free_v.shape[0]):
        if active[j]:
            continue
        c = free_v[j]
        for k in range(m_goal):
            A[k, col] = J_g[k, c]
        for k in range(m_err):
            C[k, col] = J_c[k, c]
        col += 1
    for j in range(col):
        d[j] = 0.0


@njit(cache=True, error_model="numpy")
def unconstrained_step_of(tracker, n_step, r_g, lam):
    """:func:`_unconstrained_step` on the tracker's A (first n_step columns), into its d, with its H and g."""
    work = tracker.solver_work
    A, d, H, g = work[8], work[10], work[11], work[12]
    found = _unconstrained_step(A, n_step, r_g, lam, d, H, g)
    return found


@njit(cache=True)
def constrained_step_of(tracker, n_step, r_g, r_c, lam):
    """:func:`_constrained_step` on the first n_step columns of the tracker's A and C, into its d."""
    work = tracker.solver_work
    A, C = work[8], work[9]
    return _constrained_step(np.ascontiguousarray(A[:, :n_step]), r_g, np.ascontiguousarray(C[:, :n_step]), r_c, lam,
                             work[10])


@njit(cache=True, error_model="numpy")
def trial_point(tracker, q):
    """The trial of a step: dv = d scattered to the free velocities not held (0 elsewhere), q_trial = clip(q ⊕ dv)
    (:func:`integrate_positions`, :func:`clip_to_bounds`) into the solver's q_trial. Returns |d|∞."""
    problem, work = tracker.problem, tracker.solver_work
    free_v, bound_q, lo, hi = problem[3], problem[4], problem[5], problem[6]
    q_trial, dv, active, d = work[4], work[5], work[7], work[10]
    dv[:] = 0.0
    col = 0
    step = 0.0
    for j in range(free_v.shape[0]):
        if active[j]:
            continue
        dv[free_v[j]] = d[col]
        step = max(step, abs(d[col]))
        col += 1
    integrate_positions(tracker.tree, q, dv, q_trial)
    clip_to_bounds(q_trial, bound_q, lo, hi)
    return step


@njit(cache=True, inline="always")
def solve(tracker, q, r_g, r_c, evaluated):
    """Minimize ½|r_g|² subject to r_c = 0 over the free velocities, starting from (and overwriting) q.

    The tracker (:func:`make_tracker`) gives ``problem = (m_goal, m_err, nv, free_v, bound_q, lo, hi)``, ``settings =
    (accuracy, tolerance, use_rms, max_iterations, lam0)``, the statistics and the workspaces: ``work`` (kinematics,
    :func:`make_work`) and ``solver_work`` (:func:`make_solver_work`); neither carries anything from one call to the
    next that changes the result. If ``evaluated``, ``work``, r_g and r_c already hold the evaluation at q.

    Start: q clipped into its bounds, residuals and Jacobians at q. Iteration: hold variables on an
    outward-pushed bound; damped step (:func:`compute_step`); trial q' = clip(q ⊕ d); accept or reject
    (:func:`accept_step`) with λ divided by 3 on acceptance (down to 1e-8, then Jacobians at the new q) and multiplied
    by 4 on rejection. Converged, after an accepted step, when the error norm is within ``tolerance`` and either
    |d|∞ <= accuracy or the goal decreased by at most accuracy² of its value; also when the projected gradient and
    the errors vanish, or when a rejected step already has |d|∞ <= accuracy with the errors within tolerance. Stops
    as stalled when λ exceeds 1e16 and after ``max_iterations`` steps.

    ``stats`` (int64[3]) is incremented: [residual evaluations, Jacobian evaluations, iterations].
    Returns (status, goal F = ½|r_g|², error norm); r_g, r_c end as the residuals at the returned q.
    """
    m_err = tracker.problem[1]
    accuracy, tolerance, use_rms, max_iterations, lam0 = tracker.settings
    stats = tracker.stats
    J_g, J_c, r_g2, r_c2, q_trial = loop_buffers(tracker)
    # Start: q clipped into its bounds, the residuals at q (unless evaluated there), the Jacobians at q.
    if clip_start(tracker, q) or not evaluated:
        evaluate_residuals(tracker, q, r_g, r_c)
        stats[0] += 1
    evaluate_jacobians(tracker, J_g, J_c)
    stats[1] += 1
    F = _goal(r_g)
    e = error_norm(r_c, use_rms)
    lam = lam0
    status = STATUS_MAX_ITERATIONS
    iterations = 0
    while iterations < max_iterations:
        n_step, gmax = free_gradient(tracker, q, r_g)  # projected gradient, free set
        if gmax == 0.0 and e <= tolerance:
            status = STATUS_CONVERGED
            break
        free_columns(tracker)  # the step's columns in A / C
        iterations += 1
        stats[2] += 1
        if m_err == 0:
            found = unconstrained_step_of(tracker, n_step, r_g, lam)
        else:
            found = constrained_step_of(tracker, n_step, r_g, r_c, lam)
        if not found:
            lam *= 4.0
            if lam > _LAMBDA_MAX:
                status = STATUS_STALLED
                break
            continue
        step = trial_point(tracker, q)
        # The trial overwrites the kinematics in `work`; the Jacobians at q are already in J_g / J_c.
        evaluate_residuals(tracker, q_trial, r_g2, r_c2)
        stats[0] += 1
        F_new = _goal(r_g2)
        e_new = error_norm(r_c2, use_rms)
        if accept_step(F, F_new, e, e_new, tolerance, m_err > 0):
            decrease = F - F_new
            F_old = F
            q[:] = q_trial
            r_g[:] = r_g2
            r_c[:] = r_c2
            F = F_new
            e = e_new
            lam = max(lam / 3.0, _LAMBDA_MIN)
            if e <= tolerance and (step <= accuracy or abs(decrease) <= accuracy * accuracy * F_old):
                status = STATUS_CONVERGED
                break
            evaluate_jacobians(tracker, J_g, J_c)
            stats[1] += 1
        else:
            if step <= accuracy and e <= tolerance:
                # Even the full step is below the accuracy and does not help (rounding at the optimum): done.
                status = STATUS_CONVERGED
                break
            lam *= 4.0
            if lam > _LAMBDA_MAX:
                status = STATUS_STALLED
                break
    return status, F, e


@njit(cache=True, error_model="numpy")
def gather_frame(tracker, obs_rot, obs_pos):
    """Per-frame setup: copy each active sensor's observation and compute its row scale into the tracker's ``frame``.

    Goal rows get √(W_c w / Σ_c w) where Σ_c w sums the weights of the condition's sensors observed this frame;
    error rows get √w; unobserved sensors get 0 (active sensors have w > 0, so Σw > 0 where it divides). A rotation
    sensor's w is its weight times the factor of its observation slot in the tracker's ``obs_weight`` (> 0, 1 by
    default: then w is the weight itself, bit for bit). Returns the number of contributing sensors.
    """
    sensors, frame, obs_weight = tracker.sensors, tracker.frame, tracker.obs_weight
    rs_hard, rs_obs_slot, rs_weight, rs_cond = sensors[3], sensors[4], sensors[5], sensors[6]
    mk_hard, mk_obs_slot, mk_weight, mk_cond = sensors[10], sensors[11], sensors[12], sensors[13]
    cond_weight = sensors[14]
    rs_obs, rs_scale, mk_obs, mk_scale, total = frame[0], frame[1], frame[2], frame[3], frame[4]
    total[:] = 0.0
    contributing = 0
    for k in range(rs_obs_slot.shape[0]):
        ok = True
        for i in range(3):
            for j in range(3):
                v = obs_rot[rs_obs_slot[k], i, j]
                rs_obs[k, i, j] = v
                if not math.isfinite(v):
                    ok = False
        rs_scale[k] = rs_weight[k] * obs_weight[rs_obs_slot[k]] if ok else 0.0  # w of this frame, until below
        if ok:
            total[rs_cond[k]] += rs_scale[k]
            contributing += 1
    for k in range(mk_obs_slot.shape[0]):
        ok = True
        for i in range(3):
            v = obs_pos[mk_obs_slot[k], i]
            mk_obs[k, i] = v
            if not math.isfinite(v):
                ok = False
        mk_scale[k] = 1.0 if ok else 0.0
        if ok:
            total[mk_cond[k]] += mk_weight[k]
            contributing += 1
    for k in range(rs_obs_slot.shape[0]):
        if rs_scale[k] != 0.0:
            if rs_hard[k]:
                rs_scale[k] = math.sqrt(rs_scale[k])
            else:
                rs_scale[k] = math.sqrt(cond_weight[rs_cond[k]] * rs_scale[k] / total[rs_cond[k]])
    for k in range(mk_obs_slot.shape[0]):
        if mk_scale[k] != 0.0:
            if mk_hard[k]:
                mk_scale[k] = math.sqrt(mk_weight[k])
            else:
                mk_scale[k] = math.sqrt(cond_weight[mk_cond[k]] * mk_weight[k] / total[mk_cond[k]])
    return contributing


@njit(cache=True)
def make_frame(sensors):
    """Per-frame arrays sized for ``sensors``: observation and row scale per active sensor, and Σw per condition."""
    n_rs = sensors[0].shape[0]
    n_mk = sensors[7].shape[0]
    return (np.empty((n_rs, 3, 3)), np.empty(n_rs), np.empty((n_mk, 3)), np.empty(n_mk), np.empty(sensors[14].shape[0]))


@njit(cache=True)
def solve_frame(tracker, q, obs_rot, obs_pos):
    """One frame of Simbody's assemble()/track(): gather the observations, evaluate at q, skip the solve when the
    error norm <= tolerance and the goal <= tolerance² (short-circuit), else :func:`solve` (q is overwritten).

    Returns (status, goal at the start, error norm at the start, goal, error norm, contributing sensors); the
    tracker's r_g, r_c end as the residuals at q."""
    tolerance, use_rms = tracker.settings[1], tracker.settings[2]
    r_g, r_c = tracker.r_g, tracker.r_c
    contributing = gather_frame(tracker, obs_rot, obs_pos)
    evaluate_residuals(tracker, q, r_g, r_c)
    tracker.stats[0] += 1
    F0 = _goal(r_g)
    e0 = error_norm(r_c, use_rms)
    if e0 <= tolerance and F0 <= tolerance * tolerance:
        return STATUS_CONVERGED, F0, e0, F0, e0, contributing
    status, F, e = solve(tracker, q, r_g, r_c, True)
    return status, F0, e0, F, e, contributing


# ----------------------------------------------------------------------------------------------------------------
# One initialized Assembler's compiled state, for the per-frame entry point
#
# Crossing into numba costs per argument: each array is typed and unboxed, and a namedtuple (the tree) is typed
# in Python; with the ~35 arrays of a solve that was more than the solve of a Panda frame. The Tracker record holds
# everything that lives from one initialization to the next (the tree, the sensors, the problem, the settings, the
# statistics, the observation buffers and the workspaces), so that a frame crosses with one record and q.
# ----------------------------------------------------------------------------------------------------------------
@structref.register
class TrackerType(types.StructRef):
    """numba type of :class:`Tracker` (its fields' types are those of the arrays and tuples it was built from)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(kind)) for name, kind in fields)


class Tracker(structref.StructRefProxy):
    """A named record of the compiled state of one initialized Assembler (:func:`make_tracker`); opaque to Python.

    Fields: ``tree``, ``sensors``, ``problem``, ``settings`` and ``stats`` as :func:`solve` reads them; ``obs_rot``
    (n_rot_obs, 3, 3) and ``obs_pos`` (n_pos_obs, 3), the observation slots, and ``obs_weight`` (n_rot_obs,) each
    rotation slot's weight factor, read at each frame (the caller's buffers: it writes them in place; the factors
    change per frame without a new Tracker); ``frame``, ``work``, ``solver_work``, ``r_g`` and ``r_c``, the
    workspaces.
    """


TRACKER_FIELDS = ("tree", "sensors", "problem", "settings", "stats", "obs_rot", "obs_pos", "obs_weight", "frame",
                  "work", "solver_work", "r_g", "r_c")
structref.define_constructor(Tracker, TrackerType, TRACKER_FIELDS)
structref.define_boxing(TrackerType, Tracker)


@njit(cache=True)
def make_tracker(tree, sensors, problem, settings, stats, obs_rot, obs_pos, obs_weight, nq):
    """A :class:`Tracker` over these arrays (kept by reference, not copied) with its own workspaces for nq
    coordinates."""
    return Tracker(tree, sensors, problem, settings, stats, obs_rot, obs_pos, obs_weight, make_frame(sensors),
                   make_work(tree, sensors), make_solver_work(problem, nq), np.empty(problem[0]),
                   np.empty(problem[1]))


@njit(cache=True)
def track_one(tracker, q):
    """:func:`solve_frame` at the tracker's observations from q (overwritten): the entry point of assemble() and
    track(). The workspaces carry nothing from one call to the next that changes a result."""
    return solve_frame(tracker, q, tracker.obs_rot, tracker.obs_pos)


@njit(cache=True, error_model="numpy")
def complete_kinematics(tracker, q):
    """The tracker's kinematics (``work``) brought to q for every body (:func:`update_kinematics`), the poses
    :func:`track_frames` hands out. A compiled function of its own, not inlined into track_frames: the sweep is most
    of that kernel's compile, and compiled apart it compiles once, in parallel with the solve (precompile's
    warm_residuals), for a call per frame."""
    update_kinematics(tracker.tree, q, tracker.work, True)


@njit(cache=True, nogil=True)  # nogil: replay.overlap reads and writes meanwhile
def track_frames(tracker, q, obs_rot_seq, obs_pos_seq, obs_weight_seq, locked_q, positions, Q_out, goal_out,
                 err_out, status_out, X_WB_out):
    """Warm-started tracking over T frames (Simbody's track() per frame: short-circuit test, then one solve) with
    the tracker's problem, settings, statistics and workspaces (:func:`make_tracker`).

    obs_rot_seq (T, n_rot_obs, 3, 3) and obs_pos_seq (T, n_pos_obs, 3) hold all observation slots per frame; if
    ``obs_weight_seq`` has T rows, each frame first copies its row into the tracker's ``obs_weight`` (the rotation
    slots' weight factors; with 0 rows the tracker's current factors hold for every frame). If
    ``positions`` has T rows, each frame first sets the locked coordinates ``locked_q`` to that frame's finite
    values (e.g. encoder readings; NaN keeps the previous value). If ``X_WB_out`` (·, nb, 4, 4) has T rows, each
    frame's row gets the poses of every body at its solution, bit for bit what :func:`forward_kinematics` gives
    at ``Q_out[t]`` (the solver's kinematics, completed: only bodies that moved since its last evaluation are
    recomputed). q is the start and ends as the last frame's solution. Returns the index of the first frame whose
    error norm exceeds the tolerance (tracking stops there; its rows are written), or -1.
    """
    tolerance = tracker.settings[1]
    work = tracker.work
    have_positions = positions.shape[0] == Q_out.shape[0]
    have_weights = obs_weight_seq.shape[0] == Q_out.shape[0]
    want_poses = X_WB_out.shape[0] == Q_out.shape[0]
    X_WB, obs_weight = work[0], tracker.obs_weight
    for t in range(Q_out.shape[0]):
        if have_weights:
            for k in range(obs_weight.shape[0]):
                obs_weight[k] = obs_weight_seq[t, k]
        if have_positions:
            for i in locked_q:
                value = positions[t, i]
                if math.isfinite(value):
                    q[i] = value
        status, F0, e0, F, e, contributing = solve_frame(tracker, q, obs_rot_seq[t], obs_pos_seq[t])
        Q_out[t, :] = q
        goal_out[t] = F
        err_out[t] = e
        status_out[t] = status
        if want_poses:
            complete_kinematics(tracker, q)
            for b in range(X_WB.shape[0]):
                for i in range(4):
                    for j in range(4):
                        X_WB_out[t, b, i, j] = X_WB[b, i, j]
        if e > tolerance:
            return t
    return -1
