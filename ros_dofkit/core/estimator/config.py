"""Estimator configuration: which IMUs sit where, which dofs are estimated, and the input-timing rules.

You are in the ROS-free estimator core (``ros_dofkit.core.estimator``). These frozen dataclasses are what the
node builds from its parameters and what offline replay builds from a YAML file; they validate their own values
in the constructor (types, ranges, unit rotations). Checks that need the robot (body and joint names) happen
when an :class:`~ros_dofkit.core.estimator.estimator.Estimator` is built on a plant.

Frames: G is an IMU's own world (e.g. ENU for most devices, REP-145), W is the model world, B the body the IMU
is mounted on, S the sensor frame. ``R_BS`` is the mounting rotation, ``R_WG`` the world alignment.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

# One class per name across the core (ros_dofkit.core.errors): an unknown name is an EstimatorConfigError here
# and the plant's UnknownNameError at once.
from ros_dofkit.core.errors import EstimatorConfigError, UnknownNameError
from ros_dofkit.core.estimator.orientation_filter import ORIENTATION_MODES, FilterSettings, OrientationFilterError
from ros_dofkit.core.spatial import QuaternionError, quat_normalize, quat_to_matrix

#: Mounting value that asks for the mounting rotation to be computed by calibration (SPEC section 8.4).
CALIBRATE = "calibrate"

#: Signed axes accepted as a heading reference (OpenSense's ``base_heading_axis``).
HEADING_AXES = ("x", "-x", "y", "-y", "z", "-z")

#: The words an ``estimated_joints`` entry may be instead of a list of joint names.
ESTIMATED_WORDS = ("all", "none")

_ESTIMATED_FORMS = (
    "accepted forms: all, none, [all], [none], or a list of joint or coordinate names such as [joint_a, joint_b]"
)

_ROTATION_TOLERANCE = 1e-6


def describe_unknown(kind: str, name: str, valid: Sequence[str]) -> str:
    """Message for an unknown ``name`` of ``kind``: the near matches first, then every valid name."""
    valid = list(valid)
    near = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(n) for n in near)}?" if near else ";"
    return f"unknown {kind} {name!r}{hint} valid {kind}s are: {', '.join(repr(v) for v in valid) or '(none)'}"


def repeated_names(names: Iterable[str]) -> list:
    """Each name that occurs more than once in ``names``, listed once, in the order of its first occurrence."""
    names = list(names)
    return [n for i, n in enumerate(names) if names.count(n) > 1 and names.index(n) == i]


def estimated_entry(value, what: str):
    """One ``estimated_joints`` value in its normal form: ``"all"`` / ``"none"``, or a tuple of joint/coordinate names.

    ``all`` and ``none`` may be written as a plain string (``ur5: all`` in YAML) or as a one-element list
    (``ur5: [all]``, the form a ROS string-array parameter takes); inside a longer list they are refused. Any other
    string is refused (a single joint is written ``[joint_a]``), and so is a name given twice: the messages name
    ``what`` and list the accepted forms.
    """
    if isinstance(value, str):
        if value.strip() in ESTIMATED_WORDS:
            return value.strip()
        raise EstimatorConfigError(
            f"{what}: a plain string must be 'all' or 'none', got {value!r}; {_ESTIMATED_FORMS} "
            f"(one joint: [{value.strip()}])"
        )
    if isinstance(value, (bytes, Mapping, AbstractSet)) or not isinstance(value, Iterable):
        raise EstimatorConfigError(f"{what}: got {type(value).__name__} {value!r}; {_ESTIMATED_FORMS}")
    entries = tuple(_check_name(j, f"{what} entry") for j in value)
    if len(entries) == 1 and entries[0] in ESTIMATED_WORDS:
        return entries[0]
    words = [e for e in entries if e in ESTIMATED_WORDS]
    if words:
        raise EstimatorConfigError(f"{what}: {words[0]!r} must stand alone, got {list(entries)}; {_ESTIMATED_FORMS}")
    repeated = repeated_names(entries)
    if repeated:
        raise EstimatorConfigError(f"{what}: joint names given more than once: {repeated}")
    return entries


def as_rotation_matrix(value, what: str) -> np.ndarray:
    """Return ``value`` as a read-only proper rotation matrix, accepting a 3x3 matrix or a (w, x, y, z) quaternion.

    Raises :class:`EstimatorConfigError` when the value is neither, is not finite, or is not orthonormal with
    determinant +1 (within 1e-6).
    """
    array = np.asarray(value, dtype=float)
    if array.shape == (4,):
        try:
            array = quat_to_matrix(quat_normalize(array))
        except QuaternionError as error:
            raise EstimatorConfigError(f"{what}: expected a unit quaternion (w, x, y, z), got {error}") from error
    if array.shape != (3, 3):
        raise EstimatorConfigError(
            f"{what}: expected a 3x3 rotation matrix or a quaternion (w, x, y, z), got shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise EstimatorConfigError(f"{what}: rotation matrix has non-finite entries: {array.tolist()}")
    orthogonality = float(np.max(np.abs(array.T @ array - np.eye(3))))
    determinant = float(np.linalg.det(array))
    if orthogonality > _ROTATION_TOLERANCE or abs(determinant - 1.0) > _ROTATION_TOLERANCE:
        raise EstimatorConfigError(
            f"{what}: expected a proper rotation (R^T R = I, det R = +1), got max |R^T R - I| = "
            f"{orthogonality:.3g} and det R = {determinant:.6g}"
        )
    array = array.copy()
    array.setflags(write=False)
    return array


def _check_finite_nonnegative(value, what: str, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise EstimatorConfigError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0.0 or (value == 0.0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise EstimatorConfigError(f"{what}: expected a finite number {bound}, got {value!r}")
    return value


def _check_name(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EstimatorConfigError(f"{what}: expected a non-empty string, got {value!r}")
    return value.strip()


#: Largest |time offset| (s) an input may be given: a delay beyond a second is a wrong clock, not a link delay.
MAX_TIME_OFFSET_S = 1.0


def check_time_offset(value, what: str) -> float:
    """A per-input time offset (s): a finite number in [-MAX_TIME_OFFSET_S, MAX_TIME_OFFSET_S]."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise EstimatorConfigError(f"{what}: expected a number of seconds, got {type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and abs(value) <= MAX_TIME_OFFSET_S):
        raise EstimatorConfigError(f"{what}: expected a finite offset in [-{MAX_TIME_OFFSET_S:g}, "
                                   f"{MAX_TIME_OFFSET_S:g}] s, got {value!r}")
    return value


@dataclass(frozen=True)
class OdometryConfig:
    """The robot's own odometry (``nav_msgs/Odometry``) as the pose source of one planar or floating base.

    Attributes:
        model_instance: the model instance whose base joint (planar or floating, attached to the world) takes the
            odometry; None: the robot's only such instance.
        topic: ROS topic of the Odometry stream (unused by the core, kept for the node).
        use_yaw: also take the base's heading from the odometry (a planar base: its rotation coordinate, then no
            longer estimated; a floating base: its yaw about the vertical, the solution turned to it at the output,
            ``odometry_input``). Off: the translation only; the rotation the IMUs observe stays estimated.
        time_offset_s: seconds subtracted from every message's stamp (as :attr:`ImuConfig.time_offset_s`).
    """

    model_instance: str | None = None
    topic: str = "odometry"
    use_yaw: bool = False
    time_offset_s: float = 0.0

    def __post_init__(self):
        if self.model_instance is not None:
            object.__setattr__(self, "model_instance", _check_name(self.model_instance, "odometry model_instance"))
        object.__setattr__(self, "topic", _check_name(self.topic, "odometry topic"))
        if not isinstance(self.use_yaw, bool):
            raise EstimatorConfigError(f"odometry use_yaw: expected a bool, got {self.use_yaw!r}")
        object.__setattr__(self, "time_offset_s", check_time_offset(self.time_offset_s, "odometry time_offset_s"))


@dataclass(frozen=True)
class ImuConfig:
    """One orientation sensor: Simbody's osensor plus where its messages come from.

    Attributes:
        name: unique sensor name (used in diagnostics and per-sensor error topics).
        body: name of the link (plant body) the IMU is rigidly mounted on.
        topic: ROS topic of its ``sensor_msgs/Imu`` stream (unused by the core, kept for the node).
        mounting: ``R_BS`` (3x3, or quaternion w, x, y, z), or :data:`CALIBRATE` to compute it from a static
            pose with :meth:`Estimator.calibrate`.
        weight: Simbody osensor weight (>= 0; 0 keeps the sensor for velocities and diagnostics only).
        model_instance: model instance that owns ``body`` when several instances use the same link names.
        time_offset_s: seconds subtracted from every sample's stamp (stamp' = stamp - offset): the sensor's
            delay between measuring and stamping, e.g. ~0.008 for an IMU stamped on arrival over its link
            (see :func:`check_time_offset`).
        orientation: where R_GS comes from: ``"sensor"`` (the message's orientation), ``"filter"`` (a VQF on the
            message's gyro + accelerometer, ``core.estimator.orientation_filter``), ``"auto"`` (the filter for
            messages that mark their orientation absent and carry gyro + accelerometer, the sensor otherwise).
        filter: the raw-IMU filter's input rules (``orientation_filter.FilterSettings``, or a mapping of its fields).
        magnetic_field_topic: ROS topic of its ``sensor_msgs/MagneticField`` stream (tesla, sensor frame), fed to
            its filter (``Estimator.process_magnetic_field``); empty: none. Only for a filtered IMU (unused by the
            core, kept for the node and replay).
        position: ``p_BS``, the sensor's origin in B (m, 3 numbers): the lever arm of its accelerometer, which the
            heading estimation's joint-centre acceleration constraint uses (``core.estimator.heading``).
    """

    name: str
    body: str
    topic: str = ""
    mounting: object = field(default_factory=lambda: np.eye(3))
    weight: float = 1.0
    model_instance: str | None = None
    time_offset_s: float = 0.0
    orientation: str = "auto"
    filter: FilterSettings = field(default_factory=FilterSettings)
    magnetic_field_topic: str = ""
    position: object = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        object.__setattr__(self, "name", _check_name(self.name, "ImuConfig.name"))
        try:
            position = np.array(self.position, dtype=float)
        except (TypeError, ValueError):
            position = None
        if position is None or position.shape != (3,) or not np.isfinite(position).all():
            raise EstimatorConfigError(f"IMU {self.name!r} position: expected 3 finite numbers (m), got "
                                       f"{self.position!r}")
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "body", _check_name(self.body, f"IMU {self.name!r} body"))
        if not isinstance(self.topic, str):
            raise EstimatorConfigError(f"IMU {self.name!r} topic: expected a string, got {self.topic!r}")
        if not self.topic:
            object.__setattr__(self, "topic", f"imu/{self.name}")
        if isinstance(self.mounting, str):
            if self.mounting != CALIBRATE:
                raise EstimatorConfigError(
                    f"IMU {self.name!r} mounting: expected a rotation or the string {CALIBRATE!r}, "
                    f"got {self.mounting!r}"
                )
        else:
            object.__setattr__(self, "mounting", as_rotation_matrix(self.mounting, f"IMU {self.name!r} mounting"))
        object.__setattr__(self, "weight", _check_finite_nonnegative(self.weight, f"IMU {self.name!r} weight"))
        if self.model_instance is not None:
            object.__setattr__(
                self, "model_instance", _check_name(self.model_instance, f"IMU {self.name!r} model_instance")
            )
        object.__setattr__(self, "time_offset_s", check_time_offset(self.time_offset_s,
                                                                    f"IMU {self.name!r} time_offset_s"))
        if self.orientation not in ORIENTATION_MODES:
            raise EstimatorConfigError(f"IMU {self.name!r} orientation: expected one of {ORIENTATION_MODES}, "
                                       f"got {self.orientation!r}")
        if isinstance(self.filter, Mapping):
            try:
                object.__setattr__(self, "filter", FilterSettings(**self.filter))
            except (OrientationFilterError, TypeError) as error:
                raise EstimatorConfigError(f"IMU {self.name!r} filter: {error}") from error
        if not isinstance(self.filter, FilterSettings):
            raise EstimatorConfigError(f"IMU {self.name!r} filter: expected FilterSettings or a mapping of its "
                                       f"fields, got {type(self.filter).__name__}")
        if not isinstance(self.magnetic_field_topic, str) or (self.magnetic_field_topic and
                                                              self.orientation == "sensor"):
            raise EstimatorConfigError(
                f"IMU {self.name!r} magnetic_field_topic: expected a topic name (or empty) for an IMU whose "
                f"orientation is 'filter' or 'auto' (a magnetometer feeds its orientation filter), got "
                f"{self.magnetic_field_topic!r} with orientation {self.orientation!r}")

    @property
    def needs_calibration(self) -> bool:
        """True while the mounting rotation is still to be computed by calibration."""
        return isinstance(self.mounting, str)


@dataclass(frozen=True)
class HeadingEstimation:
    """Per-IMU heading offsets and gyro biases estimated on the kinematic chain (issue 19.2; the math is in
    ``ros_dofkit.core.estimator.heading``).

    Attributes:
        enabled: estimate each IMU's heading offset (its earth frame turned about gravity relative to the model
            world) together with the joints; off (default), every IMU's orientation is trusted as it is.
        drift_deg_per_min: standard deviation of the heading random walk after one minute (deg), per IMU: the
            prior's growth between cycles.
        orientation_noise_deg: standard deviation (deg, per axis) of an IMU orientation's white noise: the weight
            of one cycle's kinematic evidence.
        initial_deg: standard deviation (deg) of the heading offsets at the start and after a reset (0 after a
            calibration, which absorbs the headings into the mountings).
        reference_imu: IMU whose heading offset is held at 0 (it defines the world heading); None: chosen by the
            observability rule (none when the chain fixes the world heading itself, e.g. a fixed base with
            encoders; the first IMU that restores observability otherwise, e.g. on a floating base).
        gyro_bias_time_constant_s: time constant (s) of the low-pass gyro bias estimate (gyro minus the angular
            velocity of the IMU's own orientation stream); 0 turns the gyro bias estimate off.
        acceleration_noise: standard deviation (m/s^2, per horizontal axis) of a joint centre's acceleration as one
            IMU computes it (accelerometer noise, tilt error times g, lever-arm and angular-acceleration errors):
            the weight of the joint-centre acceleration constraint of 2/3-dof joints; 0 turns it off.
    """

    enabled: bool = False
    drift_deg_per_min: float = 3.0
    orientation_noise_deg: float = 1.0
    initial_deg: float = 1.0
    reference_imu: str | None = None
    gyro_bias_time_constant_s: float = 30.0
    acceleration_noise: float = 0.3

    def __post_init__(self):
        if not isinstance(self.enabled, bool):
            raise EstimatorConfigError(f"heading_estimation.enabled: expected a bool, got {self.enabled!r}")
        for name, allow_zero in (("drift_deg_per_min", False), ("orientation_noise_deg", False),
                                 ("initial_deg", True), ("gyro_bias_time_constant_s", True),
                                 ("acceleration_noise", True)):
            value = _check_finite_nonnegative(getattr(self, name), f"heading_estimation.{name}", allow_zero)
            object.__setattr__(self, name, value)
        if self.reference_imu is not None:
            object.__setattr__(self, "reference_imu", _check_name(self.reference_imu,
                                                                  "heading_estimation.reference_imu"))


@dataclass(frozen=True)
class EstimatorConfig:
    """Everything the estimator core needs besides the plant.

    Attributes:
        imus: the orientation sensors, names unique.
        estimated_joints: per model instance name, the joints whose coordinates are estimated (freed in the
            assembler), or ``"all"`` / ``"none"`` (also accepted as ``["all"]`` / ``["none"]``; see
            :func:`estimated_entry`). Instances not listed get ``default_estimated``. Every other
            articulated coordinate is *measured*: locked at its encoder value. Floating bases are handled apart
            (SPEC 9.2): their rotation is estimated, their translation is held (IMU orientations cannot observe it).
        default_estimated: ``"all"`` or ``"none"`` for instances absent from ``estimated_joints``.
        stale_timeout_s: an IMU whose newest sample is older than this (relative to the cycle stamp) is stale:
            unobserved for the cycle and reported.
        future_tolerance_s: a sample stamped later than the receive clock by more than this is rejected.
        stamp_jump_reset_s: without a receive clock (offline), a stamp that goes back by more than this is a
            clock jump (looping bag) and resets tracking; smaller steps back are out-of-order samples.
        accuracy: assembler accuracy (Simbody ``setAccuracy``), in (0, 1).
        velocity_regularization: weight of the finite-difference prior in the gyro velocity least squares
            (dimensionless, relative to the unit sensor weight); directions the gyros do not see fall back to
            finite differences.
        R_WG: rotation of every IMU world G in the model world W (the world alignment; identity when the model
            world is ENU like the devices). Calibration may replace its heading.
        heading_reference: name of the IMU whose heading defines the world alignment at calibration, or None.
        heading_axis: signed sensor axis of the heading reference (one of x, -x, y, -y, z, -z) whose horizontal
            direction calibration turns, about the vertical (model z), onto the base body's +x (OpenSense's
            ``base_heading_axis``; see ``ros_dofkit.core.assembly.calibration``).
        calibration_window: number of recent samples per IMU averaged for calibration (>= 1).
        use_joint_limits: restrict estimated coordinates to their URDF limits.
        sync_joint_states: a cycle also waits for a new joint-state message while joint states are arriving
            (within ``stale_timeout_s``), so encoder and IMU samples of one instant are solved together; off, the
            latest encoder values are held (sample-and-hold), which suits encoders slower than the IMUs.
        sync_tolerance_s: 0 (default) for free-running sensors; > 0 when the sensors sample together (one hub,
            equal stamps): a cycle then waits until every live source has a sample within this many seconds of the
            newest one, and a sample that fell behind an instant is replaced rather than solved with the next
            instant's samples (it is counted as overwritten), so a disturbance never leaves a lasting phase shift.
        heading_estimation: :class:`HeadingEstimation` (off by default).
        imu_covariance_weighting: weight each IMU sample in the orientation solve by its message's
            ``orientation_covariance`` (REP-145): ``weight x imu_orientation_stddev² / (trace(Σ)/3)``; an all-zero
            covariance (unknown) keeps the configured weight, and one that is no covariance is rejected
            (``bad_covariance``). Off (default): the covariance is read only for REP-145's -1 flag.
        imu_orientation_stddev: per-axis orientation noise (rad) of an IMU whose messages give no covariance: the
            reference the covariance weights are relative to (a sample with Σ = stddev² I has its configured
            weight), and the noise of the Odometry output's covariance.
    """

    imus: tuple = ()
    estimated_joints: Mapping[str, object] = field(default_factory=dict)
    default_estimated: str = "all"
    stale_timeout_s: float = 0.1
    future_tolerance_s: float = 0.05
    stamp_jump_reset_s: float = 1.0
    accuracy: float = 1e-4
    velocity_regularization: float = 1e-8
    R_WG: object = field(default_factory=lambda: np.eye(3))
    heading_reference: str | None = None
    heading_axis: str = "x"
    calibration_window: int = 20
    use_joint_limits: bool = True
    sync_joint_states: bool = False
    sync_tolerance_s: float = 0.0
    joint_state_time_offset_s: float = 0.0
    odometry: OdometryConfig | None = None
    heading_estimation: HeadingEstimation = field(default_factory=HeadingEstimation)
    imu_covariance_weighting: bool = False
    imu_orientation_stddev: float = 0.01

    def __post_init__(self):
        imus = tuple(self.imus)
        for imu in imus:
            if not isinstance(imu, ImuConfig):
                raise EstimatorConfigError(f"imus: expected ImuConfig entries, got {type(imu).__name__}")
        names = [imu.name for imu in imus]
        duplicates = repeated_names(names)
        if duplicates:
            raise EstimatorConfigError(f"imus: sensor names must be unique, got duplicates {duplicates}")
        shared = repeated_names(imu.topic for imu in imus)
        if shared:
            raise EstimatorConfigError(f"imus: each IMU needs its own topic, got shared topics {shared}")
        object.__setattr__(self, "imus", imus)

        if not isinstance(self.estimated_joints, Mapping):
            raise EstimatorConfigError(
                f"estimated_joints: expected a mapping model instance -> joint names | 'all' | 'none', "
                f"got {type(self.estimated_joints).__name__}"
            )
        normalized = {}
        for instance, spec in self.estimated_joints.items():
            _check_name(instance, "estimated_joints key")
            normalized[instance] = estimated_entry(spec, f"estimated_joints[{instance!r}]")
        object.__setattr__(self, "estimated_joints", normalized)
        if self.default_estimated not in ESTIMATED_WORDS:
            raise EstimatorConfigError(f"default_estimated: expected 'all' or 'none', got {self.default_estimated!r}")

        object.__setattr__(
            self, "stale_timeout_s", _check_finite_nonnegative(self.stale_timeout_s, "stale_timeout_s", False)
        )
        object.__setattr__(
            self, "future_tolerance_s", _check_finite_nonnegative(self.future_tolerance_s, "future_tolerance_s")
        )
        object.__setattr__(
            self, "stamp_jump_reset_s", _check_finite_nonnegative(self.stamp_jump_reset_s, "stamp_jump_reset_s")
        )
        accuracy = _check_finite_nonnegative(self.accuracy, "accuracy", False)
        if accuracy >= 1.0:
            raise EstimatorConfigError(f"accuracy: expected a value in (0, 1), got {accuracy!r}")
        object.__setattr__(self, "accuracy", accuracy)
        object.__setattr__(
            self,
            "velocity_regularization",
            _check_finite_nonnegative(self.velocity_regularization, "velocity_regularization", False),
        )
        object.__setattr__(self, "R_WG", as_rotation_matrix(self.R_WG, "R_WG"))
        if self.heading_reference is not None and self.heading_reference not in names:
            raise UnknownNameError("heading_reference: " + describe_unknown("IMU", str(self.heading_reference), names))
        if self.heading_axis not in HEADING_AXES:
            raise EstimatorConfigError(f"heading_axis: expected one of {HEADING_AXES}, got {self.heading_axis!r}")
        if isinstance(self.calibration_window, bool) or not isinstance(self.calibration_window, int) or (
            self.calibration_window < 1
        ):
            raise EstimatorConfigError(f"calibration_window: expected an integer >= 1, got {self.calibration_window!r}")
        if not isinstance(self.use_joint_limits, bool):
            raise EstimatorConfigError(f"use_joint_limits: expected a bool, got {self.use_joint_limits!r}")
        object.__setattr__(
            self, "sync_tolerance_s", _check_finite_nonnegative(self.sync_tolerance_s, "sync_tolerance_s")
        )
        if not isinstance(self.sync_joint_states, bool):
            raise EstimatorConfigError(f"sync_joint_states: expected a bool, got {self.sync_joint_states!r}")
        object.__setattr__(self, "joint_state_time_offset_s",
                           check_time_offset(self.joint_state_time_offset_s, "joint_state_time_offset_s"))
        if self.odometry is not None and not isinstance(self.odometry, OdometryConfig):
            raise EstimatorConfigError(f"odometry: expected an OdometryConfig or None, got "
                                       f"{type(self.odometry).__name__}")
        if not isinstance(self.imu_covariance_weighting, bool):
            raise EstimatorConfigError(f"imu_covariance_weighting: expected a bool, got "
                                       f"{self.imu_covariance_weighting!r}")
        object.__setattr__(self, "imu_orientation_stddev",
                           _check_finite_nonnegative(self.imu_orientation_stddev, "imu_orientation_stddev", False))
        heading = self.heading_estimation
        if not isinstance(heading, HeadingEstimation):
            raise EstimatorConfigError(
                f"heading_estimation: expected HeadingEstimation, got {type(heading).__name__} {heading!r}")
        if heading.reference_imu is not None and heading.reference_imu not in names:
            raise UnknownNameError("heading_estimation.reference_imu: " + describe_unknown(
                "IMU", heading.reference_imu, names))

    def imu(self, name: str) -> ImuConfig:
        """The IMU called ``name``; :class:`UnknownNameError` listing the configured names otherwise."""
        for imu in self.imus:
            if imu.name == name:
                return imu
        raise UnknownNameError(describe_unknown("IMU", name, [imu.name for imu in self.imus]))

    @property
    def imu_names(self) -> tuple:
        return tuple(imu.name for imu in self.imus)
