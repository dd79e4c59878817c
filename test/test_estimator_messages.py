"""Tests of the estimator's ROS edge without DDS: Imu -> core input (quaternion order, covariance -1 markers),
TF from body poses (frames, prefix, static vs moving, values against the plant), output messages (JointState per
DofMask, Odometry twist in the child frame, sensor errors) and diagnostics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from sensor_msgs.msg import Imu

from ros_dofkit.core.estimator import EstimatorConfig, ImuConfig
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.odometry import base_odometries
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_z, rotvec_to_matrix
from ros_dofkit.ros.estimator_messages import (
    BaseOdometryOutput,
    JointStateSelection,
    NodeStatistics,
    RateMeter,
    _run_or_indices,
    diagnostics_message,
    sensor_errors_message,
)
from ros_dofkit.ros.imu_input import (
    feed_imu_msg,
    imu_input_from_msg,
    seconds_to_sec_nanosec,
    stamp_to_nanoseconds,
    stamp_to_seconds,
)
from ros_dofkit.ros.tf_builder import TfBuilder


@pytest.fixture(scope="module")
def mobile():
    return build_plant([ModelSpec("mobile_base.urdf", "base", "planar"),
                        ModelSpec("arm7.urdf", "arm", "fixed", "arm_mount")])


@pytest.fixture(scope="module")
def quadruped():
    return build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])


def test_imu_message_to_core_input():
    msg = Imu()
    msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 12, 500_000_000, "imu"
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = 0.1, 0.2, 0.3, 0.9
    msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = 1.0, 2.0, 3.0
    sample = imu_input_from_msg(msg)
    assert sample.stamp == 12.5 and sample.frame_id == "imu"
    np.testing.assert_array_equal(sample.quaternion_wxyz, [0.9, 0.1, 0.2, 0.3])
    np.testing.assert_array_equal(sample.angular_velocity, [1.0, 2.0, 3.0])
    assert sample.orientation_present and sample.angular_velocity_present
    msg.orientation_covariance[0] = -1.0
    msg.angular_velocity_covariance[0] = -1.0
    sample = imu_input_from_msg(msg)
    assert not sample.orientation_present and not sample.angular_velocity_present


def test_stamp_conversions():
    class Stamp:
        sec, nanosec = 1_700_000_000, 123_456_789

    assert stamp_to_nanoseconds(Stamp) == 1_700_000_000_123_456_789
    assert stamp_to_seconds(Stamp) == 1_700_000_000 + 123_456_789e-9
    assert seconds_to_sec_nanosec(2.5) == (2, 500_000_000)
    assert seconds_to_sec_nanosec(-0.25) == (-1, 750_000_000)


def test_feed_imu_message_marks_absent_orientation(mobile):
    estimator = Estimator(mobile, EstimatorConfig(imus=(ImuConfig("base", "base_imu_link"),)))
    msg = Imu()
    msg.orientation_covariance[0] = -1.0
    status, results = feed_imu_msg(estimator, "base", msg)
    assert status.accepted and status.reason.value == "orientation_absent"
    assert len(results) == 1 and results[0].observed_sensors == ()


def test_tf_frames_prefix_and_values(mobile):
    tf = TfBuilder(mobile, frame_prefix="r1/", world_frame="map")
    assert tf.frame_ids[0] == "map" and tf.frame_ids[1] == "r1/base_link"
    moving = {mobile.get_body(b).name for b in tf.moving_bodies}
    assert moving == {"base_link", "left_wheel", "right_wheel", *(f"arm_link{i}" for i in range(1, 8))}
    fixed = {mobile.get_body(b).name for b in tf.fixed_bodies}
    assert fixed == {"base_imu_link", "arm_mount", "arm_link0", "arm_flange", "arm_tool"}
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, mobile.num_positions())
    X_WB = mobile.calc_body_poses(q)
    transforms = tf.moving_transforms(X_WB, 5, 6)
    index = {name: i for i, name in enumerate(tf.frame_ids)}
    for t in transforms:
        assert (t.header.stamp.sec, t.header.stamp.nanosec) == (5, 6)
        X_PC = np.linalg.solve(X_WB[index[t.header.frame_id]], X_WB[index[t.child_frame_id]])
        r, p = t.transform.rotation, t.transform.translation
        np.testing.assert_allclose(quat_to_matrix([r.w, r.x, r.y, r.z]), X_PC[:3, :3], atol=1e-12)
        np.testing.assert_allclose([p.x, p.y, p.z], X_PC[:3, 3], atol=1e-12)
    planar = next(t for t in transforms if t.child_frame_id == "r1/base_link")
    assert planar.header.frame_id == "map"
    translation = planar.transform.translation
    assert translation.x == pytest.approx(q[0]) and translation.y == pytest.approx(q[1])
    (imu_mount,) = [t for t in tf.static_transforms() if t.child_frame_id == "r1/base_imu_link"]
    assert imu_mount.transform.translation.z == pytest.approx(0.2)


def test_tf_qualifies_link_names_used_by_two_instances():
    plant = build_plant([ModelSpec("arm7.urdf", "left"), ModelSpec("arm7.urdf", "right")])
    tf = TfBuilder(plant)
    assert "left/arm_link3" in tf.frame_ids and "right/arm_link3" in tf.frame_ids
    assert len(set(tf.frame_ids)) == len(tf.frame_ids)


def test_joint_state_selection_follows_the_instance_masks(mobile):
    estimator = Estimator(mobile, EstimatorConfig(imus=(ImuConfig("base", "base_imu_link"),)))
    estimator.add_imu("base", 1.0, matrix_to_quat(rotation_z(0.4)))
    result = estimator.step()
    full = JointStateSelection(estimator).message(result, None)
    assert list(full.name) == list(mobile.position_names())
    base = JointStateSelection(estimator, estimator.instance_masks["base"]).message(result, None)
    assert list(base.name) == ["base_link_x", "base_link_y", "base_link_qz", "left_wheel_joint", "right_wheel_joint"]
    assert base.position[2] == pytest.approx(0.4, abs=1e-6)
    arm = JointStateSelection(estimator, estimator.instance_masks["arm"]).message(result, None)
    assert list(arm.name) == [f"arm_joint{i}" for i in range(1, 8)]


def test_odometry_pose_in_world_twist_in_child_frame(quadruped):
    estimator = Estimator(quadruped, EstimatorConfig(imus=(ImuConfig("trunk", "trunk_imu_link"),),
                                                     estimated_joints={"quadruped": "none"}))
    R_WB = rotation_z(0.7) @ rotation_x(0.2)
    w_W = np.array([0.3, -0.5, 0.9])
    w_S = R_WB.T @ w_W  # identity mounting: S = B's orientation
    estimator.add_imu("trunk", 0.0, matrix_to_quat(R_WB), w_S)
    estimator.step()
    R_next = rotvec_to_matrix(w_W * 0.01) @ R_WB
    estimator.add_imu("trunk", 0.01, matrix_to_quat(R_next), R_next.T @ w_W)
    result = estimator.step()
    (base,) = base_odometries(quadruped)
    msg = BaseOdometryOutput(base, "odom", "r/trunk").message(result, None)
    assert msg.header.frame_id == "odom" and msg.child_frame_id == "r/trunk"
    o = msg.pose.pose.orientation
    np.testing.assert_allclose(quat_to_matrix([o.w, o.x, o.y, o.z]), R_next, atol=1e-6)
    a = msg.twist.twist.angular
    np.testing.assert_allclose([a.x, a.y, a.z], R_next.T @ w_W, atol=1e-6)


def test_sensor_errors_and_diagnostics(mobile):
    imus = (ImuConfig("base", "base_imu_link"), ImuConfig("hand", "arm_link7"))
    estimator = Estimator(mobile, EstimatorConfig(imus=imus, stale_timeout_s=0.05))
    statistics = NodeStatistics(["joint_states", "base", "hand"])
    empty = diagnostics_message(None, "est", estimator, statistics, 0.0)
    assert empty.status[0].level == DiagnosticStatus.WARN and "no cycle" in empty.status[0].message
    estimator.add_imu("base", 1.0, [1.0, 0.0, 0.0, 0.0])
    estimator.add_imu("hand", 1.0, [0.0, 0.0, 0.0, 0.0])  # rejected: zero quaternion
    estimator.add_imu("base", 1.1, [1.0, 0.0, 0.0, 0.0])
    result = estimator.step()
    statistics.record_input("base", 10.0)
    statistics.record_output(result, 10.0)
    errors = sensor_errors_message(result, ["base", "hand"])
    assert errors.layout.dim[0].label == "sensor_error_deg:base,hand"
    assert errors.data[0] == pytest.approx(0.0, abs=1e-6) and math.isnan(errors.data[1])
    msg = diagnostics_message(None, "est", estimator, statistics, 10.0, {"/imu": 2})
    main, base, hand = msg.status
    values = {v.key: v.value for v in main.values}
    assert main.level == DiagnosticStatus.WARN and "stale sensors: hand" in main.message
    assert values["rejected.zero_quaternion"] == "1" and values["rejected.total"] == "1"
    assert values["stale_sensors"] == "hand" and values["qos_incompatible./imu"] == "2"
    assert values["cycles"] == "1" and float(values["input_rate_hz.base"]) == pytest.approx(0.5)
    assert base.level == DiagnosticStatus.OK and hand.level == DiagnosticStatus.WARN and hand.message == "stale"


def test_rate_meter_counts_a_sliding_window():
    meter = RateMeter(window_s=2.0)
    for k in range(10):
        meter.tick(k * 0.1)
    assert meter.rate(0.9) == pytest.approx(5.0)
    assert meter.rate(5.0) == 0.0


def test_tf_publishes_the_floating_base(quadruped):
    tf = TfBuilder(quadruped)
    trunk = quadruped.get_body_by_name("trunk").index
    assert trunk in tf.moving_bodies
    q = quadruped.default_positions().copy()
    q[:4] = matrix_to_quat(rotation_z(0.5) @ rotation_x(0.3))
    q[4:7] = [1.0, -2.0, 0.4]
    (base,) = [t for t in tf.moving_transforms(quadruped.calc_body_poses(q), 1, 2) if t.child_frame_id == "trunk"]
    assert base.header.frame_id == "world"
    r, p = base.transform.rotation, base.transform.translation
    np.testing.assert_allclose(quat_to_matrix([r.w, r.x, r.y, r.z]), rotation_z(0.5) @ rotation_x(0.3), atol=1e-12)
    np.testing.assert_allclose([p.x, p.y, p.z], [1.0, -2.0, 0.4], atol=1e-12)


def test_serialized_outputs_equal_the_message_objects(mobile, quadruped):
    """The node's pre-serialized JointState and TF are, read back by rclpy, the messages the object path builds."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    for plant, imu in ((mobile, ImuConfig("base", "base_imu_link")), (quadruped, ImuConfig("trunk", "trunk_imu_link"))):
        estimator = Estimator(plant, EstimatorConfig(imus=(imu,)))
        estimator.add_imu(imu.name, 1.0, matrix_to_quat(rotvec_to_matrix([0.3, -0.2, 0.4])), [0.1, 0.2, 0.3])
        result = estimator.step()
        for mask in (None, *estimator.instance_masks.values()):
            selection = JointStateSelection(estimator, mask)
            expected = selection.message(result, Time(sec=7, nanosec=8))
            assert deserialize_message(selection.serialized(result, 7, 8), JointState) == expected
        tf = TfBuilder(plant, frame_prefix="p/")
        dv = np.random.default_rng(1).uniform(-1, 1, plant.num_velocities())  # a random pose, unit quaternions
        X_WB = plant.calc_body_poses(plant.integrate_positions(plant.default_positions(), dv))
        objects = TFMessage(transforms=tf.moving_transforms(X_WB, 9, 10))
        back = deserialize_message(tf.moving_transforms_serialized(X_WB, 9, 10), TFMessage)
        # Message equality, not bytes: rclpy's serialize_message leaves CDR padding bytes uninitialized, so two
        # serializations of equal messages may differ byte for byte (seen in CI).
        assert back == objects


def test_serialized_tf_takes_the_quaternion_rule_of_the_object_path_for_any_pose(quadruped):
    """The compiled TF writer hands a pose that is not a proper rotation (here a scaled one, which its quaternion
    kernel declines) to matrix_to_quat's scipy path, and takes a non-contiguous pose array: read back, the same
    message as the object path's; and the next proper pose is written by the compiled path again."""
    from rclpy.serialization import deserialize_message
    from tf2_msgs.msg import TFMessage

    tf = TfBuilder(quadruped)
    X_WB = quadruped.calc_body_poses(quadruped.default_positions())
    body = tf.moving_bodies[-1]
    scaled = X_WB.copy()
    scaled[body, :3, :3] *= 1.01  # no longer orthonormal: scipy projects it
    for poses in (scaled, np.asfortranarray(X_WB), X_WB):
        back = deserialize_message(tf.moving_transforms_serialized(poses, 3, 4), TFMessage)
        assert back == TFMessage(transforms=tf.moving_transforms(poses, 3, 4))
    rotation = back.transforms[-1].transform.rotation
    assert rotation.w >= 0.0 and abs(rotation.x ** 2 + rotation.y ** 2 + rotation.z ** 2 + rotation.w ** 2 - 1) < 1e-12


def test_rate_limiter_admits_by_stamp_and_restarts_on_a_jump_back():
    from ros_dofkit.ros.estimator_messages import RateLimiter

    every = RateLimiter(0.0)
    assert all(every.admit(t) for t in (0.0, 0.001, 0.001, 0.002))
    ten_hz = RateLimiter(10.0)
    admitted = [t for t in np.arange(0.0, 1.0, 0.01) if ten_hz.admit(round(t, 6))]
    np.testing.assert_allclose(admitted, np.arange(0.0, 1.0, 0.1), atol=1e-9)
    assert ten_hz.admit(0.05)  # a looping bag: the stamp goes back
    assert not ten_hz.admit(0.1)
    with pytest.raises(ValueError, match="rate_hz"):
        RateLimiter(-1.0)


def test_robot_description_is_the_one_urdf_or_the_instances_merged_into_one_tree():
    from ros_dofkit.core.estimator.robot import MODELS_DIR, ModelSpec
    from ros_dofkit.core.multibody.urdf import parse_urdf
    from ros_dofkit.ros.estimator_messages import robot_description_text

    text = (MODELS_DIR / "arm7.urdf").read_text()
    assert robot_description_text([ModelSpec("arm7.urdf")]) == text
    assert robot_description_text([ModelSpec(text)]) == text
    merged = robot_description_text([ModelSpec("mobile_base.urdf", "base", "planar"),
                                     ModelSpec("arm7.urdf", "arm", "fixed", "arm_mount")])
    # An independent reading: the package's URDF parser sees one tree holding both robots' links.
    model = parse_urdf(merged)
    assert model.root == "base_link" and {"arm_link0", "arm_link7", "arm_mount", "left_wheel"} <= set(model.links)
    assert 'name="arm_attachment"' in merged
    assert robot_description_text([ModelSpec("mobile_base.urdf"), ModelSpec("arm7.urdf", "arm")]) is None  # 2 roots


@pytest.mark.parametrize("indices", [[3, 4, 5, 6], [0], [2, 4, 5], [5, 4, 3], [1, 1, 2], [], [0, 1, 2, 3, 4, 5, 6, 7]])
def test_a_selection_is_a_slice_only_where_it_selects_what_its_indices_select(indices):
    """JointStateSelection.serialized's rows: a run of consecutive increasing indices becomes a slice, anything else
    stays an index array; either selects the entries the indices select, in their order."""
    values = np.arange(10.0, 18.0)
    indices = np.array(indices, dtype=np.int64)
    rows = _run_or_indices(indices)
    np.testing.assert_array_equal(values[rows], values[indices])
    consecutive = indices.size > 0 and all(b == a + 1 for a, b in zip(indices[:-1], indices[1:], strict=True))
    assert isinstance(rows, slice) == consecutive
