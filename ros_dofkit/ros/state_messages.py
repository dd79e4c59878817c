"""Core state types <-> ROS 2 messages: JointState, Pose, Twist, TransformStamped, Odometry.

Where you are: ``ros_dofkit.ros`` -- the ROS edge. The core (``ros_dofkit.core.state``) works on plain arrays:
:class:`~ros_dofkit.core.state.JointStateArrays` and :class:`~ros_dofkit.core.state.BasePoseTwist` (pose X_WB,
twist V_WB in W, quaternion (w, x, y, z)). Here they become messages; quaternions are (x, y, z, w) in messages.

Conventions (SPEC 9.7, REP-105, nav_msgs/Odometry's own comment):

* ``geometry_msgs/Pose`` of a floating base: position ``p_WBo_W``, orientation ``R_WB``.
* ``geometry_msgs/Twist`` from :func:`twist_msg_from_base` is ``V_WB`` expressed in W (Drake's translator).
* ``nav_msgs/Odometry``: ``header.frame_id`` = the odometry (world) frame, ``child_frame_id`` = the base link;
  the pose is in the header frame, the twist in the **child** frame (both linear and angular parts).
* ``geometry_msgs/TransformStamped`` parent = header.frame_id, child = child_frame_id, transform = X_parent_child.

Message arrays are validated by the core types: a malformed JointState raises
:class:`~ros_dofkit.core.state.JointStateMessageError`, a bad quaternion
:class:`~ros_dofkit.core.spatial.QuaternionError`. Single messages only: a batched ``BasePoseTwist`` is rejected.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Transform, TransformStamped, Twist, Vector3
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState

from ros_dofkit.core.state import BasePoseTwist, JointStateArrays, StateDimensionError


def _stamp(stamp) -> Time:
    if stamp is None:
        return Time()
    if isinstance(stamp, Time):
        return stamp
    raise TypeError(f"stamp must be a builtin_interfaces.msg.Time or None, got {type(stamp).__name__}")


def _single(base: BasePoseTwist) -> BasePoseTwist:
    if not isinstance(base, BasePoseTwist):
        raise TypeError(f"expected a BasePoseTwist, got {type(base).__name__}")
    if base.p_WBo_W.shape != (3,):
        raise StateDimensionError(f"one message holds one base state; got a batch of shape {base.p_WBo_W.shape[:-1]}")
    return base


def _xyz(vector) -> tuple[float, float, float]:
    return float(vector[0]), float(vector[1]), float(vector[2])


# ----- JointState ------------------------------------------------------------------------------------------
def joint_state_arrays_from_msg(msg: JointState) -> JointStateArrays:
    """The names and arrays of a ``sensor_msgs/JointState`` (header dropped), validated (SPEC 9.9)."""
    if not isinstance(msg, JointState):
        raise TypeError(f"expected a sensor_msgs.msg.JointState, got {type(msg).__name__}")
    return JointStateArrays(list(msg.name), msg.position, msg.velocity, msg.effort)


def joint_state_msg_from_arrays(arrays: JointStateArrays, stamp=None, frame_id: str = "") -> JointState:
    """A ``sensor_msgs/JointState`` with ``arrays``' names and values (empty arrays stay empty)."""
    if not isinstance(arrays, JointStateArrays):
        raise TypeError(f"expected a JointStateArrays, got {type(arrays).__name__}")
    msg = JointState()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.name = list(arrays.name)
    msg.position = array.array("d", arrays.position)
    msg.velocity = array.array("d", arrays.velocity)
    msg.effort = array.array("d", arrays.effort)
    return msg


# ----- floating base ---------------------------------------------------------------------------------------
def pose_msg_from_base(base: BasePoseTwist) -> Pose:
    """``geometry_msgs/Pose`` of ``X_WB``."""
    position, quat_xyzw = _single(base).ros_pose()
    pose = Pose()
    pose.position = Point(x=float(position[0]), y=float(position[1]), z=float(position[2]))
    pose.orientation = Quaternion(
        x=float(quat_xyzw[0]), y=float(quat_xyzw[1]), z=float(quat_xyzw[2]), w=float(quat_xyzw[3])
    )
    return pose


def _pose_arrays(pose: Pose) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(pose, Pose):
        raise TypeError(f"expected a geometry_msgs.msg.Pose, got {type(pose).__name__}")
    position = np.array([pose.position.x, pose.position.y, pose.position.z])
    quat_xyzw = np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w])
    return position, quat_xyzw


def twist_msg(linear, angular) -> Twist:
    """``geometry_msgs/Twist`` of two 3-vectors (linear, angular), in whatever frame they are expressed in."""
    twist = Twist()
    twist.linear = Vector3(x=float(linear[0]), y=float(linear[1]), z=float(linear[2]))
    twist.angular = Vector3(x=float(angular[0]), y=float(angular[1]), z=float(angular[2]))
    return twist


def _twist_arrays(twist: Twist) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(twist, Twist):
        raise TypeError(f"expected a geometry_msgs.msg.Twist, got {type(twist).__name__}")
    linear = np.array([twist.linear.x, twist.linear.y, twist.linear.z])
    angular = np.array([twist.angular.x, twist.angular.y, twist.angular.z])
    return linear, angular


def twist_msg_from_base(base: BasePoseTwist, frame: str = "world") -> Twist:
    """``geometry_msgs/Twist`` of the base: ``V_WB`` expressed in W (``frame="world"``) or in B (``"child"``)."""
    base = _single(base)
    if frame == "world":
        return twist_msg(*base.world_twist())
    if frame == "child":
        return twist_msg(*base.child_twist())
    raise ValueError(f"frame must be 'world' or 'child', got {frame!r}")


def base_from_pose_msg(pose: Pose, twist: Twist | None = None, twist_frame: str = "world") -> BasePoseTwist:
    """A ``BasePoseTwist`` from a Pose and an optional Twist expressed in W (``"world"``) or B (``"child"``)."""
    position, quat_xyzw = _pose_arrays(pose)
    if twist is None:
        return BasePoseTwist.from_ros(position, quat_xyzw)
    linear, angular = _twist_arrays(twist)
    return BasePoseTwist.from_ros(position, quat_xyzw, linear, angular, twist_frame=twist_frame)


def transform_stamped_from_base(
    base: BasePoseTwist, parent_frame: str, child_frame: str, stamp=None
) -> TransformStamped:
    """``geometry_msgs/TransformStamped`` of ``X_WB`` (parent = W's frame id, child = the base link) for TF."""
    position, quat_xyzw = _single(base).ros_pose()
    msg = TransformStamped()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = parent_frame
    msg.child_frame_id = child_frame
    msg.transform = Transform(
        translation=Vector3(x=float(position[0]), y=float(position[1]), z=float(position[2])),
        rotation=Quaternion(x=float(quat_xyzw[0]), y=float(quat_xyzw[1]), z=float(quat_xyzw[2]), w=float(quat_xyzw[3])),
    )
    return msg


def odometry_msg_from_base(
    base: BasePoseTwist,
    odom_frame: str,
    base_frame: str,
    stamp=None,
    pose_covariance=None,
    twist_covariance=None,
) -> Odometry:
    """``nav_msgs/Odometry``: pose ``X_WB`` in ``odom_frame``, twist in the child frame ``base_frame``.

    Covariances are row-major 6x6 (36 values) in the order (x, y, z, rot x, rot y, rot z); default zeros.
    """
    base = _single(base)
    msg = Odometry()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = odom_frame
    msg.child_frame_id = base_frame
    msg.pose.pose = pose_msg_from_base(base)
    msg.twist.twist = twist_msg(*base.child_twist())
    for label, value, target in (
        ("pose_covariance", pose_covariance, msg.pose),
        ("twist_covariance", twist_covariance, msg.twist),
    ):
        if value is not None:
            covariance = np.asarray(value, dtype=float).reshape(-1)
            if covariance.size != 36:
                raise StateDimensionError(f"{label}: expected 36 values (6x6 row-major), got {covariance.size}")
            target.covariance = covariance
    return msg


def base_from_odometry_msg(msg: Odometry) -> BasePoseTwist:
    """Inverse of :func:`odometry_msg_from_base`: the twist is read as expressed in the child frame."""
    if not isinstance(msg, Odometry):
        raise TypeError(f"expected a nav_msgs.msg.Odometry, got {type(msg).__name__}")
    return base_from_pose_msg(msg.pose.pose, msg.twist.twist, twist_frame="child")


__all__ = [
    "base_from_odometry_msg",
    "base_from_pose_msg",
    "joint_state_arrays_from_msg",
    "joint_state_msg_from_arrays",
    "odometry_msg_from_base",
    "pose_msg_from_base",
    "transform_stamped_from_base",
    "twist_msg",
    "twist_msg_from_base",
]
