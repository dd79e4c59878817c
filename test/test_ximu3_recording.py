"""Tests of ros_dofkit.core.recordings.ximu3: parsing, merging by timestamp, ENU conversion, errors.

Hand-written fixtures (test/fixtures/ximu3/) check the exact values; the real recording in ../shared/data checks
physical facts (gravity up in ENU at rest, gyro quiet while standing, gyro consistent with the quaternions).
"""

from pathlib import Path

import numpy as np
import pytest

from ros_dofkit.core.recordings import (
    STANDARD_GRAVITY,
    XIMU3RecordingError,
    earth_to_enu_rotation,
    read_device,
    read_recording,
)
from ros_dofkit.core.spatial import matrix_to_rotvec, quat_to_matrix, rotation_z

FIXTURES = Path(__file__).parent / "fixtures" / "ximu3"
REAL_RECORDING = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ximu3_lower_body"
QUATERNION_HEADER = "Timestamp (us),W,X,Y,Z\n"
INERTIAL_HEADER = (
    "Timestamp (us),Gyroscope X (deg/s),Gyroscope Y (deg/s),Gyroscope Z (deg/s),"
    "Accelerometer X (g),Accelerometer Y (g),Accelerometer Z (g)\n"
)

needs_real_recording = pytest.mark.skipif(not REAL_RECORDING.is_dir(), reason="../shared/data not available")


def write_device(folder: Path, quaternion_rows: str, inertial_rows: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "Quaternion.csv").write_text(QUATERNION_HEADER + quaternion_rows)
    (folder / "Inertial.csv").write_text(INERTIAL_HEADER + inertial_rows)
    return folder


# --- earth conventions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("convention", ["NWU", "ENU", "NED", "nwu"])
def test_earth_to_enu_is_a_proper_rotation(convention):
    R = earth_to_enu_rotation(convention)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=0)
    assert np.linalg.det(R) == pytest.approx(1.0)


def test_earth_axes_land_on_the_named_enu_directions():
    north, east, up = np.array([0, 1, 0]), np.array([1, 0, 0]), np.array([0, 0, 1])
    nwu = earth_to_enu_rotation("NWU")
    np.testing.assert_array_equal(nwu @ [1, 0, 0], north)
    np.testing.assert_array_equal(nwu @ [0, 1, 0], -east)  # west
    np.testing.assert_array_equal(nwu @ [0, 0, 1], up)
    ned = earth_to_enu_rotation("NED")
    np.testing.assert_array_equal(ned @ [1, 0, 0], north)
    np.testing.assert_array_equal(ned @ [0, 1, 0], east)
    np.testing.assert_array_equal(ned @ [0, 0, 1], -up)
    np.testing.assert_allclose(nwu, rotation_z(np.pi / 2), atol=1e-15)


def test_unknown_earth_convention_lists_the_valid_ones():
    with pytest.raises(XIMU3RecordingError, match=r"'NUE'.*\['ENU', 'NED', 'NWU'\]"):
        earth_to_enu_rotation("NUE")
    with pytest.raises(TypeError):
        earth_to_enu_rotation(3)


# --- fixtures: exact values -------------------------------------------------------------------------------------


def test_fixture_recording_devices_and_metadata():
    recording = read_recording(FIXTURES / "two_devices")
    assert recording.device_names == ["foot", "thigh"]  # GUI suffix " 0123ABCD (USB)" stripped, sorted
    thigh = recording["thigh"]
    assert (thigh.device_name, thigh.serial_number) == ("Thigh", "0123ABCD")
    assert recording["foot"].device_name is None
    assert recording.start_us == 1_000_000 and recording.end_us == 1_080_000


def test_rows_merge_by_timestamp_not_by_row_number():
    thigh = read_recording(FIXTURES / "two_devices")["thigh"]
    # Quaternion rows at 1.00 1.02 1.04 1.06 s; inertial rows at 1.00 1.02 1.0603 1.08 s.
    np.testing.assert_array_equal(thigh.timestamp_us, [1_000_000, 1_020_000, 1_040_000, 1_060_000, 1_080_000])
    np.testing.assert_array_equal(thigh.has_orientation, [True, True, True, True, False])
    np.testing.assert_array_equal(thigh.has_inertial, [True, True, False, True, True])
    np.testing.assert_array_equal(thigh.time, thigh.timestamp_us / 1e6)
    # Row 3 of Inertial.csv (1.0603 s) belongs to the 1.06 s quaternion, not to row 3 of Quaternion.csv (1.04 s).
    np.testing.assert_allclose(thigh.angular_velocity[3], [0.0, -np.pi / 4, 0.0])
    np.testing.assert_allclose(thigh.linear_acceleration[3], [0.5 * STANDARD_GRAVITY, 0.0, 0.0])
    assert np.all(np.isnan(thigh.angular_velocity[2])) and np.all(np.isnan(thigh.quaternion_wxyz[4]))
    np.testing.assert_allclose(thigh.linear_acceleration[4], [0.0, -STANDARD_GRAVITY, 0.0])


def test_units_are_converted_to_si():
    thigh = read_recording(FIXTURES / "two_devices")["thigh"]
    np.testing.assert_allclose(thigh.angular_velocity[0], [0.0, 0.0, np.pi / 2])  # 90 deg/s
    np.testing.assert_allclose(thigh.angular_velocity[1], [np.pi, 0.0, 0.0])  # 180 deg/s
    np.testing.assert_allclose(thigh.linear_acceleration[0], [0.0, 0.0, 9.80665])  # 1 g


def test_orientation_is_converted_from_nwu_to_enu():
    thigh = read_recording(FIXTURES / "two_devices")["thigh"]
    q_csv = np.array([[1, 0, 0, 0], [0.707107, 0, 0, 0.707107], [0, 1, 0, 0], [0.5, 0.5, 0.5, 0.5]], dtype=float)
    q_csv /= np.linalg.norm(q_csv, axis=1, keepdims=True)
    R_expected = rotation_z(np.pi / 2) @ quat_to_matrix(q_csv)  # R_ENU_NWU @ R_NWU_S
    R_got = quat_to_matrix(thigh.quaternion_wxyz[:4])
    np.testing.assert_allclose(R_got, R_expected, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(thigh.quaternion_wxyz[:4], axis=1), 1.0, atol=1e-15)
    # The NWU identity: sensor x points north, which is ENU +y.
    np.testing.assert_allclose(R_got[0] @ [1, 0, 0], [0, 1, 0], atol=1e-12)


def test_enu_and_ned_devices_convert_too(tmp_path):
    rows_q = "10,1,0,0,0\n"
    rows_i = "10,0,0,0,0,0,-1\n"  # NED device at rest: z points down, so the accelerometer reads -1 g on z
    folder = write_device(tmp_path / "ned_device", rows_q, rows_i)
    device = read_device(folder, earth_convention="NED")
    R_WS = quat_to_matrix(device.quaternion_wxyz[0])
    np.testing.assert_allclose(R_WS @ device.linear_acceleration[0], [0, 0, STANDARD_GRAVITY], atol=1e-12)
    assert device.earth_convention == "NED"
    enu = read_device(folder, earth_convention="ENU")
    np.testing.assert_allclose(enu.quaternion_wxyz[0], [1, 0, 0, 0])


def test_match_tolerance_decides_whether_rows_pair(tmp_path):
    folder = write_device(tmp_path / "d", "1000,1,0,0,0\n", "1400,0,0,0,0,0,1\n")
    assert len(read_device(folder, match_tolerance_us=500)) == 1
    strict = read_device(folder, match_tolerance_us=0)
    np.testing.assert_array_equal(strict.timestamp_us, [1000, 1400])
    np.testing.assert_array_equal(strict.has_inertial, [False, True])


def test_truncated_keeps_the_first_seconds():
    recording = read_recording(FIXTURES / "two_devices")
    short = recording.truncated(0.03)
    np.testing.assert_array_equal(short["thigh"].timestamp_us, [1_000_000, 1_020_000])
    np.testing.assert_array_equal(short["foot"].timestamp_us, [1_005_000, 1_025_000])
    with pytest.raises(XIMU3RecordingError, match="positive"):
        recording.truncated(0.0)


def test_device_filter_and_unknown_device_name():
    recording = read_recording(FIXTURES / "two_devices", devices=["foot"])
    assert recording.device_names == ["foot"]
    with pytest.raises(XIMU3RecordingError, match=r"'fot'.*near matches.*foot"):
        read_recording(FIXTURES / "two_devices", devices=["fot"])
    with pytest.raises(XIMU3RecordingError, match="did you mean.*thigh"):
        read_recording(FIXTURES / "two_devices")["thihg"]


# --- errors -------------------------------------------------------------------------------------------------------


def test_bad_header_names_file_line_and_expected_header():
    with pytest.raises(XIMU3RecordingError, match=r"Quaternion\.csv, line 1: unexpected header.*Timestamp \(us\)"):
        read_recording(FIXTURES / "bad_header")


def test_missing_folder_and_missing_file(tmp_path):
    with pytest.raises(XIMU3RecordingError, match="recording folder not found"):
        read_recording(tmp_path / "nope")
    with pytest.raises(XIMU3RecordingError, match="no device folders"):
        read_recording(tmp_path)
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "Quaternion.csv").write_text(QUATERNION_HEADER + "1,1,0,0,0\n")
    with pytest.raises(XIMU3RecordingError, match=r"Inertial\.csv: file missing"):
        read_recording(tmp_path)
    with pytest.raises(XIMU3RecordingError, match="device folder not found"):
        read_device(tmp_path / "other")


@pytest.mark.parametrize(
    ("quaternion_rows", "message"),
    [
        ("10,1,0,0,0\n10,1,0,0,0\n", r"line 3: timestamp 10 us does not increase"),
        ("10,1,0,0,0\n5,1,0,0,0\n", r"line 3: timestamp 5 us does not increase"),
        ("10,1,0,0,0\n20,nan,0,0,0\n", r"line 3: W is nan, expected a finite number"),
        ("10,1,0,0,0\n20,1,inf,0,0\n", r"line 3: X is inf"),
        ("10,1,0,0\n", r"line 2: 4 fields, expected 5"),
        ("1.5e3,1,0,0,0\n", r"line 2: timestamp '1.5e3' is not an integer"),
        ("10,1,0,zero,0\n", r"line 2: value is not a number"),
        ("10,1,0,0,0\n20,0.9,0,0,0\n", r"line 3: quaternion norm 0.9 is not within"),
        ("", r"no data rows"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, quaternion_rows, message):
    folder = write_device(tmp_path / "d", quaternion_rows, "10,0,0,0,0,0,1\n")
    with pytest.raises(XIMU3RecordingError, match=message) as error:
        read_device(folder)
    assert error.value.path.name == "Quaternion.csv"


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path):
    folder = write_device(tmp_path / "d", "10,1,0,0,0\n\n20,2,0,0,0\n", "10,0,0,0,0,0,1\n")
    with pytest.raises(XIMU3RecordingError, match="line 4: quaternion norm 2"):
        read_device(folder)


def test_malformed_command_json(tmp_path):
    folder = write_device(tmp_path / "d", "10,1,0,0,0\n", "10,0,0,0,0,0,1\n")
    (folder / "Command.json").write_text("[{")
    with pytest.raises(XIMU3RecordingError, match=r"Command\.json: not valid JSON"):
        read_device(folder)


def test_bad_tolerance_is_rejected(tmp_path):
    folder = write_device(tmp_path / "d", "10,1,0,0,0\n", "10,0,0,0,0,0,1\n")
    with pytest.raises(XIMU3RecordingError, match="non-negative integer"):
        read_device(folder, match_tolerance_us=-1)


# --- the real recording: physical facts ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_recording():
    if not REAL_RECORDING.is_dir():
        pytest.skip("../shared/data/ximu3_lower_body not available")
    return read_recording(REAL_RECORDING)


@needs_real_recording
def test_real_recording_has_the_seven_segments(real_recording):
    assert real_recording.device_names == [
        "left_foot", "left_lower_leg", "left_upper_leg", "pelvis", "right_foot", "right_lower_leg", "right_upper_leg",
    ]
    for device in real_recording:
        assert 890 <= len(device) <= 930
        assert device.has_orientation.all() and device.has_inertial.all()
        np.testing.assert_allclose(np.linalg.norm(device.quaternion_wxyz, axis=1), 1.0, atol=1e-12)
        period = np.median(np.diff(device.time))
        assert 0.019 < period < 0.021  # about 50 Hz
    starts = [d.timestamp_us[0] for d in real_recording]
    assert max(starts) - min(starts) < 20_000


@needs_real_recording
def test_real_recording_gravity_points_up_in_enu_while_standing(real_recording):
    standing = real_recording.truncated(0.5)
    for device in standing:
        R_WS = quat_to_matrix(device.quaternion_wxyz)
        a_W = np.einsum("nij,nj->ni", R_WS, device.linear_acceleration)
        mean = a_W.mean(axis=0)
        assert np.hypot(mean[0], mean[1]) < 0.3, device.name
        assert mean[2] == pytest.approx(STANDARD_GRAVITY, abs=0.15), device.name
        assert np.abs(device.angular_velocity).max() < np.radians(5.0), device.name


@needs_real_recording
def test_real_recording_gyro_agrees_with_the_quaternions(real_recording):
    """Relative rotation between consecutive quaternions ≈ exp(ω_S dt): confirms q = R_WS, gyro in S, rad/s."""
    for device in real_recording:
        R = quat_to_matrix(device.quaternion_wxyz)
        dt = np.diff(device.time)
        w = device.angular_velocity
        measured = matrix_to_rotvec(np.swapaxes(R[:-1], -1, -2) @ R[1:])  # rotation of S(t+dt) in S(t)
        predicted = 0.5 * (w[:-1] + w[1:]) * dt[:, None]
        moving = (dt < 0.03) & (np.linalg.norm(predicted, axis=1) > np.radians(1.0))
        assert moving.sum() > 100, device.name
        error = np.linalg.norm(measured - predicted, axis=1)[moving]
        motion = np.linalg.norm(predicted, axis=1)[moving]
        assert np.median(error) < 0.3 * np.median(motion), device.name
