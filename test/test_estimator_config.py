"""Tests of the estimator configuration dataclasses (ros_dofkit.core.estimator.config): every bad value raises a
typed error whose message says what was expected and what was received."""

import numpy as np
import pytest

from ros_dofkit.core.estimator.config import (
    CALIBRATE,
    EstimatorConfig,
    EstimatorConfigError,
    ImuConfig,
    UnknownNameError,
    as_rotation_matrix,
    describe_unknown,
)
from ros_dofkit.core.spatial import quat_to_matrix, rotation_z


def test_imu_defaults_topic_and_identity_mounting():
    imu = ImuConfig(name=" hand ", body="panda_link7")
    assert imu.name == "hand"
    assert imu.topic == "imu/hand"
    np.testing.assert_array_equal(imu.mounting, np.eye(3))
    assert not imu.needs_calibration
    assert not imu.mounting.flags.writeable


def test_imu_mounting_accepts_quaternion_and_matrix():
    q = np.array([np.cos(0.3), 0.0, 0.0, np.sin(0.3)])
    from_quat = ImuConfig("a", "b", mounting=q).mounting
    np.testing.assert_allclose(from_quat, quat_to_matrix(q), atol=1e-15)
    np.testing.assert_allclose(ImuConfig("a", "b", mounting=rotation_z(0.6)).mounting, rotation_z(0.6), atol=1e-15)
    assert ImuConfig("a", "b", mounting=CALIBRATE).needs_calibration


@pytest.mark.parametrize(
    "mounting, fragment",
    [
        ("calibrated", "'calibrate'"),
        (np.diag([1.0, 1.0, -1.0]), "det R = -1"),
        (2 * np.eye(3), "proper rotation"),
        (np.ones(5), "shape (5,)"),
        ([1.0, 1.0, 0.0, 0.0], "unit quaternion"),
        (np.full((3, 3), np.nan), "non-finite"),
    ],
)
def test_imu_rejects_bad_mounting(mounting, fragment):
    with pytest.raises(EstimatorConfigError, match="mounting") as info:
        ImuConfig("a", "b", mounting=mounting)
    assert fragment in str(info.value)


@pytest.mark.parametrize("weight", [-1.0, np.inf, np.nan, "1", True])
def test_imu_rejects_bad_weight(weight):
    with pytest.raises(EstimatorConfigError, match="weight"):
        ImuConfig("a", "b", weight=weight)


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_imu_rejects_bad_name(name):
    with pytest.raises(EstimatorConfigError, match="non-empty string"):
        ImuConfig(name, "b")


def test_config_rejects_duplicate_imu_names_and_topics():
    with pytest.raises(EstimatorConfigError, match="duplicates \\['a'\\]"):
        EstimatorConfig(imus=(ImuConfig("a", "b", topic="t1"), ImuConfig("a", "c", topic="t2")))
    with pytest.raises(EstimatorConfigError, match="shared topics \\['t'\\]"):
        EstimatorConfig(imus=(ImuConfig("a", "b", topic="t"), ImuConfig("c", "b", topic="t")))
    with pytest.raises(EstimatorConfigError, match="ImuConfig entries"):
        EstimatorConfig(imus=({"name": "a"},))


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"stale_timeout_s": 0.0}, "stale_timeout_s"),
        ({"stale_timeout_s": -1}, "stale_timeout_s"),
        ({"future_tolerance_s": np.inf}, "future_tolerance_s"),
        ({"accuracy": 1.0}, "accuracy"),
        ({"accuracy": 0.0}, "accuracy"),
        ({"velocity_regularization": 0.0}, "velocity_regularization"),
        ({"estimated_joints": {"arm": "some"}}, "must be 'all' or 'none', got 'some'; accepted forms: all, none"),
        ({"estimated_joints": {"arm": ["j1", "j1"]}}, "given more than once: ['j1']"),
        ({"estimated_joints": ["arm"]}, "mapping"),
        ({"default_estimated": "most"}, "default_estimated"),
        ({"heading_axis": "w"}, "heading_axis"),
        ({"calibration_window": 0}, "calibration_window"),
        ({"use_joint_limits": 1}, "use_joint_limits"),
        ({"R_WG": np.zeros((3, 3))}, "R_WG"),
    ],
)
def test_config_rejects_bad_values(kwargs, fragment):
    with pytest.raises(EstimatorConfigError) as info:
        EstimatorConfig(**kwargs)
    assert fragment in str(info.value)


def test_unknown_names_list_near_matches_and_alternatives():
    config = EstimatorConfig(imus=(ImuConfig("upper_arm", "l1"), ImuConfig("forearm", "l2")))
    with pytest.raises(UnknownNameError) as info:
        config.imu("upperarm")
    message = str(info.value)
    assert "did you mean 'upper_arm'" in message and "'forearm'" in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownNameError, match="heading"):
        EstimatorConfig(imus=config.imus, heading_reference="hed")
    assert config.imu("forearm").body == "l2"
    assert config.imu_names == ("upper_arm", "forearm")


def test_describe_unknown_without_valid_names():
    assert "(none)" in describe_unknown("IMU", "x", [])


def test_rotation_matrix_result_is_read_only_copy():
    source = rotation_z(0.1)
    result = as_rotation_matrix(source, "R")
    source[0, 0] = 5.0
    assert result[0, 0] == pytest.approx(np.cos(0.1))
    assert not result.flags.writeable


@pytest.mark.parametrize(
    "spec, normal",
    [("all", "all"), ("none", "none"), (" all ", "all"), (["all"], "all"), (("none",), "none"),
     (["j1", "j2"], ("j1", "j2")), ([], ())],
)
def test_estimated_joints_accepts_the_words_as_string_or_one_element_list(spec, normal):
    # issue 21.1: `ur5: all` in YAML is a plain string; it must not be iterated character by character.
    assert EstimatorConfig(estimated_joints={"ur5": spec}).estimated_joints == {"ur5": normal}


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("al", "a plain string must be 'all' or 'none', got 'al'; accepted forms: all, none, [all], [none], or a "
               "list of joint or coordinate names such as [joint_a, joint_b] (one joint: [al])"),
        ("shoulder_pan_joint", "(one joint: [shoulder_pan_joint])"),
        (["all", "j1"], "'all' must stand alone, got ['all', 'j1']; accepted forms"),
        (["none", "none"], "'none' must stand alone"),
        ({"j1": True}, "got dict {'j1': True}; accepted forms"),
        (3, "got int 3; accepted forms"),
    ],
)
def test_estimated_joints_refuses_other_forms_showing_the_accepted_ones(spec, fragment):
    with pytest.raises(EstimatorConfigError) as info:
        EstimatorConfig(estimated_joints={"ur5": spec})
    assert str(info.value).startswith("estimated_joints['ur5']: ")
    assert fragment in str(info.value)


def test_duplicated_names_are_listed_once_each():
    # issue 21.5: ['a', 'l', 'l', 'l', 'a'] names 'a' and 'l' once each, in order of first appearance.
    with pytest.raises(EstimatorConfigError) as info:
        EstimatorConfig(estimated_joints={"ur5": ["l", "a", "l", "l", "a", "b"]})
    assert str(info.value) == "estimated_joints['ur5']: joint names given more than once: ['l', 'a']"
    imus = tuple(ImuConfig(n, "b", topic=f"t{k}") for k, n in enumerate(["x", "y", "x", "x"]))
    with pytest.raises(EstimatorConfigError, match=r"got duplicates \['x'\]$"):
        EstimatorConfig(imus=imus)


def test_raw_imu_settings_are_validated_with_what_was_expected():
    imu = ImuConfig("hand", "arm_link7", orientation="filter", filter={"sample_time_s": 0.01, "max_gap_s": 0.5})
    assert imu.filter.sample_time_s == 0.01 and imu.filter.max_gap_s == 0.5 and imu.orientation == "filter"
    assert ImuConfig("hand", "arm_link7").orientation == "auto"
    with pytest.raises(EstimatorConfigError, match=r"IMU 'hand' orientation: expected one of \('sensor', 'filter', "
                                                   r"'auto'\), got 'raw'"):
        ImuConfig("hand", "arm_link7", orientation="raw")
    with pytest.raises(EstimatorConfigError, match="IMU 'hand' filter: max_gap_s: expected a finite number > 0"):
        ImuConfig("hand", "arm_link7", filter={"max_gap_s": -1.0})
    with pytest.raises(EstimatorConfigError, match="IMU 'hand' filter: .*unexpected keyword argument 'rate'"):
        ImuConfig("hand", "arm_link7", filter={"rate": 100.0})
    with pytest.raises(EstimatorConfigError, match="expected FilterSettings or a mapping of its fields, got float"):
        ImuConfig("hand", "arm_link7", filter=0.01)
    assert ImuConfig("hand", "arm_link7", magnetic_field_topic="mag").magnetic_field_topic == "mag"
    with pytest.raises(EstimatorConfigError, match="IMU 'hand' magnetic_field_topic: expected a topic name .* for an "
                                                   "IMU whose orientation is 'filter' or 'auto'"):
        ImuConfig("hand", "arm_link7", orientation="sensor", magnetic_field_topic="mag")
    with pytest.raises(EstimatorConfigError, match="IMU 'hand' filter: field_timeout_s: expected a finite number > 0"):
        ImuConfig("hand", "arm_link7", filter={"field_timeout_s": float("inf")})
