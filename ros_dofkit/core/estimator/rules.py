"""The estimator's cycle rules, compiled: which input is kept, when a cycle runs, and with which samples.

You are in the ROS-free estimator core; this module imports NumPy, numba and the reject reasons of ``inputs``.
It exists so that the rules are written once: the streaming
:class:`~ros_dofkit.core.estimator.estimator.Estimator` offers each message to :func:`offer_imu` /
:func:`offer_joint_state` (the node's path), and offline replay offers a window of inputs to :func:`schedule`,
which calls the same two functions, over one :class:`RulesState`. Streaming and
offline cycles are therefore the same bits. The state is named: numpy record arrays (:data:`CLOCK` for the scalars,
:data:`IMU`, :data:`SAMPLE` and :data:`ENCODER` per IMU, queued sample and coordinate) in a :class:`RulesState`.

The rules (DESIGN.md's data flow; ``now`` NaN = no receive clock, as offline):

* **Receive clock.** A ``now`` earlier than the last one (a looping bag under sim time) resets tracking.
* **Time offsets.** Each source's stamp (integer nanoseconds) is first moved back by its configured offset
  (``stamp' = stamp - offset``: a sensor's delay between measuring and stamping); every rule below sees stamp'.
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
* **Free-running** (``sync_tolerance_s`` = 0), one instant, one cycle, on an instant grid. Each IMU queues its
  samples; its period p_i is the running mean of the intervals between its stamps since the last reset
  (:func:`_next_period`). Queued samples not after the last cycle's stamp belong to an instant that ran without
  them: they are dropped, counted in ``overwritten_samples``. The instants are the points g_k = reference + k P of
  a grid laid through the IMUs' stamps, so a stamp error takes a sample out of its instant only past P / 2 (a
  window opened at the instant's oldest stamp, as before, split instants from errors of P / 4 on).

  - *The pending instant* is the grid point g nearest the oldest queued stamp o (at least one step after the last
    reference). IMU i's sample of it is its oldest queued one if stamped before g + P / 2 (nearer g than the next
    grid point, so a slower IMU pairs with the nearest instant); a later one means i missed it.
  - *It is decided* when, for every waited IMU: it has a queued sample; or its next sample is due nearer a later
    grid point (last stamp + p_i >= g + P / 2: its sample of g was used already, or it is slower); or an input
    stamped at or after o + ``stale_timeout_s`` arrived (bounded wait, in input stamps, counted in
    ``flushed_cycles``: i fell silent, or its messages are held up behind a burst of another topic longer than
    that). The cycle takes the instant's samples, runs at the newest of their stamps, and later samples stay
    queued.
  - *The grid* follows the stamps: after each cycle, the mean offset r from g of its samples within P / 2 of g
    sets the reference to g + a r and P to P + b r / s (s grid steps since the last reference), an alpha-beta
    filter whose gains are a least-squares line's through the j references so far (a = 2 (2j - 1) / (j (j + 1)),
    b = 6 / (j (j + 1))) down to :data:`PHASE_GAIN` and :data:`PERIOD_GAIN`: the grid averages the stamp errors
    of many instants, and a sample of instant k is in it while its stamp error plus the grid's is under P / 2.
  - *While it starts* (the first :data:`GRID_START` instants after a reset) the grid does not choose: every waited
    IMU is waited for (bounded as above), and the instant's window ends :data:`START_WINDOW` times the IMUs'
    median period after the lower median of their oldest queued stamps (a dropout's next sample, a period later,
    stays out, but only for stamp errors under P (1 - START_WINDOW) / 2; an IMU that missed the very first
    instant joins it with its next sample, no period being known yet). The filter takes the mean of the
    instant's stamps as its reference, one step after the last (an instant within half that period of the last
    is a split one: not taken), so the grid starts as the least-squares line through the first instants.

  So samples of one instant make one cycle whatever their arrival order while every delay is under
  ``stale_timeout_s``, and stamp errors within +-0.35 P keep every sample in its instant (benchmarks/instant_grid.py,
  120 instants of 4 IMUs: one cycle per instant in 40 of 40 trials, exactly the instant's samples in 39; the
  window at the oldest stamp: 0 of 40 from +-0.25 P on). Normal errors pass P / 2 now and then (4.6 % of samples at
  std 0.25 P): such a sample joins the nearer instant (one cycle per instant in 40, 37, 32 of 40 trials at std
  0.15, 0.2, 0.25 P). A dropout only leaves its IMU out of that instant, and an IMU that falls silent holds the
  cycles up once, for ``stale_timeout_s``. Without queued IMU samples a cycle runs at the newest stamp when no IMU
  is waited.
* **Synchronized** (``sync_tolerance_s`` > 0): a cycle runs for the oldest instant every waited IMU has a queued
  sample of (stamps within the tolerance); older samples are discarded (``overwritten_samples``); when a waited
  IMU falls silent, the oldest queued instant runs once it has waited ``stale_timeout_s``.
* **sync_joint_states**: the joint-state stream is waited for too while it arrives; in free-running mode a joint
  state that would replace an unused one first runs that cycle.
* **Odometry** (a base's pose from ``nav_msgs/Odometry``, :func:`offer_odometry`): accepted like the other inputs,
  kept in a short memory, and matched to each cycle: the newest sample stamped at or before the cycle's stamp and
  within ``stale_timeout_s`` of it (``odometry_input.match``), else none (the base holds; the cycle marks the
  odometry stale). It never runs a cycle and never stamps one.
* **Manual mode** (``run_cycles`` False: ``Estimator.add_imu`` / ``step``): no cycle runs by itself; a new sample
  replaces an unused one (counted in ``overwritten_samples``) and makes the next :func:`ready` true.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

# numba keys its cache of these kernels on this file's text alone: the helpers inlined from odometry_input and
# inputs are compiled into them, so a change there is seen only once this file changes too (or the cache is cleared).
from ros_dofkit.core.estimator import odometry_input
from ros_dofkit.core.estimator.inputs import (
    COVARIANCE_OK,
    INVALID_STAMP,
    QUATERNION_OK,
    RejectReason,
    orientation_variance,
    quaternion_check,
)

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
    # Free-running, the instant grid (module docstring): the pending instant's samples are the IMUs' oldest queued
    # ones stamped before ``window_end`` (+inf: any); ``predicted`` its grid point (NaN: the grid is starting).
    ("window_end", np.float64), ("predicted", np.float64),
    ("reference", np.float64),  # the last instant's reference time on the grid (NaN: none since the last reset)
    ("spacing", np.float64),  # the grid's period (NaN: unknown)
    ("start_period", np.float64),  # while the grid starts, the IMUs' median period (NaN: unknown)
    ("references", np.int64),  # instants referenced since the last reset
    ("cycles", np.int64), ("resets", np.int64), ("overwritten", np.int64), ("flushed", np.int64),
], align=True)

#: One IMU sample as the rules carry it: validated (``validate_imu``), queued, held by the cycle that uses it
#: (``Cycles.sample``). The rules copy whole records, so a field added here travels with its sample; give it its
#: "absent" value in :func:`_clear_sample`.
SAMPLE = np.dtype([
    ("stamp", np.float64), ("stamp_ns", np.int64),  # the sample's stamp (s, and as given in ns; NaN / -1: none)
    ("R_GS", np.float64, (3, 3)),  # orientation of the sensor frame S in the IMU's world G (NaN: absent)
    ("w_S", np.float64, (3,)),  # angular velocity of S, in S, rad/s (NaN: absent)
    ("f_S", np.float64, (3,)),  # specific force (accelerometer) in S, m/s^2 (NaN: absent; filled by the caller)
    ("R_var", np.float64),  # the orientation's mean per-axis variance trace(Σ)/3, rad^2 (NaN: unknown or not read)
], align=True)

#: Per IMU: the newest accepted stamp and the ring queue's bookkeeping.
IMU = np.dtype([
    ("last_stamp", np.float64),  # newest accepted stamp (NaN: none since the last reset)
    ("period", np.float64),  # running mean of its stamp intervals since the last reset (NaN: none)
    ("head", np.int64), ("count", np.int64),  # the queue's oldest unused slot, and how many are unused
    ("offset_ns", np.int64),  # the IMU's time offset, subtracted from its stamps (kept across resets)
], align=True)

#: Per articulated coordinate: the merged encoder value (a joint-state message sets the coordinates it names).
ENCODER = np.dtype([
    ("q", np.float64), ("v", np.float64),  # position, rate (NaN: none)
    ("stamp", np.float64),  # the stamp of the message that set it (-inf: none)
    ("have", np.bool_),  # an encoder reported it (else q is ``default``)
    ("default", np.float64),  # the coordinate's value before any encoder reports it (the plant's default)
], align=True)

#: Per cycle: when it ran and what started it.
CYCLE = np.dtype([
    ("stamp", np.float64), ("stamp_ns", np.int64),  # the cycle's stamp (s, and ns)
    ("input", np.int64),  # the input whose offering ran it (-1: a message or step())
    ("reset", np.bool_),  # the first cycle after a start or reset
    ("stamp_prev", np.float64),  # the previous cycle's stamp (NaN: none)
], align=True)

RulesSettings = namedtuple("RulesSettings", [
    "stale_timeout", "jump_reset", "future_tolerance", "sync_tolerance", "sync_joint_states", "measured_count",
    "js_offset_ns", "odometry_offset_ns",
])
RulesSettings.__doc__ = """The configuration the rules read (seconds; ``measured_count`` the number of measured
coordinates; the joint states' and the odometry's time offsets in integer nanoseconds, an IMU's is in its
:data:`IMU` record). Scalars only: numba reference-counts every array of a tuple at each compiled call or inlined helper
that receives it, and the settings go everywhere."""

RulesState = namedtuple("RulesState", ["clock", "imu", "used", "queue", "encoder", "counts", "odometry"])
RulesState.__doc__ = """The rules' memory, record arrays: ``clock`` (1,) :data:`CLOCK`; ``imu`` (n_imu,)
:data:`IMU`; ``used`` (n_imu,) :data:`SAMPLE` the sample of each IMU the next cycle holds if it takes none (NaN =
absent); ``queue`` (n_imu, :data:`QUEUE_LENGTH`) :data:`SAMPLE` each IMU's ring of unused samples (oldest at its
``head``); ``encoder`` (n_art,) :data:`ENCODER`; ``counts`` (n_imu + 2, len(REASONS)) rejects by source (IMUs, then
joint_states, then clock) and reason; ``odometry`` (1,) ``odometry_input.MEMORY`` (its rejects counted there).
Few arrays on purpose: a compiled function reference-counts each array it
reads out of the record, while fields of a record element cost nothing."""

Cycles = namedtuple("Cycles", ["cycle", "sample", "stale", "encoder", "odometry", "size"])
Cycles.__doc__ = """Cycles the rules ran, first ``size[0]`` rows: ``cycle`` (C,) :data:`CYCLE`; ``sample`` (C, n_imu)
:data:`SAMPLE` the sample of each IMU the cycle used (NaN = none); ``stale`` (C, n_imu) bool; ``encoder`` (C, n_art)
:data:`ENCODER` the encoder values locked; ``odometry`` (C,) ``odometry_input.MATCH`` the base coordinates the
odometry gave the cycle (NaN: none matched, the base holds)."""


def new_state(n_imu: int, settings: RulesSettings, encoder_default, imu_offset_ns=None) -> RulesState:
    """The memory before any input (nothing heard, encoders at ``encoder_default`` (n_art,), a reset pending);
    ``imu_offset_ns`` (n_imu,) the IMUs' time offsets (default none)."""
    encoder = np.zeros(len(encoder_default), dtype=ENCODER)
    encoder["default"] = encoder_default
    imu = np.zeros(n_imu, dtype=IMU)
    if imu_offset_ns is not None:
        imu["offset_ns"] = imu_offset_ns
    state = RulesState(
        clock=np.zeros(1, dtype=CLOCK), imu=imu, used=np.zeros(n_imu, dtype=SAMPLE),
        queue=np.zeros((n_imu, QUEUE_LENGTH), dtype=SAMPLE), encoder=encoder,
        counts=np.zeros((n_imu + 2, len(REASONS)), dtype=np.int64), odometry=odometry_input.new_memory())
    reset(state, settings)
    state.clock["resets"][0] = 0
    return state


def new_cycles(capacity: int, n_imu: int, n_art: int) -> Cycles:
    """A buffer for ``capacity`` cycles (see :func:`cycle_capacity`)."""
    return Cycles(cycle=np.empty(capacity, dtype=CYCLE), sample=np.empty((capacity, n_imu), dtype=SAMPLE),
                  stale=np.empty((capacity, n_imu), dtype=np.bool_), encoder=np.empty((capacity, n_art), dtype=ENCODER),
                  odometry=np.empty(capacity, dtype=odometry_input.MATCH), size=np.zeros(1, dtype=np.int64))


def cycle_capacity(num_inputs: int, n_imu: int) -> int:
    """Most cycles ``num_inputs`` offers can run: each input at most two (a flush, then its own), plus one per
    sample already queued (synchronized mode releases queued instants) and one more."""
    return 2 * num_inputs + 1 + n_imu * QUEUE_LENGTH


# Why the state is a few record arrays and the settings scalars only: numba reference-counts (an atomic add and a
# call) every array it reads out of a tuple and every array a compiled call or an inlined helper receives, while a
# record element (``state.clock[0]``, ``imu[i]``, ``queue[i, k]``) is a bare pointer. With 15 state arrays, 12 cycle
# arrays and an array in the settings, ``schedule`` took 2.9x as long as with this layout (issue 16). So the entry
# points read the arrays once and the small helpers (``inline="always"``) take record elements, arrays and scalars.
# Why the compiled functions are built without numba's reference counting (``_nrt=False``, numba's underscored
# target option for its runtime; these kernels allocate nothing, and the arrays they see are held by their Python
# caller during the call): with it, NRT_incref / NRT_decref took 63 % of ``schedule``'s samples (perf, replay_speed's
# bag); without it ``schedule`` took 7.4 -> 4.1 ms for that bag. Inlining ``offer_imu`` too (its call passed the
# state's and the cycles' arrays, ~100 words, per IMU sample) -> 1.7-2.2 ms, and its first compile took 8.5 s CPU
# instead of 11.5 s. The other entry points stay separate compiled functions: inlining ``ready``, ``take_cycle`` and
# ``offer_joint_state`` as well gave 0.8 ms but compiled in 40 s.
# ---------------------------------------------------------------------------------------------- validation
@njit(cache=True, inline="always", error_model="numpy")
def validate_imu(quaternion_wxyz, angular_velocity, orientation_present, angular_velocity_present, covariance,
                 samples, row):
    """``inputs.parse_imu``'s decision for one sample, compiled (the same bits live and offline): fills
    ``samples[row]``'s R_GS (the normalized quaternion's matrix), w_S and R_var (``inputs.orientation_variance``
    of ``covariance``, the message's orientation_covariance (9,), or (0,) when not read), NaN where absent, and
    returns its status code (the stamp fields are the caller's). A present orientation whose covariance
    ``orientation_variance`` refuses rejects the sample (``bad_covariance``). A non-finite, zero or non-unit (beyond
    ``QUAT_NORM_TOLERANCE``) quaternion (``inputs.quaternion_check``, shared with ``parse_imu`` and the odometry)
    or a non-finite gyro rejects the sample; one with neither field present is dropped as ``orientation_absent``;
    one with a gyro only is kept, counted as such."""
    R_GS = samples[row].R_GS
    w_S = samples[row].w_S
    samples[row].R_var = np.nan
    for a in range(3):
        w_S[a] = np.nan
        samples[row].f_S[a] = np.nan
        for b in range(3):
            R_GS[a, b] = np.nan
    has_R = False
    if orientation_present:
        w, x, y, z = quaternion_wxyz[0], quaternion_wxyz[1], quaternion_wxyz[2], quaternion_wxyz[3]
        quaternion, norm = quaternion_check(w, x, y, z)  # the one quaternion rule of every input
        if quaternion != QUATERNION_OK:
            return quaternion
        w, x, y, z = w / norm, x / norm, y / norm, z / norm
        R_GS[0, 0], R_GS[0, 1], R_GS[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
        R_GS[1, 0], R_GS[1, 1], R_GS[1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
        R_GS[2, 0], R_GS[2, 1], R_GS[2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
        has_R = True
        covariance_code, samples[row].R_var = orientation_variance(covariance)
        if covariance_code != COVARIANCE_OK:
            for b in range(9):
                R_GS[b // 3, b % 3] = np.nan
            return covariance_code
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


@njit(cache=True, error_model="numpy", _nrt=False)
def validate_imus(quaternion_wxyz, angular_velocity, orientation_present, angular_velocity_present, covariance, code,
                  samples):
    """:func:`validate_imu` over rows (a window of samples) into ``samples`` (the stamps are the caller's);
    ``covariance`` (n, 9), or (n, 0) when not read."""
    for n in range(code.shape[0]):
        code[n] = validate_imu(quaternion_wxyz[n], angular_velocity[n], orientation_present[n],
                               angular_velocity_present[n], covariance[n], samples, n)


# ---------------------------------------------------------------------------------------------- memory
@njit(cache=True, inline="always", error_model="numpy")
def _clear_sample(sample):
    """No sample: every field at its "absent" value."""
    sample.stamp = np.nan
    sample.stamp_ns = -1
    sample.R_var = np.nan
    for a in range(3):
        sample.w_S[a] = np.nan
        sample.f_S[a] = np.nan
        for b in range(3):
            sample.R_GS[a, b] = np.nan


@njit(cache=True, error_model="numpy", _nrt=False)
def reset(state, settings):
    """Forget every input (a clock jump back): nothing heard, encoders at their defaults, a reset pending."""
    imu, used, encoder = state.imu, state.used, state.encoder
    for i in range(imu.shape[0]):
        imu[i].last_stamp = np.nan
        imu[i].period = np.nan
        imu[i].head = 0
        imu[i].count = 0
        _clear_sample(used[i])
    for j in range(encoder.shape[0]):
        encoder[j].q = encoder[j].default
        encoder[j].v = np.nan
        encoder[j].stamp = -np.inf
        encoder[j].have = False
    clock = state.clock[0]
    clock.stamp_prev = np.nan
    clock.newest = np.nan
    clock.newest_ns = -1
    clock.first = np.nan
    clock.last_clock = np.nan
    clock.js_stamp = np.nan
    clock.reference = np.nan
    clock.spacing = np.nan
    clock.start_period = np.nan
    clock.references = 0
    odometry_input.forget(state.odometry[0])
    _start_waiting(clock, True)
    clock.resets += 1


@njit(cache=True, inline="always", error_model="numpy")
def _start_waiting(clock, after_reset):
    """Nothing unused since the last cycle (or reset); the next cycle is the first after a reset or not."""
    clock.js_fresh = False
    clock.overdue = False
    clock.instant = np.nan
    clock.window_end = np.inf
    clock.predicted = np.nan
    clock.reset_pending = after_reset


@njit(cache=True, inline="always", error_model="numpy")
def _push(clock, imu, queue, i, samples, row):
    """Queue ``samples[row]`` for IMU i (a full queue drops its oldest: overwritten)."""
    memory = imu[i]
    if memory.count == QUEUE_LENGTH:
        memory.head = (memory.head + 1) % QUEUE_LENGTH
        memory.count -= 1
        clock.overwritten += 1
    queue[i, (memory.head + memory.count) % QUEUE_LENGTH] = samples[row]
    memory.count += 1


@njit(cache=True, inline="always", error_model="numpy")
def _pop(imu, used, queue, i, use):
    """Remove IMU i's oldest queued sample; with ``use`` it becomes the sample the cycle holds."""
    memory = imu[i]
    if use:
        used[i] = queue[i, memory.head]
    memory.head = (memory.head + 1) % QUEUE_LENGTH
    memory.count -= 1


@njit(cache=True, inline="always", error_model="numpy")
def _oldest_stamp(imu, queue, i):
    """The stamp of IMU i's oldest queued sample (+inf: none queued)."""
    return queue[i, imu[i].head].stamp if imu[i].count > 0 else np.inf


@njit(cache=True, error_model="numpy", _nrt=False)
def observe_clock(state, settings, now):
    """A receive clock earlier than the last one resets tracking (counted under clock/clock_jump_back)."""
    clock = state.clock[0]
    if _runs_back(clock, now):
        _jump_back(state, settings)
    _note_clock(clock, now)


@njit(cache=True, inline="always", error_model="numpy")
def _runs_back(clock, now):
    """Is the receive clock ``now`` earlier than the last one (a looping bag under sim time)?"""
    return not math.isnan(now) and not math.isnan(clock.last_clock) and now < clock.last_clock


@njit(cache=True, inline="always", error_model="numpy")
def _note_clock(clock, now):
    if not math.isnan(now):
        clock.last_clock = now


@njit(cache=True, error_model="numpy", _nrt=False)
def _jump_back(state, settings):
    """A clock or stamp jump back: counted under clock/clock_jump_back, then :func:`reset`."""
    state.counts[state.counts.shape[0] - 1, CLOCK_JUMP_BACK] += 1
    reset(state, settings)


#: :func:`_timing`'s code for an offline stamp jump back (the input is accepted after a reset).
_JUMPED_BACK = -4


@njit(cache=True, inline="always", error_model="numpy")
def _timing(settings, stamp, now, last, repeated):
    """The stamp checks (module docstring, Acceptance): ACCEPTED, the reason, or _JUMPED_BACK (offline, a stamp
    more than ``jump_reset`` before the source's last: the caller resets and accepts it)."""
    if math.isnan(now) and not math.isnan(last) and math.isfinite(stamp) and stamp < last - settings.jump_reset:
        return _JUMPED_BACK
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
def _shifted(stamp, stamp_ns, offset_ns):
    """``(stamp', stamp_ns')`` = the stamp minus the source's time offset, in integer nanoseconds then seconds (the
    same bits whichever path offers it); a stamp that is no finite time is left to the checks."""
    if offset_ns == 0 or not math.isfinite(stamp):
        return stamp, stamp_ns
    shifted = stamp_ns - offset_ns
    return shifted * 1e-9, shifted


@njit(cache=True, inline="always", error_model="numpy")
def _record(counts, source, code, status):
    """Count the outcome: a rejection under its reason, a partial acceptance under what was dropped."""
    if status >= 0:
        counts[source, status] += 1
    elif code == ACCEPTED_ORIENTATION_ABSENT:
        counts[source, ORIENTATION_ABSENT] += 1
    elif code == ACCEPTED_UNKNOWN_NAMES:
        counts[source, UNKNOWN_NAME] += 1
    return code if status < 0 else status


# ---------------------------------------------------------------------------------------------- inputs
@njit(cache=True, inline="always", error_model="numpy", _nrt=False)
def offer_imu(state, settings, i, now, code, samples, row, input_index, run_cycles, out):
    """Offer one validated sample of IMU i, ``samples[row]`` (:data:`SAMPLE`; ``code``: validation's status);
    with ``run_cycles`` run the cycles it completes into ``out``. Returns the input's status code."""
    clock, imu, queue, counts = state.clock[0], state.imu, state.queue, state.counts
    if _runs_back(clock, now):
        _jump_back(state, settings)
    _note_clock(clock, now)
    if code >= 0:
        return _record(counts, i, code, code)
    sample = samples[row]
    sample.stamp, sample.stamp_ns = _shifted(sample.stamp, sample.stamp_ns, imu[i].offset_ns)
    stamp = sample.stamp
    last = imu[i].last_stamp
    status = _timing(settings, stamp, now, last, stamp == last)
    if status == _JUMPED_BACK:
        _jump_back(state, settings)
    elif status >= 0:
        return _record(counts, i, code, status)
    if settings.sync_tolerance == 0.0 and not run_cycles and imu[i].count > 0:
        clock.overwritten += 1  # manual mode: replaced unused; the next ready() is true
        clock.overdue = True
        imu[i].count = 0
    _push(clock, imu, queue, i, samples, row)
    if not math.isnan(last) and stamp > last:
        imu[i].period = _next_period(imu[i].period, stamp - last)
    imu[i].last_stamp = stamp
    _note_stamp(clock, stamp, samples[row].stamp_ns)
    if run_cycles:
        run_due_cycles(state, settings, input_index, out)
    return _record(counts, i, code, ACCEPTED)


#: An IMU reading as :func:`offer_imu_reading` takes it: 37 float64 in ``sensor_msgs/Imu``'s field order (REP-145),
#: orientation (x, y, z, w), its covariance (9, row-major; [0] == -1: absent), angular velocity (rad/s, sensor frame),
#: its covariance ([0] == -1: absent), linear acceleration, its covariance. The node reads it from the message's bytes.
READING = {"orientation_xyzw": slice(0, 4), "orientation_covariance": slice(4, 13), "angular_velocity": slice(13, 16),
           "angular_velocity_covariance": slice(16, 25), "linear_acceleration": slice(25, 28),
           "linear_acceleration_covariance": slice(28, 37)}
READING_SIZE = READING["linear_acceleration_covariance"].stop


@njit(cache=True, error_model="numpy", _nrt=False)
def offer_imu_reading(state, settings, i, now, stamp, stamp_ns, reading, samples, out, quaternion_wxyz,
                      angular_velocity, no_covariance):
    """``Estimator.process_imu``'s rules for one reading (:data:`READING`) of IMU i stamped ``stamp`` (s;
    ``stamp_ns`` as ``Estimator`` derives it): the quaternion reordered to (w, x, y, z) and the gyro into the
    workspaces ``quaternion_wxyz`` (4,) and ``angular_velocity`` (3,), the presence flags from the covariances' first
    entries, :func:`validate_imu` into ``samples[0]`` (the orientation covariance not read: ``no_covariance`` (0,)),
    then :func:`offer_imu` with its cycles into ``out`` (emptied first). Returns (the rules' status code, validation's
    code). The live node's offer (``Estimator.process_imu_reading``): one compiled call a message instead of the two
    with the arrays and Python between them (~5.1 -> ~4.6 us a message with its decoding, back to back); here, not in
    the estimator's stream module, so that numba's cache of it follows this file's rules it inlines."""
    quaternion_wxyz[0] = reading[3]
    for a in range(3):
        quaternion_wxyz[a + 1] = reading[a]
        angular_velocity[a] = reading[13 + a]
    sample = samples[0]
    sample.stamp = stamp
    sample.stamp_ns = stamp_ns
    code = validate_imu(quaternion_wxyz, angular_velocity, reading[4] != -1.0, reading[16] != -1.0, no_covariance,
                        samples, 0)
    out.size[0] = 0
    return offer_imu(state, settings, i, now, code, samples, 0, -1, True, out), code


@njit(cache=True, error_model="numpy", _nrt=False)
def offer_joint_state(state, settings, stamp, stamp_ns, now, code, index, position, velocity, input_index,
                      run_cycles, out):
    """Offer one validated joint-state message (``index`` its articulated coordinates, ``velocity`` NaN = none),
    merged by name; with ``run_cycles`` run the cycles it completes into ``out``. Returns its status code."""
    clock, encoder, counts = state.clock[0], state.encoder, state.counts
    source = counts.shape[0] - 2
    if _runs_back(clock, now):
        _jump_back(state, settings)
    _note_clock(clock, now)
    if code >= 0:
        return _record(counts, source, code, code)
    stamp, stamp_ns = _shifted(stamp, stamp_ns, settings.js_offset_ns)
    last = -np.inf
    repeated = index.shape[0] > 0
    for j in index:
        last = max(last, encoder[j].stamp)
        repeated = repeated and encoder[j].stamp == stamp
    if last == -np.inf:
        last = np.nan
    status = _timing(settings, stamp, now, last, repeated)
    if status == _JUMPED_BACK:
        _jump_back(state, settings)
    elif status >= 0:
        return _record(counts, source, code, status)
    if (run_cycles and settings.sync_joint_states and settings.sync_tolerance == 0.0 and clock.js_fresh
            and clock.js_stamp < stamp and clock.js_stamp >= clock.newest - settings.stale_timeout):
        clock.flushed += 1  # the unused joint state's cycle runs first: instants are never mixed
        take_cycle(state, settings, _default_instant(clock), -1, input_index, out)
    for k in range(index.shape[0]):
        value = encoder[index[k]]
        value.q = position[k]
        value.v = velocity[k]
        value.stamp = stamp
        value.have = True
    clock.js_fresh = True
    clock.js_stamp = stamp
    _note_stamp(clock, stamp, stamp_ns)
    if run_cycles:
        run_due_cycles(state, settings, input_index, out)
    return _record(counts, source, code, ACCEPTED)


@njit(cache=True, error_model="numpy", _nrt=False)
def offer_odometry(state, settings, stamp, stamp_ns, now, code, values):
    """Offer one validated odometry pose (``code``: ``odometry_input.validate_odometry``'s status; ``values`` its
    base coordinates): the stamp checks of every input (module docstring, Acceptance, after the source's time
    offset), then kept for :func:`take_cycle`'s match. It runs no cycle (the IMUs and encoders do) and does not
    move the newest input stamp (a cycle is never stamped by odometry). Returns its status code."""
    clock = state.clock[0]
    if _runs_back(clock, now):
        _jump_back(state, settings)
    _note_clock(clock, now)
    memory = state.odometry[0]
    if code >= 0:
        memory.counts[code] += 1
        return code
    stamp, stamp_ns = _shifted(stamp, stamp_ns, settings.odometry_offset_ns)
    last = memory.last_stamp
    status = _timing(settings, stamp, now, last, stamp == last)
    if status == _JUMPED_BACK:
        _jump_back(state, settings)
    elif status >= 0:
        memory.counts[status] += 1
        return status
    odometry_input.remember(memory, stamp, values)
    return ACCEPTED


# ---------------------------------------------------------------------------------------------- readiness
@njit(cache=True, inline="always", error_model="numpy")
def _waited(clock, imu, settings, i):
    """Is IMU i waited for (module docstring, Waited IMUs)?"""
    reference = clock.newest if math.isnan(clock.stamp_prev) else clock.stamp_prev
    last = imu[i].last_stamp
    if math.isnan(last):
        return not math.isnan(clock.first) and clock.newest < clock.first + settings.stale_timeout
    return last >= reference - settings.stale_timeout


@njit(cache=True, error_model="numpy", _nrt=False)
def _complete_instant(clock, imu, used, queue, settings):
    """Synchronized mode: set ``instant`` to the oldest instant every waited IMU has a queued sample of; samples
    older than the tolerance before the latest head can never complete one and are discarded. False if none."""
    n_imu = imu.shape[0]
    tolerance = settings.sync_tolerance
    any_waited = False
    for _ in range(2 * n_imu + 1):
        instant, instant_ns = -np.inf, -1
        for i in range(n_imu):
            if _waited(clock, imu, settings, i):
                any_waited = True
                if imu[i].count == 0:
                    return False
                head = queue[i, imu[i].head]
                if head.stamp > instant:
                    instant, instant_ns = head.stamp, head.stamp_ns
        if not any_waited:
            return False
        settled = True
        for i in range(n_imu):
            if _waited(clock, imu, settings, i):
                while _oldest_stamp(imu, queue, i) < instant - tolerance:
                    _pop(imu, used, queue, i, False)
                    clock.overwritten += 1
                    settled = False
        if settled:
            clock.instant, clock.instant_ns = instant, instant_ns
            return True
    return False


@njit(cache=True, error_model="numpy", _nrt=False)
def _ready_synchronized(clock, imu, used, queue, settings):
    timeout = settings.stale_timeout
    if not _complete_instant(clock, imu, used, queue, settings):
        # A waited IMU fell silent: the oldest queued instant runs once it has waited stale_timeout.
        oldest, oldest_ns = np.inf, -1
        for i in range(imu.shape[0]):
            if _oldest_stamp(imu, queue, i) < oldest:
                head = queue[i, imu[i].head]
                oldest, oldest_ns = head.stamp, head.stamp_ns
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
def _next_period(period, interval):
    """An IMU's period after one more stamp interval: the first interval, then a running mean of the intervals
    that follows a shorter one with weight 1/2 and a longer one with weight 1/8, capped at twice the period (a
    dropout's double interval barely moves it). Not the shortest interval: with stamp jitter (0.5 ms at 400 Hz)
    the shortest interval is a fraction of the period, and half of it split about one instant in five into two
    cycles on benchmarks/replay_speed.py's bag (4,876 cycles for 4,001 instants)."""
    if math.isnan(period):
        return interval
    if interval < period:  # down fast: an early overestimate (a first interval across a dropout) must not last
        return period + (interval - period) / 2.0
    return period + (min(interval, 2.0 * period) - period) / 8.0


#: Free-running instant grid (module docstring): instants referenced before the grid predicts them, the start-up
#: window (in IMU periods past the candidates' lower median), and the gains' floors (phase, period).
GRID_START = 8
START_WINDOW = 0.75
PHASE_GAIN = 1.0 / 8.0
PERIOD_GAIN = 1.0 / 128.0


@njit(cache=True, inline="always", error_model="numpy")
def _grid_point(clock, oldest):
    """The grid point nearest ``oldest`` and at least one step after the last reference (NaN while starting)."""
    if clock.references < GRID_START or not clock.spacing > 0.0 or oldest == np.inf:
        return np.nan
    steps = max(1.0, round((oldest - clock.reference) / clock.spacing))
    return clock.reference + steps * clock.spacing


@njit(cache=True, inline="always", error_model="numpy")
def _start_value(imu, queue, i, stamps):
    """IMU i's oldest queued stamp (``stamps``) or its known period; NaN: none."""
    if stamps:
        return queue[i, imu[i].head].stamp if imu[i].count > 0 else np.nan
    return imu[i].period if imu[i].period > 0.0 else np.nan


@njit(cache=True, error_model="numpy", _nrt=False)
def _start_median(imu, queue, stamps, upper):
    """The median of the IMUs' :func:`_start_value` (of an even count the upper one with ``upper``, else the
    lower; NaN: none): the value with as many below it as the median's place, counted (the rules allocate
    nothing: n_imu is small, and a sort needs a buffer)."""
    n_imu = imu.shape[0]
    m = 0
    for i in range(n_imu):
        if not math.isnan(_start_value(imu, queue, i, stamps)):
            m += 1
    place = m // 2 if upper else (m - 1) // 2
    for i in range(n_imu):
        value = _start_value(imu, queue, i, stamps)
        if math.isnan(value):
            continue
        below, equal = 0, 0
        for j in range(n_imu):
            other = _start_value(imu, queue, j, stamps)
            if other < value:
                below += 1
            elif other == value:
                equal += 1
        if below <= place < below + equal:
            return value
    return np.nan


@njit(cache=True, inline="always", error_model="numpy")
def _start_window(clock, imu, queue):
    """While the grid is starting: the end of the pending instant's window, START_WINDOW IMU periods (their
    median; the window is unbounded while no period is known) past the lower median of the IMUs' oldest queued
    stamps. Sets ``start_period`` to that median period."""
    clock.start_period = _start_median(imu, queue, False, True)
    if not clock.start_period > 0.0:
        return np.inf
    return _start_median(imu, queue, True, False) + START_WINDOW * clock.start_period


@njit(cache=True, error_model="numpy", _nrt=False)
def _ready_free_running(clock, imu, used, queue, settings):
    """Module docstring, Free-running: sets the pending instant's window, grid point and stamp when it is decided."""
    timeout = settings.stale_timeout
    if settings.sync_joint_states and not clock.js_fresh:
        reference = clock.newest if math.isnan(clock.stamp_prev) else clock.stamp_prev
        arriving = not math.isnan(clock.js_stamp) and clock.js_stamp >= reference - timeout
        starting = clock.newest < clock.first + timeout
        if arriving or (starting and math.isnan(clock.js_stamp) and settings.measured_count > 0):
            return False
    oldest = np.inf
    for i in range(imu.shape[0]):
        while imu[i].count > 0 and _oldest_stamp(imu, queue, i) <= clock.stamp_prev:
            _pop(imu, used, queue, i, False)  # of an instant that ran without it: late
            clock.overwritten += 1
        oldest = min(oldest, _oldest_stamp(imu, queue, i))
    grid = _grid_point(clock, oldest)
    expired = False
    for i in range(imu.shape[0]):
        memory = imu[i]
        if memory.count > 0 or not _waited(clock, imu, settings, i):
            continue  # decided: its sample of the instant, or a later one (it missed the instant)
        if oldest == np.inf:
            return False  # no sample queued: a cycle waits for the waited IMUs
        if not math.isnan(grid):
            period = memory.period if memory.period > 0.0 else clock.spacing
            if memory.last_stamp + period >= grid + 0.5 * clock.spacing:
                continue  # its next sample is nearer a later grid point (this one's was used, or it is slower)
        if clock.newest >= oldest + timeout:
            expired = True  # bounded wait: silent, or held up too long; its sample of the instant is lost
            continue
        return False
    if expired:
        clock.flushed += 1
    clock.predicted = grid
    if oldest == np.inf:
        clock.window_end = np.inf
        clock.instant, clock.instant_ns = clock.newest, clock.newest_ns
        return True
    clock.window_end = grid + 0.5 * clock.spacing if not math.isnan(grid) else _start_window(clock, imu, queue)
    instant, instant_ns = -np.inf, -1
    for i in range(imu.shape[0]):
        if imu[i].count > 0:
            head = queue[i, imu[i].head]
            if head.stamp < clock.window_end and head.stamp > instant:
                instant, instant_ns = head.stamp, head.stamp_ns
    clock.instant, clock.instant_ns = instant, instant_ns
    return True


@njit(cache=True, inline="always", error_model="numpy")
def _advance_grid(clock, count, stamp_sum, residual_count, residual_sum):
    """After a free-running cycle whose ``count`` samples' stamps sum to ``stamp_sum`` (``residual_sum`` the sum of
    the ``residual_count`` stamp - grid point within half a spacing of it): the grid's next reference and period
    (module docstring, the instant grid)."""
    if count == 0:
        return
    if math.isnan(clock.predicted):  # starting: the instant's mean stamp, one step after the last reference
        if clock.references >= GRID_START:
            return  # a cycle the grid did not schedule (a joint state's flush): no reference
        measured = stamp_sum / count
        if clock.references > 0 and measured - clock.reference < 0.5 * clock.start_period:
            return  # a split of the last instant (a stamp error past the start-up window): no new reference
        clock.references += 1
        if clock.references == 1:
            clock.reference = measured
            return
        if clock.references == 2:
            clock.spacing = measured - clock.reference
            clock.reference = measured
            return
        steps = 1.0
        predicted = clock.reference + clock.spacing
        residual = measured - predicted
    else:
        predicted = clock.predicted
        steps = max(1.0, round((predicted - clock.reference) / clock.spacing))
        residual = residual_sum / residual_count if residual_count > 0 else 0.0
        clock.references += 1
    j = float(clock.references)
    clock.reference = predicted + max(PHASE_GAIN, 2.0 * (2.0 * j - 1.0) / (j * (j + 1.0))) * residual
    clock.spacing += max(PERIOD_GAIN, 6.0 / (j * (j + 1.0))) * residual / steps


@njit(cache=True, error_model="numpy", _nrt=False)
def ready(state, settings):
    """Should a cycle run now (module docstring)? Sets the record's ``instant`` when it should."""
    clock, imu = state.clock[0], state.imu
    if math.isnan(clock.newest):
        return False
    fresh = clock.js_fresh
    for i in range(imu.shape[0]):
        fresh = fresh or imu[i].count > 0
    if not fresh:
        return False
    if clock.overdue:  # manual mode: a sample replaced an unused one
        clock.instant, clock.instant_ns = clock.newest, clock.newest_ns
        return True
    if settings.sync_tolerance > 0.0:
        return _ready_synchronized(clock, imu, state.used, state.queue, settings)
    return _ready_free_running(clock, imu, state.used, state.queue, settings)


# ---------------------------------------------------------------------------------------------- cycles
@njit(cache=True, inline="always", error_model="numpy")
def _default_instant(clock):
    return clock.newest if math.isnan(clock.instant) else clock.instant


@njit(cache=True, error_model="numpy", _nrt=False)
def take_cycle(state, settings, stamp, stamp_ns, input_index, out):
    """Run a cycle at ``stamp`` (``stamp_ns`` -1: the newest input's, or round(stamp * 1e9) if another): take its
    samples from the queues and append the cycle to ``out``."""
    clock, imu, used, queue, encoder = state.clock[0], state.imu, state.used, state.queue, state.encoder
    if stamp_ns < 0:
        if stamp == clock.instant:
            stamp_ns = clock.instant_ns
        elif stamp == clock.newest:
            stamp_ns = clock.newest_ns
        else:
            stamp_ns = np.int64(round(stamp * 1e9))
    tolerance = settings.sync_tolerance
    count, stamp_sum, residual_count, residual_sum = 0, 0.0, 0, 0.0
    for i in range(imu.shape[0]):
        if tolerance > 0.0:
            while _oldest_stamp(imu, queue, i) < stamp - tolerance:
                _pop(imu, used, queue, i, False)  # older than the instant solved: can no longer be used
                clock.overwritten += 1
            if _oldest_stamp(imu, queue, i) <= stamp + tolerance:
                _pop(imu, used, queue, i, True)
        elif _oldest_stamp(imu, queue, i) < clock.window_end:
            _pop(imu, used, queue, i, True)
            count += 1
            stamp_sum += used[i].stamp
            offset = used[i].stamp - clock.predicted
            if abs(offset) < 0.5 * clock.spacing:
                residual_count += 1
                residual_sum += offset
    if tolerance == 0.0:
        _advance_grid(clock, count, stamp_sum, residual_count, residual_sum)
    c = out.size[0]
    cycle = out.cycle[c]
    cycle.stamp = stamp
    cycle.stamp_ns = stamp_ns
    cycle.input = input_index
    cycle.reset = clock.reset_pending
    cycle.stamp_prev = clock.stamp_prev
    sample, stale = out.sample, out.stale
    for i in range(imu.shape[0]):
        sample[c, i] = used[i]
        stale[c, i] = math.isnan(imu[i].last_stamp) or imu[i].last_stamp < stamp - settings.stale_timeout
    locked = out.encoder
    for j in range(encoder.shape[0]):
        locked[c, j] = encoder[j]
    odometry_input.match(state.odometry[0], stamp, settings.stale_timeout, out.odometry[c])
    out.size[0] = c + 1
    _start_waiting(clock, False)
    clock.stamp_prev = stamp
    clock.cycles += 1


@njit(cache=True, inline="always", error_model="numpy")
def run_due_cycles(state, settings, input_index, out):
    """Every cycle that is ready now (several when queued instants wait), while ``out`` has room. Inlined into the
    offers: as a call it cost ~300 ns per input, 40 % of :func:`schedule` (12.0 -> 7.0 ms for replay_speed's bag,
    compile time unchanged, before the rules were built without reference counting)."""
    clock = state.clock[0]
    while out.size[0] < out.cycle.shape[0] and ready(state, settings):
        take_cycle(state, settings, clock.instant, clock.instant_ns, input_index, out)


WindowInputs = namedtuple("WindowInputs", [
    "kind", "row", "now", "stamp_ns", "imu_sensor", "imu_code", "imu_sample",
    "js_stamp", "js_code", "js_offsets", "js_index", "js_position", "js_velocity",
    "odom_stamp", "odom_code", "odom_values",
])
WindowInputs.__doc__ = """A window of validated inputs in offering order: ``kind`` (M,) 0 = IMU sample, 1 = joint
state, 2 = odometry; ``row`` its row in the IMU arrays, joint-state index or odometry arrays; ``now`` (M,) receive
clock (NaN: none); ``stamp_ns`` (M,); per IMU sample its sensor, validation code and :data:`SAMPLE` (stamps filled,
NaN = absent); per joint state its stamp, code and its coordinates' CSR slice (``js_offsets``) of indices,
positions and velocities; per odometry message its stamp, validation code and values (``odometry_input.VALUES``,)."""


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)  # nogil: replay.overlap runs meanwhile
def schedule(state, settings, inputs, out, status):
    """Offer every input of the window in order (:func:`offer_imu` / :func:`offer_joint_state`), running the
    cycles they complete into ``out``; ``status`` (M,) receives each input's status code."""
    # The window's arrays taken out of their record once (an access per input costs a reference count each).
    kind, row, now, stamp_ns = inputs.kind, inputs.row, inputs.now, inputs.stamp_ns
    imu_sensor, imu_code, imu_sample = inputs.imu_sensor, inputs.imu_code, inputs.imu_sample
    js_stamp, js_code, js_offsets = inputs.js_stamp, inputs.js_code, inputs.js_offsets
    js_index, js_position, js_velocity = inputs.js_index, inputs.js_position, inputs.js_velocity
    odom_stamp, odom_code, odom_values = inputs.odom_stamp, inputs.odom_code, inputs.odom_values
    for e in range(kind.shape[0]):
        r = row[e]
        if kind[e] == 0:
            status[e] = offer_imu(state, settings, imu_sensor[r], now[e], imu_code[r], imu_sample, r, e, True, out)
        elif kind[e] == 2:
            status[e] = offer_odometry(state, settings, odom_stamp[r], stamp_ns[e], now[e], odom_code[r],
                                       odom_values[r])
        else:
            a, b = js_offsets[r], js_offsets[r + 1]
            status[e] = offer_joint_state(state, settings, js_stamp[r], stamp_ns[e], now[e], js_code[r],
                                          js_index[a:b], js_position[a:b], js_velocity[a:b], e, True, out)
