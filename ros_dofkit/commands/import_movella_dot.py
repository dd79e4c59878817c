"""``dofkit import movella-dot FILE.csv... --out BAG``: Movella DOT CSV exports -> a ROS 2 bag of sensor_msgs/Imu.

Where you are: ``ros_dofkit.commands`` -- argument parsing and output only. Reading is
``ros_dofkit.core.recordings.imu_series.read_movella_dot_csv``; messages and the bag ``ros_dofkit.commands``'
shared importer helpers.
"""

from __future__ import annotations

import argparse
import sys

from ros_dofkit.commands import (
    EARTH_CONVENTION_CHOICES,
    add_bag_arguments,
    add_import_parser,
    convert_to_bag,
)

COMMAND = "movella-dot"

DESCRIPTION = """\
Convert the CSV files the Movella DOT app exports (one per sensor: a preamble with DeviceTag, then
PacketCounter,SampleTimeFine,Quat_W,Quat_X,Quat_Y,Quat_Z[,Acc_X..Z][,Gyr_X..Z],...) into one bag of
sensor_msgs/Imu, one topic /imu/<tag>/data per sensor (frame <tag>_imu; <tag> = the file's DeviceTag, or --names).
Stamps are SampleTimeFine (the sensors' synchronised clock, microseconds, wrap-around unwrapped) plus
--stamp-offset; orientation from Movella's local earth frame (ENU by default) to ROS's ENU world; Gyr deg/s ->
rad/s; Acc m/s^2 (sensor frame, gravity included). Euler, FreeAcc (gravity removed, earth frame), Mag and Status
columns are ignored; an export without the quaternion columns is refused.
"""


def register(subparsers) -> argparse.ArgumentParser:
    parser = add_import_parser(subparsers, COMMAND, help="Movella DOT CSV exports -> bag of sensor_msgs/Imu",
                               description=DESCRIPTION)
    parser.add_argument("files", metavar="FILE.csv", nargs="+", help="one export per sensor")
    add_bag_arguments(parser)
    parser.add_argument("--names", nargs="+", metavar="NAME", help="IMU names, one per file (default: DeviceTag)")
    parser.add_argument("--earth-convention", choices=EARTH_CONVENTION_CHOICES, default="ENU",
                        help="the sensors' earth frame (Movella default ENU)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Convert; prints one line per topic. Exit status 0 ok, 2 bad input (nothing written)."""
    from ros_dofkit.core.recordings.errors import RecordingError
    from ros_dofkit.core.recordings.imu_series import read_movella_dot_csv
    from ros_dofkit.ros.imu_messages import ros_name

    if args.names is not None and len(args.names) != len(args.files):
        print(f"dofkit import {COMMAND}: error: {len(args.names)} --names for {len(args.files)} files",
              file=sys.stderr)
        return 2

    def read():
        names = args.names or [None] * len(args.files)
        series = [read_movella_dot_csv(path, name, args.earth_convention)
                  for path, name in zip(args.files, names, strict=True)]
        topics = [ros_name(one.name) for one in series]
        repeated = sorted({t for t in topics if topics.count(t) > 1})
        if repeated:
            raise RecordingError(f"several files name the IMU(s) {repeated}; give --names")
        return series

    return convert_to_bag(args, COMMAND, read, f"orientation converted {args.earth_convention} -> ENU")
