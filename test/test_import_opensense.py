"""Tests of ``dofkit import opensense`` (ros_dofkit.commands.import_opensense), and the OpenSense round trip on the
real x-IMU3 recording: its quaternions written as an OpenSense orientation table -> ``dofkit import opensense`` ->
``dofkit replay --calibrate 0 0.5`` -> ``dofkit export`` .mot reproduces README's knee-flexion ranges.

The table of the round trip is written in OpenSim's y-up ground (``R_GS = R_WO^T R_WS``) and imported with
``--sensor-to-opensim-rotations 0 0 0``, so the y-up -> z-up conversion is on the path; every device is
slerp-resampled onto one 50 Hz grid (an OpenSense table has one time column).
"""

from pathlib import Path

import numpy as np
import pytest

from opensim_guard import importorskip_opensim
from ros_dofkit import cli
from ros_dofkit.commands import import_opensense
from ros_dofkit.core.recordings import opensim_files as osf
from ros_dofkit.core.recordings import read_recording
from ros_dofkit.core.recordings.imu_series import common_grid_orientations
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotvec_to_matrix
from ros_dofkit.ros.bag_io import bag_topics, read_bag
from ros_dofkit.ros.imu_messages import imu_message_to_arrays
from test_opensim_files import parse_storage

ROOT = Path(__file__).resolve().parents[1]
REAL_RECORDING = ROOT / ".." / "shared" / "data" / "ximu3_lower_body"
CONFIG = ROOT / "config" / "lower_body.yaml"
# README's knee flexion ranges (deg) of the x-IMU3 recording (dofkit import ximu3 + replay, per-device timing).
README_KNEE_RANGE = {"left": (-3.4, 130.2), "right": (-4.0, 125.1)}
# The table holds every device slerp-resampled onto one 50 Hz grid, so a cycle sees orientations up to 10 ms from
# the samples the README's replay held (knees move up to several hundred deg/s): the range ends may move by a
# fraction of a degree (0.4 deg measured), never by more than this.
KNEE_RANGE_TOLERANCE_DEG = 1.0


def dofkit(*arguments) -> int:
    return cli.main([str(a) for a in arguments])


def test_default_rotations_match_the_library():
    assert import_opensense.DEFAULT_SENSOR_TO_OPENSIM == osf.DEFAULT_SENSOR_TO_OPENSIM


def test_import_writes_one_topic_per_column_in_ros_world(tmp_path, capsys):
    rng = np.random.default_rng(5)
    time = 0.5 + np.arange(4) / 100.0
    R_WS = rotvec_to_matrix(rng.normal(size=(4, 2, 3)))
    table = tmp_path / "walk_orientations.sto"
    table.write_text(osf.format_quaternion_table(time, ["pelvis_imu", "tibia_r_imu"], matrix_to_quat(R_WS)))
    out = tmp_path / "bag"
    assert dofkit("import", "opensense", table, "--out", out, "--stamp-offset", 10) == 0
    assert "sensor_to_opensim_rotations (-1.570796, 0, 0) rad" in capsys.readouterr().out
    assert bag_topics(out) == {"/imu/pelvis/data": ("sensor_msgs/msg/Imu", 4),
                               "/imu/tibia_r/data": ("sensor_msgs/msg/Imu", 4)}
    records = [r for r in read_bag(out) if r.topic == "/imu/tibia_r/data"]
    assert [r.stamp_ns for r in records] == [10_500_000_000 + 10_000_000 * k for k in range(4)]
    for k, record in enumerate(records):
        arrays = imu_message_to_arrays(record.message)
        assert arrays["frame_id"] == "tibia_r_imu" and arrays["stamp_ns"] == record.stamp_ns
        np.testing.assert_allclose(quat_to_matrix(arrays["quaternion_wxyz"]), R_WS[k, 1], atol=1e-11)
        assert np.isnan(arrays["angular_velocity"]).all()  # an orientation table has no gyro
    # The same table read as OpenSim-ground data (rotations 0 0 0): R_WS = R_x(90 deg) R_GS.
    assert dofkit("import", "opensense", table, "--out", tmp_path / "y_up", "--sensor-to-opensim-rotations", 0, 0, 0,
                  "--imus", "pelvis_imu") == 0
    (first, *_) = read_bag(tmp_path / "y_up")
    np.testing.assert_allclose(quat_to_matrix(imu_message_to_arrays(first.message)["quaternion_wxyz"]),
                               osf.R_WO @ R_WS[0, 0], atol=1e-11)


def test_bad_tables_exit_2_and_write_no_bag(tmp_path, capsys):
    table = tmp_path / "bad.sto"
    table.write_text("DataType=Quaternion\nendheader\ntime\tpelvis_imu\n0.0\t1,0,0,0\n0.01\tnan,nan,nan,nan\n")
    assert dofkit("import", "opensense", table, "--out", tmp_path / "bag") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 5, column 'pelvis_imu': cell 'nan,nan,nan,nan' is not finite" in err
    assert dofkit("import", "opensense", table, "--out", tmp_path / "bag", "--imus", "femur_l_imu") == 2
    assert "unknown column(s) ['femur_l_imu']" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()
    with pytest.raises(SystemExit):
        dofkit("import", "opensense", table, "--out", tmp_path / "bag", "--sensor-to-opensim-rotations", "nan", 0, 0)


def opensense_table_of(recording, path: Path) -> Path:
    """The recording's orientations as an OpenSense table in OpenSim's y-up ground, one 50 Hz grid."""
    grid, q_WS = common_grid_orientations(list(recording), 50.0)
    R_GS = osf.R_WO.T @ quat_to_matrix(q_WS)  # G = OpenSim ground
    path.write_text(osf.format_quaternion_table(grid, [f"{d.name}_imu" for d in recording], matrix_to_quat(R_GS)))
    return path


@pytest.mark.skipif(not REAL_RECORDING.is_dir(), reason="../shared/data/ximu3_lower_body not available")
def test_opensense_round_trip_reproduces_the_readme_knee_ranges(tmp_path, monkeypatch):
    recording = read_recording(REAL_RECORDING)
    table = opensense_table_of(recording, tmp_path / "lower_body_orientations.sto")
    assert dofkit("import", "opensense", table, "--out", tmp_path / "bag", "--sensor-to-opensim-rotations",
                  0, 0, 0) == 0
    # The y-up table came back z-up: each device's imported orientation turns its own accelerometer reading (not in
    # the table) at rest, during the first 0.5 s of standing, into +g along ROS's z axis.
    first = {}
    for record in read_bag(tmp_path / "bag"):
        first.setdefault(record.topic, imu_message_to_arrays(record.message))
    for device in recording:
        arrays = first[f"/imu/{device.name}/data"]
        standing = device.has_inertial & (device.time < device.time[0] + 0.5)
        g_W = quat_to_matrix(arrays["quaternion_wxyz"]) @ device.linear_acceleration[standing].mean(axis=0)
        assert np.linalg.norm(g_W[:2]) < 0.6 and g_W[2] == pytest.approx(9.81, abs=0.3), (device.name, g_W)
    assert dofkit("replay", tmp_path / "bag", "--config", CONFIG, "--calibrate", 0, 0.5, "--out",
                  tmp_path / "estimated", "--quiet") == 0
    motion = tmp_path / "lower_body.mot"
    assert dofkit("export", tmp_path / "estimated", "--config", CONFIG, "--out", motion) == 0
    _, keys, labels, rows = parse_storage(motion.read_text())
    assert keys["inDegrees"] == "yes" and int(keys["nRows"]) == len(rows) > 900  # 18.6 s at 50 Hz
    assert np.all(np.diff(rows[:, 0]) > 0)
    grid = osf.read_quaternion_table(table).time
    assert rows[0, 0] >= grid[0] and rows[-1, 0] <= grid[-1] + 1e-9  # the table's timeline, in seconds
    for side, (low, high) in README_KNEE_RANGE.items():
        knee = rows[:, labels.index(f"{side}_knee_flexion")]
        assert knee.min() == pytest.approx(low, abs=KNEE_RANGE_TOLERANCE_DEG), side
        assert knee.max() == pytest.approx(high, abs=KNEE_RANGE_TOLERANCE_DEG), side
    opensim = importorskip_opensim("the .mot was checked against the format rules only")
    monkeypatch.chdir(tmp_path)  # OpenSim writes opensim.log into the working directory
    loaded = opensim.TimeSeriesTable(str(motion))
    np.testing.assert_allclose(loaded.getDependentColumn("left_knee_flexion").to_numpy(),
                               rows[:, labels.index("left_knee_flexion")], rtol=1e-12)
