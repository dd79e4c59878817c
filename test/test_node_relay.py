"""Real cross-process ROS 2 test of the harness and the plumbing: the ``dofkit_relay`` console script.

The test process publishes tf2_msgs/TFMessage and sensor_msgs/Imu; ``dofkit_relay``, started as a separate
process through DDS, prefixes their frame ids and re-publishes them; the test checks every value that comes back,
the locally built tf2_msgs' type hash against upstream's, QoS overrides and incompatible-QoS reporting, and that
the relay shuts down cleanly on SIGINT.
"""

from __future__ import annotations

import re

import pytest
from geometry_msgs.msg import TransformStamped
from rclpy.qos import QoSProfile, QoSReliabilityPolicy
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import Imu
from tf2_msgs.msg import TFMessage

from ros_dofkit.ros.qos import output_qos, tf_qos

pytestmark = pytest.mark.ros

PREFIX = "robot_1/"
TOPICS = {"tf_in": "/relay_test/tf_in", "imu_in": "/relay_test/imu_in",
          "tf_out": "/relay_test/tf_out", "imu_out": "/relay_test/imu_out"}
REMAPS = [arg for internal, external in TOPICS.items() for arg in ("-r", f"{internal}:={external}")]
BEST_EFFORT = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.BEST_EFFORT)


def make_tf(index: int) -> TFMessage:
    """Two transforms whose every field depends on ``index`` (stamps, frames, translation, unit quaternion)."""
    transforms = []
    for j, (parent, child) in enumerate((("world", "pelvis"), ("pelvis", "thigh_l"))):
        t = TransformStamped()
        t.header.stamp.sec = 1_700_000_000 + index
        t.header.stamp.nanosec = 1_000 * index + j
        t.header.frame_id = parent
        t.child_frame_id = child
        t.transform.translation.x = 0.1 * index + j
        t.transform.translation.y = -2.5e-3 * index
        t.transform.translation.z = 1.0 / (index + 3.0)
        # (w, x, y, z) = (0.5, 0.5, -0.5, 0.5) and (0.6, 0, 0.8, 0): exactly representable, unit.
        w, x, y, z = ((0.5, 0.5, -0.5, 0.5), (0.6, 0.0, 0.8, 0.0))[(index + j) % 2]
        t.transform.rotation.w, t.transform.rotation.x = w, x
        t.transform.rotation.y, t.transform.rotation.z = y, z
        transforms.append(t)
    return TFMessage(transforms=transforms)


def make_imu(index: int) -> Imu:
    imu = Imu()
    imu.header.stamp.sec = 1_700_000_000 + index
    imu.header.stamp.nanosec = 500_000_000 + index
    imu.header.frame_id = "imu_link"
    imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = 0.6, 0.0, 0.0, -0.8
    imu.orientation_covariance = [1e-4 * index, 0.0, 0.0, 0.0, 2e-4, 0.0, 0.0, 0.0, 3e-4]
    imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = 0.01 * index, -1.5, 3.25
    imu.angular_velocity_covariance[0] = -1.0  # "no estimate" marker must survive the trip
    imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = 0.0, 0.1 * index, 9.81
    return imu


def expected_tf(index: int) -> TFMessage:
    message = make_tf(index)
    for t in message.transforms:
        t.header.frame_id = PREFIX + t.header.frame_id
        t.child_frame_id = PREFIX + t.child_frame_id
    return message


def expected_imu(index: int) -> Imu:
    message = make_imu(index)
    message.header.frame_id = PREFIX + message.header.frame_id
    return message


def stamp_of(message):
    return message.transforms[0].header.stamp if isinstance(message, TFMessage) else message.header.stamp


def relay_round_trip(ros_node, publisher, collector, make, count: int) -> list:
    """Warm up until the whole path publishes through, then send ``count`` messages one at a time.

    Warm-up messages are ``make(0)``; a late one may still arrive after the first, always before the test
    messages (one writer, in order), so everything up to the last warm-up message is dropped.
    """
    ros_node.wait_for_subscriptions(publisher)
    ros_node.wait_for_publishers(collector)
    # Matches seen from this side do not prove the relay has matched us back: publish until one returns.
    warmup = make(0)
    ros_node.wait_for_messages(collector, 1, every=lambda: publisher.publish(warmup))

    def after_warmup() -> list:
        stamps = [stamp_of(message) for message in collector.messages]
        last_warmup = max((i for i, stamp in enumerate(stamps) if stamp == stamp_of(warmup)), default=-1)
        return collector.messages[last_warmup + 1:]

    for index in range(1, count + 1):
        publisher.publish(make(index))
        ros_node.spin_until(
            lambda n=index: len(after_warmup()) >= n, lambda n=index: f"message {n} back from the relay"
        )
    return after_warmup()


def test_relay_forwards_tf_and_imu_across_processes(ros_node, ros_processes, tmp_path):
    params = tmp_path / "relay.yaml"
    params.write_text(f"dofkit_relay:\n  ros__parameters:\n    frame_prefix: '{PREFIX}'\n")
    relay = ros_processes.start("dofkit_relay", "--ros-args", "--params-file", str(params), *REMAPS)

    # TF in best effort, IMU reliable: the relay's SensorDataQoS inputs must accept both.
    tf_publisher = ros_node.create_publisher(TFMessage, TOPICS["tf_in"], BEST_EFFORT)
    imu_publisher = ros_node.create_publisher(Imu, TOPICS["imu_in"], 10)
    tf_received = ros_node.collect(TFMessage, TOPICS["tf_out"], tf_qos())
    imu_received = ros_node.collect(Imu, TOPICS["imu_out"], output_qos())

    count = 5
    tf_messages = relay_round_trip(ros_node, tf_publisher, tf_received, make_tf, count)
    imu_messages = relay_round_trip(ros_node, imu_publisher, imu_received, make_imu, count)

    assert tf_messages == [expected_tf(i) for i in range(1, count + 1)]
    assert imu_messages == [expected_imu(i) for i in range(1, count + 1)]
    # Spot checks that do not rely on the generated __eq__:
    assert tf_messages[2].transforms[1].child_frame_id == "robot_1/thigh_l"
    assert tf_messages[2].transforms[1].transform.translation.x == 0.1 * 3 + 1
    assert imu_messages[4].angular_velocity_covariance[0] == -1.0
    assert imu_messages[4].header.stamp.nanosec == 500_000_005

    assert relay.is_running()
    assert relay.stop() == 0, relay.output()


def test_locally_built_tf2_msgs_has_upstream_type_hash(ros_node, ros_processes):
    ros_processes.start("dofkit_relay", "--ros-args", *REMAPS)
    collector = ros_node.collect(TFMessage, TOPICS["tf_out"], tf_qos())
    ros_node.wait_for_publishers(collector)

    (endpoint,) = ros_node.node.get_publishers_info_by_topic(TOPICS["tf_out"])
    assert endpoint.topic_type == "tf2_msgs/msg/TFMessage"
    upstream = get_typestore(Stores.ROS2_JAZZY).hash_rihs01("tf2_msgs/msg/TFMessage")
    assert str(endpoint.topic_type_hash) == upstream


def test_qos_override_and_incompatible_qos_is_logged(ros_node, ros_processes):
    relay = ros_processes.start(
        "dofkit_relay", "--ros-args", *REMAPS,
        "-p", f"qos_overrides.{TOPICS['imu_in']}.subscription.reliability:=reliable",
    )
    # The override made the relay's IMU input reliable, which a best-effort publisher can never satisfy.
    best_effort_imu = ros_node.create_publisher(Imu, TOPICS["imu_in"], BEST_EFFORT)
    relay.wait_for_output(rf"incompatible QoS on subscription '{TOPICS['imu_in']}'.*RELIABILITY")
    assert best_effort_imu.get_subscription_count() == 0

    # A reliable publisher matches the overridden input, and messages flow.
    reliable_imu = ros_node.create_publisher(Imu, TOPICS["imu_in"], 10)
    received = ros_node.collect(Imu, TOPICS["imu_out"], output_qos())
    (message,) = relay_round_trip(ros_node, reliable_imu, received, make_imu, 1)
    assert message.header.frame_id == "imu_link"  # no prefix configured

    # The TF input kept the default best-effort profile: no incompatibility was reported for it.
    assert f"'{TOPICS['tf_in']}'" not in relay.output()
    assert relay.stop() == 0, relay.output()


def test_invalid_qos_override_stops_the_relay_with_a_clear_error(ros_processes):
    relay = ros_processes.start(
        "dofkit_relay", "--ros-args", *REMAPS,
        "-p", f"qos_overrides.{TOPICS['tf_in']}.subscription.durability:=forever",
    )
    assert relay.wait_for_exit(timeout=30) == 2
    assert re.search(rf"FATAL.*'{TOPICS['tf_in']}'.*forever.*Valid values", relay.output()), relay.output()
