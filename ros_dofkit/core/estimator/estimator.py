"""The estimator: merged encoders + IMU orientations and gyros in, joint configuration q and velocity v out.

You are in the ROS-free estimator core; the live node (``ros_dofkit.nodes.estimator``) and offline bag replay
both drive this class with plain arrays, so they behave identically. The data flow is DESIGN.md's:

    joint states --validate, merge by name--> measured q (locked in the assembler)
    IMU samples  --validate, stamp checks---> observations R_WO = R_WG R_GS (NaN = unobserved, stale = unobserved)
    step(): Assembler.track (warm-started) over the free q -> q;  gyros through the angular Jacobian -> v

Dofs: every joint with v == q-dot is seen through the plant's articulated view (SPEC 9.2); per model instance a
DofMask over those coordinates says which are estimated (freed), the rest are measured (locked at their encoder
values). A floating base (quaternion joint) is estimated in rotation and held in translation, because
orientation sensors cannot observe position (OpenSense locks translations the same way, SPEC 8.2).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ros_dofkit.core.dof_mask import DofMask
from ros_dofkit.core.estimator.config import (
    EstimatorConfig,
    EstimatorConfigError,
    UnknownNameError,
    describe_unknown,
)
from ros_dofkit.core.estimator.inputs import (
    InputStatus,
    RejectCounters,
    RejectReason,
    check_stamp,
    parse_imu,
    parse_joint_state,
    rejected,
)
from ros_dofkit.core.estimator.velocity import solve_velocities_from_gyros


def rotation_angle_between(R_A, R_B) -> float:
    """Angle (rad, in [0, pi]) of the rotation R_A^T R_B; atan2 form, accurate near 0 and pi."""
    R = R_A.T @ R_B
    sine = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
    cosine = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    return math.atan2(sine, cosine)


class _CompiledKinematics:
    """Body poses and angular Jacobians through the compiled kernels over ``plant.tree`` (the arrays of
    doc/architecture.md), so a cycle costs microseconds rather than a Python loop over the bodies."""

    def __init__(self, plant):
        from ros_dofkit.core.assembly import kernels

        self._kernels = kernels
        tree = plant.tree
        self._tree = (
            tree.parent, tree.joint_type, tree.X_PF, tree.X_MC, tree.axis, tree.q_start, tree.v_start,
            tree.mimic_q, tree.mimic_v, tree.mimic_multiplier, tree.mimic_offset,
        )
        nb = tree.parent.shape[0]
        self._nv = plant.num_velocities()
        self.X_WB = np.empty((nb, 4, 4))
        self._R_WF = np.empty((nb, 3, 3))
        self._p_WM = np.empty((nb, 3))
        self._J = np.empty((6, self._nv))
        self._origin = np.zeros(3)

    def update(self, q: np.ndarray) -> np.ndarray:
        """Fill and return X_WB (num_bodies, 4, 4) at q."""
        self._kernels.forward_kinematics(self._tree, np.ascontiguousarray(q, dtype=float), self.X_WB, self._R_WF,
                                         self._p_WM)
        return self.X_WB

    def angular_jacobian(self, body_index: int) -> np.ndarray:
        """J_w (3, nv) of the body at the q of the last :meth:`update` (w_WB_W = J_w v)."""
        self._kernels.point_jacobian(self._tree, self._R_WF, self._p_WM, body_index, self._origin, False, self._J)
        return self._J[:3].copy()


class EstimatorStateError(RuntimeError):
    """The estimator was asked for something its current state cannot give (e.g. a step with no input)."""


class CalibrationError(EstimatorStateError):
    """Calibration cannot run now: samples are missing, or the sensors were not static over the window."""


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
    """

    R_BS: dict
    R_WG: np.ndarray
    heading_angle: float
    q_cal: np.ndarray
    max_spread_deg: float
    num_samples: dict


def _frozen(array) -> np.ndarray:
    array = np.array(array, copy=True)
    array.setflags(write=False)
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


@dataclass
class _ImuSlot:
    """Mutable per-sensor buffer: newest accepted stamp, the sample the next cycle uses, whether a cycle has used
    it, the samples waiting for their instant (synchronized mode only), and a calibration window."""

    stamp: float | None = None
    R_GS: np.ndarray | None = None
    w_S: np.ndarray | None = None
    fresh: bool = False
    window: deque = field(default_factory=deque)
    pending: deque = field(default_factory=lambda: deque(maxlen=_MAX_PENDING))


#: Samples per IMU kept waiting for their instant in synchronized mode (half a second at 500 Hz).
_MAX_PENDING = 256


class Estimator:
    """Joint-configuration estimator on a finalized plant.

    Construction validates the configuration against the plant (unknown bodies, instances or joints raise
    :class:`UnknownNameError` listing the valid names) and builds the assembler. Feed inputs with
    :meth:`add_joint_state` and :meth:`add_imu` (they return an :class:`InputStatus`, never raise on bad data),
    ask :meth:`ready`, and call :meth:`step`.
    """

    def __init__(self, plant, config: EstimatorConfig):
        if not isinstance(config, EstimatorConfig):
            raise TypeError(f"config: expected EstimatorConfig, got {type(config).__name__}")
        if not plant.is_finalized():
            raise EstimatorConfigError("the plant must be finalized before an Estimator is built on it")
        self._plant = plant
        self._config = config
        self._view = plant.articulated_view()
        self._art_q = np.asarray(self._view.q_indices, dtype=np.int64)
        self._art_v = np.asarray(self._view.v_indices, dtype=np.int64)
        self._art_names = tuple(self._view.position_names())
        self._name_to_art = {name: i for i, name in enumerate(self._art_names)}
        self._position_names = tuple(plant.position_names())
        self._velocity_names = tuple(plant.velocity_names())
        nq, nv = plant.num_positions(), plant.num_velocities()

        self._instance_names = tuple(
            plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())
        )
        self._instance_masks = {
            name: DofMask.make_from_model(self._view, name) for name in self._instance_names
        }
        estimated = np.zeros(len(self._art_names), dtype=bool)
        for instance in config.estimated_joints:
            if instance not in self._instance_masks:
                raise UnknownNameError(describe_unknown("model instance", instance, self._instance_names))
        for instance, mask in self._instance_masks.items():
            spec = config.estimated_joints.get(instance, config.default_estimated)
            selected = np.asarray(list(mask), dtype=bool)
            if spec == "none":
                continue
            if spec == "all":
                estimated |= selected
                continue
            instance_index = plant.get_model_instance_by_name(instance)
            joints = {self._view.get_joint(j).name: self._view.get_joint(j)
                      for j in self._view.get_joint_indices(instance_index)}
            coordinates = {self._art_names[i]: i for i in np.flatnonzero(selected)}
            for entry in spec:
                if entry in joints:
                    joint = joints[entry]
                    estimated[joint.position_start:joint.position_start + joint.num_positions] = True
                elif entry in coordinates:
                    estimated[coordinates[entry]] = True
                else:
                    floating = [j.name for j in plant.floating_base_joints() if j.model_instance == instance_index]
                    if entry in floating:
                        raise EstimatorConfigError(
                            f"estimated_joints[{instance!r}]: {entry!r} is a floating joint; floating bases are "
                            "always estimated in rotation and need not be listed"
                        )
                    raise UnknownNameError(describe_unknown(
                        f"joint or coordinate of model instance {instance!r}", entry, [*joints, *coordinates]
                    ))
        self._estimated_art = estimated
        self._measured_count = int((~estimated).sum())
        self._estimated_mask = DofMask(values=estimated.tolist())

        # Plant-level free sets: estimated articulated q/v plus floating rotations.
        free_q = np.zeros(nq, dtype=bool)
        free_q[self._art_q[estimated]] = True
        free_v = np.zeros(nv, dtype=bool)
        free_v[self._art_v[estimated]] = True
        self._floating_joints = tuple(plant.floating_base_joints())
        for joint in self._floating_joints:
            free_q[joint.position_start:joint.position_start + 4] = True
            free_v[joint.velocity_start:joint.velocity_start + 3] = True
        self._free_q = free_q
        self._free_v = free_v

        self._imus = config.imus
        self._imu_body = {}
        for imu in config.imus:
            instance = None
            if imu.model_instance is not None:
                if imu.model_instance not in self._instance_names:
                    raise UnknownNameError(
                        describe_unknown("model instance", imu.model_instance, self._instance_names)
                    )
                instance = plant.get_model_instance_by_name(imu.model_instance)
            self._imu_body[imu.name] = self._find_body(imu.body, instance)
        self._R_BS = {imu.name: (None if imu.needs_calibration else np.array(imu.mounting)) for imu in config.imus}
        self._R_WG = np.array(config.R_WG)

        self._kinematics = _CompiledKinematics(plant)
        self._counters = RejectCounters()
        self._q_default = np.asarray(plant.default_positions(), dtype=float).copy()
        self._build_solver()
        self._reset_tracking(initial=True)

    # ------------------------------------------------------------------ construction helpers
    def _find_body(self, name: str, instance):
        try:
            return self._plant.get_body_by_name(name, instance) if instance is not None else (
                self._plant.get_body_by_name(name)
            )
        except ValueError as error:
            raise UnknownNameError(f"IMU body: {error}") from error

    def _build_solver(self) -> None:
        """(Re)build the orientation-sensor condition and the assembler for the currently known mountings."""
        from ros_dofkit.core.assembly import Assembler, OrientationSensors

        self._osensors = OrientationSensors()
        self._solver_sensors = []
        for imu in self._imus:
            if self._R_BS[imu.name] is None:
                continue
            self._osensors.add_osensor(imu.name, self._imu_body[imu.name], self._R_BS[imu.name], weight=imu.weight)
            self._solver_sensors.append(imu.name)
        self._osensors.define_observation_order(list(self._solver_sensors))
        self._assembler = Assembler(self._plant)
        self._assembler.adopt_assembly_goal(self._osensors)
        self._assembler.set_accuracy(self._config.accuracy)
        if self._config.use_joint_limits:
            self._assembler.use_joint_limits()
        locked = np.flatnonzero(~self._free_q)
        if locked.size:
            self._assembler.lock_positions(locked)
        self._needs_assemble = True

    def _reset_tracking(self, initial: bool = False) -> None:
        self._slots = {imu.name: _ImuSlot(window=deque(maxlen=self._config.calibration_window)) for imu in self._imus}
        n_art = len(self._art_names)
        self._encoder_q = self._q_default[self._art_q].copy()
        self._encoder_v = np.full(n_art, np.nan)
        self._encoder_stamp = np.full(n_art, -np.inf)
        self._have_encoder = np.zeros(n_art, dtype=bool)
        self._joint_state_fresh = False
        self._overdue = False
        self._joint_state_stamp = None
        self._q = self._q_default.copy()
        self._q_prev = None
        self._stamp_prev = None
        self._newest_stamp = None
        self._sync_instant = None
        self._first_stamp = None
        self._last_clock = None
        self._needs_assemble = True
        self._initialized = not self._free_q.any()
        self._assembler.set_positions(self._q)
        if not initial:
            self._resets += 1
        else:
            self._resets = 0
            self._cycles = 0
            self._overwritten = 0
            self._flushed = 0
            self._solve_failures = 0

    # ------------------------------------------------------------------ read-only properties
    @property
    def plant(self):
        return self._plant

    @property
    def config(self) -> EstimatorConfig:
        return self._config

    @property
    def articulated_view(self):
        """The plant's articulated view: the coordinates masks and JointState messages refer to."""
        return self._view

    @property
    def joint_state_names(self) -> tuple:
        """Names accepted in joint-state input (articulated coordinate names)."""
        return self._art_names

    @property
    def instance_masks(self) -> dict:
        """{model instance name: DofMask of its articulated coordinates} (Drake's DofMask::MakeFromModel)."""
        return dict(self._instance_masks)

    @property
    def estimated_mask(self) -> DofMask:
        """DofMask over the articulated coordinates: True = estimated (free), False = measured (locked)."""
        return self._estimated_mask

    @property
    def floating_joints(self) -> tuple:
        return self._floating_joints

    def imu_body(self, name: str):
        """The plant body the IMU ``name`` is mounted on."""
        if name not in self._imu_body:
            raise UnknownNameError(describe_unknown("IMU", name, list(self._imu_body)))
        return self._imu_body[name]

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

    def reject_counts(self) -> dict:
        """{reason: count} of dropped inputs (all reasons, zeros included)."""
        return self._counters.by_reason()

    def reject_counts_by_source(self) -> dict:
        return self._counters.by_source()

    def statistics(self) -> dict:
        """Cycle counters: cycles, resets (clock jumps), overwritten_samples (IMU samples replaced before any
        cycle used them: lost data), flushed_cycles (cycles :meth:`process_imu` ran early because a sensor's next
        sample arrived before the others of its instant), solve_failures."""
        return {
            "cycles": self._cycles,
            "resets": self._resets,
            "overwritten_samples": self._overwritten,
            "flushed_cycles": self._flushed,
            "solve_failures": self._solve_failures,
        }

    # ------------------------------------------------------------------ inputs
    def observe_clock(self, now: float) -> bool:
        """Tell the estimator the receive clock; a clock that runs backwards (a looping bag under use_sim_time)
        resets tracking. Returns True when it reset."""
        jumped = self._last_clock is not None and now < self._last_clock
        if jumped:
            self._counters.record("clock", InputStatus(True, RejectReason.CLOCK_JUMP_BACK, "clock jumped back"))
            self._reset_tracking()
        self._last_clock = now
        return jumped

    def _offline_jump(self, stamp: float, last_stamp) -> bool:
        if last_stamp is not None and np.isfinite(stamp) and stamp < last_stamp - self._config.stamp_jump_reset_s:
            self._counters.record(
                "clock", InputStatus(True, RejectReason.CLOCK_JUMP_BACK, f"stamps jumped back to {stamp:.6f} s")
            )
            self._reset_tracking()
            return True
        return False

    def _accept_joint_state(self, names, positions, velocities, stamp, now):
        if now is not None:
            self.observe_clock(now)
        status, sample = parse_joint_state(names, positions, velocities, stamp, self._name_to_art)
        if sample is None:
            self._counters.record("joint_states", status)
            return status, None
        last = float(np.max(self._encoder_stamp[sample.indices]))
        last = None if not np.isfinite(last) else last
        if now is None and self._offline_jump(sample.stamp, last):
            last = None
        timing = check_stamp(
            sample.stamp, now, last, self._config.future_tolerance_s, self._config.stale_timeout_s
        )
        if not timing.accepted:
            self._counters.record("joint_states", timing)
            return timing, None
        self._counters.record("joint_states", status)
        return status, sample

    def _store_joint_state(self, sample) -> None:
        self._encoder_q[sample.indices] = sample.positions
        self._encoder_v[sample.indices] = np.nan if sample.velocities is None else sample.velocities
        self._encoder_stamp[sample.indices] = sample.stamp
        self._have_encoder[sample.indices] = True
        self._joint_state_fresh = True
        self._joint_state_stamp = sample.stamp
        self._note_stamp(sample.stamp)

    def add_joint_state(self, names, positions, velocities=None, stamp: float = 0.0, now: float | None = None):
        """Merge a (possibly partial) joint-state message by name. Returns an :class:`InputStatus`.

        Positions of measured coordinates lock them in the next cycle; values for estimated coordinates are
        stored but not used by the solver. Unknown names are ignored and counted; see ``parse_joint_state``.
        """
        status, sample = self._accept_joint_state(names, positions, velocities, stamp, now)
        if sample is not None:
            self._store_joint_state(sample)
        return status

    def process_joint_state(self, names, positions, velocities=None, stamp: float = 0.0, now: float | None = None):
        """:meth:`add_joint_state`, then run every cycle that is due; returns ``(status, results)``.

        With ``sync_joint_states``, a joint state that would replace one no cycle has used yet first runs that
        cycle (so samples of different instants are never mixed, and none is lost)."""
        status, sample = self._accept_joint_state(names, positions, velocities, stamp, now)
        results = []
        if sample is not None:
            if self._config.sync_joint_states and self._should_flush(
                self._joint_state_fresh, self._joint_state_stamp, sample.stamp
            ):
                self._flushed += 1
                results.append(self.step())
            self._store_joint_state(sample)
            results.extend(self._run_due_cycles())
        return status, tuple(results)

    def _accept_imu(self, name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                    angular_velocity_present, now):
        if now is not None:
            self.observe_clock(now)
        if name not in self._slots:
            status = rejected(RejectReason.UNKNOWN_SENSOR, describe_unknown("IMU", str(name), list(self._slots)))
            self._counters.record(str(name), status)
            return status, None
        status, sample = parse_imu(stamp, quaternion_wxyz, angular_velocity, orientation_present,
                                   angular_velocity_present)
        if sample is None:
            self._counters.record(name, status)
            return status, None
        last = self._slots[name].stamp
        if now is None and self._offline_jump(sample.stamp, last):
            last = None
        timing = check_stamp(sample.stamp, now, last, self._config.future_tolerance_s, self._config.stale_timeout_s)
        if not timing.accepted:
            self._counters.record(name, timing)
            return timing, None
        self._counters.record(name, status)
        return status, sample

    def _run_due_cycles(self) -> list:
        """Every cycle that is ready now: one normally, several when queued instants (synchronized mode) wait."""
        results = []
        for _ in range(_MAX_PENDING + 1):
            if not self.ready():
                break
            results.append(self.step())
        return results

    def _should_flush(self, fresh: bool, buffered_stamp, new_stamp: float) -> bool:
        """Run the pending cycle before a source's new sample replaces its unused one? Only when the buffered
        sample is older than the new one and still belongs to a usable instant: free-running mode, not expired;
        synchronized mode, never (a sample left behind its instant is replaced: see ``sync_tolerance_s``)."""
        if not fresh or buffered_stamp is None or buffered_stamp >= new_stamp or self._config.sync_tolerance_s:
            return False
        return buffered_stamp >= self._newest_stamp - self._config.stale_timeout_s

    def _store_imu(self, name: str, sample) -> None:
        slot = self._slots[name]
        if self._config.sync_tolerance_s:
            # Synchronized mode: queue the sample until its instant is complete (see _select_instant).
            if len(slot.pending) == slot.pending.maxlen:
                self._overwritten += 1
            slot.pending.append(sample)
            slot.stamp = sample.stamp
            slot.fresh = True
            if sample.R_GS is not None:
                slot.window.append(sample.R_GS)
            self._note_stamp(sample.stamp)
            return
        if slot.fresh:
            # The previous sample was never used: some live sensor is late. Count it, and run the next cycle
            # without waiting further (at most one sample period of delay until the late one goes stale).
            self._overwritten += 1
            self._overdue = True
        slot.stamp = sample.stamp
        slot.R_GS = sample.R_GS
        slot.w_S = sample.w_S
        slot.fresh = True
        if sample.R_GS is not None:
            slot.window.append(sample.R_GS)
        self._note_stamp(sample.stamp)

    def add_imu(
        self,
        name: str,
        stamp: float,
        quaternion_wxyz,
        angular_velocity=None,
        orientation_present: bool = True,
        angular_velocity_present: bool = True,
        now: float | None = None,
    ) -> InputStatus:
        """Store the newest sample of IMU ``name``: R_GS as a (w, x, y, z) quaternion, gyro w_S in rad/s.

        ``orientation_present`` / ``angular_velocity_present`` are False for fields a message marks absent
        (covariance[0] == -1). Returns an :class:`InputStatus`; a bad sample is dropped and counted. A sample
        that replaces one no cycle has used is counted in ``statistics()["overwritten_samples"]``; use
        :meth:`process_imu` to run that cycle first instead.
        """
        status, sample = self._accept_imu(name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                                          angular_velocity_present, now)
        if sample is not None:
            self._store_imu(name, sample)
        return status

    def process_imu(
        self,
        name: str,
        stamp: float,
        quaternion_wxyz,
        angular_velocity=None,
        orientation_present: bool = True,
        angular_velocity_present: bool = True,
        now: float | None = None,
    ):
        """:meth:`add_imu`, then run every cycle that is due; returns ``(status, results)`` (usually 0 or 1).

        This is the streaming entry point (the node and bag replay use it): a valid sample that would replace
        one no cycle has used first runs that cycle with what is buffered (a late IMU costs at most one sample
        period and never mixes two instants of the same sensor); then a cycle runs if :meth:`ready`.
        """
        status, sample = self._accept_imu(name, stamp, quaternion_wxyz, angular_velocity, orientation_present,
                                          angular_velocity_present, now)
        results = []
        if sample is not None:
            if self._should_flush(self._slots[name].fresh, self._slots[name].stamp, sample.stamp):
                self._flushed += 1
                results.append(self.step())
            self._store_imu(name, sample)
            results.extend(self._run_due_cycles())
        return status, tuple(results)

    def _note_stamp(self, stamp: float) -> None:
        if self._first_stamp is None:
            self._first_stamp = stamp
        if self._newest_stamp is None or stamp > self._newest_stamp:
            self._newest_stamp = stamp

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
        if not np.array_equal(config.R_WG, old.R_WG):
            self._R_WG = np.array(config.R_WG)
        if config.calibration_window != old.calibration_window:
            for slot in self._slots.values():
                slot.window = deque(slot.window, maxlen=config.calibration_window)
        if config.accuracy != old.accuracy or config.use_joint_limits != old.use_joint_limits:
            self._build_solver()

    # ------------------------------------------------------------------ calibration
    def calibration_pose(self) -> np.ndarray:
        """The pose calibration assumes the robot holds: default positions (OpenSense's default pose), with the
        measured coordinates at their latest encoder values."""
        q = self._q_default.copy()
        measured = ~self._estimated_art & self._have_encoder
        q[self._art_q[measured]] = self._encoder_q[measured]
        return q

    def calibrate(self, q_cal=None, max_spread_deg: float = 2.0, sensors=None) -> CalibrationResult:
        """Compute R_BS of the IMUs configured with mounting 'calibrate' (or of ``sensors``), and the heading of
        the world alignment when ``heading_reference`` is configured, from the recent window of samples
        (``calibration_window`` per IMU, averaged) at the static pose ``q_cal`` (default
        :meth:`calibration_pose`). Implements OpenSense's IMUPlacer through
        ``ros_dofkit.core.assembly.calibrate_imus``: R_BS = R_WB(q_cal)^T R_WG R_GS.

        Raises :class:`CalibrationError` (nothing changes) when an IMU has no samples or moved by more than
        ``max_spread_deg`` over the window. On success the new mountings and alignment are used from the next
        cycle on, which starts tracking afresh.
        """
        from ros_dofkit.core.assembly import calibrate_imus

        names = [imu.name for imu in self._imus if imu.needs_calibration] if sensors is None else list(sensors)
        for name in names:
            if name not in self._slots:
                raise UnknownNameError(describe_unknown("IMU", str(name), list(self._slots)))
        heading = self._config.heading_reference
        needed = list(dict.fromkeys(names + ([heading] if heading else [])))
        if not needed:
            raise CalibrationError(
                "nothing to calibrate: no IMU is configured with mounting 'calibrate' and no heading_reference is set"
            )
        missing = [name for name in needed if not self._slots[name].window]
        if missing:
            raise CalibrationError(f"no orientation samples yet from IMU(s) {missing}; calibration needs them all")
        windows = {name: np.stack(list(self._slots[name].window)) for name in needed}
        from ros_dofkit.core.assembly import average_rotations

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
            self._plant,
            q_cal,
            {name: self._imu_body[name].index for name in needed},
            windows,
            alignment=self._R_WG,
            base_imu=heading,
            base_heading_axis=self._config.heading_axis if heading else None,
        )
        for name in names:
            self._R_BS[name] = np.array(calibration.R_BS[name])
        self._R_WG = np.array(calibration.R_GX)
        self._build_solver()
        self._q_prev = None
        self._stamp_prev = None
        return CalibrationResult(
            R_BS={name: _frozen(calibration.R_BS[name]) for name in names},
            R_WG=_frozen(calibration.R_GX),
            heading_angle=float(calibration.heading_angle),
            q_cal=_frozen(q_cal),
            max_spread_deg=spread,
            num_samples={name: len(window) for name, window in windows.items()},
        )

    # ------------------------------------------------------------------ cycle
    def _waited_sensors(self) -> list:
        """IMUs a cycle waits for: those that delivered within ``stale_timeout_s`` before the previous cycle (so
        a pause of the whole stream does not make the first sample after it run alone), and, during the first
        ``stale_timeout_s`` after a start or reset, those not heard from yet."""
        timeout = self._config.stale_timeout_s
        reference = self._stamp_prev if self._stamp_prev is not None else self._newest_stamp
        starting = self._first_stamp is not None and self._newest_stamp < self._first_stamp + timeout
        return [
            name for name, slot in self._slots.items()
            if (slot.stamp is not None and slot.stamp >= reference - timeout) or (slot.stamp is None and starting)
        ]

    def ready(self) -> bool:
        """True when a cycle should run.

        Free-running (``sync_tolerance_s`` = 0): there is new input and every waited IMU has a usable new sample,
        or some IMU already delivered a second sample while waiting (a late sensor delays cycles by at most one
        sample period until it goes stale). Synchronized: every waited IMU has a queued sample of one instant
        (stamps within ``sync_tolerance_s``); samples older than an instant another IMU has already passed are
        discarded (counted). With ``sync_joint_states`` the joint-state stream is waited for too while it arrives.
        """
        if self._newest_stamp is None:
            return False
        fresh_any = self._joint_state_fresh or any(slot.fresh for slot in self._slots.values())
        if not fresh_any:
            return False
        if self._overdue:
            return True
        newest = self._newest_stamp
        timeout = self._config.stale_timeout_s
        waited = self._waited_sensors()
        if self._config.sync_tolerance_s:
            instant = self._complete_instant(waited)
            if instant is None:
                # A waited IMU fell silent: once the oldest queued instant has waited stale_timeout, solve it with
                # the IMUs that have it (the silent one goes stale and stops being waited for).
                heads = [slot.pending[0].stamp for slot in self._slots.values() if slot.pending]
                if not heads or min(heads) >= newest - timeout:
                    return False
                instant = min(heads)
            self._sync_instant = instant
        starting = self._first_stamp is not None and newest < self._first_stamp + timeout
        if self._config.sync_joint_states and self._config.sync_tolerance_s:
            # Encoders behind the instant (while they arrive) are waited for; encoders ahead are held.
            if self._joint_state_stamp is None:
                return not (starting and self._measured_count)
            arriving = self._joint_state_stamp >= newest - timeout
            return not (arriving and self._joint_state_stamp < self._sync_instant - self._config.sync_tolerance_s)
        if self._config.sync_tolerance_s:
            return True
        if self._config.sync_joint_states and not self._joint_state_fresh:
            reference = self._stamp_prev if self._stamp_prev is not None else newest
            arriving = self._joint_state_stamp is not None and self._joint_state_stamp >= reference - timeout
            if arriving or (starting and self._joint_state_stamp is None and self._measured_count):
                return False
        return all(self._satisfies(self._slots[name]) for name in waited)

    def _satisfies(self, slot) -> bool:
        """Free-running mode: a waited sensor's fresh sample is usable for a cycle at the newest stamp (not
        expired: within stale_timeout)."""
        return slot.fresh and slot.stamp >= self._newest_stamp - self._config.stale_timeout_s

    def _complete_instant(self, waited) -> float | None:
        """Synchronized mode: the stamp of the oldest instant every waited IMU has a queued sample of, or None.

        T = the latest of the waited queues' oldest stamps (no earlier instant can be complete); samples older
        than T - tolerance can never complete an instant and are discarded; repeat until the heads agree."""
        tolerance = self._config.sync_tolerance_s
        slots = [self._slots[name] for name in waited]
        if not slots:
            return None
        for _ in range(2 * len(slots) + 1):
            if any(not slot.pending for slot in slots):
                return None
            instant = max(slot.pending[0].stamp for slot in slots)
            settled = True
            for slot in slots:
                while slot.pending and slot.pending[0].stamp < instant - tolerance:
                    slot.pending.popleft()
                    self._overwritten += 1
                    settled = False
            if settled:
                return instant
        return None

    def _select_instant(self, stamp: float) -> None:
        """Synchronized mode: move each IMU's queued sample of the instant ``stamp`` into the slot for the cycle."""
        tolerance = self._config.sync_tolerance_s
        for slot in self._slots.values():
            while slot.pending and slot.pending[0].stamp < stamp - tolerance:
                slot.pending.popleft()  # older than the instant being solved: can no longer be used
                self._overwritten += 1
            if slot.pending and slot.pending[0].stamp <= stamp + tolerance:
                sample = slot.pending.popleft()
                slot.R_GS, slot.w_S = sample.R_GS, sample.w_S

    def step(self, stamp: float | None = None) -> EstimatorResult:
        """Run one cycle at ``stamp`` (default: the newest input stamp) and return its result."""
        if stamp is None:
            if self._newest_stamp is None:
                raise EstimatorStateError("step() without a stamp needs at least one accepted input sample")
            stamp = self._sync_instant if self._sync_instant is not None else self._newest_stamp
        stamp = float(stamp)
        timeout = self._config.stale_timeout_s
        tracking_reset = self._needs_assemble
        if self._config.sync_tolerance_s:
            self._select_instant(stamp)

        q = self._q.copy()
        measured = ~self._estimated_art
        q[self._art_q[measured]] = self._encoder_q[measured]
        missing = tuple(self._art_names[i] for i in np.flatnonzero(measured & ~self._have_encoder))

        stale, observed, uncalibrated = [], [], []
        R_WO = np.full((len(self._solver_sensors), 3, 3), np.nan)
        for imu in self._imus:
            slot = self._slots[imu.name]
            if slot.stamp is None or slot.stamp < stamp - timeout:
                stale.append(imu.name)
                continue
            if self._R_BS[imu.name] is None:
                uncalibrated.append(imu.name)
                continue
            if slot.R_GS is not None and imu.weight > 0.0:
                R_WO[self._solver_sensors.index(imu.name)] = self._R_WG @ slot.R_GS
                observed.append(imu.name)

        solved, failure, goal = False, "", 0.0
        started = time.perf_counter()
        if observed:
            self._assembler.set_positions(q)
            self._osensors.move_all_observations(R_WO)
            try:
                goal = float(self._assembler.assemble() if self._needs_assemble else self._assembler.track(stamp))
                q = self._assembler.get_positions()
                solved = True
                self._needs_assemble = False
                self._initialized = True
            except (RuntimeError, ValueError) as error:
                failure = f"assembler failed: {error}"
                self._solve_failures += 1
        else:
            failure = "no IMU observed this cycle; estimated coordinates hold their previous values"
        solve_time = time.perf_counter() - started

        X_WB = self._kinematics.update(q).copy()
        v, from_gyro = self._velocities(q, stamp, X_WB)
        errors = {}
        for imu in self._imus:
            if imu.name in observed:
                R_WS = X_WB[self._imu_body[imu.name].index, :3, :3] @ self._R_BS[imu.name]
                R_WO_i = self._R_WG @ self._slots[imu.name].R_GS
                errors[imu.name] = math.degrees(rotation_angle_between(R_WS, R_WO_i))
            else:
                errors[imu.name] = math.nan

        for slot in self._slots.values():
            slot.fresh = bool(slot.pending)
        self._sync_instant = None
        self._joint_state_fresh = False
        self._overdue = False
        self._q = q.copy()
        self._q_prev, self._stamp_prev = q.copy(), stamp
        self._cycles += 1
        return EstimatorResult(
            stamp=stamp,
            q=_frozen(q),
            v=_frozen(v),
            position_names=self._position_names,
            velocity_names=self._velocity_names,
            velocity_from_gyro=_frozen(from_gyro),
            X_WB=_frozen(X_WB),
            goal=goal,
            solved=solved,
            failure=failure,
            sensor_errors_deg=errors,
            observed_sensors=tuple(observed),
            stale_sensors=tuple(stale),
            uncalibrated_sensors=tuple(uncalibrated),
            missing_encoders=missing,
            solve_time_s=solve_time,
            tracking_reset=tracking_reset,
            cycle=self._cycles,
            initialized=self._initialized,
        )

    def _velocities(self, q: np.ndarray, stamp: float, X_WB: np.ndarray):
        """v from gyros where they see it, else finite differences; measured dofs use encoder velocities."""
        plant = self._plant
        nv = plant.num_velocities()
        dt = None if self._stamp_prev is None else stamp - self._stamp_prev
        if dt is not None and dt > 0.0:
            if self._floating_joints:
                v_prior = np.asarray(plant.position_difference(self._q_prev, q), dtype=float) / dt
            else:
                v_prior = (q - self._q_prev) / dt  # v = q-dot for every joint: the difference is a subtraction
        else:
            v_prior = np.zeros(nv)
        measured = ~self._estimated_art
        encoder_v = self._encoder_v
        use_encoder = measured & np.isfinite(encoder_v)
        v_prior[self._art_v[use_encoder]] = encoder_v[use_encoder]

        jacobians, rates = [], []
        for imu in self._imus:
            slot = self._slots[imu.name]
            R_BS = self._R_BS[imu.name]
            stale = slot.stamp is None or slot.stamp < stamp - self._config.stale_timeout_s
            if slot.w_S is None or R_BS is None or stale:
                continue
            body = self._imu_body[imu.name]
            R_WS = X_WB[body.index, :3, :3] @ R_BS
            jacobians.append(self._kinematics.angular_jacobian(body.index))
            rates.append(R_WS @ slot.w_S)
        if not jacobians:
            return v_prior, np.zeros(nv, dtype=bool)
        solution = solve_velocities_from_gyros(
            np.stack(jacobians), np.stack(rates), self._free_v, v_prior, self._config.velocity_regularization
        )
        return solution.v, solution.from_gyro
