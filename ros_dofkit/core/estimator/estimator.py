"""The estimator: merged encoders + IMU orientations and gyros in, joint configuration q and velocity v out.

You are in the ROS-free estimator core; this module imports the estimator's setup, its compiled cycle rules
(``rules``), its batch input/output types (``offline``), the assembler and the plant's compiled position difference
(the velocities' finite differences). The live node offers one message at a time (:meth:`Estimator.process_imu` /
:meth:`Estimator.process_joint_state`); offline replay offers a window of a
recording at a time (:meth:`Estimator.feed`). Both go through the same compiled rules over the same state and the
same solve, so a recording gives the same bits either way; a message's one cycle skips the batch records (its
kernels' inputs and outputs in buffers allocated once, ``Estimator._stream_cycle``). The data flow is DESIGN.md's:

    joint states --validate, merge by name--> measured q (locked in the assembler)
    IMU samples  --validate, stamp checks---> observations R_WO = R_WG R_GS (NaN = unobserved, stale = unobserved)
    a cycle (``rules``): Assembler.assemble after a (re)start, then warm-started tracking over the free q -> q;
    gyros through the angular Jacobians (``velocity``'s least squares, compiled in ``offline``) -> v
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from ros_dofkit.core.assembly import average_rotations, calibrate_imus
from ros_dofkit.core.assembly.hinge_calibration import OrientationSeries
from ros_dofkit.core.estimator import rules, stream
from ros_dofkit.core.estimator import setup as problem
from ros_dofkit.core.estimator.compiled_entry import compiled_entry
from ros_dofkit.core.estimator.config import EstimatorConfig, EstimatorConfigError, UnknownNameError, describe_unknown
from ros_dofkit.core.estimator.heading import HeadingFilter, fill_accelerations
from ros_dofkit.core.estimator.inputs import ACCEPTED, InputStatus, RejectReason, parse_imu, parse_joint_state, rejected
from ros_dofkit.core.estimator.odometry_input import VALUES, YAW, turn_headings, validate_odometry
from ros_dofkit.core.estimator.offline import (
    EstimatorResult,
    OfflineInputs,
    OfflineRun,
    _frozen,
    kinematics_and_velocities,
    sensor_errors,
    validate_window,
)
from ros_dofkit.core.estimator.orientation_filter import RawImuFilters
from ros_dofkit.core.spatial import describe_quaternion_problem, matrix_to_quat, rotation_z

#: Frames given to ``Assembler.track_sequence`` at once (a failing frame redoes its chunk frame by frame).
TRACK_CHUNK = 512
_NOTHING_OBSERVED = "no IMU observed this cycle; estimated coordinates hold their previous values"
_SINGULAR_GYROS = ("gyro velocities: singular normal equations (velocity_regularization is 0 and the gyros do not "
                   "observe every free velocity)")


def rotation_angle_between(R_A, R_B) -> float:
    """Angle (rad, in [0, pi]) of the rotation R_A^T R_B; atan2 form, accurate near 0 and pi."""
    R = R_A.T @ R_B
    sine = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
    cosine = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    return math.atan2(sine, cosine)


class EstimatorStateError(RuntimeError):
    """The estimator was asked for something its current state cannot give (e.g. a step with no input)."""


class CalibrationError(EstimatorStateError):
    """Calibration cannot run now: samples are missing or stale, or the sensors were not static over the window."""


@dataclass(frozen=True)
class CalibrationResult:
    """Outcome of :meth:`Estimator.calibrate`.

    Attributes:
        R_BS: {IMU name: new mounting rotation} for the IMUs that were calibrated.
        R_WG: the world alignment after calibration (heading included).
        heading_angle: rotation about the model's z applied by the heading correction (rad; 0 without one).
        q_cal: the calibration pose used (plant coordinates).
        max_spread_deg: largest angle between a window sample and its IMU's mean (how static the pose was).
        num_samples: {IMU name: samples averaged}.
        heading_offsets: {IMU name: turn (rad) about the vertical added to a raw IMU's filter output} for the
            filtered IMUs with known mountings, whose heading calibration aligns with the model (they have no
            common heading without a magnetometer; ``orientation_filter.RawImuFilters.align_headings``).
    """

    R_BS: dict
    R_WG: np.ndarray
    heading_angle: float
    q_cal: np.ndarray
    max_spread_deg: float
    num_samples: dict
    heading_offsets: dict = field(default_factory=dict)


#: A reading of the type the node hands :meth:`Estimator.process_imu_reading` (read-only: a view of the message).
_READING_EXAMPLE = np.zeros(rules.READING_SIZE)
_READING_EXAMPLE.flags.writeable = False
_READING_SHAPE = (rules.READING_SIZE,)
_FLOAT64 = np.dtype(np.float64)  # (compared by identity: another float64 dtype object, e.g. big endian, is copied)
_WXYZ = [3, 0, 1, 2]  # a reading's quaternion (x, y, z, w) as (w, x, y, z)
# A reading's fields (rules.READING), and the first covariance entries that flag a field absent (REP-145: -1).
_GYRO = rules.READING["angular_velocity"]
_ACCEL = rules.READING["linear_acceleration"]
_ORIENTATION_COVARIANCE = rules.READING["orientation_covariance"]
_ORIENTATION_FLAG = _ORIENTATION_COVARIANCE.start
_GYRO_FLAG = rules.READING["angular_velocity_covariance"].start
_ACCEL_FLAG = rules.READING["linear_acceleration_covariance"].start


def _stamp_ns(stamp: float) -> int:
    return int(round(stamp * 1e9)) if math.isfinite(stamp) else -1


def _timing_detail(reason: RejectReason, stamp: float, now: float, config: EstimatorConfig) -> str:
    if reason is RejectReason.FUTURE_STAMP:
        return (f"stamp {stamp:.6f} s is {stamp - now:.6f} s ahead of the clock {now:.6f} s "
                f"(tolerance {config.future_tolerance_s:g} s)")
    if reason is RejectReason.STALE_STAMP:
        return (f"stamp {stamp:.6f} s is {now - stamp:.6f} s behind the clock {now:.6f} s "
                f"(stale after {config.stale_timeout_s:g} s)")
    if reason is RejectReason.INVALID_STAMP:
        return "header stamp is no time (nanosec must be in [0, 1e9))"
    if reason is RejectReason.NON_FINITE:
        return f"stamp must be a finite time in seconds, got {stamp!r}"
    if reason is RejectReason.REPEATED_STAMP:
        return f"stamp {stamp:.6f} s repeats this source's last stamp; the repeat is dropped"
    return f"stamp {stamp:.6f} s is older than the last accepted stamp of this source"


class Estimator:
    """Joint-configuration estimator on a finalized plant.

    Construction checks the configuration against the plant (``setup.build``: unknown bodies, instances or joints
    raise :class:`UnknownNameError` listing the valid names) and builds the solver. Streaming: offer inputs with
    :meth:`process_imu` / :meth:`process_joint_state` (they return an :class:`InputStatus` and the cycles the input
    completed; they never raise on bad data). Manual: :meth:`add_imu` / :meth:`add_joint_state`, :meth:`ready`,
    :meth:`step`. Offline: :meth:`feed` a window of a recording (:meth:`run` = :meth:`reset` + :meth:`feed`).
    """

    def __init__(self, plant, config: EstimatorConfig):
        self._setup = problem.build(plant, config)
        self._plant = plant
        self._config = config
        self._settings = self._setup.rules_settings()
        self._names = self._setup.imu_names
        self._imu_index = {name: i for i, name in enumerate(self._names)}
        self._R_BS = {imu.name: (None if imu.needs_calibration else np.array(imu.mounting)) for imu in config.imus}
        self._align(config.R_WG)
        self._tree = plant.tree.kernel_arguments()
        # Fixed by the plant: built once, not per cycle (the node's cycle is a few hundred microseconds).
        self._position_names = tuple(plant.position_names())
        self._velocity_names = tuple(plant.velocity_names())
        self._measured = ~self._setup.estimated  # articulated coordinates locked at their encoder values
        if self._setup.odometry is not None:  # ... but the odometry's: they hold their last matched value, not an
            self._measured[self._setup.odometry.art_index] = False  # encoder's (none reports them: q's default)
        n_imu, n_art = len(self._names), len(self._setup.art_names)
        # One message's cycles (allocated once: the node's per-message path allocates no large array).
        self._message = rules.new_cycles(rules.cycle_capacity(1, n_imu), n_imu, n_art)
        self._message_reset = self._message.cycle["reset"]  # (a view: its first cycle's flag, read per cycle)
        self._no_sensors = np.zeros(n_imu, dtype=bool)  # no sensor flagged (read-only)
        self._no_sensors.flags.writeable = False
        self._sample = np.empty(1, dtype=rules.SAMPLE)  # one message's sample
        # views of its fields (a field of an array element costs ~0.6 us, of a view ~0.1: paid per message)
        self._sample_stamp, self._sample_stamp_ns = self._sample["stamp"], self._sample["stamp_ns"]
        self._sample_R_GS0 = self._sample["R_GS"][0]  # (3, 3) the sample's orientation
        self._no_covariance = np.zeros(0)  # an orientation covariance not read (imu_covariance_weighting off)
        # rules.offer_imu_reading's (the reordered quaternion, the gyro, no covariance)
        self._reading_workspaces = (np.empty(4), np.empty(3), self._no_covariance)
        self._odometry_values = np.empty(VALUES)
        self._build_solver()
        self._raw_imus = None
        self._heading = self._heading_filter(config)
        self._calibration = None  # the last CalibrationResult (mountings outlive reset(), so does it)
        self._recording = 0  # samples per IMU the windows keep while orientations are recorded (0: not recording)
        self._windows_emptied = 0  # see orientation_windows_emptied
        self.reset()

    def _align(self, R_WG) -> None:
        """Adopt the world alignment R_WG (a float64 C-contiguous copy, as the kernels take it)."""
        self._R_WG = np.array(R_WG, dtype=float, order="C")
        self._R_WG_is_identity = bool(np.array_equal(self._R_WG, np.eye(3)))

    def _build_solver(self) -> None:
        self._osensors, self._assembler, solver_names = problem.build_solver(self._setup, self._config, self._R_BS)
        self._solver_columns = np.array([self._imu_index[name] for name in solver_names], dtype=np.int64)
        self._calibrated = np.array([self._R_BS[name] is not None for name in self._names], dtype=bool)
        self._all_calibrated = bool(self._calibrated.all())
        self._weighted = self._calibrated & (self._setup.weights > 0.0)  # the IMUs whose orientations the solve uses
        self._R_BS_array = np.ascontiguousarray(np.stack(
            [np.eye(3) if self._R_BS[name] is None else self._R_BS[name] for name in self._names]
        ) if self._names else np.zeros((0, 3, 3)))
        self._needs_assemble = True
        self._stream = stream.new_buffers(self._plant, len(self._names), len(self._solver_columns))
        setup = self._setup
        self._stream_problem = stream.StreamProblem(
            self._weighted, self._calibrated, self._solver_columns, np.flatnonzero(self._measured), setup.art_q,
            setup.art_v, np.zeros(0, np.int64) if setup.odometry is None else setup.odometry.q_index,
            setup.body_index, self._R_BS_array, setup.free_v)
        self._stream_frames = None  # the Assembler's FrameTracking stream_cycle's entry point is bound to

    def reset(self) -> None:
        """Forget every input: the next input starts from the initial state (counters and statistics at zero)."""
        self._state = rules.new_state(len(self._names), self._settings, self._setup.q_default[self._setup.art_q],
                                      problem.time_offsets_ns(self._config)[:len(self._names)])
        self._resets = self._state.clock["resets"]  # (1,) view, read after every offer
        self._rebind_offers_on_first_use()
        # raw IMUs' orientation filters, before the rules (headings aligned by calibration kept, as mountings are)
        self._raw_imus = RawImuFilters(self._config.imus, self._raw_imus)
        self._unknown_sensors = Counter()
        self._windows = {name: deque(maxlen=self._window_length()) for name in self._names}
        self._windows_emptied += 1
        self._resets_seen = 0
        self._q_current = self._setup.q_default.copy()
        self._needs_assemble = True
        self._is_initialized = not self._setup.free_q.any()
        self._q_last = None  # q of the last cycle (the velocity prior's previous q)
        self._heading_turn = np.full(1, np.nan)  # a floating base's yaw from odometry: the Δ held (odometry_input)
        self._cycles = 0
        self._solve_failures = 0
        if self._heading is not None:
            self._heading.clear()

    # ------------------------------------------------------------------ read-only properties
    @property
    def plant(self):
        return self._plant

    @property
    def config(self) -> EstimatorConfig:
        return self._config

    @property
    def setup(self) -> problem.EstimatorSetup:
        """What the plant and configuration fix (estimated coordinates, free sets, IMU bodies)."""
        return self._setup

    @property
    def articulated_view(self):
        """The plant's articulated view: the coordinates masks and JointState messages refer to."""
        return self._setup.view

    @property
    def joint_state_names(self) -> tuple:
        """Names accepted in joint-state input (articulated coordinate names)."""
        return self._setup.art_names

    @property
    def instance_masks(self) -> dict:
        """{model instance name: DofMask of its articulated coordinates} (Drake's DofMask::MakeFromModel)."""
        return dict(self._setup.instance_masks)

    @property
    def estimated_mask(self):
        """DofMask over the articulated coordinates: True = estimated (free), False = measured (locked)."""
        return self._setup.estimated_mask

    @property
    def floating_joints(self) -> tuple:
        return self._setup.floating_joints

    def imu_body(self, name: str):
        """The plant body the IMU ``name`` is mounted on."""
        if name not in self._imu_index:
            raise UnknownNameError(describe_unknown("IMU", name, list(self._names)))
        return self._setup.imu_bodies[self._imu_index[name]]

    def mounting(self, name: str) -> np.ndarray | None:
        """Current R_BS of IMU ``name`` (None until calibrated when configured as 'calibrate')."""
        if name not in self._R_BS:
            raise UnknownNameError(describe_unknown("IMU", name, list(self._R_BS)))
        value = self._R_BS[name]
        return None if value is None else value.copy()

    @property
    def R_WG(self) -> np.ndarray:
        """Current world alignment (IMU world G in the model world W)."""
        return self._R_WG.copy()

    def filter_counts(self) -> dict:
        """{IMU name: {counter: count}} of the raw IMUs' orientation filters (``orientation_filter.COUNTERS``)."""
        return self._raw_imus.counts()

    @property
    def odometry_base(self):
        """The base an odometry input drives (``odometry_input.OdometryBase``), or None."""
        return self._setup.odometry

    @property
    def odometry_stamp(self) -> float:
        """The last accepted odometry stamp (after its time offset; NaN: none since the last reset)."""
        return float(self._state.odometry[0]["last_stamp"])

    def reject_counts(self) -> dict:
        """{reason: count} of dropped inputs (all reasons, zeros included)."""
        totals = self._state.counts.sum(axis=0) + self._state.odometry[0]["counts"]
        counts = {reason.value: int(totals[i]) for i, reason in enumerate(rules.REASONS)}
        counts[RejectReason.UNKNOWN_SENSOR.value] += sum(self._unknown_sensors.values())
        return counts

    def reject_counts_by_source(self) -> dict:
        """{(source, reason): count} for the non-zero pairs (sources: IMU names, joint_states, odometry, clock)."""
        sources = [*self._names, "joint_states", "clock"]
        counts = {(sources[s], rules.REASONS[r].value): int(self._state.counts[s, r])
                  for s, r in zip(*np.nonzero(self._state.counts), strict=True)}
        odometry = self._state.odometry[0]["counts"]
        counts.update({("odometry", rules.REASONS[r].value): int(odometry[r]) for r in np.flatnonzero(odometry)})
        for name, count in self._unknown_sensors.items():
            counts[(name, RejectReason.UNKNOWN_SENSOR.value)] = count
        return counts

    def statistics(self) -> dict:
        """Cycle counters: cycles, resets (clock jumps), overwritten_samples (IMU samples dropped before any cycle
        used them, or late for an instant that ran without them: lost data), flushed_cycles (cycles run without a
        waited sample: an IMU's after the bounded wait of ``rules``, or a joint state's next one arrived first),
        solve_failures."""
        clock = self._state.clock[0]
        return {"cycles": self._cycles, "resets": int(clock["resets"]),
                "overwritten_samples": int(clock["overwritten"]),
                "flushed_cycles": int(clock["flushed"]),
                "solve_failures": self._solve_failures}

    def stale_sensors(self, now: float) -> tuple:
        """IMUs whose newest accepted sample is older than ``now - stale_timeout_s`` (or that never delivered):
        staleness judged from a clock, also when no cycle runs (the node's diagnostics timer)."""
        last = self._state.imu["last_stamp"]
        limit = float(now) - self._config.stale_timeout_s
        return tuple(name for name, stamp in zip(self._names, last, strict=True) if not stamp >= limit)

    # ------------------------------------------------------------------ inputs
    def observe_clock(self, now: float) -> bool:
        """Tell the estimator the receive clock; a clock that runs backwards (a looping bag under use_sim_time)
        resets tracking. Returns True when it reset."""
        resets = int(self._state.clock[0]["resets"])
        rules.observe_clock(self._state, self._settings, float(now))
        self._after_offer()
        return int(self._state.clock[0]["resets"]) != resets

    def _rebind_offers_on_first_use(self) -> None:
        """Arm a lazy binding of the offers' machine code, for a new state or new settings: the next offer binds
        ``rules.offer_imu``'s machine code for this state, settings, sample and message buffers
        (:meth:`_bind_and_offer`), called from then on without numba's per-call typing of their named tuples
        (``compiled_entry``); likewise the node's reading offer (:meth:`_bind_and_offer_reading`). Arguments:
        (state, settings, i: int, now: float, code: int, samples, row: int, input_index: int, run_cycles: bool,
        out). Bound on first use, not here: the lookup types the named tuples (~1 ms), which a batched replay,
        offering nothing one by one, never needs. Also chooses the per-message paths the settings allow
        (:meth:`_choose_message_paths`)."""
        self._offer = self._bind_and_offer
        self._offer_reading = self._bind_and_offer_reading
        self._choose_message_paths()

    def _choose_message_paths(self) -> None:
        """What the configuration fixes about a message's path, decided once per configuration rather than per
        message: a reading is offered in one compiled call (:meth:`process_imu_reading`) unless a heading filter runs
        or covariances are weighted; a message's cycle may be streamed (:meth:`_stream_cycle`) unless, besides those,
        a floating base takes its yaw from the odometry; missing encoders are looked for only where some coordinate
        is measured."""
        base = self._setup.odometry
        self._offers_readings = self._heading is None and not self._config.imu_covariance_weighting
        self._streams_cycles = self._offers_readings and not (base is not None and base.target.heading)
        self._any_measured = bool(self._measured.any())

    def _bind_and_offer(self, *arguments):
        """The first offer after :meth:`_rebind_offers_on_first_use`: binds the machine code, then offers through it."""
        self._offer = compiled_entry(rules.offer_imu, (self._state, self._settings, 0, 0.0, 0, self._sample, 0, -1,
                                                       True, self._message))
        return self._offer(*arguments)

    def _bind_and_offer_reading(self, *arguments):
        """The first reading offered after :meth:`_rebind_offers_on_first_use`: binds ``rules.offer_imu_reading``'s
        machine code for this state, settings, sample and message buffers (a read-only reading, as the node has it),
        then offers."""
        self._offer_reading = compiled_entry(rules.offer_imu_reading, (
            self._state, self._settings, 0, 0.0, 0.0, 0, _READING_EXAMPLE, self._sample, self._message,
            *self._reading_workspaces))
        return self._offer_reading(*arguments)

    def _after_offer(self) -> None:
        """A reset in the rules (a clock jump) also empties the calibration windows and restarts the solve."""
        resets = int(self._resets[0])
        if resets != self._resets_seen:
            self._resets_seen = resets
            for window in self._windows.values():
                window.clear()
            self._windows_emptied += 1

    def _offer_imu(self, name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                   angular_velocity_present, now, run_cycles: bool, accel=None, accel_present=True,
                   orientation_covariance=None) -> InputStatus:
        now_value = math.nan if now is None else float(now)
        self._message.size[0] = 0
        i = self._imu_index.get(name)
        if i is None:
            return self._unknown_imu(name, now_value)
        quaternion_wxyz, orientation_present = self._raw_imus.offer(
            i, stamp, quaternion_wxyz, orientation_present, angular_velocity, angular_velocity_present, accel,
            accel_present)
        quaternion = np.asarray(quaternion_wxyz, dtype=float).reshape(-1)
        gyro_present = angular_velocity_present and angular_velocity is not None
        gyro = np.asarray(angular_velocity if gyro_present else (0.0, 0.0, 0.0), dtype=float).reshape(-1)
        covariance = self._covariance_read(orientation_covariance)
        if (orientation_present and quaternion.size != 4) or gyro.size != 3 or covariance.size not in (0, 9):
            status, _ = parse_imu(stamp, quaternion_wxyz, angular_velocity, orientation_present,
                                  angular_velocity_present, orientation_covariance if covariance.size else None)
            return self._rejected_imu(i, now_value, status)
        stamp = math.nan if stamp is None else float(stamp)
        self._sample_stamp[0], self._sample_stamp_ns[0] = stamp, _stamp_ns(stamp)
        code = rules.validate_imu(quaternion, gyro, bool(orientation_present), gyro_present, covariance, self._sample,
                                  0)
        if self._heading is not None:  # issue 19.2: only the joint-centre constraint reads them (else NaN, absent)
            fill_accelerations(self._sample["f_S"], accel, accel_present)
        result = self._offer(self._state, self._settings, i, now_value, int(code), self._sample, 0, -1,
                             bool(run_cycles), self._message)
        if result == code and code >= 0:  # rejected by validation: parse_imu explains why
            self._after_offer()
            return parse_imu(stamp, quaternion_wxyz, angular_velocity, orientation_present,
                             angular_velocity_present, covariance if covariance.size else None)[0]
        return self._offered_imu(name, i, result, stamp, now_value)

    def _unknown_imu(self, name, now: float) -> InputStatus:
        """A sample of an IMU that is not configured: the clock observed, counted under its name, dropped."""
        rules.observe_clock(self._state, self._settings, now)
        self._after_offer()
        self._unknown_sensors[str(name)] += 1
        return rejected(RejectReason.UNKNOWN_SENSOR, describe_unknown("IMU", str(name), list(self._names)))

    def _rejected_imu(self, i: int, now: float, status: InputStatus) -> InputStatus:
        """A sample of IMU i the rules never see (arrays of the wrong sizes): the clock observed, ``status``'s
        reason counted, dropped."""
        rules.observe_clock(self._state, self._settings, now)
        self._after_offer()
        self._state.counts[i, rules.REASONS.index(status.reason)] += 1
        return status

    def _offered_imu(self, name, i: int, result: int, stamp: float, now: float) -> InputStatus:
        """After the rules took IMU i's sample (status ``result``, not a validation's rejection): a reset's
        consequences, the accepted orientation into the calibration window, the input's status."""
        self._after_offer()
        R_GS = self._sample_R_GS0
        if result < 0 and math.isfinite(R_GS[0, 0]):  # at the stamp the rules judged (offset applied)
            self._windows[name].append((float(self._sample_stamp[0]), R_GS.copy()))
        if result == rules.ACCEPTED:
            return ACCEPTED
        return self._status(result, stamp - self._config.imus[i].time_offset_s, now, RejectReason.ORIENTATION_ABSENT,
                            "orientation marked absent (covariance[0] == -1); gyro kept")

    def process_imu_reading(self, name: str, stamp: float, reading, now: float | None = None):
        """:meth:`process_imu` for a reading in ``rules.READING``'s layout (the node's, read from an Imu message's
        bytes: ``sensor_msgs/Imu``'s fields, quaternion (x, y, z, w), absent fields flagged by their covariance's
        first entry, REP-145): the same status and cycles. ``reading``: a read-only float64 array of 37 (a view of
        the message, as the node has it; another array is copied; one of another size is dropped and counted as
        ``mismatched_arrays``). Validated and offered in one compiled call (``rules.offer_imu_reading``) when the
        sample goes to the rules as it came (``RawImuFilters.passes``), no heading filter runs and covariances are not
        weighted (else through :meth:`process_imu`)."""
        if not (type(reading) is np.ndarray and reading.dtype is _FLOAT64 and reading.shape == _READING_SHAPE
                and not reading.flags.writeable and reading.flags.c_contiguous):
            reading = np.array(reading, dtype=float).reshape(-1)
            reading.flags.writeable = False
        i = self._imu_index.get(name)
        now_value = math.nan if now is None else float(now)
        if i is None:
            self._message.size[0] = 0
            return self._unknown_imu(name, now_value), ()
        if reading.size != rules.READING_SIZE:
            self._message.size[0] = 0
            return self._rejected_imu(i, now_value, rejected(
                RejectReason.MISMATCHED_ARRAYS, f"an IMU reading has {rules.READING_SIZE} values (sensor_msgs/Imu's "
                                                f"float64 fields, rules.READING), got {reading.size}")), ()
        orientation_present = reading[_ORIENTATION_FLAG] != -1.0
        if not self._offers_readings or not self._raw_imus.passes(i, orientation_present):
            return self.process_imu(
                name, stamp, reading[_WXYZ], reading[_GYRO], orientation_present=orientation_present,
                angular_velocity_present=reading[_GYRO_FLAG] != -1.0, now=now,
                linear_acceleration=None if reading[_ACCEL_FLAG] == -1.0 else reading[_ACCEL],
                orientation_covariance=reading[_ORIENTATION_COVARIANCE])
        stamp = math.nan if stamp is None else float(stamp)
        result, code = self._offer_reading(self._state, self._settings, i, now_value, stamp, _stamp_ns(stamp), reading,
                                           self._sample, self._message, *self._reading_workspaces)
        if result == code and code >= 0:  # rejected by validation: parse_imu explains why
            self._after_offer()
            return parse_imu(stamp, reading[_WXYZ], reading[_GYRO], orientation_present,
                             reading[_GYRO_FLAG] != -1.0)[0], ()
        return self._offered_imu(name, i, result, stamp, now_value), self._message_results()

    def _covariance_read(self, orientation_covariance) -> np.ndarray:
        """The orientation covariance (9,) the rules read: the message's with ``imu_covariance_weighting``, else
        none (empty: only REP-145's -1 flag, already read as ``orientation_present``, matters)."""
        if orientation_covariance is None or not self._config.imu_covariance_weighting:
            return self._no_covariance
        return np.asarray(orientation_covariance, dtype=float).reshape(-1)

    def _offer_joint_state(self, names, positions, velocities, stamp, now, run_cycles: bool) -> InputStatus:
        now_value = math.nan if now is None else float(now)
        stamp = math.nan if stamp is None else float(stamp)
        self._message.size[0] = 0
        status, sample = parse_joint_state(names, positions, velocities, stamp, self._setup.name_to_art)
        if sample is None:
            code, index, values, rates = rules.REASONS.index(status.reason), np.zeros(0, np.int64), (), ()
        else:
            code = rules.ACCEPTED if status.reason is None else rules.ACCEPTED_UNKNOWN_NAMES
            index, values = sample.indices, sample.positions
            rates = np.full(len(index), np.nan) if sample.velocities is None else sample.velocities
        result = rules.offer_joint_state(self._state, self._settings, stamp, _stamp_ns(stamp), now_value, code, index,
                                         np.asarray(values, dtype=float), np.asarray(rates, dtype=float), -1,
                                         run_cycles, self._message)
        self._after_offer()
        if result == code:
            return status
        return self._status(result, stamp - self._config.joint_state_time_offset_s, now_value,
                            RejectReason.UNKNOWN_NAME, status.detail)

    def process_odometry(self, stamp: float, position, quaternion_wxyz, frames_match: bool = True,
                         now: float | None = None):
        """Offer one pose of the driven base from the robot's odometry (``config.odometry``): ``position`` (3,) and
        ``quaternion_wxyz`` (4,) of the base link in the frame the base hangs from; ``frames_match`` False when the
        message's frames are not those (the caller checks them: ``unknown_frame``). Validated and checked as every
        input (``odometry_input.validate_odometry``, then the rules' stamp checks); kept for the cycles that match
        it (``rules``: the newest sample not after a cycle's stamp within ``stale_timeout_s``). Returns
        ``(status, results)``; odometry runs no cycle, so ``results`` is empty. Raises
        :class:`EstimatorStateError` when no odometry is configured."""
        base = self._setup.odometry
        if base is None:
            raise EstimatorStateError("process_odometry: this estimator has no odometry configured "
                                      "(EstimatorConfig.odometry)")
        now_value = math.nan if now is None else float(now)
        stamp = math.nan if stamp is None else float(stamp)
        self._message.size[0] = 0
        position = np.asarray(position, dtype=float).reshape(-1)
        quaternion = np.asarray(quaternion_wxyz, dtype=float).reshape(-1)
        if position.size != 3 or quaternion.size != 4:
            rules.observe_clock(self._state, self._settings, now_value)
            self._after_offer()
            self._state.odometry[0]["counts"][rules.REASONS.index(RejectReason.MISMATCHED_ARRAYS)] += 1
            return rejected(RejectReason.MISMATCHED_ARRAYS, f"odometry needs a position of 3 and a quaternion of 4 "
                                                            f"entries, got {position.size} and {quaternion.size}"), ()
        code = validate_odometry(position, quaternion, bool(frames_match), base.target, self._odometry_values)
        result = rules.offer_odometry(self._state, self._settings, stamp, _stamp_ns(stamp), now_value, code,
                                      self._odometry_values)
        self._after_offer()
        if result == code and code >= 0:
            reason = rules.REASONS[code]
            if reason is RejectReason.NON_FINITE:
                detail = f"odometry pose has non-finite entries: position {position.tolist()}"
            elif reason is RejectReason.UNKNOWN_FRAME:
                detail = "odometry header or child frame is not the driven base's"
            else:
                detail = describe_quaternion_problem(quaternion, float(np.linalg.norm(quaternion)))
            return rejected(reason, detail), ()
        return self._status(result, stamp - self._config.odometry.time_offset_s, now_value,
                            RejectReason.UNKNOWN_NAME, ""), ()

    def _status(self, result: int, stamp: float, now: float, partial: RejectReason, detail: str) -> InputStatus:
        """The InputStatus of a rules' result code; ``stamp`` the input's after its time offset (the one judged)."""
        if result == rules.ACCEPTED:
            return ACCEPTED
        if result < 0:
            return InputStatus(True, partial, detail)
        reason = rules.REASONS[result]
        return rejected(reason, _timing_detail(reason, stamp, now, self._config))

    def add_imu(self, name: str, stamp: float, quaternion_wxyz, angular_velocity=None,
                orientation_present: bool = True, angular_velocity_present: bool = True,
                now: float | None = None, linear_acceleration=None,
                linear_acceleration_present: bool = True, orientation_covariance=None) -> InputStatus:
        """Store the newest sample of IMU ``name`` without running a cycle (manual mode): R_GS as a (w, x, y, z)
        quaternion, gyro w_S in rad/s. ``orientation_present`` / ``angular_velocity_present`` are False for fields
        a message marks absent (covariance[0] == -1). Returns an :class:`InputStatus`; a bad sample is dropped and
        counted. A sample that replaces one no cycle has used is counted in ``statistics()["overwritten_samples"]``.
        ``linear_acceleration`` (m/s^2, S) feeds a raw IMU's orientation filter (``ImuConfig.orientation``).
        ``orientation_covariance`` (9,) row-major, the message's (REP-145): with ``imu_covariance_weighting`` it
        weights the sample (``inputs.orientation_variance``; None or all zeros: unknown, the configured weight).
        """
        return self._offer_imu(name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                               angular_velocity_present, now, False, linear_acceleration, linear_acceleration_present,
                               orientation_covariance)

    def process_imu(self, name: str, stamp: float, quaternion_wxyz, angular_velocity=None,
                    orientation_present: bool = True, angular_velocity_present: bool = True,
                    now: float | None = None, linear_acceleration=None, linear_acceleration_present: bool = True,
                    orientation_covariance=None):
        """Offer one IMU sample and run the cycles it completes (the rules of ``rules``: one instant, one cycle);
        returns ``(status, results)`` (usually 0 or 1 results). The node's and streaming replay's entry point.
        ``orientation_covariance`` as :meth:`add_imu`."""
        status = self._offer_imu(name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                                 angular_velocity_present, now, True, linear_acceleration, linear_acceleration_present,
                                 orientation_covariance)
        return status, self._message_results()

    def process_magnetic_field(self, name: str, stamp: float, field_T, frames_match: bool = True) -> InputStatus:
        """Offer one magnetometer sample of raw IMU ``name`` (tesla, in its sensor frame S; ``sensor_msgs/
        MagneticField``): kept for its orientation filter's matching rule (``orientation_filter``: the newest field
        not after a raw sample, within ``FilterSettings.field_timeout_s``). A bad one is dropped and counted in
        :meth:`filter_counts` (``field_invalid``, ``field_out_of_order``; ``field_frame_mismatch`` when
        ``frames_match`` is False: the ROS edge found the field in another frame than its IMU's messages,
        ``ros.magnetometer_frames``); runs no cycle."""
        i = self._imu_index.get(name)
        if i is None:
            self._unknown_sensors[str(name)] += 1
            return rejected(RejectReason.UNKNOWN_SENSOR, describe_unknown("IMU", str(name), list(self._names)))
        why = self._raw_imus.offer_field(i, stamp, field_T, frames_match)
        if why is None:
            return ACCEPTED
        detail = {"not_filtered": f"IMU {name!r} takes its orientation from its messages (orientation: sensor); "
                                  "its magnetic field is not used",
                  "field_frame_mismatch": f"the magnetic field of IMU {name!r} is not in the frame of its Imu "
                                          "messages",
                  "field_invalid": f"expected a finite, non-zero field (T) at a finite stamp, got {field_T!r} at "
                                   f"{stamp!r}",
                  "field_out_of_order": f"field stamp {stamp!r} s is not after the previous field's"}[why]
        reason = {"field_out_of_order": RejectReason.OUT_OF_ORDER,
                  "field_frame_mismatch": RejectReason.UNKNOWN_FRAME}.get(why, RejectReason.NON_FINITE)
        return InputStatus(False, reason, detail)

    def add_joint_state(self, names, positions, velocities=None, stamp: float = 0.0, now: float | None = None):
        """Merge a (possibly partial) joint-state message by name without running a cycle. Returns an
        :class:`InputStatus`. Positions of measured coordinates lock them in the next cycle; values of estimated
        coordinates are stored but not used by the solver. Unknown names are ignored and counted."""
        return self._offer_joint_state(names, positions, velocities, stamp, now, False)

    def process_joint_state(self, names, positions, velocities=None, stamp: float = 0.0, now: float | None = None):
        """Merge a joint-state message and run the cycles it completes; returns ``(status, results)``."""
        status = self._offer_joint_state(names, positions, velocities, stamp, now, True)
        return status, self._message_results()

    def ready(self) -> bool:
        """True when a cycle should run (manual mode; see ``rules``)."""
        return bool(rules.ready(self._state, self._settings))

    def step(self, stamp: float | None = None) -> EstimatorResult:
        """Run one cycle at ``stamp`` (default: the instant :meth:`ready` found, else the newest input stamp)."""
        clock = self._state.clock[0]
        if stamp is None:
            if math.isnan(clock["newest"]):
                raise EstimatorStateError("step() without a stamp needs at least one accepted input sample")
            stamp = clock["newest"] if math.isnan(clock["instant"]) else clock["instant"]
        self._message.size[0] = 0
        rules.take_cycle(self._state, self._settings, float(stamp), -1, -1, self._message)
        return self._message_results()[0]

    def _message_results(self) -> tuple:
        n = int(self._message.size[0])
        if n == 0:
            return ()
        if n == 1:
            result = self._stream_cycle()
            if result is not None:
                return (result,)
        run = self._solve_cycles(self._message, n, None)
        return tuple(run.result(k) for k in range(n))

    def _stream_cycle(self) -> EstimatorResult | None:
        """A message's one cycle in the common case (tracking, something observed, no reset, no heading filter,
        no covariance weighting, no floating-base yaw from odometry, no locked floating quaternion), or None (then
        :meth:`_solve_cycles` runs it). The steps of :meth:`_solve_cycles` over a one-cycle run in one compiled call
        (``stream.stream_cycle``: the same kernels, the same bits; test_estimator_rules' and test_estimator_estimator's
        streaming == batch tests), into buffers allocated once per solver. A frame the solver fails is left to
        :meth:`_solve_cycles` (which retries it from the same start and state, then solves it alone). Its
        ``solve_time_s`` is the compiled call's (the solve, the velocities and the sensor errors)."""
        message = self._message
        if not self._streams_cycles or self._needs_assemble or self._message_reset[0]:
            return None
        frames = self._assembler.frame_tracking()
        if frames.held_floating:
            return None
        if frames is not self._stream_frames:
            self._bind_stream_cycle(frames)
        b = self._stream
        rotated = b.R_GS[0] if self._R_WG_is_identity else self._R_WG @ np.ascontiguousarray(
            message.sample["R_GS"][0])  # Estimator._observations' products, one per sample
        q_last, q_current = self._q_last, self._q_current
        regularization = float(self._config.velocity_regularization)
        started = time.perf_counter()
        outcome = self._cycle_entry(frames.tracker, message, b, self._stream_problem, self._tree, frames.held_q,
                                    frames.floating_q, q_current, q_current if q_last is None else q_last,
                                    q_last is not None, rotated, self._R_WG, regularization)
        solve_time = time.perf_counter() - started
        if outcome not in (stream.STREAMED, stream.SINGULAR_GYROS):
            return None
        self._is_initialized = True
        self._q_current = b.Q[0].copy()
        if outcome == stream.SINGULAR_GYROS:
            raise np.linalg.LinAlgError(_SINGULAR_GYROS)
        self._q_last = self._q_current
        self._cycles += 1
        stale = message.stale[0]
        uncalibrated, missing = self._cycle_flags(stale, message.encoder[0]["have"] if self._any_measured else None)
        return EstimatorResult.of_cycle(
            sensor_names=self._names, articulated_names=self._setup.art_names, position_names=self._position_names,
            velocity_names=self._velocity_names, stamp=float(b.stamp[0]), q=b.Q[0], v=b.V[0],
            velocity_from_gyro=b.from_gyro[0], X_WB=b.X_WB[0], goal=b.goal[0], solved=True, failure="",
            errors_deg=b.errors[0], observed=b.observed[0], stale=stale, uncalibrated=uncalibrated, missing=missing,
            weights=self._setup.weights, solve_time_s=solve_time, tracking_reset=False, cycle=self._cycles,
            initialized=True)

    def _cycle_flags(self, stale, have_encoder) -> tuple:
        """``(uncalibrated, missing)`` of cycles (rows, or one row) with these ``stale`` flags (n_imu per row) and
        ``have_encoder`` flags (n_art per row; None: no coordinate is measured, nothing is missing): the sensors not
        stale and waiting for calibration, the measured coordinates no encoder has reported. The one computation of
        a batch run's (:meth:`_solve_cycles`) and of a streamed cycle's (:meth:`_stream_cycle`)."""
        uncalibrated = self._no_sensors if self._all_calibrated and stale.ndim == 1 else ~stale & ~self._calibrated
        return uncalibrated, self._missing(have_encoder) if have_encoder is not None else ()

    def _bind_stream_cycle(self, frames) -> None:
        """``stream.stream_cycle``'s machine code for these arguments' types (``compiled_entry``), bound when the
        Assembler's tracker is new (a new solver, a re-initialization); the other fixed arguments are replaced only
        with the solver, whose tracker is then new too."""
        b = self._stream
        self._cycle_entry = compiled_entry(stream.stream_cycle, (
            frames.tracker, self._message, b, self._stream_problem, self._tree, frames.held_q, frames.floating_q,
            self._q_current, self._q_current, True, b.R_GS[0], self._R_WG, 0.0))
        self._stream_frames = frames

    def feed(self, inputs: OfflineInputs, progress=None) -> OfflineRun:
        """Offer a window of a recording (in offering order, after the windows fed before) and run every cycle
        it completes; the state carries from one window to the next, so the cycles do not depend on the windows.
        The run's ``rejected`` and ``input`` refer to these inputs; its cycle numbers, counters and statistics
        count from the last :meth:`reset`. ``progress(fraction)`` is called between the solver's chunks."""
        odometry = self._setup.odometry
        window = validate_window(self._raw_imus.apply(inputs), self._setup.name_to_art, len(self._names),
                                 None if odometry is None else odometry.target, self._config.imu_covariance_weighting)
        m = len(window.kind)
        cycles = rules.new_cycles(rules.cycle_capacity(m, len(self._names)), len(self._names),
                                  len(self._setup.art_names))
        status = np.empty(m, dtype=np.int64)
        rules.schedule(self._state, self._settings, window, cycles, status)
        self._after_offer()
        return self._solve_cycles(cycles, int(cycles.size[0]), status >= 0, progress)

    def run(self, inputs: OfflineInputs, progress=None) -> OfflineRun:
        """All cycles of ``inputs`` from the initial state (:meth:`reset`, then :meth:`feed`)."""
        self.reset()
        return self.feed(inputs, progress)

    # ------------------------------------------------------------------ the solve
    def _solve_cycles(self, cycles, C: int, rejected_inputs, progress=None) -> OfflineRun:
        """The outputs of the first ``C`` cycles of ``cycles``: q (assemble after a reset, then warm-started
        tracking), v (gyros, finite differences, encoders), poses and sensor errors."""
        stale = cycles.stale[:C]
        cycle, encoder = cycles.cycle[:C], cycles.encoder[:C]
        n_imu = len(self._names)
        R_GS, w_S = np.empty((C, n_imu, 3, 3)), np.empty((C, n_imu, 3))
        observed, use_gyro = np.empty((C, n_imu), bool), np.empty((C, n_imu), bool)
        stream.read_samples(cycles.sample, cycles.stale, self._weighted, self._calibrated, R_GS, w_S, observed,
                            use_gyro)
        factors = self._weight_factors(cycles.sample["R_var"][:C])
        if self._heading is not None:  # issue 19.2: gyro biases from the orientation streams (module heading)
            w_S = self._heading.unbiased_gyros(cycle["stamp"], cycle["reset"], R_GS, w_S, ~stale)
            self._heading.begin_run(cycles.sample["stamp"][:C], w_S, cycles.sample["f_S"][:C])
        solve = self._solve(cycle["stamp"], cycle["reset"], observed, R_GS, encoder, cycles.odometry[:C], progress,
                            factors)
        Q, turn = self._odometry_heading(solve, cycles.odometry[:C]["values"], cycle["reset"])
        v_prior = self._velocity_priors(Q, cycle, encoder)
        V = np.empty_like(v_prior)
        from_gyro = np.zeros(v_prior.shape, dtype=bool)
        X_WB = solve["X_WB"]
        if C and not kinematics_and_velocities(self._tree, Q, solve["have_X_WB"], v_prior, use_gyro, w_S,
                                               self._setup.body_index, self._R_BS_array, self._setup.free_v,
                                               float(self._config.velocity_regularization), X_WB, V, from_gyro):
            raise np.linalg.LinAlgError(_SINGULAR_GYROS)
        errors = np.empty((C, len(self._names)))
        if turn is not None:  # the observations turned with the solution: the errors of the solve
            R_GS = self._turned_observations(R_GS, turn)
        sensor_errors(X_WB, observed, self._setup.body_index, self._R_BS_array, self._R_WG, R_GS, errors)
        uncalibrated, missing = self._cycle_flags(stale, encoder["have"])
        if C:
            self._q_last = Q[-1].copy()
        first_cycle = self._cycles
        self._cycles += C
        return OfflineRun(
            stamp=cycle["stamp"].copy(), stamp_ns=cycle["stamp_ns"].copy(), input=cycle["input"].copy(), q=Q,
            v=V, velocity_from_gyro=from_gyro, X_WB=X_WB, goal=solve["goal"], solved=solve["solved"],
            failure=solve["failure"], sensor_errors_deg=errors, observed=observed,
            weights=np.where(observed, self._setup.weights * (1.0 if factors is None else factors), 0.0),
            stale=stale.copy(),
            uncalibrated=uncalibrated, missing=missing,
            tracking_reset=solve["tracking_reset"], initialized=solve["initialized"],
            solve_time_s=solve["solve_time"], sensor_names=self._names,
            position_names=self._position_names, velocity_names=self._velocity_names,
            articulated_names=self._setup.art_names, first_cycle=first_cycle, tree=self._tree,
            **self._summary(rejected_inputs))

    def _odometry_heading(self, solve, odometry, reset):
        """``(Q, Δ)``: the solves' q, with a floating base's yaw taken from the odometry (``use_yaw``; module
        ``odometry_input``: each solution turned by Rz(Δ) about the world's vertical at the output, the solve itself
        left in the IMUs' frame); the turned cycles' poses are recomputed from Q. Δ (C,) NaN where not turned, None
        without a floating base's yaw."""
        base = self._setup.odometry
        if base is None or not base.target.heading:
            return solve["q"], None
        R_WF = np.ascontiguousarray(base.target.X_FW[:3, :3].T)
        Q = np.empty_like(solve["q"])
        turn = np.empty(len(Q))
        turn_headings(solve["q"], np.ascontiguousarray(odometry[:, YAW]), reset, base.joint.position_start, R_WF,
                      np.ascontiguousarray(base.target.X_BM[0, :3]), matrix_to_quat(R_WF), self._heading_turn, Q, turn)
        solve["have_X_WB"][np.isfinite(turn)] = False  # the solver's poses are the unturned ones
        return Q, turn

    def _turned_observations(self, R_GS, turn):
        """R_GS (C, n_imu, 3, 3) as the turned solution sees it: R_WG^T Rz(Δ) R_WG R_GS where Δ is finite."""
        rows = np.flatnonzero(np.isfinite(turn))
        turned = R_GS.copy()
        if rows.size:
            M = self._R_WG.T @ rotation_z(turn[rows]) @ self._R_WG
            turned[rows] = np.einsum("cij,cnjk->cnik", M, R_GS[rows])
        return np.ascontiguousarray(turned)

    def _weight_factors(self, R_var):
        """(C, n_imu) each sample's weight factor in the orientation solve with ``imu_covariance_weighting``:
        f = σ_ref² / v, v = trace(Σ)/3 the sample's mean orientation variance (``SAMPLE.R_var``), σ_ref =
        ``imu_orientation_stddev``; 1 where v is unknown (an all-zero covariance: REP-145's "unknown"). The sensor's
        weight is then ``weight x f``: Simbody's OrientationSensors take one scalar weight per sensor, so the
        covariance enters through its mean variance, which, unlike Σ's axes, does not depend on the frame Σ is
        expressed in (REP-145 leaves it open); with equal configured weights the solve is the inverse-variance
        weighted least squares, whose covariance (``odometry.SolveCovarianceModel``) is (Σ_i J_iᵀ J_i / v_i)⁻¹.
        None when weighting is off (every factor 1: the configured weights, bit for bit)."""
        if not self._config.imu_covariance_weighting:
            return None
        reference = self._config.imu_orientation_stddev ** 2
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(R_var), reference / R_var, 1.0)

    def _summary(self, rejected_inputs) -> dict:
        """The run's inputs rejected and the counters so far (a window's run; None: a message's cycles, which
        the caller asks the counters for itself)."""
        if rejected_inputs is None:
            return {"rejected": np.zeros(0, dtype=bool), "counts_by_reason": {}, "counts_by_source": {},
                    "statistics": {}}
        return {"rejected": rejected_inputs, "counts_by_reason": self.reject_counts(),
                "counts_by_source": self.reject_counts_by_source(), "statistics": self.statistics()}

    def _observations(self, observed, R_GS, out=None) -> np.ndarray:
        """R_WO (C, solver sensors, 3, 3) = R_WG R_GS of the observed samples, NaN elsewhere (into ``out``
        when given)."""
        columns = self._solver_columns
        if out is None and self._R_WG_is_identity and observed[:, columns].all():
            return R_GS[:, columns]  # every sample observed (a batch window's usual case): one gather, no NaN fill
        R_WO = np.full((len(observed), len(columns), 3, 3), np.nan) if out is None else out
        if out is not None:
            R_WO.fill(np.nan)
        rows, slots = np.nonzero(observed[:, columns])
        samples = R_GS[rows, columns[slots]]
        # one 3x3 product per sample (a stacked matmul computes each matrix alone: the bits do not depend on C)
        R_WO[rows, slots] = samples if self._R_WG_is_identity else self._R_WG @ samples
        return R_WO

    def _missing(self, have_encoder) -> np.ndarray:
        """(C, n_art) (or (n_art,) for one row) the measured coordinates no encoder has reported (those the odometry
        sets are not missing)."""
        missing = ~self._setup.estimated & ~have_encoder
        if self._setup.odometry is not None:
            missing[..., self._setup.odometry.art_index] = False
        return missing

    def _solve(self, stamp, reset, observed, R_GS, encoder, odometry, progress, factors=None) -> dict:
        """q per cycle: assemble on the first observed cycle after a (re)start, then warm-started tracking in
        chunks (``Assembler.track_sequence``, which also hands out the tracked cycles' body poses); a cycle
        nothing observes, or whose solve fails, keeps the previous free coordinates."""
        C = len(stamp)
        out = {"q": np.empty((C, len(self._setup.q_default))), "goal": np.zeros(C), "solved": np.zeros(C, bool),
               "initialized": np.zeros(C, bool), "tracking_reset": np.zeros(C, bool), "solve_time": np.zeros(C),
               "failure": [""] * C, "X_WB": np.empty((C, self._plant.num_bodies(), 4, 4)),
               "have_X_WB": np.zeros(C, bool)}
        R_WO = self._observations(observed, R_GS)
        weights = None if factors is None else np.ascontiguousarray(factors[:, self._solver_columns])
        any_observed = observed.any(axis=1)
        heading = self._heading  # issue 19.2 (module heading): cycle by cycle, observations corrected before
        c = 0
        while c < C:
            if reset[c]:
                self._q_current = self._setup.q_default.copy()
                self._needs_assemble = True
                self._is_initialized = not self._setup.free_q.any()
                if heading is not None:
                    heading.reset()
            out["tracking_reset"][c] = self._needs_assemble
            if heading is not None:
                heading.correct(R_WO[c], self._solver_columns)
            if not any_observed[c] or self._needs_assemble:
                if weights is not None:
                    self._assembler.set_observation_weights(weights[c])
                self._solve_one(c, stamp[c], R_WO[c] if any_observed[c] else None, encoder, odometry, out)
                self._heading_update(c, stamp, R_WO, out)
                c += 1
                continue
            end = c + 1
            while heading is None and end < C and not reset[end] and end - c < TRACK_CHUNK:
                end += 1
            self._track_chunk(c, end, stamp, R_WO, any_observed, encoder, odometry, out, weights)
            self._heading_update(c, stamp, R_WO, out)
            c = end
            if progress is not None:
                progress(c / C)
        return out

    def _heading_update(self, c, stamp, R_WO, out) -> None:
        """Issue 19.2 hook: the heading filter's step after cycle c's solve (one-cycle runs when it is on)."""
        if self._heading is not None and out["solved"][c]:
            self._heading.update(out["q"][c], stamp[c], R_WO[c], self._solver_columns, self._R_BS_array, c)

    def _heading_filter(self, config) -> HeadingFilter | None:
        """Issue 19.2 hook: the heading filter of ``config.heading_estimation`` (None when off)."""
        settings = config.heading_estimation
        return HeadingFilter(self._setup, settings, config.stale_timeout_s,
                             [imu.position for imu in config.imus]) if settings.enabled else None

    def heading_estimates(self) -> dict:
        """{IMU name: {"heading_offset_rad", "heading_std_rad", "observable", "gyro_bias" (3,) rad/s}} of the
        heading estimation (``config.heading_estimation``; see ``core.estimator.heading``); {} when it is off."""
        if self._heading is None:
            return {}
        biases = self._heading.gyro_bias()
        return {name: {"heading_offset_rad": offset, "heading_std_rad": std, "observable": observable,
                       "gyro_bias": biases[name]}
                for name, (offset, std, observable) in self._heading.offsets().items()}

    def _locked(self, q, encoder, odometry, c):
        """q with the measured coordinates at cycle c's encoder values and the base coordinates the odometry sets
        at its matched values (none matched: they hold) (``stream.locked_positions``, which the chunks' frames and
        the node's one-cycle path run too); ``encoder`` (C, n_art), ``odometry`` (C,) the cycles' records."""
        problem = self._stream_problem
        stream.locked_positions(q, encoder, odometry, np.array([c]), problem.measured, problem.art_q,
                                problem.odometry_q, q[None])  # q's locked coordinates are q's: out may be q
        return q

    def _solve_one(self, c, stamp, R_WO, encoder, odometry, out, track=False) -> None:
        """Cycle c alone: nothing observed (q held), or assemble (or track) from the current q."""
        q = self._locked(self._q_current.copy(), encoder, odometry, c)
        if R_WO is None:
            out["failure"][c] = _NOTHING_OBSERVED
        else:
            started = time.perf_counter()
            self._assembler.set_positions(q)
            self._osensors.move_all_observations(R_WO)
            try:
                goal = self._assembler.track(stamp) if track else self._assembler.assemble()
                out["goal"][c] = float(goal)
                q = self._assembler.get_positions()
                out["solved"][c] = True
                self._needs_assemble = False
                self._is_initialized = True
            except (RuntimeError, ValueError) as error:
                out["failure"][c] = f"assembler failed: {error}"
                self._solve_failures += 1
            out["solve_time"][c] = time.perf_counter() - started
        out["q"][c] = q
        self._q_current = q
        out["initialized"][c] = self._is_initialized

    def _track_chunk(self, c, end, stamp, R_WO, any_observed, encoder, odometry, out, weights=None) -> None:
        """Cycles [c, end) (no reset inside) tracked in one compiled call; redone cycle by cycle when a frame
        fails (the failed frame keeps its previous coordinates, as alone). ``weights`` (C, solver sensors) the
        observations' weight factors (:meth:`_weight_factors`), None: the configured weights."""
        frames = c + np.flatnonzero(any_observed[c:end])
        locked = np.full((end - c, len(self._setup.q_default)), np.nan)
        problem = self._stream_problem  # a cycle no odometry matched holds the previous cycle's values, held or solved
        stream.locked_positions(self._q_current.copy(), encoder, odometry, np.arange(c, end), problem.measured,
                                problem.art_q, problem.odometry_q, locked)
        locked = locked[frames - c]
        contiguous = len(frames) == end - c
        poses = out["X_WB"][c:end] if contiguous else np.empty((len(frames),) + out["X_WB"].shape[1:])
        started = time.perf_counter()
        self._assembler.set_positions(self._locked(self._q_current.copy(), encoder, odometry, c))
        try:
            Q, info = self._assembler.track_sequence(stamp[frames], R_WO[frames], positions=locked, return_info=True,
                                                     body_poses=poses,
                                                     observation_weights=None if weights is None else weights[frames])
        except RuntimeError:
            for k in range(c, end):
                out["tracking_reset"][k] = False
                if weights is not None:
                    self._assembler.set_observation_weights(weights[k])
                self._solve_one(k, stamp[k], R_WO[k] if any_observed[k] else None, encoder, odometry, out,
                                track=True)
            return
        elapsed = time.perf_counter() - started
        if not contiguous:
            out["X_WB"][frames] = poses
        out["have_X_WB"][frames] = True
        out["q"][frames] = Q
        out["goal"][frames] = info["goal"]
        out["solved"][frames] = True
        out["solve_time"][frames] = elapsed / len(frames)
        self._is_initialized = True
        out["initialized"][c:end] = True
        if contiguous:  # every cycle observed (the usual chunk): nothing is held
            self._q_current = Q[-1].copy()
            return
        held = self._q_current
        for k in range(c, end):
            if any_observed[k]:
                held = out["q"][k]
            else:
                out["q"][k] = self._locked(held.copy(), encoder, odometry, k)
                out["failure"][k] = _NOTHING_OBSERVED
                held = out["q"][k]
        self._q_current = held.copy()

    def _velocity_priors(self, Q, cycle, encoder) -> np.ndarray:
        """Finite differences of q over the previous cycle (none after a reset), encoder velocities on the
        measured coordinates (``stream.velocity_priors``, the node's one-cycle path's too)."""
        v_prior = np.empty((len(Q), self._plant.num_velocities()))
        q_before = np.full(len(self._setup.q_default), np.nan) if self._q_last is None else self._q_last
        stream.velocity_priors(self._tree, cycle, encoder, q_before, np.ascontiguousarray(Q),
                               self._stream_problem.measured, self._setup.art_v, v_prior)
        return v_prior

    # ------------------------------------------------------------------ settings and calibration
    def update_settings(self, config: EstimatorConfig) -> None:
        """Adopt a new configuration that differs from the current one only in tuning (timing, accuracy,
        regularization, world alignment, heading reference/axis, calibration window, joint limits): a runtime
        parameter change. The IMUs and the estimated joints fix the problem's structure; changing them raises
        :class:`EstimatorConfigError` (rebuild the Estimator). Calibrated mountings are kept; an explicit new
        ``R_WG`` replaces a calibrated alignment.
        """
        if not isinstance(config, EstimatorConfig):
            raise TypeError(f"config: expected EstimatorConfig, got {type(config).__name__}")
        old = self._config
        same_imus = [(i.name, i.body, i.model_instance, i.weight) for i in config.imus] == [
            (i.name, i.body, i.model_instance, i.weight) for i in old.imus]
        if not same_imus or dict(config.estimated_joints) != dict(old.estimated_joints) or (
            config.default_estimated != old.default_estimated
        ):
            raise EstimatorConfigError(
                "update_settings changes tuning only; the IMUs (names, bodies, weights) and the estimated joints "
                "are fixed for an Estimator: build a new one to change them"
            )
        self._config = config
        self._settings = self._setup.rules_settings(config)
        self._rebind_offers_on_first_use()
        self._state.imu["offset_ns"] = problem.time_offsets_ns(config)[:len(self._names)]
        if not np.array_equal(config.R_WG, old.R_WG):
            self._align(config.R_WG)
        if config.calibration_window != old.calibration_window:
            self._windows = {name: deque(window, maxlen=self._window_length())
                             for name, window in self._windows.items()}
        if config.accuracy != old.accuracy or config.use_joint_limits != old.use_joint_limits:
            self._build_solver()
        if config.heading_estimation != old.heading_estimation or config.stale_timeout_s != old.stale_timeout_s:
            self._heading = self._heading_filter(config)
        self._choose_message_paths()  # (the heading filter may have changed since the offers were rebound)

    def calibration_pose(self) -> np.ndarray:
        """The pose calibration assumes the robot holds: default positions (OpenSense's default pose), with the
        measured coordinates at their latest encoder values."""
        q = self._setup.q_default.copy()
        measured = ~self._setup.estimated & self._state.encoder["have"]
        q[self._setup.art_q[measured]] = self._state.encoder["q"][measured]
        return q

    def _calibration_windows(self, needed, now) -> dict:
        """{name: (N, 3, 3)} the samples of each IMU's window that belong to the calibration: refuses (naming
        them) IMUs without samples or stale at ``now`` (default: the newest input stamp), and keeps of each window
        only the samples after its last gap longer than ``stale_timeout_s`` (samples from before a silence are
        from another pose)."""
        missing = [name for name in needed if not self._windows[name]]
        if missing:
            raise CalibrationError(f"no orientation samples yet from IMU(s) {missing}; calibration needs them all")
        reference = self._state.clock[0]["newest"] if now is None else float(now)
        timeout = self._config.stale_timeout_s
        stale = [name for name in needed if self._windows[name][-1][0] < reference - timeout]
        if stale:
            raise CalibrationError(f"IMU(s) {stale} are stale: no sample within {timeout:g} s before "
                                   f"{reference:.6f} s; calibration uses only samples of its window")
        windows = {}
        for name in needed:
            samples = list(self._windows[name])[-self._config.calibration_window:]  # a recording keeps more
            start = len(samples) - 1
            while start > 0 and samples[start][0] - samples[start - 1][0] <= timeout:
                start -= 1
            windows[name] = np.stack([R for _, R in samples[start:]])
        return windows

    def calibrate(self, q_cal=None, max_spread_deg: float = 2.0, sensors=None, now: float | None = None
                  ) -> CalibrationResult:
        """Compute R_BS of the IMUs configured with mounting 'calibrate' (or of ``sensors``), and the heading of
        the world alignment when ``heading_reference`` is configured, from the recent window of samples
        (``calibration_window`` per IMU, averaged) at the static pose ``q_cal`` (default
        :meth:`calibration_pose`). Implements OpenSense's IMUPlacer through
        ``ros_dofkit.core.assembly.calibrate_imus``: R_BS = R_WB(q_cal)^T R_WG R_GS. Raw IMUs (orientation from the
        filter) with known mountings are aligned in heading with the model at ``q_cal`` (``heading_offsets``).

        Raises :class:`CalibrationError` (nothing changes) when an IMU has no samples, is stale at ``now``
        (default: the newest input stamp), or moved by more than ``max_spread_deg`` over the window. On success
        the new mountings and alignment are used from the next cycle on, which starts tracking afresh.
        """
        names = [imu.name for imu in self._config.imus if imu.needs_calibration] if sensors is None else list(sensors)
        for name in names:
            if name not in self._windows:
                raise UnknownNameError(describe_unknown("IMU", str(name), list(self._windows)))
        heading = self._config.heading_reference
        aligned = [name for name in self._raw_imus.alignable() if self._R_BS[name] is not None and name not in names
                   ] if sensors is None else []
        needed = list(dict.fromkeys(names + ([heading] if heading else []) + aligned))
        if not needed:
            raise CalibrationError(
                "nothing to calibrate: no IMU is configured with mounting 'calibrate' and no heading_reference is set"
            )
        windows = self._calibration_windows(needed, now)
        spread = 0.0
        for window in windows.values():
            mean = average_rotations(window)
            spread = max(spread, max(math.degrees(rotation_angle_between(mean, R)) for R in window))
        if spread > max_spread_deg:
            raise CalibrationError(
                f"the IMUs moved during the calibration window: samples spread {spread:.3g} deg from their mean "
                f"(at most {max_spread_deg:g} deg allowed); hold the calibration pose still and retry"
            )
        q_cal = self.calibration_pose() if q_cal is None else np.asarray(q_cal, dtype=float)
        calibration = calibrate_imus(
            self._plant, q_cal, {name: self.imu_body(name).index for name in needed}, windows, alignment=self._R_WG,
            base_imu=heading, base_heading_axis=self._config.heading_axis if heading else None)
        for name in names:
            self._R_BS[name] = np.array(calibration.R_BS[name])
        self._align(calibration.R_GX)
        R_WB = self._plant.calc_body_poses(q_cal)[..., :3, :3]
        offsets = self._raw_imus.align_headings({name: (
            average_rotations(windows[name]), self._R_WG.T @ R_WB[self.imu_body(name).index] @ self._R_BS[name])
            for name in aligned})
        for name in aligned:
            self._windows[name].clear()  # samples of the old heading
        self._windows_emptied += bool(aligned)
        self._restart_with_new_mountings()
        self._calibration = CalibrationResult(
            R_BS={name: _frozen(calibration.R_BS[name]) for name in names},
            R_WG=_frozen(calibration.R_GX),
            heading_angle=float(calibration.heading_angle),
            q_cal=_frozen(q_cal),
            max_spread_deg=spread,
            num_samples={name: len(window) for name, window in windows.items()},
            heading_offsets=offsets,
        )
        return self._calibration

    def _restart_with_new_mountings(self) -> None:
        """After mountings or filter headings changed: a new solver, and tracking starts afresh at the next cycle."""
        self._build_solver()
        if self._heading is not None:
            self._heading.calibrated()
        self._q_last = None
        self._state.clock["stamp_prev"][0] = np.nan  # no finite difference across the change of mountings

    @property
    def calibration(self) -> CalibrationResult | None:
        """The last successful :meth:`calibrate`'s result (None before one)."""
        return self._calibration

    def filtered_imus(self) -> list:
        """Names of the IMUs whose orientation comes from their raw-IMU filter (``RawImuFilters.alignable``)."""
        return self._raw_imus.alignable()

    # ------------------------------------------------------------------ recording orientations (hinge calibration)
    def _window_length(self) -> int:
        return max(self._config.calibration_window, self._recording)

    def record_orientations(self, max_samples: int) -> None:
        """Keep up to ``max_samples`` of each IMU's accepted orientations (R_GS as the rules take them: a raw IMU's
        from its filter) from now on: the calibration windows grow, their recent samples kept (bounded memory; a
        reset still empties them). :meth:`recorded_orientations` hands them out; calibration keeps using the last
        ``calibration_window`` of them."""
        if isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1:
            raise EstimatorConfigError(f"max_samples: expected an integer >= 1, got {max_samples!r}")
        self._recording = max_samples
        self._windows = {name: deque(window, maxlen=self._window_length()) for name, window in self._windows.items()}

    @property
    def orientation_windows_emptied(self) -> int:
        """How many times kept orientations were dropped: by :meth:`reset`, by a clock jump back (the rules' reset),
        or by :meth:`calibrate` turning raw IMUs' headings (their samples of the old heading). A recording
        (:meth:`record_orientations`) that spans a change of this count lost samples."""
        return self._windows_emptied

    def newest_orientation_stamp(self) -> float:
        """The stamp (s) of the newest accepted orientation of any IMU (NaN: none kept)."""
        return max((window[-1][0] for window in self._windows.values() if window), default=math.nan)

    def recorded_orientations(self) -> dict:
        """{IMU name: ``OrientationSeries`` (stamps (K,), R_GS (K, 3, 3))} of the samples kept since
        :meth:`record_orientations` (and the calibration window's before it), IMUs with at least two; the recording
        stops (the windows shrink back to ``calibration_window``)."""
        series = {name: OrientationSeries(np.array([t for t, _ in window]), np.stack([R for _, R in window]))
                  for name, window in self._windows.items() if len(window) >= 2}
        self._recording = 0
        self._windows = {name: deque(window, maxlen=self._window_length()) for name, window in self._windows.items()}
        return series

    def adopt_hinge_calibration(self, R_BS: dict, filter_turns: dict) -> None:
        """Adopt a hinge calibration (``core.assembly.hinge_calibration``): the mountings ``R_BS`` {IMU: (3, 3)} and
        each raw IMU's filter output turned about its vertical by ``filter_turns`` {IMU: rad}, as the offline replay
        adopts them (``filter_heading`` += turn). Their windows are emptied (samples of the old heading); tracking
        starts afresh at the next cycle. Raises :class:`UnknownNameError` for a name that is not an IMU, and
        :class:`CalibrationError` for a turn of an IMU without a filter (nothing changes)."""
        for name in [*R_BS, *filter_turns]:
            if name not in self._imu_index:
                raise UnknownNameError(describe_unknown("IMU", str(name), list(self._names)))
        unfiltered = sorted(set(filter_turns) - set(self.filtered_imus()))
        if unfiltered:
            raise CalibrationError(f"adopt_hinge_calibration: IMU(s) {unfiltered} have no orientation filter to turn "
                                   f"(filtered: {self.filtered_imus()})")
        self._raw_imus.turn_headings(filter_turns)
        for name, R in R_BS.items():
            self._R_BS[name] = np.array(R, dtype=float)
        for name in {*R_BS, *filter_turns}:
            self._windows[name].clear()
        self._restart_with_new_mountings()
