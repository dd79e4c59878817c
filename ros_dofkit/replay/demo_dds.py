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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ros_dofkit.replay.demo import DemoOutcome, simulate_demo, write_outputs
from ros_dofkit.replay.demo_robot import build_demo_robot, parameter_yaml
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import tracking_report, truth_from_simulation
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import absolute_topic

NODE_START_TIMEOUT_S = 60.0
MATCH_TIMEOUT_S = 30.0


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


def run_demo_dds(options, out_dir=None, progress=None):
    """Run the demo over DDS (see the module docstring); returns a :class:`~ros_dofkit.replay.demo.DemoOutcome`.

    Raises :class:`DemoDdsError` when the node cannot start or the topics do not connect.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float64MultiArray

    robot = build_demo_robot()
    run = simulate_demo(robot, options)
    truth = truth_from_simulation(run)
    factory = MessageFactory()
    imu_topics = {imu.name: absolute_topic(imu.topic) for imu in robot.estimator_config.imus}
    joint_states_topic = absolute_topic(robot.parameters["joint_states_topic"])

    work = Path(tempfile.mkdtemp(prefix="dofkit_demo_"))
    params_path = work / "estimator.yaml"
    params_path.write_text(parameter_yaml(robot.parameters), encoding="utf-8")
    node_process = NodeProcess(params_path, work / "estimator.log")
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("dofkit_demo", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        publishers = {topic: node.create_publisher(Imu, topic, qos) for topic in imu_topics.values()}
        publishers[joint_states_topic] = node.create_publisher(JointState, joint_states_topic, qos)
        received: list = []
        # The node publishes a cycle's joint states and then its sensor errors (no header): the k-th errors
        # message belongs to the k-th joint states (both reliable, nothing is dropped in between).
        error_rows: list = []

        def on_joint_states(message):
            received.append((time.monotonic(), message))

        def on_errors(message):
            error_rows.append(list(message.data))

        output = "/estimated"
        subscription = node.create_subscription(JointState, f"{output}/joint_states", on_joint_states, qos)
        errors_subscription = node.create_subscription(Float64MultiArray, f"{output}/sensor_errors", on_errors, qos)
        node_process.wait_ready()

        deadline = time.monotonic() + MATCH_TIMEOUT_S
        while True:
            unmatched = [t for t, p in publishers.items() if p.get_subscription_count() == 0]
            if subscription.get_publisher_count() == 0:
                unmatched.append(f"{output}/joint_states (from the node)")
            if not unmatched:
                break
            if time.monotonic() > deadline:
                raise DemoDdsError(f"topics never connected to the estimator node: {unmatched} (DDS discovery "
                                   "blocked? try --no-dds)")
            executor.spin_once(timeout_sec=0.05)
        # A moment more of discovery, so that a second estimator in the same domain (whose outputs would mix with
        # this one's) is seen before the run starts.
        settle_until = time.monotonic() + 0.5
        while time.monotonic() < settle_until:
            executor.spin_once(timeout_sec=0.05)
        refuse_foreign_estimator(subscription, output)

        # Put simulated time on the wall clock: the first sample is stamped (and published) 0.3 s from now.
        first = float(run.times[0])
        wall_start_ns = time.time_ns() + 300_000_000
        offset_ns = wall_start_ns - int(round(first * 1e9))
        records = list(simulation_records(run, factory, imu_topics, joint_states_topic, truth_topic=None,
                                          stamp_offset_ns=offset_ns))
        published_at: dict = {}
        done = threading.Event()
        failure: list = []

        def publish_all():
            try:
                serialize = factory.typestore.serialize_cdr
                mono_start = time.monotonic() + (wall_start_ns - time.time_ns()) * 1e-9
                for topic, stamp_ns, message in records:
                    due = mono_start + (stamp_ns - wall_start_ns) * 1e-9
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    publishers[topic].publish(bytes(serialize(message, message.__msgtype__)))
                    published_at[stamp_ns] = time.monotonic()
            except Exception as error:  # reported by the main thread, which owns the clean-up
                failure.append(error)
            finally:
                done.set()

        publisher_thread = threading.Thread(target=publish_all, name="dofkit_demo_publisher", daemon=True)
        publisher_thread.start()
        span = float(run.times[-1] - run.times[0])
        drain_until = None
        while True:
            executor.spin_once(timeout_sec=0.02)
            # Discovery of a second estimator can finish after the settle window on a loaded machine; its estimates
            # would silently mix with the demo's, so the check stays on for the whole run.
            refuse_foreign_estimator(subscription, output)
            if progress is not None:
                elapsed = (time.time_ns() - wall_start_ns) * 1e-9
                progress(min(max(elapsed / span, 0.0), 1.0),
                         f"t {max(elapsed, 0.0):5.1f}/{span:.1f} s  estimates received {len(received)}")
            if done.is_set() and drain_until is None:
                drain_until = time.monotonic() + 1.0
            if drain_until is not None and time.monotonic() > drain_until:
                break
        publisher_thread.join()
        if failure:
            raise DemoDdsError(f"publishing the simulated streams failed: {failure[0]!r}")
        del errors_subscription
    finally:
        node_process.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    node_log = node_process.output() if node_process.log_path.exists() else ""
    shutil.rmtree(work, ignore_errors=True)

    sensor_names = tuple(robot.estimator_config.imu_names)
    estimates, latencies = [], []
    for k, (received_at, message) in enumerate(received):
        stamp_ns = message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        errors = error_rows[k] if k < len(error_rows) else [math.nan] * len(sensor_names)
        estimates.append(ReceivedEstimate(
            stamp=(stamp_ns - offset_ns) * 1e-9,
            q=np.asarray(message.position, dtype=float),
            position_names=tuple(message.name),
            sensor_errors_deg=dict(zip(sensor_names, errors, strict=False)),
        ))
        if stamp_ns in published_at:
            latencies.append(received_at - published_at[stamp_ns])
    if not estimates:
        raise DemoDdsError(f"the estimator node published no estimate; its output:\n{node_log[-2000:]}")
    counts = {f"imu {r.name}": len(r.stamps) for r in run.imus}
    counts["joint_states"] = len(run.encoders.stamps)
    joint_names = robot.estimated_joints + robot.encoder_joints
    report = tracking_report(estimates, truth, joint_names, robot.estimated_joints, counts, latencies,
                             settle_s=options.settle_s)
    passed = report.meets(options.max_rms_deg)
    path = "over DDS, estimator node in its own process"
    plot_path = summary_path = None
    if out_dir is not None:
        plot_path, summary_path = write_outputs(estimates, truth, report, options, passed, path, out_dir,
                                                joint_names)
    return DemoOutcome(estimates, truth, report, passed, path, plot_path, summary_path)
