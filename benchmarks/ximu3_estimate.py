"""ros_dofkit on the x-IMU3 lower-body recording through the product's commands, compared with imumocap.

Where you are: benchmarks/ -- a script that prints numbers and writes figures; not a test (test/test_ximu3_replay.py
runs the same functions and asserts). Run

    .venv/bin/python benchmarks/ximu3_estimate.py [--no-limits] [--work DIR] [--figures doc/images]

Pipeline:
1. ``dofkit import ximu3 RECORDING --out BAG`` (one sensor_msgs/Imu topic per device, orientation in ENU).
2. ``dofkit replay BAG --config config/lower_body.yaml --calibrate 0 SECONDS --calibrated-config CALIBRATED
   --out OUT --plot PNG``: the estimator core calibrates on the inputs of the first ``--calibration-seconds``
   (0.5 s, standing; every mounting "calibrate", heading from the pelvis IMU's -z axis) with its public
   ``Estimator.calibrate`` (OpenSense's IMUPlacer), then replays the whole bag with the calibrated mountings
   R_BS and world alignment R_WG (no DDS); CALIBRATED is the parameter file a node's ~/calibrate would leave
   behind (fixed mountings instead of "calibrate").
3. OUT is read back: /estimated/joint_states (hip, knee and ankle angles of both legs) and
   /estimated/sensor_errors (per-sensor residual: angle between model and measured sensor orientation).
4. Printed: the calibration, joint ranges, residual medians, knee-flexion RMS against imumocap
   (test/fixtures/ximu3/imumocap_knee_flexion.csv, from benchmarks/ximu3_imumocap_reference.py; the estimate is
   interpolated onto its 50 Hz time base). Figures: knee flexion side by side with imumocap, and the joint angles.
5. Raw IMUs (issue 19.5): the same bag replayed with every IMU's orientation from its gyro + accelerometer alone
   (``imus.<name>.orientation: filter``, a VQF per IMU; the devices' quaternions unused), three times:
   - *raw, mountings from the stand*: calibrated on the same 0.5 s like step 2. Without a magnetometer each raw
     IMU's heading is its own, which a standing calibration cannot separate from the mounting (issue 19.2);
   - *raw, mountings from the stand and the hinges* (raw data alone): the same, with ``--hinge-calibration``: each
     raw IMU's heading (stream and mounting together) turned so that thigh and shank see one knee axis and the
     ankle's two axes keep their angle over the recording (``ros_dofkit.core.assembly.hinge_calibration``, Laidig et
     al. 2017, 2019);
   - *raw, mountings from step 2*: the mountings R_BS and world alignment of step 2's calibrated file (known
     mountings), the raw IMUs' headings aligned with the model on the stand (``Estimator.calibrate``);
   - *the raw-only calibration with the heading filter on*: the second run's calibrated file replayed with
     ``heading_estimation.enabled`` (core/estimator/heading.py: knee hinges and joint-centre accelerations keep
     the raw IMUs' headings tied over the recording).
   Printed: knee flexion RMS against imumocap and against step 2's orientation-based estimate.
6. Where the raw-only run and the references part (``heading_check``): each device's heading (its own
   magnetometer AHRS quaternion) against its raw filter's over the recording; the knee hinge misfit
   (``hinge_calibration.pair_misfit``) of the devices' quaternions and of the raw filters, each at its own fitted
   turns, over the recording and over its last 3 s (standing: a misfit there is a heading that moved since the
   stand); the knee axis the devices' quaternions fit best (thigh and shank mountings turned together about the
   vertical at the stand), replayed from the devices' quaternions.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ros_dofkit import cli  # noqa: E402
from ros_dofkit.ros.bag_io import read_bag  # noqa: E402
from ros_dofkit.ros.parameters import load_parameter_file  # noqa: E402

DEFAULT_RECORDING = REPO / ".." / "shared" / "data" / "ximu3_lower_body"
REFERENCE = REPO / "test" / "fixtures" / "ximu3" / "imumocap_knee_flexion.csv"
CONFIG = REPO / "config" / "lower_body.yaml"
SIDES = ("left", "right")
ANGLES = ("hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion", "ankle_inversion")
JOINT_NAMES = tuple(f"{side}_{angle}" for side in SIDES for angle in ANGLES)
#: The raw-only run of step 5 (issue 19.5): mountings from the stand, headings from the hinges.
RAW_HINGES = "raw, mountings from the stand and the hinges"
#: The same, replayed with the chain's heading filter on (``heading_estimation.enabled``, core/estimator/heading.py).
RAW_HEADING_FILTER = "raw, the same with the heading filter on"


class XIMU3PipelineError(RuntimeError):
    """A step of the import -> calibrate -> replay pipeline failed (the message names the step and the cause)."""


# ---------------------------------------------------------------------------------------------- the commands
def dofkit(*arguments) -> None:
    """Run ``dofkit ARGUMENTS`` (the console script's entry point, in this process); raise unless it exits 0."""
    status = cli.main([str(a) for a in arguments])
    if status != 0:
        raise XIMU3PipelineError(f"dofkit {' '.join(map(str, arguments))} exited with status {status}")


def import_recording(recording: Path, bag: Path) -> None:
    """``dofkit import ximu3 RECORDING --out BAG``."""
    dofkit("import", "ximu3", recording, "--out", bag)


def replay(bag: Path, config: Path, out: Path, plot: Path | None = None, calibration_seconds: float | None = None,
           calibrated_config: Path | None = None, hinges: bool = False) -> None:
    """``dofkit replay BAG --config CONFIG --out OUT [--calibrate 0 SECONDS [--hinge-calibration] --calibrated-config
    FILE] [--plot PNG] --quiet``."""
    calibrate = [] if calibration_seconds is None else ["--calibrate", 0, calibration_seconds]
    calibrate += ["--hinge-calibration"] if hinges else []
    if calibrated_config is not None:
        calibrate += ["--calibrated-config", calibrated_config]
    dofkit("replay", bag, "--config", config, "--out", out, *calibrate, *(["--plot", plot] if plot else []), "--quiet")


def write_parameter_file(values: dict, path: Path, comment: str) -> None:
    from ros_dofkit.replay.demo_robot import parameter_yaml

    path.write_text(f"# {comment}\n" + parameter_yaml(values), encoding="utf-8")


def calibrated_inputs(bag: Path, config_values: dict, seconds: float) -> tuple:
    """(setup, offline inputs, ``BagCalibration``) of ``dofkit replay --calibrate 0 SECONDS`` on ``bag``: the
    library calls behind the command, on the same window."""
    from ros_dofkit.replay.batch import read_offline_inputs
    from ros_dofkit.replay.calibration import calibrate_from_inputs
    from ros_dofkit.replay.messages import MessageFactory
    from ros_dofkit.replay.setup import TRUTH_TOPIC, ReplaySetup

    setup = ReplaySetup.from_parameters(config_values)
    inputs = read_offline_inputs(bag, setup, None, TRUTH_TOPIC, MessageFactory().typestore)[0]
    return setup, inputs, calibrate_from_inputs(inputs, setup, 0.0, seconds, source=str(bag))


def calibration_of(bag: Path, config_values: dict, seconds: float):
    """The calibration ``dofkit replay --calibrate 0 SECONDS`` takes, as numbers (the command prints it and saves
    it as a parameter file): ``CalibrationResult`` of the library call behind it on the same window."""
    return calibrated_inputs(bag, config_values, seconds)[2].result


# ---------------------------------------------------------------------------------------------- the outputs
@dataclass(frozen=True)
class ReplayEstimate:
    """What ``dofkit replay`` wrote: joint angles (deg) and per-sensor residuals (deg) per output stamp (s)."""

    time: np.ndarray
    angles_deg: dict
    residual_time: np.ndarray
    residuals_deg: dict

    def at(self, name: str, times: np.ndarray) -> np.ndarray:
        """Joint ``name`` linearly interpolated at ``times`` (held at the ends)."""
        return np.interp(times, self.time, self.angles_deg[name])


def read_replay_output(out: Path, namespace: str = "/estimated") -> ReplayEstimate:
    """The joint angles of :data:`JOINT_NAMES` and the sensor residuals from a ``dofkit replay`` output bag."""
    stamps, positions, error_stamps, errors, labels = [], [], [], [], None
    names = None
    for record in read_bag(out, topics=[f"{namespace}/joint_states", f"{namespace}/sensor_errors"]):
        message = record.message
        if record.topic.endswith("/joint_states"):
            names = list(message.name) if names is None else names
            stamps.append(message.header.stamp.sec + message.header.stamp.nanosec * 1e-9)
            positions.append(np.asarray(message.position))
        else:
            labels = message.layout.dim[0].label.split(":", 1)[1].split(",")
            error_stamps.append(record.stamp_ns * 1e-9)
            errors.append(np.asarray(message.data))
    if not stamps or not errors:
        raise XIMU3PipelineError(f"{out} holds no {namespace}/joint_states or {namespace}/sensor_errors message: the "
                                 "replay wrote no estimate")
    missing = [n for n in JOINT_NAMES if n not in names]
    if missing:
        raise XIMU3PipelineError(f"{out}: joints {missing} not in {namespace}/joint_states (it has {names})")
    positions, errors = np.array(positions), np.array(errors)
    return ReplayEstimate(
        time=np.array(stamps),
        angles_deg={n: np.degrees(positions[:, names.index(n)]) for n in JOINT_NAMES},
        residual_time=np.array(error_stamps),
        residuals_deg={label: errors[:, k] for k, label in enumerate(labels)})


def load_reference(path: Path = REFERENCE) -> np.ndarray:
    """imumocap's knee flexion: columns time_s (device clock), left, right (deg)."""
    return np.loadtxt(path, delimiter=",", comments="#")


def knee_agreement(estimate: ReplayEstimate, reference: np.ndarray, until_s: float | None = None) -> dict:
    """{side: (RMS, max |difference|, correlation)} of knee flexion against imumocap on the reference's time base
    (frames within the estimate's time span, and before ``until_s`` device seconds when given)."""
    times = reference[:, 0]
    keep = (times >= estimate.time[0]) & (times <= estimate.time[-1])
    if until_s is not None:
        keep &= times <= until_s
    agreement = {}
    for column, side in enumerate(SIDES, start=1):
        ours, theirs = estimate.at(f"{side}_knee_flexion", times[keep]), reference[keep, column]
        difference = ours - theirs
        agreement[side] = (float(np.sqrt(np.mean(difference ** 2))), float(np.abs(difference).max()),
                           float(np.corrcoef(ours, theirs)[0, 1]))
    return agreement


# ---------------------------------------------------------------------------------------------- one run
def run_pipeline(recording: Path, work: Path, config: Path = CONFIG, calibration_seconds: float = 0.5,
                 joint_limits: bool = True, replay_plot: Path | None = None, hinges: bool = False):
    """Import ``recording`` into ``work``/bag, replay it calibrated on its first ``calibration_seconds`` (and with
    ``--hinge-calibration`` when ``hinges``); returns (estimate, calibration, calibrated parameter file written by
    ``dofkit replay --calibrated-config``)."""
    bag = work / "bag"
    import_recording(recording, bag)
    values = load_parameter_file(config)
    values["use_joint_limits"] = joint_limits
    replay_config = work / f"{config.stem}.limits_{'on' if joint_limits else 'off'}.yaml"
    write_parameter_file(values, replay_config, f"{config.name}, joint limits {'on' if joint_limits else 'off'} "
                         "(benchmarks/ximu3_estimate.py)")
    calibrated_config = work / "lower_body.calibrated.yaml"
    out = work / "estimated"
    replay(bag, replay_config, out, replay_plot, calibration_seconds, calibrated_config, hinges)
    calibration = calibration_of(bag, values, calibration_seconds)
    return read_replay_output(out), calibration, calibrated_config


def raw_config(values: dict, path: Path) -> Path:
    """``values`` with every IMU's orientation from its raw-IMU filter, written to ``path``."""
    values = dict(values)
    for name in values["imu_names"]:
        values[f"imus.{name}.orientation"] = "filter"
    write_parameter_file(values, path, "every IMU's orientation from gyro + accelerometer (orientation: filter)")
    return path


def run_raw_pipelines(recording: Path, work: Path, calibrated_config: Path, config: Path = CONFIG,
                      calibration_seconds: float = 0.5, joint_limits: bool = True) -> dict:
    """The raw-IMU replays of step 5: ``{"raw, mountings from the stand": estimate, "raw, mountings from the stand and
    the hinges": estimate, "raw, mountings from the orientation calibration": estimate, RAW_HEADING_FILTER:
    estimate}`` (each in its own folder of ``work``; the last replays the hinge-calibrated parameter file with
    ``heading_estimation.enabled``, so that the raw IMUs' headings stay tied through the knees and the joint
    centres' accelerations over the recording)."""
    values = load_parameter_file(config)
    values["use_joint_limits"] = joint_limits
    known = load_parameter_file(calibrated_config)
    known["use_joint_limits"] = joint_limits
    estimates = {}
    for label, folder, base, hinges in (
            ("raw, mountings from the stand", "raw_stand", values, False),
            (RAW_HINGES, "raw_hinges", values, True),
            ("raw, mountings from the orientation calibration", "raw_known", known, False)):
        (work / folder).mkdir(parents=True, exist_ok=True)
        estimates[label] = run_pipeline(recording, work / folder, raw_config(base, work / folder / "raw.yaml"),
                                        calibration_seconds, joint_limits, hinges=hinges)[0]
    followed = load_parameter_file(work / "raw_hinges" / "lower_body.calibrated.yaml")
    followed["heading_estimation.enabled"] = True
    path = work / "raw_hinges" / "heading_filter.yaml"
    write_parameter_file(followed, path, "the raw-only calibration with the chain's heading filter on")
    replay(work / "raw_hinges" / "bag", path, work / "raw_hinges" / "heading_filter")
    estimates[RAW_HEADING_FILTER] = read_replay_output(work / "raw_hinges" / "heading_filter")
    return estimates


def knee_rms_between(a: ReplayEstimate, b: ReplayEstimate) -> dict:
    """{side: RMS (deg)} of knee flexion between two estimates, ``b`` interpolated at ``a``'s stamps."""
    return {side: float(np.sqrt(np.mean((a.angles_deg[f"{side}_knee_flexion"] - b.at(f"{side}_knee_flexion",
                                                                                       a.time)) ** 2)))
            for side in SIDES}


def hip_adduction(run: ReplayEstimate, side: str) -> str:
    """``"P2..P98 (median at the top 5 % of hip flexion)"`` of a side's hip adduction (deg): flexion leaking into
    adduction (a thigh heading off the pelvis') shows at full flexion."""
    adduction, flexion = run.angles_deg[f"{side}_hip_adduction"], run.angles_deg[f"{side}_hip_flexion"]
    top = np.median(adduction[flexion >= np.percentile(flexion, 95)])
    return f"{np.percentile(adduction, 2):.1f}..{np.percentile(adduction, 98):.1f} ({top:.1f})"


# ---------------------------------------------------------------------------------------------- step 6
#: The end of the recording whose knee misfit is shown apart (the subject stands still, knees straight).
FINAL_STAND_S = 3.0


@dataclass(frozen=True)
class HeadingCheck:
    """Step 6. ``heading_change_deg`` {IMU: (at the end, largest |.|)}: the device's heading minus its raw filter's,
    since the stand; ``knee_misfit_deg`` {knee's child IMU: {"device"|"raw": (RMS over the recording, RMS over its
    last :data:`FINAL_STAND_S` s)}}, each data set at its own fitted turns; ``axis_turn_deg`` {knee's child IMU: the
    turn of thigh and shank mountings together about the vertical that makes the devices' knee misfit least};
    ``stand_axis_misfit_deg`` / ``functional_axis_misfit_deg``: that misfit (RMS) without / with the turn;
    ``functional_axis``: the devices' quaternions replayed with those mountings (a :class:`ReplayEstimate`)."""

    heading_change_deg: dict
    knee_misfit_deg: dict
    axis_turn_deg: dict
    stand_axis_misfit_deg: dict
    functional_axis_misfit_deg: dict
    functional_axis: ReplayEstimate


def _heading_series(bag: Path, values: dict, seconds: float) -> tuple:
    """(plant, IMU bodies, ``BagCalibration``, {IMU: OrientationSeries in G from the stand on}) of one config."""
    from ros_dofkit.core.estimator.setup import build as build_estimator_setup
    from ros_dofkit.replay.hinge_calibration import orientation_series

    setup, inputs, calibration = calibrated_inputs(bag, values, seconds)
    names = setup.config.imu_names
    series = orientation_series(inputs, setup.config, np.asarray(calibration.result.R_WG), calibration.first_stamp_ns,
                                0.0, set(names))
    bodies = dict(zip(names, build_estimator_setup(setup.plant, setup.config).body_index.tolist(), strict=True))
    return setup.plant, bodies, calibration, series


def _yaw(R: np.ndarray) -> np.ndarray:
    """Heading (rad) of rotations (K, 3, 3) about z (exact for a turn about z, the mean one otherwise)."""
    return np.arctan2(R[:, 1, 0] - R[:, 0, 1], R[:, 0, 0] + R[:, 1, 1])


def _knee_misfits(plant, bodies: dict, calibration, series: dict) -> dict:
    """{knee's child IMU: (RMS misfit over the recording, over its last FINAL_STAND_S s) (deg)} at the turns that
    the hinge calibration fits for this data set (thighs and shanks turnable)."""
    from ros_dofkit.core.assembly.hinge_calibration import calibrate_hinge_headings, joint_pairs, pair_misfit

    knees = [pair for pair in joint_pairs(plant, bodies) if pair.hinge]
    q_cal, R_BS = calibration.result.q_cal, calibration.result.R_BS
    turns = calibrate_hinge_headings(plant, q_cal, bodies, R_BS, series,
                                     [name for pair in knees for name in (pair.parent_imu, pair.child_imu)]).turns
    misfits = {}
    for pair in knees:
        result = pair_misfit(plant, q_cal, bodies, R_BS, series, pair, turns)
        final = result.stamps >= result.stamps[-1] - FINAL_STAND_S
        misfits[pair.child_imu] = tuple(math.degrees(float(np.sqrt(np.mean(result.misfit[keep] ** 2))))
                                        for keep in (np.ones_like(final), final))
    return misfits


def _functional_axis(plant, bodies: dict, calibration, series: dict) -> tuple:
    """({knee's child IMU: (common turn, misfit at 0, misfit at the turn)} (deg), {IMU: mounting turned}) for the
    devices' quaternions: one turn ψ of thigh and shank mountings together about the vertical at the stand (their
    streams share the magnetometer's heading), on a 0.5 deg grid."""
    from ros_dofkit.core.assembly.hinge_calibration import joint_pairs, pair_misfit
    from ros_dofkit.core.spatial import rotation_z

    q_cal, R_BS = calibration.result.q_cal, calibration.result.R_BS
    X_WB = plant.calc_body_poses(q_cal)
    turns, mountings = {}, {}
    for pair in (pair for pair in joint_pairs(plant, bodies) if pair.hinge):
        grid = np.radians(np.arange(-90.0, 90.0, 0.5))
        costs = [float(np.sqrt(np.mean(pair_misfit(plant, q_cal, bodies, R_BS, series, pair,
                                                   {pair.parent_imu: psi, pair.child_imu: psi}).misfit ** 2)))
                 for psi in grid]
        best, zero = int(np.argmin(costs)), int(np.argmin(np.abs(grid)))
        turns[pair.child_imu] = (math.degrees(grid[best]), math.degrees(costs[zero]), math.degrees(costs[best]))
        for name in (pair.parent_imu, pair.child_imu):
            R_W0 = X_WB[bodies[name], :3, :3]
            mountings[name] = R_W0.T @ rotation_z(grid[best]) @ R_W0 @ R_BS[name]
    return turns, mountings


def heading_check(work: Path, calibrated_config: Path, config: Path = CONFIG, calibration_seconds: float = 0.5,
                  joint_limits: bool = True) -> HeadingCheck:
    """Step 6 on the bag of step 1 (``work``/bag), with the devices' quaternions (``config``) and with the raw
    filters (every IMU ``orientation: filter``); the functional-axis replay in ``work``/functional_axis."""
    from ros_dofkit.core.spatial import matrix_to_quat

    bag = work / "bag"
    values = load_parameter_file(config)
    values["use_joint_limits"] = joint_limits
    raw_values = load_parameter_file(raw_config(values, work / "heading_check_raw.yaml"))
    plant, bodies, device_calibration, device = _heading_series(bag, values, calibration_seconds)
    _, raw_bodies, raw_calibration, raw = _heading_series(bag, raw_values, calibration_seconds)
    change = {}
    for name in device:
        stamps, i, j = np.intersect1d(device[name].stamps, raw[name].stamps, return_indices=True)
        heading = np.unwrap(_yaw(device[name].R_GS[i] @ np.swapaxes(raw[name].R_GS[j], 1, 2)))
        heading = np.degrees(heading - np.mean(heading[stamps < stamps[0] + calibration_seconds]))
        change[name] = (float(heading[-1]), float(np.max(np.abs(heading))))
    device_misfit = _knee_misfits(plant, bodies, device_calibration, device)
    raw_misfit = _knee_misfits(plant, raw_bodies, raw_calibration, raw)
    axis, mountings = _functional_axis(plant, bodies, device_calibration, device)
    functional = load_parameter_file(calibrated_config)
    functional["use_joint_limits"] = joint_limits
    for name, R in mountings.items():
        q = matrix_to_quat(R)
        functional[f"imus.{name}.mounting"] = [float(c) for c in (q if q[0] >= 0 else -q)]
    path = work / "functional_axis.yaml"
    write_parameter_file(functional, path, "step 2's calibration with each knee's thigh and shank mountings turned to "
                         "the knee axis the devices' quaternions fit best (benchmarks/ximu3_estimate.py, step 6)")
    replay(bag, path, work / "functional_axis")
    misfits = {knee: {"device": device_misfit[knee], "raw": raw_misfit[knee]} for knee in device_misfit}
    return HeadingCheck(change, misfits,
                        {knee: turn for knee, (turn, _, _) in axis.items()},
                        {knee: at_zero for knee, (_, at_zero, _) in axis.items()},
                        {knee: least for knee, (_, _, least) in axis.items()},
                        read_replay_output(work / "functional_axis"))


def print_heading_check(check: HeadingCheck, estimate: ReplayEstimate, raw_only: ReplayEstimate,
                        reference: np.ndarray) -> None:
    """Step 6's lines."""
    print("where the raw-only run and the references part:")
    print("  each device's heading (its magnetometer AHRS) minus its raw filter's, change since the stand (deg): at "
          "the end / largest")
    print("    " + "  ".join(f"{name} {end:.1f}/{largest:.1f}" for name, (end, largest)
                             in check.heading_change_deg.items()))
    print(f"  knee hinge misfit (deg RMS) at each data set's fitted turns: whole recording / last {FINAL_STAND_S:g} s "
          "(standing)")
    for knee, misfits in check.knee_misfit_deg.items():
        print(f"    {knee:16s} " + "  ".join(f"{source} {whole:5.2f} / {final:5.2f}"
                                             for source, (whole, final) in misfits.items()))
    print("  the knee axis the devices' quaternions fit best: thigh and shank mountings turned together (deg), misfit "
          "(deg RMS) at the stand's axis -> at that axis; replayed: knee flexion RMS vs imumocap / vs the "
          "orientation-based run / vs the raw-only run")
    versus = knee_agreement(check.functional_axis, reference)
    between = knee_rms_between(check.functional_axis, estimate)
    raw_between = knee_rms_between(check.functional_axis, raw_only)
    for knee in check.axis_turn_deg:
        side = next(side for side in SIDES if knee.startswith(side))
        print(f"    {knee:16s} turn {check.axis_turn_deg[knee]:6.1f}  misfit {check.stand_axis_misfit_deg[knee]:5.2f} "
              f"-> {check.functional_axis_misfit_deg[knee]:5.2f};  {side} knee {versus[side][0]:5.2f} / "
              f"{between[side]:5.2f} / {raw_between[side]:5.2f};  hip adduction "
              f"{hip_adduction(check.functional_axis, side)}")


# ---------------------------------------------------------------------------------------------- figures
def plot_knees(estimate: ReplayEstimate, reference: np.ndarray, agreement: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = reference[0, 0]
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    for column, (side, axis) in enumerate(zip(SIDES, axes, strict=True), start=1):
        axis.plot(estimate.time - t0, estimate.angles_deg[f"{side}_knee_flexion"], color="tab:blue", linewidth=1.4,
                  label="ros_dofkit (dofkit replay)")
        axis.plot(reference[:, 0] - t0, reference[:, column], "--", color="tab:red", linewidth=1.1,
                  label="imumocap 1.3.1 (x-io)")
        rms, largest, correlation = agreement[side]
        axis.set_title(f"{side} knee flexion: RMS difference {rms:.2f} deg (max {largest:.1f}, r = {correlation:.4f})",
                       fontsize=10)
        axis.set_xlabel("time since the first sample (s)")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("knee flexion (deg)")
    axes[0].legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def plot_lower_body(estimate: ReplayEstimate, path: Path, t0: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = (("hip", ("hip_flexion", "hip_adduction", "hip_rotation")), ("knee", ("knee_flexion",)),
              ("ankle", ("ankle_dorsiflexion", "ankle_inversion")))
    figure, axes = plt.subplots(4, 2, figsize=(13, 10), sharex=True, sharey="row")
    t = estimate.time - t0
    for column, side in enumerate(SIDES):
        for row, (joint, angles) in enumerate(groups):
            for angle in angles:
                axes[row, column].plot(t, estimate.angles_deg[f"{side}_{angle}"], linewidth=1.0,
                                       label=angle.replace("_", " "))
            axes[row, column].set_ylabel(f"{side} {joint} (deg)")
            axes[row, column].legend(loc="upper right", fontsize=7)
        for name, values in estimate.residuals_deg.items():
            if name == "pelvis" or name.startswith(side):
                axes[3, column].plot(estimate.residual_time - t0, values, linewidth=0.8, label=name)
        axes[3, column].set_ylabel("sensor residual (deg)")
        axes[3, column].set_xlabel("time since the first sample (s)")
        axes[3, column].legend(loc="upper right", fontsize=7)
        axes[0, column].set_title(f"{side} leg")
    for axis in axes.flat:
        axis.grid(alpha=0.3)
    figure.suptitle("x-IMU3 lower body, dofkit replay (calibrated on the first 0.5 s standing)")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


# ---------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--calibration-seconds", type=float, default=0.5)
    parser.add_argument("--no-limits", action="store_true", help="replay without the URDF joint limits")
    parser.add_argument("--work", type=Path, default=None, help="new folder for the bags and the calibrated "
                        "configuration (default: a temporary folder, removed)")
    parser.add_argument("--figures", type=Path, default=None,
                        help="write ximu3_knee_vs_imumocap.png and ximu3_lower_body.png here (e.g. doc/images)")
    args = parser.parse_args(argv)

    reference = load_reference(args.reference)
    with tempfile.TemporaryDirectory(prefix="ximu3_") as temporary:
        work = args.work if args.work is not None else Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        estimate, calibration, calibrated_config = run_pipeline(
            args.recording, work, args.config, args.calibration_seconds, joint_limits=not args.no_limits,
            replay_plot=work / "replay.png")
        print(f"calibrated on the first {args.calibration_seconds} s ({min(calibration.num_samples.values())}-"
              f"{max(calibration.num_samples.values())} samples per IMU, spread {calibration.max_spread_deg:.2f} "
              f"deg); heading correction {math.degrees(calibration.heading_angle):.1f} deg; joint limits "
              f"{'off' if args.no_limits else 'on'}")
        if args.work is not None:
            print(f"bags and configuration in {work} (calibrated configuration {calibrated_config.name})")
        raw = run_raw_pipelines(args.recording, work, calibrated_config, args.config, args.calibration_seconds,
                                joint_limits=not args.no_limits)
        check = heading_check(work, calibrated_config, args.config, args.calibration_seconds,
                              joint_limits=not args.no_limits)
    print(f"{len(estimate.time)} estimates over {estimate.time[-1] - estimate.time[0]:.2f} s")
    print("joint angle ranges (deg):")
    for angle in ANGLES:
        left, right = estimate.angles_deg[f"left_{angle}"], estimate.angles_deg[f"right_{angle}"]
        print(f"  {angle:20s} left {left.min():7.1f} .. {left.max():6.1f}   right {right.min():7.1f} .. "
              f"{right.max():6.1f}")
    print("per-sensor residual (deg): median / 95th percentile / max")
    for name, values in estimate.residuals_deg.items():
        print(f"  {name:16s} {np.median(values):6.2f} / {np.percentile(values, 95):6.2f} / {values.max():6.2f}")
    agreement = knee_agreement(estimate, reference)
    print("knee flexion vs imumocap (deg):")
    for column, side in enumerate(SIDES, start=1):
        rms, largest, correlation = agreement[side]
        ours = estimate.angles_deg[f"{side}_knee_flexion"]
        print(f"  {side:5s} RMS {rms:5.2f}  max |diff| {largest:5.2f}  correlation {correlation:.4f}  range ours "
              f"{ours.min():.1f}..{ours.max():.1f}, imumocap {reference[:, column].min():.1f}.."
              f"{reference[:, column].max():.1f}")
    print("raw IMUs (orientation from gyro + accelerometer, VQF): knee flexion RMS (deg) vs imumocap / vs the "
          "orientation-based estimate above")
    for label, raw_estimate in raw.items():
        versus = knee_agreement(raw_estimate, reference)
        between = knee_rms_between(estimate, raw_estimate)
        print(f"  {label:50s} " + "  ".join(f"{side} {versus[side][0]:5.2f} / {between[side]:5.2f}"
                                            for side in SIDES))
    print("median sensor residual (deg) and hip adduction: 2nd..98th percentile, median at the top 5 % of hip "
          "flexion (deg), per run:")
    for label, run in (("orientation-based", estimate), *raw.items()):
        medians = " ".join(f"{name} {np.nanmedian(values):.1f}" for name, values in run.residuals_deg.items())
        print(f"  {label:50s} {medians} | " + "  ".join(f"{side} {hip_adduction(run, side)}" for side in SIDES))
    print_heading_check(check, estimate, raw[RAW_HINGES], reference)
    if args.figures is not None:
        args.figures.mkdir(parents=True, exist_ok=True)
        plot_knees(estimate, reference, agreement, args.figures / "ximu3_knee_vs_imumocap.png")
        plot_lower_body(estimate, args.figures / "ximu3_lower_body.png", reference[0, 0])
        print(f"wrote {args.figures / 'ximu3_knee_vs_imumocap.png'} and {args.figures / 'ximu3_lower_body.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
