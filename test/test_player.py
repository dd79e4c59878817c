"""``dofkit play`` over real DDS: the bag's messages arrive unchanged at the recorded pace, /clock follows the
bag time, looping sends the clock back once per restart, and bad bags are refused with the reason."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ros_dofkit import cli

pytest.importorskip("rclpy")


@pytest.fixture(scope="module")
def demo_bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("play") / "demo"
    assert cli.main(["record", str(path), "--duration", "1", "--clock", "--config-out", ""]) == 0
    return path


def collect(ros_node, topics):
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu, JointState

    types = {"/clock": Clock, "/joint_states": JointState}
    return {topic: ros_node.collect(types.get(topic, Imu), topic, 1000) for topic in topics}


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def test_play_publishes_the_bag_unchanged_with_clock(demo_bag, ros_node, ros_processes):
    """Every message of the played topics arrives, the first and the last included.

    A subscription matches a publisher a little after the publisher matches it, and a message sent in between is
    lost to it; the player cannot see the subscriber's side. So the test opens a gate only once its own
    subscriptions have matched the player's publishers: a third played topic that the player waits for and that
    the test subscribes to last. The last messages are the player's to deliver: it waits for acknowledgements
    before exiting.
    """
    from ros_dofkit.ros.bag_io import read_bag

    topics = ["/imu/hand/data", "/joint_states"]
    gate = "/imu/wrist/data"
    collectors = collect(ros_node, [*topics, "/clock"])
    process = ros_processes.start("dofkit", "play", str(demo_bag), "--topics", *topics, gate, "--quiet",
                                  "--wait-for-subscribers", *topics, gate)
    for topic in [*topics, "/clock"]:
        ros_node.wait_for_publishers(collectors[topic], timeout=30.0)
    collectors.update(collect(ros_node, [gate]))
    expected = {topic: [r.message for r in read_bag(demo_bag, topics=[topic])] for topic in [*topics, gate]}
    ros_node.spin_until(
        lambda: all(len(collectors[t]) >= len(expected[t]) for t in topics),
        lambda: f"all messages ({ {t: (len(collectors[t]), len(expected[t])) for t in topics} })",
        timeout=30.0,
    )
    assert process.wait_for_exit(timeout=10.0) == 0
    assert "played" in process.output()
    imu_received = collectors["/imu/hand/data"].messages
    imu_expected = expected["/imu/hand/data"]
    assert [stamp_ns(m.header.stamp) for m in imu_received] == [stamp_ns(m.header.stamp) for m in imu_expected]
    for got, want in zip(imu_received, imu_expected, strict=True):
        assert (got.orientation.x, got.orientation.w) == (want.orientation.x, want.orientation.w)
        assert got.angular_velocity.z == want.angular_velocity.z
    joints = collectors["/joint_states"].messages
    assert list(joints[0].name) == list(expected["/joint_states"][0].name)
    np.testing.assert_array_equal(joints[-1].position, expected["/joint_states"][-1].position)
    # Every message was preceded by a clock at its bag time: one clock per distinct stamp, the last one last.
    stamps = {stamp_ns(m.header.stamp) for t in [*topics, gate] for m in expected[t]}
    ros_node.spin_until(lambda: len(collectors["/clock"]) >= len(stamps), "every /clock message", timeout=10.0)
    clock = [stamp_ns(m.clock) for m in collectors["/clock"].messages]
    assert clock == sorted(stamps)


SUBSCRIBER = """
import sys, rclpy
from sensor_msgs.msg import Imu
rclpy.init()
node = rclpy.create_node("stalled_subscriber")
node.create_subscription(Imu, sys.argv[1], lambda message: None, 1000)
print("subscribed", flush=True)
rclpy.spin(node)
"""


def test_the_player_reports_messages_a_subscriber_has_not_acknowledged(demo_bag, ros_node, ros_processes):
    """A stopped subscriber cannot acknowledge: the player names its topic at the deadline; once it runs again it
    acknowledges everything, and the player reports nothing."""
    import os
    import signal
    import sys

    from ros_dofkit.replay.player import BagPlayer
    from ros_dofkit.ros.bag_io import read_bag

    topic = "/imu/hand/data"
    player = BagPlayer(ros_node.node, demo_bag, rate=50.0, topics=[topic], publish_clock=False)
    subscriber = ros_processes.start(sys.executable, "-c", SUBSCRIBER, topic)
    subscriber.wait_for_output("subscribed", timeout=30.0)
    ros_node.wait_for_subscriptions(player.publishers[topic], timeout=30.0)
    time.sleep(1.0)  # the subscriber's side of the match
    os.kill(subscriber.pid, signal.SIGSTOP)
    try:
        stats = player.play()
        assert stats.published[topic] == len(list(read_bag(demo_bag, topics=[topic])))
        assert player.wait_for_acknowledgements(0.5) == [topic]
    finally:
        os.kill(subscriber.pid, signal.SIGCONT)
    assert player.wait_for_acknowledgements(20.0) == []


def test_play_refuses_a_negative_acknowledgement_timeout(demo_bag, capsys):
    assert cli.main(["play", str(demo_bag), "--ack-timeout", "-1"]) == 2
    assert "--ack-timeout" in capsys.readouterr().err


def test_looping_sends_the_clock_back_once_per_restart(demo_bag, ros_node, ros_processes):
    topics = ["/imu/forearm/data"]
    collectors = collect(ros_node, [*topics, "/clock"])
    process = ros_processes.start("dofkit", "play", str(demo_bag), "--topics", *topics, "--count", "2",
                                  "--rate", "4", "--quiet", "--wait-for-subscribers")  # any subscriber, then 1 s
    assert process.wait_for_exit(timeout=30.0) == 0
    ros_node.spin_until(lambda: len(collectors["/clock"]) > 0 and len(collectors[topics[0]]) >= 2 * 90,
                        "messages of two passes", timeout=10.0)
    clock = np.array([stamp_ns(m.clock) for m in collectors["/clock"].messages])
    jumps = np.flatnonzero(np.diff(clock) < 0)
    assert len(jumps) == 1
    assert clock[jumps[0] + 1] == clock[0]
    assert "2 pass(es)" in process.output()


def test_play_refuses_missing_and_damaged_bags(tmp_path, capsys):
    assert cli.main(["play", str(tmp_path / "missing")]) == 1
    assert "bag not found" in capsys.readouterr().err
    folder = tmp_path / "not_a_bag"
    folder.mkdir()
    assert cli.main(["play", str(folder)]) == 1
    assert "cannot read the bag" in capsys.readouterr().err


def test_play_rejects_unknown_topics(demo_bag, capsys):
    assert cli.main(["play", str(demo_bag), "--topics", "/imu/hnd/data"]) == 1
    err = capsys.readouterr().err
    assert "/imu/hnd/data" in err and "/imu/hand/data" in err
    assert cli.main(["play", str(demo_bag), "--topics", "/imu/hand/data", "--wait-for-subscribers",
                     "/joint_states"]) == 1
    assert "not played" in capsys.readouterr().err


def test_waiting_for_subscribers_times_out_with_the_topics_named(demo_bag, capsys):
    assert cli.main(["play", str(demo_bag), "--topics", "/imu/hand/data", "--wait-for-subscribers",
                     "/imu/hand/data", "--wait-timeout", "0.5"]) == 1
    err = capsys.readouterr().err
    assert "no subscriber on ['/imu/hand/data']" in err


def test_a_late_subscriber_gets_tf_static_from_play(tmp_path, ros_node, ros_processes):
    """/tf_static is published transient local (keep last 1): a tf2-style subscriber that starts after it was
    sent, while the player still runs, receives it."""
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from ros_dofkit.replay.messages import MessageFactory
    from ros_dofkit.ros.bag_io import write_bag
    from ros_dofkit.ros.qos import tf_static_qos

    factory = MessageFactory()
    X = np.eye(4)[None]
    records = [("/tf_static", 0, factory.tf_message(0, ["world"], ["table"], X))]
    records += [("/joint_states", k * 50_000_000, factory.joint_state(k * 50_000_000, ["j"], [0.1 * k]))
                for k in range(1, 80)]
    bag = tmp_path / "static"
    write_bag(bag, records)
    joints = ros_node.collect(JointState, "/joint_states", 100)
    ros_processes.start("dofkit", "play", str(bag), "--quiet", "--no-clock", "--wait-for-subscribers",
                        "/joint_states")
    ros_node.wait_for_messages(joints, 3, timeout=30)  # /tf_static went out before these
    late = ros_node.collect(TFMessage, "/tf_static", tf_static_qos())
    (message,) = ros_node.wait_for_messages(late, 1, timeout=10)
    assert [(t.header.frame_id, t.child_frame_id) for t in message.transforms] == [("world", "table")]
