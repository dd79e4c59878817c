"""``sensor_msgs/Imu`` and message stamps -> the estimator core's plain inputs.

You are in the ROS edge (``ros_dofkit.ros``). The message carries the quaternion as (x, y, z, w); the core wants
(w, x, y, z). REP-145 marks a field absent with ``covariance[0] == -1``: the field is then reported absent (the
core counts it and treats the sensor as unobserved) instead of being read. Nothing is validated here beyond that:
NaN, zero or non-unit quaternions are the core's to reject and count (``ros_dofkit.core.estimator.inputs``), so
live and offline runs drop exactly the same samples. Works on rclpy messages and on rosbags' message classes, and
(:func:`feed_imu_cdr`) on serialized Imu bytes, which the live node takes without building a message object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.estimator.inputs import stamp_seconds
from ros_dofkit.ros.imu_messages import magnetic_field_to_arrays
from ros_dofkit.ros.live_cdr import decode_imu

NANOSECONDS = 1_000_000_000


def stamp_to_seconds(stamp) -> float:
    """``builtin_interfaces/Time`` (sec, nanosec) -> seconds as float (deterministic: equal stamps, equal floats);
    a nanosec outside [0, 1e9) gives the core's ``INVALID_STAMP``, rejected as ``invalid_stamp``."""
    return stamp_seconds(stamp.sec, stamp.nanosec)


def stamp_to_nanoseconds(stamp) -> int:
    return int(stamp.sec) * NANOSECONDS + int(stamp.nanosec)


def seconds_to_sec_nanosec(seconds: float) -> tuple[int, int]:
    """Seconds -> (sec, nanosec) with 0 <= nanosec < 1e9 (rounded to the nearest nanosecond)."""
    total = int(round(seconds * NANOSECONDS))
    return total // NANOSECONDS, total % NANOSECONDS


@dataclass(frozen=True)
class ImuInput:
    """Arguments of ``Estimator.add_imu`` for one message (``stamp`` in seconds)."""

    stamp: float
    quaternion_wxyz: np.ndarray
    angular_velocity: np.ndarray
    orientation_present: bool
    angular_velocity_present: bool
    frame_id: str
    linear_acceleration: np.ndarray | None = None  # m/s^2 in S; None when the message marks it absent


def imu_input_from_msg(msg) -> ImuInput:
    """Read a ``sensor_msgs/Imu``: quaternion reordered to (w, x, y, z), gyro in rad/s (sensor frame), and the
    presence flags from ``orientation_covariance[0]`` / ``angular_velocity_covariance[0]`` (-1 = absent)."""
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    return ImuInput(
        stamp=stamp_to_seconds(msg.header.stamp),
        quaternion_wxyz=np.array([o.w, o.x, o.y, o.z], dtype=float),
        angular_velocity=np.array([w.x, w.y, w.z], dtype=float),
        orientation_present=float(msg.orientation_covariance[0]) != -1.0,
        angular_velocity_present=float(msg.angular_velocity_covariance[0]) != -1.0,
        frame_id=msg.header.frame_id,
        linear_acceleration=None if float(msg.linear_acceleration_covariance[0]) == -1.0 else np.array(
            [a.x, a.y, a.z], dtype=float),
    )


def feed_imu_msg(estimator, name: str, msg, now: float | None = None):
    """Offer one Imu message of IMU ``name`` to an Estimator (``Estimator.process_imu``); returns
    ``(status, results)`` with the results of the cycles it completed."""
    sample = imu_input_from_msg(msg)
    return estimator.process_imu(
        name,
        sample.stamp,
        sample.quaternion_wxyz,
        sample.angular_velocity,
        orientation_present=sample.orientation_present,
        angular_velocity_present=sample.angular_velocity_present,
        now=now,
        linear_acceleration=sample.linear_acceleration,
    )


def feed_magnetic_field_msg(estimator, name: str, msg):
    """Offer one ``sensor_msgs/MagneticField`` (tesla, in the sensor frame) of raw IMU ``name`` to its orientation
    filter (``Estimator.process_magnetic_field``); returns the :class:`InputStatus`. A message whose
    ``magnetic_field_covariance[0]`` is -1 marks the field absent (REP-145) and is offered as NaN (dropped,
    counted ``field_invalid``)."""
    return estimator.process_magnetic_field(name, stamp_to_seconds(msg.header.stamp),
                                            magnetic_field_to_arrays(msg)[1])


def feed_joint_state_msg(estimator, msg, now: float | None = None):
    """Offer one JointState message to an Estimator (merged by name, ``Estimator.process_joint_state``); returns
    ``(status, results)``."""
    return estimator.process_joint_state(
        list(msg.name), np.asarray(msg.position, dtype=float), np.asarray(msg.velocity, dtype=float),
        stamp=stamp_to_seconds(msg.header.stamp), now=now,
    )


def feed_imu_cdr(estimator, name: str, data, now: float | None = None):
    """:func:`feed_imu_msg` for a serialized ``sensor_msgs/Imu``: returns ``(sec, nanosec, status, results)``.

    The same inputs reach the core as from the message object (the stamp in seconds as
    :func:`stamp_to_seconds`, the quaternion reordered, the REP-145 presence flags). Raises
    ``ros_dofkit.ros.live_cdr.MalformedMessageError`` (before touching the estimator) when ``data`` is not an
    Imu."""
    sec, nanosec, _, values = decode_imu(data)
    status, results = estimator.process_imu(
        name,
        stamp_seconds(sec, nanosec),
        np.array((values[3], values[0], values[1], values[2])),
        np.array(values[13:16]),
        orientation_present=values[4] != -1.0,
        angular_velocity_present=values[16] != -1.0,
        now=now,
        linear_acceleration=None if values[28] == -1.0 else values[25:28],
    )
    return sec, nanosec, status, results
