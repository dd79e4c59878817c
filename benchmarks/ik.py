"""benchmarks/ik.py: `./run bench ik`, orientation-sensor IK tracking speed and accuracy against OpenSim.

Runs each scenario of benchmarks/scenarios.py (Panda 7-dof + 4 IMUs; G1 humanoid, floating base + 29 joints,
17 IMUs; 500 noise-free frames at 100 Hz) through

* ros_dofkit's ``Assembler``: one ``assemble()`` at t0, then ``track(t)`` per frame called from Python (what the
  estimator node does each cycle: move the observations, track, read q), and ``track_sequence`` (offline replay:
  one call for all the remaining frames);
* OpenSim's ``InverseKinematicsSolver`` with an ``OrientationsReference`` on a model converted from the same plant
  (benchmarks/opensim_peer.py), driven as OpenSense does, when ``opensim`` is importable, in each lock mode of
  ``opensim_peer.LOCK_MODES``: the coordinates the IMUs do not observe (the Panda's finger, a floating base's
  translation) held by ``Assembler::lockQ`` (LBFGS), left free (LBFGS), or locked as OpenSense locks them
  (constraints: IPOPT, several times slower);

all from the same starting guess and accuracy 1e-4; ros_dofkit locks the unobserved coordinates. It prints
frames/s of the tracked frames (the assemble at t0 is reported apart), the largest and RMS joint error against the
truth (rad), the base orientation error for the humanoid, per round the ratios ros_dofkit / the fastest OpenSim
configuration of that round (the peer: all modes give the same solution), and a PASS/MISS line per budget of
DESIGN.md over the worst round, with both solvers' accuracies. The exit status reflects errors only (e.g. a
converted model that does not match the plant), never a missed budget.

The process pins itself to one CPU and sets NUMBA_NUM_THREADS, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS to 1 before NumPy is imported, so both solvers run on one core. Numba kernels are compiled by a
warm-up run on a few frames before anything is timed. ``--repeat N`` runs N rounds, every solver in turn, its time
in a round the shortest of ``--inner`` back-to-back runs (ours take a few milliseconds for 500 frames: one
scheduler hiccup would otherwise decide a ratio); a budget holds only if it holds in the worst round.
"""

import os

if __name__ == "__main__":  # only when run as the benchmark: importing this module must not change the environment
    import single_core  # this script's folder is first on sys.path

    single_core.limit_threads()

import argparse  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import numpy as np  # noqa: E402

from benchmarks import opensim_peer  # noqa: E402
from benchmarks.scenarios import SCENARIOS, Scenario  # noqa: E402
from benchmarks.single_core import pin_to_one_cpu  # noqa: E402

#: Clocks every solver can be timed with (``--clock``).
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
#: DESIGN.md budgets: our frames/s over the fastest OpenSim configuration's, at equal or better accuracy.
BUDGETS = {"ros_dofkit track()": 30.0, "ros_dofkit track_sequence()": 60.0}
ACCURACY = 1e-4
#: "Equal accuracy": our max/RMS joint and base errors may exceed OpenSim's by 1 % + 1e-4 rad, the scale at which two
#: solvers stopped at accuracy 1e-4 on the same (noisy) problem legitimately differ.
EQUAL_RELATIVE = 0.01
EQUAL_ABSOLUTE = 1e-4


class BenchmarkError(RuntimeError):
    """The benchmark cannot produce a meaningful number (models differ, a solver failed)."""


@dataclass
class SolverResult:
    """One solver on one scenario.

    Attributes:
        solver: label for the table.
        q: (T, nq) estimates, row 0 from the assemble at times[0].
        assemble_seconds: wall time of the assemble at times[0].
        track_seconds: wall time of tracking frames 1..T-1 (best of the repeats).
    """

    solver: str
    q: np.ndarray
    assemble_seconds: float
    track_seconds: float

    @property
    def frames_per_second(self) -> float:
        return (self.q.shape[0] - 1) / self.track_seconds if self.track_seconds > 0 else float("inf")


# ------------------------------------------------------------------------------------------------ ros_dofkit
def make_assembler(scenario: Scenario, accuracy: float = ACCURACY):
    """An Assembler set up for the scenario: one OrientationSensors goal, locks, the start guess, frame 0 observed.

    Returns ``(assembler, osensors)``.
    """
    from ros_dofkit.core.assembly import Assembler, OrientationSensors

    osensors = OrientationSensors()
    for imu in scenario.imus:
        osensors.add_osensor(imu.name, imu.body, imu.R_BS, weight=imu.weight)
    osensors.define_observation_order([imu.name for imu in scenario.imus])
    assembler = Assembler(scenario.plant)
    assembler.adopt_assembly_goal(osensors)
    assembler.lock_positions(list(scenario.locked_positions))
    assembler.set_accuracy(accuracy)
    assembler.set_positions(scenario.q_start)
    osensors.move_all_observations(scenario.R_GO[0])
    return assembler, osensors


def run_dofkit_track(scenario: Scenario, accuracy: float = ACCURACY, clock=time.perf_counter) -> SolverResult:
    """assemble() at t0, then per frame: move_all_observations, track(t), get_positions (the node's cycle)."""
    assembler, osensors = make_assembler(scenario, accuracy)
    q = np.empty_like(scenario.q_true)
    start = clock()
    assembler.assemble()
    q[0] = assembler.get_positions()
    assemble_seconds = clock() - start
    times, R_GO = scenario.times, scenario.R_GO
    start = clock()
    for k in range(1, times.size):
        osensors.move_all_observations(R_GO[k])
        assembler.track(times[k])
        q[k] = assembler.get_positions()
    track_seconds = clock() - start
    return SolverResult("ros_dofkit track()", q, assemble_seconds, track_seconds)


def run_dofkit_track_sequence(scenario: Scenario, accuracy: float = ACCURACY,
                              clock=time.perf_counter) -> SolverResult:
    """assemble() at t0, then one track_sequence over frames 1..T-1 (offline replay)."""
    assembler, _ = make_assembler(scenario, accuracy)
    q = np.empty_like(scenario.q_true)
    start = clock()
    assembler.assemble()
    q[0] = assembler.get_positions()
    assemble_seconds = clock() - start
    start = clock()
    q[1:] = assembler.track_sequence(scenario.times[1:], scenario.R_GO[1:])
    track_seconds = clock() - start
    return SolverResult("ros_dofkit track_sequence()", q, assemble_seconds, track_seconds)


# --------------------------------------------------------------------------------------------------- OpenSim
def make_opensim_peer(scenario: Scenario):
    """The OpenSim model of the scenario's plant and IMUs, checked against our forward kinematics."""
    peer = opensim_peer.OpenSimPeer(scenario.plant, scenario.imus, locked_positions=scenario.locked_positions,
                                    default_positions=scenario.q_start)
    try:
        peer.check_against_plant(num_samples=5, seed=0, tolerance=1e-9)
    except opensim_peer.ModelMismatchError as error:
        raise BenchmarkError(f"{scenario.name}: refusing to compare solvers on different models: {error}") from error
    return peer


#: Table labels of OpenSim's lock modes (benchmarks/opensim_peer.py explains them).
MODE_LABELS = {
    "assembler": "OpenSim lockQ (LBFGS)",
    "free": "OpenSim no locks (LBFGS)",
    "constraint": "OpenSim OpenSense locks (IPOPT)",
}


def run_opensim(scenario: Scenario, peer, accuracy: float = ACCURACY, lock_mode: str = "assembler",
                clock=time.perf_counter) -> SolverResult:
    run = opensim_peer.OpenSimImuIk(peer, accuracy=accuracy, lock_mode=lock_mode, clock=clock).solve(
        scenario.times, scenario.R_GO)
    label = MODE_LABELS[lock_mode] + ("" if accuracy == ACCURACY else f" accuracy {accuracy:g}")
    return SolverResult(label, run.q, run.assemble_seconds, run.track_seconds)


# ------------------------------------------------------------------------------------------------- reporting
@dataclass
class Row:
    """Accuracy and speed of one solver on one scenario."""

    solver: str
    frames_per_second: float
    assemble_ms: float
    max_joint_error: float
    rms_joint_error: float
    max_base_error: float


@dataclass
class Round:
    """One timed round: each of our solvers and each OpenSim configuration run once, back to back.

    Attributes:
        ours: our rows (track(), track_sequence()).
        opensim: OpenSim's rows, one per lock mode at accuracy 1e-4 (empty when OpenSim was not run).
    """

    ours: list
    opensim: list

    @property
    def peer(self) -> Row | None:
        """The fastest OpenSim configuration of this round (they all give the same solution), or None."""
        return max(self.opensim, key=lambda row: row.frames_per_second) if self.opensim else None


def score(scenario: Scenario, result: SolverResult) -> Row:
    errors = scenario.joint_errors(result.q)
    base = scenario.base_orientation_errors(result.q)
    return Row(result.solver, result.frames_per_second, 1e3 * result.assemble_seconds, float(errors.max()),
               float(np.sqrt(np.mean(errors**2))), float(base.max()))


def format_table(scenario: Scenario, rows) -> str:
    header = f"{'solver':<38}{'frames/s':>11}{'assemble ms':>13}{'max err rad':>13}{'rms err rad':>13}"
    if scenario.floating_q_start is not None:
        header += f"{'base err rad':>14}"
    lines = [header, "-" * len(header)]
    for row in rows:
        line = (f"{row.solver:<38}{row.frames_per_second:>11.0f}{row.assemble_ms:>13.2f}"
                f"{row.max_joint_error:>13.2e}{row.rms_joint_error:>13.2e}")
        if scenario.floating_q_start is not None:
            line += f"{row.max_base_error:>14.2e}"
        lines.append(line)
    return "\n".join(lines)


def median_rows(rounds, pick) -> list[Row]:
    """One row per solver with its median frames/s over the rounds (errors are the same in every round)."""
    rows = []
    for i, first in enumerate(pick(rounds[0])):
        rates = [pick(r)[i].frames_per_second for r in rounds]
        rows.append(Row(first.solver, float(np.median(rates)), float(np.median([pick(r)[i].assemble_ms
                                                                                 for r in rounds])),
                        first.max_joint_error, first.rms_joint_error, first.max_base_error))
    return rows


def equal_or_better(row: Row, peer: Row) -> bool:
    """Our errors are OpenSim's or smaller, up to the 1 % + 1e-4 rad tie of two solvers stopped at accuracy 1e-4."""
    return all(mine <= theirs * (1.0 + EQUAL_RELATIVE) + EQUAL_ABSOLUTE for mine, theirs in (
        (row.max_joint_error, peer.max_joint_error), (row.rms_joint_error, peer.rms_joint_error),
        (row.max_base_error, peer.max_base_error)))


def budget_lines(rounds, why_no_peer: str = "") -> list[str]:
    """PASS/MISS per DESIGN.md budget for each of our solvers: the worst over the rounds of its frames/s over the
    fastest OpenSim configuration's in the same round, and equal or better accuracy than that configuration."""
    lines = []
    for i, first in enumerate(rounds[0].ours):
        budget = BUDGETS[first.solver]
        if rounds[0].peer is None:
            lines.append(f"  NOT MEASURED  {first.solver}: >= {budget:.0f}x the fastest OpenSim configuration at "
                         f"equal or better accuracy ({why_no_peer or 'OpenSim was not run'})")
            continue
        ratios = [r.ours[i].frames_per_second / r.peer.frames_per_second for r in rounds]
        worst = int(np.argmin(ratios))
        row, peer = rounds[worst].ours[i], rounds[worst].peer
        accurate = equal_or_better(row, peer)
        verdict = "PASS" if ratios[worst] >= budget and accurate else "MISS"
        base = (f", base {row.max_base_error:.2e} vs {peer.max_base_error:.2e}"
                if row.max_base_error or peer.max_base_error else "")
        count = f"worst of {len(rounds)} round{'s' if len(rounds) > 1 else ''}"
        lines.append(f"  {verdict}  {first.solver}: {ratios[worst]:.1f}x {peer.solver} (budget >= {budget:.0f}x; "
                     f"{count}: {' '.join(f'{r:.1f}x' for r in ratios)}); max joint error "
                     f"{row.max_joint_error:.2e} vs OpenSim {peer.max_joint_error:.2e} rad{base} "
                     f"({'equal or better' if accurate else 'WORSE'})")
    return lines


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "n/a"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{cpu}; {os.cpu_count()} logical CPUs on the machine, this process pinned to CPU {affinity}; "
            f"load average {load} (1/5/15 min)")


def versions() -> str:
    import numba
    import scipy

    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}", f"scipy {scipy.__version__}",
             f"numba {numba.__version__}"]
    try:
        parts.append(f"opensim {opensim_peer.import_opensim().__version__}")
    except opensim_peer.OpenSimUnavailableError:
        parts.append("opensim not installed")
    try:
        revision = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        parts.append(f"ros_dofkit {revision or 'unknown revision'}")
    except (OSError, subprocess.SubprocessError):
        pass
    return ", ".join(parts)


def warm_up(scenario: Scenario) -> None:
    """Compile the numba kernels (and fill caches) on a few frames before anything is timed."""
    short = scenario.truncated(min(5, scenario.num_frames))
    run_dofkit_track(short)
    run_dofkit_track_sequence(short)


def fastest_of(inner: int, runner, *args) -> SolverResult:
    """``inner`` back-to-back runs of one solver; the estimates of the first, the shortest times."""
    results = [runner(*args) for _ in range(max(1, inner))]
    first = results[0]
    first.track_seconds = min(r.track_seconds for r in results)
    first.assemble_seconds = min(r.assemble_seconds for r in results)
    return first


def run_scenario(scenario: Scenario, with_opensim: bool, repeat: int, lock_modes=opensim_peer.LOCK_MODES,
                 extra_opensim_accuracies=(), inner: int = 1, clock=time.perf_counter) -> tuple[list[Round], list[Row]]:
    """``repeat`` rounds (our two solvers and OpenSim in every lock mode, back to back, so that a change of the
    machine's load hits a round's solvers alike; each solver's time in a round the shortest of ``inner`` runs), and
    OpenSim rows at the extra accuracies in the fastest lock mode of the first round (information only). Every
    solver is timed with ``clock``."""
    warm_up(scenario)
    peer = make_opensim_peer(scenario) if with_opensim else None
    rounds = []
    for _ in range(max(1, repeat)):
        ours = [score(scenario, fastest_of(inner, runner, scenario, ACCURACY, clock))
                for runner in (run_dofkit_track, run_dofkit_track_sequence)]
        opensim = [score(scenario, fastest_of(inner, run_opensim, scenario, peer, ACCURACY, mode, clock))
                   for mode in lock_modes] if peer else []
        rounds.append(Round(ours, opensim))
    extra_rows = []
    if peer is not None and extra_opensim_accuracies:
        fastest = lock_modes[[row.solver for row in rounds[0].opensim].index(rounds[0].peer.solver)]
        extra_rows = [score(scenario, run_opensim(scenario, peer, accuracy, fastest, clock))
                      for accuracy in extra_opensim_accuracies]
    return rounds, extra_rows


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="./run bench ik", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS), default=["panda", "humanoid"])
    parser.add_argument("--frames", type=int, default=500, help="frames per scenario (default 500)")
    parser.add_argument("--noise-deg", type=float, default=0.0,
                        help="isotropic orientation noise, degrees per axis (default 0: the headline is noise-free)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed rounds (every solver once per round); a budget counts the worst round "
                             "(default 3)")
    parser.add_argument("--inner", type=int, default=3,
                        help="runs of each solver within a round, back to back; the round keeps each one's shortest "
                             "(a few-millisecond timing is otherwise decided by one scheduler hiccup; default 3)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time (default; the budgets' figures, idle machine); cpu: this thread's "
                             "CPU time (time.thread_time), the same for every solver, which leaves out the time the "
                             "process waits for a CPU on a loaded machine")
    parser.add_argument("--no-opensim", action="store_true", help="skip OpenSim even when it is importable")
    parser.add_argument("--lock-modes", nargs="+", choices=opensim_peer.LOCK_MODES,
                        default=list(opensim_peer.LOCK_MODES),
                        help="OpenSim configurations to time (default all; the fastest of a round is the peer)")
    parser.add_argument("--opensim-accuracy", type=float, nargs="*", default=[], metavar="A",
                        help="extra OpenSim rows at these accuracies in the fastest lock mode (information only)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    arguments = parse_arguments(argv)
    if arguments.frames < 2:
        print(f"error: expected --frames >= 2, received {arguments.frames}", file=sys.stderr)
        return 2
    pin_to_one_cpu()
    with_opensim = not arguments.no_opensim and opensim_peer.opensim_available()
    print("ros_dofkit IK benchmark (orientation sensors, warm-started tracking, accuracy 1e-4)")
    print(f"machine: {machine_description()}")
    print("threads: NUMBA_NUM_THREADS=OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1")
    print(f"versions: {versions()}")
    reason = ""
    if not with_opensim:
        reason = "--no-opensim given" if arguments.no_opensim else (
            f"opensim is not importable: `pip install {opensim_peer.OPENSIM_PIN}`")
        print(f"OpenSim: not run ({reason}); the ratios against OpenSim could not be measured.")
    else:
        print(f"OpenSim modes timed (accuracy 1e-4): {', '.join(MODE_LABELS[m] for m in arguments.lock_modes)}; "
              "the peer of a round is the fastest of them (benchmarks/README.md, 'The OpenSim peer')")
    print(f"timing: {arguments.clock} clock, frames/s over frames 1..T-1 after the assemble at t0; "
          f"{arguments.repeat} rounds, each solver's "
          f"time in a round the shortest of {arguments.inner} back-to-back runs; the table shows medians, a budget "
          "the worst round")
    if with_opensim:
        # its per-solver [info] lines would break the table
        opensim_peer.import_opensim().Logger.setLevelString("Warn")
    try:
        for name in arguments.scenarios:
            scenario = SCENARIOS[name](num_frames=arguments.frames, noise_deg=arguments.noise_deg)
            print()
            print(scenario.description() + (f", noise {arguments.noise_deg} deg" if arguments.noise_deg else ""))
            rounds, extra_rows = run_scenario(scenario, with_opensim, arguments.repeat, arguments.lock_modes,
                                              arguments.opensim_accuracy, arguments.inner, CLOCKS[arguments.clock])
            rows = median_rows(rounds, lambda r: r.ours) + median_rows(rounds, lambda r: r.opensim) + extra_rows
            print(format_table(scenario, rows))
            for k, one in enumerate(rounds if with_opensim else ()):
                print(f"  round {k + 1}: peer {one.peer.solver} {one.peer.frames_per_second:.0f} frames/s; "
                      + "; ".join(f"{row.solver} {row.frames_per_second / one.peer.frames_per_second:.1f}x"
                                  for row in one.ours)
                      + "; " + ", ".join(f"{row.solver} {row.frames_per_second:.0f}" for row in one.opensim))
            print("budgets:")
            for line in budget_lines(rounds, reason):
                print(line)
    except (BenchmarkError, opensim_peer.ModelConversionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
