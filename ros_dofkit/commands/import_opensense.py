"""``dofkit import opensense FILE.sto --out BAG``: an OpenSense orientation table -> a ROS 2 bag of sensor_msgs/Imu.

Where you are: ``ros_dofkit.commands`` -- argument parsing and output only. Reading and the frame conversion are
``ros_dofkit.core.recordings.opensim_files`` / ``imu_series``; messages and the bag ``ros_dofkit.commands``'
shared importer helpers (``ros_dofkit.ros.imu_messages``, ``ros_dofkit.ros.bag_io``).
"""

from __future__ import annotations

import argparse
import math

from ros_dofkit.commands import add_bag_arguments, add_import_parser, convert_to_bag, finite_float

COMMAND = "opensense"
DEFAULT_SENSOR_TO_OPENSIM = (-math.pi / 2, 0.0, 0.0)  # equals opensim_files.DEFAULT_SENSOR_TO_OPENSIM (a test checks)

DESCRIPTION = """\
Convert OpenSense's orientation table (the quaternion .sto its Xsens and APDM readers write: DataType=Quaternion,
endheader, 'time' and one column per IMU, each cell w,x,y,z) into a bag of sensor_msgs/Imu: one topic per column,
/imu/<segment>/data with frame <segment>_imu for a column <segment>_imu, stamped with the table's time (seconds,
plus --stamp-offset), orientation only.

Frames: OpenSense rotates the table's world G into OpenSim's ground O (y up) with sensor_to_opensim_rotations
(rx, ry, rz), R_OG = R_z(rz) R_y(ry) R_x(rx). ROS's world W is z up (REP-103): R_WO = R_x(+90 deg). The messages
carry R_WS = R_WO R_OG R_GS. Give the same --sensor-to-opensim-rotations as your OpenSense set-up file (radians;
default -1.5707963 0 0, OpenSense's value for z-up Xsens/APDM data, which leaves the data's world unchanged; 0 0 0
for a table already in OpenSim's y-up ground).
"""


def register(subparsers) -> argparse.ArgumentParser:
    parser = add_import_parser(subparsers, COMMAND, help="OpenSense orientation table (.sto) -> bag of sensor_msgs/Imu",
                               description=DESCRIPTION)
    parser.add_argument("table", metavar="FILE.sto", help="OpenSense orientation table (quaternions)")
    add_bag_arguments(parser)
    parser.add_argument("--sensor-to-opensim-rotations", nargs=3, type=finite_float, metavar=("RX", "RY", "RZ"),
                        default=DEFAULT_SENSOR_TO_OPENSIM,
                        help="OpenSense's sensor_to_opensim_rotations in radians (default -pi/2 0 0)")
    parser.add_argument("--imus", nargs="+", metavar="LABEL", help="import only these columns (e.g. pelvis_imu)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Convert; prints one line per topic. Returns the exit status (0 ok, 2 bad input: nothing written)."""
    from ros_dofkit.core.recordings.imu_series import read_opensense

    rx, ry, rz = args.sensor_to_opensim_rotations
    return convert_to_bag(args, COMMAND, lambda: read_opensense(args.table, args.sensor_to_opensim_rotations,
                                                                args.imus),
                          f"orientation R_WS = R_x(90 deg) R_OG R_GS, sensor_to_opensim_rotations ({rx:.7g}, "
                          f"{ry:.7g}, {rz:.7g}) rad")
