"""x-IMU3 CSV recordings (x-io Technologies) read into typed arrays: R_WS in ENU, rad/s, m/s².

Where you are: ``ros_dofkit.core.recordings`` -- pure NumPy, no ROS. ``ros_dofkit.ros.imu_messages`` turns the
arrays into ``sensor_msgs/Imu`` and ``dofkit import ximu3`` writes them to a bag.

What the x-IMU3 data logger writes, one folder per device (the folder name names the device):

* ``Quaternion.csv`` -- header ``Timestamp (us),W,X,Y,Z``. The quaternion is the orientation of the sensor frame S
  in the device's earth frame E, i.e. ``R_ES`` (it maps a vector expressed in S to E). Checked on data: at rest
  ``R_ES @ a_S`` is +1 g along E's z axis for every sensor of the reference recording (doc/ximu3.md).
* ``Inertial.csv`` -- header ``Timestamp (us),Gyroscope X (deg/s),Gyroscope Y (deg/s),Gyroscope Z (deg/s),
  Accelerometer X (g),Accelerometer Y (g),Accelerometer Z (g)``, both in the sensor frame S.
* ``Command.json`` (optional) -- the responses to commands sent at connection, e.g. a ``ping`` with the device
  name and serial number.
* Other files (Battery.csv, Magnetometer.csv, ...) are ignored.

Earth frame. The x-IMU3's on-board AHRS (x-io's Fusion algorithm) reports in North-West-Up (NWU) unless its
"AHRS axes convention" setting was changed to ENU or NED; the reference recording is NWU (magnetic field rotated
into E points along +x, gravity along +z; doc/ximu3.md). The world frame W of this package is ENU (REP-103), so
``R_WS = R_WE @ R_ES`` with ``R_WE`` from :func:`earth_to_enu_rotation` (for NWU, a quarter turn about z).

Merging Quaternion.csv and Inertial.csv: rows are matched by timestamp, never by row number. Two rows match when
each is the other's nearest in time and they are at most ``match_tolerance_us`` apart (the x-IMU3 stamps the
quaternion and inertial messages of one sample with the same timestamp, so the default tolerance of 1 ms only
absorbs rounding). The merged timeline is the union: a matched pair takes the quaternion's timestamp; a row with
no partner becomes a sample whose other fields are NaN (``has_orientation`` / ``has_inertial`` say which).

Units out: seconds, rad/s, m/s² (1 g = :data:`STANDARD_GRAVITY`). Quaternions are (w, x, y, z), unit norm.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ros_dofkit.core.recordings import imu_series
from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.recordings.imu_series import (  # noqa: F401 (re-exported: the x-IMU3 reader's constants)
    EARTH_CONVENTIONS,
    STANDARD_GRAVITY,
    ImuSeries,
)
from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE, matrix_to_quat, quat_multiply

QUATERNION_FILE = "Quaternion.csv"
INERTIAL_FILE = "Inertial.csv"
COMMAND_FILE = "Command.json"

QUATERNION_HEADER = ("Timestamp (us)", "W", "X", "Y", "Z")
INERTIAL_HEADER = (
    "Timestamp (us)",
    "Gyroscope X (deg/s)",
    "Gyroscope Y (deg/s)",
    "Gyroscope Z (deg/s)",
    "Accelerometer X (g)",
    "Accelerometer Y (g)",
    "Accelerometer Z (g)",
)

DEFAULT_EARTH_CONVENTION = "NWU"
DEFAULT_MATCH_TOLERANCE_US = 1000

# The x-IMU3 GUI names a device folder "<device name> <8-hex serial> (<interface>)", e.g.
# "Left Foot 64F0EBCE (UDP)"; the device name is the part before the serial number.
_GUI_FOLDER_SUFFIX = re.compile(r"^(?P<name>.+?) [0-9A-Fa-f]{8} \([^)]*\)$")


class XIMU3RecordingError(RecordingError):
    """An x-IMU3 recording is missing, malformed or inconsistent; ``path`` and ``line`` (1-based) locate it."""


def earth_to_enu_rotation(convention: str) -> np.ndarray:
    """``R_WE``: the device earth frame E (``"NWU"``, ``"ENU"`` or ``"NED"``) expressed in ENU (W)
    (:func:`ros_dofkit.core.recordings.imu_series.earth_to_enu_rotation`, raising :class:`XIMU3RecordingError`)."""
    try:
        return imu_series.earth_to_enu_rotation(convention)
    except RecordingError as error:
        raise XIMU3RecordingError(str(error)) from None


@dataclass(frozen=True)
class XIMU3Device(ImuSeries):
    """One device's samples on a merged, strictly increasing timeline (an :class:`ImuSeries`, W = ENU; NaN where
    the sample has no quaternion row or no inertial row).

    Attributes (besides ImuSeries'):
        name: the device name (folder name, without the x-IMU3 GUI's " <serial> (<interface>)" suffix).
        folder: where it was read from.
        earth_convention: the device earth frame the file was converted from.
        device_name, serial_number: from Command.json's ping response when present, else None.
    """

    error = XIMU3RecordingError

    folder: Path
    earth_convention: str = DEFAULT_EARTH_CONVENTION
    device_name: str | None = None
    serial_number: str | None = None


@dataclass(frozen=True)
class XIMU3Recording:
    """All devices of one recording, keyed by device name (sorted by name)."""

    folder: Path
    devices: dict[str, XIMU3Device] = field(default_factory=dict)

    @property
    def device_names(self) -> list[str]:
        return list(self.devices)

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self):
        return iter(self.devices.values())

    def __getitem__(self, name: str) -> XIMU3Device:
        if name not in self.devices:
            near = difflib.get_close_matches(name, self.device_names, n=3)
            hint = f"; did you mean {near}?" if near else ""
            raise XIMU3RecordingError(f"no device {name!r} in the recording; devices are {self.device_names}{hint}")
        return self.devices[name]

    @property
    def start_us(self) -> int:
        """The earliest timestamp of any device (microseconds)."""
        return int(min(d.timestamp_us[0] for d in self.devices.values()))

    @property
    def end_us(self) -> int:
        """The latest timestamp of any device (microseconds)."""
        return int(max(d.timestamp_us[-1] for d in self.devices.values()))

    def truncated(self, duration_s: float) -> XIMU3Recording:
        """The samples of every device with ``timestamp < start_us + duration_s`` (the first seconds)."""
        if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and duration_s > 0):
            raise XIMU3RecordingError(f"duration must be a positive finite number of seconds, got {duration_s!r}")
        end = self.start_us + round(duration_s * 1e6)
        return XIMU3Recording(self.folder, {n: d.select(d.timestamp_us < end) for n, d in self.devices.items()})


def device_name_from_folder(folder_name: str) -> str:
    """The device name of a folder: the folder name without the x-IMU3 GUI's serial/interface suffix."""
    match = _GUI_FOLDER_SUFFIX.match(folder_name)
    return match.group("name") if match else folder_name


def read_device(
    folder,
    earth_convention: str = DEFAULT_EARTH_CONVENTION,
    match_tolerance_us: int = DEFAULT_MATCH_TOLERANCE_US,
) -> XIMU3Device:
    """Read one device folder (Quaternion.csv + Inertial.csv [+ Command.json]) and merge it by timestamp.

    Raises :class:`XIMU3RecordingError` for a missing folder or file, a header that is not the x-IMU3 one, a row
    with the wrong number of fields, a non-integer timestamp, a non-finite value, timestamps that do not strictly
    increase, or a quaternion whose norm is farther than ``QUAT_NORM_TOLERANCE`` from 1 -- naming file and line.
    """
    folder = Path(folder)
    R_WE = earth_to_enu_rotation(earth_convention)
    if not (isinstance(match_tolerance_us, (int, np.integer)) and match_tolerance_us >= 0):
        raise XIMU3RecordingError(f"match_tolerance_us must be a non-negative integer, got {match_tolerance_us!r}")
    if not folder.is_dir():
        raise XIMU3RecordingError("device folder not found (expected a folder with Quaternion.csv and Inertial.csv)",
                                  folder)

    t_q, quaternion, q_lines = _read_csv(folder / QUATERNION_FILE, QUATERNION_HEADER)
    t_i, inertial, _ = _read_csv(folder / INERTIAL_FILE, INERTIAL_HEADER)
    _check_unit_norm(quaternion, q_lines, folder / QUATERNION_FILE)
    device_name, serial_number = _read_command_json(folder / COMMAND_FILE)

    q_index, i_index, timestamps = _merge_timelines(t_q, t_i, match_tolerance_us)
    n = len(timestamps)
    q_WE = matrix_to_quat(R_WE)
    quaternion_wxyz = np.full((n, 4), np.nan)
    has_q = q_index >= 0
    q_ES = quaternion[q_index[has_q]]
    quaternion_wxyz[has_q] = quat_multiply(q_WE, q_ES / np.linalg.norm(q_ES, axis=1, keepdims=True))
    angular_velocity = np.full((n, 3), np.nan)
    linear_acceleration = np.full((n, 3), np.nan)
    has_i = i_index >= 0
    angular_velocity[has_i] = np.radians(inertial[i_index[has_i], 0:3])
    linear_acceleration[has_i] = inertial[i_index[has_i], 3:6] * STANDARD_GRAVITY
    return XIMU3Device(
        name=device_name_from_folder(folder.name),
        folder=folder,
        timestamp_us=timestamps,
        quaternion_wxyz=quaternion_wxyz,
        angular_velocity=angular_velocity,
        linear_acceleration=linear_acceleration,
        earth_convention=earth_convention.upper(),
        device_name=device_name,
        serial_number=serial_number,
    )


def read_recording(
    folder,
    devices=None,
    earth_convention: str = DEFAULT_EARTH_CONVENTION,
    match_tolerance_us: int = DEFAULT_MATCH_TOLERANCE_US,
) -> XIMU3Recording:
    """Read every device folder (a sub-folder holding Quaternion.csv or Inertial.csv) of a recording.

    ``devices``: optional list of device names to read (others are skipped); an unknown name raises
    :class:`XIMU3RecordingError` listing the devices found.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise XIMU3RecordingError("recording folder not found", folder)
    found = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        if (sub / QUATERNION_FILE).exists() or (sub / INERTIAL_FILE).exists():
            name = device_name_from_folder(sub.name)
            if name in found:
                raise XIMU3RecordingError(f"two folders name the device {name!r}: {found[name].name} and {sub.name}",
                                          folder)
            found[name] = sub
    if not found:
        raise XIMU3RecordingError(
            f"no device folders (sub-folders containing {QUATERNION_FILE} or {INERTIAL_FILE}) in the recording",
            folder)
    if devices is not None:
        devices = list(devices)
        unknown = [d for d in devices if d not in found]
        if unknown:
            hints = {d: difflib.get_close_matches(d, list(found), n=2) for d in unknown}
            raise XIMU3RecordingError(f"unknown device(s) {unknown}; the recording has {sorted(found)} "
                                      f"(near matches: {hints})", folder)
        found = {d: found[d] for d in devices}
    return XIMU3Recording(
        folder,
        {name: read_device(path, earth_convention, match_tolerance_us) for name, path in sorted(found.items())},
    )


def _read_csv(path: Path, expected_header: tuple[str, ...]):
    """(timestamps int64 (n,), values float64 (n, k), line numbers (n,)) of an x-IMU3 CSV file, rows validated."""
    if not path.is_file():
        raise XIMU3RecordingError(f"file missing (an x-IMU3 device folder holds {QUATERNION_FILE} and "
                                  f"{INERTIAL_FILE})", path)
    timestamps: list[int] = []
    rows: list[list[float]] = []
    lines: list[int] = []
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise XIMU3RecordingError(f"empty file; expected the header {','.join(expected_header)}", path, 1)
        header = tuple(h.strip() for h in header)
        if header != expected_header:
            raise XIMU3RecordingError(f"unexpected header {','.join(header)!r}; expected "
                                      f"{','.join(expected_header)!r}", path, 1)
        width = len(expected_header)
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != width:
                raise XIMU3RecordingError(f"{len(row)} fields, expected {width} ({','.join(expected_header)})",
                                          path, line)
            try:
                stamp = int(row[0])
            except ValueError:
                raise XIMU3RecordingError(f"timestamp {row[0]!r} is not an integer number of microseconds",
                                          path, line) from None
            try:
                values = [float(cell) for cell in row[1:]]
            except ValueError as error:
                raise XIMU3RecordingError(f"value is not a number ({error})", path, line) from None
            for column, value in zip(expected_header[1:], values, strict=True):
                if not math.isfinite(value):
                    raise XIMU3RecordingError(f"{column} is {value}, expected a finite number", path, line)
            if timestamps and stamp <= timestamps[-1]:
                raise XIMU3RecordingError(f"timestamp {stamp} us does not increase (previous row: {timestamps[-1]} us);"
                                          " x-IMU3 timestamps must be strictly increasing", path, line)
            timestamps.append(stamp)
            rows.append(values)
            lines.append(line)
    if not rows:
        raise XIMU3RecordingError("no data rows after the header", path)
    values = np.asarray(rows, dtype=float).reshape(len(rows), width - 1)
    return np.asarray(timestamps, dtype=np.int64), values, np.asarray(lines, dtype=np.int64)


def _check_unit_norm(quaternion: np.ndarray, lines: np.ndarray, path: Path) -> None:
    # The logger prints 6 decimals, so |q| is 1 only to about 1e-4; farther than the project tolerance is an error.
    norm = np.linalg.norm(quaternion, axis=1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > QUAT_NORM_TOLERANCE)
    if bad.size:
        raise XIMU3RecordingError(f"quaternion norm {norm[bad[0]]:.6g} is not within {QUAT_NORM_TOLERANCE:g} of 1",
                                  path, int(lines[bad[0]]))


def _read_command_json(path: Path) -> tuple[str | None, str | None]:
    """(device name, serial number) from the ping response in Command.json, or (None, None) without the file."""
    if not path.is_file():
        return None, None
    try:
        responses = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise XIMU3RecordingError(f"not valid JSON ({error})", path) from None
    if not isinstance(responses, list):
        raise XIMU3RecordingError(f"expected a JSON list of command responses, got {type(responses).__name__}", path)
    for response in responses:
        if isinstance(response, dict) and isinstance(response.get("ping"), dict):
            ping = response["ping"]
            return ping.get("name"), ping.get("sn")
    return None, None


def _merge_timelines(t_a: np.ndarray, t_b: np.ndarray, tolerance: int):
    """Union timeline of two strictly increasing stamp arrays; pairs are mutual nearest neighbours within tolerance.

    Returns (index_a, index_b, timestamps), each of the merged length; an index is -1 where that stream has no row.
    """
    nearest_b = _nearest(t_a, t_b)
    nearest_a = _nearest(t_b, t_a)
    a_idx = np.arange(len(t_a))
    matched = (nearest_a[nearest_b] == a_idx) & (np.abs(t_b[nearest_b] - t_a) <= tolerance)
    pairs_a = a_idx[matched]
    pairs_b = nearest_b[matched]
    only_a = a_idx[~matched]
    only_b = np.setdiff1d(np.arange(len(t_b)), pairs_b)
    stamps = np.concatenate([t_a[pairs_a], t_a[only_a], t_b[only_b]])
    index_a = np.concatenate([pairs_a, only_a, np.full(len(only_b), -1)])
    index_b = np.concatenate([pairs_b, np.full(len(only_a), -1), only_b])
    order = np.argsort(stamps, kind="stable")
    stamps, index_a, index_b = stamps[order], index_a[order], index_b[order]
    if len(stamps) > 1 and np.any(np.diff(stamps) == 0):
        # An unmatched row of one file shares its stamp with a row of the other that matched elsewhere: only
        # possible with a tolerance wider than the sample spacing.
        k = int(np.flatnonzero(np.diff(stamps) == 0)[0])
        raise XIMU3RecordingError(f"two unpaired rows share the timestamp {stamps[k]} us; reduce the match tolerance "
                                  f"({tolerance} us) below the sample spacing")
    return index_a.astype(np.int64), index_b.astype(np.int64), stamps.astype(np.int64)


def _nearest(t_from: np.ndarray, t_to: np.ndarray) -> np.ndarray:
    """For every stamp in ``t_from`` the index of the nearest stamp in the sorted ``t_to`` (ties: earlier)."""
    right = np.clip(np.searchsorted(t_to, t_from), 0, len(t_to) - 1)
    left = np.clip(right - 1, 0, len(t_to) - 1)
    return np.where(np.abs(t_to[left] - t_from) <= np.abs(t_to[right] - t_from), left, right)
