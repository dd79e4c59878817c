"""Readers for recordings made by real sensors, turned into typed NumPy arrays (no ROS here).

Where you are: ``ros_dofkit.core.recordings`` (ROS-free core); its readers import NumPy only.

``ximu3``: x-io Technologies x-IMU3 CSV recordings (one folder per device).
"""

from ros_dofkit.core.recordings.ximu3 import (
    EARTH_CONVENTIONS,
    STANDARD_GRAVITY,
    XIMU3Device,
    XIMU3Recording,
    XIMU3RecordingError,
    earth_to_enu_rotation,
    read_device,
    read_recording,
)

__all__ = [
    "EARTH_CONVENTIONS",
    "STANDARD_GRAVITY",
    "XIMU3Device",
    "XIMU3Recording",
    "XIMU3RecordingError",
    "earth_to_enu_rotation",
    "read_device",
    "read_recording",
]
