"""benchmarks/cold_start.py: `./run bench cold_start`, time from a fresh process to the first estimate.

DESIGN.md's start-up budget: once installed, a fresh ``dofkit replay`` process and a fresh ``estimator`` node reach
their first estimate within 2 s. Numba compiles the kernels on their first use on a machine (about 25-47 s) and
caches them; "installed" means that cache exists, so this benchmark first runs one untimed replay (its wall time is
printed as the cold-cache figure) and then measures fresh processes, --repeat times, printing the worst:

* ``dofkit replay`` on a short demo recording (--duration s of 4 IMUs at 400 Hz), in a fresh interpreter that
  reports, each from its own clock: interpreter start-up (this process's wall clock before the spawn to the
  child's first line), imports (``ros_dofkit.cli`` and everything ``dofkit replay`` imports before it reads),
  the first replay (loading the compiled kernels from numba's cache + reading, estimating, writing) and a second
  replay of the same bag in the same process (the same work with the kernels loaded): kernel-cache load = first -
  second, first estimate = second. The budget line is start-up + imports + first replay.
* the ``estimator`` node (the arm of benchmarks/node_latency.py, 4 IMUs at 500 Hz), spawned through a wrapper that
  prints wall-clock marks; a publisher runs from before the spawn (the node is spawned --publisher-head-start s
  after the publisher appeared in this process's graph; it sends sample sets once the node's subscriptions match),
  this process receives the outputs. Printed: what is the node's own (interpreter start-up,
  imports, construction: rclpy.init, parameters, plant, estimator, publishers and subscriptions, without the
  kernels: loading the compiled kernels from numba's cache, wherever construction needs them; ready = spawn to
  spinning) and what is DDS's (discovery: from spinning to the stamp of the first set it estimates), then that
  set's latency (the first cycle); and, counted from the creation of the node's DDS participant, when its graph
  first listed the publisher on every IMU topic (participant and endpoint discovery done, whether or not it
  subscribes yet), when the publisher sent its next announcement after that creation (from the moment its own
  participant was created and Fast DDS's announcement schedule, :func:`next_announcement`), and when every IMU
  subscription had matched (``Subscription.get_publisher_count()``). A node whose graph lists the publisher only
  ~0.1 s after that announcement (the endpoint exchange) has waited for it.
  The budget line is spawn to first estimate, under each discovery setting (--discovery): Fast DDS's defaults
  everywhere; the package's fast-discovery profile (config/fastdds_fast_discovery.xml) in the node only;
  in the publisher only (the processes that already run); in both. A second line leaves discovery out (the node's
  own part).

Why the settings differ (measured; README, "Joining a running graph"): a new Fast DDS 2.x participant
sends its first announcement before it registers its receivers (``RTPSParticipantImpl::enable``), and a running
participant answers a newcomer's announcement once, to the newcomer alone (``PDPStatelessWriter::
matched_reader_add``). When that answer arrives within the newcomer's window it is dropped, and the newcomer learns
of the running participant only at its next periodic announcement: every 3 s on Fast DDS's defaults, every 0.5 s
with the profile. So the wait belongs to the processes that were already running, and only their profile bounds it;
the node's own profile bounds the wait of processes that start after the node. The probe that receives the
estimates (this process) always uses the profile: it is the instrument, and its discovery of the node never delays
the first estimate it sees.

Where you are: ``benchmarks/`` (not part of the package). It imports ros_dofkit's demo recorder and rclpy only
inside the functions that need them (the measured children must import everything themselves, in fresh
interpreters), and reuses node_latency.py's node parameters, publisher, probe spin and process helpers. Exit status
0 unless something fails to run; a missed budget is reported, not an error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import node_latency  # noqa: E402

BUDGET_S = 2.0
#: The package's fast-discovery Fast DDS profile, and the variables that name a default profile file: Fast DDS 2.x
#: (ROS 2 Jazzy, these wheels) reads FASTRTPS_DEFAULT_PROFILES_FILE, Fast DDS 3 FASTDDS_DEFAULT_PROFILES_FILE.
FAST_DISCOVERY_PROFILE = _REPO / "config" / "fastdds_fast_discovery.xml"
FAST_DISCOVERY_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")

#: The child of a replay measurement: argv = bag, config, out prefix. It prints one JSON line of wall-clock times.
_REPLAY_CHILD = """
import time
started = time.time()
t0 = time.perf_counter()
import json, sys
from ros_dofkit.cli import main
# what `dofkit replay` imports before it reads (ros_dofkit/commands/replay.py, run())
import ros_dofkit.commands.replay, ros_dofkit.core.estimator.config, ros_dofkit.replay.bag_replay
import ros_dofkit.replay.pipeline, ros_dofkit.replay.progress, ros_dofkit.replay.setup, ros_dofkit.ros.bag_io
import ros_dofkit.ros.parameters
t1 = time.perf_counter()
bag, config, out = sys.argv[1:4]
first = main(["replay", bag, "--config", config, "--out", out + "_1", "--quiet"])
t2 = time.perf_counter()
second = main(["replay", bag, "--config", config, "--out", out + "_2", "--quiet"])
t3 = time.perf_counter()
print(json.dumps({"started": started, "imports": t1 - t0, "first": t2 - t1, "second": t3 - t2,
                  "status": [first, second]}))
"""

#: The node's wrapper: prints wall-clock marks (imports done; the node built, its subscriptions created, spinning)
#: and the time spent loading compiled kernels from numba's cache before spinning (wherever construction loads them:
#: the estimator's state, the warm-up cycle, TF), the creation of its DDS participant (its first rclpy Node), the
#: moment its graph first lists a publisher on each IMU topic (COLD_START_IMU_TOPICS; ``Node.count_publishers`` polled
#: on a thread from the participant's creation on: the node has discovered the publisher's participant and writers,
#: whether or not it subscribes yet) and the moment each IMU subscription matched (``get_publisher_count``, polled
#: from spinning on), then runs the console script's main. The marks wrap numba's dispatcher entry for uncompiled
#: signatures, rclpy's ``Node.__init__`` (once) and the node module's ``_spin`` (called by its global name); the node
#: itself is unchanged.
_NODE_CHILD = """
import time, sys
started = time.time()
import os, threading
from numba.core.dispatcher import Dispatcher
import rclpy.node
import ros_dofkit.nodes.estimator as estimator
said = threading.Lock()
def say(*words):  # one write per line under a lock: the two watcher threads' lines must not interleave
    with said:
        sys.stdout.write(" ".join(str(w) for w in words) + "\\n")
        sys.stdout.flush()
say("imported", started, time.time())
node_init = rclpy.node.Node.__init__
def watch(node, topics, deadline, word, count):
    pending = list(topics)
    while pending and time.time() < deadline:
        for topic in [t for t in pending if count(node, t) > 0]:
            say(word, time.time(), topic)
            pending.remove(topic)
        time.sleep(0.002)
def marked_init(self, *args, **kwargs):
    node_init(self, *args, **kwargs)  # the process's DDS participant exists once its first node does
    say("participant", time.time())
    rclpy.node.Node.__init__ = node_init
    threading.Thread(target=watch, args=(self, os.environ["COLD_START_IMU_TOPICS"].split(","), time.time() + 60.0,
                                         "discovered", type(self).count_publishers), daemon=True).start()
rclpy.node.Node.__init__ = marked_init
compile_for_args, spin, loading = Dispatcher._compile_for_args, estimator._spin, [0.0, 0]
def timed_compile_for_args(self, *args, **kwargs):
    loading[1] += 1
    begun = time.perf_counter()
    try:
        return compile_for_args(self, *args, **kwargs)
    finally:
        loading[1] -= 1
        if loading[1] == 0:  # outermost only
            loading[0] += time.perf_counter() - begun
def marked_spin(node):
    say("spinning", time.time())
    say("kernels", loading[0])
    imus = {s.topic_name: s for s, _ in node.input_subscriptions}
    threading.Thread(target=watch, args=(imus, os.environ["COLD_START_IMU_TOPICS"].split(","), time.time() + 60.0,
                                         "matched", lambda imus, t: imus[t].get_publisher_count()), daemon=True).start()
    spin(node)
Dispatcher._compile_for_args, estimator._spin = timed_compile_for_args, marked_spin
sys.argv = ["estimator", *sys.argv[1:]]
estimator.main()
"""

#: The publisher's wrapper: argv = the repository, then node_latency's arguments. It prints the wall-clock time its DDS
#: participant was created (its rclpy node made), then runs node_latency's publisher unchanged.
_PUBLISHER_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import rclpy
from benchmarks import node_latency
create_node = rclpy.create_node
def marked_create_node(*args, **kwargs):
    node = create_node(*args, **kwargs)
    print("participant", time.time(), flush=True)
    return node
rclpy.create_node = marked_create_node
sys.exit(node_latency.main(sys.argv[2:]))
"""

#: A Fast DDS 2.x participant's announcements (PDP::enable, set_next_announcement_interval): one when it is created,
#: ``count`` more every ``period`` s, then one every ``lease_announcement`` s; Fast DDS's defaults and the profile's.
ANNOUNCEMENTS = {False: (5, 0.1, 3.0), True: (20, 0.1, 0.5)}


def next_announcement(created: float, after: float, profiled: bool) -> float:
    """The first announcement of a participant created at ``created`` that is sent at or after ``after`` (seconds)."""
    count, period, lease_announcement = ANNOUNCEMENTS[profiled]
    if after <= created + count * period:
        return created + max(math.ceil((after - created) / period - 1e-9), 0) * period
    last_initial = created + count * period
    return last_initial + math.ceil((after - last_initial) / lease_announcement - 1e-9) * lease_announcement


#: The discovery settings a node is measured under: Fast DDS's defaults in every process, the package's fast-discovery
#: profile (config/fastdds_fast_discovery.xml) in the node only, in the publisher only (the process that already
#: runs when the node starts: its periodic announcement is what a late node waits for) or in both, as a user sets it
#: for a robot's processes. This process's probe always uses the profile (see the module docstring).
DISCOVERY = ("default", "node", "publisher", "fast")
LABELS = {"default": "Fast DDS defaults", "node": "fast-discovery profile in the node",
          "publisher": "fast-discovery profile in the publisher", "fast": "fast-discovery profile"}
#: Where each setting's profile is, in the budget lines.
WHERE = {"default": "Fast DDS defaults in publisher and node",
         "node": "fast-discovery profile in the node only, Fast DDS defaults in the publisher",
         "publisher": "fast-discovery profile in the publisher only, Fast DDS defaults in the node",
         "fast": "fast-discovery profile in publisher and node"}
#: The roles that carry the profile under each setting.
PROFILED = {"default": (), "node": ("node",), "publisher": ("publisher",), "fast": ("node", "publisher")}


def discovery_environment(kind: str, role: str = "node") -> dict:
    """os.environ for the ``role`` ("node" or "publisher") of one discovery setting (see :data:`DISCOVERY`)."""
    environment = dict(os.environ)
    for variable in FAST_DISCOVERY_VARIABLES:
        environment.pop(variable, None)
        if role in PROFILED[kind]:
            environment[variable] = str(FAST_DISCOVERY_PROFILE)
    return environment


def replay_once(bag: Path, config: Path, out: Path) -> dict:
    """One fresh ``dofkit replay`` interpreter: the phases in seconds (see the module docstring)."""
    spawned = time.time()
    finished = subprocess.run([sys.executable, "-c", _REPLAY_CHILD, str(bag), str(config), str(out)],
                              capture_output=True, text=True, cwd=_REPO, timeout=600)
    total = time.time() - spawned
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    if finished.returncode != 0 or not lines:
        raise RuntimeError(f"the replay child exited with {finished.returncode}: {finished.stderr[-2000:]}")
    phases = json.loads(lines[-1])
    if phases["status"] != [0, 0]:
        raise RuntimeError(f"dofkit replay returned {phases['status']}: {finished.stderr[-2000:]}")
    startup = phases["started"] - spawned
    return {"startup": startup, "imports": phases["imports"], "kernels": phases["first"] - phases["second"],
            "estimate": phases["second"], "to_first": startup + phases["imports"] + phases["first"],
            "process": total}


def _marks(lines) -> dict:
    """The child's marks: {"imported": [started, done], "participant": [t], "spinning": [t], "kernels": [seconds
    loading kernels], "discovered": [t each IMU topic's publisher entered the node's graph], "matched": [t of each IMU
    subscription's first match]}."""
    marks = {"discovered": [], "matched": []}
    for line in lines:
        word, *values = line.split()
        if word in ("imported", "participant", "kernels", "spinning"):
            marks[word] = [float(v) for v in values]
        elif word in ("discovered", "matched"):
            marks[word].append(float(values[0]))
    return marks


def node_once(args, tmp: Path, k: int, discovery: str) -> dict:
    """One fresh estimator node under the arm's traffic: the phases in seconds (see the module docstring).

    ``discovery`` (:data:`DISCOVERY`) sets the Fast DDS profile of the publisher and the node;
    the probe that receives the estimates is this process's and always uses the fast profile (see main), so that
    its own discovery of the node never delays the first estimate it sees."""
    import rclpy
    from sensor_msgs.msg import JointState

    from ros_dofkit.ros.qos import output_qos

    load = node_latency.load_by_name("arm")
    log = open(tmp / f"node_{discovery}_{k}.log", "wb")
    received = []
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"cold_start_probe_{discovery}_{k}", context=context)
    node.create_subscription(JointState, f"{node_latency.NAMESPACE}/estimated/joint_states",
                             lambda data: received.append((time.time(), struct.unpack_from("<iI", data, 4))),
                             output_qos(100), raw=True)
    stop_spinning = node_latency.spin_in_background(node, context, period=0.02)
    publisher = process = None
    try:
        # The publisher first, so that sets are on the wire from the moment the node subscribes (it sends once each
        # of its topics has a subscriber).
        publisher = subprocess.Popen([sys.executable, "-c", _PUBLISHER_CHILD, str(_REPO), "--role", "publisher",
                                      "--model", "arm", "--rate", str(load.rate), "--duration", str(args.node_timeout)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True, env=discovery_environment(discovery, "publisher"))
        # The node joins a running publisher: spawned once the publisher's node is in the probe's graph (its imports
        # and table are not part of the node's start-up, and on a loaded machine they can outlast a fixed head
        # start), then --publisher-head-start later, past the publisher's own first announcements.
        deadline = time.time() + args.node_timeout
        while "latency_bench_publisher" not in node.get_node_names():
            if time.time() > deadline or publisher.poll() is not None:
                raise RuntimeError("the IMU publisher never appeared in the probe's graph")
            time.sleep(0.01)
        time.sleep(args.publisher_head_start)
        environment = discovery_environment(discovery, "node")
        environment["COLD_START_IMU_TOPICS"] = ",".join(f"{node_latency.NAMESPACE}/imu/{name}" for name in load.imus)
        spawned = time.time()
        process = subprocess.Popen([sys.executable, "-c", _NODE_CHILD, "--ros-args", "--params-file",
                                    str(tmp / "params.yaml")], stdout=subprocess.PIPE, stderr=log, text=True,
                                   start_new_session=True, env=environment)
        deadline = time.time() + args.node_timeout
        while not received and time.time() < deadline and process.poll() is None:
            time.sleep(0.002)
        if not received:
            raise RuntimeError(f"the node sent no estimate within {args.node_timeout} s; log: {log.name}")
    finally:
        stop_spinning()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        node_latency.stop_process(publisher)
        node_latency.stop_process(process)
        log.close()
    marks = _marks(process.stdout.read().splitlines())
    (publisher_created,) = _marks(publisher.stdout.read().splitlines())["participant"]
    first_output, (stamp_sec, stamp_nanosec) = received[0]
    first_input = stamp_sec + stamp_nanosec * 1e-9  # the stamp of the set it estimated (publisher wall clock)
    (started, imported), (spinning,), (kernels,) = marks["imported"], marks["spinning"], marks["kernels"]
    (participant,), discovered, matched = marks["participant"], marks["discovered"], marks["matched"]
    if not len(discovered) == len(matched) == len(load.imus):
        raise RuntimeError(f"of the node's {len(load.imus)} IMU topics, {len(discovered)} had a publisher in its "
                           f"graph and {len(matched)} subscriptions matched; log: {log.name}")
    return {"startup": started - spawned, "imports": imported - started, "construction": spinning - imported - kernels,
            "kernels": kernels, "ready": spinning - spawned,
            "discovery": max(first_input - spinning, 0.0), "latency": first_output - max(first_input, spinning),
            "to_first": first_output - spawned, "participant": participant - spawned,
            "discovered": max(discovered) - participant, "matched": max(matched) - participant,
            "announced": next_announcement(publisher_created, participant, "publisher" in PROFILED[discovery])
            - participant}


def worst_line(label: str, runs: list, keys) -> str:
    worst = {key: max(run[key] for run in runs) for key in keys}
    return label + ", ".join(f"{key} {worst[key]:.3f}" for key in keys) + " s"


def budget_line(what: str, runs: list, key: str = "to_first", until: str = "its first estimate") -> str:
    """PASS/MISS of the start-up budget over the worst of the runs (``key``: the phase or sum compared)."""
    times = [run[key] for run in runs]
    return (f"{'PASS' if max(times) <= BUDGET_S else 'MISS'}  fresh {what} to {until}: {max(times):.2f} s "
            f"= {max(times) / BUDGET_S:.2f}x the budget (<= {BUDGET_S:g} s; worst of {len(times)}: "
            f"{' '.join(f'{t:.2f}' for t in times)} s)")


def verdict_lines(measured: dict) -> list:
    """The node's budget by what the processes already running had, the node's own profile aside (it does not bound
    the wait; see the module docstring): Fast DDS's defaults (settings default and node) or the profile (publisher
    and fast). ``measured``: setting -> its runs."""
    lines = []
    for running, settings in (("on Fast DDS defaults", ("default", "node")),
                              ("with the profile", ("publisher", "fast"))):
        runs = [run for setting in settings for run in measured.get(setting, ())]
        if runs:
            lines.append(budget_line(f"estimator node beside running processes {running}, any node setting", runs))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="./run bench cold_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per measurement; the worst counts")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds of input of the replayed bag")
    parser.add_argument("--no-node", action="store_true", help="measure dofkit replay only (no DDS)")
    parser.add_argument("--no-replay", action="store_true",
                        help="measure the node only (after the one untimed replay that fills numba's cache)")
    parser.add_argument("--node-timeout", type=float, default=60.0, help="seconds to wait for a node's estimate")
    parser.add_argument("--discovery", choices=[*DISCOVERY, "all"], default="all",
                        help="where the package's fast-discovery Fast DDS profile is set in the node's runs: "
                             "nowhere (Fast DDS's defaults), in the node only, in the publisher only, in both, or "
                             "each of these in turn (all, the default)")
    parser.add_argument("--publisher-head-start", type=float, default=1.0,
                        help="seconds between the IMU publisher's appearance in the probe's graph and the node's "
                             "spawn (default 1)")
    args = parser.parse_args(argv)

    from ros_dofkit.replay.demo import DemoOptions
    from ros_dofkit.replay.record import record_demo

    tmp = Path(tempfile.mkdtemp(prefix="dofkit_cold_start_"))
    recorded = record_demo(tmp / "input", DemoOptions(duration_s=args.duration), config_path=tmp / "config.yaml")
    print(f"cold start: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min) on "
          f"{os.cpu_count()} cores; worst of {args.repeat} fresh processes per line")
    warm = replay_once(recorded.bag_path, tmp / "config.yaml", tmp / "warm")
    print(f"  first replay on this checkout (fills numba's cache if it was empty): {warm['process']:.2f} s")
    lines = []
    if not args.no_replay:
        replays = [replay_once(recorded.bag_path, tmp / "config.yaml", tmp / f"replay_{k}")
                   for k in range(args.repeat)]
        print(worst_line(f"  dofkit replay ({args.duration:g} s of input): ", replays,
                         ("startup", "imports", "kernels", "estimate", "to_first")))
        lines.append(budget_line("dofkit replay", replays))
    if not args.no_node:
        node_latency.isolate_ros_domain()
        # This process's probe (the instrument) discovers every fresh node quickly in every setting; it must be set
        # before this process creates its first DDS participant.
        os.environ.update(discovery_environment("fast"))
        (tmp / "params.yaml").write_text(node_latency.parameters_yaml(node_latency.load_by_name("arm")))
        measured = {}
        for discovery in DISCOVERY if args.discovery == "all" else (args.discovery,):
            nodes = measured[discovery] = [node_once(args, tmp, k, discovery) for k in range(args.repeat)]
            label = LABELS[discovery]
            print(worst_line(f"  estimator node (arm, 4 IMUs at 500 Hz; {label}): ", nodes,
                             ("startup", "imports", "construction", "kernels", "ready", "discovery", "latency",
                              "to_first")))
            for key, what in (("discovered", "the publisher in the node's graph"),
                              ("announced", "the publisher's next announcement (Fast DDS's schedule)"),
                              ("matched", "its IMU subscriptions matched")):
                print(f"    {what}, after the node's participant was created "
                      f"({' '.join(format(run['participant'], '.2f') for run in nodes)} s after the spawn): "
                      f"{' '.join(format(run[key], '.2f') for run in nodes)} s")
            for run in nodes:
                run["own"] = run["to_first"] - run["discovery"]
            lines.append(budget_line(f"estimator node ({WHERE[discovery]})", nodes))
            lines.append(budget_line(f"estimator node ({label}), its own part", nodes, "own",
                                     "its first estimate without the wait for discovery"))
        lines += verdict_lines(measured)
    print("budgets:")
    for line in lines:
        print("  " + line)
    if not args.no_node:
        print("  The wait for discovery is the running publisher's: its one answer to the node's first announcement is "
              "lost when it\n  arrives before the node's participant registers its receivers, and the node then "
              "learns of it at its next periodic\n  announcement (every 3 s on Fast DDS's defaults, 0.5 s with the "
              "profile). Only the profile in the processes that\n  run before the node bounds it (README, \"Joining "
              "a running graph\").")
    return 0


if __name__ == "__main__":
    sys.exit(main())
