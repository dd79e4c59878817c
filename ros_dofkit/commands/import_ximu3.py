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
import math
import sys

COMMAND = "ximu3"
# The choices are spelled out here so that `dofkit --help` does not import NumPy and rosbags; a test checks that
# they equal the library's (ros_dofkit.core.recordings.ximu3.EARTH_CONVENTIONS, ros_dofkit.ros.bag_io.STORAGES,
# DISTROS).
EARTH_CONVENTION_CHOICES = ("ENU", "NED", "NWU")
STORAGE_CHOICES = ("mcap", "sqlite3")
DISTRO_CHOICES = ("humble", "jazzy", "kilted")
DEFAULT_MATCH_TOLERANCE_US = 1000


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="recording folder: one sub-folder per device with Quaternion.csv and "
                                       "Inertial.csv (as written by the x-IMU3 GUI data logger)")
    parser.add_argument("--out", required=True, help="output bag folder (must not exist)")
    parser.add_argument("--storage", choices=STORAGE_CHOICES, default="sqlite3", help="bag storage (default sqlite3)")
    parser.add_argument("--earth-convention", choices=EARTH_CONVENTION_CHOICES, default="NWU",
                        help="the devices' AHRS earth frame (x-IMU3 setting 'AHRS axes convention'; default NWU)")
    parser.add_argument("--devices", nargs="+", metavar="NAME", help="import only these devices")
    parser.add_argument("--match-tolerance-us", type=int, default=DEFAULT_MATCH_TOLERANCE_US,
                        help="max time between a Quaternion.csv and an Inertial.csv row of one sample (default 1000)")
    parser.add_argument("--stamp-offset", type=_finite_float, default=0.0, metavar="SECONDS",
                        help="added to every device timestamp (e.g. the epoch time of the device clock's zero)")
    parser.add_argument("--distro", choices=DISTRO_CHOICES, default="jazzy",
                        help="ROS 2 message definitions to write (default jazzy)")
    parser.add_argument("--orientation-stddev", type=_non_negative_float, metavar="RAD",
                        help="orientation standard deviation; omitted = covariance unknown (zeros)")
    parser.add_argument("--angular-velocity-stddev", type=_non_negative_float, metavar="RAD_PER_S")
    parser.add_argument("--linear-acceleration-stddev", type=_non_negative_float, metavar="M_PER_S2")


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``import ximu3`` to the dofkit command line (creates the ``import`` group if it is not there yet)."""
    import_parser = subparsers.choices.get("import")
    if import_parser is None:
        import_parser = subparsers.add_parser("import", help="convert recordings from other formats to ROS 2 bags")
        import_parser.dofkit_formats = import_parser.add_subparsers(dest="import_format", metavar="FORMAT",
                                                                   required=True)
    parser = import_parser.dofkit_formats.add_parser(
        COMMAND, help="x-IMU3 CSV recording -> bag of sensor_msgs/Imu, one topic per device",
        description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Convert; prints one line per topic. Returns the exit status (0 ok, 2 bad input)."""
    from ros_dofkit.core.recordings.ximu3 import XIMU3RecordingError, read_recording
    from ros_dofkit.ros.bag_io import BagError, BagWriter
    from ros_dofkit.ros.imu_messages import ImuMessageError, imu_frame_id, imu_topic, ximu3_device_records

    try:
        recording = read_recording(args.folder, devices=args.devices, earth_convention=args.earth_convention,
                                   match_tolerance_us=args.match_tolerance_us)
        offset_ns = round(args.stamp_offset * 1e9)
        with BagWriter(args.out, storage=args.storage, distro=args.distro) as bag:
            records = []
            for device in recording:
                records.extend(ximu3_device_records(
                    device, bag.typestore, stamp_offset_ns=offset_ns,
                    orientation_stddev=args.orientation_stddev,
                    angular_velocity_stddev=args.angular_velocity_stddev,
                    linear_acceleration_stddev=args.linear_acceleration_stddev))
            records.sort(key=lambda record: record[1])  # stable: same-stamp order follows device order
            counts = bag.write_all(records)
    except (XIMU3RecordingError, BagError, ImuMessageError) as error:
        print(f"dofkit import ximu3: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({args.storage}, {sum(counts.values())} sensor_msgs/Imu messages); orientation "
          f"converted {args.earth_convention} -> ENU")
    for device in recording:
        topic = imu_topic(device.name)
        missing_q = int((~device.has_orientation).sum())
        missing_i = int((~device.has_inertial).sum())
        print(f"  {topic:32s} frame {imu_frame_id(device.name):22s} {counts.get(topic, 0):6d} msgs  "
              f"{device.time[0]:.6f}..{device.time[-1]:.6f} s  "
              f"without orientation {missing_q}, without gyro/accel {missing_i}")
    return 0


def main(argv=None) -> int:
    """Stand-alone entry: ``python -m ros_dofkit.commands.import_ximu3 FOLDER --out BAG``."""
    parser = argparse.ArgumentParser(prog="dofkit import ximu3", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
