"""``dofkit record``: write the demo simulator's output (IMUs, encoders, truth) to a ROS 2 bag.

Where you are: a subcommand module (argument parsing and output); the work is ``ros_dofkit.replay.record``.
Exit status 0 on success, 1 when the bag cannot be written (e.g. it exists), 2 for bad options.
"""

from __future__ import annotations

import argparse
import sys

from ros_dofkit.commands import add_simulation_arguments

DESCRIPTION = """\
Simulate the demo robot (the 7-dof arm of `dofkit demo`) and write what it would publish to a new ROS 2 bag:
one sensor_msgs/Imu topic per IMU (/imu/<name>/data), the encoders on /joint_states, the true joint angles on
/ground_truth/joint_states and, with --clock, /clock (rosgraph_msgs/Clock). Bag stamps equal header stamps.
The estimator configuration for the bag is written beside it (OUT.estimator.yaml unless --config-out says
otherwise), ready for `dofkit replay OUT --config OUT.estimator.yaml --out ESTIMATED`.
Existing files are never overwritten.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "record", help="write the demo simulator's IMU, encoder and truth streams to a ROS 2 bag",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", metavar="OUT", help="path of the new bag (a folder; must not exist)")
    parser.add_argument("--storage", default="sqlite3", choices=["sqlite3", "mcap"],
                        help="bag storage format (default sqlite3)")
    add_simulation_arguments(parser)
    parser.add_argument("--clock", action="store_true", help="also write /clock on the IMU time grid")
    parser.add_argument("--config-out", default=None, metavar="FILE",
                        help="where to write the estimator configuration (default OUT.estimator.yaml; '' for none)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ros_dofkit.replay.demo import DemoOptions
    from ros_dofkit.replay.record import record_demo
    from ros_dofkit.ros.bag_io import BagError

    try:
        options = DemoOptions(duration_s=args.duration, noise=args.noise, seed=args.seed,
                              imu_rate_hz=args.imu_rate, encoder_rate_hz=args.encoder_rate)
    except ValueError as error:
        print(f"dofkit record: error: {error}", file=sys.stderr)
        return 2
    try:
        outcome = record_demo(args.out, options, storage=args.storage, clock=args.clock,
                              config_path=args.config_out)
    except BagError as error:
        print(f"dofkit record: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {outcome.bag_path} ({args.storage}, {outcome.duration_s:.1f} s):")
    for topic, count in sorted(outcome.counts.items()):
        print(f"  {topic:<28} {count:>7} messages")
    if outcome.config_path is not None:
        print(f"estimator configuration: {outcome.config_path}")
        print(f"replay it: dofkit replay {outcome.bag_path} --config {outcome.config_path} --out "
              f"{outcome.bag_path}_estimated")
    return 0
