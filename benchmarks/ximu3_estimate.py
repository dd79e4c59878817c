"""ros_dofkit's estimate of the x-IMU3 lower-body recording, core only, compared with imumocap's knee flexion.

Where you are: benchmarks/ -- a script that prints numbers and writes a plot; not a test. Run

    .venv/bin/python benchmarks/ximu3_estimate.py [--plot PNG] [--no-limits]

Pipeline (everything below ros_dofkit.core, no ROS):
1. ``read_recording`` (x-IMU3 CSV -> R_WS in ENU per device), every device resampled by slerp on its own
   timestamps onto the reference's time base (test/fixtures/ximu3/imumocap_knee_flexion.csv, 50 Hz).
2. The plant: ros_dofkit/models/lower_body.urdf on a floating base; its translation is locked (orientations do
   not observe it).
3. Calibration from the first 0.5 s standing (``calibrate_imus``): neutral standing pose, ENU world, heading
   from the pelvis IMU's -z axis (it points forward: the sensor's z is mounted backward).
4. ``Assembler.track_sequence`` over all frames (OrientationSensors goal, joint limits unless --no-limits).
5. Printed: hip/knee/ankle ranges, per-sensor residual medians (angle between model and measured sensor
   orientation), knee-flexion RMS and correlation against imumocap; a PNG with knees side by side.
"""

from __future__ import annotations

import argparse
import sys
import time as wallclock
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ros_dofkit.core.assembly import Assembler, calibrate_imus  # noqa: E402
from ros_dofkit.core.multibody import MultibodyPlant  # noqa: E402
from ros_dofkit.core.recordings import read_recording  # noqa: E402
from ros_dofkit.core.spatial import rotation_angle  # noqa: E402

DEFAULT_RECORDING = REPO / ".." / "shared" / "data" / "ximu3_lower_body"
REFERENCE = REPO / "test" / "fixtures" / "ximu3" / "imumocap_knee_flexion.csv"
MODEL = REPO / "ros_dofkit" / "models" / "lower_body.urdf"
SEGMENTS = ["pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
            "right_foot"]
ANGLES = ["hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion", "ankle_inversion"]


def resample(device, times: np.ndarray) -> np.ndarray:
    """R_WS of a device at ``times`` (slerp between its own samples; samples without orientation skipped)."""
    keep = device.has_orientation
    rotations = Rotation.from_quat(device.quaternion_wxyz[keep], scalar_first=True)
    t = device.time[keep]
    # Clamping only absorbs the sub-microsecond rounding of the reference's printed time base.
    return Slerp(t, rotations)(np.clip(times, t[0], t[-1])).as_matrix()


def estimate(recording_folder: Path, times: np.ndarray, calibration_seconds: float, joint_limits: bool):
    recording = read_recording(recording_folder, devices=SEGMENTS)
    R_WS = {name: resample(recording[name], times) for name in SEGMENTS}

    plant = MultibodyPlant()
    plant.add_urdf(str(MODEL), base_joint="floating")
    plant.finalize()
    q_cal = plant.default_positions()
    standing = times < times[0] + calibration_seconds
    calibration = calibrate_imus(
        plant, q_cal, imu_bodies={name: name for name in SEGMENTS},
        R_XS={name: R_WS[name][standing] for name in SEGMENTS}, alignment="enu",
        base_imu="pelvis", base_heading_axis="-z", base_body="pelvis")
    osensors = calibration.make_orientation_sensors(SEGMENTS)
    assembler = Assembler(plant)
    assembler.adopt_assembly_goal(osensors)
    base = plant.floating_base_joints()[0]
    assembler.lock_positions([base.position_start + k for k in (4, 5, 6)])  # x, y, z of [qw qx qy qz x y z]
    if joint_limits:
        assembler.use_joint_limits()
    assembler.set_positions(q_cal)
    observations = np.stack([calibration.to_model_world(R_WS[name]) for name in SEGMENTS], axis=1)
    start = wallclock.perf_counter()
    Q = assembler.track_sequence(times, observations)
    elapsed = wallclock.perf_counter() - start

    X_WB = plant.calc_body_poses(Q)
    residual_deg = {}
    for k, name in enumerate(SEGMENTS):
        body = calibration.bodies[name]
        R_model = X_WB[:, body, :3, :3] @ calibration.R_BS[name]
        residual_deg[name] = np.degrees(rotation_angle(np.swapaxes(R_model, -1, -2) @ observations[:, k]))
    angles_deg = {f"{side}_{angle}": np.degrees(Q[:, plant.get_joint_by_name(f"{side}_{angle}").position_start])
                  for side in ("left", "right") for angle in ANGLES}
    return angles_deg, residual_deg, calibration, elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--calibration-seconds", type=float, default=0.5)
    parser.add_argument("--no-limits", action="store_true", help="do not enforce the URDF joint limits")
    parser.add_argument("--plot", type=Path, default=Path("/tmp/ximu3_lower_body.png"))
    args = parser.parse_args(argv)

    reference = np.loadtxt(args.reference, delimiter=",", comments="#")
    times = reference[:, 0]
    angles, residuals, calibration, elapsed = estimate(args.recording, times, args.calibration_seconds,
                                                       joint_limits=not args.no_limits)
    print(f"{len(times)} frames ({times[-1] - times[0]:.2f} s) tracked in {elapsed:.3f} s "
          f"({len(times) / elapsed:.0f} frames/s, {(times[-1] - times[0]) / elapsed:.0f}x real time); "
          f"joint limits {'off' if args.no_limits else 'on'}; heading correction "
          f"{np.degrees(calibration.heading_angle):.1f} deg")
    print("joint angle ranges (deg):")
    for angle in ANGLES:
        left, right = angles[f"left_{angle}"], angles[f"right_{angle}"]
        print(f"  {angle:20s} left {left.min():7.1f} .. {left.max():6.1f}   right {right.min():7.1f} .. "
              f"{right.max():6.1f}")
    print("per-sensor residual (deg): median / 95th percentile / max")
    for name, values in residuals.items():
        print(f"  {name:16s} {np.median(values):6.2f} / {np.percentile(values, 95):6.2f} / {values.max():6.2f}")
    print("knee flexion vs imumocap (deg):")
    for column, side in enumerate(("left", "right"), start=1):
        ours, theirs = angles[f"{side}_knee_flexion"], reference[:, column]
        rms = np.sqrt(np.mean((ours - theirs) ** 2))
        print(f"  {side:5s} RMS {rms:5.2f}  max |diff| {np.abs(ours - theirs).max():5.2f}  "
              f"correlation {np.corrcoef(ours, theirs)[0, 1]:.4f}  range ours {ours.min():.1f}..{ours.max():.1f}, "
              f"imumocap {theirs.min():.1f}..{theirs.max():.1f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = times - times[0]
    figure, axes = plt.subplots(4, 1, figsize=(11, 11), sharex=True)
    for column, side in enumerate(("left", "right"), start=1):
        line, = axes[0].plot(t, angles[f"{side}_knee_flexion"], label=f"{side} knee, ros_dofkit")
        axes[0].plot(t, reference[:, column], "--", color=line.get_color(), label=f"{side} knee, imumocap")
    axes[0].set_ylabel("knee flexion (deg)")
    for side, style in (("left", "-"), ("right", "--")):
        for angle in ("hip_flexion", "hip_adduction", "hip_rotation"):
            axes[1].plot(t, angles[f"{side}_{angle}"], style, label=f"{side} {angle}")
        for angle in ("ankle_dorsiflexion", "ankle_inversion"):
            axes[2].plot(t, angles[f"{side}_{angle}"], style, label=f"{side} {angle}")
    axes[1].set_ylabel("hip (deg)")
    axes[2].set_ylabel("ankle (deg)")
    for name, values in residuals.items():
        axes[3].plot(t, values, label=name)
    axes[3].set_ylabel("sensor residual (deg)")
    axes[3].set_xlabel("time since the first frame (s)")
    for ax in axes:
        ax.grid(True)
        ax.legend(fontsize=7, ncol=3, loc="upper right")
    figure.suptitle("x-IMU3 lower body: ros_dofkit estimate (calibrated on the first 0.5 s) vs imumocap")
    figure.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.plot, dpi=90)
    print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
