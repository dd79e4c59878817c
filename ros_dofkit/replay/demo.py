"""The demo run: simulate the built-in arm, estimate its joints, compare with the truth, plot and judge.

You are in ``ros_dofkit.replay``; ``dofkit demo`` (ros_dofkit/commands/demo.py) parses options and prints. This
module holds the run itself. The in-process path feeds the simulated samples straight into the estimator core
in stamp order (no DDS); the pass/fail rule is the same on every path: every estimated joint's RMS error,
after the first half second, below ``max_rms_deg``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ros_dofkit.ros.output_files import write_text

#: Accuracy the demo promises with the default noise: RMS error of every estimated joint below this (deg).
DEFAULT_MAX_RMS_DEG = 2.0
DEFAULT_DURATION_S = 15.0
DEFAULT_IMU_RATE_HZ = 100.0
DEFAULT_ENCODER_RATE_HZ = 50.0
#: Simulated time of the first sample (s): positive, so that jittered stamps and ``/clock`` never reach zero (an
#: all-zero sim time means "no clock yet" to a ROS node).
DEMO_START_S = 1.0


@dataclass(frozen=True)
class DemoOptions:
    """What to simulate and how to judge it (``dofkit demo`` options)."""

    duration_s: float = DEFAULT_DURATION_S
    noise: str = "default"
    seed: int = 0
    imu_rate_hz: float = DEFAULT_IMU_RATE_HZ
    encoder_rate_hz: float = DEFAULT_ENCODER_RATE_HZ
    max_rms_deg: float = DEFAULT_MAX_RMS_DEG
    settle_s: float = 0.5

    def __post_init__(self):
        for name in ("duration_s", "imu_rate_hz", "encoder_rate_hz", "max_rms_deg"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
        if self.duration_s <= self.settle_s:
            raise ValueError(f"duration_s: expected more than the {self.settle_s} s settling time, "
                             f"got {self.duration_s}")


@dataclass(frozen=True)
class DemoOutcome:
    """The results of a demo run, its truth, the report, and where the plot and summary went (if written)."""

    results: list
    truth: object
    report: object
    passed: bool
    path: str
    plot_path: Path | None
    summary_path: Path | None


def simulate_demo(robot, options: DemoOptions):
    """The :class:`~ros_dofkit.core.simulation.SimulationRun` of the demo robot for ``options``."""
    from ros_dofkit.core.simulation import SensorSimulator, SineTrajectory, noise_preset
    from ros_dofkit.replay.demo_robot import DEMO_CENTRE, DEMO_MAX_AMPLITUDE

    trajectory = SineTrajectory(robot.plant, seed=options.seed, centre=DEMO_CENTRE,
                                max_amplitude=DEMO_MAX_AMPLITUDE)
    simulator = SensorSimulator(robot.plant, robot.imus, robot.encoder_joints, trajectory,
                                noise_preset(options.noise), imu_rate_hz=options.imu_rate_hz,
                                encoder_rate_hz=options.encoder_rate_hz, seed=options.seed)
    return simulator.run(options.duration_s, start_s=DEMO_START_S)


def summary_text(report, options: DemoOptions, passed: bool, path: str) -> str:
    """The demo's closing summary: settings, the report table and the verdict."""
    worst = report.worst_estimated_rms_deg()
    verdict = "PASS" if passed else "FAIL"
    return "\n".join([
        f"dofkit demo ({path}): 7-dof arm, 4 IMUs at {options.imu_rate_hz:g} Hz, encoders on 2 joints at "
        f"{options.encoder_rate_hz:g} Hz, noise '{options.noise}', seed {options.seed}, {options.duration_s:g} s",
        "",
        report.table(),
        "",
        f"{verdict}: worst RMS error of an estimated joint {worst:.3f} deg "
        f"(required < {options.max_rms_deg:g} deg)",
    ])


def write_outputs(outcome_results, truth, report, options, passed, path, out_dir, joint_names):
    """Write demo.png and summary.txt into ``out_dir``; return their paths."""
    from ros_dofkit.replay.pipeline import plot_tracking

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_path = out_dir / "demo.png"
    summary_path = out_dir / "summary.txt"
    plot_tracking(outcome_results, truth, joint_names, plot_path,
                  title=f"dofkit demo: estimated vs true joint angles (noise '{options.noise}')")
    write_text(summary_path, summary_text(report, options, passed, path) + "\n")
    return plot_path, summary_path


def judge_estimates(robot, run, truth, results, latencies_s, options: DemoOptions, path: str,
                    out_dir=None) -> DemoOutcome:
    """The outcome of a demo run on ``path`` (in process or over DDS, ``DemoOutcome.path``): its ``results``
    compared with the ``truth`` of the simulated ``run`` (the report, with the simulated message counts and the
    cycles' ``latencies_s``) and the verdict; the plot and summary written into ``out_dir`` when given."""
    from ros_dofkit.replay.pipeline import tracking_report

    counts = {f"imu {r.name}": len(r.stamps) for r in run.imus}
    counts["joint_states"] = len(run.encoders.stamps)
    joint_names = robot.estimated_joints + robot.encoder_joints
    report = tracking_report(results, truth, joint_names, robot.estimated_joints, counts, latencies_s,
                             settle_s=options.settle_s)
    passed = report.meets(options.max_rms_deg)
    plot_path = summary_path = None
    if out_dir is not None:
        plot_path, summary_path = write_outputs(results, truth, report, options, passed, path, out_dir, joint_names)
    return DemoOutcome(results, truth, report, passed, path, plot_path, summary_path)


def run_demo_in_process(options: DemoOptions, out_dir=None, progress=None) -> DemoOutcome:
    """Simulate, estimate in this process (no DDS), report. ``progress(fraction, text)`` shows progress."""
    from ros_dofkit.core.estimator.estimator import Estimator
    from ros_dofkit.replay.demo_robot import build_demo_robot
    from ros_dofkit.replay.pipeline import ReplayLoop, simulation_inputs, truth_from_simulation

    robot = build_demo_robot()
    run = simulate_demo(robot, options)
    truth = truth_from_simulation(run)
    estimator = Estimator(robot.plant, robot.estimator_config)
    loop = ReplayLoop(estimator)
    start, end = float(run.times[0]), float(run.times[-1])

    def show(stats):
        if progress is None or stats.last_stamp is None:
            return
        progress((stats.last_stamp - start) / (end - start),
                 f"t {stats.last_stamp - start:5.1f}/{end - start:.1f} s  cycles {stats.cycles}")

    loop.run(simulation_inputs(run), progress=show)
    results = [r for r in loop.results if getattr(r, "initialized", True)]
    return judge_estimates(robot, run, truth, results, loop.statistics.cycle_latency_s, options,
                           "in-process, no DDS", out_dir)

