"""Playing a bag over DDS with ``/clock``: what ``ros2 bag play --clock`` does, for machines without rosbag2.

You are in ``ros_dofkit.replay`` (the ROS edge; this module needs rclpy). :class:`BagPlayer` publishes every
message of a bag on its topic at the pace of its bag timestamps (scaled by ``rate``), and before each message
whose time is later than the last one published it publishes ``rosgraph_msgs/Clock`` with that time, so a node
with ``use_sim_time`` sees the recording's time. Messages are published as the bag stores them (serialized
CDR, no re-encoding). Looping starts the bag again from its first message: the clock jumps back, which is what
the estimator's clock-jump rule resets on. A ``/clock`` topic inside the bag is not republished (the player
owns the clock). Latched topics (``/tf_static``, ``/robot_description``) are published transient local, keep last
1, as tf2's static broadcaster and robot_state_publisher do, so a subscriber that starts later still gets them.
"""

from __future__ import annotations

import importlib
import sqlite3
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2 import ReaderError

from ros_dofkit.ros.bag_io import LATCHED_TOPICS, BagError, bag_topics
from ros_dofkit.ros.qos import tf_static_qos

CLOCK_TOPIC = "/clock"

# What reading a damaged bag raises inside rosbags (its reader, the storage drivers, the mcap parser).
_STORAGE_ERRORS = (ReaderError, OSError, ValueError, LookupError, ArithmeticError, struct.error,
                   sqlite3.DatabaseError)


def message_class(msgtype: str):
    """The rclpy message class of ``pkg/msg/Name``; :class:`BagError` when its package is not installed."""
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, ImportError, AttributeError):
        raise BagError(f"message type {msgtype!r} of the bag is not available to rclpy here (is its package "
                       "installed?)") from None


@dataclass
class PlayStatistics:
    """What a play published: messages per topic, clock messages, passes over the bag, wall time."""

    published: dict = field(default_factory=dict)
    clock_messages: int = 0
    passes: int = 0
    wall_time_s: float = 0.0
    bag_span_s: float = 0.0


class BagPlayer:
    """Publishes a bag's messages on an rclpy node at the recorded pace, with ``/clock``.

    Args:
        node: the rclpy node that owns the publishers.
        path: the bag (sqlite3 or mcap).
        rate: playback speed factor (> 0); 2 plays twice as fast.
        topics: topics to play (default: all but ``/clock``); unknown ones raise :class:`BagError` listing the
            bag's topics.
        publish_clock: publish ``/clock`` (rosgraph_msgs/Clock) with the bag time.
        qos_depth: history depth of the (reliable) publishers.
    """

    def __init__(self, node, path, rate: float = 1.0, topics=None, publish_clock: bool = True, qos_depth: int = 1000):
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        if not (isinstance(rate, (int, float)) and rate > 0 and rate < float("inf")):
            raise ValueError(f"rate: expected a finite number > 0, got {rate!r}")
        self.node = node
        self.path = Path(path)
        self.rate = float(rate)
        available = bag_topics(self.path)  # BagError for missing or unreadable bags
        if topics is None:
            chosen = [t for t in available if t != CLOCK_TOPIC or not publish_clock]
        else:
            chosen = list(topics)
            unknown = [t for t in chosen if t not in available]
            if unknown:
                raise BagError(f"topics {unknown} are not in {self.path}; it has {sorted(available)}")
        if not chosen:
            raise BagError(f"{self.path} has no topic to play (its topics: {sorted(available)})")
        self.topics = tuple(chosen)
        qos = QoSProfile(depth=qos_depth, reliability=ReliabilityPolicy.RELIABLE)
        self._publishers = {topic: node.create_publisher(message_class(available[topic][0]), topic,
                                                         tf_static_qos() if topic in LATCHED_TOPICS else qos)
                            for topic in self.topics}
        self._clock_publisher = None
        if publish_clock:
            from rosgraph_msgs.msg import Clock

            self._clock_class = Clock
            self._clock_publisher = node.create_publisher(Clock, CLOCK_TOPIC, qos)

    @property
    def publishers(self) -> dict:
        """{topic: rclpy Publisher} of the played topics."""
        return dict(self._publishers)

    def wait_for_subscribers(self, topics=None, timeout_s: float = 10.0, settle_s: float = 1.0,
                             spin: Callable | None = None) -> None:
        """Wait until each of ``topics`` has a matched subscription (with ``topics`` None, until any played topic
        has one), then ``settle_s`` more: a subscription sees the match some milliseconds after the publisher does,
        and a message published in between is lost to it (observed as the first message of a topic missing); with
        ``topics`` None the settling also lets the subscriber's other subscriptions match (a bag usually holds
        topics nobody subscribes to, e.g. a ground truth).

        ``spin()`` is called while waiting. Raises TimeoutError naming the topics still without subscribers, and
        :class:`BagError` for a topic that is not played.
        """
        if topics is not None:
            unknown = [t for t in topics if t not in self._publishers]
            if unknown:
                raise BagError(f"cannot wait for subscribers on {unknown}: not played (played: {list(self.topics)})")
        deadline = time.monotonic() + timeout_s
        while True:
            matched = [t for t in self.topics if self._publishers[t].get_subscription_count() > 0]
            missing = [t for t in (topics or ()) if t not in matched]
            if (topics is None and matched) or (topics is not None and not missing):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no subscriber on {missing or list(self.topics)} after {timeout_s:g} s")
            if spin is not None:
                spin()
            time.sleep(0.01)
        settle_until = time.monotonic() + settle_s
        while time.monotonic() < settle_until:
            if spin is not None:
                spin()
            time.sleep(0.01)

    def wait_for_acknowledgements(self, timeout_s: float = 5.0) -> list[str]:
        """Wait until every matched subscription has acknowledged every message published so far, at most
        ``timeout_s`` in all; returns the topics still unacknowledged (empty when all were).

        A process that exits right after its last ``publish`` takes its writers' history with it: a sample whose
        first transmission a reader missed can no longer be repaired, so the reader never gets the bag's last
        message (what ``ros2 bag play --wait-for-all-acked`` is for). The publishers are reliable, so DDS reports
        the acknowledgements; a topic without subscribers counts as acknowledged.
        """
        from rclpy.duration import Duration

        deadline = time.monotonic() + timeout_s
        unacknowledged = []
        publishers = dict(self._publishers)
        if self._clock_publisher is not None:
            publishers[CLOCK_TOPIC] = self._clock_publisher
        for topic, publisher in publishers.items():
            remaining = max(deadline - time.monotonic(), 0.0)
            if not publisher.wait_for_all_acked(Duration(nanoseconds=int(remaining * 1e9))):
                unacknowledged.append(topic)
        return unacknowledged

    def _records(self):
        from rosbags.rosbag2 import Reader

        try:
            reader = Reader(self.path)
            reader.open()
        except _STORAGE_ERRORS as error:
            raise BagError(f"cannot read the bag {self.path}: {error}") from None
        try:
            connections = [c for c in reader.connections if c.topic in self._publishers]
            messages = reader.messages(connections=connections)
            while True:
                try:
                    connection, stamp_ns, raw = next(messages)
                except StopIteration:
                    return
                except _STORAGE_ERRORS as error:
                    raise BagError(f"corrupt bag {self.path}: {error}") from None
                yield connection.topic, int(stamp_ns), bytes(raw)
        finally:
            reader.close()

    def _publish_clock(self, stamp_ns: int, stats: PlayStatistics) -> None:
        from builtin_interfaces.msg import Time

        message = self._clock_class(clock=Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000))
        self._clock_publisher.publish(message)
        stats.clock_messages += 1

    def play(self, loops: int | None = 1, should_stop: Callable[[], bool] | None = None,
             progress: Callable[[str], None] | None = None) -> PlayStatistics:
        """Play the bag ``loops`` times (None: until ``should_stop()``); returns the statistics."""
        stats = PlayStatistics(published={topic: 0 for topic in self.topics})
        started = time.monotonic()
        last_progress = 0.0
        while loops is None or stats.passes < loops:
            first_ns = last_clock_ns = None
            wall_origin = time.monotonic()
            for topic, stamp_ns, raw in self._records():
                if should_stop is not None and should_stop():
                    stats.wall_time_s = time.monotonic() - started
                    return stats
                if first_ns is None:
                    first_ns = stamp_ns
                due = wall_origin + (stamp_ns - first_ns) * 1e-9 / self.rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if self._clock_publisher is not None and (last_clock_ns is None or stamp_ns > last_clock_ns):
                    self._publish_clock(stamp_ns, stats)
                    last_clock_ns = stamp_ns
                self._publishers[topic].publish(raw)
                stats.published[topic] += 1
                stats.bag_span_s = max(stats.bag_span_s, (stamp_ns - first_ns) * 1e-9)
                if progress is not None and time.monotonic() - last_progress > 0.2:
                    last_progress = time.monotonic()
                    progress(f"pass {stats.passes + 1}, bag time {(stamp_ns - first_ns) * 1e-9:.2f} s")
            stats.passes += 1
            if first_ns is None:
                break  # nothing to play in the chosen topics
        stats.wall_time_s = time.monotonic() - started
        return stats
