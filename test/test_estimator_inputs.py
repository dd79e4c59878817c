"""Tests of estimator input validation (ros_dofkit.core.estimator.inputs): each reliability rule of DESIGN.md gives
its own reason code, good samples pass unchanged, near-unit quaternions are normalized."""

import numpy as np
import pytest

from ros_dofkit.core.estimator.inputs import (
    RejectReason,
    parse_imu,
    parse_joint_state,
)
from ros_dofkit.core.spatial import quat_to_matrix

NAMES = {"j1": 0, "j2": 1, "j3": 2}


def test_good_joint_state_maps_names_to_indices():
    status, sample = parse_joint_state(["j3", "j1"], [0.3, 0.1], [3.0, 1.0], 2.5, NAMES)
    assert status.ok
    np.testing.assert_array_equal(sample.indices, [2, 0])
    np.testing.assert_array_equal(sample.positions, [0.3, 0.1])
    np.testing.assert_array_equal(sample.velocities, [3.0, 1.0])
    assert sample.stamp == 2.5


def test_empty_velocity_means_absent():
    status, sample = parse_joint_state(["j1"], [0.1], [], 0.0, NAMES)
    assert status.ok and sample.velocities is None


@pytest.mark.parametrize(
    "names, positions, velocities, reason",
    [
        ([], [], None, RejectReason.EMPTY),
        (["j1", "j2"], [0.1], None, RejectReason.MISMATCHED_ARRAYS),
        (["j1", "j2"], [0.1, 0.2], [1.0], RejectReason.MISMATCHED_ARRAYS),
        (["j1", "j1"], [0.1, 0.2], None, RejectReason.DUPLICATE_NAME),
        (["j1", "j2"], [0.1, np.nan], None, RejectReason.NON_FINITE),
        (["j1", "j2"], [0.1, 0.2], [np.inf, 0.0], RejectReason.NON_FINITE),
        (["x", "y"], [0.1, 0.2], None, RejectReason.UNKNOWN_NAME),
    ],
)
def test_bad_joint_state_is_rejected_with_reason(names, positions, velocities, reason):
    status, sample = parse_joint_state(names, positions, velocities, 0.0, NAMES)
    assert not status.accepted and sample is None
    assert status.reason is reason
    assert status.detail


def test_unknown_names_are_ignored_but_reported():
    status, sample = parse_joint_state(["gripper", "j2"], [5.0, 0.2], None, 0.0, NAMES)
    assert status.accepted and not status.ok
    assert status.reason is RejectReason.UNKNOWN_NAME and "gripper" in status.detail
    np.testing.assert_array_equal(sample.indices, [1])
    assert sample.unknown_names == ("gripper",)


def test_good_imu_sample_and_near_unit_normalization():
    quaternion = np.array([0.5, 0.5, 0.5, 0.5]) * 1.0005
    status, sample = parse_imu(1.0, quaternion, [0.1, 0.2, 0.3])
    assert status.ok
    np.testing.assert_allclose(sample.R_GS, quat_to_matrix(np.array([0.5, 0.5, 0.5, 0.5])), atol=1e-15)
    np.testing.assert_array_equal(sample.w_S, [0.1, 0.2, 0.3])


@pytest.mark.parametrize(
    "quaternion, gyro, reason",
    [
        ([0, 0, 0, 0], [0, 0, 0], RejectReason.ZERO_QUATERNION),
        ([1.1, 0, 0, 0], [0, 0, 0], RejectReason.NON_UNIT_QUATERNION),
        ([np.nan, 0, 0, 1], [0, 0, 0], RejectReason.NON_FINITE),
        ([1, 0, 0, 0], [0, np.inf, 0], RejectReason.NON_FINITE),
        ([1, 0, 0], [0, 0, 0], RejectReason.MISMATCHED_ARRAYS),
        ([1, 0, 0, 0], [0, 0], RejectReason.MISMATCHED_ARRAYS),
    ],
)
def test_bad_imu_sample_is_rejected(quaternion, gyro, reason):
    status, sample = parse_imu(0.0, quaternion, gyro)
    assert sample is None and not status.accepted and status.reason is reason


def test_absent_orientation_keeps_gyro_and_absent_both_drops():
    status, sample = parse_imu(0.0, [0, 0, 0, 0], [1.0, 0, 0], orientation_present=False)
    assert status.accepted and status.reason is RejectReason.ORIENTATION_ABSENT
    assert sample.R_GS is None and sample.w_S is not None
    status, sample = parse_imu(0.0, [1, 0, 0, 0], [1.0, 0, 0], False, False)
    assert sample is None and status.reason is RejectReason.ORIENTATION_ABSENT
    status, sample = parse_imu(0.0, [1, 0, 0, 0], [np.nan, 0, 0], True, False)
    assert status.ok and sample.w_S is None  # an absent gyro is not inspected
