"""``dofkit replay``: run the estimator offline over a bag and write its outputs to a new bag (no DDS).

Where you are: a subcommand module (argument parsing and output); the work is ``ros_dofkit.replay.bag_replay``.
Exit status 0 on success, 1 when the bag or the configuration cannot be used (the message says why).
"""

from __future__ import annotations

import argparse
import gc
import sys

DESCRIPTION = """\
Offline replay: read the bag IN's encoder JointState and IMU messages in stamp order, run the same estimator
core as the live node (configured by the node's parameter file --config), and write what the node would
publish into the new bag --out: /estimated/joint_states, /estimated/<instance>/joint_states,
/estimated/odometry/<instance> (floating bases), /estimated/sensor_errors, /tf and /tf_static, each stamped
with the input stamp that completed the cycle. No ROS graph or DDS is involved; IN is only read.

When IN holds /ground_truth/joint_states (bags from `dofkit record`), the summary compares the estimate with it
(per-joint RMS error in degrees). Topics come from the configuration (joint_states_topic, imus.<name>.topic,
output_namespace), taken as absolute names.

A configuration whose IMU mountings are "calibrate" (or with a heading_reference) needs --calibrate START END:
the seconds of the bag, counted from its first input stamp, in which the robot holds its calibration pose (for
a person: standing upright). The estimator calibrates on the inputs stamped in [START, END), exactly as the
node's ~/calibrate service would, then replays the whole bag with the calibrated mountings and world alignment;
--calibrated-config saves them as a parameter file the live node can start from. Raw IMUs (gyro + accelerometer,
no magnetometer) each have a heading of their own, which a static pose cannot tell from the mounting:
--hinge-calibration then turns each raw IMU's heading and mounting together so that every hinge between two IMUs
(knees) has one axis seen from both and every 2-dof joint (ankles) keeps the angle between its axes, over the bag
from START to its end (Laidig et al. 2017, 2019). A replay that produces no
estimate at all fails (exit status 1) and says why.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", help="estimate offline over a bag's JointState and Imu messages, write the outputs to a new bag",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="IN", help="input bag (folder, sqlite3 or mcap)")
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="estimator parameter file (ROS 2 YAML, as config/*.yaml or OUT.estimator.yaml)")
    parser.add_argument("--out", required=True, metavar="OUT", help="output bag (a new folder)")
    parser.add_argument("--storage", default="sqlite3", choices=["sqlite3", "mcap"],
                        help="output bag storage (default sqlite3)")
    parser.add_argument("--calibrate", nargs=2, type=float, default=None, metavar=("START", "END"),
                        help="calibrate on the inputs stamped in [START, END) seconds after the bag's first input "
                        "stamp (the robot holds its calibration pose then), then replay the whole bag")
    parser.add_argument("--calibrated-config", default=None, metavar="FILE",
                        help="with --calibrate: write the calibrated parameter file (fixed mountings, world "
                        "alignment) for the live node")
    parser.add_argument("--hinge-calibration", action="store_true",
                        help="with --calibrate: turn the headings of raw IMUs (gyro + accelerometer, no "
                        "magnetometer) so that every hinge between two IMUs (knees) has one axis seen from both and "
                        "every 2-dof joint (ankles) keeps its axes' angle, over their orientation filters from START "
                        "to the bag's end (Laidig et al. 2017, 2019); the bag must move those joints after START")
    parser.add_argument("--calibration-max-spread", type=float, default=2.0, metavar="DEG",
                        help="with --calibrate: largest angle a sample may lie from its IMU's mean over the window "
                        "(default 2 deg; the pose must be held still)")
    parser.add_argument("--plot", default=None, metavar="PNG", help="also plot the estimated (and true) joints")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ros_dofkit.core.estimator.config import EstimatorConfigError
    from ros_dofkit.precompile import first_start_note, mark_warm
    from ros_dofkit.replay.bag_replay import replay_bag
    from ros_dofkit.replay.pipeline import ReplayError, plot_tracking
    from ros_dofkit.replay.process import keep_freed_memory
    from ros_dofkit.replay.progress import ProgressLine
    from ros_dofkit.replay.setup import ReplaySetup
    from ros_dofkit.ros.bag_io import BagError
    from ros_dofkit.ros.parameters import ParameterValueError

    def fail(message: str) -> int:
        print(f"dofkit replay: error: {message}", file=sys.stderr)
        return 1

    try:
        setup = ReplaySetup.from_parameter_file(args.config)
    except (ReplayError, ParameterValueError, EstimatorConfigError) as error:
        return fail(f"configuration {args.config}: {error}")
    except (OSError, ValueError) as error:
        return fail(f"cannot use the configuration {args.config}: {error}")
    if args.calibrated_config is not None and args.calibrate is None:
        return fail("--calibrated-config needs --calibrate START END (the calibration it saves)")
    if args.hinge_calibration and args.calibrate is None:
        return fail("--hinge-calibration needs --calibrate START END (the static calibration it refines)")
    note = first_start_note("replay")  # a cold numba cache: say so before the long silence
    if note:
        print(f"dofkit replay: {note}", file=sys.stderr)
    progress = ProgressLine(enabled=not args.quiet)
    # What is imported and configured by now lives to the end: out of the cyclic garbage collector's sight, its
    # collections during the replay walk only what the replay allocates (~5-10% of a short replay's wall time).
    gc.collect()
    gc.freeze()
    keep_freed_memory()  # a window's pages serve the next one (replay.process)
    try:
        outcome = replay_bag(args.input, setup, args.out, storage=args.storage, progress=progress.update,
                             calibration=args.calibrate, calibration_max_spread_deg=args.calibration_max_spread,
                             hinge_calibration=args.hinge_calibration)
    except (BagError, ReplayError) as error:
        return fail(str(error))
    finally:
        progress.close()
    if note:
        mark_warm("replay")
    if outcome.calibration is not None:
        print(outcome.calibration.summary())
        if args.calibrated_config is not None:
            from ros_dofkit.replay.calibration import write_parameter_file

            calibration = outcome.calibration
            try:
                write_parameter_file(calibration.parameters, args.calibrated_config,
                                     f"{args.config} calibrated on [{calibration.start_s:g}, {calibration.end_s:g}) "
                                     f"s of {args.input} (dofkit replay --calibrate)")
            except OSError as error:
                return fail(f"cannot write the calibrated configuration {args.calibrated_config}: {error}")
            print(f"calibrated configuration: {args.calibrated_config}")
    stats = outcome.statistics
    factor = stats.span_s / stats.wall_time_s if stats.wall_time_s > 0 else float("inf")
    print(f"replayed {args.input}: {stats.imu_samples} IMU samples, {stats.joint_states} joint states, "
          f"{stats.span_s:.2f} s of input in {stats.wall_time_s:.2f} s ({factor:.1f}x real time); "
          f"{stats.cycles} cycles, {stats.rejected} inputs rejected, {stats.resets} tracking resets")
    print(f"wrote {args.out}:")
    for topic, count in sorted(outcome.output_counts.items()):
        print(f"  {topic:<32} {count:>7} messages")
    if outcome.report is not None:
        print()
        print("estimate vs /ground_truth/joint_states:")
        print(outcome.report.table())
    if args.plot and outcome.results:
        plot_tracking(outcome.results, outcome.truth, outcome.joint_names, args.plot,
                      title=f"dofkit replay {args.input}")
        print(f"plot: {args.plot}")
    return 0
