"""``dofkit demo``: simulate a 7-dof arm with four IMUs and two encoders, estimate its joints, judge the result.

Where you are: a subcommand module (argument parsing and output only); the run lives in
``ros_dofkit.replay.demo``. Exit status 0 when every estimated joint's RMS error is below ``--max-rms`` degrees,
1 when not, 2 for bad options.
"""

from __future__ import annotations

import argparse
import sys

from ros_dofkit.commands import add_simulation_arguments

DESCRIPTION = """\
Run ros_dofkit end to end on its built-in robot, a 7-dof arm (ros_dofkit/models/arm7.urdf) with four IMUs on
links 3, 5, 6 and 7 and encoders on joints 1 and 2. A simulator moves the arm along a smooth, seeded random
trajectory within its joint limits and produces IMU samples (orientation, gyro, accelerometer, with noise, gyro
bias, heading drift, dropouts and stamp jitter) and encoder joint states; the estimator measures joints 1-2 from
the encoders and estimates joints 3-7 from the IMU orientations.

It shows progress, then prints a summary: per-joint RMS and maximum error against the simulated truth (degrees),
each IMU's mean orientation error, input and output rates and the input-to-output latency, and writes
summary.txt and demo.png (estimated vs true joint angles) into --out.

Accuracy promise: with the default noise every estimated joint's RMS error is below 2 degrees (after the first
0.5 s); the exit status is 0 only if that holds (threshold: --max-rms).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from ros_dofkit.replay.demo import DEFAULT_MAX_RMS_DEG

    parser = subparsers.add_parser(
        "demo",
        help="simulate an arm with IMUs and encoders, estimate its joints, print a summary and plot",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_simulation_arguments(parser)
    parser.add_argument("--max-rms", type=float, default=DEFAULT_MAX_RMS_DEG, metavar="DEG",
                        help=f"pass threshold on each estimated joint's RMS error (default {DEFAULT_MAX_RMS_DEG:g})")
    parser.add_argument("--out", default="dofkit_demo", metavar="DIR",
                        help="directory for summary.txt and demo.png (default ./dofkit_demo)")
    parser.add_argument("--no-dds", action="store_true",
                        help="run the simulator and the estimator core in this process, without DDS (default: "
                        "the simulator publishes over DDS in real time to the estimator node in its own process)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ros_dofkit.replay.demo import DemoOptions, run_demo_in_process, summary_text
    from ros_dofkit.replay.progress import ProgressLine

    try:
        options = DemoOptions(duration_s=args.duration, noise=args.noise, seed=args.seed,
                              imu_rate_hz=args.imu_rate, encoder_rate_hz=args.encoder_rate,
                              max_rms_deg=args.max_rms)
    except ValueError as error:
        print(f"dofkit demo: error: {error}", file=sys.stderr)
        return 2
    progress = ProgressLine(enabled=not args.quiet)
    try:
        if args.no_dds:
            outcome = run_demo_in_process(options, out_dir=args.out, progress=progress.update)
        else:
            from ros_dofkit.replay.demo_dds import DemoDdsError, run_demo_dds

            try:
                outcome = run_demo_dds(options, out_dir=args.out, progress=progress.update)
            except DemoDdsError as error:
                progress.close()
                print(f"dofkit demo: error: {error}\n(--no-dds runs the same pipeline in this process, without DDS)",
                      file=sys.stderr)
                return 1
    finally:
        progress.close()
    print(summary_text(outcome.report, options, outcome.passed, outcome.path))
    print(f"plot: {outcome.plot_path}\nsummary: {outcome.summary_path}")
    return 0 if outcome.passed else 1
