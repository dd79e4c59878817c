"""Reference knee flexion of the x-IMU3 lower-body recording, computed by x-io's own ``imumocap`` package.

Where you are: benchmarks/ -- a script, not a test. It writes test/fixtures/ximu3/imumocap_knee_flexion.csv, the
independent solution ros_dofkit's estimate is compared with (issue 9). Regenerate with

    .venv/bin/python benchmarks/ximu3_imumocap_reference.py

Requires ``imumocap==1.3.1`` (1.4.0 uses Python 3.12 syntax; this venv is Python 3.11). The method is imumocap's:

* Data: Quaternion.csv of every device, read here with NumPy (deliberately not with ros_dofkit's reader), in the
  device earth frame as recorded (NWU; imumocap works in any z-up earth frame), resampled by slerp on each
  device's own timestamps onto one 50 Hz grid over the interval all devices cover.
* Model: an imumocap ``Link`` tree -- pelvis root, thigh and shank hanging along -z, foot along +x -- in the
  calibration pose "standing upright, legs straight, feet forward" (all link joints identity).
* Calibration (``imumocap.solvers.calibrate``): the mean orientation of each IMU over the first 0.5 s is taken as
  the calibration-pose measurement; ``mounting=Mounting.Z_BACKWARD`` says the pelvis IMU's z axis points
  backward, which gives the subject's heading; each IMU's rotation relative to its link is then fixed.
* Tracking (``imumocap.set_pose_from_imus``): every link's world rotation is its IMU's rotation times the
  calibrated IMU-to-link rotation -- no optimisation, no joint model; a joint angle is the relative rotation of a
  link in its parent. Knee flexion is the ``alpha`` angle of an ``imumocap.Joint`` on the shank with the
  alignment that puts the knee's lateral axis first in imumocap's ZYX sequence, signed so that flexion
  (shank backward) is positive -- ros_dofkit's convention (lower_body.urdf).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RECORDING = REPO / ".." / "shared" / "data" / "ximu3_lower_body"
DEFAULT_OUT = REPO / "test" / "fixtures" / "ximu3" / "imumocap_knee_flexion.csv"
SEGMENTS = ["pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
            "right_foot"]  # parent before child: imumocap sets link joints in this order
# Segment lengths of ros_dofkit/models/lower_body.urdf (imumocap's joint angles do not depend on them).
THIGH, SHANK, FOOT, HIP_HALF_WIDTH, PELVIS_HEIGHT = 0.4287, 0.4305, 0.266, 0.09, 0.1


def read_quaternions(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(time s, quaternions (w, x, y, z)) of one device's Quaternion.csv."""
    data = np.loadtxt(folder / "Quaternion.csv", delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0] / 1e6, data[:, 1:5]


def build_model(imumocap):
    """Pelvis root with two legs; link frames x forward, y left, z up in the calibration pose."""
    Link, Matrix = imumocap.Link, imumocap.Matrix
    links = {}
    for side in ("left", "right"):
        links[f"{side}_foot"] = Link(f"{side}_foot", Matrix(x=FOOT))
        links[f"{side}_lower_leg"] = Link(f"{side}_lower_leg", Matrix(z=-SHANK)).connect(links[f"{side}_foot"])
        links[f"{side}_upper_leg"] = Link(f"{side}_upper_leg", Matrix(z=-THIGH)).connect(links[f"{side}_lower_leg"])
    pelvis = Link("pelvis", Matrix(z=PELVIS_HEIGHT))
    for side, sign in (("left", 1.0), ("right", -1.0)):
        pelvis.connect(links[f"{side}_upper_leg"], Matrix(y=sign * HIP_HALF_WIDTH, z=-PELVIS_HEIGHT))
    links["pelvis"] = pelvis
    # The knee's lateral axis (link y) must be imumocap's first (alpha) axis: alignment columns (x', y', z') with
    # z' = +y for the knee; both choices below give alpha > 0 for the shank swinging backward (checked in main()).
    knees = {
        "left": imumocap.Joint(links["left_lower_leg"], Matrix.align_nz_nx_py()),
        "right": imumocap.Joint(links["right_lower_leg"], Matrix.align_pz_px_py()),
    }
    return pelvis, links, knees


def check_knee_sign(imumocap, links, knees) -> None:
    """alpha must be +30 deg when the shank is rotated 30 deg backward (flexion) about the link's y axis."""
    for side, joint in knees.items():
        links[f"{side}_lower_leg"].joint = imumocap.Matrix(rot_y=30.0)
        alpha, beta, gamma = joint.get()
        links[f"{side}_lower_leg"].joint = imumocap.Matrix()
        if not (abs(alpha - 30.0) < 1e-9 and abs(beta) < 1e-9 and abs(gamma) < 1e-9):
            raise RuntimeError(f"{side} knee: expected alpha = 30 deg for 30 deg of flexion, got {alpha, beta, gamma}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--rate", type=float, default=50.0, help="resampling rate in Hz (default 50)")
    parser.add_argument("--calibration-seconds", type=float, default=0.5)
    args = parser.parse_args(argv)

    import imumocap
    import imumocap.solvers

    version = importlib.metadata.version("imumocap")
    streams = {name: read_quaternions(args.recording / name) for name in SEGMENTS}
    start = max(t[0] for t, _ in streams.values())
    end = min(t[-1] for t, _ in streams.values())
    time = start + np.arange(int(np.floor((end - start) * args.rate)) + 1) / args.rate
    rotations = {}
    for name, (t, q) in streams.items():
        rotations[name] = Slerp(t, Rotation.from_quat(q, scalar_first=True))(time)

    root, links, knees = build_model(imumocap)
    check_knee_sign(imumocap, links, knees)
    calibration = time < start + args.calibration_seconds
    imus_at_calibration = {
        name: imumocap.Matrix(rotation=rotations[name][calibration].mean().as_matrix()) for name in SEGMENTS
    }
    heading = imumocap.solvers.calibrate(root, imus_at_calibration, mounting=imumocap.solvers.Mounting.Z_BACKWARD)

    matrices = {name: rotations[name].as_matrix() for name in SEGMENTS}
    flexion = np.empty((len(time), 2))
    for k in range(len(time)):
        imumocap.set_pose_from_imus(root, {name: imumocap.Matrix(rotation=matrices[name][k]) for name in SEGMENTS})
        flexion[k] = [knees["left"].get()[0], knees["right"].get()[0]]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = "\n".join([
        f"Knee flexion of ../shared/data/ximu3_lower_body computed by imumocap {version} (x-io Technologies).",
        "Generated by benchmarks/ximu3_imumocap_reference.py; see its docstring for the method.",
        f"Calibration: mean IMU orientation over the first {args.calibration_seconds} s, pelvis IMU z backward; "
        f"heading {heading:.2f} deg in the device earth frame (NWU).",
        "time_s: device clock (Timestamp (us) / 1e6), resampled at "
        f"{args.rate:g} Hz. Angles in degrees, positive = flexion.",
        "time_s,left_knee_flexion_deg,right_knee_flexion_deg",
    ])
    np.savetxt(args.out, np.column_stack([time, flexion]), delimiter=",", fmt=["%.6f", "%.4f", "%.4f"],
               header=header, comments="# ")
    print(f"imumocap {version}: {len(time)} frames {time[0]:.3f}..{time[-1]:.3f} s, heading {heading:.2f} deg")
    for column, side in enumerate(("left", "right")):
        values = flexion[:, column]
        print(f"  {side:5s} knee flexion: min {values.min():7.2f}  max {values.max():7.2f}  "
              f"mean {values.mean():6.2f} deg;  during calibration {values[calibration].mean():6.2f} deg")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
