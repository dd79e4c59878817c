"""benchmarks/node_latency.py: `./run bench node_latency`, the estimator node's input-to-output latency over DDS.

DESIGN.md's budget: 4 IMUs at 500 Hz into the node, p99 input-to-output latency < 2 ms, no dropped cycles for
60 s. Three processes on this machine:

* the ``estimator`` node (7-dof arm ros_dofkit/models/arm7.urdf, 4 IMUs, every joint estimated, IMUs sampled
  together: ``sync_tolerance``), started like the integration tests do;
* a publisher process (this file with ``--role publisher``) sending the 4 IMUs' exact readings of a known arm
  motion at --rate Hz, one sample set per tick, stamped with the wall clock just before the set is sent;
* this process, which subscribes to ``estimated/joint_states`` and takes latency = receive wall time - stamp
  (same clock: one machine), i.e. from the start of sending a set to having its estimate.

Printed: input rate (sets/s sent), output rate (estimates/s received), p50/p99/max latency, dropped cycles (sets
sent in the measured window without an estimate with their stamp), the node's own counters from /diagnostics,
and the ratios to the budget with PASS/MISS lines. The first --warmup seconds are not measured. Exit status 0
unless something fails to run; a missed budget is reported, not an error. The machine is shared: rerun before
trusting a MISS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

BUDGET_P99_MS = 2.0
BUDGET_DROPPED = 0
IMUS = {"upper_arm": "arm_link3", "forearm": "arm_link5", "wrist": "arm_link6", "hand": "arm_link7"}
NAMESPACE = "/latency_bench"

PARAMS = f"""/**:
  ros__parameters:
    urdf_files: [arm7.urdf]
    model_names: [arm]
    imu_names: [{", ".join(IMUS)}]
    imus:
{chr(10).join(f"      {name}: {{body: {body}, topic: {NAMESPACE}/imu/{name}}}" for name, body in IMUS.items())}
    estimated:
      arm: [all]
    joint_states_topic: {NAMESPACE}/joint_states
    output_namespace: {NAMESPACE}/estimated
    sync_tolerance: 0.0001
    stale_timeout: 0.1
    input_qos_depth: 100
    future_tolerance: 0.5
    diagnostics_period: 1.0
"""


def arm_motion(t: float):
    import numpy as np

    phase = 2 * np.pi * 0.5 * t + np.arange(7)
    return (np.array([0.1, -0.8, 0.2, -1.5, 0.1, 1.2, 0.3]) + 0.3 * np.sin(phase),
            0.3 * 2 * np.pi * 0.5 * np.cos(phase))


def run_publisher(rate: float, duration: float) -> int:
    """Publish the 4 IMUs at ``rate`` for ``duration`` s; print a JSON summary (sets sent, span) at the end."""
    import rclpy
    from sensor_msgs.msg import Imu

    from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
    from ros_dofkit.core.spatial import matrix_to_quat

    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    bodies = {name: plant.get_body_by_name(body) for name, body in IMUS.items()}
    # Precompute a period of readings so that publishing costs only the send itself.
    period_s = 2.0
    frames = int(period_s * rate)
    table = []
    for k in range(frames):
        q, v = arm_motion(k / rate)
        X_WB = plant.calc_body_poses(q)
        row = []
        for name, body in bodies.items():
            R_WS = X_WB[body.index, :3, :3]
            w_S = R_WS.T @ (plant.calc_angular_jacobian(q, body) @ v)
            row.append((name, matrix_to_quat(R_WS), w_S))
        table.append(row)
    rclpy.init()
    node = rclpy.create_node("latency_bench_publisher")
    publishers = {name: node.create_publisher(Imu, f"{NAMESPACE}/imu/{name}", 10) for name in IMUS}
    deadline = time.monotonic() + 60.0
    while any(p.get_subscription_count() == 0 for p in publishers.values()):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "the estimator never subscribed to the IMU topics"}), flush=True)
            return 1
        time.sleep(0.05)
    messages = {name: Imu() for name in IMUS}
    sent = 0
    start = time.monotonic()
    first_stamp = None
    tick = start
    while True:
        now = time.monotonic()
        if now - start > duration:
            break
        stamp_ns = time.time_ns()
        first_stamp = first_stamp or stamp_ns
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        for name, quaternion, gyro in table[sent % frames]:
            msg = messages[name]
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
            msg.orientation.w, msg.orientation.x, msg.orientation.y, msg.orientation.z = (float(c) for c in quaternion)
            msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = (float(c) for c in gyro)
            publishers[name].publish(msg)
        sent += 1
        tick += 1.0 / rate
        delay = tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # no busy wait: the machine's cores are shared with the node under test
    elapsed = time.monotonic() - start
    print(json.dumps({"sent": sent, "elapsed_s": elapsed, "first_stamp_ns": first_stamp, "last_stamp_ns": stamp_ns}),
          flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def node_command(tmp: Path) -> list:
    executable = shutil.which("estimator") or str(Path(sys.executable).parent / "estimator")
    if not os.access(executable, os.X_OK):
        return [sys.executable, "-m", "ros_dofkit.nodes.estimator"]
    return [executable]


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="./run bench node_latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=500.0, help="IMU sample sets per second (default 500)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds (default 60)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds sent before measuring (default 3)")
    parser.add_argument("--role", choices=["bench", "publisher"], default="bench", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "publisher":
        return run_publisher(args.rate, args.duration)

    os.environ.setdefault("ROS_DOMAIN_ID", str(50 + os.getpid() % 50))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from ros_dofkit.ros.qos import output_qos, tf_qos

    tmp = Path(tempfile.mkdtemp(prefix="dofkit_latency_"))
    params = tmp / "params.yaml"
    params.write_text(PARAMS)
    node_log = open(tmp / "estimator.log", "wb")
    estimator = subprocess.Popen([*node_command(tmp), "--ros-args", "--params-file", str(params)],
                                 stdout=node_log, stderr=subprocess.STDOUT, start_new_session=True)
    publisher = None
    try:
        rclpy.init()
        node = rclpy.create_node("latency_bench_probe")
        receipts = []  # (receive_ns, stamp_ns)
        diagnostics = []
        node.create_subscription(
            JointState, f"{NAMESPACE}/estimated/joint_states",
            lambda m: receipts.append((time.time_ns(), m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)),
            output_qos(100))
        node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
        # A realistic consumer set: TF is built and sent every cycle too (outputs without subscribers are not).
        tf_count = [0]
        node.create_subscription(TFMessage, "/tf", lambda m: tf_count.__setitem__(0, tf_count[0] + 1), tf_qos())
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        stop = threading.Event()
        spinner = threading.Thread(target=lambda: [executor.spin_once(0.05) for _ in iter(stop.is_set, True)],
                                   daemon=True)
        spinner.start()
        publisher = subprocess.Popen(
            [sys.executable, __file__, "--role", "publisher", "--rate", str(args.rate),
             "--duration", str(args.duration + args.warmup)],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        summary_line = publisher.communicate(timeout=args.duration + args.warmup + 180)[0].strip().splitlines()
        time.sleep(0.5)  # the last estimates in flight
        stop.set()
        spinner.join(2.0)
        summary = json.loads(summary_line[-1]) if summary_line else {"error": "publisher printed nothing"}
        if "error" in summary:
            print(f"error: {summary['error']}; node log: {tmp / 'estimator.log'}")
            return 1
        measure_from = summary["first_stamp_ns"] + int(args.warmup * 1e9)
        measured = [(r, s) for r, s in receipts if s >= measure_from]
        latencies_ms = [(r - s) / 1e6 for r, s in measured]
        sets_in_window = round((summary["last_stamp_ns"] - measure_from) / 1e9 * args.rate) + 1
        received_stamps = {s for _, s in measured}
        dropped = max(0, sets_in_window - len(received_stamps))
        window_s = (summary["last_stamp_ns"] - measure_from) / 1e9
        input_rate = summary["sent"] / summary["elapsed_s"]
        output_rate = len(received_stamps) / window_s if window_s > 0 else float("nan")
        p50, p99, worst = percentile(latencies_ms, 50), percentile(latencies_ms, 99), max(latencies_ms, default=0)
        print(f"estimator node latency: arm7 + 4 IMUs at {args.rate:g} Hz over DDS, {window_s:.1f} s measured "
              f"after {args.warmup:g} s warm-up")
        print(f"  input rate   {input_rate:9.1f} sets/s ({4 * input_rate:.0f} Imu messages/s)")
        print(f"  output rate  {output_rate:9.1f} estimates/s")
        print(f"  latency      p50 {p50:.3f} ms   p99 {p99:.3f} ms   max {worst:.3f} ms   "
              f"({len(latencies_ms)} estimates)")
        print(f"  dropped      {dropped} of {sets_in_window} sets without an estimate")
        print(f"  tf messages  {tf_count[0]} received (built every cycle)")
        if diagnostics:
            last = diagnostics[-1]
            for status in last.status:
                if status.name.endswith(": estimator"):
                    values = {v.key: v.value for v in status.values}
                    keys = ["cycles", "dropped_samples", "flushed_cycles", "rejected.total", "rejected.stale_stamp",
                            "solve_time_ms.mean",
                            "solve_time_ms.max"]
                    print("  node says    " + ", ".join(f"{k}={values.get(k)}" for k in keys))
        ratio = p99 / BUDGET_P99_MS
        print(f"budget p99 < {BUDGET_P99_MS} ms: p99/budget = {ratio:.2f} -> {'PASS' if ratio < 1 else 'MISS'}")
        print(f"budget no dropped cycles: {dropped} dropped -> {'PASS' if dropped <= BUDGET_DROPPED else 'MISS'}"
              + ("" if args.duration >= 60 else f" (measured {args.duration:g} s, the budget says 60 s)"))
        node.destroy_node()
        rclpy.try_shutdown()
        return 0
    finally:
        for process in (publisher, estimator):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
        node_log.close()


if __name__ == "__main__":
    sys.exit(main())
