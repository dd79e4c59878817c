"""``dofkit export BAG --config FILE --out FILE.mot|.sto|.csv``: an estimate (a ``dofkit replay`` output bag) to an
OpenSim motion file, an OpenSim Storage file or a CSV table.

Where you are: ``ros_dofkit.commands`` -- argument parsing and output only. The file formats (and the frame and
unit rules) are ``ros_dofkit.core.recordings.opensim_files``; the bag is read with ``ros_dofkit.ros.bag_io`` and
decoded with ``ros_dofkit.ros.cdr``; the robot (joint types) comes from the estimator's parameter file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

COMMAND = "export"
FORMATS = ("mot", "sto", "csv")

DESCRIPTION = """\
Export the joint angles of an estimate (the /estimated/joint_states of a `dofkit replay` output bag) to a file
OpenSim, Moco or a spreadsheet reads:

  .mot  OpenSim motion file (Storage, version=1, nRows, nColumns, inDegrees=yes, endheader; time + one column
        per coordinate), as the Inverse Kinematics tool writes it;
  .sto  the same Storage layout, angles in radians (inDegrees=no) unless --degrees;
  .csv  one header row (time (s), <coordinate> (deg|m)), one row per estimate.

Rotational coordinates (revolute joints, a planar joint's angle) are converted to degrees (.mot, .csv) or kept in
radians; translational ones are in meters. --config is the estimator parameter file the replay used: it gives the
robot (which coordinates are angles) and the topic. Columns carry the URDF joint names; a name-map file (YAML)
renames them to an OpenSim model's coordinates, flips signs, or leaves joints out:

  left_knee_flexion: knee_angle_l                        # rename
  right_knee_flexion: {coordinate: knee_angle_r, scale: -1}  # rename, count the other way
  left_hip_rotation: null                                # leave out

Time is the estimate's header stamp in seconds (the input's timeline), or from 0 with --zero-time. The file is
written whole or not at all (temporary file, then rename); a bad estimate (no messages, NaN, time not strictly
increasing) or name map stops with one line naming the row or entry, and nothing is written.
"""


def register(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        COMMAND, help="estimate bag (dofkit replay output) -> OpenSim .mot / .sto or CSV",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", metavar="BAG", help="a dofkit replay output bag")
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="the estimator parameter file the replay used (robot and topics)")
    parser.add_argument("--out", required=True, metavar="FILE", help="output file: .mot, .sto or .csv")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="file format (default: from the --out extension)")
    parser.add_argument("--name-map", metavar="YAML", default=None,
                        help="URDF joint -> OpenSim coordinate names (and optional scale); see above")
    parser.add_argument("--only-mapped", action="store_true", help="export only the joints the name map names")
    parser.add_argument("--topic", default=None,
                        help="JointState topic to export (default: <output_namespace>/joint_states of --config)")
    parser.add_argument("--degrees", action="store_true", help=".sto: angles in degrees (inDegrees=yes)")
    parser.add_argument("--radians", action="store_true", help=".mot/.csv: angles in radians (inDegrees=no)")
    parser.add_argument("--zero-time", action="store_true", help="time from 0 at the first estimate")
    parser.add_argument("--name", default="Coordinates", help="the Storage name line (default Coordinates)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.set_defaults(func=run)
    return parser


def _fail(message: str) -> int:
    print(f"dofkit export: error: {message}", file=sys.stderr)
    return 1


def read_joint_states(bag, topic: str):
    """``(time_s (n,), names, positions (n, k))`` of every JointState on ``topic``, in bag order; raises
    RecordingError for an estimate that cannot be a table (no message, names that change, NaN named by row)."""
    import numpy as np

    from ros_dofkit.core.recordings.errors import RecordingError
    from ros_dofkit.ros.bag_io import bag_topics, read_raw
    from ros_dofkit.ros.cdr import decode_joint_states

    topics = bag_topics(bag)
    if topic not in topics:
        joint_topics = sorted(t for t, (msgtype, _) in topics.items() if msgtype.endswith("/JointState"))
        raise RecordingError(f"{bag} has no topic {topic} (its JointState topics: {joint_topics}); is it a "
                             "dofkit replay output bag of this configuration?")
    batch = decode_joint_states(read_raw(bag, [topic]).data)
    if len(batch.stamp_ns) == 0:
        raise RecordingError(f"{bag}: {topic} has no message: the replay wrote no estimate")
    names = batch.name[0]
    for row, message_names in enumerate(batch.name):
        if message_names != names:
            raise RecordingError(f"{topic}: row {row + 1}: joint names {list(message_names)} differ from the first "
                                 f"message's {list(names)}; a table needs the same columns on every row")
    for row, position in enumerate(batch.position):
        if len(position) != len(names):
            raise RecordingError(f"{topic}: row {row + 1}: {len(position)} positions for {len(names)} joint names")
    positions = np.array([np.asarray(p, dtype=float) for p in batch.position]).reshape(len(batch.stamp_ns),
                                                                                        len(names))
    return batch.stamp_ns / 1e9, list(names), positions


def run(args: argparse.Namespace) -> int:
    """Export; prints what was written. Exit status 0 ok, 1 bad input (nothing written)."""
    import numpy as np
    import yaml

    from ros_dofkit.core.estimator.config import EstimatorConfigError
    from ros_dofkit.core.recordings import opensim_files as files
    from ros_dofkit.core.recordings.errors import RecordingError
    from ros_dofkit.replay.pipeline import ReplayError
    from ros_dofkit.replay.setup import ReplaySetup
    from ros_dofkit.ros import output_files
    from ros_dofkit.ros.bag_io import BagError
    from ros_dofkit.ros.parameters import ParameterValueError

    out = Path(args.out)
    fmt = args.format or out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        return _fail(f"cannot tell the format of {out} (extension {out.suffix!r}); use .mot, .sto, .csv or --format")
    if args.degrees and args.radians:
        return _fail("--degrees and --radians exclude each other")
    in_degrees = args.degrees or (fmt != "sto" and not args.radians)
    try:
        setup = ReplaySetup.from_parameter_file(args.config)
    except (ReplayError, ParameterValueError, EstimatorConfigError, OSError, ValueError) as error:
        return _fail(f"configuration {args.config}: {error}")
    name_map = None
    if args.name_map is not None:
        try:
            name_map = yaml.safe_load(Path(args.name_map).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as error:
            return _fail(f"name map {args.name_map}: {error}")
    topic = args.topic or f"{setup.output_namespace}/joint_states"
    try:
        time, names, positions = read_joint_states(args.bag, topic)
        kinds = files.rotational_coordinates(setup.plant)
        unknown = [n for n in names if n not in kinds]
        if unknown:
            raise RecordingError(f"{topic}: joints {unknown} are not coordinates of the robot of {args.config}; "
                                 "export with the configuration the replay used")
        columns = files.export_columns(names, name_map, only_mapped=args.only_mapped)
        index = [names.index(c.source) for c in columns]
        values = positions[:, index] * np.array([c.scale for c in columns])
        rotational = [kinds[c.source] for c in columns]
        labels = [c.label for c in columns]
        if args.zero_time:
            time = time - time[0]
        if fmt == "csv":
            text = files.format_coordinates_csv(time, labels, values, rotational, in_degrees)
        else:
            text = files.format_storage(time, labels, values, rotational, in_degrees, name=args.name)
        output_files.write_text(out, text, overwrite=args.force)
    except (RecordingError, BagError) as error:
        return _fail(str(error))
    except OSError as error:
        return _fail(f"cannot write {out}: {error}")
    unit = "degrees" if in_degrees else "radians"
    print(f"wrote {out} ({fmt}, {len(time)} rows x {len(columns)} coordinates, angles in {unit}, "
          f"time {time[0]:.3f}..{time[-1]:.3f} s) from {topic} of {args.bag}")
    renamed = [f"{c.source} -> {c.label}" + (f" (x{c.scale:g})" if c.scale != 1 else "")
               for c in columns if c.label != c.source or c.scale != 1]
    if renamed:
        print("  " + ", ".join(renamed))
    return 0
