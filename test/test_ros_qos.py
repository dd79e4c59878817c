"""ros_dofkit.ros.qos: default profiles, per-topic overrides through parameters, incompatible-QoS counting.

In-process (one context, real DDS matching): a reliable subscription and a best-effort publisher can never
match, and each side's QosEventMonitor must count exactly that one incompatible peer.
"""

from __future__ import annotations

import pytest
from rclpy.parameter import Parameter
from rclpy.qos import (
    QoSDurabilityPolicy,
    QoSProfile,
    QoSReliabilityPolicy,
    qos_profile_sensor_data,
)
from sensor_msgs.msg import Imu

from ros_dofkit.ros.qos import (
    QosEventMonitor,
    QosOverrideError,
    create_input_subscription,
    create_output_publisher,
    output_qos,
    sensor_input_qos,
    tf_qos,
    tf_static_qos,
)

pytestmark = pytest.mark.ros


def test_default_profiles():
    assert sensor_input_qos() == qos_profile_sensor_data
    assert sensor_input_qos().reliability == QoSReliabilityPolicy.BEST_EFFORT
    assert output_qos().reliability == QoSReliabilityPolicy.RELIABLE and output_qos().depth == 10
    assert tf_qos().depth == 100 and tf_qos().durability == QoSDurabilityPolicy.VOLATILE
    assert tf_static_qos().durability == QoSDurabilityPolicy.TRANSIENT_LOCAL and tf_static_qos().depth == 1


@pytest.mark.parametrize("depth", [0, -3, 2.5, True, "10"])
def test_output_qos_rejects_bad_depth(depth):
    with pytest.raises(ValueError, match="positive integer depth"):
        output_qos(depth)


def test_monitor_requires_a_node():
    with pytest.raises(TypeError, match="expected an rclpy Node, got str"):
        QosEventMonitor("node")


def make_node(ros_node, name, overrides=()):
    return ros_node.create_node(name, parameter_overrides=list(overrides))


def test_input_qos_is_overridden_by_parameter(ros_node):
    node = make_node(
        ros_node, "qos_override_probe",
        [Parameter("qos_overrides./qos_test/in.subscription.reliability", value="reliable"),
         Parameter("qos_overrides./qos_test/in.subscription.depth", value=42)],
    )
    monitor = QosEventMonitor(node)
    overridden = create_input_subscription(node, Imu, "/qos_test/in", lambda message: None, monitor)
    default = create_input_subscription(node, Imu, "/qos_test/other", lambda message: None, monitor)
    assert overridden.qos_profile.reliability == QoSReliabilityPolicy.RELIABLE
    assert overridden.qos_profile.depth == 42
    assert default.qos_profile.reliability == QoSReliabilityPolicy.BEST_EFFORT
    assert default.qos_profile.depth == qos_profile_sensor_data.depth


def test_invalid_override_is_rejected(ros_node):
    node = make_node(
        ros_node, "qos_bad_override_probe",
        [Parameter("qos_overrides./qos_test/bad.subscription.reliability", value="sometimes")],
    )
    with pytest.raises(QosOverrideError, match=r"'/qos_test/bad'.*sometimes.*reliable, best_effort"):
        create_input_subscription(node, Imu, "/qos_test/bad", lambda message: None, QosEventMonitor(node))


def test_incompatible_peers_are_counted_on_both_sides(ros_node):
    subscriber = make_node(ros_node, "qos_reliable_subscriber")
    publisher_node = make_node(ros_node, "qos_best_effort_publisher")
    subscriber_events = QosEventMonitor(subscriber)
    publisher_events = QosEventMonitor(publisher_node)
    create_input_subscription(
        subscriber, Imu, "/qos_test/imu", lambda message: None, subscriber_events,
        qos=QoSProfile(depth=5, reliability=QoSReliabilityPolicy.RELIABLE),
    )
    create_output_publisher(
        publisher_node, Imu, "/qos_test/imu", publisher_events,
        qos=QoSProfile(depth=5, reliability=QoSReliabilityPolicy.BEST_EFFORT),
    )
    ros_node.spin_until(
        lambda: subscriber_events.counts["/qos_test/imu"] >= 1 and publisher_events.counts["/qos_test/imu"] >= 1,
        lambda: f"incompatible-QoS events on both sides (counts {subscriber_events.counts}, {publisher_events.counts})",
    )
    assert subscriber_events.counts == {"/qos_test/imu": 1}
    assert publisher_events.counts == {"/qos_test/imu": 1}
