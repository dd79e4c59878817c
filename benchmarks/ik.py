"""benchmarks/ik.py: `./run bench ik`, orientation-sensor IK tracking speed and accuracy against OpenSim.

Runs each scenario of benchmarks/scenarios.py (Panda 7-dof + 4 IMUs; G1 humanoid, floating base + 29 joints,
17 IMUs; 500 noise-free frames at 100 Hz) through

* ros_dofkit's ``Assembler``: one ``assemble()`` at t0, then ``track(t)`` per frame called from Python (what the
  estimator node does each cycle: move the observations, track, read q), and ``track_sequence`` (offline replay:
  one call for all the remaining frames);
* OpenSim's ``InverseKinematicsSolver`` with an ``OrientationsReference`` on a model converted from the same plant
  (benchmarks/opensim_peer.py), driven as OpenSense does, when ``opensim`` is importable;

all from the same starting guess, with the same locked coordinates and accuracy 1e-4. It prints frames/s of the
tracked frames (the assemble at t0 is reported apart), the largest and RMS joint error against the truth (rad),
the base orientation error for the humanoid, the ratios ros_dofkit/OpenSim and a PASS/MISS line per budget of
DESIGN.md. The exit status reflects errors only (e.g. a converted model that does not match the plant), never a
missed budget.

The process pins itself to one CPU and sets NUMBA_NUM_THREADS, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS to 1 before NumPy is imported, so both solvers run on one core. Numba kernels are compiled by a
warm-up run on a few frames before anything is timed. Each timing is the best of ``--repeat`` runs.
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

#: DESIGN.md budgets.
SPEEDUP_BUDGET = 10.0
HUMANOID_FLOOR_FPS = 1000.0
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


def run_dofkit_track(scenario: Scenario, accuracy: float = ACCURACY) -> SolverResult:
    """assemble() at t0, then per frame: move_all_observations, track(t), get_positions (the node's cycle)."""
    assembler, osensors = make_assembler(scenario, accuracy)
    q = np.empty_like(scenario.q_true)
    start = time.perf_counter()
    assembler.assemble()
    q[0] = assembler.get_positions()
    assemble_seconds = time.perf_counter() - start
    times, R_GO = scenario.times, scenario.R_GO
    start = time.perf_counter()
    for k in range(1, times.size):
        osensors.move_all_observations(R_GO[k])
        assembler.track(times[k])
        q[k] = assembler.get_positions()
    track_seconds = time.perf_counter() - start
    return SolverResult("ros_dofkit track()", q, assemble_seconds, track_seconds)


def run_dofkit_track_sequence(scenario: Scenario, accuracy: float = ACCURACY) -> SolverResult:
    """assemble() at t0, then one track_sequence over frames 1..T-1 (offline replay)."""
    assembler, _ = make_assembler(scenario, accuracy)
    q = np.empty_like(scenario.q_true)
    start = time.perf_counter()
    assembler.assemble()
    q[0] = assembler.get_positions()
    assemble_seconds = time.perf_counter() - start
    start = time.perf_counter()
    q[1:] = assembler.track_sequence(scenario.times[1:], scenario.R_GO[1:])
    track_seconds = time.perf_counter() - start
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


def run_opensim(scenario: Scenario, peer, accuracy: float = ACCURACY) -> SolverResult:
    run = opensim_peer.OpenSimImuIk(peer, accuracy=accuracy).solve(scenario.times, scenario.R_GO)
    label = "OpenSim IKSolver" + ("" if accuracy == ACCURACY else f" accuracy {accuracy:g}")
    return SolverResult(label, run.q, run.assemble_seconds, run.track_seconds)


# ------------------------------------------------------------------------------------------------- reporting
def best_of(repeat: int, runner, *args) -> SolverResult:
    """Run ``repeat`` times; keep the estimates of the first run and the smallest tracking time."""
    results = [runner(*args) for _ in range(max(1, repeat))]
    best = results[0]
    best.track_seconds = min(r.track_seconds for r in results)
    best.assemble_seconds = min(r.assemble_seconds for r in results)
    return best


@dataclass
class Row:
    """Accuracy and speed of one solver on one scenario."""

    solver: str
    frames_per_second: float
    assemble_ms: float
    max_joint_error: float
    rms_joint_error: float
    max_base_error: float


def score(scenario: Scenario, result: SolverResult) -> Row:
    errors = scenario.joint_errors(result.q)
    base = scenario.base_orientation_errors(result.q)
    return Row(result.solver, result.frames_per_second, 1e3 * result.assemble_seconds, float(errors.max()),
               float(np.sqrt(np.mean(errors**2))), float(base.max()))


def format_table(scenario: Scenario, rows) -> str:
    header = f"{'solver':<34}{'frames/s':>11}{'assemble ms':>13}{'max err rad':>13}{'rms err rad':>13}"
    if scenario.floating_q_start is not None:
        header += f"{'base err rad':>14}"
    lines = [header, "-" * len(header)]
    for row in rows:
        line = (f"{row.solver:<34}{row.frames_per_second:>11.0f}{row.assemble_ms:>13.2f}"
                f"{row.max_joint_error:>13.2e}{row.rms_joint_error:>13.2e}")
        if scenario.floating_q_start is not None:
            line += f"{row.max_base_error:>14.2e}"
        lines.append(line)
    return "\n".join(lines)


def budget_lines(scenario: Scenario, ours, peer, why_no_peer: str = "") -> list[str]:
    """PASS/MISS per DESIGN.md budget for each of our solver rows against the OpenSim row (None: not measured)."""
    lines = []
    for row in ours:
        if peer is None:
            lines.append(f"  NOT MEASURED  {row.solver}: >= {SPEEDUP_BUDGET:.0f}x OpenSim frames/s at equal or better "
                         f"accuracy ({why_no_peer or 'OpenSim was not run'})")
        else:
            ratio = row.frames_per_second / peer.frames_per_second
            accurate = all(mine <= theirs * (1.0 + EQUAL_RELATIVE) + EQUAL_ABSOLUTE for mine, theirs in (
                (row.max_joint_error, peer.max_joint_error), (row.rms_joint_error, peer.rms_joint_error),
                (row.max_base_error, peer.max_base_error)))
            verdict = "PASS" if ratio >= SPEEDUP_BUDGET and accurate else "MISS"
            lines.append(f"  {verdict}  {row.solver}: {ratio:.1f}x OpenSim frames/s (budget >= {SPEEDUP_BUDGET:.0f}x), "
                         f"max joint error {row.max_joint_error:.3e} vs OpenSim {peer.max_joint_error:.3e} rad "
                         f"({'equal or better' if accurate else 'WORSE'})")
        if scenario.floating_q_start is not None:
            verdict = "PASS" if row.frames_per_second >= HUMANOID_FLOOR_FPS else "MISS"
            lines.append(f"  {verdict}  {row.solver}: {row.frames_per_second:.0f} frames/s on one core "
                         f"(floor {HUMANOID_FLOOR_FPS:.0f})")
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
    return f"{cpu}; {os.cpu_count()} logical CPUs on the machine, this process pinned to CPU {affinity}"


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


def run_scenario(scenario: Scenario, with_opensim: bool, repeat: int,
                 extra_opensim_accuracies=()) -> tuple[list[Row], Row | None, list[Row]]:
    """Our two rows, OpenSim's row at OpenSense's accuracy (or None) and OpenSim rows at the extra accuracies."""
    warm_up(scenario)
    ours = [score(scenario, best_of(repeat, run_dofkit_track, scenario)),
            score(scenario, best_of(repeat, run_dofkit_track_sequence, scenario))]
    peer_row, extra_rows = None, []
    if with_opensim:
        peer = make_opensim_peer(scenario)
        peer_row = score(scenario, best_of(repeat, run_opensim, scenario, peer))
        extra_rows = [score(scenario, best_of(repeat, run_opensim, scenario, peer, accuracy))
                      for accuracy in extra_opensim_accuracies]
    return ours, peer_row, extra_rows


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="./run bench ik", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS), default=["panda", "humanoid"])
    parser.add_argument("--frames", type=int, default=500, help="frames per scenario (default 500)")
    parser.add_argument("--noise-deg", type=float, default=0.0,
                        help="isotropic orientation noise, degrees per axis (default 0: the headline is noise-free)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per solver; the best counts (default 3)")
    parser.add_argument("--no-opensim", action="store_true", help="skip OpenSim even when it is importable")
    parser.add_argument("--opensim-accuracy", type=float, nargs="*", default=[], metavar="A",
                        help="extra OpenSim rows at these accuracies (for information; the budgets use OpenSense's "
                             "1e-4)")
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
    print(f"timing: frames/s over frames 1..T-1 after the assemble at t0, best of {arguments.repeat}")
    if with_opensim:
        # its per-solver [info] lines would break the table
        opensim_peer.import_opensim().Logger.setLevelString("Warn")
    try:
        for name in arguments.scenarios:
            scenario = SCENARIOS[name](num_frames=arguments.frames, noise_deg=arguments.noise_deg)
            print()
            print(scenario.description() + (f", noise {arguments.noise_deg} deg" if arguments.noise_deg else ""))
            ours, peer_row, extra_rows = run_scenario(scenario, with_opensim, arguments.repeat,
                                                      arguments.opensim_accuracy)
            print(format_table(scenario, ours + ([peer_row] if peer_row else []) + extra_rows))
            if peer_row is not None:
                for row in ours:
                    print(f"  ratio {row.solver} / OpenSim: {row.frames_per_second / peer_row.frames_per_second:.1f}x "
                          f"frames/s")
            print("budgets:")
            for line in budget_lines(scenario, ours, peer_row, reason):
                print(line)
    except (BenchmarkError, opensim_peer.ModelConversionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
