"""``sensor_msgs/Imu``, ``nav_msgs/Odometry`` and message stamps -> the estimator core's plain inputs.

You are in the ROS edge (``ros_dofkit.ros``). The message carries the quaternion as (x, y, z, w); the core wants
(w, x, y, z). REP-145 marks a field absent with ``covariance[0] == -1``: the field is then reported absent (the
core counts it and treats the sensor as unobserved) instead of being read. The orientation covariance goes to the
core as it is (the core reads it only with ``imu_covariance_weighting``). Nothing is validated here beyond that:
NaN, zero or non-unit quaternions are the core's to reject and count (``ros_dofkit.core.estimator.inputs``), so
live and offline runs drop exactly the same samples. Works on rclpy messages and on rosbags' message classes, and
(:func:`feed_imu_cdr`) on serialized Imu bytes, which the live node takes without building a message object.

An Odometry message's frames are a ROS matter decided here, once for the node and replay
(:func:`odometry_frames_problem`): its header frame must be the frame the driven base hangs from and its child
frame the base link, both as the TF tree names them (``frame_prefix`` included; a leading "/" is ignored, as tf2
does). The pose and stamp go to the core, which validates and counts them (``core.estimator.odometry_input``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.estimator.inputs import RejectReason, rejected, stamp_seconds
from ros_dofkit.ros.imu_messages import magnetic_field_to_arrays
from ros_dofkit.ros.live_cdr import decode_imu_reading
from ros_dofkit.ros.magnetometer_frames import field_frame_problem

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
    orientation_covariance: np.ndarray | None = None  # (9,) row-major, as the message carries it (REP-145)


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
        orientation_covariance=np.asarray(msg.orientation_covariance, dtype=float).reshape(-1),
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
        orientation_covariance=sample.orientation_covariance,
    )


def feed_magnetic_field_msg(estimator, name: str, msg, imu_frame_id: str | None = None):
    """Offer one ``sensor_msgs/MagneticField`` (tesla, in the sensor frame) of raw IMU ``name`` to its orientation
    filter (``Estimator.process_magnetic_field``); returns the :class:`InputStatus`. A message whose
    ``magnetic_field_covariance[0]`` is -1 marks the field absent (REP-145) and is offered as NaN (dropped,
    counted ``field_invalid``). ``imu_frame_id``: the frame_id of the IMU's newest Imu message (None: none yet); a
    field in another frame (``ros.magnetometer_frames``) is the core's ``unknown_frame`` rejection (counted
    ``field_frame_mismatch``), with both frames named in the status."""
    problem = field_frame_problem(name, msg.header.frame_id, imu_frame_id)
    status = estimator.process_magnetic_field(name, stamp_to_seconds(msg.header.stamp),
                                              magnetic_field_to_arrays(msg)[1], frames_match=not problem)
    if problem and status.reason is RejectReason.UNKNOWN_FRAME:
        status = rejected(RejectReason.UNKNOWN_FRAME, problem)
    return status


def feed_joint_state_msg(estimator, msg, now: float | None = None):
    """Offer one JointState message to an Estimator (merged by name, ``Estimator.process_joint_state``); returns
    ``(status, results)``."""
    return estimator.process_joint_state(
        list(msg.name), np.asarray(msg.position, dtype=float), np.asarray(msg.velocity, dtype=float),
        stamp=stamp_to_seconds(msg.header.stamp), now=now,
    )


@dataclass(frozen=True)
class OdometryPose:
    """What the core takes of a ``nav_msgs/Odometry``: stamp (s), the pose's position (3,) and quaternion
    (w, x, y, z) of ``child_frame_id`` in ``frame_id``."""

    stamp: float
    position: np.ndarray
    quaternion_wxyz: np.ndarray
    frame_id: str
    child_frame_id: str


def odometry_pose_from_msg(msg) -> OdometryPose:
    """Read a ``nav_msgs/Odometry`` (rclpy or rosbags): the stamp as :func:`stamp_to_seconds`, the quaternion
    reordered to (w, x, y, z). Twist and covariances are not used (the base's velocities come from its poses)."""
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return OdometryPose(stamp=stamp_to_seconds(msg.header.stamp), position=np.array([p.x, p.y, p.z], dtype=float),
                        quaternion_wxyz=np.array([o.w, o.x, o.y, o.z], dtype=float), frame_id=msg.header.frame_id,
                        child_frame_id=msg.child_frame_id)


def odometry_frames(tree, body: int) -> tuple[str, str]:
    """(header frame, child frame) an Odometry of the base ``body`` must carry: the TF parent frame of that body
    and its own frame (``ros_dofkit.ros.tf_tree.TfTree``, ``frame_prefix`` included)."""
    return tree.parent_frame_of(body), tree.frame_ids[body]


def odometry_frames_problem(frame_id: str, child_frame_id: str, expected: tuple[str, str]) -> str:
    """"" when the frames are the ``expected`` (header, child) pair (a leading "/" ignored, as tf2), else why not."""
    if frame_id.lstrip("/") == expected[0].lstrip("/") and child_frame_id.lstrip("/") == expected[1].lstrip("/"):
        return ""
    return (f"odometry of {child_frame_id!r} in {frame_id!r}; expected {expected[1]!r} in {expected[0]!r} (the "
            "driven base's link in the frame it hangs from, with frame_prefix)")


def feed_odometry_msg(estimator, msg, expected: tuple[str, str], now: float | None = None):
    """Offer one Odometry message to an Estimator (``Estimator.process_odometry``), its frames checked against
    ``expected`` (:func:`odometry_frames`); returns ``(status, results)``. A frame mismatch is the core's
    ``unknown_frame`` rejection (counted there), with the frames named in the status."""
    pose = odometry_pose_from_msg(msg)
    problem = odometry_frames_problem(pose.frame_id, pose.child_frame_id, expected)
    status, results = estimator.process_odometry(pose.stamp, pose.position, pose.quaternion_wxyz,
                                                 frames_match=not problem, now=now)
    if problem and status.reason is RejectReason.UNKNOWN_FRAME:
        status = rejected(RejectReason.UNKNOWN_FRAME, problem)
    return status, results


def feed_imu_cdr(estimator, name: str, data, now: float | None = None):
    """:func:`feed_imu_msg` for a serialized ``sensor_msgs/Imu``: returns ``(sec, nanosec, status, results)``.

    The same inputs reach the core as from the message object (the stamp in seconds as :func:`stamp_to_seconds`;
    the fields as ``Estimator.process_imu_reading`` reads them, in the message's order: quaternion reordered,
    REP-145 presence flags). Raises ``ros_dofkit.ros.live_cdr.MalformedMessageError`` (before touching the
    estimator) when ``data`` is not an Imu."""
    sec, nanosec, reading = decode_imu_reading(data)
    status, results = estimator.process_imu_reading(name, stamp_seconds(sec, nanosec), reading, now)
    return sec, nanosec, status, results
