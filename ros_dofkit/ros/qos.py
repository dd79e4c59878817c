"""QoS profiles of ros_dofkit's topics, user overrides through parameters, and incompatible-QoS reporting.

Where you are: the ROS edge (``ros_dofkit.ros``). Nodes create every subscription and publisher through
:func:`create_input_subscription` / :func:`create_output_publisher` so that all topics behave alike:

* inputs (IMUs, encoders) default to the sensor-data profile (best effort, volatile, keep last 5), as
  ``robot_state_publisher`` and sensor drivers do; a best-effort subscription matches both reliable and
  best-effort publishers;
* outputs default to reliable, volatile, keep last 10 (``/tf``: keep last 100 like tf2_ros'
  TransformBroadcaster; ``/tf_static``: transient local, keep last 1 like its StaticTransformBroadcaster);
* every profile can be overridden per topic at start-up with ROS 2's standard QoS-override parameters, e.g.
  ``-p "qos_overrides./imu/data.subscription.reliability:=reliable"`` (history, depth, reliability, durability);
  a bad value raises :class:`QosOverrideError` listing the valid ones;
* an incompatible-QoS event (a peer whose QoS can never match) is logged with the offending policy and counted
  per topic in a :class:`QosEventMonitor`, so a node's diagnostics can report it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager

from rclpy.event_handler import (
    PublisherEventCallbacks,
    QoSOfferedIncompatibleQoSInfo,
    QoSRequestedIncompatibleQoSInfo,
    SubscriptionEventCallbacks,
)
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import (
    QoSDurabilityPolicy,
    QoSHistoryPolicy,
    QoSPolicyKind,
    QoSProfile,
    QoSReliabilityPolicy,
    qos_policy_name_from_kind,
    qos_profile_sensor_data,
)
from rclpy.qos_overriding_options import InvalidQosOverridesError, QoSOverridingOptions
from rclpy.subscription import Subscription

#: Policies a user may override per topic through ``qos_overrides.<topic>.<publisher|subscription>.<policy>``.
OVERRIDABLE_POLICIES = (
    QoSPolicyKind.HISTORY,
    QoSPolicyKind.DEPTH,
    QoSPolicyKind.RELIABILITY,
    QoSPolicyKind.DURABILITY,
)


#: Values the override parameters accept (case-insensitive), for error messages.
OVERRIDE_VALUES = {
    "history": ("keep_last", "keep_all", "system_default"),
    "reliability": ("reliable", "best_effort", "system_default"),
    "durability": ("volatile", "transient_local", "system_default"),
    "depth": ("a positive integer",),
}


class QosOverrideError(ValueError):
    """A ``qos_overrides.*`` parameter has a value that is not a valid QoS policy value."""


def sensor_input_qos() -> QoSProfile:
    """Default profile of sensor inputs: rclpy's SensorDataQoS (best effort, volatile, keep last 5)."""
    return QoSProfile(
        history=qos_profile_sensor_data.history,
        depth=qos_profile_sensor_data.depth,
        reliability=qos_profile_sensor_data.reliability,
        durability=qos_profile_sensor_data.durability,
    )


def output_qos(depth: int = 10) -> QoSProfile:
    """Default profile of outputs (JointState, Odometry, diagnostics): reliable, volatile, keep last ``depth``."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"output_qos: expected a positive integer depth, got {depth!r}")
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.VOLATILE,
    )


def tf_qos() -> QoSProfile:
    """Profile of ``/tf``: reliable, volatile, keep last 100 (tf2_ros DynamicBroadcasterQoS)."""
    return output_qos(depth=100)


def tf_static_qos() -> QoSProfile:
    """Profile of ``/tf_static`` and latched topics: reliable, transient local, keep last 1 (StaticBroadcasterQoS)."""
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
    )


def overriding_options() -> QoSOverridingOptions:
    """Let the user override :data:`OVERRIDABLE_POLICIES` of a topic with ``qos_overrides.*`` parameters."""
    return QoSOverridingOptions(policy_kinds=OVERRIDABLE_POLICIES)


class QosEventMonitor:
    """Logs and counts incompatible-QoS events of one node's publishers and subscriptions.

    ``counts[topic]`` is the number of incompatible peers seen on that (resolved) topic so far, summed over
    the events rmw reported (each event carries the running total for its entity).
    """

    def __init__(self, node: Node):
        if not isinstance(node, Node):
            raise TypeError(f"QosEventMonitor: expected an rclpy Node, got {type(node).__name__}")
        self._node = node
        self.counts: Counter[str] = Counter()

    def subscription_callbacks(self, topic: str) -> SubscriptionEventCallbacks:
        """Event callbacks for a subscription to ``topic`` (requested QoS incompatible with a publisher's)."""
        return SubscriptionEventCallbacks(incompatible_qos=self._handler(topic, "subscription", "publisher"))

    def publisher_callbacks(self, topic: str) -> PublisherEventCallbacks:
        """Event callbacks for a publisher on ``topic`` (offered QoS incompatible with a subscription's)."""
        return PublisherEventCallbacks(incompatible_qos=self._handler(topic, "publisher", "subscription"))

    def _handler(
        self, topic: str, own_side: str, peer_side: str
    ) -> Callable[[QoSRequestedIncompatibleQoSInfo | QoSOfferedIncompatibleQoSInfo], None]:
        resolved = self._node.resolve_topic_name(topic)
        reported = 0

        def on_incompatible(event) -> None:
            nonlocal reported
            # total_count is cumulative per entity: count only what is new since the last event.
            self.counts[resolved] += event.total_count - reported
            reported = event.total_count
            policy = qos_policy_name_from_kind(event.last_policy_kind)
            self._node.get_logger().warning(
                f"incompatible QoS on {own_side} '{resolved}': a {peer_side} cannot match it because of the "
                f"{policy} policy ({event.total_count} incompatible so far); override this topic's QoS with "
                f"'qos_overrides.{resolved}.{own_side}.<policy>' parameters"
            )

        return on_incompatible


@contextmanager
def _explained_override_errors(node: Node, topic: str, side: str):
    """Turn rclpy's errors about bad ``qos_overrides`` values into a QosOverrideError that lists the valid ones."""
    try:
        yield
    except (InvalidQosOverridesError, RuntimeError) as error:
        # rclpy reports an unknown policy value as a plain RuntimeError; anything else is not ours to explain.
        if not isinstance(error, InvalidQosOverridesError) and "QoS override" not in str(error):
            raise
        valid = "; ".join(f"{policy}: {', '.join(values)}" for policy, values in OVERRIDE_VALUES.items())
        raise QosOverrideError(
            f"invalid QoS override for the {side} on '{node.resolve_topic_name(topic)}' "
            f"(parameters qos_overrides.<topic>.{side}.<policy>): {error}. Valid values are {valid}"
        ) from error


def create_input_subscription(
    node: Node,
    msg_type,
    topic: str,
    callback: Callable,
    monitor: QosEventMonitor,
    qos: QoSProfile | None = None,
    raw: bool = False,
) -> Subscription:
    """Subscribe to a sensor input: SensorDataQoS unless ``qos`` is given, user-overridable, events reported.

    ``raw=True`` delivers the serialized (CDR) bytes to ``callback`` instead of a message object.
    """
    with _explained_override_errors(node, topic, "subscription"):
        return node.create_subscription(
            msg_type,
            topic,
            callback,
            sensor_input_qos() if qos is None else qos,
            event_callbacks=monitor.subscription_callbacks(topic),
            qos_overriding_options=overriding_options(),
            raw=raw,
        )


def create_output_publisher(
    node: Node,
    msg_type,
    topic: str,
    monitor: QosEventMonitor,
    qos: QoSProfile | None = None,
) -> Publisher:
    """Publish an output: :func:`output_qos` unless ``qos`` is given, user-overridable, events reported."""
    with _explained_override_errors(node, topic, "publisher"):
        return node.create_publisher(
            msg_type,
            topic,
            output_qos() if qos is None else qos,
            event_callbacks=monitor.publisher_callbacks(topic),
            qos_overriding_options=overriding_options(),
        )
