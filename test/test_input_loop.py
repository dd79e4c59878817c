"""ros_dofkit.ros.input_loop.InputLoop in one process over DDS: every input message reaches its handler as the
bytes that were sent, in order, timers and services of the same node are still served, and the loop ends when the
context shuts down or ``until`` says so."""

from __future__ import annotations

import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import Imu  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from ros_dofkit.ros.input_loop import InputLoop  # noqa: E402
from ros_dofkit.ros.qos import output_qos  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


def _imu(k: int) -> Imu:
    msg = Imu()
    msg.header.stamp.sec = k
    msg.header.frame_id = f"imu{k % 3}"
    msg.orientation.w = 1.0
    return msg


def counting_trigger(node, name: str) -> list:
    """A Trigger service ``name`` of ``node`` that answers success; the list it appends one entry to per call."""
    calls = []

    def on_trigger(request, response):
        calls.append(1)
        response.success = True
        return response

    node.create_service(Trigger, name, on_trigger)
    return calls


def test_inputs_timers_and_services_are_served(context):
    node = rclpy.create_node("input_loop_test", context=context)
    client_node = rclpy.create_node("input_loop_test_client", context=context)
    received = {"a": [], "b": []}
    subscriptions = {
        name: node.create_subscription(Imu, f"/input_loop_test/{name}", received[name].append, output_qos(1000),
                                       raw=True)
        for name in received
    }
    ticks = []
    node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
    calls = counting_trigger(node, "/input_loop_test/trigger")
    loop = InputLoop(node, housekeeping_period=0.005)
    for name, subscription in subscriptions.items():
        loop.add(subscription, received[name].append)
    publishers = {name: client_node.create_publisher(Imu, f"/input_loop_test/{name}", output_qos(1000))
                  for name in received}
    client = client_node.create_client(Trigger, "/input_loop_test/trigger")
    sent = {name: [serialize_message(_imu(k + 100 * i)) for k in range(200)] for i, name in enumerate(received)}
    responses = []

    def publish_and_call():
        deadline = time.monotonic() + 10.0
        while any(p.get_subscription_count() == 0 for p in publishers.values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        for k in range(200):
            for name, publisher in publishers.items():
                publisher.publish(sent[name][k])
            if k % 50 == 0:
                time.sleep(0.01)
        future = client.call_async(Trigger.Request())
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(client_node)
        executor.spin_until_future_complete(future, timeout_sec=10.0)
        responses.append(future.result())

    worker = threading.Thread(target=publish_and_call)
    started = time.monotonic()
    worker.start()
    loop.spin(until=lambda: (responses and len(ticks) >= 3 and all(len(v) == 200 for v in received.values()))
              or time.monotonic() - started > 20.0)
    worker.join(10.0)
    for name in received:
        assert received[name] == sent[name]  # every message, as the bytes sent, in order
        offset = 100 * list(received).index(name)
        assert deserialize_message(received[name][7], Imu).header.stamp.sec == 7 + offset
    assert 0 < loop.messages_taken <= 400  # the loop took them (the executor may take one between inputs)
    assert responses and responses[0] is not None and responses[0].success and calls == [1]
    assert len(ticks) >= 3  # the node's timer is served by the loop's executor
    node.destroy_node()
    client_node.destroy_node()


def test_a_timer_is_served_when_due_however_long_the_housekeeping_period(context):
    # Housekeeping passes follow the node's timers: with a period far longer than the test, the 20 ms timer still
    # ticks, and the loop passes about once per tick rather than polling.
    node = rclpy.create_node("input_loop_timer", context=context)
    subscription = node.create_subscription(Imu, "/input_loop_test/timer_x", lambda data: None, 10, raw=True)
    ticks = []
    node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
    loop = InputLoop(node, housekeeping_period=1000.0)
    loop.add(subscription, lambda data: None)
    started = time.monotonic()
    loop.spin(until=lambda: len(ticks) >= 5 or time.monotonic() - started > 20.0)
    assert len(ticks) >= 5
    assert loop.housekeeping_passes <= 3 * len(ticks) + 2
    node.destroy_node()


def test_requests_that_came_together_are_served_together_however_long_the_housekeeping_period(context):
    # A pass serves one callback (as spin_once); one that served a callback is followed by another soon, so that five
    # requests waiting at the first pass are all served although the next periodic pass would be 1000 s away.
    node = rclpy.create_node("input_loop_burst", context=context)
    client_node = rclpy.create_node("input_loop_burst_client", context=context)
    subscription = node.create_subscription(Imu, "/input_loop_test/burst_x", lambda data: None, 10, raw=True)
    calls = counting_trigger(node, "/input_loop_test/burst")
    client = client_node.create_client(Trigger, "/input_loop_test/burst")
    assert client.wait_for_service(timeout_sec=10.0)
    futures = [client.call_async(Trigger.Request()) for _ in range(5)]
    time.sleep(0.5)  # the requests reach the service's reader before the loop's first pass (not a timed assertion)
    loop = InputLoop(node, housekeeping_period=1000.0)
    loop.add(subscription, lambda data: None)
    # Inputs wake the loop (which checks ``until`` on every wake) but start no pass: the passes are the loop's own.
    publisher = client_node.create_publisher(Imu, "/input_loop_test/burst_x", 10)
    stop = threading.Event()

    def wake():
        while not stop.wait(0.02):
            publisher.publish(_imu(0))

    waker = threading.Thread(target=wake)
    waker.start()
    started = time.monotonic()
    try:
        loop.spin(until=lambda: len(calls) >= 5 or time.monotonic() - started > 20.0)
    finally:
        stop.set()
        waker.join(5.0)
    assert len(calls) == 5 and len(futures) == 5
    assert loop.housekeeping_passes <= 2 * 5 + 3  # one per request, and the passes that found nothing
    node.destroy_node()
    client_node.destroy_node()


def test_spin_returns_when_the_context_shuts_down(context):
    node = rclpy.create_node("input_loop_shutdown", context=context)
    subscription = node.create_subscription(Imu, "/input_loop_test/x", lambda data: None, 10, raw=True)
    loop = InputLoop(node, housekeeping_period=0.01)
    loop.add(subscription, lambda data: None)
    threading.Timer(0.2, lambda: rclpy.try_shutdown(context=context)).start()
    started = time.monotonic()
    loop.spin()
    assert time.monotonic() - started < 5.0


def test_add_refuses_a_subscription_that_delivers_message_objects(context):
    node = rclpy.create_node("input_loop_refuse", context=context)
    subscription = node.create_subscription(Imu, "/input_loop_test/y", lambda msg: None, 10)
    with pytest.raises(ValueError, match="raw"):
        InputLoop(node).add(subscription, lambda data: None)
    with pytest.raises(ValueError, match="housekeeping_period"):
        InputLoop(node, housekeeping_period=0.0)
    node.destroy_node()
