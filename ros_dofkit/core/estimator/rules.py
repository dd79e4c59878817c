"""The estimator's cycle rules, compiled: which input is kept, when a cycle runs, and with which samples.

You are in the ROS-free estimator core; this module imports NumPy, numba and the reject reasons of ``inputs``.
It exists so that the rules are written once: the streaming
:class:`~ros_dofkit.core.estimator.estimator.Estimator` offers each message to :func:`offer_imu` /
:func:`offer_joint_state` (the node's path), and offline replay offers a window of inputs to :func:`schedule`,
which calls the same two functions, over one :class:`RulesState`. Streaming and
offline cycles are therefore the same bits. The state is named: a :data:`CLOCK` record for the scalars and named
arrays for the per-IMU and per-coordinate memory.

The rules (DESIGN.md's data flow; ``now`` NaN = no receive clock, as offline):

* **Receive clock.** A ``now`` earlier than the last one (a looping bag under sim time) resets tracking.
* **Acceptance.** An input rejected by validation is counted under its reason. Offline (no ``now``), a stamp more
  than ``stamp_jump_reset_s`` before its source's last one resets tracking first (a looping recording). Then: a
  stamp that is no time (:data:`INVALID_STAMP`, e.g. ROS nanosec >= 1e9) -> ``invalid_stamp``; non-finite ->
  ``non_finite``; ahead of ``now`` by more than ``future_tolerance_s`` -> ``future_stamp``; behind it by more than
  ``stale_timeout_s`` -> ``stale_stamp``; before the source's last stamp -> ``out_of_order``; equal to it (an IMU
  sample, or a joint state whose every coordinate already has that stamp) -> ``repeated_stamp`` (tf2's rule: one
  datum per stamp; the repeat is dropped and counted).
* **Waited IMUs.** A cycle waits for the IMUs heard within ``stale_timeout_s`` before the previous cycle, and,
  during the first ``stale_timeout_s`` after a start or reset, for those not heard yet. An IMU whose newest stamp
  is older than the cycle's stamp minus ``stale_timeout_s`` is stale in that cycle (unobserved).
* **Free-running** (``sync_tolerance_s`` = 0): a cycle runs at the newest input stamp when every waited IMU has
  an unused sample; an IMU's new sample arriving while its previous one is unused first runs that cycle with what
  is buffered (``flushed_cycles``: a late IMU costs at most one sample period, a sensor's instants are never
  mixed). Samples of one instant arriving within the DDS spread make one cycle as long as the sets do not
  interleave; when they do (delays beyond a sample period), partial cycles run (issue 16.7 is open: a queue
  matched by stamp was tried and made results depend on the delivery order after a dropout).
* **Synchronized** (``sync_tolerance_s`` > 0): a cycle runs for the oldest instant every waited IMU has a queued
  sample of (stamps within the tolerance); older samples are discarded (``overwritten_samples``); when a waited
  IMU falls silent, the oldest queued instant runs once it has waited ``stale_timeout_s``.
* **sync_joint_states**: the joint-state stream is waited for too while it arrives; in free-running mode a joint
  state that would replace an unused one first runs that cycle.
* **Manual mode** (``run_cycles`` False: ``Estimator.add_imu`` / ``step``): no cycle runs by itself; a new sample
  replaces an unused one (counted in ``overwritten_samples``) and makes the next :func:`ready` true.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from ros_dofkit.core.estimator.inputs import INVALID_STAMP, RejectReason
from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE

REASONS = tuple(RejectReason)
_INDEX = {reason: i for i, reason in enumerate(REASONS)}
NON_FINITE = _INDEX[RejectReason.NON_FINITE]
OUT_OF_ORDER = _INDEX[RejectReason.OUT_OF_ORDER]
CLOCK_JUMP_BACK = _INDEX[RejectReason.CLOCK_JUMP_BACK]
ORIENTATION_ABSENT = _INDEX[RejectReason.ORIENTATION_ABSENT]
UNKNOWN_NAME = _INDEX[RejectReason.UNKNOWN_NAME]
FUTURE_STAMP = _INDEX[RejectReason.FUTURE_STAMP]
STALE_STAMP = _INDEX[RejectReason.STALE_STAMP]
INVALID_STAMP_REASON = _INDEX[RejectReason.INVALID_STAMP]
ZERO_QUATERNION = _INDEX[RejectReason.ZERO_QUATERNION]
NON_UNIT_QUATERNION = _INDEX[RejectReason.NON_UNIT_QUATERNION]
REPEATED_STAMP = _INDEX[RejectReason.REPEATED_STAMP]

#: Input status codes besides a reason index (>= 0, the input was dropped for that reason).
ACCEPTED = -1
ACCEPTED_ORIENTATION_ABSENT = -2  # kept; the orientation was absent (counted), the gyro kept
ACCEPTED_UNKNOWN_NAMES = -3  # kept; some joint names were unknown (counted)

#: Unused samples an IMU can queue (synchronized mode: half a second at 500 Hz); an older one is dropped.
QUEUE_LENGTH = 256

#: The scalar memory of the rules (one record).
CLOCK = np.dtype([
    ("stamp_prev", np.float64),  # the last cycle's stamp (NaN: none since the last reset)
    ("newest", np.float64), ("newest_ns", np.int64),  # newest accepted input stamp (s, and as given in ns)
    ("first", np.float64),  # first accepted stamp since the last reset
    ("last_clock", np.float64),  # the last receive clock seen (NaN: none)
    ("js_stamp", np.float64), ("js_fresh", np.bool_),  # the last joint state's stamp; not used by a cycle yet
    ("overdue", np.bool_),  # manual mode: a sample replaced an unused one; the next ready() is true
    ("reset_pending", np.bool_),  # the next cycle is the first after a start or reset (solved from scratch)
    ("instant", np.float64), ("instant_ns", np.int64),  # the instant ready() found (NaN: none)
    ("cycles", np.int64), ("resets", np.int64), ("overwritten", np.int64), ("flushed", np.int64),
], align=True)

RulesSettings = namedtuple("RulesSettings", [
    "stale_timeout", "jump_reset", "future_tolerance", "sync_tolerance", "sync_joint_states", "measured_count",
    "encoder_default",
])
RulesSettings.__doc__ = """The configuration the rules read (seconds; ``encoder_default`` (n_art,) the values of
coordinates no encoder has reported; ``measured_count`` the number of measured coordinates)."""

RulesState = namedtuple("RulesState", [
    "clock", "last_stamp", "used_R", "used_w",
    "queue_stamp", "queue_ns", "queue_R", "queue_w", "queue_head", "queue_count",
    "encoder_q", "encoder_v", "encoder_stamp", "have_encoder", "counts",
])
RulesState.__doc__ = """The rules' memory. ``clock`` (1,) :data:`CLOCK`; per IMU i: ``last_stamp`` (newest
accepted, NaN = none), ``used_R`` / ``used_w`` the sample the next cycle holds if it takes none (NaN = absent), and
a ring queue of unused samples (``queue_*``, capacity :data:`QUEUE_LENGTH`, oldest at ``queue_head``); per
articulated coordinate the merged encoder value, rate (NaN = none), stamp and whether one was received; ``counts``
(n_imu + 2, len(REASONS)) rejects by source (IMUs, then joint_states, then clock) and reason."""

Cycles = namedtuple("Cycles", [
    "stamp", "stamp_ns", "input", "reset", "stamp_prev", "R_GS", "w_S", "stale", "encoder_q", "encoder_v",
    "have_encoder", "size",
])
Cycles.__doc__ = """Cycles the rules ran, first ``size[0]`` rows: stamp (s, and ns), the input whose offering ran
it, first after a reset, the previous cycle's stamp (NaN: none), per IMU the sample used (R_GS (3, 3), w_S (3,),
NaN = none) and whether stale, the encoder values locked."""


def new_state(n_imu: int, settings: RulesSettings) -> RulesState:
    """The memory before any input (nothing heard, encoders at their defaults, a reset pending)."""
    n_art = len(settings.encoder_default)
    state = RulesState(
        clock=np.zeros(1, dtype=CLOCK), last_stamp=np.empty(n_imu), used_R=np.empty((n_imu, 3, 3)),
        used_w=np.empty((n_imu, 3)), queue_stamp=np.empty((n_imu, QUEUE_LENGTH)),
        queue_ns=np.empty((n_imu, QUEUE_LENGTH), dtype=np.int64), queue_R=np.empty((n_imu, QUEUE_LENGTH, 3, 3)),
        queue_w=np.empty((n_imu, QUEUE_LENGTH, 3)), queue_head=np.zeros(n_imu, dtype=np.int64),
        queue_count=np.zeros(n_imu, dtype=np.int64), encoder_q=np.empty(n_art), encoder_v=np.empty(n_art),
        encoder_stamp=np.empty(n_art), have_encoder=np.zeros(n_art, dtype=np.bool_),
        counts=np.zeros((n_imu + 2, len(REASONS)), dtype=np.int64))
    reset(state, settings)
    state.clock["resets"][0] = 0
    return state


def new_cycles(capacity: int, n_imu: int, n_art: int) -> Cycles:
    """A buffer for ``capacity`` cycles (see :func:`cycle_capacity`)."""
    return Cycles(
        stamp=np.empty(capacity), stamp_ns=np.empty(capacity, dtype=np.int64),
        input=np.empty(capacity, dtype=np.int64), reset=np.empty(capacity, dtype=np.bool_),
        stamp_prev=np.empty(capacity), R_GS=np.empty((capacity, n_imu, 3, 3)), w_S=np.empty((capacity, n_imu, 3)),
        stale=np.empty((capacity, n_imu), dtype=np.bool_), encoder_q=np.empty((capacity, n_art)),
        encoder_v=np.empty((capacity, n_art)), have_encoder=np.empty((capacity, n_art), dtype=np.bool_),
        size=np.zeros(1, dtype=np.int64))


def cycle_capacity(num_inputs: int, n_imu: int) -> int:
    """Most cycles ``num_inputs`` offers can run: each input at most two (a flush, then its own), plus one per
    sample already queued (synchronized mode releases queued instants) and one more."""
    return 2 * num_inputs + 1 + n_imu * QUEUE_LENGTH


# The helpers below are inlined at the numba IR level (``inline="always"``): numba reference-counts every array a
# compiled function receives (each member of the state and cycle records), and a call per helper per input cost
# more than the rules themselves (see ``ros_dofkit.core.assembly.kernels``).
# ---------------------------------------------------------------------------------------------- validation
@njit(cache=True, inline="always", error_model="numpy")
def validate_imu(quaternion_wxyz, angular_velocity, orientation_present, angular_velocity_present, R_GS, w_S):
    """``inputs.parse_imu``'s decision for one sample, compiled (the same bits live and offline): fills R_GS (the
    normalized quaternion's matrix) and w_S, NaN where absent, and returns its status code. A non-finite, zero or
    non-unit (beyond ``QUAT_NORM_TOLERANCE``) quaternion or a non-finite gyro rejects the sample; one with neither
    field present is dropped as ``orientation_absent``; one with a gyro only is kept, counted as such."""
    for a in range(3):
        w_S[a] = np.nan
        for b in range(3):
            R_GS[a, b] = np.nan
    has_R = False
    if orientation_present:
        w, x, y, z = quaternion_wxyz[0], quaternion_wxyz[1], quaternion_wxyz[2], quaternion_wxyz[3]
        if not (math.isfinite(w) and math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            return NON_FINITE
        norm = math.sqrt(((w * w + x * x) + y * y) + z * z)
        if norm == 0.0:
            return ZERO_QUATERNION
        if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
            return NON_UNIT_QUATERNION
        w, x, y, z = w / norm, x / norm, y / norm, z / norm
        R_GS[0, 0], R_GS[0, 1], R_GS[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
        R_GS[1, 0], R_GS[1, 1], R_GS[1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
        R_GS[2, 0], R_GS[2, 1], R_GS[2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
        has_R = True
    if angular_velocity_present:
        for a in range(3):
            if not math.isfinite(angular_velocity[a]):
                for b in range(9):
                    R_GS[b // 3, b % 3] = np.nan
                return NON_FINITE
        for a in range(3):
            w_S[a] = angular_velocity[a]
    elif not has_R:
        return ORIENTATION_ABSENT
    return ACCEPTED if has_R else ACCEPTED_ORIENTATION_ABSENT


@njit(cache=True, error_model="numpy")
def validate_imus(quaternion_wxyz, angular_velocity, orientation_present, angular_velocity_present, code, R_GS,
                  w_S):
    """:func:`validate_imu` over rows (a window of samples)."""
    for n in range(code.shape[0]):
        code[n] = validate_imu(quaternion_wxyz[n], angular_velocity[n], orientation_present[n],
                               angular_velocity_present[n], R_GS[n], w_S[n])


# ---------------------------------------------------------------------------------------------- memory
@njit(cache=True, inline="always", error_model="numpy")
def reset(state, settings):
    """Forget every input (a clock jump back): nothing heard, encoders at their defaults, a reset pending."""
    state.last_stamp[:] = np.nan
    state.used_R[:] = np.nan
    state.used_w[:] = np.nan
    state.queue_head[:] = 0
    state.queue_count[:] = 0
    state.encoder_q[:] = settings.encoder_default
    state.encoder_v[:] = np.nan
    state.encoder_stamp[:] = -np.inf
    state.have_encoder[:] = False
    clock = state.clock[0]
    clock.stamp_prev = np.nan
    clock.newest = np.nan
    clock.newest_ns = -1
    clock.first = np.nan
    clock.last_clock = np.nan
    clock.js_stamp = np.nan
    _start_waiting(clock, True)
    clock.resets += 1


@njit(cache=True, inline="always", error_model="numpy")
def _start_waiting(clock, after_reset):
    """Nothing unused since the last cycle (or reset); the next cycle is the first after a reset or not."""
    clock.js_fresh = False
    clock.overdue = False
    clock.instant = np.nan
    clock.reset_pending = after_reset


@njit(cache=True, inline="always", error_model="numpy")
def _copy_sample(R_from, w_from, R_to, w_to):
    """R_to[:] = R_from, w_to[:] = w_from, element by element (a slice assignment between arrays allocates a copy
    of its source in numba when it cannot rule out overlap)."""
    for a in range(3):
        w_to[a] = w_from[a]
        for b in range(3):
            R_to[a, b] = R_from[a, b]


@njit(cache=True, inline="always", error_model="numpy")
def _push(state, i, stamp, stamp_ns, R, w):
    """Queue a sample of IMU i (a full queue drops its oldest: overwritten)."""
    clock = state.clock[0]
    if state.queue_count[i] == QUEUE_LENGTH:
        state.queue_head[i] = (state.queue_head[i] + 1) % QUEUE_LENGTH
        state.queue_count[i] -= 1
        clock.overwritten += 1
    k = (state.queue_head[i] + state.queue_count[i]) % QUEUE_LENGTH
    state.queue_stamp[i, k] = stamp
    state.queue_ns[i, k] = stamp_ns
    _copy_sample(R, w, state.queue_R[i, k], state.queue_w[i, k])
    state.queue_count[i] += 1


@njit(cache=True, inline="always", error_model="numpy")
def _pop(state, i, use):
    """Remove IMU i's oldest queued sample; with ``use`` it becomes the sample the cycle holds."""
    k = state.queue_head[i]
    if use:
        _copy_sample(state.queue_R[i, k], state.queue_w[i, k], state.used_R[i], state.used_w[i])
    state.queue_head[i] = (k + 1) % QUEUE_LENGTH
    state.queue_count[i] -= 1


@njit(cache=True, inline="always", error_model="numpy")
def observe_clock(state, settings, now):
    """A receive clock earlier than the last one resets tracking (counted under clock/clock_jump_back)."""
    if math.isnan(now):
        return
    clock = state.clock[0]
    if not math.isnan(clock.last_clock) and now < clock.last_clock:
        state.counts[state.counts.shape[0] - 1, CLOCK_JUMP_BACK] += 1
        reset(state, settings)
    state.clock[0].last_clock = now


@njit(cache=True, inline="always", error_model="numpy")
def _timing(state, settings, stamp, now, last, repeated):
    """The stamp checks (module docstring, Acceptance); returns ACCEPTED or the reason, after the offline jump
    back (which resets, and then nothing is the source's last)."""
    if math.isnan(now) and not math.isnan(last) and math.isfinite(stamp) and stamp < last - settings.jump_reset:
        state.counts[state.counts.shape[0] - 1, CLOCK_JUMP_BACK] += 1
        reset(state, settings)
        return ACCEPTED
    if stamp == INVALID_STAMP:
        return INVALID_STAMP_REASON
    if not math.isfinite(stamp):
        return NON_FINITE
    if not math.isnan(now):
        if stamp > now + settings.future_tolerance:
            return FUTURE_STAMP
        if stamp < now - settings.stale_timeout:
            return STALE_STAMP
    if not math.isnan(last):
        if stamp < last:
            return OUT_OF_ORDER
        if repeated:
            return REPEATED_STAMP
    return ACCEPTED


@njit(cache=True, inline="always", error_model="numpy")
def _note_stamp(clock, stamp, stamp_ns):
    if math.isnan(clock.first):
        clock.first = stamp
    if math.isnan(clock.newest) or stamp > clock.newest:
        clock.newest = stamp
        clock.newest_ns = stamp_ns


@njit(cache=True, inline="always", error_model="numpy")
def _record(state, source, code, status):
    """Count the outcome: a rejection under its reason, a partial acceptance under what was dropped."""
    if status >= 0:
        state.counts[source, status] += 1
    elif code == ACCEPTED_ORIENTATION_ABSENT:
        state.counts[source, ORIENTATION_ABSENT] += 1
    elif code == ACCEPTED_UNKNOWN_NAMES:
        state.counts[source, UNKNOWN_NAME] += 1
    return code if status < 0 else status


# ---------------------------------------------------------------------------------------------- inputs
@njit(cache=True, inline="always", error_model="numpy")
def offer_imu(state, settings, i, stamp, stamp_ns, now, code, R_GS, w_S, input_index, run_cycles, out):
    """Offer one validated sample of IMU i (``code``: validation's status; R_GS / w_S NaN where absent); with
    ``run_cycles`` run the cycles it completes into ``out``. Returns the input's status code."""
    observe_clock(state, settings, now)
    if code >= 0:
        return _record(state, i, code, code)
    last = state.last_stamp[i]
    status = _timing(state, settings, stamp, now, last, stamp == last)
    if status >= 0:
        return _record(state, i, code, status)
    clock = state.clock[0]
    if settings.sync_tolerance > 0.0:
        _push(state, i, stamp, stamp_ns, R_GS, w_S)
    else:
        if (run_cycles and state.queue_count[i] > 0 and state.queue_stamp[i, state.queue_head[i]] < stamp
                and state.queue_stamp[i, state.queue_head[i]] >= clock.newest - settings.stale_timeout):
            clock.flushed += 1  # the unused sample's cycle runs first: a sensor's instants are never mixed
            take_cycle(state, settings, _default_instant(state, settings), -1, input_index, out)
        if state.queue_count[i] > 0:
            clock.overwritten += 1  # replaced unused: some live sensor is late; the next cycle runs without it
            clock.overdue = True
            state.queue_count[i] = 0
        _push(state, i, stamp, stamp_ns, R_GS, w_S)
    state.last_stamp[i] = stamp
    _note_stamp(clock, stamp, stamp_ns)
    if run_cycles:
        run_due_cycles(state, settings, input_index, out)
    return _record(state, i, code, ACCEPTED)


@njit(cache=True, inline="always", error_model="numpy")
def offer_joint_state(state, settings, stamp, stamp_ns, now, code, index, position, velocity, input_index,
                      run_cycles, out):
    """Offer one validated joint-state message (``index`` its articulated coordinates, ``velocity`` NaN = none),
    merged by name; with ``run_cycles`` run the cycles it completes into ``out``. Returns its status code."""
    source = state.counts.shape[0] - 2
    observe_clock(state, settings, now)
    if code >= 0:
        return _record(state, source, code, code)
    last = -np.inf
    repeated = index.shape[0] > 0
    for j in index:
        last = max(last, state.encoder_stamp[j])
        repeated = repeated and state.encoder_stamp[j] == stamp
    if last == -np.inf:
        last = np.nan
    status = _timing(state, settings, stamp, now, last, repeated)
    if status >= 0:
        return _record(state, source, code, status)
    clock = state.clock[0]
    if (run_cycles and settings.sync_joint_states and settings.sync_tolerance == 0.0 and clock.js_fresh
            and clock.js_stamp < stamp and clock.js_stamp >= clock.newest - settings.stale_timeout):
        clock.flushed += 1  # the unused joint state's cycle runs first: instants are never mixed
        take_cycle(state, settings, _default_instant(state, settings), -1, input_index, out)
    for k in range(index.shape[0]):
        j = index[k]
        state.encoder_q[j] = position[k]
        state.encoder_v[j] = velocity[k]
        state.encoder_stamp[j] = stamp
        state.have_encoder[j] = True
    clock.js_fresh = True
    clock.js_stamp = stamp
    _note_stamp(clock, stamp, stamp_ns)
    if run_cycles:
        run_due_cycles(state, settings, input_index, out)
    return _record(state, source, code, ACCEPTED)


# ---------------------------------------------------------------------------------------------- readiness
@njit(cache=True, inline="always", error_model="numpy")
def _waited(state, settings, i):
    """Is IMU i waited for (module docstring, Waited IMUs)?"""
    clock = state.clock[0]
    reference = clock.newest if math.isnan(clock.stamp_prev) else clock.stamp_prev
    if math.isnan(state.last_stamp[i]):
        return not math.isnan(clock.first) and clock.newest < clock.first + settings.stale_timeout
    return state.last_stamp[i] >= reference - settings.stale_timeout


@njit(cache=True, inline="always", error_model="numpy")
def _complete_instant(state, settings):
    """Synchronized mode: set ``instant`` to the oldest instant every waited IMU has a queued sample of; samples
    older than the tolerance before the latest head can never complete one and are discarded. False if none."""
    clock = state.clock[0]
    n_imu = state.last_stamp.shape[0]
    tolerance = settings.sync_tolerance
    any_waited = False
    for _ in range(2 * n_imu + 1):
        instant, instant_ns = -np.inf, -1
        for i in range(n_imu):
            if _waited(state, settings, i):
                any_waited = True
                if state.queue_count[i] == 0:
                    return False
                k = state.queue_head[i]
                if state.queue_stamp[i, k] > instant:
                    instant, instant_ns = state.queue_stamp[i, k], state.queue_ns[i, k]
        if not any_waited:
            return False
        settled = True
        for i in range(n_imu):
            if _waited(state, settings, i):
                while state.queue_count[i] > 0 and state.queue_stamp[i, state.queue_head[i]] < instant - tolerance:
                    _pop(state, i, False)
                    clock.overwritten += 1
                    settled = False
        if settled:
            clock.instant, clock.instant_ns = instant, instant_ns
            return True
    return False


@njit(cache=True, inline="always", error_model="numpy")
def _ready_synchronized(state, settings):
    clock = state.clock[0]
    timeout = settings.stale_timeout
    if not _complete_instant(state, settings):
        # A waited IMU fell silent: the oldest queued instant runs once it has waited stale_timeout.
        oldest, oldest_ns = np.inf, -1
        for i in range(state.last_stamp.shape[0]):
            if state.queue_count[i] > 0 and state.queue_stamp[i, state.queue_head[i]] < oldest:
                oldest, oldest_ns = state.queue_stamp[i, state.queue_head[i]], state.queue_ns[i, state.queue_head[i]]
        if oldest == np.inf or oldest >= clock.newest - timeout:
            return False
        clock.instant, clock.instant_ns = oldest, oldest_ns
    if not settings.sync_joint_states:
        return True
    # Encoders behind the instant (while they arrive) are waited for; encoders ahead are held.
    starting = clock.newest < clock.first + timeout
    if math.isnan(clock.js_stamp):
        return not (starting and settings.measured_count > 0)
    arriving = clock.js_stamp >= clock.newest - timeout
    return not (arriving and clock.js_stamp < clock.instant - settings.sync_tolerance)


@njit(cache=True, inline="always", error_model="numpy")
def _ready_free_running(state, settings):
    clock = state.clock[0]
    timeout = settings.stale_timeout
    if settings.sync_joint_states and not clock.js_fresh:
        reference = clock.newest if math.isnan(clock.stamp_prev) else clock.stamp_prev
        arriving = not math.isnan(clock.js_stamp) and clock.js_stamp >= reference - timeout
        starting = clock.newest < clock.first + timeout
        if arriving or (starting and math.isnan(clock.js_stamp) and settings.measured_count > 0):
            return False
    for i in range(state.last_stamp.shape[0]):
        if _waited(state, settings, i) and not (state.queue_count[i] > 0
                                                and state.last_stamp[i] >= clock.newest - settings.stale_timeout):
            return False
    clock.instant, clock.instant_ns = clock.newest, clock.newest_ns
    return True


@njit(cache=True, inline="always", error_model="numpy")
def ready(state, settings):
    """Should a cycle run now (module docstring)? Sets the record's ``instant`` when it should."""
    clock = state.clock[0]
    if math.isnan(clock.newest):
        return False
    fresh = clock.js_fresh
    for i in range(state.queue_count.shape[0]):
        fresh = fresh or state.queue_count[i] > 0
    if not fresh:
        return False
    if clock.overdue:  # manual mode: a sample replaced an unused one
        clock.instant, clock.instant_ns = clock.newest, clock.newest_ns
        return True
    if settings.sync_tolerance > 0.0:
        return _ready_synchronized(state, settings)
    return _ready_free_running(state, settings)


# ---------------------------------------------------------------------------------------------- cycles
@njit(cache=True, inline="always", error_model="numpy")
def _default_instant(state, settings):
    clock = state.clock[0]
    return clock.newest if math.isnan(clock.instant) else clock.instant


@njit(cache=True, inline="always", error_model="numpy")
def take_cycle(state, settings, stamp, stamp_ns, input_index, out):
    """Run a cycle at ``stamp`` (``stamp_ns`` -1: the newest input's, or round(stamp * 1e9) if another): take its
    samples from the queues and append the cycle to ``out``."""
    clock = state.clock[0]
    n_imu = state.last_stamp.shape[0]
    if stamp_ns < 0:
        if stamp == clock.instant:
            stamp_ns = clock.instant_ns
        elif stamp == clock.newest:
            stamp_ns = clock.newest_ns
        else:
            stamp_ns = np.int64(round(stamp * 1e9))
    for i in range(n_imu):
        if settings.sync_tolerance > 0.0:
            tolerance = settings.sync_tolerance
            while state.queue_count[i] > 0 and state.queue_stamp[i, state.queue_head[i]] < stamp - tolerance:
                _pop(state, i, False)  # older than the instant solved: can no longer be used
                clock.overwritten += 1
            if state.queue_count[i] > 0 and state.queue_stamp[i, state.queue_head[i]] <= stamp + tolerance:
                _pop(state, i, True)
        elif state.queue_count[i] > 0:
            _pop(state, i, True)
    c = out.size[0]
    out.stamp[c] = stamp
    out.stamp_ns[c] = stamp_ns
    out.input[c] = input_index
    out.reset[c] = clock.reset_pending
    out.stamp_prev[c] = clock.stamp_prev
    for i in range(n_imu):
        _copy_sample(state.used_R[i], state.used_w[i], out.R_GS[c, i], out.w_S[c, i])
        out.stale[c, i] = math.isnan(state.last_stamp[i]) or state.last_stamp[i] < stamp - settings.stale_timeout
    for j in range(state.encoder_q.shape[0]):
        out.encoder_q[c, j] = state.encoder_q[j]
        out.encoder_v[c, j] = state.encoder_v[j]
        out.have_encoder[c, j] = state.have_encoder[j]
    out.size[0] = c + 1
    _start_waiting(clock, False)
    clock.stamp_prev = stamp
    clock.cycles += 1


@njit(cache=True, inline="always", error_model="numpy")
def run_due_cycles(state, settings, input_index, out):
    """Every cycle that is ready now (several when queued instants wait), while ``out`` has room."""
    while out.size[0] < out.stamp.shape[0] and ready(state, settings):
        take_cycle(state, settings, state.clock[0].instant, state.clock[0].instant_ns, input_index, out)


WindowInputs = namedtuple("WindowInputs", [
    "kind", "row", "now", "stamp_ns", "imu_sensor", "imu_stamp", "imu_code", "imu_R_GS", "imu_w_S",
    "js_stamp", "js_code", "js_offsets", "js_index", "js_position", "js_velocity",
])
WindowInputs.__doc__ = """A window of validated inputs in offering order: ``kind`` (M,) 0 = IMU sample, 1 = joint
state; ``row`` its row in the IMU arrays or joint-state index; ``now`` (M,) receive clock (NaN: none); ``stamp_ns``
(M,); per IMU sample its sensor, stamp, validation code, R_GS (3, 3) and w_S (3,) (NaN = absent); per joint state
its stamp, code and its coordinates' CSR slice (``js_offsets``) of indices, positions and velocities."""


@njit(cache=True, error_model="numpy")
def schedule(state, settings, inputs, out, status):
    """Offer every input of the window in order (:func:`offer_imu` / :func:`offer_joint_state`), running the
    cycles they complete into ``out``; ``status`` (M,) receives each input's status code."""
    # The window's arrays taken out of their record once (an access per input costs a reference count each).
    kind, row, now, stamp_ns = inputs.kind, inputs.row, inputs.now, inputs.stamp_ns
    imu_sensor, imu_stamp, imu_code, imu_R_GS, imu_w_S = (inputs.imu_sensor, inputs.imu_stamp, inputs.imu_code,
                                                          inputs.imu_R_GS, inputs.imu_w_S)
    js_stamp, js_code, js_offsets = inputs.js_stamp, inputs.js_code, inputs.js_offsets
    js_index, js_position, js_velocity = inputs.js_index, inputs.js_position, inputs.js_velocity
    for e in range(kind.shape[0]):
        r = row[e]
        if kind[e] == 0:
            status[e] = offer_imu(state, settings, imu_sensor[r], imu_stamp[r], stamp_ns[e], now[e], imu_code[r],
                                  imu_R_GS[r], imu_w_S[r], e, True, out)
        else:
            a, b = js_offsets[r], js_offsets[r + 1]
            status[e] = offer_joint_state(state, settings, js_stamp[r], stamp_ns[e], now[e], js_code[r],
                                          js_index[a:b], js_position[a:b], js_velocity[a:b], e, True, out)
