"""Tests of ``dofkit import movella-dot`` (ros_dofkit.commands.import_movella_dot): two sensors' exports (the
Movella DOT app's layout, written here) into one bag, names from DeviceTag or --names, and refusals."""

import math

import numpy as np

from ros_dofkit import cli
from ros_dofkit.core.spatial import quat_to_matrix, rotation_z
from ros_dofkit.ros.bag_io import bag_topics, read_bag
from ros_dofkit.ros.imu_messages import imu_message_to_arrays
from test_imu_series import DOT_HEADER, DOT_PREAMBLE


def dofkit(*arguments) -> int:
    return cli.main([str(a) for a in arguments])


def export(path, tag: str, start_us: int, yaw: float):
    c, s = math.cos(yaw / 2), math.sin(yaw / 2)
    rows = [f"{k},{start_us + 16667 * k},{c},0,0,{s},0,0,0,0,0,9.81,0,0,{10 * k},0" for k in range(3)]
    path.write_text(DOT_PREAMBLE.replace("Left Shank", tag) + DOT_HEADER + "\n".join(rows) + "\n")
    return path


def test_two_sensors_into_one_bag(tmp_path, capsys):
    left = export(tmp_path / "a.csv", "Left Shank", 3_343_427_885, 0.5)
    right = export(tmp_path / "b.csv", "Right Shank", 3_343_427_900, -0.5)
    out = tmp_path / "bag"
    assert dofkit("import", "movella-dot", left, right, "--out", out) == 0
    assert bag_topics(out) == {"/imu/left_shank/data": ("sensor_msgs/msg/Imu", 3),
                               "/imu/right_shank/data": ("sensor_msgs/msg/Imu", 3)}
    records = list(read_bag(out))
    assert [r.stamp_ns for r in records] == sorted(r.stamp_ns for r in records)
    right_first = next(imu_message_to_arrays(r.message) for r in records if r.topic == "/imu/right_shank/data")
    assert right_first["stamp_ns"] == 3_343_427_900_000 and right_first["frame_id"] == "right_shank_imu"
    np.testing.assert_allclose(quat_to_matrix(right_first["quaternion_wxyz"]), rotation_z(-0.5), atol=1e-12)
    assert dofkit("import", "movella-dot", left, "--out", tmp_path / "named", "--names", "tibia_l") == 0
    assert list(bag_topics(tmp_path / "named")) == ["/imu/tibia_l/data"]


def test_refusals_write_no_bag(tmp_path, capsys):
    left = export(tmp_path / "a.csv", "Shank", 0, 0.0)
    again = export(tmp_path / "b.csv", "Shank", 0, 0.0)
    assert dofkit("import", "movella-dot", left, again, "--out", tmp_path / "bag") == 2
    assert "several files name the IMU(s) ['shank']; give --names" in capsys.readouterr().err
    assert dofkit("import", "movella-dot", left, "--out", tmp_path / "bag", "--names", "a", "b") == 2
    assert "2 --names for 1 files" in capsys.readouterr().err
    euler = tmp_path / "euler.csv"
    euler.write_text(DOT_PREAMBLE + "PacketCounter,SampleTimeFine,Euler_X,Euler_Y,Euler_Z\n1,10,0,0,0\n")
    assert dofkit("import", "movella-dot", euler, "--out", tmp_path / "bag") == 2
    assert "export the DOT recording with the Quaternion output" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()
