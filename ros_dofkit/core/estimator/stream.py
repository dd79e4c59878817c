"""A message's one cycle in one compiled call: the live node's cycle (``Estimator._stream_cycle``).

Where you are: the ROS-free estimator core. This module imports NumPy, numba, the assembly's compiled tracking
(``kernels.track_frames``), the plant's compiled position difference and ``offline``'s compiled velocities and sensor
errors, the kernels the batch path (``Estimator._solve_cycles``) calls one by one on a run's arrays. It exists for the
node's budget (issue 18): its cycle was ~60 us of which ~10 were compiled, the rest the Python and NumPy around the
same kernels (``Assembler.track_sequence``'s checks, the velocity priors' and observations' small array operations,
a dispatcher typing the kinematic tree); and the sets come 2 ms apart, each starting with cold caches, so that each
of those microseconds costs about two. :func:`stream_cycle` does the steps of ``Estimator._stream_cycle`` in one
call, with the same kernels on the same values in the same order, so its outputs are the batch path's bits (the
streaming == batch tests of test_estimator_estimator, test_estimator_rules and test_node_estimator). The steps the
batch path did with NumPy are written here once, as kernels over C cycles that both paths call (the batch path on its
run, :func:`stream_cycle` on its one row): the samples' masks (:func:`read_samples`), the locked start
(:func:`locked_positions`) and the velocity prior (:func:`velocity_priors`).

Its arguments are fixed objects (:class:`StreamBuffers`, :class:`StreamProblem`, the rules' one-message ``Cycles``, the
Assembler's ``FrameTracking``), so the Estimator calls it through its entry point (``compiled_entry``), rebound when
one of them is replaced (the IMU messages' offer, ``rules.offer_imu_reading``, likewise).

numba keys its cache of this kernel on this file's text alone: the kernels it calls are linked in, so after changing
only those, ``python -m ros_dofkit.precompile`` (``./run``'s set-up, the install step) removes the stale entries
(``precompile.purge_stale_kernels``); by hand: ``find ros_dofkit -name '*.nb[ic]' -delete``.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from ros_dofkit.core.assembly.kernels import track_frames
from ros_dofkit.core.estimator.offline import kinematics_and_velocities, sensor_errors
from ros_dofkit.core.multibody.compiled import difference_positions

#: :func:`stream_cycle`'s outcomes: the cycle's outputs are in the buffers, or why it left them to the batch path.
STREAMED = 0
NOTHING_OBSERVED = 1  # no sample of a weighted IMU: the cycle holds q (the batch path says so)
NOT_SET = 2  # a locked q that set_positions would refuse (non-finite) or change (a quaternion not unit to rounding)
TRACK_FAILED = 3  # the frame missed the error tolerance (the batch path retries it from the same start)
SINGULAR_GYROS = 4  # q is solved (``Q``); the gyros' normal equations were singular

# set_positions keeps a quaternion whose norm is within 4 eps of 1 (Assembler's _UNIT_TO_ROUNDING) and normalizes
# others; its norm is NumPy's dot product, whose summation order this loop need not share (a few ulp): within half
# that bound both keep it, and beyond it the batch path decides.
_SURELY_UNIT = 2.0 * np.finfo(float).eps

StreamBuffers = namedtuple("StreamBuffers", [
    "stamp", "R_GS", "w_S", "observed", "use_gyro", "R_WO", "X_WB", "have_X_WB", "V", "from_gyro", "errors",
    "start", "first_row", "positions", "Q", "goal", "error_norm", "status", "obs_pos", "obs_weight", "previous",
    "v_prior",
])
StreamBuffers.__doc__ = """One cycle's arrays, allocated once per solver (:func:`new_buffers`): the inputs and
outputs of the batch path's kernels as a one-cycle run (leading axis 1). ``stamp`` (1,); ``R_GS`` (1, n_imu, 3, 3) and
``w_S`` (1, n_imu, 3) the cycle's samples; ``observed`` / ``use_gyro`` (1, n_imu) bool; ``R_WO`` (1, solver sensors,
3, 3); ``X_WB`` (1, nb, 4, 4) the solution's poses; ``have_X_WB`` (1,) True; ``V`` (1, nv); ``from_gyro`` (1, nv)
bool; ``errors`` (1, n_imu) deg; ``start`` (nq,) the solver's start (the locked q); ``first_row`` [0] (the
cycle's row, for :func:`locked_positions`); ``positions`` (1, nq) its locked coordinates' values, NaN elsewhere;
``Q`` (1, nq) the solution; ``goal``, ``error_norm`` (1,), ``status`` (1,) int64; ``obs_pos`` (1, 0, 3) and
``obs_weight`` (0, solver sensors) (no markers, the configured weights); ``previous`` (nq,) the last cycle's q;
``v_prior`` (1, nv)."""

StreamProblem = namedtuple("StreamProblem", [
    "weighted", "calibrated", "solver_columns", "measured", "art_q", "art_v", "odometry_q", "body_index", "R_BS",
    "free_v",
])
StreamProblem.__doc__ = """What the solver and the configuration fix for the cycles (rebuilt with the solver):
``weighted`` (n_imu,) the calibrated IMUs with weight > 0 (the solve's); ``calibrated`` (n_imu,); ``solver_columns``
(solver sensors,) the IMU of each observation slot; ``measured`` (m,) the measured articulated coordinates (locked at
their encoder values); ``art_q`` / ``art_v`` the articulated coordinates' plant indices; ``odometry_q`` (k,) the plant
positions the odometry sets (empty without one); ``body_index`` (n_imu,) each IMU's body; ``R_BS`` (n_imu, 3, 3) the
mountings (identity where uncalibrated); ``free_v`` (nv,) bool the velocities the solver frees."""


def new_buffers(plant, n_imu: int, n_solver: int) -> StreamBuffers:
    nq, nv, nb = plant.num_positions(), plant.num_velocities(), plant.num_bodies()
    return StreamBuffers(
        stamp=np.empty(1), R_GS=np.empty((1, n_imu, 3, 3)), w_S=np.empty((1, n_imu, 3)),
        observed=np.zeros((1, n_imu), bool), use_gyro=np.zeros((1, n_imu), bool), R_WO=np.empty((1, n_solver, 3, 3)),
        X_WB=np.empty((1, nb, 4, 4)), have_X_WB=np.ones(1, bool), V=np.empty((1, nv)),
        from_gyro=np.zeros((1, nv), bool),
        errors=np.empty((1, n_imu)), start=np.empty(nq), first_row=np.zeros(1, np.int64),
        positions=np.full((1, nq), np.nan), Q=np.empty((1, nq)),
        goal=np.empty(1), error_norm=np.empty(1), status=np.empty(1, np.int64), obs_pos=np.empty((1, 0, 3)),
        obs_weight=np.empty((0, n_solver)), previous=np.empty(nq), v_prior=np.empty((1, nv)))


@njit(cache=True, error_model="numpy")
def stream_cycle(tracker, message, b, problem, tree, held_q, floating_q, q_current, q_last, has_q_last, rotated,
                 R_WG, regularization):
    """The first cycle of ``message`` (``rules.Cycles``) into the buffers ``b``, as ``Estimator._solve_cycles`` runs
    a one-cycle run that tracks (no reset, no heading filter, no covariance weights, no odometry heading): returns
    :data:`STREAMED` or why not (then nothing the caller keeps has changed but the tracker's statistics, as when
    ``track_sequence`` raised).

    1. The samples (:func:`read_samples`, as the batch path reads its cycles').
    2. The start: ``q_current`` locked (:func:`locked_positions`, as the batch path locks its cycles), as
       ``set_positions`` takes it (finite; quaternions unit to
       rounding, kept bit for bit); R_WO of the observed slots from ``rotated`` (n_imu, 3, 3): the samples' R_GS, or
       R_WG R_GS computed by the caller with NumPy's matmul, the bits of ``Estimator._observations``.
    3. ``track_frames`` over the one frame (``tracker``, ``held_q``, ``floating_q``: ``Assembler.frame_tracking``'s),
       the poses into ``b.X_WB``.
    4. The velocity prior (:func:`velocity_priors`, as the batch path runs it on its cycles) from ``q_last``. Then
       ``kinematics_and_velocities`` and ``sensor_errors`` as the batch path calls them.
    ``regularization``: the gyros' least squares' (``velocity_regularization``)."""
    cycle = message.cycle[0]
    nq = b.start.shape[0]
    if not read_samples(message.sample, message.stale, problem.weighted, problem.calibrated, b.R_GS, b.w_S,
                        b.observed, b.use_gyro):
        return NOTHING_OBSERVED
    stamp = cycle.stamp
    b.stamp[0] = stamp
    start = b.start
    for k in range(nq):
        start[k] = q_current[k]
    locked_positions(start, message.encoder, message.odometry, b.first_row, problem.measured, problem.art_q,
                     problem.odometry_q, b.positions)
    for k in range(nq):
        if not math.isfinite(start[k]):
            return NOT_SET
    for qs in floating_q:
        norm = math.sqrt(start[qs] ** 2 + start[qs + 1] ** 2 + start[qs + 2] ** 2 + start[qs + 3] ** 2)
        if not abs(norm - 1.0) <= _SURELY_UNIT:
            return NOT_SET
    R_WO = b.R_WO
    for s in range(problem.solver_columns.shape[0]):
        i = problem.solver_columns[s]
        for r in range(3):
            for c in range(3):
                R_WO[0, s, r, c] = rotated[i, r, c] if b.observed[0, i] else np.nan
    if track_frames(tracker, start, R_WO, b.obs_pos, b.obs_weight, held_q, b.positions, b.Q, b.goal, b.error_norm,
                    b.status, b.X_WB) >= 0:
        return TRACK_FAILED
    for k in range(nq):
        b.previous[k] = q_last[k] if has_q_last else np.nan
    velocity_priors(tree, message.cycle, message.encoder, b.previous, b.Q, problem.measured, problem.art_v, b.v_prior)
    if not kinematics_and_velocities(tree, b.Q, b.have_X_WB, b.v_prior, b.use_gyro, b.w_S, problem.body_index,
                                     problem.R_BS, problem.free_v, regularization, b.X_WB, b.V, b.from_gyro):
        return SINGULAR_GYROS
    sensor_errors(b.X_WB, b.observed, problem.body_index, problem.R_BS, R_WG, b.R_GS, b.errors)
    return STREAMED


@njit(cache=True, nogil=True)
def read_samples(sample, stale, weighted, calibrated, R_GS, w_S, observed, use_gyro):
    """The first C = len(R_GS) cycles' samples (``sample`` (≥C, n_imu) ``rules.SAMPLE`` records, ``stale`` (≥C,
    n_imu)): their orientations R_GS (C, n_imu, 3, 3) and rates w_S (C, n_imu, 3) copied out, and which the cycles
    use: ``observed`` (C, n_imu) = not stale, an orientation (finite R_GS[0, 0]), an IMU the solve ``weighted``
    (calibrated, weight > 0); ``use_gyro`` = not stale, a rate (finite w_S[0]), a ``calibrated`` IMU. Returns
    whether any sample is observed. Written once for both paths: the batch path's cycles
    (``Estimator._solve_cycles``) and :func:`stream_cycle`'s one."""
    any_observed = False
    for c in range(R_GS.shape[0]):
        for i in range(R_GS.shape[1]):
            record = sample[c, i]
            for r in range(3):
                w_S[c, i, r] = record.w_S[r]
                for k in range(3):
                    R_GS[c, i, r, k] = record.R_GS[r, k]
            fresh = not stale[c, i]
            observed[c, i] = fresh and math.isfinite(record.R_GS[0, 0]) and weighted[i]
            use_gyro[c, i] = fresh and math.isfinite(record.w_S[0]) and calibrated[i]
            any_observed = any_observed or observed[c, i]
    return any_observed


@njit(cache=True, nogil=True)
def locked_positions(q, encoder, odometry, rows, measured, art_q, odometry_q, out):
    """The locked coordinates of the cycles ``rows`` (F,) in turn: ``q`` (nq,) with the ``measured`` articulated
    coordinates at the cycle's encoder values (``encoder[c, k].q`` at ``art_q[k]``) and the base coordinates the
    odometry sets (``odometry_q`` (k,)) at its matched values (``odometry[c].values``; NaN: none matched, q's, i.e.
    the last matched, hold), in place; ``out[f]`` (F, nq) receives row f's locked coordinates (its other entries
    are left as they are: NaN, to ``track_frames``, keeps the previous frame's). ``Estimator._locked`` (one cycle:
    an assembly's start, a held cycle) and ``Estimator._track_chunk`` (a chunk's frames) call it, and
    :func:`stream_cycle` for its one cycle: written once for both paths."""
    for f in range(rows.shape[0]):
        c = rows[f]
        for k in measured:
            q[art_q[k]] = encoder[c, k].q
            out[f, art_q[k]] = q[art_q[k]]
        values = odometry[c].values
        for k in range(odometry_q.shape[0]):
            if math.isfinite(values[k]):
                q[odometry_q[k]] = values[k]
            out[f, odometry_q[k]] = q[odometry_q[k]]


@njit(cache=True, nogil=True, error_model="numpy")
def velocity_priors(tree, cycle, encoder, q_before, Q, measured, art_v, v_prior):
    """The velocity priors ``v_prior`` (C, nv) of the C cycles solved as ``Q`` (C, nq), for the gyros' least squares
    (``kinematics_and_velocities``): the finite difference (Q[c] ⊖ Q[c-1]) / dt (:func:`difference_positions`),
    Q[-1] = ``q_before`` (nq,) the last q before these cycles (NaN: none), where ``cycle[c]``'s previous stamp
    (``rules.Cycles.cycle``) is finite and dt = stamp - stamp_prev > 0, else 0 (after a reset, a first cycle);
    then each ``measured`` articulated coordinate's encoder rate (``encoder[c, k].v``, (≥C, n_art)) where finite,
    at its velocity ``art_v[k]``. Written once for both paths: the batch path's C cycles
    (``Estimator._solve_cycles``) and :func:`stream_cycle`'s one."""
    for c in range(Q.shape[0]):
        for j in range(v_prior.shape[1]):
            v_prior[c, j] = 0.0
        stamp_prev = cycle[c].stamp_prev
        dt = cycle[c].stamp - stamp_prev
        if math.isfinite(stamp_prev) and dt > 0.0:
            if c:
                difference_positions(tree, Q[c - 1], Q[c], v_prior[c])
            else:
                difference_positions(tree, q_before, Q[c], v_prior[c])
            for j in range(v_prior.shape[1]):
                v_prior[c, j] /= dt
        for k in measured:
            rate = encoder[c, k].v
            if math.isfinite(rate):
                v_prior[c, art_v[k]] = rate
