"""``dofkit import csv FILE.csv --out BAG``: a generic IMU table (CSV) -> a ROS 2 bag of sensor_msgs/Imu.

Where you are: ``ros_dofkit.commands`` -- argument parsing and output only. Reading is
``ros_dofkit.core.recordings.imu_series.read_imu_csv``; messages and the bag ``ros_dofkit.commands``' shared
importer helpers. The template ``ros_dofkit/templates/imu_table.csv`` ships with the package (``--template``
prints it).
"""

from __future__ import annotations

import argparse
import sys

from ros_dofkit.commands import (
    EARTH_CONVENTION_CHOICES,
    add_bag_arguments,
    add_import_parser,
    convert_to_bag,
    finite_float,
)

COMMAND = "csv"
GYRO_UNIT_CHOICES = ("deg/s", "rad/s")
ACCEL_UNIT_CHOICES = ("g", "m/s^2")

DESCRIPTION = """\
Convert a CSV table of IMU samples into a bag of sensor_msgs/Imu, one topic /imu/<imu>/data (frame <imu>_imu) per
IMU. The first line names the columns, then one row per time:

  time                                 seconds (plus --time-offset), strictly increasing
  <imu>_qw, <imu>_qx, <imu>_qy, <imu>_qz  orientation R_ES of the sensor in the earth frame (--earth-convention)
  <imu>_gx, <imu>_gy, <imu>_gz         optional: gyroscope, sensor frame (--gyro-unit)
  <imu>_ax, <imu>_ay, <imu>_az         optional: accelerometer, specific force in the sensor frame, gravity
                                       included (--accel-unit)

Every cell must be a finite number; a column that does not follow these names stops the import with its name.
The orientation is converted to ROS's ENU world. Template: `dofkit import csv --template > my_imus.csv`
(ros_dofkit/templates/imu_table.csv: two IMUs, one with gyro and accelerometer).
"""


def register(subparsers) -> argparse.ArgumentParser:
    parser = add_import_parser(subparsers, COMMAND, help="IMU table (CSV: time, <imu>_qw..) -> bag of sensor_msgs/Imu",
                               description=DESCRIPTION)
    parser.add_argument("table", metavar="FILE.csv", nargs="?", help="the CSV table")
    parser.add_argument("--template", action="store_true", help="print the template table and exit")
    add_bag_arguments(parser)
    parser.add_argument("--earth-convention", choices=EARTH_CONVENTION_CHOICES, default="ENU",
                        help="earth frame of the quaternions (default ENU)")
    parser.add_argument("--gyro-unit", choices=GYRO_UNIT_CHOICES, default="rad/s", help="default rad/s")
    parser.add_argument("--accel-unit", choices=ACCEL_UNIT_CHOICES, default="m/s^2", help="default m/s^2")
    parser.add_argument("--time-offset", type=finite_float, default=0.0, metavar="SECONDS",
                        help="added to the time column before the bag stamps are made (e.g. to make them >= 0)")
    parser.set_defaults(func=run)
    # --out is required for a conversion, not for --template.
    for action in parser._actions:
        if action.dest == "out":
            action.required = False
    return parser


def template_path():
    from importlib.resources import files

    return files("ros_dofkit") / "templates" / "imu_table.csv"


def run(args: argparse.Namespace) -> int:
    """Convert (or print the template); prints one line per topic. Exit status 0 ok, 2 bad input."""
    if args.template:
        print(template_path().read_text(encoding="utf-8"), end="")
        return 0
    if args.table is None or args.out is None:
        print("dofkit import csv: error: FILE.csv and --out BAG are required (or --template)", file=sys.stderr)
        return 2
    from ros_dofkit.core.recordings.imu_series import read_imu_csv

    return convert_to_bag(args, COMMAND, lambda: read_imu_csv(args.table, args.earth_convention, args.gyro_unit,
                                                              args.accel_unit, args.time_offset),
                          f"orientation converted {args.earth_convention} -> ENU")
