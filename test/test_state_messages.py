"""Tests of ros_dofkit.ros.state_messages with real ROS 2 message objects (no DDS needed)."""

import numpy as np
import pytest

pytest.importorskip("sensor_msgs.msg")
pytest.importorskip("nav_msgs.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import Pose  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ros_dofkit.core.multibody import MultibodyPlant  # noqa: E402
from ros_dofkit.core.spatial import QuaternionError  # noqa: E402
from ros_dofkit.core.state import (  # noqa: E402
    BasePoseTwist,
    JointStateArrays,
    JointStateMessageError,
    JointStateTranslator,
    StateDimensionError,
)
from ros_dofkit.ros.state_messages import (  # noqa: E402
    base_from_odometry_msg,
    base_from_pose_msg,
    joint_state_arrays_from_msg,
    joint_state_msg_from_arrays,
    odometry_msg_from_base,
    pose_msg_from_base,
    transform_stamped_from_base,
    twist_msg_from_base,
)

WALKER_URDF = """<robot name="walker">
  <link name="pelvis"/><link name="thigh"/><link name="shin"/>
  <joint name="hip" type="revolute"><parent link="pelvis"/><child link="thigh"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="5"/></joint>
  <joint name="knee" type="revolute"><parent link="thigh"/><child link="shin"/>
    <origin xyz="0 0 -0.4" rpy="0 0 0"/><axis xyz="0 1 0"/><limit lower="0" upper="2" effort="10" velocity="5"/></joint>
</robot>"""


def yawed_base(yaw=0.7, speed=2.0, yaw_rate=0.3):
    """A base yawed by ``yaw`` moving along its own x axis at ``speed`` while turning at ``yaw_rate``."""
    return BasePoseTwist(
        [5.0, -1.0, 0.2],
        [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)],
        [0.0, 0.0, yaw_rate],
        [speed * np.cos(yaw), speed * np.sin(yaw), 0.0],
    )


def test_joint_state_round_trip_through_a_message():
    arrays = JointStateArrays(["hip", "knee", "extra"], [0.1, 0.2, 0.3], [1.0, 2.0, 3.0], [])
    msg = joint_state_msg_from_arrays(arrays, stamp=Time(sec=12, nanosec=5), frame_id="")
    assert isinstance(msg, JointState)
    assert msg.header.stamp.sec == 12 and msg.header.stamp.nanosec == 5
    assert list(msg.name) == ["hip", "knee", "extra"]
    assert list(msg.position) == [0.1, 0.2, 0.3] and len(msg.effort) == 0
    assert joint_state_arrays_from_msg(msg) == arrays


def test_translator_end_to_end_with_messages():
    plant = MultibodyPlant()
    plant.add_urdf(WALKER_URDF, base_joint="floating")
    plant.finalize()
    translator = JointStateTranslator(plant)
    q = plant.default_positions()
    q[7:] = [0.3, 0.9]
    v = np.arange(8.0)
    msg = joint_state_msg_from_arrays(translator.encode_kinematics(q, v))
    assert list(msg.name) == ["hip", "knee"]
    q_dec, v_dec = translator.decode_kinematics(joint_state_arrays_from_msg(msg), np.zeros(9), np.zeros(8))
    np.testing.assert_array_equal(q_dec[7:], [0.3, 0.9])
    np.testing.assert_array_equal(v_dec[6:], [6.0, 7.0])
    odom = odometry_msg_from_base(translator.encode_base(q, v), "odom", "pelvis")
    np.testing.assert_allclose(
        [odom.twist.twist.angular.x, odom.twist.twist.angular.y, odom.twist.twist.angular.z], v[:3]
    )  # identity orientation: child-frame twist equals the world-frame one


def test_malformed_joint_state_message_is_rejected():
    msg = JointState()
    msg.name = ["hip", "knee"]
    msg.position = [0.1, 0.2]
    msg.velocity = [1.0]
    with pytest.raises(JointStateMessageError, match="velocity has 1 entries but name has 2"):
        joint_state_arrays_from_msg(msg)
    msg.velocity = []
    msg.name = ["hip", "hip"]
    with pytest.raises(JointStateMessageError, match="duplicated"):
        joint_state_arrays_from_msg(msg)
    with pytest.raises(TypeError, match="JointState"):
        joint_state_arrays_from_msg(Pose())


def test_odometry_twist_is_in_the_child_frame():
    base = yawed_base()
    msg = odometry_msg_from_base(base, "odom", "base_link", stamp=Time(sec=3))
    assert (msg.header.frame_id, msg.child_frame_id, msg.header.stamp.sec) == ("odom", "base_link", 3)
    twist = msg.twist.twist
    np.testing.assert_allclose([twist.linear.x, twist.linear.y, twist.linear.z], [2.0, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose([twist.angular.x, twist.angular.y, twist.angular.z], [0.0, 0.0, 0.3], atol=1e-15)
    o = msg.pose.pose.orientation
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], [0.0, 0.0, np.sin(0.35), np.cos(0.35)], atol=1e-15)
    p = msg.pose.pose.position
    assert (p.x, p.y, p.z) == (5.0, -1.0, 0.2)
    back = base_from_odometry_msg(msg)
    np.testing.assert_allclose(back.base_positions, base.base_positions, atol=1e-15)
    np.testing.assert_allclose(back.base_velocities, base.base_velocities, atol=1e-15)
    covariance = np.diag(np.arange(1.0, 7.0))
    with_cov = odometry_msg_from_base(base, "odom", "base_link", pose_covariance=covariance)
    np.testing.assert_array_equal(np.asarray(with_cov.pose.covariance).reshape(6, 6), covariance)
    with pytest.raises(StateDimensionError, match="36 values"):
        odometry_msg_from_base(base, "odom", "base_link", twist_covariance=np.zeros(6))


def test_world_twist_pose_and_transform():
    base = yawed_base()
    world = twist_msg_from_base(base)
    np.testing.assert_allclose([world.linear.x, world.linear.y], [2.0 * np.cos(0.7), 2.0 * np.sin(0.7)])
    child = twist_msg_from_base(base, "child")
    assert child.linear.x == pytest.approx(2.0) and abs(child.linear.y) < 1e-15
    pose = pose_msg_from_base(base)
    again = base_from_pose_msg(pose, world, twist_frame="world")
    np.testing.assert_allclose(again.base_velocities, base.base_velocities, atol=1e-15)
    again_child = base_from_pose_msg(pose, child, twist_frame="child")
    np.testing.assert_allclose(again_child.base_velocities, base.base_velocities, atol=1e-15)
    tf = transform_stamped_from_base(base, "odom", "base_link", Time(sec=1))
    assert (tf.header.frame_id, tf.child_frame_id) == ("odom", "base_link")
    r = tf.transform.rotation
    assert (r.x, r.y, r.z, r.w) == (pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w)
    assert tf.transform.translation.x == 5.0
    with pytest.raises(ValueError, match="'world' or 'child'"):
        twist_msg_from_base(base, "body")


def test_bad_inputs_at_the_edge():
    pose = Pose()
    pose.orientation.w = 0.0  # all-zero quaternion
    with pytest.raises(QuaternionError):
        base_from_pose_msg(pose)
    pose.orientation.w = 1.0004  # within tolerance: normalized
    np.testing.assert_allclose(base_from_pose_msg(pose).quat_WB, [1.0, 0.0, 0.0, 0.0], atol=1e-15)
    batch = BasePoseTwist(np.zeros((2, 3)), [1.0, 0.0, 0.0, 0.0])
    with pytest.raises(StateDimensionError, match="batch of shape \\(2,\\)"):
        pose_msg_from_base(batch)
    with pytest.raises(TypeError, match="Time"):
        odometry_msg_from_base(yawed_base(), "odom", "base_link", stamp=1.5)
