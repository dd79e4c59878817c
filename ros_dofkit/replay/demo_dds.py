"""The demo over real DDS: simulator publishing in real time, the estimator node as a separate process.

You are in ``ros_dofkit.replay`` (needs rclpy). ``dofkit demo`` without ``--no-dds`` runs this:

1. the estimator node starts as its own process (console script ``estimator``, or ``python -m
   ros_dofkit.nodes.estimator`` when the script is not installed) with the demo robot's parameter file;
2. this process publishes the simulated streams in real time (the same messages ``dofkit record`` writes: one
   sensor_msgs/Imu topic per IMU and the encoder JointState; simulated time is put on the wall clock, so the
   node's stale/future stamp checks see live data) and subscribes to the node's ``/estimated/joint_states`` and
   ``/estimated/sensor_errors``;
3. every estimate received is compared with the simulated truth at its stamp; latency is the wall time from
   publishing the input that completed a cycle to receiving that cycle's joint states (both in this process).

:func:`run_demo_dds` runs these as named steps (``simulate_streams``, ``start_node``, ``DemoRos``,
``wait_for_topics``, ``RealTimePublisher``, ``spin_until_drained``, ``received_run``, ``demo_outcome``) that pass
named records between them.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import numpy as np

from ros_dofkit.replay.demo import DemoOutcome, judge_estimates, simulate_demo
from ros_dofkit.replay.demo_robot import build_demo_robot, parameter_yaml
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import truth_from_simulation
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import absolute_topic

NODE_START_TIMEOUT_S = 60.0
MATCH_TIMEOUT_S = 30.0
#: After the topics match, discovery goes on this long (s) before the run, so a second estimator is seen.
SETTLE_S = 0.5
#: The first simulated sample is stamped and published this long (ns) after the run starts.
START_DELAY_NS = 300_000_000
#: After the last input is published, estimates are still received for this long (s).
DRAIN_S = 1.0
#: Where the estimator node publishes (its joint states and sensor errors).
OUTPUT_NAMESPACE = "/estimated"
#: How the outcome names this path.
DEMO_PATH = "over DDS, estimator node in its own process"


class DemoDdsError(RuntimeError):
    """The DDS demo could not run: the node did not start or its topics never matched (message says which)."""


def refuse_foreign_estimator(subscription, output: str) -> None:
    """Raise DemoDdsError if anything but the demo's own node publishes the estimates the demo subscribes to."""
    count = subscription.get_publisher_count()
    if count > 1:
        raise DemoDdsError(
            f"{count} publishers on {output}/joint_states: another estimator runs in this ROS domain "
            f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}); its estimates would mix with the demo's. "
            "Stop it, choose another ROS_DOMAIN_ID, or use --no-dds"
        )


@dataclass(frozen=True)
class ReceivedEstimate:
    """One ``/estimated/joint_states`` message as the report expects an estimate: stamp (s, simulated time),
    q in ``position_names`` order, per-sensor errors (deg; NaN until the matching sensor_errors arrives)."""

    stamp: float
    q: np.ndarray
    position_names: tuple
    sensor_errors_deg: dict


def node_command() -> list[str]:
    """The estimator node's command line: the console script if installed next to this interpreter or on PATH,
    else the node module run by this interpreter."""
    candidate = Path(sys.executable).parent / "estimator"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    on_path = shutil.which("estimator")
    if on_path:
        return [on_path]
    return [sys.executable, "-m", "ros_dofkit.nodes.estimator"]


class NodeProcess:
    """The estimator node as a child process in its own process group; output in ``log_path``."""

    def __init__(self, params_path: Path, log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "w", encoding="utf-8")
        command = [*node_command(), "--ros-args", "--params-file", str(params_path)]
        self.command = command
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                        env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout_s: float = NODE_START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "estimator ready" in self.output():
                return
            if self.process.poll() is not None:
                raise DemoDdsError(f"the estimator node exited with status {self.process.returncode} before it was "
                                   f"ready:\n{self.output()[-2000:]}")
            time.sleep(0.05)
        raise DemoDdsError(f"the estimator node was not ready after {timeout_s:g} s:\n{self.output()[-2000:]}")

    def stop(self, timeout_s: float = 5.0) -> int:
        if self.process.poll() is None:
            for sig, wait in ((signal.SIGINT, timeout_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()
        return self.process.returncode


@dataclass(frozen=True)
class RosApi:
    """The rclpy classes and message types the demo uses. They are imported when the demo starts, not with this
    module (rclpy is optional for the package), and before the simulation, so a missing rclpy fails at once."""

    rclpy: ModuleType
    Context: type
    SingleThreadedExecutor: type
    QoSProfile: type
    ReliabilityPolicy: type
    Imu: type
    JointState: type
    Float64MultiArray: type


def load_ros_api() -> RosApi:
    """Import rclpy and the message types (ImportError when the ROS 2 Python stack is not there)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float64MultiArray

    return RosApi(rclpy, Context, SingleThreadedExecutor, QoSProfile, ReliabilityPolicy, Imu, JointState,
                  Float64MultiArray)


@dataclass(frozen=True)
class DemoStreams:
    """What the demo publishes and judges the node against: the demo robot, its simulated run and the truth, the
    factory of the messages, and the input topics (IMU name -> absolute Imu topic; the encoders' JointState topic)."""

    robot: object
    run: object
    truth: object
    factory: MessageFactory
    imu_topics: dict
    joint_states_topic: str


def simulate_streams(options) -> DemoStreams:
    """Build the demo robot and simulate it for ``options`` (the same run ``dofkit demo --no-dds`` estimates)."""
    robot = build_demo_robot()
    run = simulate_demo(robot, options)
    return DemoStreams(
        robot=robot,
        run=run,
        truth=truth_from_simulation(run),
        factory=MessageFactory(),
        imu_topics={imu.name: absolute_topic(imu.topic) for imu in robot.estimator_config.imus},
        joint_states_topic=absolute_topic(robot.parameters["joint_states_topic"]),
    )


def start_node(robot, work: Path) -> NodeProcess:
    """Write the demo robot's parameter file into ``work`` and start the estimator node on it (log in ``work``)."""
    params_path = work / "estimator.yaml"
    params_path.write_text(parameter_yaml(robot.parameters), encoding="utf-8")
    return NodeProcess(params_path, work / "estimator.log")


class Arrival(NamedTuple):
    """One joint-states message and the monotonic time (s) this process received it."""

    received_at: float
    message: object


@dataclass
class Inbox:
    """What the subscriptions to the node's outputs received, in arrival order (the executor runs the callbacks in
    the main thread, so nothing else touches these lists while it spins).

    The node publishes a cycle's joint states and then its sensor errors (no header): the k-th row of
    ``error_rows`` belongs to the k-th entry of ``joint_states`` (both reliable, nothing is dropped in between).
    """

    joint_states: list[Arrival] = field(default_factory=list)
    error_rows: list[list[float]] = field(default_factory=list)

    def on_joint_states(self, message) -> None:
        self.joint_states.append(Arrival(time.monotonic(), message))

    def on_errors(self, message) -> None:
        self.error_rows.append(list(message.data))


@dataclass(frozen=True)
class DemoEndpoints:
    """The demo node's endpoints: a publisher per input topic, the subscriptions to the estimator node's joint
    states and sensor errors, and the inbox their callbacks fill."""

    publishers: dict
    joint_states: object
    sensor_errors: object
    inbox: Inbox


@dataclass(frozen=True)
class DemoRos:
    """This process's ROS side: its own rclpy context (so the demo does not disturb a caller's default context),
    the ``dofkit_demo`` node and the executor that spins it."""

    api: RosApi
    context: object
    node: object
    executor: object

    @classmethod
    def open(cls, api: RosApi) -> DemoRos:
        """Initialize a new context and create the node and its executor."""
        context = api.Context()
        api.rclpy.init(context=context)
        node = api.rclpy.create_node("dofkit_demo", context=context)
        executor = api.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        return cls(api, context, node, executor)

    def connect(self, streams: DemoStreams) -> DemoEndpoints:
        """Create the publishers of the simulated inputs and the subscriptions to the node's outputs (reliable,
        deep queues: every input must reach the node and every estimate this process)."""
        api = self.api
        qos = api.QoSProfile(depth=1000, reliability=api.ReliabilityPolicy.RELIABLE)
        publishers = {topic: self.node.create_publisher(api.Imu, topic, qos) for topic in streams.imu_topics.values()}
        publishers[streams.joint_states_topic] = self.node.create_publisher(api.JointState,
                                                                            streams.joint_states_topic, qos)
        inbox = Inbox()
        joint_states = self.node.create_subscription(api.JointState, f"{OUTPUT_NAMESPACE}/joint_states",
                                                     inbox.on_joint_states, qos)
        sensor_errors = self.node.create_subscription(api.Float64MultiArray, f"{OUTPUT_NAMESPACE}/sensor_errors",
                                                      inbox.on_errors, qos)
        return DemoEndpoints(publishers, joint_states, sensor_errors, inbox)

    def close(self) -> None:
        """Shut the executor down, destroy the node and shut the context down."""
        self.executor.shutdown()
        self.node.destroy_node()
        self.api.rclpy.shutdown(context=self.context)


def wait_for_topics(ros: DemoRos, endpoints: DemoEndpoints) -> None:
    """Spin until every input topic has the node as subscriber and the node's joint states reach this process
    (DemoDdsError after MATCH_TIMEOUT_S naming the topics still unmatched), then spin SETTLE_S more and refuse to
    run if another estimator publishes on the same output."""
    deadline = time.monotonic() + MATCH_TIMEOUT_S
    while True:
        unmatched = [t for t, p in endpoints.publishers.items() if p.get_subscription_count() == 0]
        if endpoints.joint_states.get_publisher_count() == 0:
            unmatched.append(f"{OUTPUT_NAMESPACE}/joint_states (from the node)")
        if not unmatched:
            break
        if time.monotonic() > deadline:
            raise DemoDdsError(f"topics never connected to the estimator node: {unmatched} (DDS discovery "
                               "blocked? try --no-dds)")
        ros.executor.spin_once(timeout_sec=0.05)
    # A moment more of discovery, so that a second estimator in the same domain (whose outputs would mix with
    # this one's) is seen before the run starts.
    settle_until = time.monotonic() + SETTLE_S
    while time.monotonic() < settle_until:
        ros.executor.spin_once(timeout_sec=0.05)
    refuse_foreign_estimator(endpoints.joint_states, OUTPUT_NAMESPACE)


@dataclass(frozen=True)
class WallClockStamps:
    """Simulated time put on the wall clock: simulated time t (s) is stamped ``round(t * 1e9) + offset_ns`` (ns
    since the epoch); the first sample's stamp, ``wall_start_ns``, is also the wall time it is due."""

    wall_start_ns: int
    offset_ns: int

    @classmethod
    def starting_soon(cls, first_s: float) -> WallClockStamps:
        """The first sample (simulated time ``first_s``) is stamped and published START_DELAY_NS from now."""
        wall_start_ns = time.time_ns() + START_DELAY_NS
        return cls(wall_start_ns, wall_start_ns - int(round(first_s * 1e9)))

    def simulated_s(self, stamp_ns: int) -> float:
        """The simulated time (s) of a stamp."""
        return (stamp_ns - self.offset_ns) * 1e-9


class RealTimePublisher:
    """Publishes simulated messages (``replay.record.SimulationRecord``) from a thread, each when the wall clock
    reaches its stamp, serialized to CDR by the factory's typestore (the publishers take raw bytes).
    ``published_at`` maps each stamp to the monotonic time (s) its last message went out; ``done`` is set when the
    thread ends, failed or not."""

    def __init__(self, records: list, publishers: dict, factory: MessageFactory, clock: WallClockStamps):
        self.records = records
        self.publishers = publishers
        self.factory = factory
        self.clock = clock
        self.published_at: dict = {}
        self.done = threading.Event()
        self.failure: Exception | None = None
        self._thread = threading.Thread(target=self._publish_all, name="dofkit_demo_publisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread; DemoDdsError if publishing failed."""
        self._thread.join()
        if self.failure is not None:
            raise DemoDdsError(f"publishing the simulated streams failed: {self.failure!r}")

    def _publish_all(self) -> None:
        try:
            serialize = self.factory.typestore.serialize_cdr
            wall_start_ns = self.clock.wall_start_ns
            # Sleep on the monotonic clock (the wall clock may be stepped): the monotonic time of wall_start_ns.
            mono_start = time.monotonic() + (wall_start_ns - time.time_ns()) * 1e-9
            for record in self.records:
                due = mono_start + (record.stamp_ns - wall_start_ns) * 1e-9
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                message = record.message
                self.publishers[record.topic].publish(bytes(serialize(message, message.__msgtype__)))
                self.published_at[record.stamp_ns] = time.monotonic()
        except Exception as error:  # reported by the main thread, which owns the clean-up
            self.failure = error
        finally:
            self.done.set()


def spin_until_drained(ros: DemoRos, endpoints: DemoEndpoints, publisher: RealTimePublisher, span_s: float,
                       progress=None) -> None:
    """Spin the demo node while the inputs are published and DRAIN_S after the last one (its estimates are still
    in flight), showing ``progress(fraction, text)`` of the simulated span ``span_s``."""
    wall_start_ns = publisher.clock.wall_start_ns
    drain_until = None
    while True:
        ros.executor.spin_once(timeout_sec=0.02)
        # Discovery of a second estimator can finish after the settle window on a loaded machine; its estimates
        # would silently mix with the demo's, so the check stays on for the whole run.
        refuse_foreign_estimator(endpoints.joint_states, OUTPUT_NAMESPACE)
        if progress is not None:
            elapsed = (time.time_ns() - wall_start_ns) * 1e-9
            received = len(endpoints.inbox.joint_states)
            progress(min(max(elapsed / span_s, 0.0), 1.0),
                     f"t {max(elapsed, 0.0):5.1f}/{span_s:.1f} s  estimates received {received}")
        if publisher.done.is_set() and drain_until is None:
            drain_until = time.monotonic() + DRAIN_S
        if drain_until is not None and time.monotonic() > drain_until:
            break


@dataclass(frozen=True)
class ReceivedRun:
    """The estimates received, as the report expects them, and the latency (s) of each one whose stamp this
    process published: from publishing the input that completed its cycle to receiving its joint states."""

    estimates: list[ReceivedEstimate]
    latencies_s: list[float]


def received_run(inbox: Inbox, sensor_names: tuple, clock: WallClockStamps, published_at: dict) -> ReceivedRun:
    """Pair each joint-states message with its sensor-errors row (NaN errors when the row never came) and put its
    stamp back on simulated time."""
    estimates, latencies = [], []
    for k, arrival in enumerate(inbox.joint_states):
        message = arrival.message
        stamp_ns = message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        errors = inbox.error_rows[k] if k < len(inbox.error_rows) else [math.nan] * len(sensor_names)
        estimates.append(ReceivedEstimate(
            stamp=clock.simulated_s(stamp_ns),
            q=np.asarray(message.position, dtype=float),
            position_names=tuple(message.name),
            sensor_errors_deg=dict(zip(sensor_names, errors, strict=False)),
        ))
        if stamp_ns in published_at:
            latencies.append(arrival.received_at - published_at[stamp_ns])
    return ReceivedRun(estimates, latencies)


def demo_outcome(streams: DemoStreams, received: ReceivedRun, options, out_dir=None) -> DemoOutcome:
    """Compare the received estimates with the truth (the report and its verdict, ``demo.judge_estimates`` as the
    in-process demo); write the plot and summary into ``out_dir`` when given."""
    return judge_estimates(streams.robot, streams.run, streams.truth, received.estimates, received.latencies_s,
                           options, DEMO_PATH, out_dir)


def run_demo_dds(options, out_dir=None, progress=None):
    """Run the demo over DDS (see the module docstring); returns a :class:`~ros_dofkit.replay.demo.DemoOutcome`.

    Raises :class:`DemoDdsError` when the node cannot start or the topics do not connect.
    """
    api = load_ros_api()
    streams = simulate_streams(options)
    # The node's folder and process, and this process's ROS endpoints, go away whatever fails, and in this order:
    # the node stops before its folder is removed (it writes its log there).
    with tempfile.TemporaryDirectory(prefix="dofkit_demo_", ignore_cleanup_errors=True) as work:
        node_process = start_node(streams.robot, Path(work))
        ros = None
        try:
            ros = DemoRos.open(api)
            endpoints = ros.connect(streams)
            node_process.wait_ready()
            wait_for_topics(ros, endpoints)
            clock = WallClockStamps.starting_soon(float(streams.run.times[0]))
            records = list(simulation_records(streams.run, streams.factory, streams.imu_topics,
                                              streams.joint_states_topic, truth_topic=None,
                                              stamp_offset_ns=clock.offset_ns))
            publisher = RealTimePublisher(records, endpoints.publishers, streams.factory, clock)
            publisher.start()
            span_s = float(streams.run.times[-1] - streams.run.times[0])
            spin_until_drained(ros, endpoints, publisher, span_s, progress)
            publisher.join()
        finally:
            node_process.stop()
            if ros is not None:
                ros.close()
        node_log = node_process.output() if node_process.log_path.exists() else ""

    sensor_names = tuple(streams.robot.estimator_config.imu_names)
    received = received_run(endpoints.inbox, sensor_names, clock, publisher.published_at)
    if not received.estimates:
        raise DemoDdsError(f"the estimator node published no estimate; its output:\n{node_log[-2000:]}")
    return demo_outcome(streams, received, options, out_dir)
