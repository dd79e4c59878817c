"""benchmarks/node_latency.py: `./run bench node_latency`, the estimator node's input-to-output latency over DDS.

DESIGN.md's node budgets, one per --model:

* ``arm`` (default): 4 IMUs at 500 Hz into the node (7-dof arm ros_dofkit/models/arm7.urdf), p99 input-to-output
  latency < 2 ms and <= 1.5x the floor peer's p99 measured in the same round, no dropped set for 60 s;
* ``humanoid``: a full-body suit, the Unitree G1 of example-robot-data on a floating base (29 joints) with 17 IMUs
  at 240 Hz (~4,000 Imu messages/s, as an Xsens-class suit sends), p99 <= 2x the floor peer, no dropped set.

Three processes on this machine:

* the ``estimator`` node (every joint estimated, identity mountings, IMUs sampled together: ``sync_tolerance``),
  started like the integration tests do;
* a publisher process (this file with ``--role publisher``) sending the IMUs' exact readings of a 2 s periodic
  motion at --rate Hz, one sample set per tick, stamped with the wall clock just before the set is sent; it starts
  once the node under test has answered its request, and the estimator's traffic once the node's first /diagnostics
  reached this process: each side's first send to the other's shared-memory port has then been made, which Fast DDS
  can hold 333 ms (``answer_from_subscribers``; issue 18's stale samples);
* this process, which subscribes to ``estimated/joint_states`` and takes latency = receive wall time - stamp
  (same clock: one machine), i.e. from the start of sending a set to having its estimate.

Peers, under the same traffic (the same Imu messages per set at --rate Hz), measured just before the estimator in
each round:

* floor: the estimator's own I/O with no estimation (this file with ``--role floor``): the same raw subscriptions
  served by the same InputLoop (ros_dofkit/ros/input_loop.py), and on a set's last message the same two outputs,
  a pre-serialized JointState of the model's joints with the set's stamp and a TFMessage with one transform per
  moving joint. What any Python node with this I/O costs on this machine now: the part of the estimator's latency
  above it is the estimator's own work.
* relay (``--relay``, first round only): the trivial ``dofkit_relay`` node (ros_dofkit/nodes/relay.py:
  rclpy.spin, takes each Imu as a message object and republishes it); a set's latency is the time until all its
  messages are back. The cost of one plain rclpy + DDS hop with the usual executor.

``--repeat N`` runs N rounds (floor, then estimator); a budget holds only if it holds in the worst round, and each
PASS/MISS line prints the worst value with every round's. Printed per round: load average, input rate (sets/s
sent), output rate (estimates/s received), p50/p99/max latency, dropped sets (sets sent in the measured window
without an estimate with their stamp), the ratios to the peers and the node's own counters from /diagnostics. The
first --warmup seconds are not measured. Exit status 0 unless something fails to run; a missed budget is
reported, not an error. The machine may be shared: the load average is printed, rerun before trusting a MISS.

``--in-process`` measures, instead of the DDS rounds, the node's own per-set path in one process (no middleware):
each Imu of a set serialized, decoded and offered by ``ros.imu_input.feed_imu_cdr`` as the node's callback does,
each estimate encoded as the node's JointState and TF bytes; CPU per set of this tree and, alternating in fresh
processes, of ``--estimator-pythonpath``'s (before/after figures that a loaded machine disturbs far less than
latencies over DDS). With ``--paced`` the sets come one per tick of --rate, the process asleep in between, as over
DDS: the same work then costs about twice the CPU of the sets back to back (measured on a loaded machine; each set
starts after other processes ran on the core, presumably with cold caches), which accounts for what the node's
main thread spends over DDS above the in-process figure; the receive path is the floor's (benchmarks/README.md).

Where you are: ``benchmarks/`` (not part of the package). rclpy and message packages are imported inside the role
that needs them (the publisher, floor and probe are separate processes); ``--profile`` uses
benchmarks/profiling.py (py-spy, a tool, not a dependency).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.profiling import start_profiler, summarize_profile  # noqa: E402

NAMESPACE = "/latency_bench"


@dataclass(frozen=True)
class NodeLoad:
    """One robot the node is measured on, and its DESIGN.md budget.

    Attributes:
        name: the --model value.
        urdf: ``urdf_files`` entry (a shipped model name or an absolute path).
        base_joint: ``base_joints`` entry ("fixed" or "floating").
        imus: IMU name -> link it is mounted on (identity mounting).
        rate: default sample sets per second.
        centre: joint name -> centre angle of the periodic motion (others 0, clipped into the limits).
        p99_ms: absolute p99 budget (ms), or None.
        floor_ratio: p99 budget as a multiple of the floor peer's p99 measured in the same round.
    """

    name: str
    urdf: str
    base_joint: str
    imus: dict
    rate: float
    centre: dict
    p99_ms: float | None
    floor_ratio: float


def _humanoid_urdf() -> str:
    from benchmarks.scenarios import HUMANOID_URDF, robots_dir

    return str(robots_dir() / HUMANOID_URDF)


def node_loads() -> dict:
    """The --model choices: the DESIGN.md node budget (arm, 4 IMUs at 500 Hz) and the full-body suit (the G1
    humanoid with 17 IMUs at 240 Hz, ~4,000 Imu messages/s, as an Xsens-class suit sends)."""
    from benchmarks.scenarios import HUMANOID_CENTRE, HUMANOID_IMU_BODIES

    arm = NodeLoad("arm", "arm7.urdf", "fixed",
                   {"upper_arm": "arm_link3", "forearm": "arm_link5", "wrist": "arm_link6", "hand": "arm_link7"},
                   500.0, dict(zip([f"arm_joint{i}" for i in range(1, 8)], (0.1, -0.8, 0.2, -1.5, 0.1, 1.2, 0.3),
                                   strict=True)), 2.0, 1.5)
    humanoid = NodeLoad("humanoid", "", "floating", {body: body for body in HUMANOID_IMU_BODIES}, 240.0,
                        HUMANOID_CENTRE, None, 2.0)
    return {"arm": arm, "humanoid": humanoid}


BUDGET_DROPPED = 0


def load_by_name(name: str) -> NodeLoad:
    load = node_loads()[name]
    if not load.urdf:
        load = NodeLoad(load.name, _humanoid_urdf(), load.base_joint, load.imus, load.rate, load.centre, load.p99_ms,
                        load.floor_ratio)
    return load


def parameters_yaml(load: NodeLoad) -> str:
    """The estimator node's parameters for ``load``: every joint estimated, IMUs sampled together."""
    imus = "\n".join(f"      {name}: {{body: {body}, topic: {NAMESPACE}/imu/{name}}}"
                     for name, body in load.imus.items())
    return f"""/**:
  ros__parameters:
    urdf_files: [{load.urdf}]
    model_names: [robot]
    base_joints: [{load.base_joint}]
    imu_names: [{", ".join(load.imus)}]
    imus:
{imus}
    estimated:
      robot: [all]
    joint_states_topic: {NAMESPACE}/joint_states
    output_namespace: {NAMESPACE}/estimated
    sync_tolerance: 0.0001
    stale_timeout: 0.1
    input_qos_depth: 100
    future_tolerance: 0.5
    diagnostics_period: 1.0
"""


def load_plant(load: NodeLoad):
    from ros_dofkit.core.estimator.robot import ModelSpec, build_plant

    return build_plant([ModelSpec(load.urdf, "robot", load.base_joint)])


def periodic_motion(plant, load: NodeLoad, times):
    """(T, nq) positions of a 2 s periodic motion: every revolute joint swings 0.3 rad (less near a limit) about its
    centre at 0.5 Hz with its own phase; a floating base yaws ±0.3 rad at 0.5 Hz."""
    import numpy as np

    from ros_dofkit.core.spatial import rotvec_to_quat

    Q = np.tile(plant.default_positions(), (len(times), 1))
    lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
    k = 0
    for j in range(plant.num_joints()):
        joint = plant.get_joint(j)
        if joint.type_name != "revolute" or joint.num_positions != 1:
            continue
        i = joint.position_start
        lo, hi = lower[i] + 0.05, upper[i] - 0.05
        centre = float(np.clip(load.centre.get(joint.name, 0.0), lo, hi)) if lo < hi else 0.0
        reach = min(0.3, centre - lo, hi - centre) if np.isfinite(lo) and np.isfinite(hi) else 0.3
        Q[:, i] = centre + max(reach, 0.0) * np.sin(2 * np.pi * 0.5 * times + k)
        k += 1
    for joint in plant.floating_base_joints():
        s = joint.position_start
        yaw = 0.3 * np.sin(2 * np.pi * 0.5 * times)
        Q[:, s:s + 4] = rotvec_to_quat(np.stack([np.zeros_like(yaw), np.zeros_like(yaw), yaw], axis=-1))
    return Q


def imu_table(load: NodeLoad, rate: float, period_s: float = 2.0):
    """One period of readings, frame by frame: [(imu name, quaternion wxyz, gyro in S)] (exact orientations of the
    periodic motion; the gyro from the orientation change over one sample, wrapping at the period's end)."""
    import numpy as np

    from ros_dofkit.core.spatial import matrix_to_quat, matrix_to_rotvec

    plant = load_plant(load)
    frames = int(period_s * rate)
    times = np.arange(frames) / rate
    X_WB = plant.calc_body_poses(periodic_motion(plant, load, times))
    bodies = [plant.get_body_by_name(body).index for body in load.imus.values()]
    R_WS = X_WB[:, bodies, :3, :3]  # identity mountings
    R_next = np.roll(R_WS, -1, axis=0)
    gyro = matrix_to_rotvec(np.swapaxes(R_WS, -1, -2) @ R_next) * rate
    quats = matrix_to_quat(R_WS)
    return [[(name, quats[k, i], gyro[k, i]) for i, name in enumerate(load.imus)] for k in range(frames)]


#: ``TopicEndpointInfo.node_name`` of an endpoint whose node the ROS graph does not know (yet)
UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"


def answer_from_subscribers(node, topics, deadline: float) -> str | None:
    """Wait until every node subscribed to ``topics`` has answered one request from ``node`` (``get_parameters`` of
    ``use_sim_time``, which every rclpy node serves); None, or what did not happen before ``deadline``
    (``time.monotonic()``).

    Why before the first stamped set (issue 18): Fast DDS's shared-memory transport opens a reader's port on a
    writer's first send to it, after a health check of the port (``SharedMemGlobal::Port::healthy_check``): a
    listener idle since its process's watchdog last verified it fails the check until its wait next times out,
    and the sender sleeps the port's ``healthy_check_timeout_ms / 3`` (333 ms with Fast DDS's default 1,000 ms)
    before checking again, inside ``publish`` with the GIL held. A set stamped before that first send reached the
    node 0.29-0.67 s old and was rightly rejected as stale (one set, 17 samples, in 3 of 60 short humanoid rounds).
    A request reaches the node through the same port (its participant's unicast locator), so the port is open once
    the node has answered (no first set held in 60 rounds since), and the answer shows the node serving."""
    import rclpy
    from rcl_interfaces.srv import GetParameters

    own = (node.get_namespace(), node.get_name())
    while True:
        infos = [info for topic in topics for info in node.get_subscriptions_info_by_topic(topic)]
        targets = {(info.node_namespace, info.node_name) for info in infos} - {own}
        if infos and all(name != UNKNOWN_NODE for _, name in targets):
            break
        if time.monotonic() > deadline:
            return f"the nodes subscribed to {topics} never became known to the ROS graph"
        time.sleep(0.05)
    for namespace, name in sorted(targets):
        service = f"{namespace.rstrip('/')}/{name}/get_parameters"
        client = node.create_client(GetParameters, service)
        try:
            if not client.wait_for_service(timeout_sec=max(0.0, deadline - time.monotonic())):
                return f"{service} never appeared"
            future = client.call_async(GetParameters.Request(names=["use_sim_time"]))
            rclpy.spin_until_future_complete(node, future, timeout_sec=max(0.0, deadline - time.monotonic()))
            if not future.done():
                return f"{service} never answered"
        finally:
            node.destroy_client(client)
    return None


def run_publisher(load: NodeLoad, rate: float, duration: float, single_topic: str | None = None) -> int:
    """Publish the model's IMUs at ``rate`` for ``duration`` s; print a JSON summary (sets sent, span) at the end.

    ``single_topic``: send all messages of a set on that one topic (the relay peer) instead of one topic per
    IMU; the messages and their number are the same."""
    import rclpy
    from sensor_msgs.msg import Imu

    # A period of readings computed before sending, so that publishing costs only the send itself.
    table = imu_table(load, rate)
    frames = len(table)
    rclpy.init()
    node = rclpy.create_node("latency_bench_publisher")
    if single_topic:
        shared = node.create_publisher(Imu, single_topic, 10)
        publishers = {name: shared for name in load.imus}
    else:
        publishers = {name: node.create_publisher(Imu, f"{NAMESPACE}/imu/{name}", 10) for name in load.imus}
    deadline = time.monotonic() + 60.0
    while any(p.get_subscription_count() == 0 for p in publishers.values()):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "the node under test never subscribed to the IMU topics"}), flush=True)
            return 1
        time.sleep(0.05)
    unanswered = answer_from_subscribers(node, sorted({p.topic_name for p in publishers.values()}), deadline)
    if unanswered:
        print(json.dumps({"error": unanswered}), flush=True)
        return 1
    messages = {name: Imu() for name in load.imus}
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


def run_floor(load: NodeLoad) -> int:
    """The estimator's I/O without the estimator (see the module docstring); runs until SIGINT."""
    import numpy as np
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import Imu, JointState
    from tf2_msgs.msg import TFMessage

    from ros_dofkit.ros.input_loop import InputLoop
    from ros_dofkit.ros.live_cdr import JointStateEncoder, TfMessageEncoder
    from ros_dofkit.ros.qos import output_qos, sensor_input_qos, tf_qos
    from ros_dofkit.ros.tf_tree import tf_tree

    plant = load_plant(load)
    names = [plant.get_joint(j).name for j in range(plant.num_joints())
             if plant.get_joint(j).type_name == "revolute"]
    tree = tf_tree(plant)  # one transform per moving joint, as the estimator's TfBuilder
    moving, links = tree.moving_bodies, tree.frame_ids
    rclpy.init()
    node = rclpy.create_node("latency_bench_floor")
    joint_states = node.create_publisher(JointState, f"{NAMESPACE}/estimated/joint_states", output_qos(10))
    tf = node.create_publisher(TFMessage, "/tf", tf_qos())
    joint_state_encoder = JointStateEncoder(names)
    tf_encoder = TfMessageEncoder([tree.parent_frame_of(b) for b in moving], [links[b] for b in moving])
    # Arrays, as the estimator hands its encoders (the encoders convert lists too, at a cost).
    zeros = np.zeros(len(names))
    translations, quaternions = np.zeros((len(moving), 3)), np.tile([0.0, 0.0, 0.0, 1.0], (len(moving), 1))
    pending = {}  # (sec, nanosec) -> messages of that set received so far
    per_set = len(load.imus)

    def on_imu(data: bytes) -> None:
        key = struct.unpack_from("<iI", data, 4)
        count = pending.get(key, 0) + 1
        if count < per_set:
            pending[key] = count
            while len(pending) > 1000:  # sets that never complete
                pending.pop(next(iter(pending)))
            return
        pending.pop(key, None)
        if joint_states.get_subscription_count():
            joint_states.publish(joint_state_encoder.encode(key[0], key[1], zeros, zeros))
        if tf.get_subscription_count():
            tf.publish(tf_encoder.encode(key[0], key[1], translations, quaternions))

    qos = sensor_input_qos()
    qos.depth = 100  # as the estimator's input_qos_depth below
    loop = InputLoop(node)
    for name in load.imus:
        subscription = node.create_subscription(Imu, f"{NAMESPACE}/imu/{name}", on_imu, qos, raw=True)
        loop.add(subscription, on_imu)
    print("floor ready", flush=True)
    try:
        loop.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


#: --in-process: sets offered before the CPU time is taken (the first solves, tracking started)
IN_PROCESS_WARMUP_SETS = 50


def run_in_process(tree: str, table_path: str, sets: int, rounds: int, paced: bool = False) -> int:
    """The node's per-set path without DDS, in this process, on the estimator of source tree ``tree``: each Imu
    of a set serialized as it arrives, handed to ``feed_imu_cdr`` (decode, ``Estimator.process_imu``), and each
    result encoded as the node's outputs (JointState bytes, TF bytes); nothing published. Prints a JSON line: CPU
    per set (``time.process_time``, best round), the median and p99 of the sets' own times (perf_counter), the
    results per set and the estimator's source file (that ``tree`` was the one measured).

    ``paced``: one set per tick of the table's rate, the process asleep in between, as the node over DDS (else the
    sets back to back). The same work then costs more CPU: between two sets the core runs other processes and
    sleeps, and each set starts with the interpreter's, NumPy's and numba's code and data out of the caches."""
    sys.path.insert(0, str(Path(tree).resolve()))  # before the package is imported: the tree under test
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Imu

    from ros_dofkit.core.estimator import estimator as core
    from ros_dofkit.core.estimator.config import EstimatorConfig, ImuConfig
    from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
    from ros_dofkit.ros.estimator_messages import JointStateSelection
    from ros_dofkit.ros.imu_input import feed_imu_cdr
    from ros_dofkit.ros.tf_builder import TfBuilder

    load, rate, table = pickle.loads(Path(table_path).read_bytes())
    plant = build_plant([ModelSpec(load.urdf, "robot", load.base_joint)])
    config = EstimatorConfig(imus=tuple(ImuConfig(name, body) for name, body in load.imus.items()),
                             estimated_joints={"robot": "all"}, sync_tolerance_s=1e-4, stale_timeout_s=0.1,
                             future_tolerance_s=0.5)  # as parameters_yaml
    message, stream = Imu(), []
    for k in range(sets):
        stamp_ns = 1_000_000_000_000 + round(k * 1e9 / rate)
        message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        for name, quaternion, gyro in table[k % len(table)]:
            message.orientation.w, message.orientation.x, message.orientation.y, message.orientation.z = (
                float(c) for c in quaternion)
            velocity = message.angular_velocity
            velocity.x, velocity.y, velocity.z = (float(c) for c in gyro)
            stream.append((name, serialize_message(message), stamp_ns * 1e-9 + 1e-4))
    per_set = len(load.imus)
    tf = TfBuilder(plant)
    best, times, outputs = math.inf, [], 0
    period = 1.0 / rate if paced else 0.0
    for _ in range(rounds):
        estimator = core.Estimator(plant, config)
        joint_states = JointStateSelection(estimator)
        times, outputs = [], 0
        start_cpu = None
        tick = round_start = time.perf_counter()
        for k in range(0, len(stream), per_set):
            if k == IN_PROCESS_WARMUP_SETS * per_set:  # after a warm-up (first solves, tracking started)
                start_cpu = time.process_time()
            started = time.perf_counter()
            for name, data, now in stream[k:k + per_set]:
                sec, nanosec, _, results = feed_imu_cdr(estimator, name, data, now=now)
                for result in results:
                    outputs += 1
                    joint_states.serialized(result, sec, nanosec)
                    tf.moving_transforms_serialized(result.X_WB, sec, nanosec)
            times.append(time.perf_counter() - started)
            if period:  # the sleep's own system calls are CPU time too, a few microseconds of a set's hundreds
                tick += period
                time.sleep(max(0.0, tick - time.perf_counter()))
        best = min(best, (time.process_time() - start_cpu) / (sets - IN_PROCESS_WARMUP_SETS))
        span = time.perf_counter() - round_start  # the round's wall time (paced: at least sets / rate)
    times = sorted(times[IN_PROCESS_WARMUP_SETS:])
    print(json.dumps({"cpu_us_per_set": 1e6 * best, "p50_us": 1e6 * percentile(times, 50),
                      "p99_us": 1e6 * percentile(times, 99), "outputs_per_set": outputs / sets,
                      "round_s": span, "source": core.__file__}), flush=True)
    return 0


def in_process_comparison(args) -> int:
    """``--in-process``: :func:`run_in_process` in a fresh process per tree (this one, and ``--estimator-pythonpath``
    when given), the trees alternating ``--repeat`` times, so that both see the same machine."""
    tmp = Path(tempfile.mkdtemp(prefix="dofkit_inprocess_"))
    table = tmp / "table.pickle"
    table.write_bytes(pickle.dumps((args.load, args.rate, imu_table(args.load, args.rate))))
    trees = {"this tree": str(_REPO)}
    if args.estimator_pythonpath:
        trees[args.estimator_pythonpath] = args.estimator_pythonpath
    print(f"node path in process (decode, estimator, output encoding; no DDS): {args.load.name}, {len(args.load.imus)} "
          f"IMUs, {args.sets} sets per round " + (f"paced at {args.rate:g} Hz" if args.paced else "back to back")
          + f", best of 3 rounds per process, {args.repeat} process(es) per tree, load average "
          f"{os.getloadavg()[0]:.2f} at start")
    cpu = {label: [] for label in trees}
    for _ in range(max(1, args.repeat)):
        for label, tree in trees.items():
            command = [sys.executable, __file__, "--role", "in_process", "--tree", tree, "--table", str(table),
                       "--sets", str(args.sets)] + (["--paced"] if args.paced else [])
            line = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            result = json.loads(line)
            cpu[label].append(result["cpu_us_per_set"])
            print(f"  {label}: CPU {result['cpu_us_per_set']:.0f} us per set; a set's time p50 {result['p50_us']:.0f} "
                  f"us, p99 {result['p99_us']:.0f} us; {result['outputs_per_set']:.3f} outputs per set; a round "
                  f"{result['round_s']:.2f} s ({result['source']})")
    if len(trees) == 2:
        this, other = (min(values) for values in cpu.values())
        print(f"  best CPU per set: this tree {this:.0f} us, {args.estimator_pythonpath} {other:.0f} us: "
              f"x{this / other:.2f}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def node_command(name: str) -> list:
    executable = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not os.access(executable, os.X_OK):
        module = {"estimator": "ros_dofkit.nodes.estimator", "dofkit_relay": "ros_dofkit.nodes.relay"}[name]
        return [sys.executable, "-m", module]
    return [executable]


def isolate_ros_domain() -> None:
    """A DDS domain of this machine's own for the benchmark's processes, unless the caller chose one.

    ROS 2 ("About Domain ID") names 0-101 as safe domain ids and, on Linux, also 215-232 (their ports lie above the
    ephemeral range). The test sessions claim ids in 1..101 (test/conftest.py), so a benchmark run beside them takes
    one in 215..232: it never receives their /tf or /diagnostics, nor they its traffic."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(215 + os.getpid() % 18))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def spin_in_background(node, context, period: float = 0.05):
    """Spin ``node`` (a probe) on a thread of its own; returns the function that stops the thread and the executor."""
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stop = threading.Event()
    thread = threading.Thread(target=lambda: [executor.spin_once(period) for _ in iter(stop.is_set, True)],
                              daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(2.0)
        executor.shutdown()

    return halt


def process_cpu_seconds(pid: int) -> tuple[float, float]:
    """(all threads, main thread) user + system CPU time (s) process ``pid`` has used so far, from Linux's /proc; the
    other threads are the middleware's (DDS receive and event threads). NaN when it cannot be read. Unlike
    wall-clock latency, CPU time per message hardly depends on what else the machine runs."""

    def ticks(path: str) -> float:
        try:
            fields = Path(path).read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15 of stat(5)

    return ticks(f"/proc/{pid}/stat"), ticks(f"/proc/{pid}/task/{pid}/stat")


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def stop_process(process) -> None:
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def wait_for_node_under_test(probe, output_topic: str, wrote_to_probe, alive, deadline: float) -> None:
    """Return once ``probe`` sees the publisher of ``output_topic`` (the node under test is up and discovered, so
    that no set of the measured window is lost to discovery) and ``wrote_to_probe()`` holds (None: not awaited),
    or at ``deadline`` (``time.monotonic()``), or when ``alive()`` turns false; the traffic starts after it.

    ``wrote_to_probe``: the node has sent the probe a message (the estimator's /diagnostics), so it has opened the
    probe's shared-memory port before the traffic. Opening a port can hold the sender up to 333 ms with the GIL held
    (:func:`answer_from_subscribers`); in the node's first output, during the traffic, the sets queued meanwhile
    went stale (1,161 rejections in 1 of 60 short humanoid rounds, issue 18)."""
    while (probe.count_publishers(output_topic) == 0 or (wrote_to_probe is not None and not wrote_to_probe())) and \
            time.monotonic() < deadline and alive():
        time.sleep(0.05)


def measure(kind: str, args, tmp: Path) -> dict:
    """One measured run of ``kind`` ("estimator", "floor" or "relay") under the publisher's traffic: a dict of
    results.

    Latency of a set = the time its output is received minus its stamp. For the estimator and the floor the output
    is the JointState with the set's stamp; for the relay, the last of the set's 4 relayed Imu messages."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu, JointState
    from tf2_msgs.msg import TFMessage

    from ros_dofkit.ros.qos import output_qos, tf_qos

    log = open(tmp / f"{kind}.log", "ab")
    environment = None
    if kind == "estimator":
        command = [*node_command("estimator"), "--ros-args", "--params-file", str(tmp / "params.yaml")]
        single_topic = None
        if args.estimator_pythonpath:  # another checkout's node against the same peers ("before" numbers)
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(
                [str(Path(args.estimator_pythonpath).resolve()), *filter(None, [os.environ.get("PYTHONPATH")])])
    elif kind == "floor":
        command = [sys.executable, __file__, "--role", "floor", "--model", args.model]
        single_topic = None
    else:
        relay_in = f"{NAMESPACE}/relay/imu_in"
        # Input depth as the estimator's (input_qos_depth: 100), so that neither drops for lack of a queue.
        command = [*node_command("dofkit_relay"), "--ros-args", "-r", f"__ns:={NAMESPACE}/relay",
                   "-p", f"qos_overrides.{relay_in}.subscription.depth:=100"]
        single_topic = relay_in
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env=environment)
    publisher = profiler = None
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node(f"latency_bench_probe_{kind}", context=context)
        receipts = []  # (receive_ns, stamp_ns)
        first_output = threading.Event()
        diagnostics = []

        def on_output(data: bytes):
            # Raw CDR (no deserialization: the probe shares the 2 cores with the node under test). Both outputs
            # start with a std_msgs/Header: after the 4-byte encapsulation, int32 sec then uint32 nanosec.
            sec, nanosec = struct.unpack_from("<iI", data, 4)
            receipts.append((time.time_ns(), sec * 1_000_000_000 + nanosec))
            first_output.set()

        tf_count = [0]
        if kind != "relay":
            node.create_subscription(JointState, f"{NAMESPACE}/estimated/joint_states", on_output, output_qos(100),
                                     raw=True)
            # Kept serialized, read after the round: building a DiagnosticArray object (dozens of KeyValues) in
            # this process once a second would delay the receipt of the estimator's outputs, not of the floor's.
            node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10, raw=True)
            # A realistic consumer set: TF is built and sent every cycle too (outputs without subscribers are not).
            node.create_subscription(TFMessage, "/tf", lambda m: tf_count.__setitem__(0, tf_count[0] + 1),
                                     tf_qos(), raw=True)
        else:
            node.create_subscription(Imu, f"{NAMESPACE}/relay/imu_out", on_output, output_qos(100), raw=True)
        stop_spinning = spin_in_background(node, context)
        output_topic = f"{NAMESPACE}/relay/imu_out" if kind == "relay" else f"{NAMESPACE}/estimated/joint_states"
        # The floor and the relay write nothing before their first output: theirs pays the port's opening in the
        # warm-up. The estimator writes /diagnostics every second.
        wait_for_node_under_test(node, output_topic, (lambda: bool(diagnostics)) if kind == "estimator" else None,
                                 lambda: process.poll() is None, time.monotonic() + 120.0)
        duration = args.duration if kind == "estimator" else args.peer_duration
        publisher_command = [sys.executable, __file__, "--role", "publisher", "--model", args.model, "--rate",
                             str(args.rate), "--duration", str(duration + args.warmup)]
        if single_topic:
            publisher_command += ["--single-topic", single_topic]
        publisher = subprocess.Popen(publisher_command, stdout=subprocess.PIPE, text=True, start_new_session=True)
        # CPU time of the process under test over the measured window (from the warm-up's end after its first output
        # to the end of the traffic), per output set.
        cpu_window = {}

        input_topics = [single_topic] if single_topic else [f"{NAMESPACE}/imu/{name}" for name in args.load.imus]

        def cpu_start() -> None:
            if first_output.wait(timeout=duration + args.warmup + 120):
                time.sleep(args.warmup)
                cpu_window["start"] = (process_cpu_seconds(process.pid), len(receipts))
                # Other processes on this DDS domain (another benchmark run picked the same id) would add readers
                # to the node's output or traffic to its inputs: counted here, printed when there are any.
                cpu_window["foreign"] = (node.count_subscribers(output_topic) - 1,
                                         sum(node.count_publishers(topic) for topic in input_topics)
                                         - len(input_topics))

        cpu_thread = threading.Thread(target=cpu_start, daemon=True)
        cpu_thread.start()
        if args.profile and kind in ("estimator", "floor"):
            # From the warm-up's length after the first output (start-up left out) to the end of the traffic.
            profiler = start_profiler(process.pid, args.profile / f"{kind}_{args.round_number}.txt", args.warmup,
                                      duration, after=first_output)
        summary_line = publisher.communicate(timeout=duration + args.warmup + 180)[0].strip().splitlines()
        cpu_end = (process_cpu_seconds(process.pid), len(receipts))
        if profiler is not None:
            profiler.join()
        time.sleep(0.5)  # the last outputs in flight
        stop_spinning()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
        stop_process(publisher)
        stop_process(process)
        log.close()
    summary = json.loads(summary_line[-1]) if summary_line else {"error": "publisher printed nothing"}
    if "error" in summary:
        return {"error": f"{summary['error']}; node log: {tmp / (kind + '.log')}"}
    measure_from = summary["first_stamp_ns"] + int(args.warmup * 1e9)
    complete = {}  # stamp -> (messages received, last receive time)
    for received, stamp in receipts:
        if stamp >= measure_from:
            count, last = complete.get(stamp, (0, 0))
            complete[stamp] = (count + 1, max(last, received))
    needed = 1 if kind != "relay" else len(args.load.imus)
    cpu_us_per_set = main_us_per_set = float("nan")
    if "start" in cpu_window and cpu_end[1] > cpu_window["start"][1]:
        sets = (cpu_end[1] - cpu_window["start"][1]) / needed
        cpu_us_per_set, main_us_per_set = ((end - start) / sets * 1e6
                                           for end, start in zip(cpu_end[0], cpu_window["start"][0], strict=True))
    done = {stamp: last for stamp, (count, last) in complete.items() if count >= needed}
    latencies_ms = [(last - stamp) / 1e6 for stamp, last in done.items()]
    if kind != "relay":  # every receipt counts (a duplicate stamp would be an error worth seeing in max)
        latencies_ms = [(r - s) / 1e6 for r, s in receipts if s >= measure_from]
    sets_in_window = round((summary["last_stamp_ns"] - measure_from) / 1e9 * args.rate) + 1
    window_s = (summary["last_stamp_ns"] - measure_from) / 1e9
    result = {
        "window_s": window_s,
        "input_rate": summary["sent"] / summary["elapsed_s"],
        "output_rate": len(done) / window_s if window_s > 0 else float("nan"),
        "p50": percentile(latencies_ms, 50), "p99": percentile(latencies_ms, 99),
        "max": max(latencies_ms, default=float("nan")), "count": len(latencies_ms),
        "dropped": max(0, sets_in_window - len(done)), "sets": sets_in_window, "tf": tf_count[0],
        "sent": summary["sent"], "cpu_us_per_set": cpu_us_per_set,
        "main_thread_us_per_set": main_us_per_set, "foreign": cpu_window.get("foreign", (0, 0)),
    }
    if diagnostics:
        for status in deserialize_message(diagnostics[-1], DiagnosticArray).status:
            if status.name.endswith(": estimator"):
                result["node_says"] = {v.key: v.value for v in status.values}
    return result


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 (a CPU time below the clock tick of a very short round) or NaN."""
    return a / b if b else float("nan")


def worst(rounds, key):
    """The largest value of ``key`` over the rounds (the worst round of a latency, a ratio or a count)."""
    return max(key(r) for r in rounds)


def budget_lines(load: NodeLoad, rounds, duration: float) -> list:
    """PASS/MISS per DESIGN.md budget of ``load``, each over the worst of the rounds: a round is a dict with the
    estimator's result under "estimator" and the floor peer's (measured just before) under "floor"."""
    lines = []
    count = f"worst of {len(rounds)} round{'s' if len(rounds) > 1 else ''}"
    p99s = " ".join(f"{r['estimator']['p99']:.3f}" for r in rounds)
    if load.p99_ms is not None:
        p99 = worst(rounds, lambda r: r["estimator"]["p99"])
        lines.append(f"{'PASS' if p99 < load.p99_ms else 'MISS'}  node p99 < {load.p99_ms:g} ms: {p99:.3f} ms = "
                     f"{p99 / load.p99_ms:.2f}x the budget ({count}: {p99s} ms)")
    if all("floor" in r for r in rounds):
        ratios = [r["estimator"]["p99"] / r["floor"]["p99"] for r in rounds]
        ratio = max(ratios)
        lines.append(f"{'PASS' if ratio <= load.floor_ratio else 'MISS'}  node p99 <= {load.floor_ratio:g}x the floor "
                     f"peer's p99 in the same round: {ratio:.2f}x ({count}: "
                     f"{' '.join(f'{x:.2f}x' for x in ratios)})")
    else:
        lines.append(f"NOT MEASURED  node p99 <= {load.floor_ratio:g}x the floor peer (--peer-duration 0)")
    dropped = worst(rounds, lambda r: r["estimator"]["dropped"])
    note = "" if duration >= 60 else f" (measured {duration:g} s per round, the budget says 60 s)"
    lines.append(f"{'PASS' if dropped <= BUDGET_DROPPED else 'MISS'}  0 dropped sets: {dropped} in the worst round"
                 + note)
    return lines


def print_result(label: str, result: dict, rate: float, imus: int) -> None:
    print(f"  {label}: input {result['input_rate']:.1f} sets/s ({imus * result['input_rate']:.0f} Imu messages/s), "
          f"output {result['output_rate']:.1f}/s; latency p50 {result['p50']:.3f} ms  p99 {result['p99']:.3f} ms  "
          f"max {result['max']:.3f} ms ({result['count']} outputs); dropped {result['dropped']} of {result['sets']} "
          f"sets; {result['tf']} tf messages; CPU {result['cpu_us_per_set']:.0f} us per set "
          f"({result['cpu_us_per_set'] * rate / 1e4:.0f} % of a core; main thread "
          f"{result['main_thread_us_per_set']:.0f} us, middleware threads "
          f"{result['cpu_us_per_set'] - result['main_thread_us_per_set']:.0f} us)")
    if any(result["foreign"]):
        print(f"    warning: other processes on this DDS domain: {result['foreign'][0]} more subscriber(s) of the "
              f"output, {result['foreign'][1]} more publisher(s) of the inputs; rerun with another ROS_DOMAIN_ID")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="./run bench node_latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["arm", "humanoid"], default="arm",
                        help="arm: 7-dof arm + 4 IMUs at 500 Hz (the node budget); humanoid: the G1 with 17 IMUs at "
                             "240 Hz (the full-body budget)")
    parser.add_argument("--rate", type=float, default=None, help="IMU sample sets per second (default: the model's)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds per round (default 60)")
    parser.add_argument("--peer-duration", type=float, default=None,
                        help="measured seconds of the floor peer per round (default: --duration; 0 = no peers)")
    parser.add_argument("--relay", action="store_true",
                        help="also measure the dofkit_relay peer (rclpy.spin + message objects) in the first round")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds (floor peer, then the estimator); each budget counts the worst round (default 1)")
    parser.add_argument("--estimator-pythonpath", default=None,
                        help="run the estimator node from this source tree (e.g. an older checkout, for before/after "
                             "numbers against the same peers)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds sent before measuring (default 3)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="run the floor and the estimator under py-spy (sampling, from outside), write their "
                             "collapsed stacks to DIR and print the busiest functions (latencies then include "
                             "py-spy's sampling cost)")
    parser.add_argument("--in-process", action="store_true",
                        help="instead of the DDS rounds: the node's per-set path in process (decode, estimator, "
                             "output encoding), CPU per set of this tree and --estimator-pythonpath's, alternating")
    parser.add_argument("--sets", type=int, default=2000, help="--in-process: sample sets per round (default 2000)")
    parser.add_argument("--paced", action="store_true",
                        help="--in-process: one set per tick of --rate, asleep in between, as over DDS (default: the "
                             "sets back to back)")
    parser.add_argument("--role", choices=["bench", "publisher", "floor", "in_process"], default="bench",
                        help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--table", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--single-topic", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "in_process":  # before anything imports the package: the tree under test is the one imported
        return run_in_process(args.tree, args.table, args.sets, 3, args.paced)
    args.load = load_by_name(args.model)
    if args.rate is None:
        args.rate = args.load.rate
    if args.role == "publisher":
        return run_publisher(args.load, args.rate, args.duration, args.single_topic)
    if args.role == "floor":
        return run_floor(args.load)
    if args.in_process:
        if args.sets <= IN_PROCESS_WARMUP_SETS:
            parser.error(f"--sets: expected more than the {IN_PROCESS_WARMUP_SETS} warm-up sets, got {args.sets}")
        return in_process_comparison(args)
    if args.peer_duration is None:
        args.peer_duration = args.duration

    isolate_ros_domain()
    tmp = Path(tempfile.mkdtemp(prefix="dofkit_latency_"))
    (tmp / "params.yaml").write_text(parameters_yaml(args.load))
    load = args.load
    print(f"estimator node latency: {load.name} ({Path(load.urdf).name}, {load.base_joint} base) + {len(load.imus)} "
          f"IMUs at {args.rate:g} Hz over DDS, {args.repeat} round(s) of {args.duration:g} s measured after "
          f"{args.warmup:g} s warm-up" + (f"; node from {args.estimator_pythonpath}" if args.estimator_pythonpath
                                         else ""))
    print(f"  on {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min) "
          "at start")
    rounds = []
    for k in range(max(1, args.repeat)):
        args.round_number = k + 1
        one = {}
        kinds = (["relay"] if args.relay and k == 0 else []) + (["floor"] if args.peer_duration > 0 else [])
        for kind in kinds + ["estimator"]:
            one[kind] = measure(kind, args, tmp)
            if "error" in one[kind]:
                print(f"error: {kind}: {one[kind]['error']}")
                return 1
        rounds.append(one)
        print(f"round {k + 1} (load average {os.getloadavg()[0]:.2f}):")
        labels = {"relay": "relay peer (dofkit_relay, rclpy.spin, Imu objects)",
                  "floor": "floor peer (the estimator's I/O, no estimation)", "estimator": "estimator"}
        for kind in kinds + ["estimator"]:
            print_result(labels[kind], one[kind], args.rate, len(load.imus))
        for kind in kinds:
            print(f"  estimator / {kind}: p50 x{one['estimator']['p50'] / one[kind]['p50']:.2f}   "
                  f"p99 x{one['estimator']['p99'] / one[kind]['p99']:.2f}   CPU per set "
                  f"x{ratio(one['estimator']['cpu_us_per_set'], one[kind]['cpu_us_per_set']):.2f}")
        if "node_says" in one["estimator"]:
            values = one["estimator"]["node_says"]
            keys = ["cycles", "dropped_samples", "flushed_cycles", "rejected.total", "rejected.stale_stamp",
                    "solve_time_ms.mean", "solve_time_ms.max"]
            # One cycle per sample set is the estimator's rule: cycles well above the sets sent mean split sets.
            print("  node says: " + ", ".join(f"{key}={values.get(key)}" for key in keys)
                  + f" (its last diagnostics, <= 1 s before the end; {one['estimator']['sent']} sets sent in all)")
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            print(f"  profile {path}:")
            for line in summarize_profile(path):
                print(line)
    print("budgets:")
    for line in budget_lines(load, rounds, args.duration):
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
