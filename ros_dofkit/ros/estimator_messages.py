"""Estimator results -> output messages: JointState (all and per model instance), Odometry, sensor errors,
diagnostics.

You are in the ROS edge. The core's :class:`~ros_dofkit.core.estimator.estimator.EstimatorResult` holds plant
coordinates; here they become the messages DESIGN.md lists. JointState carries the articulated coordinates (every
joint with v == q-dot; names as the plant's coordinate names) and per-instance topics carry exactly the
coordinates of their instance's DofMask; a floating base travels as ``nav_msgs/Odometry`` (pose in the world
frame, twist in the child frame, SPEC 9.7/9.9) built with ``ros_dofkit.ros.state_messages``.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ros_dofkit.core.state import BasePoseTwist, JointStateArrays
from ros_dofkit.ros.live_cdr import JointStateEncoder
from ros_dofkit.ros.state_messages import joint_state_msg_from_arrays, odometry_msg_from_base


class JointStateSelection:
    """Which articulated coordinates one JointState output carries (a DofMask over the articulated view)."""

    def __init__(self, estimator, mask=None):
        view = estimator.articulated_view
        selected = np.ones(view.num_positions(), dtype=bool) if mask is None else np.asarray(list(mask), dtype=bool)
        self.names = tuple(name for name, keep in zip(estimator.joint_state_names, selected, strict=True) if keep)
        self._q = np.asarray(view.q_indices)[selected]
        self._v = np.asarray(view.v_indices)[selected]
        self._encoder = JointStateEncoder(self.names)

    def message(self, result, stamp, frame_id: str = ""):
        arrays = JointStateArrays(self.names, result.q[self._q], result.v[self._v])
        return joint_state_msg_from_arrays(arrays, stamp=stamp, frame_id=frame_id)

    def serialized(self, result, sec: int, nanosec: int) -> bytes:
        """The serialized JointState of :meth:`message` (empty frame_id), for ``Publisher.publish``."""
        return self._encoder.encode(sec, nanosec, result.q[self._q].tolist(), result.v[self._v].tolist())


class FloatingBaseOdometry:
    """nav_msgs/Odometry of one floating joint attached to the world: pose X_WB, twist in the body frame B."""

    def __init__(self, plant, joint, odom_frame: str, child_frame: str):
        self.joint = joint
        self.odom_frame = odom_frame
        self.child_frame = child_frame
        self._body = joint.child_body.index
        self._v = slice(joint.velocity_start, joint.velocity_start + 6)
        # v = [w_FM_F, v_FM_F]; F is fixed in the world (the joint's parent is the world body).
        self._R_WF = np.asarray(joint.frame_on_parent.X_BF)[:3, :3] if joint.parent_body.index == 0 else None
        if self._R_WF is None:
            raise ValueError(f"floating joint {joint.name!r} is not attached to the world; odometry needs W = F")

    def message(self, result, stamp):
        X_WB = result.X_WB[self._body]
        v = result.v[self._v]
        w, x, y, z = _quaternion(X_WB[:3, :3])
        base = BasePoseTwist(X_WB[:3, 3], [w, x, y, z], self._R_WF @ v[:3], self._R_WF @ v[3:])
        return odometry_msg_from_base(base, self.odom_frame, self.child_frame, stamp=stamp)


def _quaternion(R):
    from ros_dofkit.core.spatial import matrix_to_quat

    return matrix_to_quat(R)


def sensor_errors_message(result, sensor_names) -> Float64MultiArray:
    """Per-sensor orientation error (degrees, NaN = not observed this cycle) in ``sensor_names`` order; the
    dimension label lists the names ("sensor_error_deg:" + comma-separated names)."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="sensor_error_deg:" + ",".join(sensor_names),
                                          size=len(sensor_names), stride=len(sensor_names))]
    msg.data = [float(result.sensor_errors_deg[name]) for name in sensor_names]
    return msg


class RateMeter:
    """Event rate over a sliding window of wall/ROS times (Hz)."""

    def __init__(self, window_s: float = 2.0):
        self._window = window_s
        self._times: deque = deque()

    def tick(self, now: float) -> None:
        self._times.append(now)
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
        if name in self.input_rates:
            self.input_rates[name].tick(now)

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
                        qos_incompatible=None, hardware_id: str = "", clock_s: float | None = None) -> DiagnosticArray:
    """DiagnosticArray: one status for the estimator (rates, solve time, dropped and rejected inputs by reason,
    stale sensors) and one per IMU (stale or OK, error in degrees, input rate). Stale sensors are judged at the
    node's clock ``clock_s`` (seconds, the clock input stamps are checked against) when given, so that total
    silence shows every IMU stale although no cycle runs; else as of the last cycle."""
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
    ]
    for topic, count in (qos_incompatible or {}).items():
        values.append(_kv(f"qos_incompatible.{topic}", count))
    statuses = [DiagnosticStatus(level=level, name=f"{node_name}: estimator", message=message,
                                 hardware_id=hardware_id, values=values)]
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
                        if name in statistics.input_rates else math.nan)],
        ))
    msg = DiagnosticArray()
    msg.header.stamp = stamp
    msg.status = statuses
    return msg
