"""Tests of ros_dofkit.core.recordings.opensim_files: OpenSim Storage (.mot/.sto) and CSV writing, OpenSense
orientation tables, the OpenSim <-> ROS world rotation, and the name map.

The format rules checked are OpenSim's (its documentation and opensim-core's readers): a header with version=1,
nRows = data rows, nColumns = labels including time, inDegrees, a full 'endheader' line, then tab-separated
'time' + labels, strictly increasing time, angles in the unit the header states. The files are parsed here with
plain string splitting, independently of the writer; test_export.py also loads them with OpenSim when installed.
"""

import math

import numpy as np
import pytest

from opensim_guard import importorskip_opensim
from ros_dofkit.core.multibody import MultibodyPlant
from ros_dofkit.core.recordings import opensim_files as files
from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_y, rotation_z


def parse_storage(text: str):
    """(header lines, {key: value}, labels, rows) of a Storage file, by the documented rules."""
    lines = text.split("\n")
    end = lines.index("endheader")
    header = lines[:end]
    keys = dict(line.split("=", 1) for line in header if "=" in line)
    labels = lines[end + 1].split("\t")
    rows = np.array([[float(x) for x in line.split("\t")] for line in lines[end + 2:] if line])
    return header, keys, labels, rows


def test_storage_header_fields_rows_and_units():
    time = np.array([0.0, 0.01, 0.025])
    values = np.array([[0.1, 0.5, -1.0], [0.2, 0.6, 0.0], [math.pi / 2, 0.7, 1.0]])  # rad, m, rad
    text = files.format_storage(time, ["knee", "slide", "hip"], values, [True, False, True], name="Coordinates")
    header, keys, labels, rows = parse_storage(text)
    assert header[0] == "Coordinates"
    assert keys == {"version": "1", "nRows": "3", "nColumns": "4", "inDegrees": "yes"}
    assert labels == ["time", "knee", "slide", "hip"]
    assert rows.shape == (int(keys["nRows"]), int(keys["nColumns"]))
    np.testing.assert_allclose(rows[:, 0], time, atol=1e-12)
    np.testing.assert_allclose(rows[:, 1], np.degrees(values[:, 0]), rtol=1e-11)
    assert rows[2, 1] == pytest.approx(90.0, abs=1e-9)
    np.testing.assert_allclose(rows[:, 2], values[:, 1], rtol=1e-11)  # meters stay meters
    np.testing.assert_allclose(rows[:, 3], np.degrees(values[:, 2]), rtol=1e-11)
    assert np.all(np.diff(rows[:, 0]) > 0)


def test_storage_in_radians_and_csv():
    time, values = np.array([1.5, 2.0]), np.array([[0.25], [-0.5]])
    _, keys, _, rows = parse_storage(files.format_storage(time, ["q"], values, [True], in_degrees=False))
    assert keys["inDegrees"] == "no"
    np.testing.assert_allclose(rows[:, 1], values[:, 0], rtol=1e-12)
    csv = files.format_coordinates_csv(time, ["q", "x"], np.c_[values, values], [True, False]).splitlines()
    assert csv[0] == "time (s),q (deg),x (m)"
    np.testing.assert_allclose([float(v) for v in csv[2].split(",")], [2.0, np.degrees(-0.5), -0.5], rtol=1e-11)


@pytest.mark.parametrize(("time", "values", "labels", "message"), [
    ([0.0, 0.02, 0.01], [[0.0], [0.0], [0.0]], ["q"], r"row 3: time 0\.01 s does not increase"),
    ([0.0, 0.0], [[0.0], [0.0]], ["q"], "row 2: time 0.0 s does not increase"),
    ([0.0, 0.1], [[0.0], [np.nan]], ["q"], r"coordinates: row 2 \(time 0\.1 s\): q is nan, expected a finite number"),
    ([0.0, np.inf], [[0.0], [0.0]], ["q"], "row 2: time is inf"),
    ([0.0], [[0.0, 1.0]], ["q", "q"], "label 'q' occurs twice"),
    ([0.0], [[0.0]], ["knee angle"], "contains a blank"),
    ([0.0], [[0.0]], ["time"], "is 'time'"),
    ([], np.zeros((0, 1)), ["q"], "at least one row"),
])
def test_bad_tables_name_the_row_or_column(time, values, labels, message):
    with pytest.raises(RecordingError, match=message):
        files.format_storage(time, labels, values, [True] * len(labels))


# --- frames -----------------------------------------------------------------------------------------------------------


def test_opensim_ground_in_ros_world_is_y_up_to_z_up():
    # OpenSim: x forward, y up, z right. ROS (REP-103): x forward, y left, z up.
    R_WO = files.R_WO
    np.testing.assert_allclose(R_WO @ [1, 0, 0], [1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(R_WO @ [0, 1, 0], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(R_WO @ [0, 0, 1], [0, -1, 0], atol=1e-15)
    assert np.linalg.det(R_WO) == pytest.approx(1.0)


def test_sensor_to_opensim_rotations_are_space_fixed_xyz():
    rx, ry, rz = 0.3, -0.7, 1.1
    expected = rotation_z(rz) @ rotation_y(ry) @ rotation_x(rx)  # X first, then Y, then Z, about fixed axes
    np.testing.assert_allclose(files.sensor_to_opensim_rotation([rx, ry, rz]), expected, atol=1e-15)
    # OpenSense's setting for z-up data maps the data's up (z) onto OpenSim's up (y) ...
    R_OG = files.sensor_to_opensim_rotation(files.DEFAULT_SENSOR_TO_OPENSIM)
    np.testing.assert_allclose(R_OG @ [0, 0, 1], [0, 1, 0], atol=1e-15)
    # ... so that, back in ROS's z-up world, the data's world is unchanged.
    np.testing.assert_allclose(files.opensense_world_to_ros(files.DEFAULT_SENSOR_TO_OPENSIM), np.eye(3), atol=1e-15)
    # Data already in OpenSim's y-up ground (rotations 0): its up axis y becomes ROS's z.
    np.testing.assert_allclose(files.opensense_world_to_ros((0, 0, 0)) @ [0, 1, 0], [0, 0, 1], atol=1e-15)
    with pytest.raises(RecordingError, match="3 finite angles"):
        files.sensor_to_opensim_rotation([0.0, np.nan, 0.0])


# --- orientation tables ----------------------------------------------------------------------------------------------


def random_quaternions(rng, shape):
    q = rng.normal(size=shape + (4,))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def test_quaternion_table_layout_and_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    time = np.arange(5) / 100.0 + 2.0
    quaternions = random_quaternions(rng, (5, 2))
    text = files.format_quaternion_table(time, ["pelvis_imu", "femur_r_imu"], quaternions)
    lines = text.splitlines()
    assert lines[:5] == ["DataRate=100.000000", "DataType=Quaternion", "version=3", "OpenSimVersion=4.5", "endheader"]
    assert lines[5].split("\t") == ["time", "pelvis_imu", "femur_r_imu"]
    first = lines[6].split("\t")
    np.testing.assert_allclose([float(c) for c in first[1].split(",")], quaternions[0, 0], rtol=1e-11)  # w,x,y,z
    path = tmp_path / "orientations.sto"
    path.write_text(text)
    table = files.read_quaternion_table(path)
    assert table.labels == ("pelvis_imu", "femur_r_imu") and table.metadata["DataType"] == "Quaternion"
    np.testing.assert_allclose(table.time, time, atol=1e-12)
    np.testing.assert_allclose(table.quaternions, quaternions, atol=1e-11)
    only = files.read_quaternion_table(path, labels=["femur_r_imu"])
    np.testing.assert_allclose(only.quaternions[:, 0], quaternions[:, 1], atol=1e-11)


def write_table(tmp_path, lines):
    path = tmp_path / "bad.sto"
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = ["DataRate=100", "DataType=Quaternion", "version=3", "endheader", "time\tpelvis_imu\ttibia_r_imu",
        "0.00\t1,0,0,0\t1,0,0,0", "0.01\t1,0,0,0\t0,1,0,0"]


@pytest.mark.parametrize(("lines", "message"), [
    (GOOD[:3] + GOOD[4:], "missing header: no 'endheader' line"),
    (["DataType=Vec3"] + GOOD[3:], "DataType=Vec3; expected DataType=Quaternion"),
    (GOOD[:4] + ["t\tpelvis_imu"] + GOOD[5:], "first column label is 't'"),
    (GOOD[:4] + ["time\tpelvis_imu\tpelvis_imu"] + GOOD[5:], "line 5, column 'pelvis_imu': empty or repeated"),
    (GOOD + ["0.01\t1,0,0,0\t1,0,0,0"], r"line 8, column 'time': time 0\.01 s does not increase"),
    (GOOD + ["0.02\tnan,nan,nan,nan\t1,0,0,0"], "line 8, column 'pelvis_imu': cell 'nan,nan,nan,nan' is not finite"),
    (GOOD + ["0.02\t1,0,0\t1,0,0,0"], "line 8, column 'pelvis_imu': cell '1,0,0' has 3 components"),
    (GOOD + ["0.02\t1,0,0,0"], "line 8: 2 tab-separated cells, expected 3"),
    (GOOD + ["0.02\t2,0,0,0\t1,0,0,0"], "quaternion norm 2 is not within"),
    (GOOD[:5], "no data rows"),
])
def test_bad_orientation_tables_stop_with_one_line(tmp_path, lines, message):
    with pytest.raises(RecordingError, match=message) as error:
        files.read_quaternion_table(write_table(tmp_path, lines))
    assert "\n" not in str(error.value)


def test_unknown_selected_column_is_named(tmp_path):
    with pytest.raises(RecordingError, match="column 'calcn_r_imu': unknown column"):
        files.read_quaternion_table(write_table(tmp_path, GOOD), labels=["calcn_r_imu"])


# --- joints -> columns -----------------------------------------------------------------------------------------------


def test_rotational_coordinates_from_joint_types():
    from importlib.resources import files as package_files

    models = package_files("ros_dofkit") / "models"
    plant = MultibodyPlant()
    plant.add_urdf(str(models / "mobile_base.urdf"), model_name="base", base_joint="planar")
    plant.finalize()
    kinds = files.rotational_coordinates(plant)
    planar = [n for n in plant.position_names() if n.endswith(("_x", "_y", "_qz"))]
    assert len(planar) == 3
    assert {n: kinds[n] for n in planar} == {planar[0]: False, planar[1]: False, planar[2]: True}
    lower = MultibodyPlant()
    lower.add_urdf(str(models / "lower_body.urdf"), model_name="lower_body")
    lower.finalize()
    assert all(files.rotational_coordinates(lower).values())  # revolute joints only


def test_name_map_renames_scales_and_leaves_out():
    joints = ["left_knee_flexion", "right_knee_flexion", "left_hip_rotation", "pelvis_tilt"]
    name_map = {"left_knee_flexion": "knee_angle_l", "right_knee_flexion": {"coordinate": "knee_angle_r",
                                                                            "scale": -1}, "left_hip_rotation": None}
    columns = files.export_columns(joints, name_map)
    assert [(c.source, c.label, c.scale) for c in columns] == [
        ("left_knee_flexion", "knee_angle_l", 1.0), ("right_knee_flexion", "knee_angle_r", -1.0),
        ("pelvis_tilt", "pelvis_tilt", 1.0)]
    assert [c.source for c in files.export_columns(joints, name_map, only_mapped=True)] == joints[:2]


@pytest.mark.parametrize(("name_map", "message"), [
    ({"left_kne_flexion": "knee_angle_l"}, r"'left_kne_flexion' is not a joint of the estimate; did you mean"),
    ({"left_knee_flexion": "q", "right_knee_flexion": "q"}, "are all written as 'q'"),
    ({"left_knee_flexion": {"coordinate": "q", "scale": 0}}, "scale must be a finite non-zero number"),
    ({"left_knee_flexion": {"name": "q"}}, "unknown keys"),
    ({"left_knee_flexion": 3}, "must be a non-empty string"),
    (["left_knee_flexion"], "expected a mapping"),
    ({"left_knee_flexion": None, "right_knee_flexion": None}, "no column left"),
])
def test_bad_name_maps(name_map, message):
    with pytest.raises(RecordingError, match=message):
        files.export_columns(["left_knee_flexion", "right_knee_flexion"], name_map)


def test_quaternion_rotation_composes_like_opensense():
    """R_WS = R_WO R_OG R_GS, computed on quaternions as the importer does, equals the matrix product."""
    rng = np.random.default_rng(7)
    q_GS = random_quaternions(rng, (10,))
    rotations = (0.2, -0.4, 1.3)
    R_WG = files.opensense_world_to_ros(rotations)
    expected = files.R_WO @ rotation_z(1.3) @ rotation_y(-0.4) @ rotation_x(0.2) @ quat_to_matrix(q_GS)
    np.testing.assert_allclose(R_WG @ quat_to_matrix(q_GS), expected, atol=1e-14)
    np.testing.assert_allclose(quat_to_matrix(matrix_to_quat(expected)), expected, atol=1e-12)


def test_orientation_tables_agree_with_opensim(tmp_path, monkeypatch):
    """OpenSim's own STOFileAdapterQuaternion writes a table our reader reads, and reads the table our writer
    writes (the bench extra; without it the layout is checked against the documented rules above only)."""
    osim = importorskip_opensim("the layout was checked against the documented rules only")
    monkeypatch.chdir(tmp_path)  # OpenSim writes opensim.log into the working directory
    rng = np.random.default_rng(2)
    time, labels = np.array([0.0, 0.01, 0.02]), ["pelvis_imu", "femur_r_imu"]
    quaternions = random_quaternions(rng, (3, 2))
    matrix = osim.MatrixQuaternion(3, 2)
    for i in range(3):
        for j in range(2):
            matrix.set(i, j, osim.Quaternion(*(float(c) for c in quaternions[i, j])))
    written = osim.TimeSeriesTableQuaternion(osim.StdVectorDouble(time.tolist()), matrix,
                                             osim.StdVectorString(labels))
    written.addTableMetaDataString("DataRate", "100.000000")
    osim.STOFileAdapterQuaternion.write(written, str(tmp_path / "opensim.sto"))
    table = files.read_quaternion_table(tmp_path / "opensim.sto")
    assert table.labels == tuple(labels) and table.metadata["DataType"] == "Quaternion"
    np.testing.assert_allclose(table.quaternions, quaternions, atol=1e-14)
    (tmp_path / "ours.sto").write_text(files.format_quaternion_table(time, labels, quaternions))
    loaded = osim.TimeSeriesTableQuaternion(str(tmp_path / "ours.sto"))
    assert list(loaded.getColumnLabels()) == labels
    np.testing.assert_allclose(np.array(loaded.getIndependentColumn()), time, atol=1e-12)
    for i in range(3):
        row = loaded.getRowAtIndex(i)
        for j in range(2):
            q = row.getElt(0, j)
            np.testing.assert_allclose([q.get(k) for k in range(4)], quaternions[i, j], atol=1e-11)
