"""Input validation for the estimator: every way a sample can be bad, as a reason code instead of an exception.

You are in the ROS-free estimator core. DESIGN.md's reliability rules say bad input never crashes the node and
never silently corrupts the output: each rejected sample gets a specific reason, a counter and is dropped (or
the sensor is treated as unobserved). The checks here are pure functions over plain arrays (their decisions on
IMU samples are compiled in ``rules.validate_imu``; the stamp checks are ``rules``'); the
:class:`~ros_dofkit.core.estimator.estimator.Estimator` applies them and keeps the counters, so offline replay
and the live node count the same things.

Samples use core conventions: quaternions (w, x, y, z) giving ``R_GS`` (sensor S in its world G), gyro rates in
rad/s expressed in S, stamps in seconds.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE, describe_quaternion_problem, quat_to_matrix


class RejectReason(enum.StrEnum):
    """Why (part of) an input was dropped; the value is the diagnostics key."""

    EMPTY = "empty_message"
    MISMATCHED_ARRAYS = "mismatched_arrays"
    NON_FINITE = "non_finite"
    UNKNOWN_NAME = "unknown_name"
    DUPLICATE_NAME = "duplicate_name"
    UNKNOWN_SENSOR = "unknown_sensor"
    ZERO_QUATERNION = "zero_quaternion"
    NON_UNIT_QUATERNION = "non_unit_quaternion"
    ORIENTATION_ABSENT = "orientation_absent"
    STALE_STAMP = "stale_stamp"
    FUTURE_STAMP = "future_stamp"
    OUT_OF_ORDER = "out_of_order"
    CLOCK_JUMP_BACK = "clock_jump_back"
    INVALID_STAMP = "invalid_stamp"  # a header stamp that is no time (ROS nanosec outside [0, 1e9))
    REPEATED_STAMP = "repeated_stamp"  # the source's last stamp again: the repeat is dropped (one datum per stamp)
    UNKNOWN_FRAME = "unknown_frame"  # an odometry header or child frame that is not the configured base's
    BAD_COVARIANCE = "bad_covariance"  # an orientation covariance that is no covariance (imu_covariance_weighting)


#: Index of each reason in ``tuple(RejectReason)``: the codes the compiled rules return and count under.
REASON_CODE = {reason: i for i, reason in enumerate(RejectReason)}
#: :func:`quaternion_check`'s answer for a valid quaternion (reason codes are >= 0).
QUATERNION_OK = -1
_NON_FINITE_CODE = REASON_CODE[RejectReason.NON_FINITE]
_ZERO_QUATERNION_CODE = REASON_CODE[RejectReason.ZERO_QUATERNION]
_NON_UNIT_QUATERNION_CODE = REASON_CODE[RejectReason.NON_UNIT_QUATERNION]
_BAD_COVARIANCE_CODE = REASON_CODE[RejectReason.BAD_COVARIANCE]
#: :func:`orientation_variance`'s answer for a covariance it accepts.
COVARIANCE_OK = -1
#: Relative asymmetry |Σ_ij - Σ_ji| / max|Σ| a covariance may have (float32 round trips of a driver's matrix).
COVARIANCE_SYMMETRY_TOLERANCE = 1e-6
#: The smallest mean variance (rad²) a covariance may claim: a 1e-10 rad standard deviation, far below any sensor;
#: below it a weight stddev² / variance would leave floating point (a driver's zero-ish diagonal, not a measurement).
MIN_ORIENTATION_VARIANCE = 1e-20


@njit(cache=True, inline="always", error_model="numpy")
def quaternion_check(w, x, y, z):
    """``(code, norm)``: the one quaternion rule of every input (``spatial.quat_validity``'s, compiled for the
    cycle rules): a non-finite entry -> ``non_finite``, norm 0 -> ``zero_quaternion``, a norm farther than
    ``QUAT_NORM_TOLERANCE`` from 1 -> ``non_unit_quaternion`` (as :data:`REASON_CODE`), else
    :data:`QUATERNION_OK`. ``norm`` = sqrt(((w² + x²) + y²) + z²), the value a valid quaternion is divided by."""
    if not (math.isfinite(w) and math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return _NON_FINITE_CODE, math.nan
    norm = math.sqrt(((w * w + x * x) + y * y) + z * z)
    if norm == 0.0:
        return _ZERO_QUATERNION_CODE, norm
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        return _NON_UNIT_QUATERNION_CODE, norm
    return QUATERNION_OK, norm


@njit(cache=True, inline="always", error_model="numpy")
def orientation_variance(covariance):
    """``(code, variance)`` of an IMU message's ``orientation_covariance`` (9,) row-major (REP-145; the caller has
    already read a -1 in [0] as "no orientation"): all zeros -> (:data:`COVARIANCE_OK`, NaN), the covariance is
    unknown; a non-finite entry, a negative diagonal entry, an asymmetry beyond
    :data:`COVARIANCE_SYMMETRY_TOLERANCE` of its largest entry, or a mean variance below
    :data:`MIN_ORIENTATION_VARIANCE` ->
    ``bad_covariance``; else (:data:`COVARIANCE_OK`, trace(Σ)/3), the mean per-axis variance (rad²). An empty
    ``covariance`` (not read: weighting off) is unknown."""
    if covariance.shape[0] == 0:
        return COVARIANCE_OK, math.nan
    largest = 0.0
    for k in range(9):
        if not math.isfinite(covariance[k]):
            return _BAD_COVARIANCE_CODE, math.nan
        largest = max(largest, abs(covariance[k]))
    if largest == 0.0:
        return COVARIANCE_OK, math.nan
    trace = 0.0
    for a in range(3):
        if covariance[4 * a] < 0.0:
            return _BAD_COVARIANCE_CODE, math.nan
        trace += covariance[4 * a]
        for b in range(a + 1, 3):
            if abs(covariance[3 * a + b] - covariance[3 * b + a]) > COVARIANCE_SYMMETRY_TOLERANCE * largest:
                return _BAD_COVARIANCE_CODE, math.nan
    variance = trace / 3.0
    if variance < MIN_ORIENTATION_VARIANCE:  # a zero diagonal under off-diagonal terms, or a vanishing trace
        return _BAD_COVARIANCE_CODE, math.nan
    return COVARIANCE_OK, variance


def describe_covariance_problem(covariance) -> str:
    """Why :func:`orientation_variance` refused ``covariance`` (9,), for the log."""
    matrix = np.asarray(covariance, dtype=float).reshape(3, 3)
    if not np.all(np.isfinite(matrix)):
        problem = "non-finite entries"
    elif np.any(np.diag(matrix) < 0):
        problem = f"negative variances on the diagonal {np.diag(matrix).tolist()}"
    elif np.max(np.abs(matrix - matrix.T)) > COVARIANCE_SYMMETRY_TOLERANCE * np.max(np.abs(matrix)):
        problem = f"an asymmetric matrix (largest |Σ_ij - Σ_ji| = {np.max(np.abs(matrix - matrix.T)):.3g})"
    else:
        problem = (f"a mean variance trace/3 = {np.trace(matrix) / 3:.3g} below {MIN_ORIENTATION_VARIANCE:g} rad^2 "
                   "under non-zero entries")
    return (f"orientation_covariance has {problem}; expected a symmetric matrix with variances >= 0 (rad^2), all "
            f"zeros when unknown, or -1 in [0] when there is no orientation: {matrix.reshape(-1).tolist()}")


@dataclass(frozen=True)
class InputStatus:
    """Outcome of offering one sample to the estimator.

    ``accepted`` says whether anything of the sample was kept. ``reason`` is set when something was dropped:
    the whole sample (``accepted`` False) or a part of it (e.g. unknown joint names ignored, an IMU sample whose
    orientation is marked absent but whose gyro is kept). ``detail`` is a human-readable line for the log.
    """

    accepted: bool
    reason: RejectReason | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """True when the whole sample was used."""
        return self.accepted and self.reason is None


ACCEPTED = InputStatus(True)


def rejected(reason: RejectReason, detail: str) -> InputStatus:
    return InputStatus(False, reason, detail)


#: The stamp of an input whose header is no time: rejected as ``invalid_stamp`` (see :func:`stamp_seconds`).
INVALID_STAMP = -math.inf


#: :data:`INVALID_STAMP` as integer nanoseconds (replay carries stamps as int64 ns).
INVALID_STAMP_NS = np.iinfo(np.int64).min


def stamp_nanoseconds(sec, nanosec):
    """ROS time(s) (sec, nanosec; ints or int64 arrays) in integer nanoseconds, :data:`INVALID_STAMP_NS` where
    nanosec is outside [0, 1e9)."""
    if isinstance(sec, np.ndarray) or isinstance(nanosec, np.ndarray):
        sec, nanosec = np.asarray(sec, dtype=np.int64), np.asarray(nanosec, dtype=np.int64)
        valid = (nanosec >= 0) & (nanosec < 1_000_000_000)
        return np.where(valid, sec * 1_000_000_000 + nanosec, INVALID_STAMP_NS)
    if not 0 <= nanosec < 1_000_000_000:
        return INVALID_STAMP_NS
    return int(sec) * 1_000_000_000 + int(nanosec)


def nanoseconds_to_seconds(stamp_ns):
    """Integer nanoseconds (int or int64 array) in seconds; :data:`INVALID_STAMP_NS` gives :data:`INVALID_STAMP`."""
    if isinstance(stamp_ns, np.ndarray):
        return np.where(stamp_ns == INVALID_STAMP_NS, INVALID_STAMP, stamp_ns * 1e-9)
    return INVALID_STAMP if stamp_ns == INVALID_STAMP_NS else stamp_ns * 1e-9


def stamp_seconds(sec: int, nanosec: int) -> float:
    """A ROS time (``builtin_interfaces/Time``: int32 sec, uint32 nanosec in [0, 1e9)) in seconds, or
    :data:`INVALID_STAMP` when nanosec is outside [0, 1e9) (the estimator rejects it as ``invalid_stamp``; read
    as sec + nanosec * 1e-9 it would be a plausible later time, accepted silently)."""
    if not 0 <= nanosec < 1_000_000_000:
        return INVALID_STAMP
    return sec + nanosec * 1e-9


@dataclass(frozen=True)
class JointStateSample:
    """A validated joint-state message: indices into the estimator's joint table and their values."""

    stamp: float
    indices: np.ndarray  # int, into the known name table
    positions: np.ndarray
    velocities: np.ndarray | None
    unknown_names: tuple


@dataclass(frozen=True)
class JointStateLayout:
    """What a joint-state message's names and array sizes decide before its values are read: ``reason`` a
    rejection (EMPTY, MISMATCHED_ARRAYS, DUPLICATE_NAME) with its ``detail``, or None; ``known`` the message
    positions of the names the robot knows, ``indices`` their articulated indices, ``unknown`` the other names.
    Offline replay decides it once per layout (a recording's encoder messages share one), the node per message."""

    reason: RejectReason | None
    detail: str
    known: np.ndarray
    indices: np.ndarray
    unknown: tuple


def joint_state_layout(names, position_count: int, velocity_count: int, name_to_index: dict) -> JointStateLayout:
    """:func:`parse_joint_state`'s rules on the names and sizes (``velocity_count`` -1 or 0: no velocities)."""
    names = list(names)
    none = np.zeros(0, dtype=np.int64)
    if not names:
        return JointStateLayout(RejectReason.EMPTY, "joint state has no names", none, none, ())
    if position_count != len(names):
        return JointStateLayout(RejectReason.MISMATCHED_ARRAYS, f"position has {position_count} entries for "
                                f"{len(names)} names (expected one per name)", none, none, ())
    if velocity_count > 0 and velocity_count != len(names):
        return JointStateLayout(RejectReason.MISMATCHED_ARRAYS, f"velocity has {velocity_count} entries for "
                                f"{len(names)} names (expected 0 or one per name)", none, none, ())
    seen = set()
    duplicates = sorted({n for n in names if n in seen or seen.add(n)})
    if duplicates:
        return JointStateLayout(RejectReason.DUPLICATE_NAME, f"names given more than once: {duplicates}", none,
                                none, ())
    known = np.array([i for i, n in enumerate(names) if n in name_to_index], dtype=np.int64)
    return JointStateLayout(None, "", known, np.array([name_to_index[names[i]] for i in known], dtype=np.int64),
                            tuple(n for n in names if n not in name_to_index))


def joint_state_verdict(layout: JointStateLayout, finite: bool) -> RejectReason | None:
    """The rules after an accepted layout: a non-finite position or velocity rejects the message, then one with no
    known name is dropped (``unknown_name``); None = kept (unknown names, if any, ignored and counted)."""
    if not finite:
        return RejectReason.NON_FINITE
    if layout.known.size == 0:
        return RejectReason.UNKNOWN_NAME
    return None


def parse_joint_state(names, positions, velocities, stamp, name_to_index: dict):
    """Validate a joint-state message; return ``(status, sample or None)``.

    Rules (SPEC 9.9 + DESIGN reliability; :func:`joint_state_layout`, then :func:`joint_state_verdict`):
    ``positions`` must have one entry per name; ``velocities`` may be empty (absent) or one per name; a name given
    twice rejects the message (ambiguous); a non-finite position or velocity rejects the message; names the robot
    does not know are ignored and reported, and a message with no known name at all is dropped.
    """
    names = list(names)
    positions = np.asarray(positions, dtype=float).reshape(-1)
    velocities = None if velocities is None else np.asarray(velocities, dtype=float).reshape(-1)
    if velocities is not None and velocities.size == 0:
        velocities = None
    layout = joint_state_layout(names, positions.size, -1 if velocities is None else velocities.size, name_to_index)
    if layout.reason is not None:
        return rejected(layout.reason, layout.detail), None
    finite = bool(np.all(np.isfinite(positions))) and (velocities is None or bool(np.all(np.isfinite(velocities))))
    reason = joint_state_verdict(layout, finite)
    if reason is RejectReason.NON_FINITE:
        bad = [n for n, p in zip(names, positions, strict=True) if not np.isfinite(p)]
        if velocities is not None:
            bad += [f"{n} (velocity)" for n, v in zip(names, velocities, strict=True) if not np.isfinite(v)]
        return rejected(reason, f"non-finite values for {bad}"), None
    if reason is not None:
        return rejected(reason, f"none of the names {names[:8]} belongs to the robot (known names are e.g. "
                                f"{list(name_to_index)[:8]})"), None
    known = layout.known
    sample = JointStateSample(stamp=float(stamp), indices=layout.indices, positions=positions[known],
                              velocities=None if velocities is None else velocities[known],
                              unknown_names=layout.unknown)
    if layout.unknown:
        return (InputStatus(True, RejectReason.UNKNOWN_NAME, f"ignored names not in the robot: {list(layout.unknown)}"),
                sample)
    return ACCEPTED, sample


@dataclass(frozen=True)
class ImuSample:
    """A validated IMU sample: ``R_GS`` (None if the orientation is absent) and ``w_S`` (None if absent)."""

    stamp: float
    R_GS: np.ndarray | None
    w_S: np.ndarray | None


def parse_imu(stamp, quaternion_wxyz, angular_velocity, orientation_present=True, angular_velocity_present=True,
              orientation_covariance=None):
    """Validate an IMU sample; return ``(status, sample or None)``.

    The orientation is dropped (sample kept, reason ``orientation_absent``) when the message marks it absent
    (``orientation_covariance[0] == -1``, REP-145). A zero or non-finite quaternion, or one whose norm is off by
    more than ``QUAT_NORM_TOLERANCE``, rejects the whole sample; a near-unit one is normalized (SPEC 9.7). A
    non-finite gyro rejects the sample. A sample with neither orientation nor gyro is dropped. An
    ``orientation_covariance`` (9,) given (imu_covariance_weighting on) that :func:`orientation_variance` refuses
    rejects the sample (``bad_covariance``).
    """
    R_GS = None
    w_S = None
    if orientation_present:
        quaternion = np.asarray(quaternion_wxyz, dtype=float).reshape(-1)
        if quaternion.size != 4:
            return rejected(
                RejectReason.MISMATCHED_ARRAYS, f"quaternion needs 4 entries (w, x, y, z), got {quaternion.size}"
            ), None
        code, norm = quaternion_check(*quaternion)
        if code != QUATERNION_OK:
            return rejected(list(RejectReason)[code], describe_quaternion_problem(quaternion, norm)), None
        R_GS = quat_to_matrix(quaternion / norm)
        if orientation_covariance is not None:
            covariance = np.asarray(orientation_covariance, dtype=float).reshape(-1)
            if covariance.size != 9:
                return rejected(RejectReason.MISMATCHED_ARRAYS,
                                f"orientation_covariance needs 9 entries (3x3 row-major), got {covariance.size}"), None
            # the compiled rule's own Python (an explanation path: no kernel compiled for it)
            if orientation_variance.py_func(covariance)[0] != COVARIANCE_OK:
                return rejected(RejectReason.BAD_COVARIANCE, describe_covariance_problem(covariance)), None
    if angular_velocity_present and angular_velocity is not None:
        w_S = np.asarray(angular_velocity, dtype=float).reshape(-1)
        if w_S.size != 3:
            return rejected(RejectReason.MISMATCHED_ARRAYS, f"angular velocity needs 3 entries, got {w_S.size}"), None
        if not np.all(np.isfinite(w_S)):
            return rejected(RejectReason.NON_FINITE, f"angular velocity has non-finite entries {w_S.tolist()}"), None
    if R_GS is None and w_S is None:
        return rejected(RejectReason.ORIENTATION_ABSENT, "neither orientation nor angular velocity is present"), None
    sample = ImuSample(stamp=float(stamp), R_GS=R_GS, w_S=w_S)
    if R_GS is None:
        return InputStatus(
            True, RejectReason.ORIENTATION_ABSENT, "orientation marked absent (covariance[0] == -1); gyro kept"
        ), sample
    return ACCEPTED, sample
