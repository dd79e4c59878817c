"""Tests of ros_dofkit.core.recordings.imu_series: OpenSense tables, the generic CSV table (and its shipped
template) and Movella DOT exports read into ImuSeries (R_WS in ROS's ENU world, rad/s, m/s²).

Truth is analytic: known rotations written in each format's conventions, the OpenSim-to-ROS frame change as a
matrix product, the template's gyro integrated against its quaternions and its accelerometer against gravity.
"""

import math
from importlib.resources import files as package_files

import numpy as np
import pytest

from ros_dofkit.core.recordings import imu_series
from ros_dofkit.core.recordings import opensim_files as osf
from ros_dofkit.core.recordings.errors import RecordingError
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_z, rotvec_to_matrix


def write(path, text):
    path.write_text(text)
    return path


def test_opensense_table_in_opensim_ground_lands_z_up_in_ros(tmp_path):
    """A sensor whose y axis is up in OpenSim's y-up ground (table rotations 0 0 0) has its y axis up (z) in ROS;
    its x axis (OpenSim forward) stays forward; a 90-degree turn about OpenSim's y is one about ROS's z."""
    q_up = [1.0, 0.0, 0.0, 0.0]  # R_GS = I in OpenSim ground
    q_turn = matrix_to_quat(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]))  # R_y(+90 deg)
    table = osf.format_quaternion_table([0.0, 0.01], ["pelvis_imu"], [[q_up], [q_turn]])
    series = imu_series.read_opensense(write(tmp_path / "o.sto", table), sensor_to_opensim=(0.0, 0.0, 0.0))
    assert [s.name for s in series] == ["pelvis"]
    R = quat_to_matrix(series[0].quaternion_wxyz)
    np.testing.assert_allclose(R[0] @ [0, 1, 0], [0, 0, 1], atol=1e-12)  # sensor y (up in OpenSim) -> ROS z
    np.testing.assert_allclose(R[0] @ [1, 0, 0], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(R[1] @ R[0].T, rotation_z(math.pi / 2), atol=1e-12)  # about the vertical
    assert np.isnan(series[0].angular_velocity).all() and np.isnan(series[0].linear_acceleration).all()
    np.testing.assert_array_equal(series[0].timestamp_us, [0, 10_000])


def test_opensense_default_rotations_keep_z_up_data(tmp_path):
    rng = np.random.default_rng(11)
    R_WS = rotvec_to_matrix(rng.normal(size=(6, 2, 3)))
    table = osf.format_quaternion_table(np.arange(6) * 0.01, ["femur_r_imu", "tibia_r_imu"], matrix_to_quat(R_WS))
    series = imu_series.read_opensense(write(tmp_path / "o.sto", table))  # (-pi/2, 0, 0): Xsens/APDM z-up data
    assert [s.name for s in series] == ["femur_r", "tibia_r"]
    for j, one in enumerate(series):
        np.testing.assert_allclose(quat_to_matrix(one.quaternion_wxyz), R_WS[:, j], atol=1e-11)
    # The same data with a heading of the table's world: R_WS = R_WO R_OG R_GS.
    rotations = (-math.pi / 2, 0.3, 0.0)
    turned = imu_series.read_opensense(tmp_path / "o.sto", sensor_to_opensim=rotations)
    expected = osf.R_WO @ osf.sensor_to_opensim_rotation(rotations) @ R_WS[:, 0]
    np.testing.assert_allclose(quat_to_matrix(turned[0].quaternion_wxyz), expected, atol=1e-11)
    np.testing.assert_allclose(osf.R_WO @ osf.sensor_to_opensim_rotation(rotations), rotation_z(0.3), atol=1e-12)


def test_opensense_labels_that_collide_and_negative_time(tmp_path):
    q = np.array([[[1.0, 0, 0, 0], [1.0, 0, 0, 0]]])
    path = write(tmp_path / "o.sto", osf.format_quaternion_table([0.0], ["pelvis_imu", "pelvis"], q))
    with pytest.raises(RecordingError, match="name the same IMU 'pelvis'"):
        imu_series.read_opensense(path)
    path = write(tmp_path / "n.sto", osf.format_quaternion_table([-0.5], ["pelvis_imu"], q[:, :1]))
    with pytest.raises(RecordingError, match="cannot be negative"):
        imu_series.read_opensense(path)


# --- generic CSV -----------------------------------------------------------------------------------------------------


def test_shipped_template_is_consistent_and_reads():
    """The template's thigh turns about its x axis at 1 rad/s (its gyro), its accelerometer reads gravity in the
    sensor frame, the shank turns at 2 rad/s without gyro or accelerometer columns."""
    template = package_files("ros_dofkit") / "templates" / "imu_table.csv"
    thigh, shank = imu_series.read_imu_csv(template)
    assert (thigh.name, shank.name) == ("thigh", "shank")
    t = thigh.time
    np.testing.assert_allclose(quat_to_matrix(thigh.quaternion_wxyz), rotation_x(1.0 * t), atol=1e-9)
    np.testing.assert_allclose(quat_to_matrix(shank.quaternion_wxyz), rotation_x(2.0 * t), atol=1e-9)
    np.testing.assert_allclose(thigh.angular_velocity, np.tile([1.0, 0, 0], (len(t), 1)))
    g_S = np.einsum("nji,j->ni", quat_to_matrix(thigh.quaternion_wxyz), [0, 0, imu_series.STANDARD_GRAVITY])
    np.testing.assert_allclose(thigh.linear_acceleration, g_S, atol=1e-8)
    assert np.isnan(shank.angular_velocity).all()


def test_csv_units_and_earth_convention(tmp_path):
    path = write(tmp_path / "t.csv", "time,a_qw,a_qx,a_qy,a_qz,a_gx,a_gy,a_gz,a_ax,a_ay,a_az\n"
                                     "1.0,1,0,0,0,90,0,0,0,0,1\n1.5,1,0,0,0,0,0,180,0,0,-1\n")
    (one,) = imu_series.read_imu_csv(path, earth_convention="NWU", gyro_unit="deg/s", accel_unit="g",
                                     time_offset=2.0)
    np.testing.assert_array_equal(one.timestamp_us, [3_000_000, 3_500_000])
    np.testing.assert_allclose(one.angular_velocity, [[math.pi / 2, 0, 0], [0, 0, math.pi]])
    np.testing.assert_allclose(one.linear_acceleration[:, 2], [9.80665, -9.80665])
    np.testing.assert_allclose(quat_to_matrix(one.quaternion_wxyz[0]), rotation_z(math.pi / 2), atol=1e-15)  # NWU


@pytest.mark.parametrize(("text", "message"), [
    ("t,a_qw,a_qx,a_qy,a_qz\n0,1,0,0,0\n", "line 1: missing header: no 'time' column"),
    ("time,a_qw,a_qx,a_qy,a_qz,a_temp\n0,1,0,0,0,20\n", "line 1, column 'a_temp': unknown column"),
    ("time,a_qw,a_qx,a_qy\n0,1,0,0\n", r"lacks the quaternion column\(s\) \['a_qz'\]"),
    ("time,a_qw,a_qx,a_qy,a_qz,a_gx\n0,1,0,0,0,1\n", "give all three axes or none"),
    ("time,a_qw,a_qx,a_qy,a_qz\n0,1,0,0,0\n0.01,nan,nan,nan,nan\n", "line 3, column 'a_qw': nan is not finite"),
    ("time,a_qw,a_qx,a_qy,a_qz\n0,1,0,0,0\n0.01,1,0,0,\n", "line 3, column 'a_qz': '' is not a number"),
    ("time,a_qw,a_qx,a_qy,a_qz\n0.02,1,0,0,0\n0.01,1,0,0,0\n", "line 3, column 'time': time does not increase"),
    ("time,a_qw,a_qx,a_qy,a_qz\n0,1,0,0,0\n0.01,1,0,0\n", "line 3: 4 fields, expected 5"),
    ("time,a_qw,a_qx,a_qy,a_qz\n0,0.5,0,0,0\n", "line 2, column 'a_qw': quaternion norm 0.5"),
    ("time,a_qw,a_qx,a_qy,a_qz\n", "no data rows"),
])
def test_bad_csv_tables_stop_with_one_line(tmp_path, text, message):
    with pytest.raises(RecordingError, match=message) as error:
        imu_series.read_imu_csv(write(tmp_path / "bad.csv", text))
    assert "\n" not in str(error.value)


# --- Movella DOT -----------------------------------------------------------------------------------------------------

DOT_PREAMBLE = ("sep=,\nDeviceTag:,Left Shank\nFirmwareVersion:,2.0.0\nAppVersion:,2021.0\nSyncStatus:,Synced\n"
                "OutputRate:,60Hz\nFilterProfile:,General\n"
                "Measurement Mode:,Sensor fusion Mode - Extended(Quaternion)\n"
                "StartTime: ,2021-08-20_20:21:13_835 GMT+8\n\n")
DOT_HEADER = "PacketCounter,SampleTimeFine,Quat_W,Quat_X,Quat_Y,Quat_Z,FreeAcc_X,FreeAcc_Y,FreeAcc_Z,Acc_X,Acc_Y," \
             "Acc_Z,Gyr_X,Gyr_Y,Gyr_Z,Status\n"


def test_movella_dot_export_with_clock_wrap(tmp_path):
    c, s = math.cos(math.pi / 8), math.sin(math.pi / 8)  # 45 degrees about z
    rows = [f"1,4294950000,{c},0,0,{s},0.1,0.2,0.3,0,0,9.81,0,0,90,0",
            f"2,4294966667,{c},0,0,{s},0.1,0.2,0.3,0,0,9.81,0,0,90,0",
            f"3,16038,{c},0,0,{s},0.1,0.2,0.3,0,0,9.81,0,0,90,0"]  # SampleTimeFine wrapped past 2^32 us
    path = write(tmp_path / "Left_Shank_20210820_202113_811.csv", DOT_PREAMBLE + DOT_HEADER + "\n".join(rows) + "\n")
    one = imu_series.read_movella_dot_csv(path)
    assert one.name == "Left Shank"  # DeviceTag
    np.testing.assert_array_equal(np.diff(one.timestamp_us), [16667, 16667])
    np.testing.assert_allclose(quat_to_matrix(one.quaternion_wxyz[0]), rotation_z(math.pi / 4), atol=1e-12)
    np.testing.assert_allclose(one.angular_velocity[0], [0, 0, math.pi / 2])  # deg/s -> rad/s
    np.testing.assert_allclose(one.linear_acceleration[0], [0, 0, 9.81])  # Acc, not FreeAcc


@pytest.mark.parametrize(("text", "message"), [
    (DOT_PREAMBLE, "missing header: no 'PacketCounter,SampleTimeFine,...' line"),
    (DOT_PREAMBLE + "PacketCounter,SampleTimeFine,Euler_X,Euler_Y,Euler_Z\n1,10,0,0,0\n",
     r"no \['Quat_W', 'Quat_X', 'Quat_Y', 'Quat_Z'\] column"),
    (DOT_PREAMBLE + "PacketCounter,SampleTimeFine,Quat_W,Quat_X,Quat_Y,Quat_Z,Temp\n1,10,1,0,0,0,20\n",
     "line 11, column 'Temp': unknown column"),
    (DOT_PREAMBLE + DOT_HEADER + "1,100,1,0,0,0,0,0,0,0,0,9.8,0,0,0,0\n2,90,1,0,0,0,0,0,0,0,0,9.8,0,0,0,0\n",
     "line 13, column 'SampleTimeFine': time does not increase"),
    (DOT_PREAMBLE + DOT_HEADER + "1,100,nan,0,0,0,0,0,0,0,0,9.8,0,0,0,0\n", "line 12, column 'Quat_W': nan"),
])
def test_bad_movella_dot_exports(tmp_path, text, message):
    with pytest.raises(RecordingError, match=message):
        imu_series.read_movella_dot_csv(write(tmp_path / "dot.csv", text))


def test_common_grid_orientations_slerp_between_samples():
    """Two IMUs turning about z at 1 and -2 rad/s, sampled at different instants, land on one 10 Hz grid over
    their common span with the analytic angle (slerp is exact for a constant-rate turn about one axis)."""
    def turning(name, times, rate):
        times = np.asarray(times)
        q = matrix_to_quat(rotation_z(rate * times))
        nan = np.full((len(times), 3), np.nan)
        return imu_series.ImuSeries(name, np.round(times * 1e6).astype(np.int64), q, nan, nan)

    a = turning("a", [0.03, 0.12, 0.27, 0.41, 0.55], 1.0)
    b = turning("b", [0.0, 0.2, 0.35, 0.5], -2.0)
    grid, q = imu_series.common_grid_orientations([a, b], 10.0)
    np.testing.assert_allclose(grid, [0.1, 0.2, 0.3, 0.4, 0.5])
    np.testing.assert_allclose(quat_to_matrix(q[:, 0]), rotation_z(grid), atol=1e-12)
    np.testing.assert_allclose(quat_to_matrix(q[:, 1]), rotation_z(-2.0 * grid), atol=1e-12)
    with pytest.raises(RecordingError, match="do not overlap"):
        imu_series.common_grid_orientations([turning("c", [0.0, 0.1], 1.0), turning("d", [0.5, 0.6], 1.0)], 10.0)
