"""benchmarks/replay_speed.py: `./run bench replay_speed`, offline replay speed against real time.

DESIGN.md's budgets: offline replay of a bag runs at >= 150x real time on the reference load (4 IMUs at 400 Hz),
and >= 10x a rosbags-only read of the same bag's messages (rosbags' Reader + ``deserialize_cdr`` of every message,
what a Python tool without ros_dofkit's bulk decoders pays just to read the bag) measured in the same round. This
records the demo robot (7-dof arm, 4 IMUs at --imu-rate, encoders at --encoder-rate, default noise) to a temporary
bag, then replays it exactly as `dofkit replay` does (read + decode, estimator core, encode + write the node's
output topics) and prints

* the real-time factor (input seconds / wall seconds) of the whole replay (the batched offline path that `dofkit
  replay` takes for this configuration), best of --repeat rounds, and per round with the rosbags-only read timed
  just before it; the PASS/MISS lines take the worst round; the same rounds in CPU time (``time.process_time``),
  which a loaded machine inflates far less than wall time;
* the same whole replay with the process allowed on every CPU it started with (as `dofkit replay` runs: on more
  than one core it reads and writes beside the estimation, ``replay.overlap``), per round, after the pinned rounds;
* where the wall time goes, each stage timed alone (best of --repeat): reading the bag (topic check, raw
  messages, bulk CDR decoding), the estimator (``Estimator.run``: validation, compiled cycle rules,
  ``track_sequence``, velocities and sensor errors), and encoding + writing the output bag;
* the streaming path for comparison (``replay_bag(batch=False)``: every message through ``process_imu`` /
  ``process_joint_state``, rosbags' (de)serializers), one run after a warm-up of its own (its per-message kernels
  are not the batched path's: a cold cache compiles them on first use, ~10 s), unless --no-streaming;
* for reference, the compiled IK alone: ``Assembler.track_sequence`` over the same IMU frames (one frame per IMU
  sample instant, encoders as per-frame locked positions);
* a PASS/MISS line per budget, worst of the --repeat rounds (the real-time budget twice: pinned to one core, and as
  ``dofkit replay`` runs on every core the process started with, when it has more than one);
* ``dofkit replay`` as a user runs it, in fresh processes, on the recording and on one --memory-factor times as
  long: wall time (start-up included: imports and loading the compiled kernels from numba's cache) and peak
  resident memory, whose growth with the input's length shows that a replay reads, estimates and writes the bag
  window by window (unless --no-memory).

The process pins itself to one CPU and sets the BLAS/numba thread counts to 1 before NumPy is imported. Compiled
kernels are warmed up on a short replay before anything is timed, and the objects that exist before the timed
replays are frozen out of the garbage collector's sight, as ``dofkit replay`` freezes its start-up objects, and the
C allocator keeps freed memory as ``dofkit replay`` sets it (``replay.process``). Exit
status 0 unless something fails; a missed budget is reported, not an error.
"""


if __name__ == "__main__":  # only when run as the benchmark: importing this module must not change the environment
    import single_core  # this script's folder is first on sys.path

    single_core.limit_threads()

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.profiling import start_profiler, summarize_profile  # noqa: E402
from benchmarks.single_core import pin_to_one_cpu  # noqa: E402

#: DESIGN.md's replay budgets: real-time factor on the reference load, and speed over a rosbags-only read of the same
#: bag's messages measured in the same round.
BUDGET_REALTIME_FACTOR = 150.0
BUDGET_OVER_ROSBAGS = 10.0


def replay_once(bag, setup, out_dir: Path, tag: str, cpu: list | None = None):
    """(wall seconds, outcome) of one replay of ``bag``; its CPU seconds are appended to ``cpu`` when given."""
    from ros_dofkit.replay.bag_replay import replay_bag

    out = out_dir / f"out_{tag}"
    started, started_cpu = time.perf_counter(), time.process_time()
    outcome = replay_bag(bag, setup, out)
    if cpu is not None:
        cpu.append(time.process_time() - started_cpu)
    return time.perf_counter() - started, outcome


def profile_replays(bag, setup, out_dir: Path, output: Path, seconds: float = 10.0) -> list:
    """Replay ``bag`` back to back for ``seconds`` while py-spy samples this process; the summary lines."""
    profiler = start_profiler(os.getpid(), output, 0.0, seconds)
    k = 0
    while profiler.is_alive():
        replay_once(bag, setup, out_dir, f"profile_{k}")
        k += 1
    return summarize_profile(output, top=15)


def overlapped_rounds(bag, setup, out_dir: Path, cpus: set, repeat: int) -> list:
    """Wall seconds of ``repeat`` replays with the process allowed on every CPU of ``cpus`` (as `dofkit replay`
    runs: on more than one core it reads and writes beside the estimation, ``replay.overlap``); none with fewer
    than two CPUs. The process is pinned to one CPU again afterwards."""
    if len(cpus) < 2:
        return []
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        replay_once(bag, setup, out_dir, "overlap_warm")  # the threads' first start
        return [replay_once(bag, setup, out_dir, f"overlap_{k}")[0] for k in range(repeat)]
    finally:
        os.sched_setaffinity(0, pinned)


def rosbags_read(bag, cpu: list | None = None) -> tuple[float, int]:
    """The peer: every message of the bag read and deserialized by rosbags alone (its Reader and its typestore's
    ``deserialize_cdr``), as a Python tool without ros_dofkit's bulk decoders would; returns (seconds, messages)
    and appends its CPU seconds to ``cpu`` when given. The bag holds only what the replay reads (the IMU, encoder
    and truth topics), so the peer decodes the same messages."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    typestore = get_typestore(Stores.ROS2_JAZZY)
    count = 0
    started, started_cpu = time.perf_counter(), time.process_time()
    with Reader(bag) as reader:
        for connection, _, raw in reader.messages():
            typestore.deserialize_cdr(raw, connection.msgtype)
            count += 1
    if cpu is not None:
        cpu.append(time.process_time() - started_cpu)
    return time.perf_counter() - started, count


def compiled_solve_time(robot, options, repeat: int):
    """Best wall and CPU time of ``Assembler.track_sequence`` over the demo's IMU frames (NaN where a sample dropped
    out), the encoders' values as per-frame locked positions; returns (seconds, CPU seconds, frames)."""
    import numpy as np

    from ros_dofkit.core.assembly import Assembler, OrientationSensors
    from ros_dofkit.core.spatial import quat_to_matrix
    from ros_dofkit.replay.demo import simulate_demo

    run = simulate_demo(robot, options)
    plant = robot.plant
    frames = len(run.times)
    R_GO = np.full((frames, len(robot.imus), 3, 3), np.nan)
    for k, imu in enumerate(robot.imus):
        readings = run.imu(imu.name)
        R_GO[readings.sample_index, k] = quat_to_matrix(readings.quaternion_wxyz)
    positions = np.full((frames, plant.num_positions()), np.nan)
    names = list(plant.position_names())
    nearest = np.searchsorted(run.times, run.encoders.stamps).clip(0, frames - 1)
    for j, name in enumerate(run.encoders.names):
        positions[nearest, names.index(name)] = run.encoders.positions[:, j]
    times, cpu = [], []
    for _ in range(repeat):
        sensors = OrientationSensors()
        for imu in robot.imus:
            sensors.add_osensor(imu.name, imu.body, imu.R_BS)
        sensors.define_observation_order([imu.name for imu in robot.imus])
        assembler = Assembler(plant)
        assembler.adopt_assembly_goal(sensors)
        assembler.set_accuracy(robot.estimator_config.accuracy)
        assembler.use_joint_limits()
        assembler.lock_positions([names.index(name) for name in run.encoders.names])
        assembler.set_positions(run.q[0])
        sensors.move_all_observations(R_GO[0])  # NaN = a sample that dropped out: unobserved
        assembler.assemble()
        assembler.track_sequence(run.times[:20], R_GO[:20], positions=positions[:20])  # compiled before timing
        started, started_cpu = time.perf_counter(), time.process_time()
        assembler.track_sequence(run.times, R_GO, positions=positions)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return min(times), min(cpu), frames


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of input (default 10)")
    parser.add_argument("--imu-rate", type=float, default=400.0, help="IMU rate in Hz (default 400)")
    parser.add_argument("--encoder-rate", type=float, default=100.0, help="encoder rate in Hz (default 100)")
    parser.add_argument("--storage", default="sqlite3", choices=["sqlite3", "mcap"])
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed rounds (rosbags read, then the replay); stages report the best, budgets the worst "
                             "(default 3)")
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE",
                        help="after the timed rounds, replay the bag back to back for 10 s under py-spy (a tool, "
                             "not a dependency), write the collapsed stacks to FILE and print the busiest functions")
    parser.add_argument("--no-streaming", action="store_true", help="skip the streaming-path comparison run")
    parser.add_argument("--no-memory", action="store_true", help="skip the dofkit replay runs in fresh processes")
    parser.add_argument("--memory-factor", type=float, default=6.0,
                        help="length of the longer recording of the memory runs, in recordings (default 6)")
    args = parser.parse_args(argv)
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    pin_to_one_cpu()

    from ros_dofkit.core.estimator.estimator import Estimator
    from ros_dofkit.replay.batch import read_offline_inputs
    from ros_dofkit.replay.demo import DemoOptions
    from ros_dofkit.replay.demo_robot import build_demo_robot
    from ros_dofkit.replay.messages import MessageFactory
    from ros_dofkit.replay.outputs import OutputWriter
    from ros_dofkit.replay.process import keep_freed_memory
    from ros_dofkit.replay.record import record_demo
    from ros_dofkit.replay.setup import TRUTH_TOPIC, ReplaySetup
    from ros_dofkit.ros.bag_io import BagWriter

    robot = build_demo_robot()
    setup = ReplaySetup.from_parameters(robot.parameters)
    with tempfile.TemporaryDirectory(prefix="dofkit_replay_bench_") as tmp:
        tmp = Path(tmp)
        options = DemoOptions(duration_s=args.duration, imu_rate_hz=args.imu_rate, encoder_rate_hz=args.encoder_rate)
        recorded = record_demo(tmp / "input", options, storage=args.storage, config_path="")
        warm = record_demo(tmp / "warm", DemoOptions(duration_s=1.0, imu_rate_hz=args.imu_rate), config_path="")
        replay_once(warm.bag_path, setup, tmp, "warm")  # compiles/loads the numba kernels
        if not args.no_streaming:  # and the streaming path's, so that its one timed run does not include them
            from ros_dofkit.replay.bag_replay import replay_bag

            replay_bag(warm.bag_path, setup, tmp / "warm_streaming", storage=args.storage, batch=False)
        # Everything alive now (imports, the recording) stays out of the garbage collector's sight during the timed
        # runs, as `dofkit replay` freezes what it imported and configured before it replays; and freed memory stays
        # with the process, as `dofkit replay` sets its allocator (replay.process).
        gc.collect()
        gc.freeze()
        keep_freed_memory()

        totals, peers, totals_cpu, peers_cpu = [], [], [], []
        outcome = None
        for k in range(args.repeat):  # a round: the peer, then the replay, back to back
            peer_wall, peer_messages = rosbags_read(recorded.bag_path, peers_cpu)
            peers.append(peer_wall)
            wall, outcome = replay_once(recorded.bag_path, setup, tmp, str(k), totals_cpu)
            totals.append(wall)
        profile_lines = profile_replays(recorded.bag_path, setup, tmp, args.profile) if args.profile else []
        overlapped = overlapped_rounds(recorded.bag_path, setup, tmp, all_cpus, args.repeat)
        best = min(totals)
        span = outcome.statistics.span_s
        cycles = outcome.statistics.cycles

        factory = MessageFactory()
        read_times, core_times, write_times, read_cpu, write_cpu = [], [], [], [], []
        for k in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            inputs, _, _ = read_offline_inputs(recorded.bag_path, setup, None, TRUTH_TOPIC, factory.typestore)
            read_times.append(time.perf_counter() - started)
            read_cpu.append(time.process_time() - started_cpu)
            offline = Estimator(setup.plant, setup.config)
            started = time.perf_counter()
            run = offline.run(inputs)
            core_times.append(time.perf_counter() - started)
            started, started_cpu = time.perf_counter(), time.process_time()
            with BagWriter(tmp / f"write_{k}", storage=args.storage, typestore=factory.typestore,
                           journal=False) as writer:  # as replay_bag writes its output
                OutputWriter(writer, setup, offline, factory).write_run(run, run.initialized.nonzero()[0])
            write_times.append(time.perf_counter() - started)
            write_cpu.append(time.process_time() - started_cpu)
        read, core, write = min(read_times), min(core_times), min(write_times)
        streaming = None
        if not args.no_streaming:
            started = time.perf_counter()
            replay_bag(recorded.bag_path, setup, tmp / "streaming", storage=args.storage, batch=False)
            streaming = time.perf_counter() - started
        solve, solve_cpu, frames = compiled_solve_time(robot, options, args.repeat)
        processes = None
        if not args.no_memory:
            longer = record_demo(tmp / "longer", DemoOptions(duration_s=args.duration * args.memory_factor,
                                                             imu_rate_hz=args.imu_rate,
                                                             encoder_rate_hz=args.encoder_rate),
                                 storage=args.storage, config_path=tmp / "longer.estimator.yaml")
            processes = [cli_replay(bag, tmp / "longer.estimator.yaml", tmp / f"cli_{k}")
                         for k, bag in enumerate((recorded.bag_path, longer.bag_path))]

    imu_messages = sum(count for topic, count in recorded.counts.items() if topic.startswith("/imu/"))
    factor = span / best
    print(f"replay_speed: demo arm, {len(robot.imus)} IMUs at {args.imu_rate:g} Hz, encoders at "
          f"{args.encoder_rate:g} Hz, {span:.1f} s of input ({imu_messages} IMU messages, {cycles} cycles), "
          f"{args.storage}, best of {args.repeat}")
    print(f"  whole replay (batched):   {best:8.3f} s wall  -> {factor:8.1f}x real time")
    print(f"  read + decode bag:        {read:8.3f} s wall  ({100 * read / best:5.1f}%)  -> {span / read:8.1f}x alone")
    print(f"  estimator (offline core): {core:8.3f} s wall  ({100 * core / best:5.1f}%)  -> {span / core:8.1f}x alone, "
          f"{1e6 * core / max(cycles, 1):.1f} us per cycle")
    print(f"  encode + write outputs:   {write:8.3f} s wall  ({100 * write / best:5.1f}%)  -> "
          f"{span / write:8.1f}x alone")
    if streaming is not None:
        print(f"  streaming path (process_imu/process_joint_state, rosbags serde), one run: {streaming:.3f} s -> "
              f"{span / streaming:.1f}x real time ({streaming / best:.1f}x slower)")
    print(f"  reference, compiled IK alone (track_sequence, {frames} frames): {solve:.3f} s -> {span / solve:.1f}x, "
          f"{1e6 * solve / frames:.1f} us per frame")
    factors = [span / wall for wall in totals]
    over_peer = [peer / wall for peer, wall in zip(peers, totals, strict=True)]
    print(f"  rosbags-only read of the same bag ({peer_messages} messages: Reader + deserialize_cdr), per round: "
          + " ".join(f"{peer:.3f}" for peer in peers) + " s -> " + " ".join(f"{span / peer:.1f}x" for peer in peers)
          + " real time")
    print("  CPU time per round (what a loaded machine does not inflate; the budgets take wall time): replay "
          + " ".join(f"{c:.3f}" for c in totals_cpu) + " s, rosbags-only read "
          + " ".join(f"{c:.3f}" for c in peers_cpu) + " s -> " + " ".join(f"{span / c:.1f}x" for c in totals_cpu)
          + " real time, " + " ".join(f"{p / c:.2f}x" for p, c in zip(peers_cpu, totals_cpu, strict=True))
          + " the read")
    if overlapped:
        print(f"  whole replay on {len(all_cpus)} cores (reading and writing beside the estimation, replay.overlap; "
              f"the budgets above take one core), per round: " + " ".join(f"{wall:.3f}" for wall in overlapped)
              + " s -> " + " ".join(f"{span / wall:.1f}x" for wall in overlapped) + " real time, "
              + " ".join(f"{min(peers) / wall:.1f}x" for wall in overlapped) + " the best rosbags-only read")
    print("  " + reach_line(min(peers_cpu), solve_cpu, min(read_cpu), min(write_cpu)))
    if profile_lines:
        print(f"  profile of back-to-back replays ({args.profile}):")
        for line in profile_lines:
            print(line)
    print("budgets:")
    for line in budget_lines(factors, over_peer):
        print("  " + line)
    if overlapped:
        print("  " + overlapped_budget_line([span / wall for wall in overlapped], len(all_cpus)))
    if processes is not None:
        (short_wall, short_kb), (long_wall, long_kb) = processes
        long_span = args.duration * args.memory_factor
        growth = (long_kb - short_kb) / 1024 / ((long_span - args.duration) / 60.0)
        print(f"  dofkit replay in a fresh process (start-up included): {args.duration:g} s of input "
              f"{short_wall:.2f} s wall, peak {short_kb / 1024:.0f} MB; {long_span:g} s of input {long_wall:.2f} s "
              f"wall ({long_span / long_wall:.1f}x real time), peak {long_kb / 1024:.0f} MB -> {growth:.1f} MB more "
              "per minute of input")
    return 0


def overlapped_budget_line(factors, cores: int) -> str:
    """PASS/MISS of the real-time budget for the replay as ``dofkit replay`` runs it on this machine's ``cores``
    (reading and writing beside the estimation), over the worst of its rounds: ``factors`` their real-time factors.
    Printed beside the one-core line, which stays the budget's reference (a machine with one free core)."""
    factor = min(factors)
    rounds = f"worst of {len(factors)} round{'s' if len(factors) > 1 else ''}"
    return (f"{'PASS' if factor >= BUDGET_REALTIME_FACTOR else 'MISS'}  replay >= {BUDGET_REALTIME_FACTOR:g}x real "
            f"time as `dofkit replay` runs on {cores} cores: {factor:.1f}x ({rounds}: "
            f"{' '.join(f'{f:.1f}x' for f in factors)})")


def budget_lines(factors, over_peer) -> list:
    """PASS/MISS of the replay budgets over the worst round: ``factors`` real-time factors of the whole replay,
    ``over_peer`` its speed over the rosbags-only read of the same round."""
    rounds = f"worst of {len(factors)} round{'s' if len(factors) > 1 else ''}"
    factor, ratio = min(factors), min(over_peer)
    return [f"{'PASS' if factor >= BUDGET_REALTIME_FACTOR else 'MISS'}  replay >= {BUDGET_REALTIME_FACTOR:g}x real "
            f"time: {factor:.1f}x ({rounds}: {' '.join(f'{f:.1f}x' for f in factors)})",
            f"{'PASS' if ratio >= BUDGET_OVER_ROSBAGS else 'MISS'}  replay >= {BUDGET_OVER_ROSBAGS:g}x a rosbags-only "
            f"read of the same bag: {ratio:.1f}x ({rounds}: {' '.join(f'{r:.1f}x' for r in over_peer)})"]


def reach_line(peer_cpu: float, solve_cpu: float, read_cpu: float, write_cpu: float) -> str:
    """Whether the over-rosbags budget is reachable at all, in CPU time (which load does not inflate much): the
    whole replay must take at most 1/BUDGET_OVER_ROSBAGS of the rosbags-only read, and it cannot take less than its
    unavoidable parts alone: the compiled IK over the same frames (``track_sequence``, no rules), reading + decoding
    the bag and encoding + writing the outputs (each stage timed alone). On one core their sum is a floor; on n
    cores at best the sum / n (the IK is one warm-started sequence: its frames cannot be split)."""
    allowance = peer_cpu / BUDGET_OVER_ROSBAGS
    floor = solve_cpu + read_cpu + write_cpu
    verdict = ("unreachable on one core" if floor > allowance else "reachable only if everything else is free") + (
        ", and on two cores: above 2x" if floor > 2 * allowance else "")
    return (f"{BUDGET_OVER_ROSBAGS:g}x the rosbags-only read allows the whole replay {1e3 * allowance:.1f} ms CPU; "
            f"the compiled IK alone takes {1e3 * solve_cpu:.1f} ms, reading + decoding {1e3 * read_cpu:.1f} ms, "
            f"encoding + writing {1e3 * write_cpu:.1f} ms: {1e3 * floor:.1f} ms CPU, {floor / allowance:.2f}x the "
            f"allowance ({verdict})")


#: `dofkit replay` in a fresh interpreter (what the console script runs), reporting its own peak resident memory
#: (VmHWM: the high-water mark of this process's memory since its exec; a parent's rusage would also count the
#: benchmark's own pages, inherited at fork).
_CLI_WITH_PEAK = """
import sys
from ros_dofkit.cli import main
status = main(sys.argv[1:])
peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print("peak_kib", peak[0] if peak else -1, file=sys.stderr)
sys.exit(status)
"""


def cli_replay(bag: Path, config: Path, out: Path) -> tuple[float, int]:
    """(wall seconds, peak resident KiB or -1) of `dofkit replay` in a fresh process, as a user runs it."""
    import subprocess

    command = [sys.executable, "-c", _CLI_WITH_PEAK, "replay", str(bag), "--config", str(config), "--out", str(out),
               "--quiet"]
    started = time.perf_counter()
    finished = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=_REPO)
    wall = time.perf_counter() - started
    if finished.returncode != 0:
        raise RuntimeError(f"dofkit replay {bag} exited with {finished.returncode}: {finished.stderr[-2000:]}")
    peaks = [line.split()[1] for line in finished.stderr.splitlines() if line.startswith("peak_kib ")]
    return wall, int(peaks[-1]) if peaks else -1


if __name__ == "__main__":
    sys.exit(main())
