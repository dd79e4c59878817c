"""The estimator's batch side: a window of inputs in, every cycle's outputs as arrays out.

You are in the ROS-free estimator core; this module imports NumPy, numba, the cycle rules (``rules``) and the
compiled kinematics. Offline replay knows its inputs in advance: :class:`OfflineInputs` holds a window of them,
:func:`validate_window` checks them all at once (``rules.validate_imus``, and ``parse_joint_state``'s checks per
distinct name list) into the ``rules.WindowInputs`` the compiled cycle rules take, and :class:`OfflineRun` holds
the cycles' outputs. The per-cycle outputs after the solve (forward kinematics, gyro velocities, sensor errors) are
compiled loops over cycles, used by the streaming path too (a run of one cycle), so both give the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import NamedTuple

import numpy as np
from numba import njit

from ros_dofkit.core.assembly.kernels import cholesky_factor, cholesky_inverse_diagonal, cholesky_substitute
from ros_dofkit.core.estimator import odometry_input, rules
from ros_dofkit.core.estimator.heading import fill_accelerations
from ros_dofkit.core.estimator.inputs import joint_state_layout, joint_state_verdict
from ros_dofkit.core.multibody import compiled as kinematics

_R = {reason: i for i, reason in enumerate(rules.REASONS)}
_OK = rules.ACCEPTED
_UNKNOWN_KEPT = rules.ACCEPTED_UNKNOWN_NAMES


class OfflineInputError(ValueError):
    """Inputs given to ``Estimator.feed`` have inconsistent shapes or unknown IMU indices."""


class JointStateLayoutRows(NamedTuple):
    """Joint-state messages of one layout (names and array sizes) as matrices, one row per message, as a reader
    that decodes them by layout holds them (``ros.cdr.JointStateBlock``): ``members`` (g,) their indices in the
    window's joint-state lists, ``names`` their names, ``positions`` (g, n), ``velocities`` (g, m) (m = 0 or None:
    no velocities)."""

    members: np.ndarray
    names: tuple
    positions: np.ndarray
    velocities: np.ndarray | None


@dataclass(frozen=True)
class OfflineInputs:
    """Every input of a recording, in the order they are offered (stamp order).

    ``kind`` (M,) 0 = IMU sample, 1 = joint-state message, 2 = odometry message; ``row`` (M,) its row in the IMU
    arrays, the index in the joint-state lists or its row in the odometry arrays. IMU arrays (one row per sample):
    ``imu_sensor`` (index into ``config.imus``), ``imu_stamp`` (s), ``imu_quaternion_wxyz`` (NaN rows allowed),
    ``imu_angular_velocity``, ``imu_orientation_present``, ``imu_angular_velocity_present`` (the arguments of
    ``process_imu``).
    Joint states: ``js_stamp`` (s), ``js_names`` (tuples), ``js_positions``, ``js_velocities`` (arrays; empty or
    None = no velocities); ``js_layouts``, optional: the same messages grouped by layout
    (:class:`JointStateLayoutRows`, every message in one), which :func:`validate_window` then reads instead of
    grouping the lists message by message. ``stamp_ns`` (M,) optional integer stamps the outputs carry (default
    round(s * 1e9)).
    ``now`` (M,) optional receive clock of each input (s; NaN or None: none, as offline). Odometry (optional):
    ``odom_stamp`` (s), ``odom_position`` (n, 3), ``odom_quaternion_wxyz`` (n, 4) of the base link and
    ``odom_frames_match`` (n,) bool (the arguments of ``process_odometry``).
    ``imu_linear_acceleration`` (n_imu, 3) and ``imu_linear_acceleration_present`` (n_imu,), optional: the
    accelerometer of each IMU sample, which raw IMUs' orientation filters need (``orientation_filter``).
    ``field_sensor`` (n_f,), ``field_stamp`` (n_f,) s, ``field_vector`` (n_f, 3) tesla in S, ``field_position``
    (n_f,), optional: magnetometer samples of raw IMUs, each offered before input ``field_position`` (the number of
    inputs offered before it; M = after the last), in order (``orientation_filter`` matching rule);
    ``field_frames_match`` (n_f,) bool, optional (None: all): False drops the field as ``field_frame_mismatch`` (the
    ``frames_match`` of ``process_magnetic_field``).
    ``imu_orientation_covariance`` (n_imu, 9), optional: each IMU message's orientation_covariance, which
    ``imu_covariance_weighting`` reads (``Estimator.process_imu``'s ``orientation_covariance``).
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
    now: np.ndarray | None = None
    imu_linear_acceleration: np.ndarray | None = None  # (n_imu, 3) m/s^2, for raw IMUs (orientation_filter)
    imu_linear_acceleration_present: np.ndarray | None = None  # (n_imu,) bool; None: all present
    odom_stamp: np.ndarray = field(default_factory=lambda: np.zeros(0))
    odom_position: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    odom_quaternion_wxyz: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    odom_frames_match: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    field_sensor: np.ndarray | None = None  # (n_f,) magnetometer samples (orientation_filter), tesla in S
    field_stamp: np.ndarray | None = None
    field_vector: np.ndarray | None = None
    field_position: np.ndarray | None = None
    field_frames_match: np.ndarray | None = None  # (n_f,) bool; None: every field in its IMU's frame
    imu_orientation_covariance: np.ndarray | None = None  # (n_imu, 9) row-major per sample (REP-145); None: unknown
    js_layouts: list | None = None  # [JointStateLayoutRows]: the joint states by layout, when the reader has them

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
        if self.imu_orientation_covariance is not None and np.shape(self.imu_orientation_covariance) != (n_imu, 9):
            raise OfflineInputError(f"imu_orientation_covariance: expected ({n_imu}, 9), got "
                                    f"{np.shape(self.imu_orientation_covariance)}")
        n_js = len(self.js_stamp)
        if not (len(self.js_names) == len(self.js_positions) == len(self.js_velocities) == n_js):
            raise OfflineInputError("js_stamp, js_names, js_positions and js_velocities must have equal lengths")
        if self.js_layouts is not None:
            _check_layouts(self.js_layouts, n_js)
        n_odom = len(self.odom_stamp)
        if np.shape(self.odom_position) != (n_odom, 3) or np.shape(self.odom_quaternion_wxyz) != (n_odom, 4) or \
                len(self.odom_frames_match) != n_odom:
            raise OfflineInputError(f"expected odom_position ({n_odom}, 3), odom_quaternion_wxyz ({n_odom}, 4) and "
                                    f"{n_odom} odom_frames_match, got {np.shape(self.odom_position)}, "
                                    f"{np.shape(self.odom_quaternion_wxyz)} and {len(self.odom_frames_match)}")
        fields = (self.field_sensor, self.field_stamp, self.field_vector, self.field_position)
        if any(f is not None for f in fields):
            n_f = len(self.field_sensor) if self.field_sensor is not None else -1
            if any(f is None for f in fields) or len(self.field_stamp) != n_f or len(self.field_position) != n_f or (
                    np.shape(self.field_vector) != (n_f, 3)) or np.any(np.diff(self.field_position) < 0):
                raise OfflineInputError(
                    "field_sensor, field_stamp, field_vector (n, 3) and field_position (non-decreasing) must be given "
                    f"together with one entry per field; got {[None if f is None else np.shape(f) for f in fields]}")
        if self.field_frames_match is not None and (self.field_sensor is None or
                                                    len(self.field_frames_match) != len(self.field_sensor)):
            raise OfflineInputError(f"field_frames_match: expected one entry per field "
                                    f"({None if self.field_sensor is None else len(self.field_sensor)}), got "
                                    f"{len(self.field_frames_match)}")

    def input_stamps(self) -> np.ndarray:
        """(M,) stamp in seconds of every input."""
        stamps = np.empty(len(self.kind))
        for kind, source in ((0, self.imu_stamp), (1, self.js_stamp), (2, self.odom_stamp)):
            rows = self.kind == kind
            stamps[rows] = np.asarray(source, dtype=float)[self.row[rows]]
        return stamps


def validate_window(inputs: OfflineInputs, name_to_index: dict, n_imu: int, odometry=None,
                    covariance_weighting: bool = False) -> rules.WindowInputs:
    """The window's inputs validated, as the compiled rules take them (see ``rules.WindowInputs``); ``odometry``
    the ``odometry_input.OdometryTarget`` of the driven base (None: odometry rows are refused); with
    ``covariance_weighting`` the IMUs' orientation covariances are read (``imu_covariance_weighting``)."""
    imu_sensor = np.asarray(inputs.imu_sensor, dtype=np.int64)
    if imu_sensor.size and (imu_sensor.min() < 0 or imu_sensor.max() >= n_imu):
        raise OfflineInputError(f"imu_sensor must index the {n_imu} configured IMUs, got values in "
                                f"[{imu_sensor.min()}, {imu_sensor.max()}]")
    n = len(imu_sensor)
    imu_code = np.empty(n, dtype=np.int64)
    samples = np.empty(n, dtype=rules.SAMPLE)
    read = covariance_weighting and inputs.imu_orientation_covariance is not None
    covariance = np.ascontiguousarray(inputs.imu_orientation_covariance, dtype=float) if read else np.zeros((n, 0))
    rules.validate_imus(np.ascontiguousarray(inputs.imu_quaternion_wxyz, dtype=float),
                        np.ascontiguousarray(inputs.imu_angular_velocity, dtype=float),
                        np.asarray(inputs.imu_orientation_present, dtype=np.bool_),
                        np.asarray(inputs.imu_angular_velocity_present, dtype=np.bool_), covariance, imu_code, samples)
    fill_accelerations(samples["f_S"], inputs.imu_linear_acceleration, inputs.imu_linear_acceleration_present)
    js_code, js_offsets, js_index, js_position, js_velocity = _validate_joint_states(inputs, name_to_index)
    if inputs.stamp_ns is None:
        input_ns = np.round(inputs.input_stamps() * 1e9).astype(np.int64)
    else:
        input_ns = np.asarray(inputs.stamp_ns, dtype=np.int64)
    kind = np.asarray(inputs.kind, dtype=np.int64)
    row = np.asarray(inputs.row, dtype=np.int64)
    samples["stamp"] = np.asarray(inputs.imu_stamp, dtype=float)
    samples["stamp_ns"] = -1
    samples["stamp_ns"][row[kind == 0]] = input_ns[kind == 0]
    n_odom = len(inputs.odom_stamp)
    if n_odom and odometry is None:
        raise OfflineInputError(f"{n_odom} odometry inputs, but the estimator has no odometry configured")
    odom_code = np.empty(n_odom, dtype=np.int64)
    odom_values = np.empty((n_odom, odometry_input.VALUES))
    if n_odom:
        odometry_input.validate_odometries(
            np.ascontiguousarray(inputs.odom_position, dtype=float),
            np.ascontiguousarray(inputs.odom_quaternion_wxyz, dtype=float),
            np.asarray(inputs.odom_frames_match, dtype=np.bool_), odometry, odom_code, odom_values)
    m = len(kind)
    now = np.full(m, np.nan) if inputs.now is None else np.asarray(inputs.now, dtype=float)
    return rules.WindowInputs(
        kind=kind, row=row, now=now, stamp_ns=input_ns, imu_sensor=imu_sensor, imu_code=imu_code, imu_sample=samples,
        js_stamp=np.asarray(inputs.js_stamp, dtype=float), js_code=js_code, js_offsets=js_offsets, js_index=js_index,
        js_position=js_position, js_velocity=js_velocity, odom_stamp=np.asarray(inputs.odom_stamp, dtype=float),
        odom_code=odom_code, odom_values=odom_values)


_FLOAT64 = np.dtype(np.float64)


def _as_vector(values) -> np.ndarray:
    """``np.asarray(values, dtype=float).reshape(-1)``, returning a 1-D float64 array itself (decoded messages'
    arrays already are: this runs once per joint-state message)."""
    if type(values) is np.ndarray and values.ndim == 1 and values.dtype == _FLOAT64:
        return values
    return np.asarray(values, dtype=float).reshape(-1)


def _check_layouts(layouts: list, n: int) -> None:
    """OfflineInputError unless ``layouts`` hold each of the ``n`` joint-state messages once, as rows of their
    matrices."""
    for rows in layouts:
        g = len(rows.members)
        if np.ndim(rows.positions) != 2 or len(rows.positions) != g or (
                rows.velocities is not None and (np.ndim(rows.velocities) != 2 or len(rows.velocities) != g)):
            raise OfflineInputError(f"js_layouts: expected positions (g, n) and velocities (g, m) or None with g = "
                                    f"{g} members, got {np.shape(rows.positions)} and "
                                    f"{None if rows.velocities is None else np.shape(rows.velocities)}")
    members = np.sort(np.concatenate([np.asarray(rows.members, dtype=np.int64) for rows in layouts] or [[]]))
    if members.size != n or (n and not np.array_equal(members, np.arange(n))):
        raise OfflineInputError(f"js_layouts: expected each of the {n} joint-state messages in one layout once, "
                                f"got {members.size} members")


def _layout_groups(inputs: OfflineInputs) -> list:
    """``[(members (g,) int64, names, positions (g, n), velocities (g, m) or None)]``: the joint states by layout
    (names, position count, velocity count; an empty velocity array is none), from ``inputs.js_layouts`` as they
    are when given, else grouped message by message."""
    if inputs.js_layouts is not None:
        return [(np.asarray(rows.members, dtype=np.int64), rows.names, np.asarray(rows.positions, dtype=float),
                 None if rows.velocities is None or np.shape(rows.velocities)[1] == 0
                 else np.asarray(rows.velocities, dtype=float)) for rows in inputs.js_layouts]
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
    result = []
    for (names, position_count, velocity_count), members in groups.items():
        # np.array of the equal-length rows: np.stack's per-array checks cost 3x as much here; (g, 0) when empty
        P = np.array([positions_of[k] for k in members]).reshape(len(members), position_count)
        V = None if velocity_count < 0 else np.array([velocities_of[k] for k in members]).reshape(
            len(members), velocity_count)
        result.append((np.asarray(members, dtype=np.int64), names, P, V))
    return result


def _validate_joint_states(inputs: OfflineInputs, name_to_index: dict):
    """parse_joint_state over every message: (code (n,), CSR offsets (n + 1,), indices, positions, velocities
    (NaN = none)), with its rules (``inputs.joint_state_layout`` once per layout, then ``joint_state_verdict``):
    messages with the same names and array sizes are checked together (a recording's encoder messages usually all
    share one layout)."""
    n = len(inputs.js_stamp)
    code = np.full(n, _OK, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    accepted = []  # (message indices, known, indices, positions (g, m), velocities (g, m) or None)
    for members, names, P, V in _layout_groups(inputs):
        layout = joint_state_layout(names, P.shape[1], -1 if V is None else V.shape[1], name_to_index)
        if layout.reason is not None:
            code[members] = _R[layout.reason]
            continue
        known, indices = layout.known, layout.indices
        finite = np.isfinite(P).all(axis=1)
        if V is not None:
            finite &= np.isfinite(V).all(axis=1)
        code[members[~finite]] = _R[joint_state_verdict(layout, False)]
        reason = joint_state_verdict(layout, True)
        if reason is not None:
            code[members[finite]] = _R[reason]
            continue
        code[members[finite]] = _UNKNOWN_KEPT if layout.unknown else _OK
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


# ---------------------------------------------------------------------------------------------- velocities
@njit(cache=True, nogil=True)  # nogil: replay.overlap reads and writes meanwhile
def kinematics_and_velocities(tree, Q, have_X_WB, v_prior, use_gyro, w_S, bodies, R_BS, free_v, regularization,
                              X_WB_out, V_out, from_gyro_out):
    """Per cycle c: X_WB at Q[c] into X_WB_out[c] (unless have_X_WB[c]: the solver already put its poses at Q[c]
    there, the same bits forward kinematics gives); v from the gyros of the sensors with use_gyro[c, i] (their
    rates w_S[c, i]), least squares around v_prior[c] (velocity.solve_velocities_from_gyros): with A the
    stacked angular Jacobians J_w(body) of the free velocities and b the measured rates R_WS w_S,
    (A^T A + regularization I) dv = A^T (b - A v_prior); a free velocity counts as from the gyros when its
    resolution (A^T A + reg I)^-1 A^T A diagonal entry exceeds 0.5. Returns False if a system was singular."""
    nb, nv = X_WB_out.shape[1], v_prior.shape[1]
    n_imu = bodies.shape[0]
    R_WF = np.empty((nb, 3, 3))
    p_WM = np.empty((nb, 3))
    J = np.empty((6, nv))
    origin = np.zeros(3)
    free = np.flatnonzero(free_v)
    n_free = free.shape[0]
    # The angular Jacobians read R_WF of the bodies between the IMU bodies and the world only.
    parent = tree.parent
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
    rhs = np.empty(n_free)
    step = np.empty(n_free)
    column = np.empty(n_free)
    touched = np.empty((n_imu, n_free), dtype=np.int64)  # per sensor's row block: the free columns not all zero
    touched_count = np.zeros(n_imu, dtype=np.int64)
    sweep, sweep_flags = np.empty((3, 4, 4)), np.ones((3, 1), dtype=np.bool_)
    return _kinematics_and_velocities_rows(tree, Q, have_X_WB, v_prior, use_gyro, w_S, bodies, R_BS, free, path_bodies,
                                           regularization, X_WB_out, V_out, from_gyro_out, R_WF, p_WM, J, origin, A,
                                           residual, lhs, rhs, touched, touched_count, step, column, sweep,
                                           sweep_flags)


# Without numba's reference counting (rules.py says why): the rows' helpers take the tree's arrays and views of the
# outputs, which counted references at every call, per cycle and observed IMU. Its caller allocates what it uses.
@njit(cache=True, nogil=True, _nrt=False)
def _kinematics_and_velocities_rows(tree, Q, have_X_WB, v_prior, use_gyro, w_S, bodies, R_BS, free, path_bodies,
                                    regularization, X_WB_out, V_out, from_gyro_out, R_WF, p_WM, J, origin, A,
                                    residual, lhs, rhs, touched, touched_count, step, column, sweep, sweep_flags):
    """:func:`kinematics_and_velocities` over the cycles, with its workspaces: ``free`` the free velocities,
    ``path_bodies`` the bodies between the IMU bodies and the world."""
    n_cycles, nv, n_imu, n_free = Q.shape[0], v_prior.shape[1], bodies.shape[0], free.shape[0]
    for c in range(n_cycles):
        if not have_X_WB[c]:
            kinematics.forward_kinematics_in(tree, Q[c], X_WB_out[c], R_WF, p_WM, sweep, sweep_flags)
        for j in range(nv):  # element by element: a row assignment allocates (numba's overlap check)
            V_out[c, j] = v_prior[c, j]
            from_gyro_out[c, j] = False
        k = 0
        for i in range(n_imu):
            if use_gyro[c, i]:
                k += 1
        if k == 0 or n_free == 0:
            continue
        if have_X_WB[c]:
            kinematics.joint_frame_rotations(tree, X_WB_out[c], path_bodies, R_WF)
        row = 0
        for i in range(n_imu):
            if not use_gyro[c, i]:
                continue
            body = bodies[i]
            w = w_S[c, i]
            kinematics.point_jacobian(tree, R_WF, p_WM, body, origin, False, J)
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
            count = 0
            for j in range(n_free):
                if A[row, j] != 0.0 or A[row + 1, j] != 0.0 or A[row + 2, j] != 0.0:
                    touched[row // 3, count] = j
                    count += 1
            touched_count[row // 3] = count
            row += 3
        _normal_equations(A, residual, row // 3, touched, touched_count, n_free, lhs, rhs)
        for i in range(n_free):
            lhs[i, i] += regularization
        # The step, then the resolution's diagonal: (M^-1 A^T A)_jj = 1 - reg (M^-1)_jj with M = A^T A + reg I,
        # every right-hand side through one factor of M.
        if not cholesky_factor(lhs, n_free):
            return False
        cholesky_substitute(lhs, rhs, n_free, step)
        for j in range(n_free):
            V_out[c, free[j]] += step[j]
            inverse_jj = cholesky_inverse_diagonal(lhs, n_free, j, column)
            from_gyro_out[c, free[j]] = 1.0 - regularization * inverse_jj > 0.5
    return True


@njit(cache=True, inline="always")
def _normal_equations(A, residual, blocks, touched, touched_count, n, lhs, rhs):
    """lhs = AᵀA, rhs = Aᵀ residual (n free columns) from A's first ``blocks`` blocks of 3 rows (a gyro each), a
    block's products over the columns it touches only (``touched[s, :touched_count[s]]``, ascending): an angular
    Jacobian is zero off its body's path to the world, ~10 of a humanoid's 32 free columns. Every entry's sum keeps
    the row order of the dense product and skips exact-zero terms only, so it has the dense product's bits."""
    for i in range(n):
        rhs[i] = 0.0
        for j in range(i, n):
            lhs[i, j] = 0.0
    for s in range(blocks):
        r = 3 * s
        for a in range(touched_count[s]):
            i = touched[s, a]
            for b in range(a, touched_count[s]):
                j = touched[s, b]
                value = lhs[i, j]
                value += A[r, i] * A[r, j]
                value += A[r + 1, i] * A[r + 1, j]
                value += A[r + 2, i] * A[r + 2, j]
                lhs[i, j] = value
            value = rhs[i]
            value += A[r, i] * residual[r]
            value += A[r + 1, i] * residual[r + 1]
            value += A[r + 2, i] * residual[r + 2]
            rhs[i] = value
    for i in range(n):
        for j in range(i + 1, n):
            lhs[j, i] = lhs[i, j]


@njit(cache=True)
def relative_poses_into(X_WB, parents, bodies, X_PC):
    """:func:`relative_poses`' kernel, into a given array: X_PC[c, m] (C, k, 4, 4) = inv(X_WP) X_WC of body C =
    ``bodies[m]`` relative to P = ``parents[m]`` at the poses X_WB[c] (C, num_bodies, 4, 4); compiled code that writes
    a TFMessage in place (``live_cdr``) calls it too."""
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
    relative_poses_into(flat, np.asarray(parents, dtype=np.int64), bodies, X_PC)
    return X_PC.reshape(lead + (bodies.size, 4, 4))


@njit(cache=True, nogil=True)
def sensor_errors(X_WB, observed, bodies, R_BS, R_WG, R_GS, errors_out):
    """errors_out[c, i] (deg) = the angle between R_WS and R_WO for each observed (cycle, IMU): R_WS = R_WB R_BS
    at the cycle's solution, R_WO = R_WG R_GS[c, i] of the sample the cycle used; NaN where not observed.
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
            for i in range(3):
                for j in range(3):
                    R_WS[i, j] = X_WB[c, b, i, 0] * R_BS[n, 0, j] + X_WB[c, b, i, 1] * R_BS[n, 1, j] + \
                        X_WB[c, b, i, 2] * R_BS[n, 2, j]
                    R_WO[i, j] = (R_WG[i, 0] * R_GS[c, n, 0, j] + R_WG[i, 1] * R_GS[c, n, 1, j]
                                  + R_WG[i, 2] * R_GS[c, n, 2, j])
            for i in range(3):
                for j in range(3):
                    R[i, j] = R_WS[0, i] * R_WO[0, j] + R_WS[1, i] * R_WO[1, j] + R_WS[2, i] * R_WO[2, j]
            sine = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
            cosine = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
            errors_out[c, n] = math.degrees(math.atan2(sine, cosine))


# ---------------------------------------------------------------------------------------------- results
def _frozen(array) -> np.ndarray:
    array = np.array(array, copy=True)
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class EstimatorResult:
    """One estimation cycle, immutable.

    Attributes:
        stamp: the input time the cycle belongs to (seconds); outputs are stamped with it.
        q, v: (nq,), (nv,) plant coordinates (Drake order; floating q = [qw qx qy qz x y z], v = [w_WB_W, v_WB_W]).
        position_names, velocity_names: plant coordinate names.
        velocity_from_gyro: (nv,) True where v came from the gyros, False where from finite differences / encoders.
        X_WB: (num_bodies, 4, 4) body poses at q (world first), for TF.
        goal: assembler goal after the solve (Simbody's definition, rad^2).
        solved: the assembler ran and succeeded this cycle (False: nothing observed, or it failed; then the free
            coordinates keep their previous values).
        failure: why not solved ("" when solved).
        sensor_errors_deg: {sensor name: angle between estimated and observed sensor orientation, degrees};
            NaN for sensors not observed this cycle.
        observed_sensors, stale_sensors, uncalibrated_sensors: sensor names by status this cycle.
        missing_encoders: measured coordinates that never received an encoder value (held at their default).
        solve_time_s: wall time of the assembler call.
        tracking_reset: True on the first cycle after start or a clock jump (solved from scratch).
        cycle: running cycle counter (from 1).
        initialized: the estimated coordinates have been solved at least once since the last reset (or there
            are none); before that they hold default values and should not be published as estimates.
        sensor_weights: {sensor name: its weight in this cycle's orientation solve} for the observed sensors (the
            configured weight, times its covariance factor with ``imu_covariance_weighting``).
    """

    stamp: float
    q: np.ndarray
    v: np.ndarray
    position_names: tuple
    velocity_names: tuple
    velocity_from_gyro: np.ndarray
    X_WB: np.ndarray
    goal: float
    solved: bool
    failure: str
    sensor_errors_deg: dict
    observed_sensors: tuple
    stale_sensors: tuple
    uncalibrated_sensors: tuple
    missing_encoders: tuple
    solve_time_s: float
    tracking_reset: bool
    cycle: int
    initialized: bool
    sensor_weights: dict = field(default_factory=dict)

    @classmethod
    def of_cycle(cls, *, sensor_names, articulated_names, position_names, velocity_names, stamp, q, v,
                 velocity_from_gyro, X_WB, goal, solved, failure, errors_deg, observed, stale, uncalibrated, missing,
                 weights, solve_time_s, tracking_reset, cycle, initialized) -> EstimatorResult:
        """One cycle's result from its row arrays, the one conversion of the batch run's rows
        (:meth:`OfflineRun.result`) and of a message's streamed cycle: arrays frozen, per-sensor flags (bool rows in
        ``sensor_names`` order) as name tuples, ``missing`` (bool row in ``articulated_names`` order, or empty) as
        names, ``weights`` kept for the observed sensors only.

        Built as the dataclass's ``__init__`` builds it (it only sets the fields: no ``__post_init__``, and every
        field is given), but with the fields set at once rather than one frozen ``object.__setattr__`` at a time: a
        streamed cycle's result is on the node's path once per sample set."""
        result = object.__new__(cls)
        result.__dict__.update(
            stamp=float(stamp), q=_frozen(q), v=_frozen(v), position_names=position_names,
            velocity_names=velocity_names, velocity_from_gyro=_frozen(velocity_from_gyro), X_WB=_frozen(X_WB),
            goal=float(goal), solved=bool(solved), failure=failure,
            sensor_errors_deg=dict(zip(sensor_names, np.asarray(errors_deg, dtype=float).tolist(), strict=True)),
            observed_sensors=tuple(compress(sensor_names, observed)),
            stale_sensors=tuple(compress(sensor_names, stale)),
            uncalibrated_sensors=tuple(compress(sensor_names, uncalibrated)),
            missing_encoders=tuple(compress(articulated_names, missing)),
            solve_time_s=float(solve_time_s), tracking_reset=bool(tracking_reset), cycle=int(cycle),
            initialized=bool(initialized),
            sensor_weights=dict(compress(zip(sensor_names, np.asarray(weights, dtype=float).tolist(), strict=True),
                                         observed)))
        return result


@dataclass(frozen=True)
class OfflineRun:
    """Every cycle of an offline run as arrays (C cycles); :meth:`result` gives one as an EstimatorResult.

    ``stamp`` (C,) s; ``stamp_ns`` (C,) the integer stamp of the input whose stamp the cycle carries; ``input``
    (C,) index of the input whose offering ran the cycle; ``q`` (C, nq); ``v`` (C, nv); ``velocity_from_gyro``
    (C, nv); ``X_WB`` (C, nb, 4, 4); ``goal``, ``solved``, ``failure`` (C,); ``sensor_errors_deg`` (C, n_imu)
    in ``sensor_names`` order (NaN = not observed); ``observed`` / ``stale`` (C, n_imu) bool; ``weights``
    (C, n_imu) each observed sensor's weight in the orientation solve (0 = not observed);
    ``uncalibrated`` (C, n_imu) bool (not stale, waiting for calibration); ``missing`` (C, n_art) bool (measured,
    never received); ``tracking_reset``, ``initialized`` (C,) bool;
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
    weights: np.ndarray
    stale: np.ndarray
    uncalibrated: np.ndarray
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
                    "observed", "weights", "stale", "uncalibrated", "missing", "tracking_reset", "initialized",
                    "solve_time_s")

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
        nb = self.tree.parent.shape[0]
        X_WB = np.empty((nb, 4, 4))
        kinematics.forward_kinematics(self.tree, np.ascontiguousarray(self.q[k]), X_WB, np.empty((nb, 3, 3)),
                                   np.empty((nb, 3)))
        return X_WB

    def result(self, k: int):
        """Cycle ``k`` of this run as the streaming path's :class:`EstimatorResult` (cycle numbers from 1 after the
        reset)."""
        return EstimatorResult.of_cycle(
            sensor_names=self.sensor_names, articulated_names=self.articulated_names,
            position_names=self.position_names, velocity_names=self.velocity_names, stamp=self.stamp[k], q=self.q[k],
            v=self.v[k], velocity_from_gyro=self.velocity_from_gyro[k], X_WB=self.poses(k), goal=self.goal[k],
            solved=self.solved[k], failure=self.failure[k], errors_deg=self.sensor_errors_deg[k],
            observed=self.observed[k], stale=self.stale[k], uncalibrated=self.uncalibrated[k], missing=self.missing[k],
            weights=self.weights[k], solve_time_s=self.solve_time_s[k], tracking_reset=self.tracking_reset[k],
            cycle=self.first_cycle + k + 1, initialized=self.initialized[k])

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
