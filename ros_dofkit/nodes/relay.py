"""``dofkit_relay``: re-publishes TF and IMU messages, with an optional frame prefix.

Where you are: a thin node (``ros_dofkit.nodes``). It exists to prove the plumbing every other node relies on —
console script start-up, parameters from ``--ros-args``, remapping, the project's QoS profiles and overrides,
message types including the locally built tf2_msgs, clean shutdown — in a real cross-process test
(test/test_node_relay.py). It is also a handy tool: it renames the frames of a recorded TF/IMU stream.

Topics (relative, so they follow the node's namespace and remapping):

* ``tf_in`` (tf2_msgs/TFMessage) -> ``tf_out``: every transform's ``header.frame_id`` and ``child_frame_id``
  get ``frame_prefix`` prepended;
* ``imu_in`` (sensor_msgs/Imu) -> ``imu_out``: ``header.frame_id`` gets ``frame_prefix`` prepended.

Everything else (stamps, values, covariances) is passed through unchanged. The prefix is a plain string
concatenation with no "/" inserted, as robot_state_publisher's ``frame_prefix``.
"""

from __future__ import annotations

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import Imu
from tf2_msgs.msg import TFMessage

from ros_dofkit.nodes.common import run_node
from ros_dofkit.ros.qos import (
    QosEventMonitor,
    create_input_subscription,
    create_output_publisher,
    tf_qos,
)

NODE_NAME = "dofkit_relay"


class RelayNode(Node):
    """Relays ``tf_in`` -> ``tf_out`` and ``imu_in`` -> ``imu_out``, prefixing frame ids (see module docstring)."""

    def __init__(self, **node_kwargs):
        super().__init__(NODE_NAME, **node_kwargs)
        self.frame_prefix: str = self.declare_parameter(
            "frame_prefix",
            "",
            ParameterDescriptor(
                description="String prepended to every frame id that passes through (no '/' is inserted).",
                read_only=True,
            ),
        ).get_parameter_value().string_value
        self.qos_events = QosEventMonitor(self)
        self._tf_publisher = create_output_publisher(self, TFMessage, "tf_out", self.qos_events, qos=tf_qos())
        self._imu_publisher = create_output_publisher(self, Imu, "imu_out", self.qos_events)
        create_input_subscription(self, TFMessage, "tf_in", self._on_tf, self.qos_events)
        create_input_subscription(self, Imu, "imu_in", self._on_imu, self.qos_events)
        self.get_logger().info(f"relaying tf_in -> tf_out and imu_in -> imu_out, frame_prefix='{self.frame_prefix}'")

    def _on_tf(self, message: TFMessage) -> None:
        for transform in message.transforms:
            transform.header.frame_id = self.frame_prefix + transform.header.frame_id
            transform.child_frame_id = self.frame_prefix + transform.child_frame_id
        self._tf_publisher.publish(message)

    def _on_imu(self, message: Imu) -> None:
        message.header.frame_id = self.frame_prefix + message.header.frame_id
        self._imu_publisher.publish(message)


def main(args: list[str] | None = None) -> int:
    """Console script entry point: ``dofkit_relay [--ros-args ...]``.

    Exits 0 on SIGINT/SIGTERM, 2 (with a fatal log line) when a QoS override parameter is invalid.
    """
    return run_node(RelayNode, NODE_NAME, args=args)


if __name__ == "__main__":
    raise SystemExit(main())
