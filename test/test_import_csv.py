"""Tests of ``dofkit import csv`` (ros_dofkit.commands.import_csv): the shipped template imported into a bag and
read back (its values known analytically), ``--template``, the choices, and a bad table (exit 2, no bag)."""

import math

import numpy as np

from ros_dofkit import cli
from ros_dofkit.commands import EARTH_CONVENTION_CHOICES, import_csv
from ros_dofkit.core.recordings.imu_series import ACCEL_UNITS, EARTH_CONVENTIONS, GYRO_UNITS
from ros_dofkit.core.spatial import quat_to_matrix, rotation_x
from ros_dofkit.ros.bag_io import bag_topics, read_bag
from ros_dofkit.ros.imu_messages import imu_message_to_arrays


def dofkit(*arguments) -> int:
    return cli.main([str(a) for a in arguments])


def test_choices_match_the_library():
    assert EARTH_CONVENTION_CHOICES == tuple(sorted(EARTH_CONVENTIONS))
    assert import_csv.GYRO_UNIT_CHOICES == tuple(sorted(GYRO_UNITS))
    assert import_csv.ACCEL_UNIT_CHOICES == tuple(sorted(ACCEL_UNITS))


def test_template_round_trip(tmp_path, capsys):
    assert dofkit("import", "csv", "--template") == 0
    template = tmp_path / "imus.csv"
    template.write_text(capsys.readouterr().out)
    assert template.read_text().startswith("time,thigh_qw,thigh_qx,thigh_qy,thigh_qz,thigh_gx")
    out = tmp_path / "bag"
    assert dofkit("import", "csv", template, "--out", out, "--storage", "mcap") == 0
    assert bag_topics(out) == {"/imu/thigh/data": ("sensor_msgs/msg/Imu", 4),
                               "/imu/shank/data": ("sensor_msgs/msg/Imu", 4)}
    thigh = [imu_message_to_arrays(r.message) for r in read_bag(out) if r.topic == "/imu/thigh/data"]
    assert [a["stamp_ns"] for a in thigh] == [0, 10_000_000, 20_000_000, 30_000_000]
    for k, arrays in enumerate(thigh):
        np.testing.assert_allclose(quat_to_matrix(arrays["quaternion_wxyz"]), rotation_x(0.01 * k), atol=1e-9)
        np.testing.assert_allclose(arrays["angular_velocity"], [1.0, 0.0, 0.0])
        np.testing.assert_allclose(arrays["linear_acceleration"],
                                   [0.0, 9.80665 * math.sin(0.01 * k), 9.80665 * math.cos(0.01 * k)], atol=1e-8)


def test_bad_table_exits_2_without_a_bag(tmp_path, capsys):
    table = tmp_path / "bad.csv"
    table.write_text("time,knee_qw,knee_qx,knee_qy,knee_qz,knee_temperature\n0,1,0,0,0,21\n")
    assert dofkit("import", "csv", table, "--out", tmp_path / "bag") == 2
    assert "column 'knee_temperature': unknown column" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()
    assert dofkit("import", "csv", table) == 2
    assert "--out BAG are required" in capsys.readouterr().err
