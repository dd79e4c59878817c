"""Parameter schema of the estimator node: names, types, ranges, descriptions, and their translation to the core.

You are in the ROS edge (``ros_dofkit.ros``). Every parameter of the estimator node is listed here once, as a
:class:`ParameterSpec`; the node declares each with a ``rcl_interfaces/ParameterDescriptor`` built from it
(:func:`make_descriptor`), validates values at start and on every change with :func:`validate_value` and
:func:`estimator_config_from_parameters` (a bad value is rejected with the reason), and builds the robot with
:func:`model_specs_from_parameters`. Only :func:`make_descriptor` needs ROS, so the schema is testable without it.

Parameter values are plain Python values as rclpy returns them: str, bool, int, float, list[str], list[float].
Per-IMU parameters live under ``imus.<name>.`` and per-instance masks under ``estimated.<instance>``; their
names are known only after ``imu_names`` and the robot are read.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.estimator.config import (
    CALIBRATE,
    HEADING_AXES,
    MAX_TIME_OFFSET_S,
    EstimatorConfig,
    EstimatorConfigError,
    HeadingEstimation,
    ImuConfig,
    OdometryConfig,
    estimated_entry,
    repeated_names,
)
from ros_dofkit.core.estimator.orientation_filter import ORIENTATION_MODES
from ros_dofkit.core.estimator.robot import BASE_JOINTS, ModelSpec

STRING, STRING_ARRAY, DOUBLE, DOUBLE_ARRAY, INTEGER, BOOL = (
    "string",
    "string_array",
    "double",
    "double_array",
    "integer",
    "bool",
)

QOS_CHOICES = ("sensor_data", "reliable", "best_effort")


class ParameterValueError(ValueError):
    """A parameter value has the wrong type, is out of range, or is inconsistent with the others."""


@dataclass(frozen=True)
class ParameterSpec:
    """One declared parameter. ``value_range`` is (lo, hi) inclusive for numbers (arrays: per element);
    ``choices`` limits strings (arrays: per element); ``sizes`` limits array lengths; ``read_only``
    parameters need a restart (rclpy rejects changes to them)."""

    name: str
    type: str
    default: object
    description: str
    read_only: bool = False
    value_range: tuple | None = None
    choices: tuple | None = None
    sizes: tuple | None = None
    #: a STRING_ARRAY parameter that also takes one plain string (declared with dynamic typing), e.g. ``all``
    accepts_string: bool = False

    def constraints(self) -> str:
        parts = []
        if self.value_range is not None:
            parts.append(f"in [{self.value_range[0]}, {self.value_range[1]}]")
        if self.choices is not None:
            parts.append(f"one of {list(self.choices)}")
        if self.sizes is not None:
            parts.append(f"length in {list(self.sizes)}")
        return "; ".join(parts)


ROBOT_PARAMETERS = (
    ParameterSpec("robot_description", STRING, "", "URDF XML of the robot (one model instance), as "
                  "robot_state_publisher; used when urdf_files is empty", read_only=True),
    ParameterSpec("urdf_files", STRING_ARRAY, [], "URDF files, one model instance each (relative paths are looked "
                  "up in the package's models directory)", read_only=True),
    ParameterSpec("model_names", STRING_ARRAY, [], "model instance name per URDF (empty: the URDF robot names)",
                  read_only=True),
    ParameterSpec("base_joints", STRING_ARRAY, [], "base joint per model instance (empty: fixed)", read_only=True,
                  choices=BASE_JOINTS),
    ParameterSpec("parent_frames", STRING_ARRAY, [], "frame each instance's root attaches to (empty: world)",
                  read_only=True),
    ParameterSpec("imu_names", STRING_ARRAY, [], "names of the IMUs; each has imus.<name>.* parameters",
                  read_only=True),
)

TOPIC_PARAMETERS = (
    ParameterSpec("joint_states_topic", STRING, "joint_states", "encoder input (sensor_msgs/JointState, partial "
                  "messages merged by name)", read_only=True),
    ParameterSpec("output_namespace", STRING, "estimated", "prefix of the output topics (joint_states, "
                  "<instance>/joint_states, odometry/<instance>, sensor_errors)", read_only=True),
    ParameterSpec("frame_prefix", STRING, "", "prepended to every TF frame id (as robot_state_publisher)",
                  read_only=True),
    ParameterSpec("world_frame", STRING, "world", "TF frame of the model world (parent of root joints and "
                  "odometry frame); the URDF root's own name publishes no root transform (no self-transform)",
                  read_only=True),
    ParameterSpec("input_qos", STRING, "sensor_data", "QoS of the inputs", read_only=True, choices=QOS_CHOICES),
    ParameterSpec("input_qos_depth", INTEGER, 10, "history depth of the inputs", read_only=True,
                  value_range=(1, 1000)),
    ParameterSpec("output_qos_depth", INTEGER, 10, "history depth of the outputs (reliable)", read_only=True,
                  value_range=(1, 1000)),
)

ESTIMATION_PARAMETERS = (
    ParameterSpec("stale_timeout", DOUBLE, 0.1, "seconds after which an IMU without samples is stale "
                  "(unobserved, reported)", value_range=(1e-4, 60.0)),
    ParameterSpec("future_tolerance", DOUBLE, 0.05, "seconds a stamp may lead the node clock", value_range=(0.0, 60.0)),
    ParameterSpec("stamp_jump_reset", DOUBLE, 1.0, "seconds a stamp may go back before tracking resets "
                  "(without clock jump)", value_range=(0.0, 3600.0)),
    ParameterSpec("accuracy", DOUBLE, 1e-4, "assembler accuracy (Simbody setAccuracy)", value_range=(1e-12, 0.5)),
    ParameterSpec("velocity_regularization", DOUBLE, 1e-8, "weight of the finite-difference prior in the gyro "
                  "velocity least squares", value_range=(1e-12, 1.0)),
    ParameterSpec("world_alignment", DOUBLE_ARRAY, [1.0, 0.0, 0.0, 0.0], "R_WG as a quaternion (w, x, y, z): the "
                  "IMU world (ENU) in the model world", sizes=(4,), value_range=(-1.0, 1.0)),
    ParameterSpec("heading_reference", STRING, "", "IMU whose heading aligns the world at calibration "
                  "(empty: none)"),
    ParameterSpec("heading_axis", STRING, "x", "signed sensor axis of the heading reference", choices=HEADING_AXES),
    ParameterSpec("calibration_window", INTEGER, 20, "recent samples per IMU averaged by calibrate",
                  value_range=(1, 10000)),
    ParameterSpec("use_joint_limits", BOOL, True, "keep estimated joints within their URDF limits"),
    ParameterSpec("sync_tolerance", DOUBLE, 0.0, "seconds within which samples of one instant are solved together "
                  "(0: free-running sensors)", value_range=(0.0, 10.0)),
    ParameterSpec("sync_joint_states", BOOL, False, "a cycle also waits for a new joint-state message while they "
                  "arrive (off: latest encoder values are held)"),
    # issue 19.2: per-IMU heading offsets and gyro biases on the chain (core.estimator.config.HeadingEstimation)
    ParameterSpec("heading_estimation.enabled", BOOL, False, "estimate each IMU's heading offset (drift about "
                  "gravity) and gyro bias together with the joints"),
    ParameterSpec("heading_estimation.drift_deg_per_min", DOUBLE, 3.0, "heading random walk per IMU: standard "
                  "deviation after one minute (deg)", value_range=(1e-6, 1000.0)),
    ParameterSpec("heading_estimation.orientation_noise_deg", DOUBLE, 1.0, "white noise of an IMU orientation "
                  "(deg per axis)", value_range=(1e-6, 90.0)),
    ParameterSpec("heading_estimation.initial_deg", DOUBLE, 1.0, "standard deviation of the heading offsets at "
                  "start (deg)", value_range=(0.0, 180.0)),
    ParameterSpec("heading_estimation.reference_imu", STRING, "", "IMU whose heading offset is held at 0 (empty: "
                  "chosen by the observability rule)"),
    ParameterSpec("heading_estimation.gyro_bias_time_constant_s", DOUBLE, 30.0, "time constant of the gyro bias "
                  "estimate (s; 0: off)", value_range=(0.0, 3600.0)),
    ParameterSpec("heading_estimation.acceleration_noise", DOUBLE, 0.3, "noise of a joint centre's horizontal "
                  "acceleration seen from one IMU (m/s^2; 0: no joint-centre acceleration constraint)",
                  value_range=(0.0, 100.0)),
    # issue 19: the live hinge calibration (~/calibrate_hinges, core.estimator.hinge_recording)
    ParameterSpec("hinge_calibration.duration", DOUBLE, 20.0, "seconds of motion (input stamps) ~/calibrate_hinges "
                  "records before it fits the raw IMUs' headings", value_range=(0.5, 600.0)),
    ParameterSpec("hinge_calibration.max_samples", INTEGER, 20000, "orientation samples per IMU ~/calibrate_hinges "
                  "keeps at most (80 bytes each; the oldest go first)", value_range=(20, 1000000)),
    ParameterSpec("diagnostics_period", DOUBLE, 1.0, "seconds between /diagnostics messages",
                  value_range=(0.01, 60.0)),
    ParameterSpec("log_throttle", DOUBLE, 5.0, "minimum seconds between repeated warnings of one kind",
                  value_range=(0.0, 3600.0)),
)

OUTPUT_PARAMETERS = (
    ParameterSpec("publish_root_tf", BOOL, True, "publish each model instance's root transform (world_frame or its "
                  "parent frame -> root link); false when odometry or a localization node owns it (REP-105: "
                  "odom -> base_link)", read_only=True),
    ParameterSpec("publish_joint_tf", BOOL, True, "publish the transforms below the roots (joints, welds); false "
                  "when another node (robot_state_publisher) owns them", read_only=True),
    ParameterSpec("tf_max_rate", DOUBLE, 0.0, "most /tf messages per second (by input stamp); 0: one per estimate",
                  read_only=True, value_range=(0.0, 10000.0)),
    ParameterSpec("publish_robot_description", BOOL, True, "publish the URDF on robot_description (std_msgs/String, "
                  "transient local) as robot_state_publisher does; off when robot_state_publisher runs too",
                  read_only=True),
    ParameterSpec("imu_orientation_stddev", DOUBLE, 0.01, "per-axis noise (rad) of the IMU orientations, for the "
                  "Odometry orientation covariance and as imu_covariance_weighting's reference", read_only=True,
                  value_range=(1e-9, 3.2)),
    ParameterSpec("imu_angular_velocity_stddev", DOUBLE, 0.01, "per-axis gyro noise (rad/s), for the Odometry "
                  "angular-velocity covariance", read_only=True, value_range=(1e-9, 100.0)),
)

_OFFSET_RANGE = (-MAX_TIME_OFFSET_S, MAX_TIME_OFFSET_S)

INPUT_PARAMETERS = (
    ParameterSpec("odometry_topic", STRING, "", "nav_msgs/Odometry of a planar or floating base (wheel or legged "
                  "odometry, robot_localization): its translation, and with odometry_yaw its heading; "
                  "header frame = the base's parent frame, child frame = the base link (with frame_prefix); empty: "
                  "none", read_only=True),
    ParameterSpec("odometry_instance", STRING, "", "model instance whose base the odometry drives (empty: the only "
                  "one with a planar or floating base)", read_only=True),
    ParameterSpec("odometry_yaw", BOOL, False, "also take the base's heading from the odometry (off: the IMUs "
                  "estimate it); a floating base's yaw about the vertical is turned to the odometry's at the output, "
                  "roll, pitch and the joints staying the IMUs'", read_only=True),
    ParameterSpec("odometry_time_offset", DOUBLE, 0.0, "seconds subtracted from every odometry stamp (its delay)",
                  read_only=True, value_range=_OFFSET_RANGE),
    ParameterSpec("joint_states_time_offset", DOUBLE, 0.0, "seconds subtracted from every joint-state stamp (the "
                  "encoders' delay)", read_only=True, value_range=_OFFSET_RANGE),
    ParameterSpec("imu_covariance_weighting", BOOL, False, "weight each IMU sample by its orientation_covariance "
                  "(REP-145): weight x imu_orientation_stddev^2 / (trace/3); all zeros: unknown (the configured "
                  "weight); a non-finite, negative-variance or asymmetric one is dropped (bad_covariance)",
                  read_only=True),
)

NODE_PARAMETERS = ROBOT_PARAMETERS + TOPIC_PARAMETERS + INPUT_PARAMETERS + OUTPUT_PARAMETERS + ESTIMATION_PARAMETERS


def imu_parameter_specs(imu_name: str) -> tuple:
    """The ``imus.<imu_name>.*`` parameters."""
    prefix = f"imus.{imu_name}."
    return (
        ParameterSpec(prefix + "body", STRING, "", "link the IMU is mounted on", read_only=True),
        ParameterSpec(prefix + "topic", STRING, f"imu/{imu_name}/data", "sensor_msgs/Imu topic", read_only=True),
        ParameterSpec(prefix + "model_instance", STRING, "", "instance owning the link (empty: unique link name)",
                      read_only=True),
        ParameterSpec(prefix + "mounting", DOUBLE_ARRAY, [1.0, 0.0, 0.0, 0.0], "R_BS as quaternion (w, x, y, z) or "
                      "row-major 3x3", read_only=True, sizes=(4, 9), value_range=(-1.0, 1.0)),
        ParameterSpec(prefix + "position", DOUBLE_ARRAY, [0.0, 0.0, 0.0], "p_BS: the sensor's origin on the link (m; "
                      "the accelerometer's lever arm for heading_estimation)", read_only=True, sizes=(3,),
                      value_range=(-100.0, 100.0)),
        ParameterSpec(prefix + "calibrate", BOOL, False, "compute R_BS with the calibrate service instead",
                      read_only=True),
        ParameterSpec(prefix + "weight", DOUBLE, 1.0, "orientation weight (0: velocities and diagnostics only)",
                      value_range=(0.0, 1e6)),
        ParameterSpec(prefix + "time_offset", DOUBLE, 0.0, "seconds subtracted from every sample's stamp (e.g. "
                      "0.008 for an IMU stamped on arrival after an 8 ms link delay)", read_only=True,
                      value_range=_OFFSET_RANGE),
        ParameterSpec(prefix + "orientation", STRING, "auto", "orientation from the message (sensor), from a VQF on "
                      "gyro + accelerometer (filter), or the filter for messages marking orientation absent (auto)",
                      read_only=True, choices=ORIENTATION_MODES),
        ParameterSpec(prefix + "filter_sample_time", DOUBLE, 0.0, "raw-IMU filter sample time (s); 0: from the "
                      "first stamp intervals", read_only=True, value_range=(0.0, 1.0)),
        ParameterSpec(prefix + "filter_max_gap", DOUBLE, 0.2, "a longer gap between raw samples restarts the filter "
                      "(s)", read_only=True, value_range=(1e-4, 3600.0)),
        ParameterSpec(prefix + "filter_max_acceleration", DOUBLE, 150.0, "accelerometer norm (m/s^2) beyond which a "
                      "raw sample counts as saturated (gyro-only update)", read_only=True, value_range=(1.0, 1e4)),
        ParameterSpec(prefix + "filter_heading", DOUBLE, 0.0, "raw-IMU filter output turned about the vertical by "
                      "this angle (rad); written by calibration", read_only=True, value_range=(-1e3, 1e3)),
        ParameterSpec(prefix + "magnetic_field_topic", STRING, "", "sensor_msgs/MagneticField topic (tesla, sensor "
                      "frame: the frame_id of the IMU's messages, else dropped) fed to the raw-IMU filter (empty: "
                      "none; orientation filter or auto only)", read_only=True),
        ParameterSpec(prefix + "filter_field_timeout", DOUBLE, 0.1, "a raw sample is fed with the newest magnetic "
                      "field not after it and at most this old (s)", read_only=True, value_range=(1e-4, 60.0)),
    )


def estimated_parameter_spec(instance_name: str) -> ParameterSpec:
    """``estimated.<instance>``: joints or coordinates estimated, or all / none (a string or a one-element list)."""
    return ParameterSpec(
        f"estimated.{instance_name}", STRING_ARRAY, ["all"],
        "estimated joints/coordinates of this instance, or all / none (also [all] / [none]); the rest are measured "
        "(locked at encoder values)", read_only=True, accepts_string=True,
    )


def _type_ok(spec: ParameterSpec, value) -> bool:
    if spec.type == STRING:
        return isinstance(value, str)
    if spec.type == BOOL:
        return isinstance(value, bool)
    if spec.type == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if spec.type == DOUBLE:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec.type == STRING_ARRAY:
        return (spec.accepts_string and isinstance(value, str)) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        )
    if spec.type == DOUBLE_ARRAY:
        return isinstance(value, (list, tuple, np.ndarray)) and all(
            isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) for v in value
        )
    raise ParameterValueError(f"unknown parameter type {spec.type!r} in the schema of {spec.name!r}")


def validate_value(spec: ParameterSpec, value) -> str | None:
    """None if ``value`` is acceptable for ``spec``, else the reason (expected vs received)."""
    if not _type_ok(spec, value):
        return f"{spec.name}: expected {spec.type}, got {type(value).__name__} {value!r}"
    items = list(value) if spec.type in (STRING_ARRAY, DOUBLE_ARRAY) and not isinstance(value, str) else [value]
    if spec.sizes is not None and len(items) not in spec.sizes:
        return f"{spec.name}: expected length in {list(spec.sizes)}, got {len(items)}"
    if spec.value_range is not None:
        lo, hi = spec.value_range
        for item in items:
            if not (math.isfinite(item) and lo <= item <= hi):
                return f"{spec.name}: expected values in [{lo}, {hi}], got {item!r}"
    if spec.choices is not None:
        for item in items:
            if item not in spec.choices:
                return f"{spec.name}: expected one of {list(spec.choices)}, got {item!r}"
    return None


def make_descriptor(spec: ParameterSpec):
    """The ``rcl_interfaces.msg.ParameterDescriptor`` of ``spec`` (type, description, ranges, read-only)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

    types = {
        STRING: ParameterType.PARAMETER_STRING,
        STRING_ARRAY: ParameterType.PARAMETER_STRING_ARRAY,
        DOUBLE: ParameterType.PARAMETER_DOUBLE,
        DOUBLE_ARRAY: ParameterType.PARAMETER_DOUBLE_ARRAY,
        INTEGER: ParameterType.PARAMETER_INTEGER,
        BOOL: ParameterType.PARAMETER_BOOL,
    }
    descriptor = ParameterDescriptor(
        name=spec.name,
        type=types[spec.type],
        description=spec.description,
        additional_constraints=spec.constraints(),
        read_only=spec.read_only,
        dynamic_typing=spec.accepts_string,
    )
    if spec.value_range is not None and spec.type == DOUBLE:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=float(spec.value_range[0]), to_value=float(spec.value_range[1]), step=0.0)
        ]
    if spec.value_range is not None and spec.type == INTEGER:
        descriptor.integer_range = [
            IntegerRange(from_value=int(spec.value_range[0]), to_value=int(spec.value_range[1]), step=1)
        ]
    return descriptor


def _per_instance(values: dict, key: str, count: int, default):
    entries = list(values.get(key, []) or [])
    if not entries:
        return [default] * count
    if len(entries) != count:
        raise ParameterValueError(f"{key}: expected {count} entries (one per URDF file) or none, got {len(entries)}")
    return entries


def model_specs_from_parameters(values: dict) -> list:
    """The robot's :class:`ModelSpec` list from ``robot_description`` or ``urdf_files`` (+ names, base joints,
    parent frames). A non-empty ``robot_description`` wins over ``urdf_files``. Raises
    :class:`ParameterValueError` saying which parameter is wrong."""
    files = list(values.get("urdf_files", []) or [])
    description = values.get("robot_description", "") or ""
    # A robot_description (e.g. from a launch argument) replaces the files: it is the one model instance.
    sources = [description] if description.strip() else files
    if not sources:
        raise ParameterValueError("no robot: set robot_description (URDF XML) or urdf_files (paths)")
    names = _per_instance(values, "model_names", len(sources), None)
    base_joints = _per_instance(values, "base_joints", len(sources), "fixed")
    parents = _per_instance(values, "parent_frames", len(sources), "world")
    try:
        return [ModelSpec(s, n or None, b, p) for s, n, b, p in zip(sources, names, base_joints, parents, strict=True)]
    except EstimatorConfigError as error:
        raise ParameterValueError(str(error)) from error


def mounting_from_parameter(values, name: str):
    """R_BS (3x3) from the ``imus.<name>.mounting`` value (quaternion w, x, y, z or row-major 3x3)."""
    array = np.asarray(values, dtype=float)
    return array.reshape(3, 3) if array.size == 9 else array


def imu_configs_from_parameters(values: dict) -> tuple:
    """ImuConfig per name in ``imu_names`` from the ``imus.<name>.*`` values (defaults from the schema)."""
    configs = []
    names = list(values.get("imu_names", []) or [])
    if repeated_names(names):
        raise ParameterValueError(f"imu_names: names must be unique, got {repeated_names(names)} more than once")
    for name in names:
        specs = {spec.name.rsplit(".", 1)[1]: spec for spec in imu_parameter_specs(name)}
        get = {key: values.get(spec.name, spec.default) for key, spec in specs.items()}
        for key, spec in specs.items():
            reason = validate_value(spec, get[key])
            if reason:
                raise ParameterValueError(reason)
        if not get["body"]:
            raise ParameterValueError(f"imus.{name}.body: every IMU needs the link it is mounted on")
        mounting = CALIBRATE if get["calibrate"] else mounting_from_parameter(get["mounting"], name)
        try:
            configs.append(ImuConfig(
                name=name, body=get["body"], topic=get["topic"], mounting=mounting, weight=get["weight"],
                model_instance=get["model_instance"] or None, time_offset_s=get["time_offset"],
                orientation=get["orientation"], position=get["position"],
                filter={"sample_time_s": get["filter_sample_time"], "max_gap_s": get["filter_max_gap"],
                        "max_acceleration": get["filter_max_acceleration"], "heading_offset": get["filter_heading"],
                        "field_timeout_s": get["filter_field_timeout"]},
                magnetic_field_topic=get["magnetic_field_topic"],
            ))
        except EstimatorConfigError as error:
            raise ParameterValueError(str(error)) from error
    return tuple(configs)


def estimator_config_from_parameters(values: dict, instance_names, imus=None, R_WG=None) -> EstimatorConfig:
    """The core :class:`EstimatorConfig` from parameter values. ``imus`` / ``R_WG`` override the parameters
    (the node passes calibrated mountings and alignment so that a parameter change keeps a calibration)."""
    for spec in ESTIMATION_PARAMETERS:
        reason = validate_value(spec, values.get(spec.name, spec.default))
        if reason:
            raise ParameterValueError(reason)

    def get(name):
        return values.get(name, next(s.default for s in ESTIMATION_PARAMETERS if s.name == name))

    estimated = {}
    for instance in instance_names:
        spec = estimated_parameter_spec(instance)
        try:
            estimated[instance] = estimated_entry(values.get(spec.name, spec.default), spec.name)
        except EstimatorConfigError as error:
            raise ParameterValueError(str(error)) from error
    unknown = sorted(
        key.split(".", 1)[1] for key in values if key.startswith("estimated.") and key.split(".", 1)[1]
        not in instance_names
    )
    if unknown:
        raise ParameterValueError(
            f"estimated.*: unknown model instances {unknown}; the robot's instances are {list(instance_names)}"
        )
    world = np.asarray(get("world_alignment"), dtype=float)
    inputs = {spec.name: values.get(spec.name, spec.default) for spec in INPUT_PARAMETERS}
    for spec in INPUT_PARAMETERS:
        reason = validate_value(spec, inputs[spec.name])
        if reason:
            raise ParameterValueError(reason)
    orphans = [spec.name for spec in INPUT_PARAMETERS[1:4] if inputs[spec.name] != spec.default]
    if orphans and not inputs["odometry_topic"]:
        raise ParameterValueError(f"{', '.join(orphans)}: set for an odometry input, but odometry_topic is empty "
                                  "(no odometry is read)")
    try:
        odometry = OdometryConfig(
            model_instance=inputs["odometry_instance"] or None, topic=inputs["odometry_topic"],
            use_yaw=inputs["odometry_yaw"], time_offset_s=inputs["odometry_time_offset"],
        ) if inputs["odometry_topic"] else None
        return EstimatorConfig(
            imus=imu_configs_from_parameters(values) if imus is None else imus,
            estimated_joints=estimated,
            stale_timeout_s=get("stale_timeout"),
            future_tolerance_s=get("future_tolerance"),
            stamp_jump_reset_s=get("stamp_jump_reset"),
            accuracy=get("accuracy"),
            velocity_regularization=get("velocity_regularization"),
            R_WG=world if R_WG is None else R_WG,
            heading_reference=get("heading_reference") or None,
            heading_axis=get("heading_axis"),
            calibration_window=get("calibration_window"),
            use_joint_limits=get("use_joint_limits"),
            sync_joint_states=get("sync_joint_states"),
            sync_tolerance_s=get("sync_tolerance"),
            joint_state_time_offset_s=inputs["joint_states_time_offset"],
            odometry=odometry,
            imu_covariance_weighting=inputs["imu_covariance_weighting"],
            imu_orientation_stddev=values.get("imu_orientation_stddev", next(
                s.default for s in OUTPUT_PARAMETERS if s.name == "imu_orientation_stddev")),
            heading_estimation=HeadingEstimation(
                enabled=get("heading_estimation.enabled"),
                drift_deg_per_min=get("heading_estimation.drift_deg_per_min"),
                orientation_noise_deg=get("heading_estimation.orientation_noise_deg"),
                initial_deg=get("heading_estimation.initial_deg"),
                reference_imu=get("heading_estimation.reference_imu") or None,
                gyro_bias_time_constant_s=get("heading_estimation.gyro_bias_time_constant_s"),
                acceleration_noise=get("heading_estimation.acceleration_noise")),
        )
    except EstimatorConfigError as error:
        raise ParameterValueError(str(error)) from error


def flatten_parameters(tree: dict, prefix: str = "") -> dict:
    """Nested parameter dicts (as in a ROS 2 parameter YAML) -> {"a.b.c": value}, lists kept as values."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_parameters(value, name + "."))
        else:
            flat[name] = list(value) if isinstance(value, (list, tuple)) else value
    return flat


def load_parameter_file(path, node_name: str = "estimator") -> dict:
    """Flat parameter values of ``node_name`` from a ROS 2 parameter YAML (``/**`` entries first, then the
    node's own, later ones winning, as rcl does). Raises :class:`ParameterValueError` for a file without
    ``ros__parameters``."""
    from ruamel.yaml import YAML

    with open(path, encoding="utf-8") as stream:
        document = YAML(typ="safe", pure=True).load(stream) or {}
    values = {}
    matched = False
    for key in ("/**", node_name, f"/{node_name}", f"/**/{node_name}"):
        section = document.get(key)
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            values.update(flatten_parameters(section["ros__parameters"]))
            matched = True
    if not matched:
        raise ParameterValueError(
            f"{path}: no 'ros__parameters' for node {node_name!r} (top-level keys: {list(document)})"
        )
    return values


def known_parameter_specs(values: dict, instance_names=()) -> dict:
    """{name: spec} of every parameter the node declares for these values (fixed ones, per IMU, per instance)."""
    specs = {spec.name: spec for spec in NODE_PARAMETERS}
    for name in values.get("imu_names", []) or []:
        specs.update({spec.name: spec for spec in imu_parameter_specs(name)})
    for instance in instance_names:
        spec = estimated_parameter_spec(instance)
        specs[spec.name] = spec
    return specs


def command_line_parameters(argv, node_name: str = "estimator") -> dict:
    """``{name: text}`` of the ``-p name:=text`` / ``--param name:=text`` arguments inside ``--ros-args`` (also
    ``-p node:name:=text`` for ``node_name``), untyped. rcl silently drops a command-line value whose type differs
    from the same parameter in a ``--params-file``, so the node types and checks these itself."""
    values = {}
    inside = False
    argv = list(argv)
    for k, arg in enumerate(argv):
        if arg == "--ros-args":
            inside = True
        elif arg == "--":
            inside = False
        elif inside and arg in ("-p", "--param") and k + 1 < len(argv) and ":=" in argv[k + 1]:
            name, text = argv[k + 1].split(":=", 1)
            node, _, bare = name.rpartition(":")
            if node and node.lstrip("/") != node_name:
                continue
            values[bare] = text
    return values


def unknown_parameter_reason(name: str, known_names) -> str:
    """"unknown parameter 'x'; did you mean [...]?" with the known names that look alike (difflib)."""
    near = difflib.get_close_matches(name, list(known_names), n=3, cutoff=0.6)
    return f"unknown parameter {name!r}" + (f"; did you mean {near}?" if near else "")


def validate_parameters(values: dict, instance_names=()) -> list:
    """Reasons (strings) why ``values`` are not a valid estimator configuration; empty when they are. Unknown
    parameter names are reported with the known ones that look alike."""
    specs = known_parameter_specs(values, instance_names)
    reasons = []
    for name, value in values.items():
        if name == "use_sim_time":
            continue
        spec = specs.get(name)
        if spec is None:
            if name.startswith("estimated.") and not instance_names:
                continue  # instances not known yet: checked once the robot is built
            reasons.append(unknown_parameter_reason(name, specs))
            continue
        reason = validate_value(spec, value)
        if reason:
            reasons.append(reason)
    return reasons
