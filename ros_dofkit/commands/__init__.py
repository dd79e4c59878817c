"""Subcommands of the ``dofkit`` command, one module each.

Where you are: ``ros_dofkit.commands``, the top layer under ``ros_dofkit.cli``; imports the standard library (and
``replay.demo``'s option defaults when a parser is built).

A subcommand module exposes ``register(subparsers)``, which adds its parser (with its own help) and sets
``func`` (called with the parsed arguments; returns an exit status or None). It holds argument parsing and output,
no math, and imports heavy modules inside ``func`` so that ``dofkit --help`` stays fast.
The ``dofkit import FORMAT`` commands share their parser group, bag options and bag writing (below).
To add a subcommand, write the module and list it in :data:`SUBCOMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from types import ModuleType

#: Modules of ``ros_dofkit.commands`` that ``dofkit`` offers, in the order ``dofkit --help`` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = ("env", "import_ximu3", "import_opensense", "import_csv", "import_movella_dot",
                                       "demo", "record", "replay", "play", "export")


def load_subcommand_modules() -> list[ModuleType]:
    """Import every module of :data:`SUBCOMMAND_MODULES`; raise TypeError for one without ``register``."""
    modules = []
    for name in SUBCOMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        if not callable(getattr(module, "register", None)):
            raise TypeError(f"subcommand module {module.__name__} must define register(subparsers); it does not")
        modules.append(module)
    return modules


def add_simulation_arguments(parser) -> None:
    """The simulator options that ``dofkit demo`` and ``dofkit record`` share: motion length, noise, seed, rates."""
    from ros_dofkit.replay.demo import DEFAULT_DURATION_S, DEFAULT_ENCODER_RATE_HZ, DEFAULT_IMU_RATE_HZ

    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, metavar="SECONDS",
                        help=f"seconds of simulated motion (default {DEFAULT_DURATION_S:g})")
    parser.add_argument("--noise", default="default", choices=["none", "low", "default", "high"],
                        help="sensor noise preset (default: default)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the motion and of the sensor noise (default 0)")
    parser.add_argument("--imu-rate", type=float, default=DEFAULT_IMU_RATE_HZ, metavar="HZ",
                        help=f"IMU sample rate (default {DEFAULT_IMU_RATE_HZ:g})")
    parser.add_argument("--encoder-rate", type=float, default=DEFAULT_ENCODER_RATE_HZ, metavar="HZ",
                        help=f"encoder joint-state rate (default {DEFAULT_ENCODER_RATE_HZ:g})")


# ---------------------------------------------------------------------------------------------- dofkit import FORMAT
# The choices are spelled out here so that `dofkit --help` does not import NumPy and rosbags; a test checks that
# they equal the library's (ros_dofkit.core.recordings.imu_series.EARTH_CONVENTIONS, ros_dofkit.ros.bag_io.STORAGES,
# DISTROS).
EARTH_CONVENTION_CHOICES = ("ENU", "NED", "NWU")
STORAGE_CHOICES = ("mcap", "sqlite3")
DISTRO_CHOICES = ("humble", "jazzy", "kilted")


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """argparse type: a finite float."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_import_parser(subparsers, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``dofkit import NAME`` (creates the ``import`` group on first use); the importer adds its
    arguments and the shared bag options (:func:`add_bag_arguments`)."""
    import_parser = subparsers.choices.get("import")
    if import_parser is None:
        import_parser = subparsers.add_parser("import", help="convert recordings from other formats to ROS 2 bags")
        import_parser.dofkit_formats = import_parser.add_subparsers(dest="import_format", metavar="FORMAT",
                                                                   required=True)
    parser = import_parser.dofkit_formats.add_parser(name, help=help, description=description,
                                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def add_bag_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, ``--storage``, ``--distro``, ``--stamp-offset`` and the covariance options of an importer."""
    parser.add_argument("--out", required=True, help="output bag folder (must not exist)")
    parser.add_argument("--storage", choices=STORAGE_CHOICES, default="sqlite3", help="bag storage (default sqlite3)")
    parser.add_argument("--distro", choices=DISTRO_CHOICES, default="jazzy",
                        help="ROS 2 message definitions to write (default jazzy)")
    parser.add_argument("--stamp-offset", type=finite_float, default=0.0, metavar="SECONDS",
                        help="added to every timestamp (e.g. the epoch time of the recording clock's zero)")
    parser.add_argument("--orientation-stddev", type=_non_negative_float, metavar="RAD",
                        help="orientation standard deviation; omitted = covariance unknown (zeros)")
    parser.add_argument("--angular-velocity-stddev", type=_non_negative_float, metavar="RAD_PER_S")
    parser.add_argument("--linear-acceleration-stddev", type=_non_negative_float, metavar="M_PER_S2")


def write_imu_bag(args: argparse.Namespace, series) -> dict:
    """Write every sample of ``series`` (ImuSeries: name, timestamp_us, quaternion_wxyz, angular_velocity,
    linear_acceleration) as sensor_msgs/Imu into the new bag ``args.out``, one topic per IMU (``/imu/<name>/data``,
    frame ``<name>_imu``), in stamp order across IMUs; returns ``{topic: messages}``. Every message is built before
    the bag is created, so a sample that cannot be a message (ImuMessageError) leaves no bag behind; BagError for
    an existing or unwritable output."""
    from ros_dofkit.ros.bag_io import BagWriter, make_typestore
    from ros_dofkit.ros.imu_messages import ximu3_device_records

    offset_ns = round(args.stamp_offset * 1e9)
    typestore = make_typestore(args.distro)
    records = []
    for one in series:
        records.extend(ximu3_device_records(
            one, typestore, stamp_offset_ns=offset_ns, orientation_stddev=args.orientation_stddev,
            angular_velocity_stddev=args.angular_velocity_stddev,
            linear_acceleration_stddev=args.linear_acceleration_stddev))
    records.sort(key=lambda record: record[1])  # stable: same-stamp order follows the IMU order
    with BagWriter(args.out, storage=args.storage, distro=args.distro, typestore=typestore) as bag:
        return bag.write_all(records)


def convert_to_bag(args: argparse.Namespace, command: str, read, conversion: str) -> int:
    """The body of a ``dofkit import`` command: ``read()`` (returns ImuSeries; raises RecordingError) then
    :func:`write_imu_bag`; prints what was written (``conversion`` says how the orientation was converted) and one
    line per topic. Returns the exit status: 0, or 2 after one error line (nothing written)."""
    from ros_dofkit.core.recordings.errors import RecordingError
    from ros_dofkit.ros.bag_io import BagError
    from ros_dofkit.ros.imu_messages import ImuMessageError

    try:
        series = list(read())
        counts = write_imu_bag(args, series)
    except (RecordingError, BagError, ImuMessageError) as error:
        print(f"dofkit import {command}: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({args.storage}, {sum(counts.values())} sensor_msgs/Imu messages); {conversion}")
    print_imu_topics(series, counts)
    return 0


def print_imu_topics(series, counts: dict) -> None:
    """One line per IMU: topic, frame, messages, time span, samples without orientation / gyro."""
    from ros_dofkit.ros.imu_messages import imu_frame_id, imu_topic

    for one in series:
        topic = imu_topic(one.name)
        print(f"  {topic:32s} frame {imu_frame_id(one.name):22s} {counts.get(topic, 0):6d} msgs  "
              f"{one.time[0]:.6f}..{one.time[-1]:.6f} s  without orientation {int((~one.has_orientation).sum())}, "
              f"without gyro/accel {int((~one.has_inertial).sum())}")
