"""Orientation from raw IMUs: one VQF (Laidig & Seel's filter, pip ``vqf``) per IMU that reports gyro + accelerometer
only, fed in stamp order, so a raw IMU enters the estimator exactly as an IMU that reports its own orientation.

You are in the ROS-free estimator core; this module imports NumPy, ``vqf``, ``core.spatial`` and ``core.errors``. It
exists because many robot IMUs publish only gyro and accelerometer (``orientation_covariance[0] = -1``); the
estimator needs R_GS.
The filter is VQF, chosen by measurement over x-io's imufusion (README, ``./run bench orientation_filters``); this
module holds no filter math of its own, only the rules that make its input well defined from timestamped messages.

Frames. F is the filter's earth frame: z up (gravity along -z), heading VQF's own: without a magnetometer the
sensor's heading when the filter started, with one VQF's 9D frame, ENU (y along magnetic north; tested). The output is
``q_FS`` (w, x, y, z) = ``R_z(psi) q_VQF``: ``psi`` (:attr:`OrientationFilter.heading_offset`) turns the filter's
earth frame about the vertical; the estimator sets it when it aligns a raw IMU's heading with the model
(``Estimator.calibrate``), and a restart after a gap keeps the heading continuous (below).

Rules, per sample ``(stamp, gyro w_S rad/s, accelerometer f_S m/s^2[, magnetometer])`` of one IMU, in the order
offered (:meth:`OrientationFilter.update` one at a time, :meth:`OrientationFilter.run` a window at a time: the same
decisions and the same VQF calls, hence the same bits):

* **Sample time.** VQF integrates at a fixed sample time Ts: ``FilterSettings.sample_time_s`` when > 0, else the
  median of the first :data:`WARMUP_INTERVALS` stamp intervals after a (re)start (those samples are held, no output,
  counted as ``warmup``, then fed). Each later sample is fed with its gyro scaled by dt / Ts (dt: interval to the
  previous fed sample), so the integrated rotation follows the stamps: stamp jitter and a dropped sample do not
  bias it. VQF's accelerometer low-pass, bias and rest estimation run at the nominal Ts.
* **Non-finite gyro or accelerometer:** not fed; counted ``non_finite``; the output is a NaN quaternion, which the
  estimator's validation drops and counts as ``non_finite`` too.
* **Saturated accelerometer** (``|f| > max_acceleration``) or an all-zero one: fed with the accelerometer left out
  (VQF skips a zero accelerometer: a gyro-only update); counted ``saturated``.
* **Stamps.** A non-finite stamp is not fed (no output; the estimator rejects it as ``invalid_stamp``); a stamp
  not after the previous fed one, within ``max_gap_s``, is not fed (counted ``out_of_order``). A stamp more than
  ``max_gap_s`` after the previous one (a gap) or before it (a looping recording) **resets** the filter (counted
  ``resets``): a new VQF starts from this sample. Without a magnetometer the restarted filter is turned about the
  vertical so that its first output has the heading of the last output before the reset (the IMU is assumed not
  to have turned about the vertical during the gap); its inclination converges again within about tau_acc (3 s).
* **Magnetometer** (optional, any unit; :meth:`OrientationFilter.run` / :meth:`~OrientationFilter.update` take one
  per sample): a non-finite or absent one is left out (VQF skips zero). Once a filter has seen one, its output is
  VQF's 9D quaternion.
* **Magnetometer stream** (the estimator's ``sensor_msgs/MagneticField`` input, tesla in S, REP-145): fields are
  offered on their own (:meth:`OrientationFilter.offer_field`), usually slower than the gyro. A field with a
  non-finite stamp or value, or of zero norm, is dropped (``field_invalid``); one whose stamp is not after the
  previous field's is dropped (``field_out_of_order``); one that the ROS edge found in another frame than its IMU's
  messages (``frames_match`` False; the rule is ``ros.magnetometer_frames``) is dropped first
  (``field_frame_mismatch``): it is not this sensor's field. **Matching rule:** a raw sample at stamp t is fed with the
  newest field offered before it (in offering order) whose stamp s has ``s <= t`` and ``t - s <=
  FilterSettings.field_timeout_s``; without one (none yet within the timeout after a field was seen) it is fed
  without a magnetometer (VQF's 9D estimate runs on gyro + accelerometer), counted ``field_stale``. The last
  :data:`FIELD_HISTORY` fields are kept for matching. Offering order is the node's arrival order and the
  ``OfflineInputs`` order in replay, so both paths match the same fields (same bits).

The estimator holds a :class:`RawImuFilters` (one filter per IMU whose ``ImuConfig.orientation`` is not
``"sensor"``): the node offers each message through :meth:`RawImuFilters.offer`, replay a window of inputs through
:meth:`RawImuFilters.apply`, both before the compiled rules, which then see an orientation like any other.

Use from other code (e.g. a benchmark): ``OrientationFilter(FilterSettings(sample_time_s=0.01)).run(stamps, gyro,
accel)`` -> :class:`FilterRun` (``quaternion_wxyz`` (n, 4), NaN rows where there is no output; ``present`` (n,)).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np
from vqf import VQF

from ros_dofkit.core.errors import EstimatorConfigError
from ros_dofkit.core.spatial import quat_multiply, quat_to_matrix

#: Stamp intervals whose median is the sample time when ``FilterSettings.sample_time_s`` is 0.
WARMUP_INTERVALS = 4

#: Output codes of one sample (:attr:`FilterRun.code`).
OUTPUT, WARMUP, NOT_FED, NON_FINITE = 0, 1, 2, 3

#: Where an IMU's orientation comes from (``ImuConfig.orientation``): the message, the filter, or the filter for
#: messages that mark their orientation absent and carry gyro + accelerometer.
ORIENTATION_MODES = ("sensor", "filter", "auto")

COUNTERS = ("updates", "warmup", "non_finite", "saturated", "out_of_order", "resets", "field_invalid",
            "field_out_of_order", "field_stale", "field_frame_mismatch")

#: Magnetometer fields kept per filter for the matching rule (the module docstring).
FIELD_HISTORY = 64

#: Why :meth:`OrientationFilter.offer_field` dropped a field (None: kept).
FIELD_INVALID, FIELD_OUT_OF_ORDER, FIELD_FRAME_MISMATCH = "field_invalid", "field_out_of_order", "field_frame_mismatch"


class OrientationFilterError(EstimatorConfigError):
    """A filter setting or an input array is malformed (the message says what was expected and what was received)."""


def _positive(value, what: str, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise OrientationFilterError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0.0 or (value == 0.0 and not allow_zero):
        raise OrientationFilterError(f"{what}: expected a finite number {'>= 0' if allow_zero else '> 0'}, "
                                     f"got {value!r}")
    return value


@dataclass(frozen=True)
class FilterSettings:
    """The input rules of one raw IMU's filter (see the module docstring).

    Attributes:
        sample_time_s: VQF's sample time; 0 = the median of the first stamp intervals after each (re)start.
        max_gap_s: a stamp interval longer than this (or a stamp this far back) restarts the filter.
        max_acceleration: accelerometer norm (m/s^2) beyond which a sample counts as saturated (set it just below
            the sensor's range); such samples update the filter from the gyro alone.
        tau_acc_s: VQF's accelerometer time constant (its default, 3 s): larger trusts the gyro longer.
        heading_offset: the initial turn psi (rad) of the output about the vertical (what a calibration found for
            a filter that starts on the same samples: replay's calibrated parameter file carries it).
        field_timeout_s: a magnetometer field older than this (s) before a raw sample is not fed with it.
    """

    sample_time_s: float = 0.0
    max_gap_s: float = 0.2
    max_acceleration: float = 150.0
    tau_acc_s: float = 3.0
    heading_offset: float = 0.0
    field_timeout_s: float = 0.1

    def __post_init__(self):
        object.__setattr__(self, "sample_time_s", _positive(self.sample_time_s, "sample_time_s", True))
        object.__setattr__(self, "max_gap_s", _positive(self.max_gap_s, "max_gap_s"))
        object.__setattr__(self, "max_acceleration", _positive(self.max_acceleration, "max_acceleration"))
        object.__setattr__(self, "tau_acc_s", _positive(self.tau_acc_s, "tau_acc_s"))
        object.__setattr__(self, "field_timeout_s", _positive(self.field_timeout_s, "field_timeout_s"))
        if isinstance(self.heading_offset, bool) or not isinstance(self.heading_offset, (int, float)) or not (
                math.isfinite(self.heading_offset)):
            raise OrientationFilterError(f"heading_offset: expected a finite angle in rad, got {self.heading_offset!r}")
        object.__setattr__(self, "heading_offset", float(self.heading_offset))
        if self.sample_time_s > self.max_gap_s:
            raise OrientationFilterError(f"sample_time_s ({self.sample_time_s:g} s) must not exceed max_gap_s "
                                         f"({self.max_gap_s:g} s): every interval would be a gap")


@dataclass(frozen=True)
class FilterRun:
    """A window's outputs: ``quaternion_wxyz`` (n, 4) q_FS (NaN rows without output), ``present`` (n,) True where
    there is an orientation, ``code`` (n,) :data:`OUTPUT`, :data:`WARMUP`, :data:`NOT_FED` or :data:`NON_FINITE`."""

    quaternion_wxyz: np.ndarray
    present: np.ndarray
    code: np.ndarray


def heading_offset(R_from, R_to) -> float:
    """The angle psi (rad) such that ``R_z(psi) R_from`` has the heading of ``R_to``: the difference of the headings
    (atan2 of the horizontal projection) of the sensor axis that is most horizontal in ``R_to``, so that it is well
    defined unless that axis is vertical in ``R_from`` too."""
    R_from, R_to = np.asarray(R_from, dtype=float), np.asarray(R_to, dtype=float)
    k = int(np.argmin(np.abs(R_to[2])))
    return math.atan2(R_to[1, k], R_to[0, k]) - math.atan2(R_from[1, k], R_from[0, k])


def _heading_quaternion(psi: float) -> np.ndarray:
    return np.array([math.cos(0.5 * psi), 0.0, 0.0, math.sin(0.5 * psi)])


@dataclass
class _Decisions:
    """What the input rules decided for a window: per sample its code, the VQF row after which it has its output
    (-1: none) and whether a magnetometer was seen; the VQF rows (``source``: sample index, or -1 for a held
    warm-up sample whose data is in ``held``; ``scale``: gyro factor dt / Ts); the rows at which a new VQF starts
    (with its Ts); the restarts (sample index, the old filter had no magnetometer)."""

    code: np.ndarray
    fed_row: np.ndarray
    mag_seen: np.ndarray
    source: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    held: dict = field(default_factory=dict)
    starts: dict = field(default_factory=dict)
    restarts: list = field(default_factory=list)


class OrientationFilter:
    """One raw IMU's VQF and the input rules of the module docstring. :meth:`update` (one sample, the node) and
    :meth:`run` (a window, replay) may be mixed; the state carries over. :attr:`counts` holds the counters."""

    def __init__(self, settings: FilterSettings | None = None):
        self.settings = FilterSettings() if settings is None else settings
        if not isinstance(self.settings, FilterSettings):
            raise OrientationFilterError(f"settings: expected FilterSettings, got {type(self.settings).__name__}")
        self.heading_offset = self.settings.heading_offset
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new filter; counters at zero; heading offset kept)."""
        self._running = False
        self._filter = None
        self._ts = math.nan
        self._last = math.nan  # stamp of the last sample fed or held
        self._held = []  # warm-up samples: (stamp, gyro, accel, mag, has mag)
        self._has_mag = False
        self._last_output = None  # q_FS of the last output (heading continuity across restarts)
        self._pending_heading = False
        self._fields = deque(maxlen=FIELD_HISTORY)  # (stamp, field) offered, stamps increasing
        self.counts = dict.fromkeys(COUNTERS, 0)

    @property
    def has_output(self) -> bool:
        """True once the filter has given an orientation (since its construction or :meth:`reset`)."""
        return self._last_output is not None

    @property
    def sample_time_s(self) -> float:
        """The running filter's sample time (NaN before it started)."""
        return self._ts

    # ------------------------------------------------------------------ magnetometer stream
    def offer_field(self, stamp, field_S, frames_match: bool = True) -> str | None:
        """Keep one magnetometer sample (stamp s, field in S, any unit; tesla from the estimator) for the matching
        rule; returns None, or :data:`FIELD_FRAME_MISMATCH` (``frames_match`` False: the field is another frame's)
        / :data:`FIELD_INVALID` / :data:`FIELD_OUT_OF_ORDER` when it is dropped (counted)."""
        if not frames_match:
            self.counts[FIELD_FRAME_MISMATCH] += 1
            return FIELD_FRAME_MISMATCH
        stamp = math.nan if stamp is None else float(stamp)
        field_S = np.asarray(field_S, dtype=float).reshape(-1)
        if (not math.isfinite(stamp) or field_S.size != 3 or not np.isfinite(field_S).all()
                or not field_S.any()):
            self.counts[FIELD_INVALID] += 1
            return FIELD_INVALID
        if self._fields and stamp <= self._fields[-1][0]:
            self.counts[FIELD_OUT_OF_ORDER] += 1
            return FIELD_OUT_OF_ORDER
        self._fields.append((stamp, field_S))
        return None

    def field_at(self, stamp: float) -> np.ndarray | None:
        """The field a raw sample at ``stamp`` is fed with (the matching rule), or None (counted ``field_stale``
        once a field has been offered)."""
        if not self._fields or not math.isfinite(stamp):
            return None
        for field_stamp, field_S in reversed(self._fields):
            if field_stamp <= stamp:
                if stamp - field_stamp <= self.settings.field_timeout_s:
                    return field_S
                break
        self.counts["field_stale"] += 1
        return None

    # ------------------------------------------------------------------ decisions
    def _decide(self, stamps, usable, saturated, gyro, accel, mag, has_mag) -> _Decisions:
        """Apply the input rules sample by sample (on Python floats: the sequential part of a window)."""
        settings = self.settings
        n = len(stamps)
        d = _Decisions(code=np.full(n, NOT_FED, dtype=np.int64), fed_row=np.full(n, -1, dtype=np.int64),
                       mag_seen=np.zeros(n, dtype=bool))
        for k, stamp in enumerate(stamps):
            if not math.isfinite(stamp):
                continue
            if not usable[k]:
                self.counts["non_finite"] += 1
                d.code[k] = NON_FINITE
                continue
            if saturated[k]:
                self.counts["saturated"] += 1
            if math.isfinite(self._last):
                dt = stamp - self._last
                if dt > settings.max_gap_s or dt < -settings.max_gap_s:
                    self.counts["resets"] += 1
                    d.restarts.append((k, not self._has_mag))
                    self._running, self._held, self._last, self._has_mag = False, [], math.nan, False
                elif dt <= 0.0:
                    self.counts["out_of_order"] += 1
                    continue
            if not self._running and not self._held and settings.sample_time_s > 0.0:
                self._start(settings.sample_time_s, d)
            if not self._running:
                self._held.append((stamp, gyro[k], accel[k], mag[k], has_mag[k]))
                self._last = stamp
                if len(self._held) <= WARMUP_INTERVALS:
                    self.counts["warmup"] += 1
                    d.code[k] = WARMUP
                    continue
                self._start(float(np.median(np.diff([held[0] for held in self._held]))), d)
                previous = math.nan
                for held_stamp, held_gyro, held_accel, held_mag, held_has_mag in self._held:
                    d.held[len(d.source)] = (held_gyro, held_accel, held_mag)
                    self._feed(-1, held_stamp, previous, held_has_mag, d)
                    previous = held_stamp
                self._held = []
            else:
                self._feed(k, stamp, self._last, has_mag[k], d)
            d.code[k] = OUTPUT
            d.fed_row[k] = len(d.source) - 1
            d.mag_seen[k] = self._has_mag
        return d

    def _start(self, ts: float, d: _Decisions) -> None:
        self._ts = ts
        self._running = True  # the VQF object itself is made when its first row is executed
        d.starts[len(d.source)] = ts

    def _feed(self, k: int, stamp: float, previous: float, has_mag: bool, d: _Decisions) -> None:
        d.source.append(k)
        d.scale.append(1.0 if not math.isfinite(previous) else (stamp - previous) / self._ts)
        self._has_mag = self._has_mag or bool(has_mag)
        self._last = stamp
        self.counts["updates"] += 1

    # ------------------------------------------------------------------ execution
    def _execute(self, d: _Decisions, gyro, accel, mag) -> tuple:
        """Run the decided rows through VQF (one ``updateBatch`` per run of rows between starts; a row without a
        magnetometer passes zeros, which VQF skips); returns VQF's 6D and 9D quaternions after every row."""
        source = np.asarray(d.source, dtype=np.int64)
        rows = len(source)
        G, A, M = gyro[np.maximum(source, 0)], accel[np.maximum(source, 0)], mag[np.maximum(source, 0)]
        for row, (held_gyro, held_accel, held_mag) in d.held.items():
            G[row], A[row], M[row] = held_gyro, held_accel, held_mag
        G = G * np.asarray(d.scale, dtype=float).reshape(-1, 1)
        out6, out9 = np.empty((rows, 4)), np.empty((rows, 4))
        bounds = sorted(set(d.starts) | {0, rows})
        for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
            if begin in d.starts:
                self._filter = VQF(d.starts[begin])
                self._filter.setTauAcc(self.settings.tau_acc_s)
            if end > begin:
                result = self._filter.updateBatch(np.ascontiguousarray(G[begin:end]), np.ascontiguousarray(
                    A[begin:end]), np.ascontiguousarray(M[begin:end]))
                out6[begin:end] = result["quat6D"]
                out9[begin:end] = result["quat9D"]
        return out6, out9

    def _outputs(self, d: _Decisions, out6, out9) -> np.ndarray:
        """q_FS per sample: the VQF quaternion after the sample's last row (9D once a magnetometer was seen), turned
        by the heading offset, which a restart without a magnetometer sets anew at its first output."""
        quaternions = np.full((len(d.code), 4), np.nan)
        outputs = np.flatnonzero(d.code == OUTPUT)
        rows = d.fed_row[outputs]
        raw = np.where(d.mag_seen[outputs, None], out9[rows], out6[rows])
        restart_at = np.searchsorted(outputs, [k for k, _ in d.restarts]).tolist()  # first output after each
        restarts = list(zip(restart_at, [no_mag for _, no_mag in d.restarts], strict=True))
        bounds = sorted({0, len(outputs)} | set(restart_at))
        for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
            for position, no_mag in restarts:
                if position == begin:
                    self._pending_heading = no_mag and self._last_output is not None
            if self._pending_heading and not d.mag_seen[outputs[begin]]:
                turned = quat_multiply(_heading_quaternion(self.heading_offset), raw[begin])
                self.heading_offset += heading_offset(quat_to_matrix(turned), quat_to_matrix(self._last_output))
            self._pending_heading = False
            quaternions[outputs[begin:end]] = quat_multiply(_heading_quaternion(self.heading_offset), raw[begin:end])
            self._last_output = quaternions[outputs[end - 1]]
        for position, no_mag in restarts:  # a restart with no output yet: its heading is set at its first output
            if position == len(outputs):
                self._pending_heading = no_mag and self._last_output is not None
        return quaternions

    def run(self, stamps, gyro, accel, mag=None) -> FilterRun:
        """Offer a window of samples in order: stamps (n,) s, gyro (n, 3) rad/s, accel (n, 3) m/s^2, mag (n, 3) or
        None. Returns their outputs (:class:`FilterRun`)."""
        stamps = np.asarray(stamps, dtype=float).reshape(-1)
        n = len(stamps)
        gyro = np.asarray(gyro, dtype=float)
        accel = np.asarray(accel, dtype=float)
        if gyro.shape != (n, 3) or accel.shape != (n, 3) or (mag is not None and np.shape(mag) != (n, 3)):
            raise OrientationFilterError(f"expected gyro, accel (and mag) of shape ({n}, 3) for {n} stamps, got "
                                         f"{gyro.shape}, {accel.shape}, {None if mag is None else np.shape(mag)}")
        with np.errstate(invalid="ignore", over="ignore"):
            usable = np.isfinite(gyro).all(axis=1) & np.isfinite(accel).all(axis=1)
            norm = np.sqrt(np.einsum("ij,ij->i", accel, accel))
            saturated = usable & ((norm > self.settings.max_acceleration) | (norm == 0.0))
        accel = np.where(saturated[:, None], 0.0, accel)  # VQF skips a zero accelerometer: gyro-only update
        if mag is None:
            mag = np.zeros((n, 3))
        else:
            mag = np.asarray(mag, dtype=float)
            mag = np.where(np.isfinite(mag).all(axis=1)[:, None], mag, 0.0)
        has_mag = np.any(mag != 0.0, axis=1)
        d = self._decide(stamps.tolist(), usable.tolist(), saturated.tolist(), gyro, accel, mag, has_mag.tolist())
        out6, out9 = self._execute(d, gyro, accel, mag)
        return FilterRun(quaternion_wxyz=self._outputs(d, out6, out9), present=d.code == OUTPUT, code=d.code)

    def update(self, stamp: float, gyro, accel, mag=None) -> np.ndarray | None:
        """Offer one sample: returns q_FS (4,) (w, x, y, z), a NaN quaternion for a non-finite gyro or
        accelerometer, or None when there is no output (warm-up, a stamp not fed)."""
        run = self.run(np.array([stamp], dtype=float), np.asarray(gyro, dtype=float).reshape(1, -1),
                       np.asarray(accel, dtype=float).reshape(1, -1),
                       None if mag is None else np.asarray(mag, dtype=float).reshape(1, -1))
        if run.code[0] == OUTPUT or run.code[0] == NON_FINITE:
            return run.quaternion_wxyz[0]
        return None


def is_raw(mode, orientation_present, gyro_present, accel_present, accel):
    """Whether a sample goes through the filter (scalars or arrays): mode ``"filter"`` when it carries gyro and
    accelerometer, ``"auto"`` when it also marks its orientation absent and its accelerometer is not all zeros (an
    Imu message whose accelerometer nobody filled is not raw). ``accel`` (..., 3)."""
    if mode == "sensor":
        return np.zeros(np.shape(orientation_present), dtype=bool)
    carried = np.logical_and(gyro_present, accel_present)
    if mode == "filter":
        return carried
    filled = np.any(np.asarray(accel) != 0.0, axis=-1)
    return carried & ~np.asarray(orientation_present, dtype=bool) & filled


class RawImuFilters:
    """The estimator's raw-IMU filters: one :class:`OrientationFilter` per IMU (index into ``imus``) whose
    ``orientation`` is ``"filter"`` or ``"auto"`` (``previous``: the bank they replace, whose heading offsets they
    keep). A sample that is raw (:func:`is_raw`) leaves with the filter's
    orientation (absent during warm-up; NaN for a non-finite gyro or accelerometer, so the rules drop it as
    ``non_finite``); in mode ``"filter"`` a message's own orientation is never used."""

    def __init__(self, imus, previous: RawImuFilters | None = None):
        self.names = tuple(imu.name for imu in imus)
        self.modes = tuple(imu.orientation for imu in imus)
        self.filters = {i: OrientationFilter(imu.filter) for i, imu in enumerate(imus) if imu.orientation != "sensor"}
        if previous is not None:  # new filters, the heading offsets of ``previous`` (set by a calibration)
            for i, f in self.filters.items():
                f.heading_offset = previous.filters[i].heading_offset

    def counts(self) -> dict:
        """{IMU name: {counter: value}} (:data:`COUNTERS`) of the IMUs in mode ``"filter"`` and of those in mode
        ``"auto"`` whose filter has been offered a raw sample."""
        return {self.names[i]: dict(f.counts) for i, f in self.filters.items()
                if self.modes[i] == "filter" or any(f.counts.values())}

    def alignable(self) -> list:
        """Names of the IMUs whose orientation comes from a filter (the ones calibration aligns in heading): mode
        ``"filter"``, and ``"auto"`` once its filter has given an orientation (a raw stream)."""
        return [self.names[i] for i, f in self.filters.items() if self.modes[i] == "filter" or f.has_output]

    def align_headings(self, rotations: dict) -> dict:
        """Turn each named IMU's filter output about the vertical so that ``R_now`` (its recent output, R_FS) gets
        the heading of ``R_model`` (the model's R_GS for it): ``{name: (R_now, R_model)}`` -> ``{name: psi}``, the
        turns added (rad). Without a magnetometer each raw IMU's heading is its own (the sensor's heading when its
        filter started); this puts them all in the model's G."""
        turns = {name: heading_offset(R_now, R_model) for name, (R_now, R_model) in rotations.items()}
        self.turn_headings(turns)
        return turns

    def turn_headings(self, turns: dict) -> None:
        """Add ``turns`` {name: psi (rad)} to the named IMUs' filter heading offsets (their outputs turn about the
        vertical from the next sample on)."""
        for name, psi in turns.items():
            self.filters[self.names.index(name)].heading_offset += psi

    def offer(self, i: int, stamp, quaternion_wxyz, orientation_present: bool, gyro, gyro_present: bool, accel,
              accel_present: bool) -> tuple:
        """``(quaternion_wxyz, orientation_present)`` to hand to the rules for one sample of IMU ``i``."""
        if self.passes(i, orientation_present):
            return quaternion_wxyz, orientation_present
        f = self.filters[i]
        given = accel is not None and gyro is not None
        accel = np.asarray(accel if given else np.zeros(3), dtype=float).reshape(-1)
        gyro = np.asarray(gyro if given else np.zeros(3), dtype=float).reshape(-1)
        if gyro.size != 3 or accel.size != 3 or not is_raw(self.modes[i], orientation_present, gyro_present,
                                                           accel_present and given, accel):
            return ((np.full(4, np.nan), False) if self.modes[i] == "filter" else
                    (quaternion_wxyz, orientation_present))
        stamp = math.nan if stamp is None else float(stamp)
        q = f.update(stamp, gyro, accel, f.field_at(stamp))
        return (np.full(4, np.nan), False) if q is None else (q, True)

    def passes(self, i: int, orientation_present: bool) -> bool:
        """Does a sample of IMU ``i`` go to the rules as it came (:meth:`offer` returns it unchanged, no filter
        touched): an IMU without a filter, or mode ``"auto"`` with the orientation present (the node's usual path)."""
        return i not in self.filters or (orientation_present and self.modes[i] == "auto")

    def offer_field(self, i: int, stamp, field_S, frames_match: bool = True) -> str | None:
        """One magnetometer sample of IMU ``i`` (tesla, S): None when kept, else why it was dropped
        (:meth:`OrientationFilter.offer_field`); an IMU without a filter (mode ``"sensor"``) keeps none."""
        f = self.filters.get(i)
        return "not_filtered" if f is None else f.offer_field(stamp, field_S, frames_match)

    def apply(self, inputs):
        """``inputs`` (an ``offline.OfflineInputs``) with the filtered IMUs' orientations, every IMU's samples
        offered to its filter in offering order."""
        if not self.filters or self._nothing_to_filter(inputs):
            return inputs
        imu_rows = np.asarray(inputs.row)[np.asarray(inputs.kind) == 0]
        sensor = np.asarray(inputs.imu_sensor)[imu_rows]
        quaternions = np.array(inputs.imu_quaternion_wxyz, dtype=float)
        present = np.array(inputs.imu_orientation_present, dtype=bool)
        n = len(present)
        accel = np.zeros((n, 3)) if inputs.imu_linear_acceleration is None else np.asarray(
            inputs.imu_linear_acceleration, dtype=float)
        accel_present = np.zeros(n, dtype=bool) if inputs.imu_linear_acceleration is None else (
            np.ones(n, dtype=bool) if inputs.imu_linear_acceleration_present is None
            else np.asarray(inputs.imu_linear_acceleration_present, dtype=bool))
        gyro = np.asarray(inputs.imu_angular_velocity, dtype=float)
        gyro_present = np.asarray(inputs.imu_angular_velocity_present, dtype=bool)
        stamps = np.asarray(inputs.imu_stamp, dtype=float)
        positions = np.flatnonzero(np.asarray(inputs.kind) == 0)  # each IMU row's place in the offering order
        for i, f in self.filters.items():
            rows = imu_rows[sensor == i]
            raw = is_raw(self.modes[i], present[rows], gyro_present[rows], accel_present[rows], accel[rows])
            if self.modes[i] == "filter":
                quaternions[rows], present[rows] = np.nan, False
            mag = self._window_fields(i, inputs, positions[sensor == i][raw], stamps[rows[raw]])
            rows = rows[raw]
            run = f.run(stamps[rows], gyro[rows], accel[rows], mag)
            quaternions[rows] = run.quaternion_wxyz
            present[rows] = run.present | (run.code == NON_FINITE)
        return replace(inputs, imu_quaternion_wxyz=quaternions, imu_orientation_present=present)

    def _nothing_to_filter(self, inputs) -> bool:
        """Whether :meth:`apply` would hand ``inputs`` back unchanged and leave every filter as it was: no filter
        in mode ``"filter"``, every IMU sample with its orientation (so none is raw for an ``"auto"`` filter,
        :func:`is_raw`) and no magnetometer sample. Checked first because the copies of a window's IMU arrays
        took ~0.4 ms a window of orientation IMUs (replay_speed's bag)."""
        return ("filter" not in (self.modes[i] for i in self.filters)
                and bool(np.all(inputs.imu_orientation_present))
                and (inputs.field_sensor is None or len(inputs.field_sensor) == 0))

    def _window_fields(self, i: int, inputs, positions, stamps) -> np.ndarray | None:
        """The field each raw sample of IMU ``i`` at input ``positions`` (stamps) is fed with, zeros for none: the
        window's fields of that IMU offered in order between the samples (as the node offers them), then matched
        (:meth:`OrientationFilter.field_at`); None when the window has no field input."""
        if inputs.field_sensor is None:
            return None
        f = self.filters[i]
        mine = np.flatnonzero(np.asarray(inputs.field_sensor) == i)
        offered_before = np.asarray(inputs.field_position)[mine]
        field_stamps = np.asarray(inputs.field_stamp, dtype=float)[mine]
        vectors = np.asarray(inputs.field_vector, dtype=float)[mine]
        frames_match = (np.ones(len(mine), dtype=bool) if inputs.field_frames_match is None
                        else np.asarray(inputs.field_frames_match, dtype=bool)[mine])
        mag, offered = np.zeros((len(positions), 3)), 0
        for k, (position, stamp) in enumerate(zip(positions.tolist(), stamps.tolist(), strict=True)):
            while offered < len(mine) and offered_before[offered] <= position:
                f.offer_field(field_stamps[offered], vectors[offered], frames_match[offered])
                offered += 1
            matched = f.field_at(stamp)
            if matched is not None:
                mag[k] = matched
        for j in range(offered, len(mine)):  # the fields after the window's last raw sample
            f.offer_field(field_stamps[j], vectors[j], frames_match[j])
        return mag
