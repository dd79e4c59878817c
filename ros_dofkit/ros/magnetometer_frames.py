"""A raw IMU's ``sensor_msgs/MagneticField`` against its ``sensor_msgs/Imu``: the frame rule, once for the node and
both replay paths.

You are in the ROS edge (``ros_dofkit.ros``); this module imports NumPy only. It exists because a magnetometer's
field is fed to its IMU's orientation filter as a vector in that IMU's sensor frame S: a field published in another
frame (the magnetometer topic of another IMU, a board whose magnetometer has its own axes) would turn the filter's
heading. frame_ids are a ROS matter, so the rule is decided here and the core only counts its verdict
(``Estimator.process_magnetic_field(frames_match=...)``, counter ``field_frame_mismatch``), as for Odometry's
frames (``ros.imu_input.odometry_frames_problem``).

Rule: a field is in its IMU's frame when its ``header.frame_id`` equals the ``header.frame_id`` of the newest Imu
message of that IMU offered before it (the node's arrival order; the bag's order in replay, across the batched
path's windows), a leading "/" ignored as tf2 does. Nothing is checked while either is unknown: an empty frame_id
on either side (the estimator reads no Imu frame_id, so an empty one is accepted there too) or no Imu message of
that IMU yet.
"""

from __future__ import annotations

import numpy as np


def field_frame_problem(imu_name: str, field_frame_id: str, imu_frame_id: str | None) -> str:
    """"" when IMU ``imu_name``'s field in ``field_frame_id`` may be fed to its filter, its newest Imu message being
    in ``imu_frame_id`` (None: none yet), else why not (the module's rule)."""
    if not field_frame_id or not imu_frame_id or field_frame_id.lstrip("/") == imu_frame_id.lstrip("/"):
        return ""
    return (f"magnetic field of IMU {imu_name!r} in frame {field_frame_id!r}, its Imu messages in "
            f"{imu_frame_id!r} (a MagneticField must be in the frame of its IMU's messages)")


def window_fields_match(newest: dict, sensors, field_sensor, field_frame_ids, field_positions, imu_sensor,
                        imu_frame_ids, imu_positions) -> np.ndarray:
    """(n_f,) bool: whether each field of a window of bag messages is in its IMU's frame (the module's rule).

    ``sensors``: the IMUs with a magnetometer (indices into the configuration's IMUs); ``field_sensor`` /
    ``imu_sensor``: each field's and each Imu message's IMU; ``*_frame_ids``: their frame_ids; ``*_positions``:
    their places in the window's message order (increasing). ``newest`` ``{IMU index: frame_id}`` of the windows
    before, updated with this window's newest Imu message of each of ``sensors``."""
    field_sensor, imu_sensor = np.asarray(field_sensor), np.asarray(imu_sensor)
    field_positions, imu_positions = np.asarray(field_positions), np.asarray(imu_positions)
    match = np.ones(len(field_sensor), dtype=bool)
    for i in sensors:
        rows = np.flatnonzero(imu_sensor == i)
        fields = np.flatnonzero(field_sensor == i)
        before = np.searchsorted(imu_positions[rows], field_positions[fields]) - 1  # newest Imu row before each
        for j, k in zip(fields.tolist(), before.tolist(), strict=True):
            imu_frame = imu_frame_ids[rows[k]] if k >= 0 else newest.get(i)
            match[j] = not field_frame_problem("", field_frame_ids[j], imu_frame)
        if rows.size:
            newest[i] = imu_frame_ids[rows[-1]]
    return match
