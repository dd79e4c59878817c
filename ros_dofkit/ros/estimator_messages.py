"""Estimator results -> output messages: JointState (all and per model instance), Odometry, sensor errors,
diagnostics.

You are in the ROS edge. The core's :class:`~ros_dofkit.core.estimator.estimator.EstimatorResult` holds plant
coordinates; here they become the messages DESIGN.md lists. JointState carries the articulated coordinates (every
joint with v == q-dot; names as the plant's coordinate names) and per-instance topics carry exactly the
coordinates of their instance's DofMask; a planar or floating base travels as ``nav_msgs/Odometry`` (pose in the
frame the base hangs from, twist in the child frame, SPEC 9.7/9.9, REP-105; covariances from the solve) built
with ``ros_dofkit.ros.state_messages``.
"""

from __future__ import annotations

import math
from collections import deque
from xml.etree import ElementTree

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ros_dofkit.core.estimator.heading import diagnostic_values as heading_diagnostics
from ros_dofkit.core.estimator.odometry import BaseOdometry, OdometryCovariance, SolveCovariances
from ros_dofkit.core.estimator.robot import resolve_urdf_path
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.core.state import BasePoseTwist, JointStateArrays
from ros_dofkit.ros.live_cdr import JointStateEncoder
from ros_dofkit.ros.state_messages import joint_state_msg_from_arrays, odometry_msg_from_base, twist_msg


class JointStateSelection:
    """Which articulated coordinates one JointState output carries (a DofMask over the articulated view)."""

    def __init__(self, estimator, mask=None):
        view = estimator.articulated_view
        selected = np.ones(view.num_positions(), dtype=bool) if mask is None else np.asarray(list(mask), dtype=bool)
        self.names = tuple(name for name, keep in zip(estimator.joint_state_names, selected, strict=True) if keep)
        self._q = np.asarray(view.q_indices)[selected]
        self._v = np.asarray(view.v_indices)[selected]
        self._encoder = JointStateEncoder(self.names)
        # serialized()'s selections: a slice where the indices are one run (the usual arm: a view, no gather)
        self._q_rows, self._v_rows = _run_or_indices(self._q), _run_or_indices(self._v)

    def message(self, result, stamp, frame_id: str = ""):
        arrays = JointStateArrays(self.names, result.q[self._q], result.v[self._v])
        return joint_state_msg_from_arrays(arrays, stamp=stamp, frame_id=frame_id)

    def serialized(self, result, sec: int, nanosec: int) -> bytes:
        """The serialized JointState of :meth:`message` (empty frame_id), for ``Publisher.publish``."""
        return self._encoder.encode(sec, nanosec, result.q[self._q_rows], result.v[self._v_rows])


def _run_or_indices(indices: np.ndarray):
    """``indices`` as a slice when they are consecutive and increasing (selecting the same entries, in the same
    order, as a view), else as they are."""
    if indices.size and np.array_equal(indices, np.arange(indices[0], indices[0] + indices.size)):
        return slice(int(indices[0]), int(indices[0]) + indices.size)
    return indices


class BaseOdometryOutput:
    """nav_msgs/Odometry of one planar or floating base attached to the world (``core.estimator.odometry``'s
    :class:`BaseOdometry`): pose X_WB in ``odom_frame`` (REP-105: the frame the base hangs from), twist in the child
    frame B, covariances from the solve."""

    def __init__(self, base: BaseOdometry, odom_frame: str, child_frame: str):
        self.base = base
        self.odom_frame = odom_frame
        self.child_frame = child_frame

    def covariance(self, result, covariances: SolveCovariances) -> OdometryCovariance:
        """The message's covariances at ``result`` from the cycle's solve covariances."""
        return self.base.covariance(result.X_WB[self.base.body][:3, :3], covariances)

    def message(self, result, stamp, covariances: SolveCovariances | None = None):
        X_WB = result.X_WB[self.base.body]
        twist = self.base.twist(X_WB[:3, :3], result.v)
        msg = odometry_msg_from_base(BasePoseTwist(X_WB[:3, 3], matrix_to_quat(X_WB[:3, :3])), self.odom_frame,
                                     self.child_frame, stamp=stamp)
        msg.twist.twist = twist_msg(twist.linear, twist.angular)
        if covariances is not None:
            covariance = self.covariance(result, covariances)
            msg.pose.covariance = covariance.pose.reshape(-1)
            msg.twist.covariance = covariance.twist.reshape(-1)
        return msg


def sensor_errors_message(result, sensor_names) -> Float64MultiArray:
    """Per-sensor orientation error (degrees, NaN = not observed this cycle) in ``sensor_names`` order; the
    dimension label lists the names ("sensor_error_deg:" + comma-separated names)."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="sensor_error_deg:" + ",".join(sensor_names),
                                          size=len(sensor_names), stride=len(sensor_names))]
    msg.data = [float(result.sensor_errors_deg[name]) for name in sensor_names]
    return msg


def robot_description_text(specs) -> str | None:
    """The URDF XML to publish on ``robot_description`` for the robot's :class:`ModelSpec` list, as
    robot_state_publisher would hold it: the one instance's URDF unchanged; several instances merged into one
    ``<robot>`` (the first one's name), each later root attached by a fixed joint ``<instance>_attachment`` to its
    parent link. None when no single URDF tree holds them: a later instance hanging from the world or an external
    frame (a second root), or link or joint names used twice."""
    specs = list(specs)
    texts = [spec.urdf if spec.is_xml else resolve_urdf_path(spec.urdf).read_text(encoding="utf-8")
             for spec in specs]
    if len(specs) == 1:
        return texts[0]
    robots = [ElementTree.fromstring(text) for text in texts]
    merged = robots[0]
    links = {link.get("name") for link in merged.iter("link")}
    joints = {joint.get("name") for joint in merged.iter("joint")}
    for spec, robot in zip(specs[1:], robots[1:], strict=True):
        own_links = [link.get("name") for link in robot.findall("link")]
        children = {child.get("link") for child in robot.iter("child")}
        roots = [name for name in own_links if name not in children]
        own_joints = {joint.get("name") for joint in robot.findall("joint")}
        name = spec.name or robot.get("name")
        if spec.parent_frame not in links or len(roots) != 1 or links & set(own_links) or joints & own_joints \
                or f"{name}_attachment" in joints | own_joints:
            return None
        for element in robot:
            merged.append(element)
        attachment = ElementTree.SubElement(merged, "joint", name=f"{name}_attachment", type="fixed")
        ElementTree.SubElement(attachment, "parent", link=spec.parent_frame)
        ElementTree.SubElement(attachment, "child", link=roots[0])
        links |= set(own_links)
        joints |= own_joints | {f"{name}_attachment"}
    return ElementTree.tostring(merged, encoding="unicode")


class RateLimiter:
    """Admits at most ``rate_hz`` events per second of *stamp* time (0: every event). A stamp that goes back (a
    clock jump, a looping bag) is admitted and restarts the count."""

    def __init__(self, rate_hz: float):
        if not (isinstance(rate_hz, (int, float)) and math.isfinite(rate_hz) and rate_hz >= 0):
            raise ValueError(f"rate_hz: expected a finite number >= 0, got {rate_hz!r}")
        self._period = 1.0 / rate_hz if rate_hz > 0 else 0.0
        self._last = -math.inf

    def admit(self, stamp: float) -> bool:
        if stamp < self._last or stamp - self._last >= self._period * (1 - 1e-9):
            self._last = stamp
            return True
        return False


class RateMeter:
    """Event rate over a sliding window of wall/ROS times (Hz)."""

    def __init__(self, window_s: float = 2.0):
        self._window = window_s
        self._times: deque = deque()

    def tick(self, now: float) -> None:
        times = self._times
        times.append(now)
        if times[0] < now - self._window:  # (per input message: no call unless something leaves the window)
            self._trim(now)

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - self._window:
            self._times.popleft()

    def rate(self, now: float) -> float:
        self._trim(now)
        return len(self._times) / self._window


class NodeStatistics:
    """Counters and rates the estimator node reports on /diagnostics (plain Python; no ROS)."""

    def __init__(self, input_names):
        self.input_rates = {name: RateMeter() for name in input_names}
        self.output_rate = RateMeter()
        self.solve_times: deque = deque(maxlen=500)
        self.last_result = None
        self.solve_failures = 0
        self.malformed: dict[str, int] = {}

    def record_malformed(self, name: str) -> None:
        """One message of input ``name`` was dropped because its bytes are not a message of the topic's type."""
        self.malformed[name] = self.malformed.get(name, 0) + 1

    def record_input(self, name: str, now: float) -> None:
        meter = self.input_rates.get(name)
        if meter is not None:
            meter.tick(now)

    def record_output(self, result, now: float) -> None:
        self.output_rate.tick(now)
        self.solve_times.append(result.solve_time_s)
        self.last_result = result
        if not result.solved and result.observed_sensors:
            self.solve_failures += 1


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, float):
        value = "nan" if math.isnan(value) else f"{value:.6g}"
    return KeyValue(key=key, value=str(value))


def diagnostics_message(stamp, node_name: str, estimator, statistics: NodeStatistics, now: float,
                        qos_incompatible=None, hardware_id: str = "", unconstrained=(),
                        clock_s: float | None = None) -> DiagnosticArray:
    """DiagnosticArray: one status for the estimator (rates, solve time, dropped and rejected inputs by reason,
    stale sensors, the estimated coordinates no IMU constrains) and one per IMU (stale or OK, error in degrees,
    input rate). Unconstrained coordinates make the status at least WARN. Stale sensors are judged at the node's
    clock ``clock_s`` (seconds, the clock input stamps are checked against) when given, so that total silence
    shows every IMU stale although no cycle runs; else as of the last cycle."""
    result = statistics.last_result
    if clock_s is not None:
        stale = estimator.stale_sensors(clock_s)
    else:
        stale = tuple(result.stale_sensors) if result is not None else tuple(estimator.config.imu_names)
    counts = estimator.reject_counts()
    cycle_stats = estimator.statistics()
    solve = np.asarray(statistics.solve_times, dtype=float)
    level = DiagnosticStatus.OK
    message = "tracking"
    if result is None:
        level, message = DiagnosticStatus.WARN, "no cycle yet (waiting for input)"
    elif not result.solved and result.observed_sensors:
        level, message = DiagnosticStatus.ERROR, result.failure
    elif stale or result.uncalibrated_sensors:
        level = DiagnosticStatus.WARN
        parts = []
        if stale:
            parts.append(f"stale sensors: {', '.join(stale)}")
        if result.uncalibrated_sensors:
            parts.append(f"uncalibrated: {', '.join(result.uncalibrated_sensors)}")
        message = "; ".join(parts)
    if unconstrained and level == DiagnosticStatus.OK:
        level, message = DiagnosticStatus.WARN, f"IMUs do not constrain {', '.join(unconstrained)}"
    values = [
        _kv("output_rate_hz", statistics.output_rate.rate(now)),
        *[_kv(f"input_rate_hz.{name}", meter.rate(now)) for name, meter in statistics.input_rates.items()],
        _kv("solve_time_ms.mean", float(solve.mean() * 1e3) if solve.size else math.nan),
        _kv("solve_time_ms.max", float(solve.max() * 1e3) if solve.size else math.nan),
        _kv("cycles", cycle_stats["cycles"]),
        _kv("dropped_samples", cycle_stats["overwritten_samples"]),
        _kv("flushed_cycles", cycle_stats["flushed_cycles"]),
        _kv("tracking_resets", cycle_stats["resets"]),
        _kv("solve_failures", cycle_stats["solve_failures"]),
        _kv("rejected.total", sum(counts.values()) + sum(statistics.malformed.values())),
        *[_kv(f"rejected.{reason}", count) for reason, count in counts.items()],
        # Counted at the edge (the core never sees bytes): per input in malformed.<input>.
        _kv("rejected.malformed_message", sum(statistics.malformed.values())),
        *[_kv(f"malformed.{name}", count) for name, count in statistics.malformed.items()],
        _kv("stale_sensors", ",".join(stale)),
        _kv("unconstrained_coordinates", ",".join(unconstrained)),
        # raw IMUs' orientation filters (core.estimator.orientation_filter.COUNTERS)
        *[_kv(f"orientation_filter.{name}.{counter}", value)
          for name, counts in estimator.filter_counts().items() for counter, value in counts.items()],
    ]
    for topic, count in (qos_incompatible or {}).items():
        values.append(_kv(f"qos_incompatible.{topic}", count))
    statuses = [DiagnosticStatus(level=level, name=f"{node_name}: estimator", message=message,
                                 hardware_id=hardware_id, values=values)]
    heading = estimator.heading_estimates()
    for name in estimator.config.imu_names:
        error = result.sensor_errors_deg.get(name, math.nan) if result is not None else math.nan
        if name in stale:
            sensor_level, text = DiagnosticStatus.WARN, "stale"
        elif result is not None and name in result.uncalibrated_sensors:
            sensor_level, text = DiagnosticStatus.WARN, "waiting for calibration"
        else:
            sensor_level, text = DiagnosticStatus.OK, "ok"
        statuses.append(DiagnosticStatus(
            level=sensor_level, name=f"{node_name}: imu {name}", message=text, hardware_id=hardware_id,
            values=[_kv("orientation_error_deg", float(error)),
                    _kv("input_rate_hz", statistics.input_rates[name].rate(now)
                        if name in statistics.input_rates else math.nan),
                    # issue 19.2: heading offset and gyro bias (core.estimator.heading), when estimated
                    *[_kv(key, value) for key, value in heading_diagnostics(heading, name)]],
        ))
    msg = DiagnosticArray()
    msg.header.stamp = stamp
    msg.status = statuses
    return msg
