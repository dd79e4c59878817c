"""Heading offsets and gyro biases of the IMUs, estimated on the kinematic chain (issue 19.2).

You are in the ROS-free estimator core; this module imports NumPy, numba, the compiled kinematics of
``core.multibody.compiled`` and four small dense kernels of ``core.assembly.kernels`` (rotation log, inverse
right Jacobian of SO(3), normal equations, Cholesky solve), the joint type codes of ``core.multibody.tree`` and
``core.spatial.rotation_z``. The estimator calls it once per cycle around its
solve (a marked hook in ``estimator.py``); the streaming and the offline path run the same cycles in the same
order, so both give the same bits.

Model. Without a magnetometer each IMU's heading drifts: IMU i's earth frame G_i is turned about gravity by a
slowly varying angle delta_i relative to the model world W, so its observation (world alignment applied) is

    R_WO_i = Rz(delta_i) R_WS_i(q),        delta_i(t + dt) = delta_i(t) + w,  w ~ N(0, s^2 dt)

with s^2 = (drift per minute)^2 / 60 s. Per-frame orientation IK (delta = 0) turns relative heading drift into
joint error. Where the chain cannot see a heading an IMU shares with others (a floating base, a ball joint), one
reference IMU is held at 0 (below) and those others' offsets are relative to it: its own walk moves them all, so
their prior grows by s^2 dt (I + c c^T), c_i = 1 for an offset relative to the reference (:func:`reference_walk`; on
a floating base every one: the relative heading of a leg and the pelvis walks at 2 s^2). A raw IMU's heading
(its own orientation filter, no magnetometer) is not a random walk but a ramp: it turns at the vertical component
of the gyro bias the filter has not removed. The walk matches its one-minute growth when s is that turn's RMS, e.g.
|b| / sqrt(3) per second for a bias |b| of unknown direction (``benchmarks/drift.py``'s raw rows: 9.92 deg/min for
0.005 rad/s); a larger s (the whole |b|, then doubled by the reference's walk) only widens the filter and lets
more noise through (README, "Heading drift").
Here delta is a state estimated with q from the kinematic constraints that make it observable:
hinge joints (a 1-dof joint cannot absorb a heading error of one of its sensors unless its axis is vertical),
encoders (locked coordinates absorb nothing), and the floating base or vertical first joint that does absorb a
common heading (then one reference IMU's delta is held at 0).

Residuals. With observations corrected by the current estimate, R_WO'_i = Rz(-delta_i) R_WO_i, the solver's
residual of sensor i (weight w_i, s_i = sqrt(w_i); see ``core.assembly.so3``) is

    r_i(q, delta) = s_i phi_i,   phi_i = log(Rz(-delta_i) R_WO_i R_WS_i(q)^T)   (a rotation vector in W)

A body rotation exp([J_w dv]x) R_WS perturbs phi on the right and a heading change exp(-[z d]x) Rz(-delta) on
the left, so

    d r_i / d v     = -s_i J_r^-1(phi_i) J_w,i(q)       (the assembler's rows, free velocities only)
    d r_i / d delta_i = -s_i J_l^-1(phi_i) z,  J_l^-1(phi) = J_r^-1(-phi)      (E: the world vertical, to first order)

Stacking all sensors: r(q + dq, delta + dd) = r0 + J dq + E dd (J: 3n x n_free, E: 3n x m, m the estimated
offsets). Both Jacobians are checked against finite differences in ``test/test_estimator_heading.py``.

The filter (information form, one Gauss-Newton step of the augmented problem per cycle). The cycle's IK solves
for q with delta at its prior mean d^- (covariance P^-, grown by the random walk: P^- = P + s^2 dt I). The
augmented problem in (q, delta) with orientation noise sigma per axis,

    min  |r0 + J dq + E dd|^2 / sigma^2 + dd^T (P^-)^-1 dd,

eliminates dq = -(J^T J)^-1 J^T (r0 + E dd) (the Schur complement), leaving the measurement
r0 + H dd with H = (I - P_J) E, P_J = J (J^T J)^-1 J^T the projection onto what the joints can absorb. Since
(I - P_J) is a symmetric projection,

    S = H^T H = E^T E - B^T N^-1 B,    g = H^T r0 = E^T r0 - B^T N^-1 b,    N = J^T J, B = J^T E, b = J^T r0

(b = 0 at an exact IK minimum; it is kept). The update is the Kalman update of delta in information form:

    Lambda = (P^-)^-1 + S / sigma^2,   P = Lambda^-1,   d = d^- - P g / sigma^2.

The random walk stops growing a variance at sigma_max^2 (sigma_max = 90 deg): an offset no constraint observes
keeps its estimate, and its P stays bounded instead of growing without end. Directions
the chain never observes (the observability rule below) get no information at all: S and g are projected onto
the generically observable subspace, Pi S Pi and Pi g. Without it, the O(|phi|) curvature of the residual
(noise-sized phi) leaks a little information into an exactly unobservable direction every cycle, and over
minutes the filter grew confident in a heading it cannot see (the consistency fix of observability-constrained
EKFs). N gets a tiny
ridge (1e-10 of its mean diagonal) for free velocities no sensor sees (their columns of J and rows of B are 0).

Observability rule. delta is observable exactly where S is positive definite; generically (over random
configurations q) the null space of the summed S is what the chain can never see. :func:`choose_reference` sums
S over seeded random configurations: a fixed base whose first joints are measured (encoders) or horizontal has
full rank (no reference needed); a floating base, or a vertical first joint that is estimated, absorbs a common
heading (rank m - 1), and the first IMU whose removal restores full rank becomes the reference. What remains
rank deficient is reported as unobservable and gets no information (above): e.g. the common heading of a leg
behind a 3-dof hip (the hip absorbs it; the hinges below only fix the leg's segments relative to each other).
Motion observes that direction (next paragraph): with the joint-centre accelerations on, ``observable`` also counts
the directions their pairs measure (:func:`observable_offsets`; observable once the joint centres accelerate
horizontally).

Joint-centre acceleration (2/3-dof joints). :func:`joint_pairs` pairs IMU c with IMU p on the nearest ancestor body
carrying an IMU when the joints between them are >= 2 hinges (welds allowed) through one point J (a ball or
universal joint built from hinges, e.g. the hip). Both IMUs see J's acceleration: for IMU i (specific force f_S,
gyro w_S, angular acceleration a_S, all in S_i; lever arm r_i = R_WS,i(q)^T (p_WJ(q) - p_WS,i(q)) from the URDF and
``ImuConfig.position`` p_BS at the solved q),

    u_i = Rz(-dhat_i) R_WO,i (f_S + w_S x (w_S x r_i) + a_S x r_i) = Rz(d_i - dhat_i) (a_WJ - g_W) + noise,

(the accelerometer reaches the cycles as ``rules.SAMPLE.f_S``), so the remaining offsets dd = d - dhat satisfy
u_c,h = Rz(dd_c - dd_p) u_p,h + noise. With v the true
horizontal acceleration, the products across the two sides, c = u_c,h . u_p,h = |v|^2 cos(dd_c - dd_p) + e_c and
s = (z x u_p,h) . u_c,h = |v|^2 sin(dd_c - dd_p) + e_s, have noise of mean 0: each side's horizontal components
carry independent white noise of variance s_a^2 = ``acceleration_noise``^2 (accelerometer noise, tilt error times g,
lever-arm and angular-acceleration errors). The measurement observes dd_c - dd_p with information |v|^2 / (2 s_a^2),
estimated by c / (2 s_a^2), and its least-squares gradient is s / (2 s_a^2) (:func:`acceleration_information`).
It enters the same information update, after the projection above (it observes what orientations cannot):
S += (sigma^2 c / (2 s_a^2)) h h^T, g -= (sigma^2 s / (2 s_a^2)) h, h = e_c - e_p (an entry only for an estimated
offset); summed over samples the step is atan-free, sum s / sum c = tan(dd_c - dd_p). No horizontal acceleration,
no information: no threshold. Why products across the sides: where the acceleration is as small as the noise (the
slow sines' hip centres, ~0.1 m/s^2), |v|^2 estimated from one side or from their mean counts each side's noise
power as signal (errors in variables): the former angle 2 atan((z x v') . (u_c - u_p) / (2 |v'|^2)) weighted by
|v'|^2, v' the mean of both sides, overstated the information (by 1.5x at equal signal and noise per axis,
``test_joint_centre_acceleration_is_unbiased_when_the_noise_is_as_large_as_the_acceleration``) and shrank each step
by as much, so the filter's std there was smaller than its error. A sample's c may be negative (the noise's);
summed, the information is unbiased. a_S is the central difference of the gyro around a sample, so the
measurement of a sample enters at the IMU's next sample (one sample late; each IMU's previous lever arm, f + w x
(w x r) and corrected R_WO are held, u turned by the heading change since); both IMUs' held samples must share
a stamp. A backward difference (alpha half a sample late) biased the heading by 2 deg on the exact ball-joint case
of the tests.

What limits a leg's heading. Behind a 3-dof hip only this measurement observes the leg's heading relative to the
pelvis (a walk of rate 2 s^2), so its accuracy has an information limit. ``benchmarks/heading_bound.py`` computes it
on a simulated session: the posterior Cramer-Rao bound, i.e. the covariance of the correctly specified Kalman filter
(causal) and of its RTS smoother (two-sided, the best any offline method can do), given per sample the orientations'
information at the true configuration (:meth:`HeadingFilter.chain_information`) and the joint-centre measurement's,
|v|^2 / (sigma_c^2 + sigma_p^2) with each side's true error (orientation noise times the specific force,
accelerometer, gyro noise through the lever arms), and the joint error a heading error causes through the solve.
``benchmarks/drift.py --minutes 10`` (at a19a355, as at 110f28e): on the slow sines (hip centres ~0.1 m/s^2 RMS) the
legs' heading std is 1.72 deg RMS over the session at the causal bound (1.23 smoothed), and the worst minute of any
joint (a hip) 2.35 deg (median over the noise on the session's own walk; 90 %: 3.07) at the causal bound, 1.62
smoothed: no causal estimator meets 2 deg on that motion, a smoother would. Walking (~1 m/s^2): 0.57 deg, worst
minute 0.87 causal. The filter: 3.09 and 1.09 deg (README, "Heading drift"); on the arm 0.65 at a bound of 0.63.
From raw IMUs (the walk of the paragraph "Model"): 8.4, 1.55 and 0.81 deg.

Gyro bias. An IMU's gyro should equal the angular velocity of its own orientation stream. Between two distinct
samples R_a (t_a) and R_b (t_b) of one IMU, w_stream = log(R_a^T R_b) / (t_b - t_a) in S; the bias estimate is
low-passed, b <- b + alpha ((w_a + w_b) / 2 - w_stream - b), alpha = dt / (tau + dt). The orientation noise
telescopes in the sum, so after tau seconds its contribution is about sigma / tau. Held samples (the rules reuse
a sample for a cycle no new one arrived for) are skipped.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from ros_dofkit.core.assembly.kernels import (
    _cholesky_solve,
    _inverse_right_jacobian,
    _normal_equations,
    _rotation_vector,
)
from ros_dofkit.core.multibody import compiled as kinematics
from ros_dofkit.core.multibody.tree import JOINT_REVOLUTE, JOINT_WELD
from ros_dofkit.core.spatial import rotation_z

#: Largest standard deviation (rad) of a heading offset: the random walk stops growing a variance beyond it.
MAX_HEADING_STD = 0.5 * math.pi

#: An offset is observable when its unit vector lies in the range of the summed information: the diagonal of the
#: resolution matrix pinv(S) S is then 1 (an offset sharing an unobservable direction with k others has 1 - 1/k).
OBSERVABLE_TOLERANCE = 1e-6

#: Random configurations the observability rule sums the information over.
OBSERVABILITY_SAMPLES = 8

HeadingModel = namedtuple("HeadingModel", ["body", "scale", "column", "free_v"])
HeadingModel.__doc__ = """What the per-cycle kernels read, per configured IMU i: ``body`` (plant body index),
``scale`` sqrt(weight), ``column`` its offset's index in the state (-1: held at 0, the reference or a sensor not
solved for); ``free_v`` the plant velocity indices the solver frees."""

ChainInformation = namedtuple("ChainInformation", ["S", "dq_dd", "N", "R_WS", "p_WS", "p_WJ"])
ChainInformation.__doc__ = """What a cycle's exact orientations tell at one configuration q
(:meth:`HeadingFilter.chain_information`), per unit orientation variance: ``S`` (m, m) the information about the
offsets (projected onto the observable directions, as :meth:`HeadingFilter.update` does), ``dq_dd`` (n_free, m) =
-N^-1 B the free velocities' error an offset error causes through the solve, ``N`` = J^T J (n_free, n_free) (the
solve's joints have covariance sigma^2 N^-1 from white orientation noise of sigma per axis); the geometry of the
joint-centre constraints: each IMU's R_WS (n, 3, 3) and position p_WS (n, 3), each pair's centre p_WJ (P, 3)."""

HeadingWork = namedtuple("HeadingWork", ["X_WB", "R_WF", "p_WM", "J6", "Jr", "err", "phi", "r", "J", "E", "N",
                                         "L", "B", "X", "column", "S", "g"])
HeadingWork.__doc__ = """Scratch of the kernels, allocated once: kinematics (X_WB, R_WF, p_WM), a 6 x nv Jacobian,
3x3 blocks, the stacked residual r (3n), Jacobians J (3n, n_free) and E (3n, m), N = J^T J, a factor L, B | b
(n_free, m + 1) and N^-1 (B | b) (X), a column, and the information S (m, m) and gradient g (m) of the last
cycle."""


def new_work(tree, nv: int, n_imu: int, n_free: int, m: int) -> HeadingWork:
    """Scratch for a plant (``tree`` = ``KinematicTree.kernel_arguments()``, nv velocities) with n_imu IMUs,
    n_free free velocities and m estimated offsets."""
    nb, rows, k = tree.parent.shape[0], 3 * n_imu, max(n_free, m, 1)
    return HeadingWork(
        X_WB=np.empty((nb, 4, 4)), R_WF=np.empty((nb, 3, 3)), p_WM=np.empty((nb, 3)), J6=np.empty((6, nv)),
        Jr=np.empty((3, 3)), err=np.empty((1, 3, 3)), phi=np.empty(3), r=np.zeros(rows), J=np.zeros((rows, n_free)),
        E=np.zeros((rows, m)), N=np.empty((n_free, n_free)), L=np.empty((k, k)), B=np.empty((n_free, m + 1)),
        X=np.empty((k, m + 1)), column=np.empty(k), S=np.zeros((m, m)), g=np.zeros(m))


@njit(cache=True, error_model="numpy")
def stack_residuals(tree, q, R_WO, solver_columns, model, R_BS, work):
    """Forward kinematics at q, then r, J, E (module docstring) of the solver's sensors whose observation R_WO[j]
    (already corrected by the heading estimate) is finite; rows of the others stay 0. Returns the sensors used."""
    X_WB, R_WF, p_WM, J6, Jr, err = work.X_WB, work.R_WF, work.p_WM, work.J6, work.Jr, work.err
    r, J, E = work.r, work.J, work.E
    kinematics.forward_kinematics(tree, q, X_WB, R_WF, p_WM)
    r[:] = 0.0
    J[:, :] = 0.0
    E[:, :] = 0.0
    free_v = model.free_v
    used = 0
    for j in range(solver_columns.shape[0]):
        i = solver_columns[j]
        s = model.scale[i]
        if not (s > 0.0 and math.isfinite(R_WO[j, 0, 0])):
            continue
        used += 1
        b = model.body[i]
        # err = R_WO R_WS^T with R_WS = R_WB R_BS, i.e. R_WO R_BS^T R_WB^T
        for a in range(3):
            for c in range(3):
                t = 0.0
                for k in range(3):
                    R_WS_ck = X_WB[b, c, 0] * R_BS[i, 0, k] + X_WB[b, c, 1] * R_BS[i, 1, k] + \
                        X_WB[b, c, 2] * R_BS[i, 2, k]
                    t += R_WO[j, a, k] * R_WS_ck
                err[0, a, c] = t
        phi0, phi1, phi2 = _rotation_vector(err, 0)
        row = 3 * i
        r[row] = s * phi0
        r[row + 1] = s * phi1
        r[row + 2] = s * phi2
        phi = work.phi
        phi[0], phi[1], phi[2] = phi0, phi1, phi2
        _inverse_right_jacobian(phi, Jr)
        kinematics.point_jacobian(tree, R_WF, p_WM, b, p_WM[0], False, J6)
        for a in range(free_v.shape[0]):
            c = free_v[a]
            for k in range(3):
                J[row + k, a] = -s * (Jr[k, 0] * J6[0, c] + Jr[k, 1] * J6[1, c] + Jr[k, 2] * J6[2, c])
        column = model.column[i]
        if column >= 0:
            phi[0], phi[1], phi[2] = -phi0, -phi1, -phi2
            _inverse_right_jacobian(phi, Jr)  # J_l^-1(phi) = J_r^-1(-phi); its third column is J_l^-1 z
            for k in range(3):
                E[row + k, column] = -s * Jr[k, 2]
    return used


@njit(cache=True, error_model="numpy")
def schur_information(work):
    """S = E^T E - B^T N^-1 B and g = E^T r - B^T N^-1 b (module docstring) from the stacked r, J, E."""
    r, J, E, N, L, B, X, column, S, g = work.r, work.J, work.E, work.N, work.L, work.B, work.X, work.column, \
        work.S, work.g
    rows, n, m = J.shape[0], J.shape[1], E.shape[1]
    _normal_equations(J, n, r, 0.0, N, column)  # N = J^T J, column = -J^T r
    mean = 0.0
    for a in range(n):
        mean += N[a, a]
        B[a, m] = -column[a]  # b = J^T r
        for c in range(m):  # B = J^T E
            t = 0.0
            for k in range(rows):
                t += J[k, a] * E[k, c]
            B[a, c] = t
    ridge = 1e-10 * mean / max(n, 1) + 1e-300
    for c in range(m + 1):  # X = N^-1 (B | b)
        for a in range(n):
            for k in range(n):
                L[a, k] = N[a, k] + (ridge if a == k else 0.0)
        if not _cholesky_solve(L, B[:, c], n, column):
            column[:n] = 0.0
        for a in range(n):
            X[a, c] = column[a]
    for p in range(m):
        for c in range(m + 1):
            t = 0.0
            for k in range(rows):
                t += E[k, p] * (r[k] if c == m else E[k, c])
            for a in range(n):
                t -= B[a, p] * X[a, c]
            if c == m:
                g[p] = t
            else:
                S[p, c] = t


@njit(cache=True, error_model="numpy")
def information_update(delta, P, S, g, dt, rate2, common, sigma2, work):
    """Predict (P += rate2 dt (I + c c^T) over the offsets whose variance is below the ceiling; c = ``common`` (m,):
    how the reference's own walk moves each offset, 1 for an offset relative to it) and update in information form
    (module docstring). Returns False when the information matrix is not positive definite (nothing changes
    then)."""
    m = delta.shape[0]
    L, column = work.L, work.column
    grown = np.empty((m, m))
    ceiling = MAX_HEADING_STD * MAX_HEADING_STD
    for a in range(m):
        for c in range(m):
            growing = P[a, a] < ceiling and P[c, c] < ceiling
            step = rate2 * dt * ((1.0 if a == c else 0.0) + common[a] * common[c])
            grown[a, c] = P[a, c] + step if growing else P[a, c]
    information = _inverse(grown, L, column)
    if information.shape[0] != m:
        return False
    for a in range(m):
        for c in range(m):
            grown[a, c] = 0.5 * (information[a, c] + information[c, a]) + S[a, c] / sigma2
    covariance = _inverse(grown, L, column)
    if covariance.shape[0] != m:
        return False
    for a in range(m):
        for c in range(m):
            P[a, c] = 0.5 * (covariance[a, c] + covariance[c, a])
    for a in range(m):
        t = 0.0
        for c in range(m):
            t += P[a, c] * g[c]
        column[a] = t
    for a in range(m):
        delta[a] -= column[a] / sigma2
    return True


@njit(cache=True, error_model="numpy")
def _inverse(A, L, column):
    """A^-1 of a symmetric positive definite m x m A, column by column (Cholesky); a (0, 0) array if it is not."""
    m = A.shape[0]
    inverse = np.empty((m, m))
    unit = np.empty(m)
    for c in range(m):
        for a in range(m):
            for k in range(m):
                L[a, k] = A[a, k]
            unit[a] = 1.0 if a == c else 0.0
        if not _cholesky_solve(L, unit, m, column):
            return np.empty((0, 0))
        for a in range(m):
            inverse[a, c] = column[a]
    return inverse


@njit(cache=True)
def correct_observations(R_WO, solver_columns, column, delta):
    """R_WO[j] <- Rz(-delta) R_WO[j] in place for each solver sensor with an estimated offset (NaN rows stay)."""
    for j in range(solver_columns.shape[0]):
        col = column[solver_columns[j]]
        if col < 0 or not math.isfinite(R_WO[j, 0, 0]):
            continue
        c = math.cos(delta[col])
        s = math.sin(delta[col])
        for k in range(3):
            x, y = R_WO[j, 0, k], R_WO[j, 1, k]
            R_WO[j, 0, k] = c * x + s * y
            R_WO[j, 1, k] = -s * x + c * y


JointPairs = namedtuple("JointPairs", ["child", "parent", "centre_body"])
JointPairs.__doc__ = """The joint-centre acceleration constraints: per pair, the IMU indices on the child side
(``child``) and on the parent side (``parent``) of a 2/3-dof joint, and the body whose joint origin p_WM is the joint
centre J (``centre_body``); int64 arrays of one length."""


#: No joint-centre acceleration constraint.
NO_PAIRS = JointPairs(*(np.zeros(0, np.int64),) * 3)


def joint_pairs(tree, body, scale, Q) -> JointPairs:
    """Pairs (IMU i, IMU k) where IMU k rides the nearest ancestor body of i's body that carries an IMU (weight > 0),
    and the joints between them are at least two revolute joints (welds allowed) whose origins coincide at every
    configuration of Q: a 2- or 3-dof joint built from hinges, centred at their common origin."""
    parent, joint_type = tree.parent, tree.joint_type
    carrier = {}
    for i in range(len(body)):
        if scale[i] > 0.0:
            carrier.setdefault(int(body[i]), i)
    X_WB, R_WF, p_WM = (np.empty((parent.shape[0], 4, 4)), np.empty((parent.shape[0], 3, 3)),
                        np.empty((parent.shape[0], 3)))
    origins = []
    for q in Q:
        kinematics.forward_kinematics(tree, q, X_WB, R_WF, p_WM)
        origins.append(p_WM.copy())
    child, above, centre = [], [], []
    for b, i in carrier.items():
        path, a = [], b
        while a > 0 and (a == b or a not in carrier):
            path.append(a)
            a = int(parent[a])
        if a <= 0 and a not in carrier:
            continue
        hinges = [c for c in path if joint_type[c] == JOINT_REVOLUTE]
        if len(hinges) < 2 or any(joint_type[c] not in (JOINT_REVOLUTE, JOINT_WELD) for c in path):
            continue
        if all(np.allclose(p[hinges], p[hinges[0]], atol=1e-9) for p in origins):
            child.append(i)
            above.append(carrier[a])
            centre.append(hinges[0])
    return JointPairs(np.array(child, np.int64), np.array(above, np.int64), np.array(centre, np.int64))


def observable_offsets(column, basis, pairs) -> np.ndarray:
    """(n_imu,) bool: the estimated offsets (``column`` >= 0) whose unit vector lies in the span of the observable
    directions of the orientations (``basis`` (m, k), :func:`choose_reference`) and of each joint pair's difference
    e_child - e_parent (the joint-centre acceleration's measurement direction): what the chain observes once the
    joint centres accelerate horizontally."""
    m = basis.shape[0]
    directions = [basis]
    for child, parent in zip(pairs.child, pairs.parent, strict=True):
        h = np.zeros((m, 1))
        if column[child] >= 0:
            h[column[child]] = 1.0
        if column[parent] >= 0:
            h[column[parent]] -= 1.0
        directions.append(h)
    spanned = np.hstack(directions)
    observable = np.zeros(len(column), dtype=bool)
    if m == 0 or spanned.shape[1] == 0:
        return observable
    U, singular, _ = np.linalg.svd(spanned, full_matrices=False)
    span = U[:, singular > 1e-8 * max(float(singular[0]), 1e-300)]
    estimated = column >= 0
    observable[estimated] = np.sum(span ** 2, axis=1)[column[estimated]] > 1.0 - OBSERVABLE_TOLERANCE
    return observable


def fill_accelerations(f_S, accel, present) -> None:
    """``f_S`` (n, 3) <- the accelerometer readings ``accel`` ((3,) or (n, 3), m/s^2; None: none) where
    ``present`` ((n,) or a bool; None: all) and finite; NaN elsewhere (the samples' "absent" value)."""
    values = None if accel is None else np.asarray(accel, dtype=float)
    if values is None or values.size != f_S.size:
        f_S[:] = np.nan
        return
    values = values.reshape(f_S.shape)
    keep = np.isfinite(values).all(axis=1)
    if present is not None:
        keep &= np.broadcast_to(np.asarray(present, dtype=bool), keep.shape)
    if keep.all():  # every reading kept (a recording's usual window): one strided copy, no masked scatter
        f_S[:] = values
        return
    f_S[:] = np.nan
    f_S[keep] = values[keep]


def acceleration_information(u_child, u_parent, noise2):
    """(information, gradient) of one joint from the horizontal projections of its centre's acceleration seen by
    both sides (module docstring): with c = u_child,h . u_parent,h and s = (z x u_parent,h) . u_child,h (= |v|^2 cos
    and |v|^2 sin of the angle from the parent's to the child's, v the true horizontal acceleration, when the two
    differ by a turn only), information = c / (2 noise2) and gradient = s / (2 noise2) (each side's horizontal
    components have variance noise2): the measurement of the remaining offset difference d_child - d_parent, whose
    sum over samples is the least-squares step. Products across the two sides only: their noises are independent,
    so both are unbiased however small the acceleration (no threshold; a sample's c may be negative)."""
    c = u_child[0] * u_parent[0] + u_child[1] * u_parent[1]
    s = u_child[1] * u_parent[0] - u_child[0] * u_parent[1]
    return c / (2.0 * noise2), s / (2.0 * noise2)


@njit(cache=True, error_model="numpy")
def gyro_biases(stamp, reset, R_GS, w_S, use, last_t, last_R, last_w, bias, tau, max_gap, bias_out):
    """Per cycle c (in order) and IMU i with a sample (``use``), the low-pass bias update of the module docstring
    against the IMU's last distinct sample (forgotten at a cycle that follows a reset: no difference across a clock
    jump); ``bias_out[c]`` the biases after cycle c. State arrays in place."""
    n = R_GS.shape[1]
    err = np.empty((1, 3, 3))
    for cyc in range(stamp.shape[0]):
        t = stamp[cyc]
        if reset[cyc]:
            last_t[:] = np.nan
        for i in range(n):
            if use[cyc, i] and math.isfinite(R_GS[cyc, i, 0, 0]):
                same = True
                for a in range(3):
                    for b in range(3):
                        if R_GS[cyc, i, a, b] != last_R[i, a, b]:
                            same = False
                if not same:
                    dt = t - last_t[i]
                    if dt > 0.0 and dt <= max_gap:
                        for a in range(3):
                            for b in range(3):
                                err[0, a, b] = last_R[i, 0, a] * R_GS[cyc, i, 0, b] + \
                                    last_R[i, 1, a] * R_GS[cyc, i, 1, b] + last_R[i, 2, a] * R_GS[cyc, i, 2, b]
                        w0, w1, w2 = _rotation_vector(err, 0)
                        alpha = dt / (tau + dt)
                        stream = (w0 / dt, w1 / dt, w2 / dt)
                        for a in range(3):
                            innovation = 0.5 * (w_S[cyc, i, a] + last_w[i, a]) - stream[a]
                            if math.isfinite(innovation):
                                bias[i, a] += alpha * (innovation - bias[i, a])
                    last_t[i] = t
                    for a in range(3):
                        last_w[i, a] = w_S[cyc, i, a]
                        for b in range(3):
                            last_R[i, a, b] = R_GS[cyc, i, a, b]
        for i in range(n):
            for a in range(3):
                bias_out[cyc, i, a] = bias[i, a]


def random_configurations(plant, count: int, seed: int = 0) -> np.ndarray:
    """(count, nq) seeded configurations for the observability rule: revolute/prismatic coordinates uniform in
    their limits (+-pi where infinite), floating-base quaternions uniform, translations 0."""
    rng = np.random.default_rng(seed)
    lower = np.asarray(plant.position_lower_limits(), dtype=float)
    upper = np.asarray(plant.position_upper_limits(), dtype=float)
    lower = np.where(np.isfinite(lower), lower, -math.pi)
    upper = np.where(np.isfinite(upper), upper, math.pi)
    Q = rng.uniform(lower, upper, (count, len(lower)))
    for joint in plant.floating_base_joints():
        start = joint.position_start
        quaternion = rng.normal(size=(count, 4))
        Q[:, start:start + 4] = quaternion / np.linalg.norm(quaternion, axis=1, keepdims=True)
        Q[:, start + 4:start + 7] = 0.0
    return Q


def summed_information(tree, nv: int, model: HeadingModel, Q) -> np.ndarray:
    """Sum over the configurations Q of S (module docstring) with exact observations (phi = 0): the information
    the chain gives about the offsets of ``model.column``, generically."""
    n_imu = model.body.shape[0]
    m = int(model.column.max()) + 1 if n_imu else 0
    work = new_work(tree, nv, n_imu, model.free_v.shape[0], m)
    identity = np.broadcast_to(np.eye(3), (n_imu, 3, 3)).copy()
    columns = np.arange(n_imu, dtype=np.int64)
    total = np.zeros((m, m))
    for q in Q:
        kinematics.forward_kinematics(tree, q, work.X_WB, work.R_WF, work.p_WM)
        R_WO = np.ascontiguousarray(work.X_WB[model.body, :3, :3])
        stack_residuals(tree, q, R_WO, columns, model, identity, work)
        schur_information(work)
        total += work.S
    return total


def rank(S, scale: float, relative: float = 1e-8) -> int:
    """Numerical rank of a symmetric positive semi-definite S: eigenvalues above ``relative * scale`` (``scale``
    the size of a fully observed offset's information, e.g. E^T E's largest diagonal entry)."""
    if S.shape[0] == 0:
        return 0
    return int(np.sum(np.linalg.eigvalsh(S) > relative * scale))


def choose_reference(tree, nv: int, body, scale, free_v, reference: int | None, plant) -> tuple:
    """The observability rule (module docstring): ``(column, observable, basis)`` where column (n_imu,) int64 is
    each IMU's offset index (-1: held at 0: the reference and IMUs of weight 0), observable (n_imu,) bool says which
    estimated offsets the chain's orientations see generically, and basis (m, k) spans the observable directions of
    the offsets (k = m: all of them). ``reference``: a configured reference IMU index, or None to let the rule choose
    one (only when a common heading is unobservable)."""
    n_imu = len(body)
    Q = random_configurations(plant, OBSERVABILITY_SAMPLES)

    def columns_without(excluded):
        column = np.full(n_imu, -1, dtype=np.int64)
        keep = [i for i in range(n_imu) if scale[i] > 0.0 and i not in excluded]
        column[keep] = np.arange(len(keep))
        return column

    def information(column):
        return summed_information(tree, nv, HeadingModel(body, scale, column, free_v), Q)

    excluded = set() if reference is None else {reference}
    column = columns_without(excluded)
    S = information(column)
    size = len(Q) * float(np.max(scale, initial=0.0)) ** 2
    if reference is None and rank(S, size) < S.shape[0]:
        full = rank(S, size)
        for i in range(n_imu):
            if column[i] < 0:
                continue
            candidate = columns_without({i})
            reduced = information(candidate)
            if rank(reduced, size) == full:
                column, S = candidate, reduced
                break
    seen = np.zeros((S.shape[0], 0))
    if S.shape[0]:
        eigenvalues, vectors = np.linalg.eigh(S)
        seen = vectors[:, eigenvalues > 1e-8 * size]  # the resolution matrix pinv(S) S is seen @ seen^T
    return column, observable_offsets(column, seen, NO_PAIRS), seen


def reference_walk(tree, nv: int, body, scale, free_v, plant, column, reference: int, pairs) -> np.ndarray:
    """(m,) how IMU ``reference``'s own heading walk moves each estimated offset (``column``): the offsets of the
    IMUs whose common heading with the reference the chain cannot see (the null direction, through the reference,
    of the generically summed information of the orientations and of the joint ``pairs``' directions, scaled to 1
    at the reference: e.g. every IMU on a floating base whose legs are paired with the pelvis, or the IMUs behind
    the reference's ball joint) are relative to it, so they walk with it (1); the others do not (0)."""
    weighted = np.flatnonzero(np.asarray(scale) > 0.0)
    walk = np.zeros(int((np.asarray(column) >= 0).sum()))
    if reference not in weighted:
        return walk
    every = np.full(len(body), -1, dtype=np.int64)
    every[weighted] = np.arange(len(weighted))
    Q = random_configurations(plant, OBSERVABILITY_SAMPLES)
    S = summed_information(tree, nv, HeadingModel(body, scale, every, free_v), Q)
    size = len(Q) * float(np.max(scale)) ** 2
    for child, parent in zip(pairs.child, pairs.parent, strict=True):
        h = np.zeros(len(weighted))
        h[every[child]], h[every[parent]] = 1.0, -1.0
        S += size * np.outer(h, h)
    eigenvalues, vectors = np.linalg.eigh(S)
    null = vectors[:, eigenvalues <= 1e-8 * size]
    direction = null @ null[every[reference]]
    if abs(direction[every[reference]]) < 1e-9:
        return walk
    for i in weighted:
        if column[i] >= 0:
            walk[column[i]] = direction[every[i]] / direction[every[reference]]
    return walk


class HeadingFilter:
    """Per-IMU heading offsets (and gyro biases) of one estimator; see the module docstring for the math.

    Built once per Estimator from ``settings`` (a ``config.HeadingEstimation``) when it is enabled. Per cycle the
    estimator calls :meth:`correct` on the cycle's observations before its solve and :meth:`update` with the solved
    q after it; :meth:`unbiased_gyros` on every run of cycles. :meth:`reset` after a clock jump,
    :meth:`calibrated` after a calibration (the new mountings absorb the headings).
    """

    def __init__(self, setup, settings, stale_timeout_s: float, positions=None):
        plant = setup.plant
        self.names = setup.imu_names
        self._tree = plant.tree.kernel_arguments()
        nv = plant.num_velocities()
        self._free_v = np.flatnonzero(setup.free_v).astype(np.int64)
        body = np.asarray(setup.body_index, dtype=np.int64)
        scale = np.sqrt(np.asarray(setup.weights, dtype=float))
        reference = None if settings.reference_imu is None else self.names.index(settings.reference_imu)
        column, _, basis = choose_reference(self._tree, nv, body, scale, self._free_v, reference, plant)
        # Information only along the generically observable directions (module docstring): None when all are.
        self._projector = None if basis.shape[1] == basis.shape[0] else basis @ basis.T
        self.reference = None
        if reference is not None:
            self.reference = settings.reference_imu
        elif (column < 0).any() and scale[np.flatnonzero(column < 0)].max() > 0.0:
            self.reference = self.names[int(np.flatnonzero((column < 0) & (scale > 0.0))[0])]
        self._model = HeadingModel(body, scale, column, self._free_v)
        m = int((column >= 0).sum())
        self._work = new_work(self._tree, nv, len(self.names), len(self._free_v), m)
        self._rate2 = math.radians(settings.drift_deg_per_min) ** 2 / 60.0
        self._sigma2 = math.radians(settings.orientation_noise_deg) ** 2
        self._initial2 = max(math.radians(settings.initial_deg), 1e-6) ** 2
        self._tau = float(settings.gyro_bias_time_constant_s)
        self._max_gap = float(stale_timeout_s)
        n = len(self.names)
        # joint-centre acceleration constraints (module docstring), their noise and the gyro differentiation state
        self._noise2 = float(settings.acceleration_noise) ** 2
        self.pairs = joint_pairs(self._tree, body, scale, random_configurations(plant, OBSERVABILITY_SAMPLES)) \
            if self._noise2 > 0.0 and m else NO_PAIRS
        self._p_BS = np.zeros((n, 3)) if positions is None else np.asarray(positions, dtype=float).reshape(n, 3)
        self._inertial = None
        self.observable = observable_offsets(column, basis, self.pairs)  # orientations and accelerations
        # offsets relative to a reference whose heading walks as well (module docstring, "Model")
        self._common = np.zeros(m) if self.reference is None else reference_walk(
            self._tree, nv, body, scale, self._free_v, plant, column, self.names.index(self.reference), self.pairs)
        # joint ends: pair k's child side k, its parent side P + k (an IMU may sit on several, e.g. the pelvis)
        self._end_imu = np.concatenate([self.pairs.child, self.pairs.parent])
        self._end_centre = np.concatenate([self.pairs.centre_body, self.pairs.centre_body])
        self._paired = np.unique(self._end_imu)
        self._before_t, self._before_w = np.empty(n), np.empty((n, 3))  # per IMU: the sample before the held one
        self._held_t, self._held_w = np.empty(n), np.empty((n, 3))
        self._held_R, self._held_d = np.empty((n, 3, 3)), np.empty(n)
        self._held_r, self._held_a = np.empty((len(self._end_imu), 3)), np.empty((len(self._end_imu), 3))  # per end
        self.delta = np.zeros(m)
        self.P = np.zeros((m, m))
        self._stamp = np.full(1, np.nan)
        self._bias = np.zeros((n, 3))
        self._last_t = np.empty(n)
        self._last_R = np.empty((n, 3, 3))
        self._last_w = np.empty((n, 3))
        self.clear()

    def reset(self, initial2: float | None = None) -> None:
        """Offsets at 0 with the initial covariance (a clock jump: tracking restarts). The gyro biases are kept:
        they belong to the sensors, not to the world (their sample history is dropped at the reset's cycle)."""
        self.delta[:] = 0.0
        self.P[:, :] = 0.0
        np.fill_diagonal(self.P, self._initial2 if initial2 is None else initial2)
        self._stamp[0] = np.nan
        self._before_t[:] = np.nan
        self._held_t[:] = np.nan

    def clear(self) -> None:
        """Everything as built: offsets reset, gyro biases 0, no sample history (``Estimator.reset``)."""
        self.reset()
        self._bias[:] = 0.0
        self._last_t[:] = np.nan
        self._last_R[:] = np.nan
        self._last_w[:] = np.nan

    def calibrated(self) -> None:
        """After a calibration: the mountings absorbed the headings, so the offsets restart at exactly 0."""
        self.reset(1e-12)

    def correct(self, R_WO, solver_columns) -> None:
        """R_WO (solver sensors, 3, 3) of one cycle <- Rz(-delta_i) R_WO, in place."""
        correct_observations(R_WO, solver_columns, self._model.column, self.delta)

    def begin_run(self, sample_stamp, w_S, f_S) -> None:
        """The inertial samples of a run of cycles (C, n_imu): each cycle's sample stamps, unbiased gyros and
        accelerometers, which :meth:`update` reads by cycle index for the joint-centre acceleration constraint."""
        self._inertial = (sample_stamp, w_S, f_S)

    def update(self, q, stamp: float, R_WO, solver_columns, R_BS, cycle: int | None = None) -> bool:
        """One filter step after the cycle's solve at q (observations ``R_WO`` as corrected by :meth:`correct`,
        mountings R_BS (n_imu, 3, 3)); ``cycle``: the index into :meth:`begin_run`'s samples (None: orientations
        only). Returns False when nothing was used."""
        if self.delta.shape[0] == 0:
            return False
        if not stack_residuals(self._tree, q, R_WO, solver_columns, self._model, R_BS, self._work):
            return False
        schur_information(self._work)
        if self._projector is not None:
            S, g, projector = self._work.S, self._work.g, self._projector
            S[:, :] = projector @ S @ projector
            g[:] = projector @ g
        if cycle is not None and self._inertial is not None and self.pairs.child.shape[0]:
            self._add_accelerations(cycle, R_WO, solver_columns, R_BS)
        previous = self._stamp[0]
        dt = stamp - previous if previous == previous and stamp > previous else 0.0
        if not information_update(self.delta, self.P, self._work.S, self._work.g, dt, self._rate2, self._common,
                                  self._sigma2, self._work):
            return False
        self._stamp[0] = stamp
        return True

    def chain_information(self, q, R_BS) -> ChainInformation:
        """:class:`ChainInformation` at q with mountings R_BS (n_imu, 3, 3) and every orientation exact (phi = 0):
        the information the filter's model of one cycle holds (for bounds such as benchmarks/heading_bound.py's).
        Arrays are copies; the filter's state does not change."""
        work, model = self._work, self._model
        kinematics.forward_kinematics(self._tree, q, work.X_WB, work.R_WF, work.p_WM)
        R_WB = work.X_WB[model.body, :3, :3]
        R_WS = np.ascontiguousarray(R_WB @ R_BS)
        p_WS = work.X_WB[model.body, :3, 3] + np.einsum("nij,nj->ni", R_WB, self._p_BS)
        p_WJ = work.p_WM[self.pairs.centre_body].copy()
        stack_residuals(self._tree, q, R_WS, np.arange(len(self.names), dtype=np.int64), model, R_BS, work)
        schur_information(work)
        S = work.S.copy()
        if self._projector is not None:
            S = self._projector @ S @ self._projector
        n, m = len(self._free_v), self.delta.shape[0]
        return ChainInformation(S, -work.X[:n, :m].copy(), work.N.copy(), R_WS, p_WS, p_WJ)

    def _inertial_step(self, cycle, R_WO, solver_columns, R_BS):
        """Per IMU with a new sample at this cycle: for each joint end it sits on (pair k's child end k, parent end
        P + k), u of its previous sample (module docstring) with alpha from the central difference of the gyros
        around it, turned by the heading change since (finite: ``ready``); then the new sample's parts (lever arm,
        f + w x (w x r), corrected R_WO) are held for the next. Returns (ready, u (2P, 3), the ends' held stamps)."""
        sample_stamp, w_S, f_S = (values[cycle] for values in self._inertial)
        X_WB, p_WM, body = self._work.X_WB, self._work.p_WM, self._model.body
        row = np.full(len(self.names), -1, dtype=np.int64)
        row[solver_columns] = np.arange(len(solver_columns))
        ends = len(self._end_imu)
        ready, u, stamps = np.zeros(ends, dtype=bool), np.full((ends, 3), np.nan), self._held_t[self._end_imu]
        for i in self._paired:
            t = sample_stamp[i]
            if not (math.isfinite(t) and t != self._held_t[i]):
                continue
            span = t - self._before_t[i]
            alpha = (w_S[i] - self._before_w[i]) / span if 0.0 < span <= 2.0 * self._max_gap else None
            turn = rotation_z(self._held_d[i] - self._offset(i))
            R_WB, b = X_WB[body[i], :3, :3], body[i]
            R_WS = R_WB @ R_BS[i]
            for e in np.flatnonzero(self._end_imu == i):
                if alpha is not None:
                    u[e] = turn @ (self._held_R[i] @ (self._held_a[e] + np.cross(alpha, self._held_r[e])))
                    ready[e] = np.isfinite(u[e]).all()
                r = R_WS.T @ (p_WM[self._end_centre[e]] - X_WB[b, :3, 3] - R_WB @ self._p_BS[i])
                self._held_r[e] = r
                self._held_a[e] = f_S[i] + np.cross(w_S[i], np.cross(w_S[i], r))
            self._before_t[i], self._before_w[i] = self._held_t[i], self._held_w[i]
            self._held_t[i], self._held_w[i] = t, w_S[i]
            self._held_R[i] = R_WO[row[i]] if row[i] >= 0 else np.nan
            self._held_d[i] = self._offset(i)
        return ready, u, stamps

    def _offset(self, i) -> float:
        """IMU i's current heading estimate (0 for an offset held at 0)."""
        col = self._model.column[i]
        return 0.0 if col < 0 else float(self.delta[col])

    def _add_accelerations(self, cycle, R_WO, solver_columns, R_BS) -> None:
        """S and g (in the orientation residual's units: scaled by sigma^2) += each joint's acceleration
        measurement of d_child - d_parent (module docstring) at both IMUs' previous samples when they share a stamp."""
        ready, u, stamps = self._inertial_step(cycle, R_WO, solver_columns, R_BS)
        column, P = self._model.column, len(self.pairs.child)
        h = np.zeros(self.delta.shape[0])
        for k, (child, parent) in enumerate(zip(self.pairs.child, self.pairs.parent, strict=True)):
            if not (ready[k] and ready[P + k] and stamps[k] == stamps[P + k]):
                continue
            information, gradient = acceleration_information(u[k], u[P + k], self._noise2)
            h[:] = 0.0
            if column[child] >= 0:
                h[column[child]] = 1.0
            if column[parent] >= 0:
                h[column[parent]] -= 1.0
            self._work.S[:, :] += self._sigma2 * information * np.outer(h, h)
            self._work.g[:] -= self._sigma2 * gradient * h

    def unbiased_gyros(self, stamp, reset, R_GS, w_S, use) -> np.ndarray:
        """w_S (C, n_imu, 3) minus the gyro bias estimates after each cycle (the cycles in order; ``reset`` (C,)
        True at a cycle after a clock jump)."""
        if self._tau <= 0.0:
            return w_S
        bias = np.empty_like(w_S)
        gyro_biases(stamp, reset, R_GS, w_S, use, self._last_t, self._last_R, self._last_w, self._bias, self._tau,
                    self._max_gap, bias)
        return w_S - bias

    def offsets(self) -> dict:
        """{IMU name: (heading offset (rad), its standard deviation (rad) or 0 when held, observable)}."""
        column = self._model.column
        return {name: ((float(self.delta[column[i]]), math.sqrt(max(self.P[column[i], column[i]], 0.0)),
                        bool(self.observable[i])) if column[i] >= 0 else (0.0, 0.0, False))
                for i, name in enumerate(self.names)}

    @property
    def columns(self) -> np.ndarray:
        """(n_imu,) int64: each IMU's offset index in ``delta`` (-1: held at 0, the reference or a weight of 0)."""
        return self._model.column

    def gyro_bias(self) -> dict:
        """{IMU name: gyro bias estimate (3,) rad/s in the sensor frame}."""
        return {name: self._bias[i].copy() for i, name in enumerate(self.names)}


def diagnostic_values(estimates: dict, name: str) -> list:
    """``[(key, value)]`` of IMU ``name`` for a diagnostics status: heading offset and its standard deviation
    (deg), whether the chain observes it, and the gyro bias (rad/s, sensor axes); [] when heading estimation is
    off (``estimates`` = ``Estimator.heading_estimates()``)."""
    estimate = estimates.get(name)
    if estimate is None:
        return []
    bias = estimate["gyro_bias"]
    return [("heading_offset_deg", math.degrees(estimate["heading_offset_rad"])),
            ("heading_std_deg", math.degrees(estimate["heading_std_rad"])),
            ("heading_observable", "true" if estimate["observable"] else "false"),
            *[(f"gyro_bias_rad_s.{axis}", float(value)) for axis, value in zip("xyz", bias, strict=True)]]
