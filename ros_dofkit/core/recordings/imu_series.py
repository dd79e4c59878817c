"""One IMU's samples as typed arrays (:class:`ImuSeries`), and the readers of the IMU file formats that are tables:
OpenSense orientation tables, a generic CSV table, and Movella DOT's CSV export.

Where you are: ``ros_dofkit.core.recordings`` -- pure NumPy, no ROS. Every reader returns ``ImuSeries`` in the
package's conventions (``R_WS`` in ROS's ENU world, w first; rad/s; m/s²; NaN where a sample lacks a field), which
``ros_dofkit.ros.imu_messages`` turns into sensor_msgs/Imu for the ``dofkit import`` commands (one bag writer for
every format). It imports NumPy, ``ros_dofkit.core.spatial`` and the sibling modules of this package.

Formats:

* **OpenSense** orientation table (``.sto``, :func:`opensense_series`): read by
  :func:`ros_dofkit.core.recordings.opensim_files.read_quaternion_table`; the table's world is turned into ROS's by
  ``R_WG = R_WO R_OG`` from OpenSense's ``sensor_to_opensim_rotations`` (see that module). A column
  ``<segment>_imu`` becomes the IMU ``<segment>``. Orientation only (OpenSense's orientation tables hold no gyro or
  accelerometer).
* **Generic CSV** (:func:`read_imu_csv`; template ``ros_dofkit/templates/imu_table.csv``): a header row, then one
  row per time. Columns: ``time`` (seconds), and per IMU ``<imu>_qw, <imu>_qx, <imu>_qy, <imu>_qz`` (``R_ES``, the
  sensor in the earth frame E of ``earth_convention``), optionally ``<imu>_gx, _gy, _gz`` (gyroscope, sensor frame)
  and ``<imu>_ax, _ay, _az`` (accelerometer, specific force in the sensor frame, gravity included). Units by
  argument (rad/s or deg/s; m/s² or g). Every cell of a present column must be a finite number.
* **Movella DOT** CSV export (:func:`read_movella_dot_csv`, one file per sensor, as the Movella DOT app exports):
  a preamble (``sep=,``, ``DeviceTag:,<tag>``, ... ), then the header ``PacketCounter,SampleTimeFine,...`` with
  ``Quat_W..Quat_Z`` (sensor in Movella's local earth frame, ENU by default), optionally ``Acc_X..Z`` (m/s², sensor
  frame, gravity included) and ``Gyr_X..Z`` (deg/s); ``SampleTimeFine`` is the sensor clock in microseconds (a
  uint32 that wraps after 2^32 µs, unwrapped here). ``Euler_*``, ``FreeAcc_*`` (earth frame, gravity removed: not a
  sensor_msgs/Imu field), ``Mag_*`` and ``Status`` columns are ignored.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.recordings.opensim_files import (
    DEFAULT_SENSOR_TO_OPENSIM,
    QuaternionTable,
    opensense_world_to_ros,
    read_quaternion_table,
)
from ros_dofkit.core.simulation import STANDARD_GRAVITY
from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE, matrix_to_quat, quat_multiply

#: R_WE for each earth convention a device can report in, W = ENU (x east, y north, z up). Columns are E's axes in
#: ENU: NWU x=north -> +y, y=west -> -x, z=up -> +z (+90 deg about z); NED x=north -> +y, y=east -> +x, z=down -> -z.
EARTH_CONVENTIONS: dict[str, np.ndarray] = {
    "NWU": np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    "ENU": np.eye(3),
    "NED": np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]),
}
GYRO_UNITS = {"rad/s": 1.0, "deg/s": math.pi / 180.0}
ACCEL_UNITS = {"m/s^2": 1.0, "g": STANDARD_GRAVITY}
OPENSENSE_SUFFIX = "_imu"
_CSV_FIELD = re.compile(r"^(?P<imu>.+)_(?P<field>q[wxyz]|g[xyz]|a[xyz])$")
_DOT_QUATERNION = ("Quat_W", "Quat_X", "Quat_Y", "Quat_Z")
_DOT_ACCELERATION = ("Acc_X", "Acc_Y", "Acc_Z")
_DOT_GYROSCOPE = ("Gyr_X", "Gyr_Y", "Gyr_Z")
_DOT_IGNORED = re.compile(r"^(PacketCounter|Euler_[XYZ]|FreeAcc_[XYZ]|Mag_[XYZ]|Status)$")
_UINT32 = 2**32


@dataclass(frozen=True)
class ImuSeries:
    """One IMU's samples on a strictly increasing timeline (length n).

    Attributes:
        name: the IMU (device, segment) name.
        timestamp_us: int64 (n,), the recording's clock in microseconds.
        quaternion_wxyz: (n, 4) ``R_WS`` as (w, x, y, z), W = ROS's world (ENU, z up), unit norm; NaN rows where a
            sample has no orientation.
        angular_velocity: (n, 3) gyroscope ``w_WS_S`` in rad/s (sensor frame); NaN where absent.
        linear_acceleration: (n, 3) accelerometer, specific force in the sensor frame in m/s² (gravity included);
            NaN where absent.
    """

    #: The exception a malformed series raises (a subclass narrows it for its own format).
    error = RecordingError

    name: str
    timestamp_us: np.ndarray
    quaternion_wxyz: np.ndarray
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray

    def __post_init__(self):
        n = len(self.timestamp_us)
        shapes = {
            "quaternion_wxyz": (self.quaternion_wxyz.shape, (n, 4)),
            "angular_velocity": (self.angular_velocity.shape, (n, 3)),
            "linear_acceleration": (self.linear_acceleration.shape, (n, 3)),
        }
        for what, (got, want) in shapes.items():
            if got != want:
                raise self.error(f"{self.name}: {what} has shape {got}, expected {want} for {n} timestamps")
        if n > 1 and not np.all(np.diff(self.timestamp_us) > 0):
            raise self.error(f"{self.name}: timestamps must be strictly increasing")

    def __len__(self) -> int:
        return len(self.timestamp_us)

    @property
    def time(self) -> np.ndarray:
        """Time in seconds (float64): ``timestamp_us / 1e6``, correctly rounded."""
        return self.timestamp_us / 1e6

    @property
    def has_orientation(self) -> np.ndarray:
        """bool (n,): the sample has a quaternion."""
        return ~np.isnan(self.quaternion_wxyz[:, 0])

    @property
    def has_inertial(self) -> np.ndarray:
        """bool (n,): the sample has gyroscope readings."""
        return ~np.isnan(self.angular_velocity[:, 0])

    def select(self, mask):
        """A copy holding only the samples where ``mask`` (bool (n,)) is True."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(self),):
            raise self.error(f"{self.name}: mask has shape {mask.shape}, expected ({len(self)},)")
        return dataclasses.replace(self, timestamp_us=self.timestamp_us[mask],
                                   quaternion_wxyz=self.quaternion_wxyz[mask],
                                   angular_velocity=self.angular_velocity[mask],
                                   linear_acceleration=self.linear_acceleration[mask])


def earth_to_enu_rotation(convention: str) -> np.ndarray:
    """``R_WE``: the device earth frame E (``"NWU"``, ``"ENU"`` or ``"NED"``) expressed in ENU (W)."""
    if not isinstance(convention, str):
        raise TypeError(f"earth convention must be a string, one of {sorted(EARTH_CONVENTIONS)}; got {convention!r}")
    key = convention.upper()
    if key not in EARTH_CONVENTIONS:
        raise RecordingError(f"unknown earth convention {convention!r}; expected one of {sorted(EARTH_CONVENTIONS)}")
    return EARTH_CONVENTIONS[key].copy()


def seconds_to_us(time, path=None) -> np.ndarray:
    """int64 microseconds of a time column in seconds; raises RecordingError where rounding makes two equal or the
    time is negative (a bag stamp cannot be)."""
    stamps = np.round(np.asarray(time, dtype=float) * 1e6).astype(np.int64)
    if len(stamps) and stamps[0] < 0:
        raise RecordingError(f"time starts at {time[0]!r} s; bag stamps cannot be negative (shift the time column)",
                             path)
    equal = np.flatnonzero(np.diff(stamps) <= 0)
    if equal.size:
        raise RecordingError(f"times {time[equal[0]]!r} and {time[equal[0] + 1]!r} s are less than a microsecond "
                             "apart (stamps are whole microseconds)", path)
    return stamps


def _nan(n: int, width: int) -> np.ndarray:
    return np.full((n, width), np.nan)


def common_grid_orientations(series, rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Every IMU's orientation slerp-interpolated onto one grid, as an OpenSense table needs (one time column):
    ``(time (T,), quaternions (T, n_imus, 4))``, the grid ``k / rate_hz`` seconds spanning the time all IMUs
    have an orientation (samples without one are skipped)."""
    from scipy.spatial.transform import Rotation, Slerp  # scipy.spatial costs ~0.2 s to import: only when used

    if not (math.isfinite(rate_hz) and rate_hz > 0):
        raise RecordingError(f"rate must be a positive number of Hz, got {rate_hz!r}")
    spans = [one.time[one.has_orientation] for one in series]
    if not series or any(len(t) < 2 for t in spans):
        raise RecordingError("every IMU needs at least two samples with an orientation to be resampled")
    start, end = max(t[0] for t in spans), min(t[-1] for t in spans)
    grid = np.arange(math.ceil(start * rate_hz), math.floor(end * rate_hz) + 1) / rate_hz
    if len(grid) == 0:
        raise RecordingError(f"the IMUs' orientations do not overlap in time ({start} .. {end} s)")
    quaternions = []
    for one, t in zip(series, spans, strict=True):
        slerp = Slerp(t, Rotation.from_quat(one.quaternion_wxyz[one.has_orientation], scalar_first=True))
        quaternions.append(slerp(np.clip(grid, t[0], t[-1])).as_quat(scalar_first=True))
    return grid, np.stack(quaternions, axis=1)


# ---------------------------------------------------------------------------------------------- OpenSense
def imu_name_of_label(label: str) -> str:
    """The IMU name of an OpenSense column: ``pelvis_imu`` -> ``pelvis`` (a label without the suffix is kept)."""
    return label[: -len(OPENSENSE_SUFFIX)] if label.endswith(OPENSENSE_SUFFIX) and label != OPENSENSE_SUFFIX \
        else label


def opensense_series(table: QuaternionTable, sensor_to_opensim=DEFAULT_SENSOR_TO_OPENSIM) -> list[ImuSeries]:
    """The IMUs of an OpenSense orientation table in ROS's world: ``R_WS = R_WO R_OG R_GS`` per cell (module
    docstring of ``opensim_files``), ``R_OG`` from ``sensor_to_opensim`` (OpenSense's
    ``sensor_to_opensim_rotations``, radians, default (-pi/2, 0, 0)). Gyro and accelerometer are absent (NaN)."""
    R_WG = opensense_world_to_ros(sensor_to_opensim)
    q_WG = matrix_to_quat(R_WG)
    stamps = seconds_to_us(table.time, table.path)
    n = len(stamps)
    names = [imu_name_of_label(label) for label in table.labels]
    for k, name in enumerate(names):
        if name in names[:k]:
            raise RecordingError(f"columns {table.labels[names.index(name)]!r} and {table.labels[k]!r} name the same "
                                 f"IMU {name!r}", table.path)
    return [ImuSeries(name, stamps, quat_multiply(q_WG, table.quaternions[:, j]), _nan(n, 3), _nan(n, 3))
            for j, name in enumerate(names)]


def read_opensense(path, sensor_to_opensim=DEFAULT_SENSOR_TO_OPENSIM, labels=None) -> list[ImuSeries]:
    """:func:`read_quaternion_table` then :func:`opensense_series`."""
    return opensense_series(read_quaternion_table(path, labels), sensor_to_opensim)


# ---------------------------------------------------------------------------------------------- numbers in CSV rows
def _read_rows(handle, path: Path, first_line: int, header: list[str]):
    """(line numbers, float matrix) of the CSV rows after ``header``; every cell a finite number."""
    lines, rows = [], []
    reader = csv.reader(handle)
    for row in reader:
        line = first_line + reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise RecordingError(f"{len(row)} fields, expected {len(header)} (one per header column)", path, line)
        values = []
        for label, cell in zip(header, row, strict=True):
            try:
                value = float(cell)
            except ValueError:
                raise RecordingError(f"{cell.strip()!r} is not a number", path, line, label) from None
            if not math.isfinite(value):
                raise RecordingError(f"{value} is not finite (a NaN row); expected a number", path, line, label)
            values.append(value)
        lines.append(line)
        rows.append(values)
    if not rows:
        raise RecordingError("no data rows after the header", path)
    return np.asarray(lines), np.asarray(rows, dtype=float)


def _check_increasing(stamps, lines, path, label: str) -> None:
    bad = np.flatnonzero(np.diff(stamps) <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        raise RecordingError(f"time does not increase ({stamps[k - 1]!r} then {stamps[k]!r}); rows must be in "
                             "strictly increasing time", path, int(lines[k]), label)


def _unit_quaternions(q: np.ndarray, lines, path, labels) -> np.ndarray:
    norm = np.linalg.norm(q, axis=1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > QUAT_NORM_TOLERANCE)
    if bad.size:
        raise RecordingError(f"quaternion norm {norm[bad[0]]:.6g} is not within {QUAT_NORM_TOLERANCE:g} of 1", path,
                             int(lines[bad[0]]), labels[0])
    return q / norm[:, None]


# ---------------------------------------------------------------------------------------------- generic CSV
def read_imu_csv(path, earth_convention: str = "ENU", gyro_unit: str = "rad/s", accel_unit: str = "m/s^2",
                 time_offset: float = 0.0) -> list[ImuSeries]:
    """The IMUs of a generic CSV table (module docstring; ``ros_dofkit/templates/imu_table.csv``), in the order of
    their first column. ``time_offset`` (s) is added to the time column.

    Raises :class:`RecordingError` naming file, line and column: a missing ``time`` column, a column that is not
    ``time`` or ``<imu>_<qw|qx|qy|qz|gx|gy|gz|ax|ay|az>`` (unknown column), a repeated column, an IMU without its
    four quaternion columns or with a partial gyro/accelerometer triple, a cell that is not a finite number, time
    not strictly increasing, a quaternion norm farther than ``QUAT_NORM_TOLERANCE`` from 1.
    """
    path = Path(path)
    R_WE = earth_to_enu_rotation(earth_convention)
    if gyro_unit not in GYRO_UNITS or accel_unit not in ACCEL_UNITS:
        raise RecordingError(f"units must be one of {sorted(GYRO_UNITS)} and {sorted(ACCEL_UNITS)}, got "
                             f"{gyro_unit!r}, {accel_unit!r}")
    if not path.is_file():
        raise RecordingError("file not found (expected a CSV table: time, <imu>_qw, <imu>_qx, ...)", path)
    with open(path, newline="", encoding="utf-8-sig") as handle:
        header = [cell.strip() for cell in next(csv.reader([handle.readline()]), [])]
        if "time" not in header:
            raise RecordingError(f"missing header: no 'time' column in the first line {header}; expected 'time' and "
                                 "<imu>_qw, <imu>_qx, <imu>_qy, <imu>_qz per IMU (see the template imu_table.csv)",
                                 path, 1)
        fields: dict[str, dict[str, int]] = {}
        for index, label in enumerate(header):
            if label in header[:index]:
                raise RecordingError("repeated column; every column needs its own name", path, 1, label)
            if label == "time":
                continue
            match = _CSV_FIELD.match(label)
            if match is None:
                raise RecordingError("unknown column; expected 'time' or <imu>_<qw|qx|qy|qz|gx|gy|gz|ax|ay|az>",
                                     path, 1, label)
            fields.setdefault(match["imu"], {})[match["field"]] = index
        if not fields:
            raise RecordingError("no IMU columns next to 'time'", path, 1)
        lines, values = _read_rows(handle, path, 1, header)
    time_column = header.index("time")
    stamps_s = values[:, time_column] + time_offset
    _check_increasing(stamps_s, lines, path, "time")
    stamps = seconds_to_us(stamps_s, path)
    q_WE = matrix_to_quat(R_WE)
    series = []
    for imu, columns in fields.items():
        quaternion = [f"q{axis}" for axis in "wxyz"]
        missing = [f"{imu}_{f}" for f in quaternion if f not in columns]
        if missing:
            raise RecordingError(f"IMU {imu!r} lacks the quaternion column(s) {missing}", path, 1)
        q = _unit_quaternions(values[:, [columns[f] for f in quaternion]], lines, path, [f"{imu}_qw"])
        triples = {}
        for prefix, scale in (("g", GYRO_UNITS[gyro_unit]), ("a", ACCEL_UNITS[accel_unit])):
            names = [f"{prefix}{axis}" for axis in "xyz"]
            present = [f for f in names if f in columns]
            if present and len(present) < 3:
                raise RecordingError(f"IMU {imu!r} has {[f'{imu}_{f}' for f in present]} but not "
                                     f"{[f'{imu}_{f}' for f in names if f not in columns]}; give all three axes or "
                                     "none", path, 1)
            triples[prefix] = values[:, [columns[f] for f in names]] * scale if present else _nan(len(q), 3)
        series.append(ImuSeries(imu, stamps, quat_multiply(q_WE, q), triples["g"], triples["a"]))
    return series


# ---------------------------------------------------------------------------------------------- Movella DOT
def read_movella_dot_csv(path, name: str | None = None, earth_convention: str = "ENU") -> ImuSeries:
    """One Movella DOT CSV export (module docstring). ``name`` defaults to the file's ``DeviceTag`` (else the file
    name up to its first ``_``). Raises :class:`RecordingError` naming file, line and column: no
    ``PacketCounter,SampleTimeFine,...`` header, no quaternion columns (an export without "Quaternion" output),
    an unknown or repeated column, a cell that is not a finite number, a sample time that does not increase after
    unwrapping, a quaternion norm off by more than ``QUAT_NORM_TOLERANCE``."""
    path = Path(path)
    R_WE = earth_to_enu_rotation(earth_convention)
    if not path.is_file():
        raise RecordingError("file not found (expected a Movella DOT CSV export)", path)
    tag = None
    with open(path, newline="", encoding="utf-8-sig") as handle:
        header, number = None, 0
        for number, line in enumerate(handle, start=1):
            cells = [cell.strip() for cell in line.strip().split(",")]
            if cells[0].rstrip(":") == "DeviceTag" and len(cells) > 1 and cells[1]:
                tag = cells[1]
            if cells[0] == "PacketCounter":
                header = cells
                break
            if number > 50:
                break
        if header is None:
            raise RecordingError("missing header: no 'PacketCounter,SampleTimeFine,...' line in the first 50 lines "
                                 "(is this a Movella DOT CSV export?)", path)
        for index, label in enumerate(header):
            if label in header[:index]:
                raise RecordingError("repeated column", path, number, label)
            known = label in ("SampleTimeFine", *_DOT_QUATERNION, *_DOT_ACCELERATION, *_DOT_GYROSCOPE)
            if not known and not _DOT_IGNORED.match(label):
                raise RecordingError("unknown column for a Movella DOT export", path, number, label)
        missing = [c for c in ("SampleTimeFine", *_DOT_QUATERNION) if c not in header]
        if missing:
            raise RecordingError(f"no {missing} column(s): export the DOT recording with the Quaternion output "
                                 "(Euler angles alone are not read)", path, number)
        lines, values = _read_rows(handle, path, number, header)
    column = {label: index for index, label in enumerate(header)}
    ticks = values[:, column["SampleTimeFine"]].astype(np.int64)
    wraps = np.concatenate([[0], np.cumsum(np.diff(ticks) < -_UINT32 // 2)])  # uint32 microseconds wrap around
    stamps = ticks + wraps * _UINT32
    _check_increasing(stamps, lines, path, "SampleTimeFine")
    q = _unit_quaternions(values[:, [column[c] for c in _DOT_QUATERNION]], lines, path, ["Quat_W"])
    n = len(stamps)

    def triple(names, scale):
        present = [c for c in names if c in column]
        if present and len(present) < 3:
            raise RecordingError(f"{present} without {[c for c in names if c not in column]}", path, number)
        return values[:, [column[c] for c in names]] * scale if present else _nan(n, 3)

    if name is None:
        name = tag if tag else path.stem.split("_")[0]
    return ImuSeries(name, stamps, quat_multiply(matrix_to_quat(R_WE), q), triple(_DOT_GYROSCOPE, math.pi / 180.0),
                     triple(_DOT_ACCELERATION, 1.0))
