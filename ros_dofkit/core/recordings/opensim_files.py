"""OpenSim's text tables: coordinates as a Storage file (``.mot`` / ``.sto``, version 1) or CSV, and OpenSense's
quaternion orientation table (``.sto``), with the frame conventions between OpenSim and ROS.

Where you are: ``ros_dofkit.core.recordings`` -- pure NumPy, no ROS. ``dofkit export`` formats an estimate with it,
``dofkit import opensense`` reads orientation tables with it. It imports NumPy and ``ros_dofkit.core.spatial`` only.

Format rules (OpenSim's documentation, "Motion (.mot) Files" and "Storage (.sto) Files", and what opensim-core's
readers do):

* **Storage** (coordinates, :func:`format_storage`): a name line, ``version=1``, ``nRows=N`` (data rows),
  ``nColumns=K+1`` (the time column included), ``inDegrees=yes|no`` (rotational coordinates in degrees or radians;
  translational ones are meters either way), free text, then a line ``endheader``. Then a line of tab-separated
  labels, the first ``time``, and N rows of K+1 tab-separated numbers. The legacy ``Storage`` reader takes exactly
  nRows rows of nColumns numbers and splits labels at any blank, so labels must not contain blanks; the
  ``TimeSeriesTable`` reader keeps every ``key=value`` line as table metadata, requires the first label to be
  ``time``, a value for every label on every row, and strictly increasing time.
* **OpenSense orientation table** (:func:`read_quaternion_table`, what OpenSense's Xsens and APDM readers write):
  header ``DataRate=...``, ``DataType=Quaternion``, ``version=3``, ``OpenSimVersion=...``, ``endheader``; labels
  ``time`` and one per IMU (``<segment>_imu`` by convention); each cell ``w,x,y,z`` (scalar first, commas between
  components, tabs between cells). A cell is the sensor's orientation ``R_GS`` in the data source's world G.

Frames. OpenSense's IMUPlacer and IMUInverseKinematicsTool first rotate every quaternion of the table by their
``sensor_to_opensim_rotations`` (rx, ry, rz): ``R_OS = R_OG R_GS`` with ``R_OG = R_z(rz) R_y(ry) R_x(rx)`` (SimTK's
space-fixed X, Y, Z sequence, left-multiplied: ``OpenSenseUtilities::rotateOrientationTable``), O being OpenSim's
ground: y up, x forward, z to the model's right. ROS's world W (REP-103) is z up, x forward, y left, so
``R_WO = R_x(+90 deg)`` (x_O -> x_W, y_O -> z_W, z_O -> -y_W), and a table's quaternion lands in W as
``R_WS = R_WO R_OG R_GS`` (:func:`opensense_world_to_ros`). With the rotations OpenSense's examples use for z-up
data (Xsens, APDM), (-pi/2, 0, 0), ``R_WO R_OG`` is the identity: the table's z-up world is ROS's world as it is.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.spatial import QUAT_NORM_TOLERANCE, rotation_x, rpy_to_matrix

#: OpenSense's ``sensor_to_opensim_rotations`` for z-up IMU data (its Xsens/APDM examples), radians.
DEFAULT_SENSOR_TO_OPENSIM = (-math.pi / 2, 0.0, 0.0)
#: ``R_WO``: OpenSim's ground (y up) expressed in ROS's world (z up, REP-103), a quarter turn about x.
R_WO = rotation_x(math.pi / 2)
TIME_LABEL = "time"
END_HEADER = "endheader"
STORAGE_VERSION = 1
QUATERNION_TABLE_VERSION = 3
# Blanks split a label in OpenSim's Storage reader.
_BLANK = re.compile(r"\s")


def sensor_to_opensim_rotation(rotations) -> np.ndarray:
    """``R_OG`` of OpenSense's ``sensor_to_opensim_rotations`` (rx, ry, rz) in radians: ``R_z(rz) R_y(ry) R_x(rx)``."""
    rotations = np.asarray(rotations, dtype=float)
    if rotations.shape != (3,) or not np.all(np.isfinite(rotations)):
        raise RecordingError(f"sensor_to_opensim_rotations must be 3 finite angles in radians, got {rotations!r}")
    return rpy_to_matrix(rotations)


def opensense_world_to_ros(rotations=DEFAULT_SENSOR_TO_OPENSIM) -> np.ndarray:
    """``R_WG = R_WO R_OG``: the world G of an OpenSense table, whose ``sensor_to_opensim_rotations`` are
    ``rotations``, in ROS's world W. Left-multiply a table's ``R_GS`` by it to get the ``R_WS`` of sensor_msgs/Imu."""
    return R_WO @ sensor_to_opensim_rotation(rotations)


# ---------------------------------------------------------------------------------------------- checks
def check_time_and_values(time, labels, values, what: str = "table") -> tuple[np.ndarray, tuple, np.ndarray]:
    """Validated float arrays ``(time (n,), labels, values (n, k))`` for a table to be written.

    Raises :class:`RecordingError` naming the first offending row or column: no rows, labels not unique, empty or
    with blanks or called ``time``, a time that is not finite or does not strictly increase, a non-finite value.
    """
    time = np.asarray(time, dtype=float)
    values = np.asarray(values, dtype=float)
    labels = tuple(str(label) for label in labels)
    if time.ndim != 1 or len(time) == 0:
        raise RecordingError(f"{what}: expected at least one row of a 1-D time column, got shape {time.shape}")
    if values.shape != (len(time), len(labels)):
        raise RecordingError(f"{what}: values have shape {values.shape}, expected {(len(time), len(labels))} "
                             f"({len(time)} rows, {len(labels)} labels)")
    seen = set()
    for label in labels:
        if not label or _BLANK.search(label) or label == TIME_LABEL:
            raise RecordingError(f"{what}: label {label!r} is empty, contains a blank or is {TIME_LABEL!r}; OpenSim "
                                 "splits labels at blanks and reserves the first column for time", column=label)
        if label in seen:
            raise RecordingError(f"{what}: label {label!r} occurs twice; every column needs its own name",
                                 column=label)
        seen.add(label)
    bad = np.flatnonzero(~np.isfinite(time))
    if bad.size:
        raise RecordingError(f"{what}: row {bad[0] + 1}: time is {time[bad[0]]}, expected a finite number of seconds")
    steps = np.flatnonzero(np.diff(time) <= 0)
    if steps.size:
        k = int(steps[0]) + 1
        raise RecordingError(f"{what}: row {k + 1}: time {float(time[k])!r} s does not increase (row {k}: "
                             f"{float(time[k - 1])!r} s); OpenSim requires strictly increasing time")
    rows, columns = np.nonzero(~np.isfinite(values))
    if rows.size:
        r, c = int(rows[0]), int(columns[0])
        raise RecordingError(f"{what}: row {r + 1} (time {float(time[r])!r} s): {labels[c]} is {values[r, c]}, "
                             "expected a finite number", column=labels[c])
    return time, labels, values


# ---------------------------------------------------------------------------------------------- coordinates
def _converted(values: np.ndarray, rotational, in_degrees: bool) -> np.ndarray:
    rotational = np.asarray(rotational, dtype=bool)
    if rotational.shape != (values.shape[1],):
        raise RecordingError(f"rotational flags have shape {rotational.shape}, expected ({values.shape[1]},)")
    return np.where(rotational, np.degrees(values), values) if in_degrees else values


def _number(value: float) -> str:
    # 12 significant digits: 1e-10 deg of an angle, far below any sensor; exact round trip of the printed text.
    return f"{value:.12g}"


def _time_text(value: float) -> str:
    # Nanoseconds, as the bag's stamps (fixed point: no exponent for OpenSim's or a spreadsheet's parser).
    return f"{value:.9f}"


def format_storage(time, labels, values, rotational, in_degrees: bool = True, name: str = "Coordinates") -> str:
    """An OpenSim Storage file (``.mot`` or ``.sto``, version 1) of coordinates.

    ``values``: (n, k) in SI units (rad for rotational coordinates, m for translational ones); ``rotational``: (k,)
    bool. With ``in_degrees`` the rotational columns are written in degrees and the header says ``inDegrees=yes``.
    Raises :class:`RecordingError` for a table OpenSim could not read (see :func:`check_time_and_values`).
    """
    time, labels, values = check_time_and_values(time, labels, values, "coordinates")
    if "\n" in name or not name.strip():
        raise RecordingError(f"the Storage name must be one non-empty line, got {name!r}")
    out = _converted(values, rotational, in_degrees)
    unit = "degrees" if in_degrees else "radians"
    lines = [name.strip(), f"version={STORAGE_VERSION}", f"nRows={len(time)}", f"nColumns={len(labels) + 1}",
             f"inDegrees={'yes' if in_degrees else 'no'}", "",
             "Units are S.I. units (second, meters, Newtons, ...)",
             f"Angles are in {unit}.", "", END_HEADER, "\t".join((TIME_LABEL, *labels))]
    lines += ["\t".join([_time_text(t)] + [_number(v) for v in row]) for t, row in zip(time, out, strict=True)]
    return "\n".join(lines) + "\n"


def format_coordinates_csv(time, labels, values, rotational, in_degrees: bool = True) -> str:
    """The same table as CSV for spreadsheets: header ``time (s)`` and ``<label> (deg|rad|m)``, one row per sample."""
    time, labels, values = check_time_and_values(time, labels, values, "coordinates")
    out = _converted(values, rotational, in_degrees)
    angle = "deg" if in_degrees else "rad"
    units = [angle if r else "m" for r in np.asarray(rotational, dtype=bool)]
    lines = [",".join([f"{TIME_LABEL} (s)"] + [f"{label} ({unit})" for label, unit in zip(labels, units, strict=True)])]
    lines += [",".join([_time_text(t)] + [_number(v) for v in row]) for t, row in zip(time, out, strict=True)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- orientation tables
@dataclass(frozen=True)
class QuaternionTable:
    """An OpenSense orientation table: ``quaternions[i, j]`` is IMU ``labels[j]``'s ``R_GS`` (w, x, y, z, unit
    norm) at ``time[i]`` seconds, G the data source's world; ``metadata`` holds the header's ``key=value`` pairs."""

    time: np.ndarray
    labels: tuple[str, ...]
    quaternions: np.ndarray
    metadata: dict = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self):
        if self.quaternions.shape != (len(self.time), len(self.labels), 4):
            raise RecordingError(f"quaternions have shape {self.quaternions.shape}, expected "
                                 f"{(len(self.time), len(self.labels), 4)}", self.path)


def read_quaternion_table(path, labels=None) -> QuaternionTable:
    """Read an OpenSense orientation table (module docstring); ``labels`` selects IMU columns (default: all).

    Raises :class:`RecordingError` naming file, line and column: missing file, no ``endheader`` line, a
    ``DataType`` other than ``Quaternion``, a first label other than ``time``, a repeated or unknown label, a row
    with another number of cells than labels, a cell that is not four finite numbers, a quaternion whose norm is
    farther than ``QUAT_NORM_TOLERANCE`` from 1 (quaternions are then normalized), a time that is not a finite
    number or does not strictly increase, no data rows.
    """
    path = Path(path)
    if not path.is_file():
        raise RecordingError("file not found (expected an OpenSense orientation table, .sto)", path)
    with open(path, encoding="utf-8", newline=None) as handle:
        text = handle.read().splitlines()
    metadata: dict[str, str] = {}
    end = None
    for number, line in enumerate(text, start=1):
        stripped = line.strip()
        if stripped == END_HEADER:
            end = number
            break
        key, equals, value = stripped.partition("=")
        if equals and key.strip():
            metadata[key.strip()] = value.strip()
    if end is None:
        raise RecordingError(f"missing header: no '{END_HEADER}' line (an OpenSense table starts with DataRate=, "
                             f"DataType=Quaternion, version=, ... and '{END_HEADER}')", path)
    data_type = metadata.get("DataType")
    if data_type is not None and data_type != "Quaternion":
        raise RecordingError(f"DataType={data_type}; expected DataType=Quaternion (an orientation table)", path)
    if end >= len(text) or not text[end].strip():
        raise RecordingError(f"no column labels after '{END_HEADER}' (expected 'time' and one label per IMU)",
                             path, end + 1)
    header = [cell.strip() for cell in text[end].split("\t")]
    if header[0] != TIME_LABEL:
        raise RecordingError(f"first column label is {header[0]!r}, expected {TIME_LABEL!r}", path, end + 1,
                             header[0])
    all_labels = header[1:]
    if not all_labels:
        raise RecordingError("no IMU columns after 'time'", path, end + 1)
    for k, label in enumerate(all_labels):
        if not label or label in all_labels[:k]:
            raise RecordingError("empty or repeated column label; every IMU column needs its own name", path,
                                 end + 1, label)
    wanted = all_labels if labels is None else list(labels)
    unknown = [label for label in wanted if label not in all_labels]
    if unknown:
        raise RecordingError(f"unknown column(s) {unknown}; the table has {all_labels}", path, end + 1, unknown[0])
    columns = [all_labels.index(label) for label in wanted]
    times: list[float] = []
    rows: list[list[list[float]]] = []
    for number, line in enumerate(text[end + 1:], start=end + 2):
        if not line.strip():
            continue
        cells = line.rstrip("\r\n").split("\t")
        if len(cells) != len(header):
            raise RecordingError(f"{len(cells)} tab-separated cells, expected {len(header)} (time and "
                                 f"{len(all_labels)} IMUs)", path, number)
        try:
            t = float(cells[0])
        except ValueError:
            raise RecordingError(f"time {cells[0]!r} is not a number", path, number, TIME_LABEL) from None
        if not math.isfinite(t):
            raise RecordingError(f"time is {t}, expected a finite number of seconds", path, number, TIME_LABEL)
        if times and t <= times[-1]:
            raise RecordingError(f"time {t!r} s does not increase (previous row: {times[-1]!r} s); time must "
                                 "strictly increase", path, number, TIME_LABEL)
        row = []
        for j in columns:
            row.append(_quaternion_cell(cells[j + 1], path, number, all_labels[j]))
        times.append(t)
        rows.append(row)
    if not rows:
        raise RecordingError(f"no data rows after the labels (line {end + 1})", path)
    quaternions = np.asarray(rows, dtype=float).reshape(len(rows), len(columns), 4)
    quaternions /= np.linalg.norm(quaternions, axis=-1, keepdims=True)
    return QuaternionTable(np.asarray(times), tuple(wanted), quaternions, metadata, path)


def _quaternion_cell(cell: str, path: Path, line: int, label: str) -> list[float]:
    parts = cell.split(",")
    if len(parts) != 4:
        raise RecordingError(f"cell {cell.strip()!r} has {len(parts)} components, expected a quaternion w,x,y,z",
                             path, line, label)
    try:
        q = [float(p) for p in parts]
    except ValueError:
        raise RecordingError(f"cell {cell.strip()!r} is not four numbers w,x,y,z", path, line, label) from None
    if not all(math.isfinite(v) for v in q):
        raise RecordingError(f"cell {cell.strip()!r} is not finite (a NaN row: the IMU has no orientation here); "
                             "expected a unit quaternion w,x,y,z", path, line, label)
    norm = math.sqrt(sum(v * v for v in q))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        raise RecordingError(f"quaternion norm {norm:.6g} is not within {QUAT_NORM_TOLERANCE:g} of 1", path, line,
                             label)
    return q


def format_quaternion_table(time, labels, quaternions, data_rate: float | None = None,
                            opensim_version: str = "4.5") -> str:
    """An OpenSense orientation table (as its file readers write it) of ``quaternions`` (n, k, 4) (w, x, y, z).

    ``data_rate`` defaults to the median sample rate. Raises :class:`RecordingError` as
    :func:`check_time_and_values` does, and for a quaternion that is not of unit norm.
    """
    quaternions = np.asarray(quaternions, dtype=float)
    n, k = len(np.asarray(time)), len(tuple(labels))
    if quaternions.shape != (n, k, 4):
        raise RecordingError(f"quaternions have shape {quaternions.shape}, expected {(n, k, 4)}")
    time, labels, _ = check_time_and_values(time, labels, quaternions[..., 0], "orientation table")
    norm = np.linalg.norm(quaternions, axis=-1)
    rows, columns = np.nonzero(~(np.abs(norm - 1.0) <= QUAT_NORM_TOLERANCE))
    if rows.size:
        raise RecordingError(f"orientation table: row {rows[0] + 1}: quaternion norm {norm[rows[0], columns[0]]} is "
                             "not 1", column=labels[columns[0]])
    if data_rate is None:
        data_rate = 1.0 / float(np.median(np.diff(time))) if n > 1 else 0.0
    lines = [f"DataRate={data_rate:.6f}", "DataType=Quaternion", f"version={QUATERNION_TABLE_VERSION}",
             f"OpenSimVersion={opensim_version}", END_HEADER, "\t".join((TIME_LABEL, *labels))]
    for t, row in zip(time, quaternions, strict=True):
        lines.append("\t".join([_time_text(t)] + [",".join(_number(c) for c in q) for q in row]))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- joints -> columns
def rotational_coordinates(plant) -> dict[str, bool]:
    """``{coordinate name: is rotational}`` for every position coordinate of a finalized plant (the names of
    ``plant.position_names()``, those of JointState): revolute angles and a planar joint's ``qz`` are rotational
    (OpenSim's ``inDegrees`` applies to them), prismatic and planar ``x``/``y`` translations are not."""
    names = plant.position_names()
    kinds = {}
    for index in range(plant.num_joints()):
        joint = plant.get_joint(index)
        for k in range(joint.num_positions):
            angle = joint.can_rotate() and (not joint.can_translate() or joint.position_suffix(k).startswith("q"))
            kinds[names[joint.position_start + k]] = bool(angle)
    return kinds


@dataclass(frozen=True)
class ExportColumn:
    """One exported column: the JointState coordinate ``source``, written as ``label``, its SI value times
    ``scale`` (e.g. -1 where the OpenSim model counts the angle the other way)."""

    source: str
    label: str
    scale: float = 1.0


def export_columns(coordinates, name_map: dict | None = None, only_mapped: bool = False) -> list[ExportColumn]:
    """The columns to export from ``coordinates`` (the estimate's joint names, URDF names), in their order.

    ``name_map`` (a name-map file's contents): ``{joint: coordinate label}``, ``{joint: {"coordinate": label,
    "scale": s}}`` or ``{joint: None}`` (left out). Joints the map does not name keep their URDF name, or are left
    out with ``only_mapped``. Raises :class:`RecordingError` naming the entry for a joint that is not in the estimate
    (with near matches), a label that is not a string, a scale that is not a finite non-zero number, an unknown key,
    or two columns with one label.
    """
    coordinates = list(coordinates)
    name_map = {} if name_map is None else name_map
    if not isinstance(name_map, dict):
        raise RecordingError(f"name map: expected a mapping of joint names to OpenSim coordinate names, got "
                             f"{type(name_map).__name__}")
    for joint in name_map:
        if joint not in coordinates:
            near = difflib.get_close_matches(str(joint), coordinates, n=3)
            hint = f"did you mean {near}?" if near else f"the estimate has {coordinates}"
            raise RecordingError(f"name map: {joint!r} is not a joint of the estimate; {hint}", column=str(joint))
    columns = []
    for joint in coordinates:
        if joint not in name_map:
            if not only_mapped:
                columns.append(ExportColumn(joint, joint))
            continue
        entry = name_map[joint]
        if entry is None:
            continue
        label, scale = entry, 1.0
        if isinstance(entry, dict):
            extra = set(entry) - {"coordinate", "scale"}
            if extra or "coordinate" not in entry:
                raise RecordingError(f"name map: entry {entry!r} must have 'coordinate' and may have 'scale'; "
                                     f"unknown keys {sorted(extra)}" if extra else
                                     f"name map: entry {entry!r} has no 'coordinate'", column=joint)
            label, scale = entry["coordinate"], entry.get("scale", 1.0)
        if not isinstance(label, str) or not label:
            raise RecordingError(f"name map: the coordinate name must be a non-empty string, got {label!r}",
                                 column=joint)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale == 0:
            raise RecordingError(f"name map: scale must be a finite non-zero number, got {scale!r}", column=joint)
        columns.append(ExportColumn(joint, label, float(scale)))
    labels = [c.label for c in columns]
    for label in labels:
        if labels.count(label) > 1:
            sources = [c.source for c in columns if c.label == label]
            raise RecordingError(f"name map: joints {sources} are all written as {label!r}; a column needs its own "
                                 "name", column=label)
    if not columns:
        raise RecordingError("name map: no column left to export (every joint mapped to null or --only-mapped "
                             "without a mapped joint)")
    return columns
