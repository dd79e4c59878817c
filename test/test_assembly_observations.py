"""Tests of the observation input of the assembly entry points (ros_dofkit.core.assembly.observations, issue 21
items 3 and 4): IMU quaternions (w, x, y, z) accepted where rotation matrices are, by the node's quaternion rule
(SPEC 9.7), and data columns named by sensor instead of silently following the observation order. The truth is
the matrix path: the same observations as matrices in slot order."""

from __future__ import annotations

import numpy as np
import pytest

from imu_scenarios import imu_setup, observe
from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import AssemblyValueError, Markers, OrientationSensors
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant

LINKS = ["panda_link3", "panda_link5", "panda_link7", "panda_hand"]
MID = np.array([0.0, -0.8, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02])


@pytest.fixture(scope="module")
def panda():
    return build_plant([ModelSpec(str(urdf_path("panda")))])


def tracking(panda, seed, T=12):
    """Four IMUs on the Panda, an Assembler set to track tightly, a smooth trajectory Q at times t and its exact
    observations R_GO (slot order = LINKS): ``(osensors, assembler, t, Q, R_GO)``."""
    osensors, assembler = imu_setup(panda, LINKS, np.random.default_rng(seed))
    assembler.lock_positions([7])
    assembler.set_accuracy(1e-6)
    assembler.set_error_tolerance(1e-12)
    t = np.linspace(0.0, 1.0, T)
    Q = np.tile(MID, (T, 1))
    Q[:, :7] += 0.3 * np.sin(2 * np.pi * 0.4 * t[:, None] + np.arange(7))
    return osensors, assembler, t, Q, observe(panda, osensors, Q)


def as_imu_quaternions(R, rng):
    """What an IMU driver sends: either sign, norm off by up to half the tolerance."""
    quat = spatial.matrix_to_quat(R)
    sign = np.where(rng.random(quat.shape[:-1]) < 0.5, -1.0, 1.0)[..., None]
    scale = 1.0 + rng.uniform(-0.5, 0.5, quat.shape[:-1] + (1,)) * spatial.QUAT_NORM_TOLERANCE
    return quat * sign * scale


def test_move_all_observations_takes_quaternions(panda):
    rng = np.random.default_rng(1)
    osensors, _ = imu_setup(panda, LINKS, rng)
    R_GO = observe(panda, osensors, MID)
    quat = as_imu_quaternions(R_GO, rng)
    quat[1] = np.nan  # four NaNs: no observation, as a NaN matrix
    osensors.move_all_observations(quat)
    got = osensors.get_all_observations()
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[[0, 2, 3]], R_GO[[0, 2, 3]], rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "quat, reason",
    [
        ([0.0, 0.0, 0.0, 0.0], "quaternion is zero"),
        ([1.01, 0.0, 0.0, 0.0], "quaternion norm 1.01 is not within 0.001 of 1"),
        ([np.nan, 0.0, 0.0, 1.0], "non-finite"),
        ([np.inf, 0.0, 0.0, 0.0], "non-finite"),
    ],
)
def test_bad_quaternions_raise_naming_sensor_and_frame_and_change_nothing(panda, quat, reason):
    rng = np.random.default_rng(2)
    osensors, assembler = imu_setup(panda, LINKS, rng)
    good = spatial.matrix_to_quat(observe(panda, osensors, MID))
    osensors.move_all_observations(good)
    before = osensors.get_all_observations()
    data = good.copy()
    data[2] = quat
    with pytest.raises(AssemblyValueError, match=reason) as info:
        osensors.move_all_observations(data)
    assert "column 2 (orientation sensor 'panda_link7')" in str(info.value)
    np.testing.assert_array_equal(osensors.get_all_observations(), before)
    frames = np.tile(good, (5, 1, 1))
    frames[3, 2] = quat
    with pytest.raises(AssemblyValueError, match=reason) as info:
        assembler.track_sequence(np.arange(5.0), frames)
    assert "column 2 (orientation sensor 'panda_link7') of frame 3" in str(info.value)


def test_track_sequence_with_quaternions_equals_matrices(panda):
    osensors, assembler, t, Q, R_GO = tracking(panda, 3)
    quat = as_imu_quaternions(R_GO, np.random.default_rng(3))
    R_GO[4:6, 0] = quat[4:6, 0] = np.nan
    assembler.set_positions(Q[0])
    from_matrices = assembler.track_sequence(t, R_GO)
    assembler.set_positions(Q[0])
    from_quaternions = assembler.track_sequence(t, quat)
    np.testing.assert_allclose(from_quaternions, from_matrices, rtol=0, atol=1e-9)
    observed = np.r_[0:4, 6:len(t)]  # with panda_link3 dropped out the first joints are not observable
    np.testing.assert_allclose(from_quaternions[observed], Q[observed], rtol=0, atol=1e-6)


def test_columns_follow_the_order_sensors_were_added_when_none_was_defined(panda):
    osensors = OrientationSensors()
    for link in ("panda_link5", "panda_link3"):
        osensors.add_osensor(link, link, np.eye(3))
    R = spatial.rotation_z(np.array([0.1, 0.2]))
    osensors.move_all_observations(R)
    assert osensors.get_osensor_ix_for_observation(0) == osensors.get_osensor_ix("panda_link5")
    np.testing.assert_array_equal(osensors.get_observation(0), R[0])


def test_named_columns_go_to_their_sensors_slots(panda):
    osensors, assembler, t, Q, R_GO = tracking(panda, 4)
    shuffled = [2, 0, 3, 1]
    names = [LINKS[k] for k in shuffled]
    osensors.move_all_observations(R_GO[0][shuffled], sensors=names)
    np.testing.assert_array_equal(osensors.get_all_observations(), R_GO[0])
    # indices name columns too; a sensor left out is unobserved
    osensors.move_all_observations(R_GO[0][[3, 0]], sensors=[3, "panda_link3"])
    got = osensors.get_all_observations()
    np.testing.assert_array_equal(got[[0, 3]], R_GO[0][[0, 3]])
    assert np.isnan(got[[1, 2]]).all()
    # quaternions and names together
    osensors.move_all_observations(spatial.matrix_to_quat(R_GO[0][shuffled]), sensors=names)
    np.testing.assert_allclose(osensors.get_all_observations(), R_GO[0], rtol=0, atol=1e-14)
    # track_sequence: named shuffled columns give the frames of the slot-ordered data
    assembler.set_positions(Q[0])
    ordered = assembler.track_sequence(t, R_GO)
    assembler.set_positions(Q[0])
    named = assembler.track_sequence(t, R_GO[:, shuffled], sensors=names)
    np.testing.assert_array_equal(named, ordered)
    assembler.set_positions(Q[0])
    named = assembler.track_sequence(t, {osensors: R_GO[:, shuffled]}, sensors={osensors: names})
    np.testing.assert_array_equal(named, ordered)


def test_named_columns_are_checked(panda):
    rng = np.random.default_rng(5)
    osensors, assembler = imu_setup(panda, LINKS, rng)
    R = observe(panda, osensors, MID)
    cases = [
        (["panda_link3", "panda_lnk5", "panda_link7", "panda_hand"], "unknown orientation sensor 'panda_lnk5'"),
        (["panda_link3", "panda_link3", "panda_link7", "panda_hand"], "names ['panda_link3'] more than once"),
        (LINKS[:3], "sensors names 3 columns, but the data has shape (4, 3, 3)"),
        ("panda_link3", "sequence of orientation sensor names"),
        (set(LINKS), "sequence of orientation sensor names"),
        ([0, 1, 2, 1.5], "expected the name (str) or index (int) of one orientation sensor"),
    ]
    for sensors, fragment in cases:
        with pytest.raises(AssemblyValueError) as info:
            osensors.move_all_observations(R, sensors=sensors)
        assert fragment in str(info.value)
    osensors.define_observation_order(LINKS[:3])
    with pytest.raises(AssemblyValueError, match="'panda_hand' has no observation slot"):
        osensors.move_all_observations(R[:2], sensors=["panda_link3", "panda_hand"])
    markers = Markers()
    markers.add_marker("tip", "panda_hand", [0, 0, 0.1])
    assembler.adopt_assembly_goal(markers)
    with pytest.raises(AssemblyValueError, match="pass sensors as a dict"):
        assembler.track_sequence([0.0], {osensors: R[None, :3], markers: np.zeros((1, 1, 3))}, sensors=LINKS[:3])
    with pytest.raises(AssemblyValueError, match="'imus', which has no observations"):
        assembler.track_sequence([0.0], {markers: np.zeros((1, 1, 3))}, sensors={osensors: LINKS[:3]})


def test_markers_take_named_columns(panda):
    markers = Markers()
    markers.add_marker("tip", "panda_hand", [0, 0, 0.1])
    markers.add_marker("elbow", "panda_link4", [0, 0, 0])
    p = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    markers.move_all_observations(p[::-1], sensors=["elbow", "tip"])
    np.testing.assert_array_equal(markers.get_all_observations(), p)
