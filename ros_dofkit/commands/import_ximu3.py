"""``dofkit import ximu3 FOLDER --out BAG``: an x-IMU3 CSV recording -> a ROS 2 bag of sensor_msgs/Imu.

Where you are: ``ros_dofkit.commands`` -- argument parsing and output only. Reading is
``ros_dofkit.core.recordings.ximu3``, message building ``ros_dofkit.ros.imu_messages``, the bag
``ros_dofkit.ros.bag_io``.

One topic per device, ``/imu/<device>/data``, frame ``<device>_imu``; header and bag stamps are the device
timestamps (plus ``--stamp-offset``); orientation R_WS in ENU converted from the device's earth convention (x-IMU3
default NWU); gyro in rad/s, acceleration in m/s². Messages are written in stamp order across devices.
"""

from __future__ import annotations

import argparse
import sys

from ros_dofkit.commands import (  # noqa: F401 (the choices are this command's too; a test compares them)
    DISTRO_CHOICES,
    EARTH_CONVENTION_CHOICES,
    STORAGE_CHOICES,
    add_bag_arguments,
    add_import_parser,
    convert_to_bag,
)

COMMAND = "ximu3"
DEFAULT_MATCH_TOLERANCE_US = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="recording folder: one sub-folder per device with Quaternion.csv and "
                                       "Inertial.csv (as written by the x-IMU3 GUI data logger)")
    add_bag_arguments(parser)
    parser.add_argument("--earth-convention", choices=EARTH_CONVENTION_CHOICES, default="NWU",
                        help="the devices' AHRS earth frame (x-IMU3 setting 'AHRS axes convention'; default NWU)")
    parser.add_argument("--devices", nargs="+", metavar="NAME", help="import only these devices")
    parser.add_argument("--match-tolerance-us", type=int, default=DEFAULT_MATCH_TOLERANCE_US,
                        help="max time between a Quaternion.csv and an Inertial.csv row of one sample (default 1000)")


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``import ximu3`` to the dofkit command line (creates the ``import`` group if it is not there yet)."""
    parser = add_import_parser(subparsers, COMMAND,
                               help="x-IMU3 CSV recording -> bag of sensor_msgs/Imu, one topic per device",
                               description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Convert; prints one line per topic. Returns the exit status (0 ok, 2 bad input)."""
    from ros_dofkit.core.recordings.ximu3 import read_recording

    return convert_to_bag(args, COMMAND, lambda: read_recording(
        args.folder, devices=args.devices, earth_convention=args.earth_convention,
        match_tolerance_us=args.match_tolerance_us), f"orientation converted {args.earth_convention} -> ENU")


def main(argv=None) -> int:
    """Stand-alone entry: ``python -m ros_dofkit.commands.import_ximu3 FOLDER --out BAG``."""
    parser = argparse.ArgumentParser(prog="dofkit import ximu3", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
