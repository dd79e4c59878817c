"""Recordings made by real sensors and the tables other tools exchange, as typed NumPy arrays (no ROS here).

Where you are: ``ros_dofkit.core.recordings`` (ROS-free core); its readers import NumPy only.

``ximu3``: x-io Technologies x-IMU3 CSV recordings (one folder per device). ``imu_series``: :class:`ImuSeries` (one
IMU's samples, what every reader returns) and the readers of OpenSense orientation tables, a generic IMU CSV table
and Movella DOT exports. ``opensim_files``: OpenSim's Storage (.mot/.sto) and CSV writers, OpenSense's orientation
table, the OpenSim <-> ROS world rotation. ``errors``: :class:`RecordingError` (file, line, column), raised by all.
"""

from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.recordings.imu_series import (
    ImuSeries,
    read_imu_csv,
    read_movella_dot_csv,
    read_opensense,
)
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
    "ImuSeries",
    "RecordingError",
    "STANDARD_GRAVITY",
    "XIMU3Device",
    "XIMU3Recording",
    "XIMU3RecordingError",
    "earth_to_enu_rotation",
    "read_device",
    "read_imu_csv",
    "read_movella_dot_csv",
    "read_opensense",
    "read_recording",
]
