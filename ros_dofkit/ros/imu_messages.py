"""Core IMU arrays <-> ``sensor_msgs/msg/Imu`` messages (rosbags message classes, no rclpy needed).

Where you are: ``ros_dofkit.ros`` -- the ROS edge. Inside the core quaternions are (w, x, y, z); in the message
they are (x, y, z, w). The message follows sensor_msgs/Imu and REP-145 (SPEC section 7):

* ``orientation``: R_WS, the sensor frame in the device world frame, here ENU.
* ``angular_velocity``: rad/s, the sensor's rate in its own frame; ``linear_acceleration``: m/s², specific force in
  the sensor frame, gravity included.
* Covariances (row-major 3x3): all zeros = unknown; a given standard deviation σ fills the diagonal with σ²;
  element 0 = -1 only when the field is absent from that sample (its values are then zeros, the identity for the
  orientation, so that a consumer that forgets the check still gets a valid quaternion).

Also the naming rules used by ``dofkit import``: one topic per device ``/imu/<device>/data`` with frame
``<device>_imu``, where ``<device>`` is the device name made a valid ROS name (:func:`ros_name`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np

from ros_dofkit.core.estimator.inputs import stamp_nanoseconds

IMU_MSGTYPE = "sensor_msgs/msg/Imu"
_NOT_A_NAME_CHAR = re.compile(r"[^a-z0-9_]+")


class ImuMessageError(ValueError):
    """An Imu message cannot be built from the given values (shape, non-finite, non-unit quaternion, stamp)."""


def ros_name(text: str) -> str:
    """A valid ROS name token from free text: lower case, runs of other characters -> '_', no leading digit.

    >>> ros_name("Left Upper Leg")
    'left_upper_leg'
    """
    token = _NOT_A_NAME_CHAR.sub("_", str(text).strip().lower()).strip("_")
    if not token:
        raise ImuMessageError(f"cannot make a ROS name from {text!r}: it has no letters or digits")
    return token if not token[0].isdigit() else "_" + token


def imu_topic(device: str) -> str:
    """The topic of a device's Imu messages: ``/imu/<device>/data`` (REP-145's ``imu/data``, namespaced)."""
    return f"/imu/{ros_name(device)}/data"


def imu_frame_id(device: str) -> str:
    """The sensor frame of a device: ``<device>_imu`` (the IMU frame name in ros_dofkit/models/lower_body.urdf)."""
    return f"{ros_name(device)}_imu"


def _covariance(stddev: float | None, present: bool) -> np.ndarray:
    covariance = np.zeros(9)
    if not present:
        covariance[0] = -1.0
    elif stddev is not None:
        covariance[[0, 4, 8]] = stddev * stddev
    return covariance


def _check_stddev(name: str, value) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ImuMessageError(f"{name} must be None (unknown) or a finite standard deviation >= 0, got {value!r}")


def make_imu_message(typestore, stamp_ns: int, frame_id: str, quaternion_wxyz=None, angular_velocity=None,
                     linear_acceleration=None, orientation_stddev: float | None = None,
                     angular_velocity_stddev: float | None = None,
                     linear_acceleration_stddev: float | None = None):
    """One ``sensor_msgs/Imu``. A field given as None or containing NaN is absent (covariance[0] = -1).

    ``quaternion_wxyz`` is R_WS (w, x, y, z); it is written as (x, y, z, w). Standard deviations in rad, rad/s,
    m/s²; None means unknown (zero covariance).
    """
    for name, value in (("orientation_stddev", orientation_stddev),
                        ("angular_velocity_stddev", angular_velocity_stddev),
                        ("linear_acceleration_stddev", linear_acceleration_stddev)):
        _check_stddev(name, value)
    if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, (int, np.integer)) or stamp_ns < 0:
        raise ImuMessageError(f"stamp_ns must be a non-negative integer number of nanoseconds, got {stamp_ns!r}")
    types = typestore.types
    Time = types["builtin_interfaces/msg/Time"]
    Header = types["std_msgs/msg/Header"]
    Quaternion = types["geometry_msgs/msg/Quaternion"]
    Vector3 = types["geometry_msgs/msg/Vector3"]

    q = _optional_vector(quaternion_wxyz, 4, "quaternion_wxyz")
    w = _optional_vector(angular_velocity, 3, "angular_velocity")
    a = _optional_vector(linear_acceleration, 3, "linear_acceleration")
    if q is not None and abs(np.linalg.norm(q) - 1.0) > 1e-6:
        raise ImuMessageError(f"quaternion_wxyz must be unit length, got norm {np.linalg.norm(q):.9g}")
    stamp_ns = int(stamp_ns)
    return types[IMU_MSGTYPE](
        header=Header(stamp=Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000), frame_id=frame_id),
        orientation=Quaternion(x=q[1], y=q[2], z=q[3], w=q[0]) if q is not None else Quaternion(x=0.0, y=0.0, z=0.0,
                                                                                                  w=1.0),
        orientation_covariance=_covariance(orientation_stddev, q is not None),
        angular_velocity=Vector3(x=w[0], y=w[1], z=w[2]) if w is not None else Vector3(x=0.0, y=0.0, z=0.0),
        angular_velocity_covariance=_covariance(angular_velocity_stddev, w is not None),
        linear_acceleration=Vector3(x=a[0], y=a[1], z=a[2]) if a is not None else Vector3(x=0.0, y=0.0, z=0.0),
        linear_acceleration_covariance=_covariance(linear_acceleration_stddev, a is not None),
    )


def _optional_vector(value, size: int, name: str):
    """None if the field is absent (None or any NaN), else a float array of ``size``."""
    if value is None:
        return None
    array = np.asarray(value, dtype=float)
    if array.shape != (size,):
        raise ImuMessageError(f"{name} must have shape ({size},), got {array.shape}")
    if np.any(np.isnan(array)):
        return None
    if not np.all(np.isfinite(array)):
        raise ImuMessageError(f"{name} has an infinite entry: {array}")
    return [float(x) for x in array]


MAGNETIC_FIELD_MSGTYPE = "sensor_msgs/msg/MagneticField"


def magnetic_field_to_arrays(message) -> tuple[int, np.ndarray]:
    """A ``sensor_msgs/MagneticField`` (rclpy or rosbags) -> ``(stamp_ns, field (3,))``: tesla in the sensor frame,
    NaN when ``magnetic_field_covariance[0]`` is -1 (REP-145: absent; the core drops and counts it)."""
    stamp, f = message.header.stamp, message.magnetic_field
    absent = len(message.magnetic_field_covariance) and float(message.magnetic_field_covariance[0]) == -1.0
    return (stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec)),
            np.full(3, np.nan) if absent else np.array([f.x, f.y, f.z], dtype=float))


def imu_message_to_arrays(message) -> dict:
    """The inverse of :func:`make_imu_message`: stamp_ns, frame_id, and each field as a core array (NaN if absent).

    Keys: ``stamp_ns``, ``frame_id``, ``quaternion_wxyz`` (4,), ``angular_velocity`` (3,),
    ``linear_acceleration`` (3,), and the three covariances as (3, 3) arrays.
    """
    stamp = message.header.stamp
    o, w, a = message.orientation, message.angular_velocity, message.linear_acceleration
    cov_o = np.asarray(message.orientation_covariance, dtype=float)
    cov_w = np.asarray(message.angular_velocity_covariance, dtype=float)
    cov_a = np.asarray(message.linear_acceleration_covariance, dtype=float)
    nan3, nan4 = np.full(3, np.nan), np.full(4, np.nan)
    return {
        "stamp_ns": stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec)),
        "frame_id": message.header.frame_id,
        "quaternion_wxyz": nan4 if cov_o[0] == -1 else np.array([o.w, o.x, o.y, o.z]),
        "angular_velocity": nan3 if cov_w[0] == -1 else np.array([w.x, w.y, w.z]),
        "linear_acceleration": nan3 if cov_a[0] == -1 else np.array([a.x, a.y, a.z]),
        "orientation_covariance": cov_o.reshape(3, 3),
        "angular_velocity_covariance": cov_w.reshape(3, 3),
        "linear_acceleration_covariance": cov_a.reshape(3, 3),
    }


def ximu3_device_records(device, typestore, stamp_offset_ns: int = 0, orientation_stddev: float | None = None,
                         angular_velocity_stddev: float | None = None,
                         linear_acceleration_stddev: float | None = None) -> Iterator[tuple[str, int, object]]:
    """``(topic, stamp_ns, Imu)`` for every sample of an :class:`~ros_dofkit.core.recordings.XIMU3Device`.

    Stamps (header and bag) are the device timestamps: ``timestamp_us * 1000 + stamp_offset_ns``.
    """
    if isinstance(stamp_offset_ns, bool) or not isinstance(stamp_offset_ns, (int, np.integer)):
        raise TypeError(f"stamp_offset_ns must be an integer number of nanoseconds, got {stamp_offset_ns!r}")
    topic = imu_topic(device.name)
    frame_id = imu_frame_id(device.name)
    stamps = device.timestamp_us.astype(np.int64) * 1000 + int(stamp_offset_ns)
    if len(stamps) and stamps[0] < 0:
        raise ImuMessageError(f"stamp offset {stamp_offset_ns} ns makes the first stamp of {device.name} negative")
    for k, stamp_ns in enumerate(stamps):
        message = make_imu_message(
            typestore, int(stamp_ns), frame_id,
            device.quaternion_wxyz[k], device.angular_velocity[k], device.linear_acceleration[k],
            orientation_stddev, angular_velocity_stddev, linear_acceleration_stddev,
        )
        yield topic, int(stamp_ns), message
