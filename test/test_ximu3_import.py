"""Tests of `dofkit import ximu3` (ros_dofkit.commands.import_ximu3) and ros_dofkit.ros.imu_messages.

The real recording (../shared/data/ximu3_lower_body) is imported into both bag storages and read back.
"""

import argparse
from pathlib import Path

import numpy as np
import pytest

from ros_dofkit.commands import import_ximu3
from ros_dofkit.core.recordings import STANDARD_GRAVITY, read_recording
from ros_dofkit.core.spatial import quat_to_matrix, rotation_z
from ros_dofkit.ros.bag_io import bag_topics, make_typestore, read_bag
from ros_dofkit.ros.imu_messages import (
    ImuMessageError,
    imu_frame_id,
    imu_message_to_arrays,
    imu_topic,
    make_imu_message,
    ros_name,
)

FIXTURES = Path(__file__).parent / "fixtures" / "ximu3"
REAL_RECORDING = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ximu3_lower_body"


@pytest.fixture(scope="module")
def typestore():
    return make_typestore()


# --- imu_messages ---------------------------------------------------------------------------------------------------


def test_ros_names_topics_and_frames():
    assert ros_name("Left Upper Leg") == "left_upper_leg"
    assert ros_name("  pelvis ") == "pelvis"
    assert ros_name("7th sensor!") == "_7th_sensor"
    assert imu_topic("Right Foot") == "/imu/right_foot/data"
    assert imu_frame_id("pelvis") == "pelvis_imu"
    with pytest.raises(ImuMessageError, match="no letters or digits"):
        ros_name(" -- ")


def test_imu_message_layout_and_round_trip(typestore):
    q = np.array([0.5, -0.5, 0.5, 0.5])
    message = make_imu_message(typestore, 3_000_000_007, "pelvis_imu", q, [0.1, 0.2, 0.3], [0.0, 0.0, 9.8],
                               orientation_stddev=0.01, linear_acceleration_stddev=0.2)
    # ROS order (x, y, z, w)
    o = message.orientation
    assert (o.x, o.y, o.z, o.w) == (-0.5, 0.5, 0.5, 0.5)
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (3, 7)
    np.testing.assert_allclose(message.orientation_covariance, np.diag([1e-4] * 3).ravel())
    np.testing.assert_array_equal(message.angular_velocity_covariance, np.zeros(9))  # unknown
    np.testing.assert_allclose(message.linear_acceleration_covariance, np.diag([0.04] * 3).ravel())
    back = imu_message_to_arrays(message)
    assert back["stamp_ns"] == 3_000_000_007 and back["frame_id"] == "pelvis_imu"
    np.testing.assert_array_equal(back["quaternion_wxyz"], q)
    np.testing.assert_array_equal(back["angular_velocity"], [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(back["linear_acceleration"], [0.0, 0.0, 9.8])


def test_absent_fields_are_marked_minus_one(typestore):
    message = make_imu_message(typestore, 10, "f", None, [np.nan, 0, 0], [1.0, 2.0, 3.0])
    assert message.orientation_covariance[0] == -1 and message.angular_velocity_covariance[0] == -1
    assert (message.orientation.w, message.orientation.x) == (1.0, 0.0)  # identity, not a zero quaternion
    assert message.linear_acceleration_covariance[0] == 0
    back = imu_message_to_arrays(message)
    assert np.all(np.isnan(back["quaternion_wxyz"])) and np.all(np.isnan(back["angular_velocity"]))
    np.testing.assert_array_equal(back["linear_acceleration"], [1.0, 2.0, 3.0])


def test_imu_message_validation(typestore):
    with pytest.raises(ImuMessageError, match="unit length"):
        make_imu_message(typestore, 0, "f", [2.0, 0, 0, 0])
    with pytest.raises(ImuMessageError, match=r"shape \(3,\)"):
        make_imu_message(typestore, 0, "f", None, [1.0, 2.0])
    with pytest.raises(ImuMessageError, match="standard deviation"):
        make_imu_message(typestore, 0, "f", orientation_stddev=-1.0)
    with pytest.raises(ImuMessageError, match="non-negative integer"):
        make_imu_message(typestore, -1, "f")
    with pytest.raises(ImuMessageError, match="infinite"):
        make_imu_message(typestore, 0, "f", None, [np.inf, 0, 0])


# --- the command ------------------------------------------------------------------------------------------------------


def dofkit_parser():
    """A stand-in for the dofkit dispatcher: a top-level parser whose subcommand modules call register()."""
    parser = argparse.ArgumentParser(prog="dofkit")
    subparsers = parser.add_subparsers(dest="command", required=True)
    import_ximu3.register(subparsers)
    return parser


def run_dofkit(argv):
    args = dofkit_parser().parse_args(argv)
    return args.func(args)


def test_command_choices_match_the_library():
    from ros_dofkit.core.recordings.ximu3 import DEFAULT_MATCH_TOLERANCE_US, EARTH_CONVENTIONS
    from ros_dofkit.ros.bag_io import DISTROS, STORAGES

    assert import_ximu3.EARTH_CONVENTION_CHOICES == tuple(sorted(EARTH_CONVENTIONS))
    assert import_ximu3.STORAGE_CHOICES == tuple(sorted(STORAGES))
    assert import_ximu3.DISTRO_CHOICES == tuple(sorted(DISTROS))
    assert import_ximu3.DEFAULT_MATCH_TOLERANCE_US == DEFAULT_MATCH_TOLERANCE_US


def test_register_adds_import_ximu3_with_its_options(capsys):
    args = dofkit_parser().parse_args(["import", "ximu3", "rec", "--out", "b", "--storage", "mcap"])
    assert (args.command, args.import_format, args.folder, args.out, args.storage) == ("import", "ximu3", "rec",
                                                                                       "b", "mcap")
    assert args.earth_convention == "NWU" and args.func is import_ximu3.run
    with pytest.raises(SystemExit):
        dofkit_parser().parse_args(["import", "ximu3", "rec"])  # --out is required
    with pytest.raises(SystemExit):
        dofkit_parser().parse_args(["import", "ximu3", "rec", "--out", "b", "--storage", "rosbag"])
    with pytest.raises(SystemExit):
        dofkit_parser().parse_args(["import", "ximu3", "rec", "--out", "b", "--orientation-stddev", "-1"])


def test_import_fixture_marks_missing_rows(tmp_path, capsys):
    out = tmp_path / "bag"
    assert run_dofkit(["import", "ximu3", str(FIXTURES / "two_devices"), "--out", str(out),
                       "--angular-velocity-stddev", "0.01"]) == 0
    assert "/imu/thigh/data" in capsys.readouterr().out
    records = [r for r in read_bag(out) if r.topic == "/imu/thigh/data"]
    assert [r.stamp_ns for r in records] == [1_000_000_000, 1_020_000_000, 1_040_000_000, 1_060_000_000,
                                             1_080_000_000]
    arrays = [imu_message_to_arrays(r.message) for r in records]
    assert [a["stamp_ns"] for a in arrays] == [r.stamp_ns for r in records]  # header stamp == bag stamp
    assert all(a["frame_id"] == "thigh_imu" for a in arrays)
    assert np.isnan(arrays[2]["angular_velocity"]).all()  # no inertial row at 1.04 s
    assert records[2].message.angular_velocity_covariance[0] == -1
    assert np.isnan(arrays[4]["quaternion_wxyz"]).all()  # no quaternion row at 1.08 s
    np.testing.assert_allclose(records[0].message.angular_velocity_covariance, np.diag([1e-4] * 3).ravel())
    np.testing.assert_allclose(arrays[0]["angular_velocity"], [0, 0, np.pi / 2])
    np.testing.assert_allclose(arrays[0]["linear_acceleration"], [0, 0, STANDARD_GRAVITY])
    np.testing.assert_allclose(quat_to_matrix(arrays[0]["quaternion_wxyz"]), rotation_z(np.pi / 2), atol=1e-12)


def test_import_errors_exit_with_status_2(tmp_path, capsys):
    assert run_dofkit(["import", "ximu3", str(FIXTURES / "bad_header"), "--out", str(tmp_path / "b")]) == 2
    assert "unexpected header" in capsys.readouterr().err
    (tmp_path / "exists").mkdir()
    assert run_dofkit(["import", "ximu3", str(FIXTURES / "two_devices"), "--out", str(tmp_path / "exists")]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_stamp_offset_moves_every_stamp(tmp_path):
    out = tmp_path / "bag"
    assert import_ximu3.main([str(FIXTURES / "two_devices"), "--out", str(out), "--stamp-offset", "1700000000.5",
                              "--devices", "foot"]) == 0
    stamps = [r.stamp_ns for r in read_bag(out)]
    assert stamps == [1_700_000_000_500_000_000 + 1_005_000_000, 1_700_000_000_500_000_000 + 1_025_000_000]


@pytest.mark.skipif(not REAL_RECORDING.is_dir(), reason="../shared/data not available")
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_import_real_recording_and_read_it_back(tmp_path, storage, capsys):
    out = tmp_path / "lower_body"
    assert run_dofkit(["import", "ximu3", str(REAL_RECORDING), "--out", str(out), "--storage", storage]) == 0
    recording = read_recording(REAL_RECORDING)
    topics = bag_topics(out)
    assert topics == {imu_topic(d.name): ("sensor_msgs/msg/Imu", len(d)) for d in recording}
    records = list(read_bag(out))
    stamps = np.array([r.stamp_ns for r in records])
    assert np.all(np.diff(stamps) >= 0)  # global stamp order across topics
    for device in recording:
        mine = [r for r in records if r.topic == imu_topic(device.name)]
        assert len(mine) == len(device)
        my_stamps = np.array([r.stamp_ns for r in mine])
        np.testing.assert_array_equal(my_stamps, device.timestamp_us * 1000)
        first = imu_message_to_arrays(mine[0].message)
        assert first["frame_id"] == f"{device.name}_imu"
        # First orientation == the CSV's first quaternion converted NWU -> ENU, computed here independently.
        csv_row = np.loadtxt(device.folder / "Quaternion.csv", delimiter=",", skiprows=1, max_rows=1)
        q_csv = csv_row[1:] / np.linalg.norm(csv_row[1:])
        np.testing.assert_allclose(quat_to_matrix(first["quaternion_wxyz"]),
                                   rotation_z(np.pi / 2) @ quat_to_matrix(q_csv), atol=1e-12)
        inertial_row = np.loadtxt(device.folder / "Inertial.csv", delimiter=",", skiprows=1, max_rows=1)
        np.testing.assert_allclose(first["angular_velocity"], np.radians(inertial_row[1:4]), rtol=1e-12)
        np.testing.assert_allclose(first["linear_acceleration"], inertial_row[4:7] * 9.80665, rtol=1e-12)
        assert np.all(mine[0].message.orientation_covariance == 0)  # unknown, not absent


def test_device_records_reject_bad_offsets(typestore):
    from ros_dofkit.ros.imu_messages import ximu3_device_records

    device = read_recording(FIXTURES / "two_devices")["foot"]
    with pytest.raises(TypeError, match="integer number of nanoseconds"):
        list(ximu3_device_records(device, typestore, stamp_offset_ns=0.5))
    with pytest.raises(ImuMessageError, match="negative"):
        list(ximu3_device_records(device, typestore, stamp_offset_ns=-2_000_000_000))
    records = list(ximu3_device_records(device, typestore, stamp_offset_ns=-1_005_000_000))
    assert [stamp for _, stamp, _ in records] == [0, 20_000_000]
    assert {topic for topic, _, _ in records} == {"/imu/foot/data"}
