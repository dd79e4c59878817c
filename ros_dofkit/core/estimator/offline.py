"""Offline estimation over a recording, whole or window by window: the streaming estimator's rules, batched.

You are in the ROS-free estimator core. :class:`~ros_dofkit.core.estimator.estimator.Estimator` is driven one
message at a time (``process_imu`` / ``process_joint_state``) by the live node; offline replay knows every input
in advance, so it can afford three passes instead of one Python call chain per message:

1. validation, vectorized: ``parse_imu``'s checks (finite, non-zero, unit quaternion; finite gyro; absent
   fields) over all IMU samples at once, ``parse_joint_state``'s per distinct name list;
2. the cycle rules, compiled (numba): the same state machine as the streaming path (stamp checks, jump-back
   resets, flushes of a sensor's unused sample, overdue cycles, waited / stale sensors), producing for each
   cycle its stamp, the samples it uses and the encoder values it locks;
3. the solve: ``Assembler.assemble`` on the first cycle after a (re)start, ``Assembler.track_sequence`` over
   the following cycles in chunks (a chunk with a failing frame is redone frame by frame, as the streaming path
   would: the failed frame keeps its previous coordinates), which also hands out each tracked cycle's body poses
   from the solver's own kinematics; then, in compiled loops, forward kinematics of the other cycles, gyro
   velocities (the same regularized least squares as ``velocity.solve_velocities_from_gyros``) and sensor
   errors.

A long recording is fed in consecutive windows (:meth:`OfflineEstimator.feed`): the rules' memory (buffered
samples, encoder values, the previous cycle, the solution, counters) carries from one window to the next, so the
cycles are bit for bit those of one pass over the whole recording, and memory is bounded by the window.

The results equal the streaming path's (test/test_replay_batch.py compares q, v, sensor errors, stamps, flags
and counters to 1e-9 on bags with dropouts, a stale IMU, rejected samples, partial encoder messages and a clock
jump back). Rules that are not batched: synchronized mode (``sync_tolerance_s`` > 0), ``sync_joint_states``
and IMUs waiting for calibration; :func:`supports_batch` says so and callers use the streaming path instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from ros_dofkit.core.assembly import kernels
from ros_dofkit.core.estimator.inputs import RejectReason
from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE, quat_to_matrix

_REASONS = tuple(RejectReason)
_R = {reason: i for i, reason in enumerate(_REASONS)}
_OK = -1
_ABSENT_KEPT = -2  # accepted; the orientation is absent (counted as orientation_absent), the gyro kept
_UNKNOWN_KEPT = -3  # accepted; some names unknown (counted as unknown_name)

#: Chunk of frames given to ``Assembler.track_sequence`` at once (a failing frame redoes one chunk per frame).
TRACK_CHUNK = 512


class OfflineInputError(ValueError):
    """Inputs given to :class:`OfflineEstimator` have inconsistent shapes or unknown IMU indices."""


def supports_batch(config) -> str:
    """"" when :class:`OfflineEstimator` reproduces the streaming path for ``config``, else why not."""
    if config.sync_tolerance_s:
        return "synchronized mode (sync_tolerance_s > 0) is run through the streaming path"
    if config.sync_joint_states:
        return "sync_joint_states is run through the streaming path"
    waiting = [imu.name for imu in config.imus if imu.needs_calibration]
    if waiting:
        return f"IMUs {waiting} wait for calibration; run through the streaming path"
    return ""


@dataclass(frozen=True)
class OfflineInputs:
    """Every input of a recording, in the order they are offered (stamp order).

    ``kind`` (M,) 0 = IMU sample, 1 = joint-state message; ``row`` (M,) its row in the IMU arrays or the index in
    the joint-state lists. IMU arrays (one row per sample): ``imu_sensor`` (index into ``config.imus``),
    ``imu_stamp`` (s), ``imu_quaternion_wxyz`` (NaN rows allowed), ``imu_angular_velocity``,
    ``imu_orientation_present``, ``imu_angular_velocity_present`` (the arguments of ``process_imu``).
    Joint states: ``js_stamp`` (s), ``js_names`` (tuples), ``js_positions``, ``js_velocities`` (arrays; empty or
    None = no velocities). ``stamp_ns`` (M,) optional integer stamps the outputs carry (default round(s * 1e9)).
    """

    kind: np.ndarray
    row: np.ndarray
    imu_sensor: np.ndarray
    imu_stamp: np.ndarray
    imu_quaternion_wxyz: np.ndarray
    imu_angular_velocity: np.ndarray
    imu_orientation_present: np.ndarray
    imu_angular_velocity_present: np.ndarray
    js_stamp: np.ndarray
    js_names: list
    js_positions: list
    js_velocities: list
    stamp_ns: np.ndarray | None = None

    def __post_init__(self):
        m = len(self.kind)
        if len(self.row) != m or (self.stamp_ns is not None and len(self.stamp_ns) != m):
            raise OfflineInputError(f"kind, row (and stamp_ns) must have one entry per input; got {m}, "
                                    f"{len(self.row)}, {None if self.stamp_ns is None else len(self.stamp_ns)}")
        n_imu = len(self.imu_stamp)
        for name in ("imu_sensor", "imu_orientation_present", "imu_angular_velocity_present"):
            if len(getattr(self, name)) != n_imu:
                raise OfflineInputError(f"{name}: expected {n_imu} entries, got {len(getattr(self, name))}")
        if np.shape(self.imu_quaternion_wxyz) != (n_imu, 4) or np.shape(self.imu_angular_velocity) != (n_imu, 3):
            raise OfflineInputError(f"expected imu_quaternion_wxyz ({n_imu}, 4) and imu_angular_velocity "
                                    f"({n_imu}, 3), got {np.shape(self.imu_quaternion_wxyz)} and "
                                    f"{np.shape(self.imu_angular_velocity)}")
        n_js = len(self.js_stamp)
        if not (len(self.js_names) == len(self.js_positions) == len(self.js_velocities) == n_js):
            raise OfflineInputError("js_stamp, js_names, js_positions and js_velocities must have equal lengths")

    def input_stamps(self) -> np.ndarray:
        """(M,) stamp in seconds of every input."""
        stamps = np.empty(len(self.kind))
        imu = self.kind == 0
        stamps[imu] = np.asarray(self.imu_stamp, dtype=float)[self.row[imu]]
        stamps[~imu] = np.asarray(self.js_stamp, dtype=float)[self.row[~imu]]
        return stamps


# ---------------------------------------------------------------------------------------------- validation
def _validate_imus(inputs: OfflineInputs):
    """parse_imu over every sample: (code (n,) int: _OK / _ABSENT_KEPT / a reason index, R_GS (n, 3, 3),
    w_S (n, 3), has_R (n,), has_w (n,))."""
    quaternion = np.asarray(inputs.imu_quaternion_wxyz, dtype=float)
    gyro = np.asarray(inputs.imu_angular_velocity, dtype=float)
    o_present = np.asarray(inputs.imu_orientation_present, dtype=bool)
    w_present = np.asarray(inputs.imu_angular_velocity_present, dtype=bool)
    n = len(quaternion)
    code = np.full(n, _OK, dtype=np.int64)
    finite_q = np.all(np.isfinite(quaternion), axis=1)
    # Component by component, in a fixed order: the same bits for a sample whatever the batch's size and memory
    # layout (einsum's summation order depends on both), so a recording fed in windows validates as in one piece.
    w, x, y, z = np.where(finite_q[:, None], quaternion, 0.0).T
    norm = np.sqrt(((w * w + x * x) + y * y) + z * z)
    bad_gyro = w_present & ~np.all(np.isfinite(gyro), axis=1)
    # Order of parse_imu: quaternion checks first, then the gyro, then "nothing present".
    code[w_present & bad_gyro] = _R[RejectReason.NON_FINITE]
    code[~o_present & ~w_present] = _R[RejectReason.ORIENTATION_ABSENT]
    code[~o_present & w_present & ~bad_gyro] = _ABSENT_KEPT
    checks = o_present.copy()
    code[checks & (np.abs(norm - 1.0) > QUAT_NORM_TOLERANCE)] = _R[RejectReason.NON_UNIT_QUATERNION]
    code[checks & (norm == 0.0)] = _R[RejectReason.ZERO_QUATERNION]
    code[checks & ~finite_q] = _R[RejectReason.NON_FINITE]
    has_R = o_present & (code == _OK)
    if has_R.all():
        # The usual recording: every row converts (row by row, the same values as the masked form below, without
        # its gather and scatter).
        R_GS = quat_to_matrix(quaternion / norm[:, None])
    else:
        R_GS = np.full((n, 3, 3), np.nan)
        if has_R.any():
            R_GS[has_R] = quat_to_matrix(quaternion[has_R] / norm[has_R, None])
    has_w = w_present & ((code == _OK) | (code == _ABSENT_KEPT))
    return code, R_GS, np.where(has_w[:, None], gyro, np.nan), has_R, has_w


def _names_entry(names, name_to_index: dict) -> tuple:
    """(status, known positions in the message, their articulated indices, some names unknown) of a name list."""
    names_list = list(names)
    if not names_list:
        return _R[RejectReason.EMPTY], None, None, False
    if len(set(names_list)) != len(names_list):
        return _R[RejectReason.DUPLICATE_NAME], None, None, False
    known = np.array([i for i, name in enumerate(names_list) if name in name_to_index], dtype=np.int64)
    indices = np.array([name_to_index[names_list[i]] for i in known], dtype=np.int64)
    return _OK, known, indices, len(known) != len(names_list)


_FLOAT64 = np.dtype(np.float64)


def _as_vector(values) -> np.ndarray:
    """``np.asarray(values, dtype=float).reshape(-1)``, returning a 1-D float64 array itself (decoded messages'
    arrays already are: this runs once per joint-state message)."""
    if type(values) is np.ndarray and values.ndim == 1 and values.dtype == _FLOAT64:
        return values
    return np.asarray(values, dtype=float).reshape(-1)


def _validate_joint_states(inputs: OfflineInputs, name_to_index: dict):
    """parse_joint_state over every message: (code (n,), CSR offsets (n + 1,), indices, positions, velocities
    (NaN = none)). Messages with the same names and array sizes are checked together (a recording's encoder
    messages usually all share one layout)."""
    n = len(inputs.js_stamp)
    code = np.full(n, _OK, dtype=np.int64)
    groups: dict = {}  # (names, position count, velocity count) -> message indices
    positions_of = [_as_vector(values) for values in inputs.js_positions]
    velocities_of = [None if values is None else _as_vector(values) for values in inputs.js_velocities]
    for k, (names, positions, velocities) in enumerate(zip(inputs.js_names, positions_of, velocities_of,
                                                            strict=True)):
        if velocities is not None and velocities.size == 0:
            velocities_of[k] = velocities = None
        key = (names, positions.size, -1 if velocities is None else velocities.size)
        members = groups.get(key)
        if members is None:
            groups[key] = [k]
        else:
            members.append(k)
    counts = np.zeros(n, dtype=np.int64)
    accepted = []  # (message indices, known, indices, positions (g, m), velocities (g, m) or None)
    for (names, position_count, velocity_count), members in groups.items():
        members = np.asarray(members, dtype=np.int64)
        status, known, indices, partial = _names_entry(names, name_to_index)
        count = len(names)
        if status == _R[RejectReason.EMPTY]:
            code[members] = status
            continue
        if position_count != count or (velocity_count >= 0 and velocity_count != count):
            code[members] = _R[RejectReason.MISMATCHED_ARRAYS]
            continue
        if status != _OK:
            code[members] = status
            continue
        # np.array of the equal-length rows: np.stack's per-array checks cost 3x as much here
        P = np.array([positions_of[k] for k in members.tolist()])
        finite = np.isfinite(P).all(axis=1)
        V = None
        if velocity_count >= 0:
            V = np.array([velocities_of[k] for k in members.tolist()])
            finite &= np.isfinite(V).all(axis=1)
        code[members[~finite]] = _R[RejectReason.NON_FINITE]
        if known.size == 0:
            code[members[finite]] = _R[RejectReason.UNKNOWN_NAME]
            continue
        code[members[finite]] = _UNKNOWN_KEPT if partial else _OK
        counts[members[finite]] = known.size
        accepted.append((members[finite], known, indices, P[finite], None if V is None else V[finite]))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return code, offsets, np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    index_out = np.empty(total, dtype=np.int64)
    position_out = np.empty(total)
    velocity_out = np.full(total, np.nan)
    for members, known, indices, P, V in accepted:
        slots = offsets[members][:, None] + np.arange(known.size)
        index_out[slots] = indices
        position_out[slots] = P[:, known]
        if V is not None:
            velocity_out[slots] = V[:, known]
    return code, offsets, index_out, position_out, velocity_out


# ---------------------------------------------------------------------------------------------- cycle rules
_SOURCE_CLOCK = -1
_SOURCE_JOINT_STATES = -2


@njit(cache=True)
def _count(counts, source, reason):
    counts[source, reason] += 1


@njit(cache=True)
def _schedule(kind, row, imu_sensor, imu_stamp, imu_code, imu_has_R, imu_has_w, js_stamp, js_code, js_offsets,
              js_index, js_position, js_velocity, input_ns, encoder_default, timeout, jump_reset, reasons, state):
    """The streaming cycle rules (free-running mode) over the inputs; see Estimator.process_imu /
    process_joint_state / ready / step. Returns per-cycle arrays and which inputs were rejected.

    ``reasons``: reason indices (non_finite, out_of_order, clock_jump_back, orientation_absent, unknown_name).
    ``state`` (:func:`_initial_schedule_state`, updated in place) is the rules' memory from one call to the next,
    so that inputs fed in consecutive windows give the cycles they give in one piece: per IMU its buffered sample
    (stamp, orientation row, rate row, fresh), per articulated coordinate its encoder value, rate, stamp and
    whether one was received, ``scalars`` = (previous cycle's stamp, newest stamp, first stamp), ``flags`` =
    (joint states fresh, overdue, reset pending, newest input's stamp in ns, resets, overwritten samples, flushed
    cycles, row offset) and the reject counters (rows: IMUs 0..n_imu-1, then joint_states (n_imu), then clock
    (n_imu + 1)). A sample's row is stored with the row offset added: the rows below it are the samples the caller
    carried over from the previous window."""
    NON_FINITE, OUT_OF_ORDER, JUMP, ABSENT, UNKNOWN = reasons[0], reasons[1], reasons[2], reasons[3], reasons[4]
    slot_stamp, slot_R, slot_w, slot_fresh = state[0], state[1], state[2], state[3]
    enc_q, enc_v, enc_stamp, have = state[4], state[5], state[6], state[7]
    scalars, flags, counts = state[8], state[9], state[10]
    n_imu = slot_stamp.shape[0]
    m = kind.shape[0]
    n_art = encoder_default.shape[0]
    max_cycles = 2 * m + 1
    c_stamp = np.empty(max_cycles)
    c_ns = np.empty(max_cycles, dtype=np.int64)
    c_input = np.empty(max_cycles, dtype=np.int64)
    c_reset = np.zeros(max_cycles, dtype=np.bool_)
    c_stamp_prev = np.empty(max_cycles)
    c_R = np.empty((max_cycles, n_imu), dtype=np.int64)
    c_w = np.empty((max_cycles, n_imu), dtype=np.int64)
    c_stale = np.empty((max_cycles, n_imu), dtype=np.bool_)
    c_enc_q = np.empty((max_cycles, n_art))
    c_enc_v = np.empty((max_cycles, n_art))
    c_have = np.empty((max_cycles, n_art), dtype=np.bool_)
    rejected = np.zeros(m, dtype=np.bool_)

    stamp_prev, newest, first = scalars[0], scalars[1], scalars[2]
    js_fresh, overdue, pending_reset = flags[0] != 0, flags[1] != 0, flags[2] != 0
    newest_ns, resets, overwritten, flushed, row_offset = flags[3], flags[4], flags[5], flags[6], flags[7]
    cycles = 0

    for e in range(m):
        r = row[e]
        i = 0
        if kind[e] == 0:
            i = imu_sensor[r]
            source = i
            code = imu_code[r]
            stamp = imu_stamp[r]
            if code >= 0:
                _count(counts, source, code)
                rejected[e] = True
                continue
            last = slot_stamp[i]
        else:
            source = n_imu
            code = js_code[r]
            stamp = js_stamp[r]
            if code >= 0:
                _count(counts, source, code)
                rejected[e] = True
                continue
            last = -np.inf
            for k in range(js_offsets[r], js_offsets[r + 1]):
                if enc_stamp[js_index[k]] > last:
                    last = enc_stamp[js_index[k]]
            if last == -np.inf:
                last = np.nan
        # offline jump back: reset tracking (Estimator._offline_jump)
        if not math.isnan(last) and math.isfinite(stamp) and stamp < last - jump_reset:
            _count(counts, n_imu + 1, JUMP)
            for j in range(n_imu):
                slot_stamp[j] = np.nan
                slot_R[j] = -1
                slot_w[j] = -1
                slot_fresh[j] = False
            enc_q[:] = encoder_default
            enc_v[:] = np.nan
            enc_stamp[:] = -np.inf
            have[:] = False
            js_fresh = False
            overdue = False
            stamp_prev = np.nan
            newest = np.nan
            newest_ns = -1
            first = np.nan
            pending_reset = True
            resets += 1
            last = np.nan
        if not math.isfinite(stamp):
            _count(counts, source, NON_FINITE)
            rejected[e] = True
            continue
        if not math.isnan(last) and stamp < last:
            _count(counts, source, OUT_OF_ORDER)
            rejected[e] = True
            continue
        if code == -2:
            _count(counts, source, ABSENT)
        elif code == -3:
            _count(counts, source, UNKNOWN)

        due_flush = False
        if kind[e] == 0:
            # _should_flush: the sensor's buffered sample is unused, older, and not expired
            if slot_fresh[i] and not math.isnan(slot_stamp[i]) and slot_stamp[i] < stamp and (
                    slot_stamp[i] >= newest - timeout):
                due_flush = True
        for attempt in range(2 + 257):
            run = False
            if attempt == 0:
                if due_flush:
                    flushed += 1
                    run = True
                else:
                    continue
            elif attempt == 1:
                # store the sample (after a flush, before the due cycles)
                if kind[e] == 0:
                    if slot_fresh[i]:
                        overwritten += 1
                        overdue = True
                    slot_stamp[i] = stamp
                    slot_R[i] = r + row_offset if imu_has_R[r] else -1
                    slot_w[i] = r + row_offset if imu_has_w[r] else -1
                    slot_fresh[i] = True
                else:
                    for k in range(js_offsets[r], js_offsets[r + 1]):
                        j = js_index[k]
                        enc_q[j] = js_position[k]
                        enc_v[j] = js_velocity[k]
                        enc_stamp[j] = stamp
                        have[j] = True
                    js_fresh = True
                if math.isnan(first):
                    first = stamp
                if math.isnan(newest) or stamp > newest:
                    newest = stamp
                    newest_ns = input_ns[e]
                continue
            else:
                # ready()
                if math.isnan(newest):
                    break
                fresh_any = js_fresh
                for j in range(n_imu):
                    if slot_fresh[j]:
                        fresh_any = True
                if not fresh_any:
                    break
                if not overdue:
                    reference = newest if math.isnan(stamp_prev) else stamp_prev
                    starting = (not math.isnan(first)) and newest < first + timeout
                    ready = True
                    for j in range(n_imu):
                        if math.isnan(slot_stamp[j]):
                            waited = starting
                        else:
                            waited = slot_stamp[j] >= reference - timeout
                        if waited and not (slot_fresh[j] and slot_stamp[j] >= newest - timeout):
                            ready = False
                            break
                    if not ready:
                        break
                run = True
            if run:
                c = cycles
                cycle_stamp = newest
                c_stamp[c] = cycle_stamp
                c_ns[c] = newest_ns
                c_input[c] = e
                c_reset[c] = pending_reset
                pending_reset = False
                c_stamp_prev[c] = stamp_prev
                for j in range(n_imu):
                    c_R[c, j] = slot_R[j]
                    c_w[c, j] = slot_w[j]
                    c_stale[c, j] = math.isnan(slot_stamp[j]) or slot_stamp[j] < cycle_stamp - timeout
                    slot_fresh[j] = False
                c_enc_q[c] = enc_q
                c_enc_v[c] = enc_v
                c_have[c] = have
                js_fresh = False
                overdue = False
                stamp_prev = cycle_stamp
                cycles += 1
    scalars[0], scalars[1], scalars[2] = stamp_prev, newest, first
    flags[0], flags[1], flags[2] = js_fresh, overdue, pending_reset
    flags[3], flags[4], flags[5], flags[6] = newest_ns, resets, overwritten, flushed
    n = cycles
    return (c_stamp[:n], c_ns[:n], c_input[:n], c_reset[:n], c_stamp_prev[:n], c_R[:n], c_w[:n], c_stale[:n],
            c_enc_q[:n], c_enc_v[:n], c_have[:n], rejected)


def _initial_schedule_state(n_imu: int, encoder_default: np.ndarray) -> tuple:
    """The memory of :func:`_schedule` before any input: empty IMU slots, encoders at their defaults, a reset
    pending; sample rows offset by ``n_imu`` (the carried-over samples' rows come first)."""
    n_art = len(encoder_default)
    return (np.full(n_imu, np.nan), np.full(n_imu, -1, dtype=np.int64), np.full(n_imu, -1, dtype=np.int64),
            np.zeros(n_imu, dtype=bool), np.array(encoder_default, dtype=float), np.full(n_art, np.nan),
            np.full(n_art, -np.inf), np.zeros(n_art, dtype=bool), np.full(3, np.nan),
            np.array([0, 0, 1, -1, 0, 0, 0, n_imu], dtype=np.int64),
            np.zeros((n_imu + 2, len(_REASONS)), dtype=np.int64))


# ---------------------------------------------------------------------------------------------- velocities
@njit(cache=True)
def _solve_in_place(M, B, n, m):
    """B[:n, :m] <- M[:n, :n]^-1 B[:n, :m] by Gaussian elimination with partial pivoting (LAPACK gesv's method,
    without its call and copies: these systems have a handful of unknowns). M is overwritten. Returns False when
    M is singular."""
    for col in range(n):
        pivot = col
        largest = abs(M[col, col])
        for r in range(col + 1, n):
            if abs(M[r, col]) > largest:
                largest = abs(M[r, col])
                pivot = r
        if largest == 0.0:
            return False
        if pivot != col:
            for j in range(n):
                M[col, j], M[pivot, j] = M[pivot, j], M[col, j]
            for j in range(m):
                B[col, j], B[pivot, j] = B[pivot, j], B[col, j]
        for r in range(col + 1, n):
            factor = M[r, col] / M[col, col]
            if factor != 0.0:
                for j in range(col + 1, n):
                    M[r, j] -= factor * M[col, j]
                for j in range(m):
                    B[r, j] -= factor * B[col, j]
    for col in range(n - 1, -1, -1):
        for j in range(m):
            value = B[col, j]
            for k in range(col + 1, n):
                value -= M[col, k] * B[k, j]
            B[col, j] = value / M[col, col]
    return True


@njit(cache=True)
def _kinematics_and_velocities(tree, Q, have_X_WB, v_prior, use_gyro, gyro_rows, w_S, bodies, R_BS, free_v,
                               regularization, X_WB_out, V_out, from_gyro_out):
    """Per cycle c: X_WB at Q[c] into X_WB_out[c] (unless have_X_WB[c]: the solver already put its poses at Q[c]
    there, the same bits forward kinematics gives); v from the gyros of the sensors with use_gyro[c, i] (their
    samples' rows in w_S), least squares around v_prior[c] (velocity.solve_velocities_from_gyros): with A the
    stacked angular Jacobians J_w(body) of the free velocities and b the measured rates R_WS w_S,
    (A^T A + regularization I) dv = A^T (b - A v_prior); a free velocity counts as from the gyros when its
    resolution (A^T A + reg I)^-1 A^T A diagonal entry exceeds 0.5. Returns False if a system was singular."""
    n_cycles, nb = Q.shape[0], X_WB_out.shape[1]
    nv = v_prior.shape[1]
    n_imu = bodies.shape[0]
    R_WF = np.empty((nb, 3, 3))
    p_WM = np.empty((nb, 3))
    J = np.empty((6, nv))
    origin = np.zeros(3)
    free = np.flatnonzero(free_v)
    n_free = free.shape[0]
    # The angular Jacobians read R_WF of the bodies between the IMU bodies and the world only.
    parent = tree[0]
    on_path = np.zeros(nb, dtype=np.bool_)
    for i in range(n_imu):
        k = bodies[i]
        while k > 0:
            on_path[k] = True
            k = parent[k]
    path_bodies = np.flatnonzero(on_path)
    # Workspaces for the largest system: every IMU observed.
    A = np.empty((3 * n_imu, n_free))
    residual = np.empty(3 * n_imu)
    lhs = np.empty((n_free, n_free))
    rhs = np.empty((n_free, n_free + 1))
    for c in range(n_cycles):
        if not have_X_WB[c]:
            kernels.forward_kinematics(tree, Q[c], X_WB_out[c], R_WF, p_WM)
        V_out[c] = v_prior[c]
        for j in range(nv):
            from_gyro_out[c, j] = False
        k = 0
        for i in range(n_imu):
            if use_gyro[c, i]:
                k += 1
        if k == 0 or n_free == 0:
            continue
        if have_X_WB[c]:
            kernels.joint_frame_rotations(tree, X_WB_out[c], path_bodies, R_WF)
        row = 0
        for i in range(n_imu):
            if not use_gyro[c, i]:
                continue
            body = bodies[i]
            w = w_S[gyro_rows[c, i]]
            kernels.point_jacobian(tree, R_WF, p_WM, body, origin, False, J)
            for a in range(3):
                # b = R_WB R_BS w_S, minus the prior's rate J_w v_prior (all velocities, locked ones included).
                rate = 0.0
                for m in range(3):
                    R_WS_am = 0.0
                    for n in range(3):
                        R_WS_am += X_WB_out[c, body, a, n] * R_BS[i, n, m]
                    rate += R_WS_am * w[m]
                predicted = 0.0
                for j in range(nv):
                    predicted += J[a, j] * v_prior[c, j]
                residual[row + a] = rate - predicted
                for j in range(n_free):
                    A[row + a, j] = J[a, free[j]]
            row += 3
        for i in range(n_free):
            for j in range(i, n_free):
                value = 0.0
                for r in range(row):
                    value += A[r, i] * A[r, j]
                lhs[i, j] = value
                lhs[j, i] = value
                rhs[i, 1 + j] = value
                rhs[j, 1 + i] = value
            value = 0.0
            for r in range(row):
                value += A[r, i] * residual[r]
            rhs[i, 0] = value
        for i in range(n_free):
            lhs[i, i] += regularization
        # One factorization for both right-hand sides: the step (column 0) and the resolution matrix.
        if not _solve_in_place(lhs, rhs, n_free, n_free + 1):
            return False
        for j in range(n_free):
            V_out[c, free[j]] += rhs[j, 0]
            from_gyro_out[c, free[j]] = rhs[j, 1 + j] > 0.5
    return True


@njit(cache=True)
def _relative_poses(X_WB, parents, bodies, X_PC):
    for c in range(X_WB.shape[0]):
        for m in range(bodies.shape[0]):
            P, C = parents[m], bodies[m]
            for i in range(3):
                for j in range(3):
                    value = 0.0
                    for k in range(3):
                        value += X_WB[c, P, k, i] * X_WB[c, C, k, j]
                    X_PC[c, m, i, j] = value
                value = 0.0
                for k in range(3):
                    value += X_WB[c, P, k, i] * (X_WB[c, C, k, 3] - X_WB[c, P, k, 3])
                X_PC[c, m, i, 3] = value
                X_PC[c, m, 3, i] = 0.0
            X_PC[c, m, 3, 3] = 1.0


def relative_poses(X_WB, parents, bodies) -> np.ndarray:
    """X_PC = inv(X_WP) X_WC of every body C in ``bodies`` relative to its ``parents`` entry P: R_PC = R_WP^T R_WC,
    p_PC_P = R_WP^T (p_WC - p_WP). ``X_WB`` (..., num_bodies, 4, 4) -> (..., len(bodies), 4, 4) (compiled: the
    outputs of a whole replay at once)."""
    X_WB = np.asarray(X_WB, dtype=float)
    lead = X_WB.shape[:-3]
    flat = np.ascontiguousarray(X_WB.reshape((-1,) + X_WB.shape[-3:]))
    bodies = np.asarray(bodies, dtype=np.int64)
    X_PC = np.empty((flat.shape[0], bodies.size, 4, 4))
    _relative_poses(flat, np.asarray(parents, dtype=np.int64), bodies, X_PC)
    return X_PC.reshape(lead + (bodies.size, 4, 4))


@njit(cache=True)
def _sensor_errors(X_WB, observed, bodies, R_BS, R_WG, R_GS, slot_R, errors_out):
    """errors_out[c, i] (deg) = ``estimator.rotation_angle_between(R_WS, R_WO)`` for each observed (cycle, IMU):
    R_WS = R_WB R_BS at the cycle's solution, R_WO = R_WG R_GS of the sample the cycle used; NaN where not observed.
    The angle of R = R_WSᵀ R_WO is atan2(½|vee(R - Rᵀ)|, ½(tr R - 1)). One compiled loop: as stacks of 3x3 NumPy
    products this cost a BLAS call per matrix."""
    R_WS = np.empty((3, 3))
    R_WO = np.empty((3, 3))
    R = np.empty((3, 3))
    for c in range(observed.shape[0]):
        for n in range(bodies.shape[0]):
            if not observed[c, n]:
                errors_out[c, n] = np.nan
                continue
            b = bodies[n]
            s = slot_R[c, n]
            for i in range(3):
                for j in range(3):
                    R_WS[i, j] = X_WB[c, b, i, 0] * R_BS[n, 0, j] + X_WB[c, b, i, 1] * R_BS[n, 1, j] + \
                        X_WB[c, b, i, 2] * R_BS[n, 2, j]
                    R_WO[i, j] = R_WG[i, 0] * R_GS[s, 0, j] + R_WG[i, 1] * R_GS[s, 1, j] + R_WG[i, 2] * R_GS[s, 2, j]
            for i in range(3):
                for j in range(3):
                    R[i, j] = R_WS[0, i] * R_WO[0, j] + R_WS[1, i] * R_WO[1, j] + R_WS[2, i] * R_WO[2, j]
            sine = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
            cosine = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
            errors_out[c, n] = math.degrees(math.atan2(sine, cosine))


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class OfflineRun:
    """Every cycle of an offline run as arrays (C cycles); :meth:`result` gives one as an EstimatorResult.

    ``stamp`` (C,) s; ``stamp_ns`` (C,) the integer stamp of the input whose stamp the cycle carries; ``input``
    (C,) index of the input whose offering ran the cycle; ``q`` (C, nq); ``v`` (C, nv); ``velocity_from_gyro``
    (C, nv); ``X_WB`` (C, nb, 4, 4); ``goal``, ``solved``, ``failure`` (C,); ``sensor_errors_deg`` (C, n_imu)
    in ``sensor_names`` order (NaN = not observed); ``observed`` / ``stale`` (C, n_imu) bool;
    ``missing`` (C, n_art) bool (measured, never received); ``tracking_reset``, ``initialized`` (C,) bool;
    ``solve_time_s`` (C,); ``rejected`` (M,) bool per input; ``counts_by_reason`` / ``counts_by_source`` as
    ``Estimator.reject_counts()`` / ``reject_counts_by_source()``; ``statistics`` as ``Estimator.statistics()``.
    ``first_cycle``: cycles before these (a window fed after others; cycle numbers continue from it); ``tree``:
    the plant's kinematic tree arrays, with which :meth:`result` computes the poses of a run kept without
    ``X_WB`` (None; see :meth:`concatenate`).
    """

    stamp: np.ndarray
    stamp_ns: np.ndarray
    input: np.ndarray
    q: np.ndarray
    v: np.ndarray
    velocity_from_gyro: np.ndarray
    X_WB: np.ndarray
    goal: np.ndarray
    solved: np.ndarray
    failure: list
    sensor_errors_deg: np.ndarray
    observed: np.ndarray
    stale: np.ndarray
    missing: np.ndarray
    tracking_reset: np.ndarray
    initialized: np.ndarray
    solve_time_s: np.ndarray
    rejected: np.ndarray
    counts_by_reason: dict
    counts_by_source: dict
    statistics: dict
    sensor_names: tuple
    position_names: tuple
    velocity_names: tuple
    articulated_names: tuple
    first_cycle: int = 0
    tree: tuple | None = None

    def __len__(self) -> int:
        return len(self.stamp)

    #: Per-cycle fields (first axis = cycle) that :meth:`concatenate` joins.
    CYCLE_FIELDS = ("stamp", "stamp_ns", "q", "v", "velocity_from_gyro", "goal", "solved", "sensor_errors_deg",
                    "observed", "stale", "missing", "tracking_reset", "initialized", "solve_time_s")

    @classmethod
    def concatenate(cls, runs, keep_poses: bool = True) -> OfflineRun:
        """One run of consecutive windows' runs (each fed right after the one before it): per-cycle arrays joined,
        ``input`` and ``rejected`` numbered over all their inputs, counters and statistics of the last window
        (they count from the reset). Without ``keep_poses`` the result has no ``X_WB`` (the largest per-cycle
        array: bodies x 4 x 4 values); :meth:`result` then computes a cycle's poses when asked."""
        runs = list(runs)
        if not runs:
            raise ValueError("concatenate: expected at least one run")
        for before, after in zip(runs, runs[1:], strict=False):
            if after.first_cycle != before.first_cycle + len(before):
                raise ValueError(f"concatenate: runs must be consecutive windows; a run of cycles from "
                                 f"{before.first_cycle + 1} to {before.first_cycle + len(before)} is followed by one "
                                 f"from {after.first_cycle + 1}")
        last = runs[-1]
        joined = {name: np.concatenate([getattr(run, name) for run in runs]) for name in cls.CYCLE_FIELDS}
        offsets = np.cumsum([0] + [len(run.rejected) for run in runs[:-1]])
        joined["input"] = np.concatenate([run.input + offset for run, offset in zip(runs, offsets, strict=True)])
        joined["rejected"] = np.concatenate([run.rejected for run in runs])
        joined["failure"] = [failure for run in runs for failure in run.failure]
        joined["X_WB"] = np.concatenate([run.X_WB for run in runs]) if keep_poses and all(
            run.X_WB is not None for run in runs) else None
        return cls(**joined, counts_by_reason=last.counts_by_reason, counts_by_source=last.counts_by_source,
                   statistics=last.statistics, sensor_names=last.sensor_names, position_names=last.position_names,
                   velocity_names=last.velocity_names, articulated_names=last.articulated_names,
                   first_cycle=runs[0].first_cycle, tree=last.tree)

    def poses(self, k: int) -> np.ndarray:
        """X_WB (nb, 4, 4) of cycle ``k``: kept, or forward kinematics at its q (the same kernel, the same bits)."""
        if self.X_WB is not None:
            return self.X_WB[k]
        if self.tree is None:
            raise ValueError("this run keeps neither its poses nor the kinematic tree to compute them")
        nb = self.tree[0].shape[0]
        X_WB = np.empty((nb, 4, 4))
        kernels.forward_kinematics(self.tree, np.ascontiguousarray(self.q[k]), X_WB, np.empty((nb, 3, 3)),
                                   np.empty((nb, 3)))
        return X_WB

    def result(self, k: int):
        """Cycle ``k`` of this run as the streaming path's :class:`EstimatorResult` (cycle numbers from 1 after the
        reset)."""
        from ros_dofkit.core.estimator.estimator import EstimatorResult, _frozen

        observed = self.observed[k]
        stale = self.stale[k]
        names = self.sensor_names
        return EstimatorResult(
            stamp=float(self.stamp[k]), q=_frozen(self.q[k]), v=_frozen(self.v[k]),
            position_names=self.position_names, velocity_names=self.velocity_names,
            velocity_from_gyro=_frozen(self.velocity_from_gyro[k]), X_WB=_frozen(self.poses(k)),
            goal=float(self.goal[k]), solved=bool(self.solved[k]), failure=self.failure[k],
            sensor_errors_deg={name: float(self.sensor_errors_deg[k, i]) for i, name in enumerate(names)},
            observed_sensors=tuple(n for n, o in zip(names, observed, strict=True) if o),
            stale_sensors=tuple(n for n, s in zip(names, stale, strict=True) if s),
            uncalibrated_sensors=(),
            missing_encoders=tuple(n for n, m in zip(self.articulated_names, self.missing[k], strict=True) if m),
            solve_time_s=float(self.solve_time_s[k]), tracking_reset=bool(self.tracking_reset[k]),
            cycle=self.first_cycle + k + 1, initialized=bool(self.initialized[k]),
        )

    def results(self, mask=None) -> ResultSequence:
        """The cycles (those where ``mask`` is True) as a lazy sequence of EstimatorResult."""
        indices = np.arange(len(self)) if mask is None else np.flatnonzero(mask)
        return ResultSequence(self, indices)


class ResultSequence(Sequence):
    """A read-only list of EstimatorResult built on demand from an :class:`OfflineRun` (and its ``run`` / row
    ``indices``, for columnar consumers)."""

    def __init__(self, run: OfflineRun, indices: np.ndarray):
        self.run = run
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return ResultSequence(self.run, self.indices[item])
        return self.run.result(int(self.indices[item]))


# ---------------------------------------------------------------------------------------------- the estimator
class OfflineEstimator:
    """Runs a whole recording through the streaming estimator's rules in batches (see the module docstring).

    Built on a streaming :class:`~ros_dofkit.core.estimator.estimator.Estimator` (which validates the
    configuration and defines the masks, bodies and mountings); ``run(inputs)`` starts from that estimator's
    initial state every time. A long recording can be fed in consecutive windows instead (:meth:`reset`, then
    :meth:`feed` per window): the estimator carries its state (buffered samples, encoder values, the solution,
    counters) from one window to the next, so the cycles are those of one ``run`` over the whole recording.
    Raises :class:`OfflineInputError` when ``supports_batch(config)`` says no.
    """

    def __init__(self, plant, config):
        from ros_dofkit.core.assembly import Assembler, OrientationSensors
        from ros_dofkit.core.estimator.estimator import Estimator

        reason = supports_batch(config)
        if reason:
            raise OfflineInputError(f"the offline batch path cannot run this configuration: {reason}")
        self.estimator = estimator = Estimator(plant, config)
        self._plant = plant
        self._config = config
        view = estimator.articulated_view
        self._art_q = np.asarray(view.q_indices, dtype=np.int64)
        self._art_v = np.asarray(view.v_indices, dtype=np.int64)
        self._art_names = tuple(estimator.joint_state_names)
        self._name_to_art = {name: i for i, name in enumerate(self._art_names)}
        self._estimated_art = np.asarray(list(estimator.estimated_mask), dtype=bool)
        nq, nv = plant.num_positions(), plant.num_velocities()
        free_q = np.zeros(nq, dtype=bool)
        free_q[self._art_q[self._estimated_art]] = True
        free_v = np.zeros(nv, dtype=bool)
        free_v[self._art_v[self._estimated_art]] = True
        self._floating = tuple(estimator.floating_joints)
        for joint in self._floating:
            free_q[joint.position_start:joint.position_start + 4] = True
            free_v[joint.velocity_start:joint.velocity_start + 3] = True
        self._free_q, self._free_v = free_q, free_v
        self._q_default = np.asarray(plant.default_positions(), dtype=float).copy()
        self._imus = config.imus
        self._bodies = np.array([estimator.imu_body(imu.name).index for imu in config.imus], dtype=np.int64)
        self._R_BS = np.stack([estimator.mounting(imu.name) for imu in config.imus]) if config.imus else (
            np.zeros((0, 3, 3)))
        self._weights = np.array([imu.weight for imu in config.imus], dtype=float)
        self._R_WG = estimator.R_WG
        tree = plant.tree
        self._tree = (tree.parent, tree.joint_type, tree.X_PF, tree.X_MC, tree.axis, tree.q_start, tree.v_start,
                      tree.mimic_q, tree.mimic_v, tree.mimic_multiplier, tree.mimic_offset)
        # The solver, built as Estimator._build_solver builds it (every IMU has a mounting here).
        self._osensors = OrientationSensors()
        for imu, body in zip(config.imus, self._bodies, strict=True):
            self._osensors.add_osensor(imu.name, plant.get_body(int(body)), estimator.mounting(imu.name),
                                       weight=imu.weight)
        self._osensors.define_observation_order([imu.name for imu in config.imus])
        self._assembler = Assembler(plant)
        self._assembler.adopt_assembly_goal(self._osensors)
        self._assembler.set_accuracy(config.accuracy)
        if config.use_joint_limits:
            self._assembler.use_joint_limits()
        locked = np.flatnonzero(~free_q)
        if locked.size:
            self._assembler.lock_positions(locked)
        self.reset()

    @property
    def plant(self):
        return self._plant

    @property
    def config(self):
        return self._config

    def reset(self) -> None:
        """Forget every input fed so far: the next :meth:`feed` starts from the initial state (as :meth:`run`)."""
        n_imu = len(self._imus)
        self._state = _initial_schedule_state(n_imu, self._q_default[self._art_q])
        # The sample each IMU slot holds at the end of a window (rows 0..n_imu-1 of the next window's samples).
        self._carried_R_GS = np.full((n_imu, 3, 3), np.nan)
        self._carried_w_S = np.full((n_imu, 3), np.nan)
        self._q_current = self._q_default.copy()
        self._needs_assemble = True
        self._is_initialized = not self._free_q.any()
        self._q_last = None  # q of the last cycle so far
        self._cycles = 0
        self._solve_failures = 0

    def run(self, inputs: OfflineInputs, progress=None) -> OfflineRun:
        """All cycles of ``inputs`` from the initial state (:meth:`reset`, then :meth:`feed`); ``progress(fraction)``
        is called between the solver's chunks."""
        self.reset()
        return self.feed(inputs, progress)

    def feed(self, inputs: OfflineInputs, progress=None) -> OfflineRun:
        """The cycles ``inputs`` complete, continuing from the state the inputs fed before left (a window of a
        recording, in offering order after the previous window). The run's ``rejected`` and ``input`` refer to
        these inputs; its cycle numbers, counters and statistics count from the last :meth:`reset`."""
        config = self._config
        n_imu = len(self._imus)
        imu_sensor = np.asarray(inputs.imu_sensor, dtype=np.int64)
        if imu_sensor.size and (imu_sensor.min() < 0 or imu_sensor.max() >= n_imu):
            raise OfflineInputError(f"imu_sensor must index the {n_imu} configured IMUs, got values in "
                                    f"[{imu_sensor.min()}, {imu_sensor.max()}]")
        imu_code, R_GS, w_S, has_R, has_w = _validate_imus(inputs)
        # Sample rows as the schedule numbers them: the samples carried over from the last window, then these.
        R_GS = np.concatenate([self._carried_R_GS, R_GS])
        w_S = np.concatenate([self._carried_w_S, w_S])
        js_code, js_offsets, js_index, js_position, js_velocity = _validate_joint_states(inputs, self._name_to_art)
        reasons = np.array([_R[RejectReason.NON_FINITE], _R[RejectReason.OUT_OF_ORDER],
                            _R[RejectReason.CLOCK_JUMP_BACK], _R[RejectReason.ORIENTATION_ABSENT],
                            _R[RejectReason.UNKNOWN_NAME]], dtype=np.int64)
        if inputs.stamp_ns is None:
            input_ns = np.round(inputs.input_stamps() * 1e9).astype(np.int64)
        else:
            input_ns = np.asarray(inputs.stamp_ns, dtype=np.int64)
        (stamp, cycle_ns, cycle_input, reset, stamp_prev, slot_R, slot_w, stale, enc_q, enc_v, have,
         rejected) = _schedule(
            np.asarray(inputs.kind, dtype=np.int64), np.asarray(inputs.row, dtype=np.int64), imu_sensor,
            np.asarray(inputs.imu_stamp, dtype=float), imu_code, has_R, has_w,
            np.asarray(inputs.js_stamp, dtype=float), js_code, js_offsets, js_index, js_position, js_velocity,
            input_ns, self._q_default[self._art_q].copy(), float(config.stale_timeout_s),
            float(config.stamp_jump_reset_s), reasons, self._state)
        self._carry_samples(R_GS, w_S)
        C = len(stamp)
        measured = ~self._estimated_art
        # Observed: fresh enough, with an orientation, weight > 0 (Estimator.step).
        observed = ~stale & (slot_R >= 0) & (self._weights > 0.0)[None, :]
        use_gyro = ~stale & (slot_w >= 0)

        Q, goal, solved, failure, initialized, solve_time, X_WB, have_X_WB = self._solve(stamp, reset, observed,
                                                                                         slot_R, R_GS, enc_q,
                                                                                         progress)
        v_prior = self._velocity_priors(Q, stamp, stamp_prev, reset, enc_v)
        V = np.empty_like(v_prior)
        from_gyro = np.zeros(v_prior.shape, dtype=bool)
        if C and not _kinematics_and_velocities(self._tree, np.ascontiguousarray(Q), have_X_WB, v_prior, use_gyro,
                                                np.maximum(slot_w, 0), np.ascontiguousarray(w_S), self._bodies,
                                                np.ascontiguousarray(self._R_BS), self._free_v,
                                                float(config.velocity_regularization), X_WB, V, from_gyro):
            raise np.linalg.LinAlgError("gyro velocities: singular normal equations (velocity_regularization is 0 "
                                        "and the gyros do not observe every free velocity)")
        errors = np.empty((C, n_imu))
        _sensor_errors(X_WB, observed, self._bodies, np.ascontiguousarray(self._R_BS),
                       np.ascontiguousarray(self._R_WG, dtype=float), R_GS, slot_R, errors)
        if C:
            self._q_last = Q[-1].copy()
        first_cycle = self._cycles
        self._cycles += C
        self._solve_failures += sum(1 for f in failure if f.startswith("assembler"))

        counts, flags = self._state[10], self._state[9]
        names = [imu.name for imu in self._imus]
        by_source = {}
        sources = names + ["joint_states", "clock"]
        for s, r in zip(*np.nonzero(counts), strict=True):
            by_source[(sources[s], _REASONS[r].value)] = int(counts[s, r])
        totals = counts.sum(axis=0)
        by_reason = {reason.value: int(totals[i]) for i, reason in enumerate(_REASONS)}
        return OfflineRun(
            stamp=stamp, stamp_ns=cycle_ns, input=cycle_input, q=Q, v=V, velocity_from_gyro=from_gyro, X_WB=X_WB,
            goal=goal, solved=solved, failure=failure, sensor_errors_deg=errors, observed=observed, stale=stale,
            missing=measured[None, :] & ~have, tracking_reset=reset, initialized=initialized,
            solve_time_s=solve_time, rejected=rejected, counts_by_reason=by_reason, counts_by_source=by_source,
            statistics={"cycles": self._cycles, "resets": int(flags[4]), "overwritten_samples": int(flags[5]),
                        "flushed_cycles": int(flags[6]), "solve_failures": self._solve_failures},
            sensor_names=tuple(names), position_names=tuple(self._plant.position_names()),
            velocity_names=tuple(self._plant.velocity_names()),
            articulated_names=self._art_names, first_cycle=first_cycle, tree=self._tree)

    def _carry_samples(self, R_GS, w_S) -> None:
        """Keep the samples the IMU slots hold after a window (their rows index this window's R_GS / w_S) as the
        next window's first rows."""
        slot_R, slot_w = self._state[1], self._state[2]
        for i in range(len(self._imus)):
            if slot_R[i] >= 0:
                self._carried_R_GS[i] = R_GS[slot_R[i]]
                slot_R[i] = i
            if slot_w[i] >= 0:
                self._carried_w_S[i] = w_S[slot_w[i]]
                slot_w[i] = i

    # ------------------------------------------------------------------ the solve
    def _solve(self, stamp, reset, observed, slot_R, R_GS, enc_q, progress):
        """q per cycle as the streaming path computes it (assemble after a reset, then warm-started tracking).

        Also returns the body poses X_WB (C, nb, 4, 4) and which cycles have them: tracked cycles get the poses
        track_sequence hands out (forward kinematics at their q, from the solver's own kinematics); the others
        are left for :func:`_kinematics_and_velocities`."""
        C = len(stamp)
        nq = len(self._q_default)
        n_imu = len(self._imus)
        measured = ~self._estimated_art
        measured_q = self._art_q[measured]
        locked_values = np.full((C, nq), np.nan)
        locked_values[:, measured_q] = enc_q[:, measured]
        R_WO = np.full((C, n_imu, 3, 3), np.nan)
        identity = np.array_equal(self._R_WG, np.eye(3))
        for i in range(n_imu):
            rows = np.flatnonzero(observed[:, i])
            R_WO[rows, i] = R_GS[slot_R[rows, i]] if identity else self._R_WG @ R_GS[slot_R[rows, i]]
        any_observed = observed.any(axis=1)
        Q = np.empty((C, nq))
        X_WB = np.empty((C, self._plant.num_bodies(), 4, 4))
        have_X_WB = np.zeros(C, dtype=bool)
        goal = np.zeros(C)
        solved = np.zeros(C, dtype=bool)
        initialized = np.zeros(C, dtype=bool)
        solve_time = np.zeros(C)
        failure = [""] * C
        nothing = "no IMU observed this cycle; estimated coordinates hold their previous values"
        assembler, osensors = self._assembler, self._osensors
        q_current, needs_assemble, is_initialized = self._q_current, self._needs_assemble, self._is_initialized
        c = 0
        while c < C:
            if reset[c]:
                q_current = self._q_default.copy()
                needs_assemble = True
                is_initialized = not self._free_q.any()
            q = q_current.copy()
            q[measured_q] = enc_q[c, measured]
            if not any_observed[c]:
                failure[c] = nothing
                Q[c] = q
                q_current = q
                initialized[c] = is_initialized
                c += 1
                continue
            if needs_assemble:
                started = time.perf_counter()
                assembler.set_positions(q)
                osensors.move_all_observations(R_WO[c])
                try:
                    goal[c] = float(assembler.assemble())
                    q = assembler.get_positions()
                    solved[c] = True
                    needs_assemble = False
                    is_initialized = True
                except (RuntimeError, ValueError) as error:
                    failure[c] = f"assembler failed: {error}"
                solve_time[c] = time.perf_counter() - started
                Q[c] = q
                q_current = q
                initialized[c] = is_initialized
                c += 1
                continue
            # Tracking: the observed cycles up to the next reset (or chunk end) in one compiled call.
            end = c + 1
            while end < C and not reset[end] and end - c < TRACK_CHUNK:
                end += 1
            frames = c + np.flatnonzero(any_observed[c:end])
            contiguous = len(frames) == end - c
            # Poses straight into the output when the frames are the chunk's cycles (the common case).
            poses = X_WB[c:end] if contiguous else np.empty((len(frames),) + X_WB.shape[1:])
            started = time.perf_counter()
            assembler.set_positions(q)
            try:
                Q_frames, info = assembler.track_sequence(stamp[frames], R_WO[frames], positions=locked_values[frames],
                                                          return_info=True, body_poses=poses)
                frame_goal = info["goal"]
                ok = np.ones(len(frames), dtype=bool)
                messages = [""] * len(frames)
                tracked = True
            except RuntimeError:
                Q_frames, frame_goal, ok, messages = self._track_one_by_one(q_current, frames, stamp, R_WO, enc_q,
                                                                           measured_q, measured)
                tracked = False
            elapsed = time.perf_counter() - started
            if tracked and not contiguous:
                X_WB[frames] = poses
            if contiguous and ok.all():
                # The common case: every cycle observed and solved.
                have_X_WB[c:end] = tracked
                Q[c:end] = Q_frames
                goal[c:end] = frame_goal
                solved[c:end] = True
                initialized[c:end] = True
                solve_time[c:end] = elapsed / len(frames)
                is_initialized = True
                q_current = Q_frames[-1].copy()
                c = end
                if progress is not None:
                    progress(c / C)
                continue
            # Fill every cycle of [c, end): solved frames take their solution, the others carry q forward.
            position = 0
            for k in range(c, end):
                q = q_current.copy()
                q[measured_q] = enc_q[k, measured]
                if position < len(frames) and frames[position] == k:
                    if ok[position]:
                        q = Q_frames[position].copy()
                        goal[k] = frame_goal[position]
                        solved[k] = True
                        have_X_WB[k] = tracked
                        is_initialized = True
                    else:
                        failure[k] = messages[position]
                    solve_time[k] = elapsed / len(frames)
                    position += 1
                else:
                    failure[k] = nothing
                Q[k] = q
                q_current = q
                initialized[k] = is_initialized
            c = end
            if progress is not None:
                progress(c / C)
        self._q_current, self._needs_assemble, self._is_initialized = q_current, needs_assemble, is_initialized
        return Q, goal, solved, failure, initialized, solve_time, X_WB, have_X_WB

    def _track_one_by_one(self, q_current, frames, stamp, R_WO, enc_q, measured_q, measured):
        """The streaming path's per-cycle tracking over ``frames`` (after a failure inside track_sequence)."""
        assembler, osensors = self._assembler, self._osensors
        Q = np.empty((len(frames), len(q_current)))
        goal = np.zeros(len(frames))
        ok = np.zeros(len(frames), dtype=bool)
        messages = [""] * len(frames)
        q_current = q_current.copy()
        for position, k in enumerate(frames):
            q = q_current.copy()
            q[measured_q] = enc_q[k, measured]
            assembler.set_positions(q)
            osensors.move_all_observations(R_WO[k])
            try:
                goal[position] = float(assembler.track(stamp[k]))
                q = assembler.get_positions()
                ok[position] = True
            except (RuntimeError, ValueError) as error:
                messages[position] = f"assembler failed: {error}"
            Q[position] = q
            q_current = q
        return Q, goal, ok, messages

    def _velocity_priors(self, Q, stamp, stamp_prev, reset, enc_v):
        """Finite differences of q over the previous cycle (none after a reset; the previous window's last cycle
        for a window's first), encoder velocities on the measured coordinates (Estimator._velocities)."""
        C = len(stamp)
        nv = self._plant.num_velocities()
        v_prior = np.zeros((C, nv))
        if C:
            previous = np.empty_like(Q)
            previous[1:] = Q[:-1]
            previous[0] = np.nan if self._q_last is None else self._q_last
            # A finite previous stamp means a cycle ran before this one since the last reset (this window or the last).
            dt = stamp - stamp_prev
            use = np.isfinite(stamp_prev) & (dt > 0.0)
            rows = np.flatnonzero(use)
            if rows.size:
                if self._floating:
                    difference = np.asarray(self._plant.position_difference(previous[rows], Q[rows]), dtype=float)
                else:
                    difference = Q[rows] - previous[rows]
                v_prior[rows] = difference / dt[use][:, None]
        measured = ~self._estimated_art
        columns = self._art_v[measured]
        values = enc_v[:, measured]
        v_prior[:, columns] = np.where(np.isfinite(values), values, v_prior[:, columns])
        return np.ascontiguousarray(v_prior)
