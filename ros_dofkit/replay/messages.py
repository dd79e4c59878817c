"""rosbags message objects of the types replay reads and writes, one at a time (the streaming path).

Where you are: ``ros_dofkit.replay``. Imports ``ros_dofkit.ros.bag_io`` (its typestore of ROS 2 message
definitions) and ``replay.setup`` (message type names). The batched path encodes whole topics with
``ros_dofkit.ros.cdr`` instead; both give the same bytes. Output stamps are the header stamps of the input that
completed the cycle (exact nanoseconds, as the node does).
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.estimator.inputs import nanoseconds_to_seconds, stamp_nanoseconds
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.replay.setup import CLOCK_MSGTYPE, JOINT_STATE_MSGTYPE
from ros_dofkit.ros.bag_io import make_typestore


def seconds(stamp_ns: int) -> float:
    return nanoseconds_to_seconds(stamp_ns)


def header_stamp_ns(message) -> int:
    """The header stamp in nanoseconds (``INVALID_STAMP_NS`` when nanosec >= 1e9: the estimator rejects it)."""
    stamp = message.header.stamp
    return stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec))

class MessageFactory:
    """rosbags message objects of the types the replay reads and writes."""

    def __init__(self, typestore=None):
        self.typestore = typestore if typestore is not None else make_typestore()
        types = self.typestore.types
        self._Time = types["builtin_interfaces/msg/Time"]
        self._Header = types["std_msgs/msg/Header"]
        self._JointState = types[JOINT_STATE_MSGTYPE]
        self._Clock = types[CLOCK_MSGTYPE]
        self._TFMessage = types["tf2_msgs/msg/TFMessage"]
        self._TransformStamped = types["geometry_msgs/msg/TransformStamped"]
        self._Transform = types["geometry_msgs/msg/Transform"]
        self._Vector3 = types["geometry_msgs/msg/Vector3"]
        self._Quaternion = types["geometry_msgs/msg/Quaternion"]
        self._Odometry = types["nav_msgs/msg/Odometry"]
        self._PoseWithCovariance = types["geometry_msgs/msg/PoseWithCovariance"]
        self._Pose = types["geometry_msgs/msg/Pose"]
        self._Point = types["geometry_msgs/msg/Point"]
        self._TwistWithCovariance = types["geometry_msgs/msg/TwistWithCovariance"]
        self._Twist = types["geometry_msgs/msg/Twist"]
        self._Float64MultiArray = types["std_msgs/msg/Float64MultiArray"]
        self._MultiArrayLayout = types["std_msgs/msg/MultiArrayLayout"]
        self._MultiArrayDimension = types["std_msgs/msg/MultiArrayDimension"]

    def time(self, stamp_ns: int):
        return self._Time(sec=int(stamp_ns // 1_000_000_000), nanosec=int(stamp_ns % 1_000_000_000))

    def header(self, stamp_ns: int, frame_id: str = ""):
        return self._Header(stamp=self.time(stamp_ns), frame_id=frame_id)

    def joint_state(self, stamp_ns: int, names, positions, velocities=None):
        # The CDR serializer needs contiguous float64 arrays (a row of a column selection is not).
        positions = np.ascontiguousarray(positions, dtype=np.float64)
        velocities = np.zeros(0) if velocities is None else np.ascontiguousarray(velocities, dtype=np.float64)
        return self._JointState(header=self.header(stamp_ns), name=list(names), position=positions,
                                velocity=velocities, effort=np.zeros(0))

    def clock(self, stamp_ns: int):
        return self._Clock(clock=self.time(stamp_ns))

    def tf_message(self, stamp_ns: int, parents, children, X_PC, quaternions=None):
        """TFMessage of one transform per (parent frame, child frame, X_PC) with ``X_PC`` (n, 4, 4);
        ``quaternions`` (n, 4) (w, x, y, z) of their rotations when already known (else computed, in one batch)."""
        if quaternions is None:
            quaternions = matrix_to_quat(X_PC[:, :3, :3]) if len(X_PC) else np.zeros((0, 4))
        Vector3, Quaternion, Transform = self._Vector3, self._Quaternion, self._Transform
        header = self.header
        transforms = []
        for parent, child, X, (w, x, y, z) in zip(parents, children, X_PC.tolist(), quaternions.tolist(),
                                                  strict=True):
            transforms.append(self._TransformStamped(
                header=header(stamp_ns, parent), child_frame_id=child,
                transform=Transform(translation=Vector3(x=X[0][3], y=X[1][3], z=X[2][3]),
                                    rotation=Quaternion(x=x, y=y, z=z, w=w))))
        return self._TFMessage(transforms=transforms)

    def odometry(self, stamp_ns: int, odom_frame: str, child_frame: str, X_WB, v_B, w_B, covariance=None):
        """nav_msgs/Odometry: pose of B in the odometry frame, twist ``v_B``, ``w_B`` expressed in B (REP-105 child
        frame); ``covariance`` an ``odometry.OdometryCovariance`` (None: zeros)."""
        pose_covariance = np.zeros(36) if covariance is None else np.ascontiguousarray(covariance.pose).reshape(36)
        twist_covariance = np.zeros(36) if covariance is None else np.ascontiguousarray(covariance.twist).reshape(36)
        w, x, y, z = matrix_to_quat(X_WB[:3, :3])
        pose = self._Pose(position=self._Point(x=float(X_WB[0, 3]), y=float(X_WB[1, 3]), z=float(X_WB[2, 3])),
                          orientation=self._Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)))
        twist = self._Twist(linear=self._Vector3(x=float(v_B[0]), y=float(v_B[1]), z=float(v_B[2])),
                            angular=self._Vector3(x=float(w_B[0]), y=float(w_B[1]), z=float(w_B[2])))
        return self._Odometry(header=self.header(stamp_ns, odom_frame), child_frame_id=child_frame,
                              pose=self._PoseWithCovariance(pose=pose, covariance=pose_covariance),
                              twist=self._TwistWithCovariance(twist=twist, covariance=twist_covariance))

    def float_array(self, label: str, values):
        values = np.ascontiguousarray(values, dtype=np.float64)
        dimension = self._MultiArrayDimension(label=label, size=values.size, stride=values.size)
        return self._Float64MultiArray(layout=self._MultiArrayLayout(dim=[dimension], data_offset=0), data=values)
