"""``estimator``: joint configuration from encoders and IMUs, published as JointState, TF, Odometry, diagnostics.

You are in a thin node (``ros_dofkit.nodes``): it declares and validates parameters
(``ros_dofkit.ros.parameters``), wires topics, and calls the ROS-free core
(``ros_dofkit.core.estimator.estimator.Estimator``) — all data-flow logic lives there, so offline replay behaves
the same.

Topics (relative names follow the node's namespace; ``<out>`` is the ``output_namespace`` parameter):

* in: ``joint_states`` (sensor_msgs/JointState, partial messages merged by name), one sensor_msgs/Imu topic per
  configured IMU (``imus.<name>.topic``), a raw IMU's sensor_msgs/MagneticField (``imus.<name>.magnetic_field_topic``
  when set; a field whose frame_id is not its IMU's newest Imu frame_id is dropped as ``unknown_frame``, counted
  ``orientation_filter.<name>.field_frame_mismatch``: ``ros.magnetometer_frames``), ``odometry_topic`` when set
  (nav_msgs/Odometry: a planar or floating base's translation, optionally a planar base's heading); SensorDataQoS
  unless ``input_qos`` says otherwise;
* out: ``<out>/joint_states`` (all articulated coordinates), ``<out>/<instance>/joint_states`` (each model
  instance's DofMask), ``<out>/odometry/<instance>`` (nav_msgs/Odometry per planar or floating base, twist in the
  child frame), ``<out>/sensor_errors`` (std_msgs/Float64MultiArray, degrees), ``/tf`` (every moving joint,
  stamped with the input time), ``/tf_static`` (fixed joints, once, transient local), ``/diagnostics``;
* service ``~/calibrate`` (std_srvs/Trigger): IMU mountings configured as "calibrate" and the heading alignment,
  from the recent static window; service ``~/calibrate_hinges`` (std_srvs/Trigger): then raw IMUs' headings from
  the motion that follows (``nodes.hinge_calibration_service``).

A cycle runs when every live IMU has delivered a new sample (see ``Estimator.ready``); its outputs carry the
newest input stamp. Bad input is dropped and counted by reason (diagnostics) with a throttled warning; the node
keeps running. That includes bytes that are not a message of the topic's type (``rejected.malformed_message``).
Bad parameters at start stop the node with the reason; bad changes at run time are rejected with the reason.

Speed (DESIGN.md's node budget, measured by benchmarks/node_latency.py against a relay node's floor): inputs are
taken serialized and decoded without message objects (``ros_dofkit.ros.live_cdr``), by a loop that waits on the
input subscriptions alone (``ros_dofkit.ros.input_loop``; timers, services and parameters are served between
inputs by an ordinary executor, every :data:`HOUSEKEEPING_PERIOD_S` and when a timer is due); each message reads the
clock without asking rcl whether ROS time is active (``nodes.common.ClockSeconds``); JointState and TF go out as
pre-serialized bytes; start-up objects are frozen out of the garbage collector's generations so that its passes stay
short.
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
import time
from collections import OrderedDict
from functools import partial

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import get_parameter_value, parameter_value_to_python
from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Imu, JointState, MagneticField
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from ros_dofkit.core.estimator.config import EstimatorConfigError
from ros_dofkit.core.estimator.estimator import CalibrationError, Estimator
from ros_dofkit.core.estimator.odometry import (
    SolveCovarianceModel,
    base_odometries,
    unconstrained_estimated_coordinates,
)
from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.nodes.common import ClockSeconds, StartupError, declare_specs, run_node
from ros_dofkit.nodes.hinge_calibration_service import HingeCalibrationService
from ros_dofkit.precompile import warm_up
from ros_dofkit.ros.estimator_messages import (
    BaseOdometryOutput,
    JointStateSelection,
    NodeStatistics,
    RateLimiter,
    diagnostics_message,
    robot_description_text,
    sensor_errors_message,
)
from ros_dofkit.ros.imu_input import (
    feed_imu_cdr,
    feed_joint_state_msg,
    feed_magnetic_field_msg,
    feed_odometry_msg,
    odometry_frames,
    seconds_to_sec_nanosec,
)
from ros_dofkit.ros.input_loop import InputLoop
from ros_dofkit.ros.live_cdr import MalformedMessageError, decode_imu
from ros_dofkit.ros.parameters import (
    ESTIMATION_PARAMETERS,
    NODE_PARAMETERS,
    ParameterValueError,
    command_line_parameters,
    estimated_parameter_spec,
    estimator_config_from_parameters,
    imu_parameter_specs,
    known_parameter_specs,
    model_specs_from_parameters,
    unknown_parameter_reason,
    validate_value,
)
from ros_dofkit.ros.qos import (
    QosEventMonitor,
    create_input_subscription,
    create_output_publisher,
    output_qos,
    sensor_input_qos,
    tf_qos,
    tf_static_qos,
)
from ros_dofkit.ros.tf_builder import TfBuilder
from ros_dofkit.ros.tf_tree import TfTreeError, tf_tree_from_parameters

NODE_NAME = "estimator"


def input_qos_profile(kind: str, depth: int) -> QoSProfile:
    """The inputs' QoS from the ``input_qos`` / ``input_qos_depth`` parameters."""
    if kind == "sensor_data":
        profile = sensor_input_qos()
        profile.depth = depth
        return profile
    reliability = QoSReliabilityPolicy.RELIABLE if kind == "reliable" else QoSReliabilityPolicy.BEST_EFFORT
    return QoSProfile(history=QoSHistoryPolicy.KEEP_LAST, depth=depth, reliability=reliability)


class EstimatorNode(Node):
    """The estimator node (see the module docstring)."""

    def __init__(self, own_process: bool = False, **node_kwargs):
        """``own_process``: the node is its process's only purpose (``main``): what its start-up made is frozen out
        of the garbage collector's generations before the inputs are subscribed."""
        super().__init__(NODE_NAME, **node_kwargs)
        self._clock_reader = ClockSeconds(self.get_clock())  # read on every input message
        self._values = declare_specs(self, NODE_PARAMETERS)
        try:
            self.plant = build_plant(model_specs_from_parameters(self._values))
        except (ValueError, TypeError, OSError) as error:  # typed errors of the plant / URDF loader and ours
            raise StartupError(f"robot: {error}") from error
        self.instance_names = [
            self.plant.get_model_instance_name(i) for i in range(1, self.plant.num_model_instances())
        ]
        for name in self._values["imu_names"]:
            self._values.update(declare_specs(self, imu_parameter_specs(name)))
        self._values.update(declare_specs(self, [estimated_parameter_spec(i) for i in self.instance_names]))
        self._check_command_line_types()
        try:
            config = estimator_config_from_parameters(self._values, self.instance_names)
            self.estimator = Estimator(self.plant, config)
        except (ParameterValueError, EstimatorConfigError) as error:
            raise StartupError(str(error)) from error
        self._warm_up(config)

        values = self._values
        out = values["output_namespace"].strip("/")
        prefix = f"{out}/" if out else ""
        self.qos_events = QosEventMonitor(self)
        out_qos = output_qos(values["output_qos_depth"])
        self._joint_states = JointStateSelection(self.estimator)
        self._joint_state_publisher = create_output_publisher(
            self, JointState, f"{prefix}joint_states", self.qos_events, qos=out_qos)
        self._instance_outputs = []
        for instance, mask in self.estimator.instance_masks.items():
            if mask.count() == 0:
                continue
            publisher = create_output_publisher(
                self, JointState, f"{prefix}{instance}/joint_states", self.qos_events, qos=out_qos)
            self._instance_outputs.append((JointStateSelection(self.estimator, mask), publisher))
        self._build_tf()
        self._build_odometry(prefix, out_qos)
        self._errors_publisher = create_output_publisher(
            self, Float64MultiArray, f"{prefix}sensor_errors", self.qos_events, qos=out_qos)
        self._tf_publisher = create_output_publisher(self, TFMessage, "/tf", self.qos_events, qos=tf_qos())
        self._tf_static_publisher = create_output_publisher(
            self, TFMessage, "/tf_static", self.qos_events, qos=tf_static_qos())
        self._diagnostics_publisher = create_output_publisher(self, DiagnosticArray, "/diagnostics", self.qos_events)

        in_qos = input_qos_profile(values["input_qos"], values["input_qos_depth"])
        odometry = config.odometry
        self.statistics = NodeStatistics(["joint_states", *config.imu_names, *(
            f"{imu.name}/magnetic_field" for imu in config.imus if imu.magnetic_field_topic),
            *(["odometry"] if odometry else [])])
        self._stamps: OrderedDict = OrderedDict()
        self._last_stamp = None  # the (sec, nanosec) last remembered
        self._newest_imu_data: dict = {}  # IMU name -> its newest Imu's bytes (the magnetometer's frame_id check)
        self._last_log: dict = {}
        #: (subscription, handler(bytes)) of every input: served by InputLoop in main(), or by any executor.
        self.input_subscriptions = []
        #: (header, child) frames an Odometry input must carry (None: no odometry input)
        self._odometry_frames = None
        if odometry is not None:
            self._odometry_frames = odometry_frames(self.tf.tree, self.estimator.odometry_base.body)
            self.get_logger().info(f"base of {self.estimator.odometry_base.instance!r} from the odometry on "
                                   f"{odometry.topic!r} ({self._odometry_frames[1]} in {self._odometry_frames[0]}; "
                                   f"translation{' and heading' if odometry.use_yaw else ''})")
        self.create_service(Trigger, "~/calibrate", self._on_calibrate)
        self.hinge_calibration = HingeCalibrationService(self, self.estimator)  # ~/calibrate_hinges (issue 19)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._filter_resets = {}  # raw IMU name -> orientation filter restarts already logged
        self._diagnostics_timer = self.create_timer(values["diagnostics_period"], self._publish_diagnostics)
        self._publish_static_tf()
        self._publish_robot_description()
        self._warn_unknown_overrides()
        self._check_observability()
        self.get_logger().info(
            f"estimator ready: {self.plant.num_positions()} positions in {len(self.instance_names)} model "
            f"instance(s) {self.instance_names}, {len(config.imus)} IMU(s) {list(config.imu_names)}, "
            f"{self.estimator.estimated_mask.count()} estimated articulated coordinate(s), "
            f"{len(self.estimator.floating_joints)} floating base(s)"
        )
        if own_process:
            # Everything made so far (plant, compiled kernels, templates) lives as long as the node: moved out of the
            # collector's generations, a full collection no longer walks it (p99 measured with and without: see
            # doc/architecture.md, Estimator node).
            gc.collect()
            gc.freeze()
        self._subscribe_inputs(config, in_qos)

    def _subscribe_inputs(self, config, qos) -> None:
        """The input subscriptions, made last: a publisher that waits for its subscriber (the benchmark's, many
        drivers) then sends to a node about to take its messages. Made before the rest of the start-up (~0.1 s) and
        the collector's pass (~0.13 s, loaded), the first ~0.2 s of messages queued and were rejected as stale
        (stale_timeout 0.1 s; 150 in node_latency's first round, issue 18)."""
        self._add_input(JointState, self._values["joint_states_topic"], self._on_joint_state_data, qos)
        for imu in config.imus:
            self._add_input(Imu, imu.topic, self._imu_callback(imu.name, bool(imu.magnetic_field_topic)), qos)
            if imu.magnetic_field_topic:  # raw IMUs: a magnetometer for the orientation filter (issue 19.1)
                self._add_input(MagneticField, imu.magnetic_field_topic, self._magnetic_field_callback(imu.name),
                                qos)
        if config.odometry is not None:
            self._add_input(Odometry, config.odometry.topic, self._on_odometry_data, qos)

    # ------------------------------------------------------------------ start-up helpers
    def _check_command_line_types(self) -> None:
        """Refuse a ``-p name:=value`` of the wrong type as the same value in the YAML file is refused (rcl drops
        it silently when the file sets the parameter too)."""
        specs = known_parameter_specs(self._values, self.instance_names)
        for name, text in command_line_parameters(sys.argv, self.get_name()).items():
            # Typed as rclpy types `ros2 param set` values (YAML 1.1); "1e-4" is a double to rcl, a string to it.
            value = parameter_value_to_python(get_parameter_value(text))
            if isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = float(value)
            if isinstance(value, (tuple, np.ndarray)) or type(value).__name__ == "array":
                value = list(value)
            reason = validate_value(specs[name], value) if name in specs else None
            if reason:
                raise StartupError(f"parameter {name!r} from the command line: {reason}")

    def _warm_up(self, config) -> None:
        """Run one cycle on a scratch Estimator so that compiled kernels are loaded before real data arrives."""
        warm_up(self.plant, config)

    def _build_tf(self) -> None:
        """The TF tree the parameters ask for (REP-105 ownership, external parents, no self-transforms)."""
        try:
            tree = tf_tree_from_parameters(self.plant, self._values)
        except (TfTreeError, ParameterValueError) as error:
            raise StartupError(f"TF: {error}") from error
        self.tf = TfBuilder(self.plant, tree=tree)
        self._tf_limiter = RateLimiter(self._values["tf_max_rate"])
        for instance, frame in tree.external_parents.items():
            self.get_logger().info(f"model instance {instance!r} hangs from the TF frame {frame!r} (not a frame of "
                                   "the model: another node publishes it)")
        for body, reason in tree.unpublished.items():
            self.get_logger().info(f"not publishing {tree.parent_frame_ids[body]} -> {tree.frame_ids[body]}: "
                                   f"{reason}")

    def _build_odometry(self, prefix: str, out_qos) -> None:
        """One Odometry publisher per planar or floating base on the world: header frame the one its root hangs
        from (REP-105)."""
        self._odometry = []
        for base in base_odometries(self.plant):
            instance = self.plant.get_model_instance_name(base.joint.model_instance)
            builder = BaseOdometryOutput(base, self.tf.tree.parent_frame_of(base.body), self.tf.frame_ids[base.body])
            publisher = create_output_publisher(self, Odometry, f"{prefix}odometry/{instance}", self.qos_events,
                                                qos=out_qos)
            self._odometry.append((builder, publisher))
        self._covariance_model = SolveCovarianceModel(
            self.estimator, self._values["imu_orientation_stddev"] ** 2,
            self._values["imu_angular_velocity_stddev"] ** 2) if self._odometry else None

    def _publish_robot_description(self) -> None:
        """The URDF on ``robot_description`` (std_msgs/String, transient local), as robot_state_publisher."""
        self._robot_description_publisher = None
        if not self._values["publish_robot_description"]:
            return
        try:
            text = robot_description_text(model_specs_from_parameters(self._values))
        except (ParameterValueError, OSError, EstimatorConfigError) as error:
            raise StartupError(f"robot_description: {error}") from error
        if text is None:
            self.get_logger().warning("robot_description not published: no single URDF tree holds the model "
                                      "instances (a second root, or names used twice)")
            return
        self._robot_description_publisher = create_output_publisher(
            self, String, "robot_description", self.qos_events, qos=tf_static_qos())
        self._robot_description_publisher.publish(String(data=text))

    def _warn_unknown_overrides(self) -> None:
        """A parameter given (command line, file) that the node never declared: warned with the near names."""
        # rclpy keeps every override of the command line and parameter files in Node._parameter_overrides (no
        # public accessor); those never declared are the ones it ignores silently.
        declared = list(self.get_parameters_by_prefix(""))
        for name in sorted(set(self._parameter_overrides) - set(declared)):
            self.get_logger().warning(f"{unknown_parameter_reason(name, declared)} (ignored)")

    def _check_observability(self) -> None:
        """Warn (and report on /diagnostics) the estimated coordinates no IMU constrains (at a generic pose)."""
        self._unconstrained = unconstrained_estimated_coordinates(self.estimator)
        if self._unconstrained:
            self.get_logger().warning(
                f"the IMUs do not constrain {list(self._unconstrained)} (rank of their stacked angular Jacobians "
                "at a generic pose): these estimates are minimum-norm guesses; add IMUs or measure them")

    def _publish_static_tf(self) -> None:
        sec, nanosec = seconds_to_sec_nanosec(self.get_clock().now().nanoseconds * 1e-9)
        transforms = self.tf.static_transforms(sec, nanosec)
        if transforms:
            self._tf_static_publisher.publish(TFMessage(transforms=transforms))

    # ------------------------------------------------------------------ logging
    def _warn_throttled(self, key, text: str) -> None:
        period = self._values["log_throttle"]
        now = time.monotonic()
        if now - self._last_log.get(key, -math.inf) >= period:
            self._last_log[key] = now
            self.get_logger().warning(text)

    def _clock_now(self):
        return self._clock_reader.seconds()  # sim time before the first /clock: None, no clock

    # ------------------------------------------------------------------ inputs and the cycle
    def _add_input(self, msg_type, topic: str, handler, qos) -> None:
        # Serialized messages: the handlers decode them (an Imu without building a message object), and bytes
        # that do not decode are counted and dropped instead of failing inside rclpy's take.
        subscription = create_input_subscription(self, msg_type, topic, handler, self.qos_events, qos=qos, raw=True)
        self.input_subscriptions.append((subscription, handler))

    def _remember_stamp(self, sec: int, nanosec: int) -> None:
        # The key is the core's stamp (stamp_to_seconds): outputs get the input's exact (sec, nanosec) back.
        self._last_stamp = (sec, nanosec)
        self._stamps[sec + nanosec * 1e-9] = self._last_stamp
        if len(self._stamps) > 256:
            self._stamps.popitem(last=False)

    def _malformed(self, source: str, error) -> None:
        self.statistics.record_malformed(source)
        self._warn_throttled((source, "malformed_message"), f"{source}: malformed_message: {error} (message dropped)")

    def _message(self, data: bytes, msg_type, source: str):
        """The message of an input's bytes, or None (counted and logged as malformed)."""
        try:
            return deserialize_message(data, msg_type)
        except RuntimeError as error:  # rclpy's RMWError: the bytes are not a message of the topic's type
            self._malformed(source, error)
            return None

    def _on_joint_state_data(self, data: bytes) -> None:
        msg = self._message(data, JointState, "joint_states")
        if msg is None:
            return
        self._remember_stamp(int(msg.header.stamp.sec), int(msg.header.stamp.nanosec))
        status, results = feed_joint_state_msg(self.estimator, msg, now=self._clock_now())
        self._after_input("joint_states", status, results)

    def _on_odometry_data(self, data: bytes) -> None:
        msg = self._message(data, Odometry, "odometry")
        if msg is None:
            return
        status, results = feed_odometry_msg(self.estimator, msg, self._odometry_frames, now=self._clock_now())
        self._after_input("odometry", status, results)

    def _imu_callback(self, name: str, keep_data: bool = False):
        """``keep_data``: the IMU has a magnetometer, whose fields are checked against its newest Imu's frame_id."""
        clock_seconds, estimator = self._clock_reader.seconds, self.estimator

        def on_imu(data: bytes) -> None:
            try:
                sec, nanosec, status, results = feed_imu_cdr(estimator, name, data, now=clock_seconds())
            except MalformedMessageError as error:
                self._malformed(name, error)
                return
            if (sec, nanosec) != self._last_stamp:  # (a set's messages share their stamp: one entry a set)
                self._remember_stamp(sec, nanosec)
            if keep_data:
                self._newest_imu_data[name] = data
            self._after_input(name, status, results)

        return on_imu

    def _magnetic_field_callback(self, name: str):
        def on_field(data: bytes) -> None:
            msg = self._message(data, MagneticField, f"{name}/magnetic_field")
            if msg is not None:
                imu_data = self._newest_imu_data.get(name)
                status = feed_magnetic_field_msg(self.estimator, name, msg,
                                                 None if imu_data is None else decode_imu(imu_data)[2])
                self._after_input(f"{name}/magnetic_field", status, ())

        return on_field

    def _after_input(self, source: str, status, results) -> None:
        # The outputs first: the counters and log lines below are not what a consumer of the estimate waits for.
        for result in results:
            self._publish_result(result)
        self.statistics.record_input(source, time.monotonic())
        if status.reason is not None:
            self._warn_throttled((source, status.reason), f"{source}: {status.reason.value}: {status.detail}"
                                 + ("" if status.accepted else " (message dropped)"))

    def _publish_result(self, result) -> None:
        if not result.initialized:
            self._warn_throttled("uninitialized", "waiting for IMU samples: the estimated coordinates have not been "
                                 "solved yet, nothing is published")
            return
        sec, nanosec = self._stamps.get(result.stamp) or seconds_to_sec_nanosec(result.stamp)
        # Outputs nobody subscribes to are not built (a cycle's budget is a few hundred microseconds). JointState
        # and TF are published as bytes serialized into fixed templates: building the message objects and having
        # rclpy convert them cost ~4x more. JointState goes out before the cycle's bookkeeping (statistics, log
        # lines), which no consumer waits for.
        if self._joint_state_publisher.get_subscription_count():
            self._joint_state_publisher.publish(self._joint_states.serialized(result, sec, nanosec))
        self.statistics.record_output(result, time.monotonic())
        if result.stale_sensors:
            self._warn_throttled(("stale", result.stale_sensors),
                                 f"stale IMU(s) {list(result.stale_sensors)}: no sample within "
                                 f"{self.estimator.config.stale_timeout_s} s; tracking with the others")
        if not result.solved and result.observed_sensors:
            self._warn_throttled("solve", f"cycle at {result.stamp:.6f} s not solved: {result.failure}")
        for selection, publisher in self._instance_outputs:
            if publisher.get_subscription_count():
                publisher.publish(selection.serialized(result, sec, nanosec))
        if self._odometry:
            self._publish_odometry(result, sec, nanosec)
        self._publish_tf(result, sec, nanosec)
        if self._errors_publisher.get_subscription_count():
            self._errors_publisher.publish(sensor_errors_message(result, self.estimator.config.imu_names))

    def _publish_odometry(self, result, sec: int, nanosec: int) -> None:
        covariances = None
        for builder, publisher in self._odometry:
            if publisher.get_subscription_count():
                if covariances is None:
                    covariances = self._covariance_model.covariances(result)
                publisher.publish(builder.message(result, Time(sec=sec, nanosec=nanosec), covariances))

    def _publish_tf(self, result, sec: int, nanosec: int) -> None:
        if self.tf.moving_bodies and self._tf_publisher.get_subscription_count() and \
                self._tf_limiter.admit(result.stamp):
            self._tf_publisher.publish(self.tf.moving_transforms_serialized(result.X_WB, sec, nanosec))

    def _publish_diagnostics(self) -> None:
        for name, counts in self.estimator.filter_counts().items():  # raw IMUs: a filter restart is logged
            if counts["resets"] > self._filter_resets.get(name, 0):
                self._warn_throttled((name, "filter_reset"), f"{name}: orientation filter restarted after a gap or a "
                                     f"jump back of its stamps ({counts['resets']} restarts so far)")
            self._filter_resets[name] = counts["resets"]
        msg = diagnostics_message(self.get_clock().now().to_msg(), self.get_name(), self.estimator,
                                  self.statistics, time.monotonic(), dict(self.qos_events.counts),
                                  unconstrained=self._unconstrained, clock_s=self._clock_now())
        if self._odometry_frames is not None:
            msg.status.append(self._odometry_diagnostics())
        msg.status.append(self.hinge_calibration.diagnostic_status())
        self._diagnostics_publisher.publish(msg)

    def _odometry_diagnostics(self) -> DiagnosticStatus:
        """The odometry input's entry on /diagnostics: stale (no accepted message within stale_timeout of the
        clock) or OK, its frames, its last accepted stamp, and its rejected messages by reason."""
        estimator = self.estimator
        last = estimator.odometry_stamp
        now = self._clock_now()
        timeout = estimator.config.stale_timeout_s
        stale = not (now is not None and last >= now - timeout)
        rejected = {reason: count for (source, reason), count in estimator.reject_counts_by_source().items()
                    if source == "odometry"}
        rejected["malformed_message"] = self.statistics.malformed.get("odometry", 0)
        parent, child = self._odometry_frames
        values = [KeyValue(key="frames", value=f"{child} in {parent}"),
                  KeyValue(key="last_stamp", value="none" if math.isnan(last) else f"{last:.9f}"),
                  KeyValue(key="rejected.total", value=str(sum(rejected.values()))),
                  *[KeyValue(key=f"rejected.{reason}", value=str(count)) for reason, count in sorted(rejected.items())]]
        message = f"stale: no accepted odometry within {timeout:g} s" if stale else "OK"
        return DiagnosticStatus(level=DiagnosticStatus.WARN if stale else DiagnosticStatus.OK,
                                name=f"{self.get_name()}: odometry", message=message, values=values)

    # ------------------------------------------------------------------ service and parameters
    def _on_calibrate(self, request, response):
        try:
            result = self.estimator.calibrate(now=self._clock_now())
        except (CalibrationError, ValueError) as error:
            response.success = False
            response.message = str(error)
            self.get_logger().warning(f"calibration refused: {error}")
            return response
        mountings = ", ".join(
            f"{name}: R_BS quaternion (w, x, y, z) {np.round(matrix_to_quat(R), 6).tolist()}"
            for name, R in result.R_BS.items()
        )
        response.success = True
        response.message = (
            f"calibrated {list(result.R_BS)} from {result.num_samples} samples (spread {result.max_spread_deg:.3g} "
            f"deg); heading correction {math.degrees(result.heading_angle):.3f} deg; {mountings}"
            + "".join(f"; raw IMU {name} heading turned {math.degrees(psi):.3f} deg"
                      for name, psi in result.heading_offsets.items())
        )
        self.get_logger().info(response.message)
        return response

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        specs = {spec.name: spec for spec in ESTIMATION_PARAMETERS}
        updated = dict(self._values)
        for parameter in parameters:
            spec = specs.get(parameter.name)
            if spec is None:
                continue  # read-only parameters are refused by rclpy itself; others (use_sim_time) are rclpy's
            value = parameter.value
            if isinstance(value, (tuple, np.ndarray)) or type(value).__name__ == "array":
                value = list(value)
            reason = validate_value(spec, value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            updated[parameter.name] = value
        try:
            config = estimator_config_from_parameters(updated, self.instance_names)
            self.estimator.update_settings(config)
        except (ParameterValueError, EstimatorConfigError) as error:
            return SetParametersResult(successful=False, reason=str(error))
        if updated["diagnostics_period"] != self._values["diagnostics_period"]:
            self._diagnostics_timer.cancel()
            self._diagnostics_timer = self.create_timer(updated["diagnostics_period"], self._publish_diagnostics)
        self._values = updated
        return SetParametersResult(successful=True)


#: How often the estimator's input loop serves services, parameters and QoS events when nothing else is due (s):
#: a pass is rmw's wait on the node's ~45 entities, ~0.3 ms unloaded (~13 us per 500 Hz sample set at one per 50 ms),
#: and a request waits at most about this long (requests that come together are served together; the diagnostics
#: timer has passes of its own; under sim time InputLoop passes every 5 ms for /clock).
HOUSEKEEPING_PERIOD_S = 0.2


def _spin(node: EstimatorNode) -> None:
    loop = InputLoop(node, housekeeping_period=HOUSEKEEPING_PERIOD_S)
    for subscription, handler in node.input_subscriptions:
        loop.add(subscription, handler)
    loop.spin()


def main(args: list[str] | None = None) -> None:
    """Console script ``estimator [--ros-args ...]``: exits 0 on SIGINT/SIGTERM, 2 when it cannot start."""
    sys.exit(run_node(partial(EstimatorNode, own_process=True), NODE_NAME, spin=_spin, args=args,
                      kernels="estimator"))


if __name__ == "__main__":
    main()
