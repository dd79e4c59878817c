"""End to end on the real x-IMU3 recording: import to a bag, read it back, calibrate on the first 0.5 s, track.

The core-level cross-check of test/test_ximu3_replay.py (which goes through ``dofkit replay``): the bag written
by ``dofkit import ximu3`` is the only input, every device is slerp-resampled onto one 50 Hz grid, and
``calibrate_imus`` + ``Assembler.track_sequence`` run directly; the lower-body model is
ros_dofkit/models/lower_body.urdf. Asserted: physiological plausibility (there is no ground truth) and agreement
with an independent solution of the same data, x-io's imumocap (test/fixtures/ximu3/imumocap_knee_flexion.csv,
from benchmarks/ximu3_imumocap_reference.py). Bounds are stated physiology / sensor facts, not values of a
previous run.
"""

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

import ros_dofkit
from ros_dofkit.commands import import_ximu3
from ros_dofkit.ros.bag_io import read_bag
from ros_dofkit.ros.imu_messages import imu_message_to_arrays

assembly = pytest.importorskip("ros_dofkit.core.assembly")
multibody = pytest.importorskip("ros_dofkit.core.multibody")

REAL_RECORDING = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ximu3_lower_body"
REFERENCE = Path(__file__).parent / "fixtures" / "ximu3" / "imumocap_knee_flexion.csv"
MODEL = Path(ros_dofkit.__file__).parent / "models" / "lower_body.urdf"
SEGMENTS = ["pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
            "right_foot"]
JOINTS = ["hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion", "ankle_inversion"]

# Stated bounds.
KNEE_RANGE_DEG = (-10.0, 150.0)  # anatomical knee range, a little hyperextension allowed
RESIDUAL_MEDIAN_BOUND_DEG = 10.0  # model vs measured sensor orientation, median over the recording per sensor
STANDING_BOUND_DEG = 3.0  # every joint angle during the calibration stand (the calibration defines it as 0)
KNEE_RMS_VS_IMUMOCAP_BOUND_DEG = 3.0  # the two methods differ only in the knee model (1 dof vs 3)


@pytest.fixture(scope="module")
def estimate(tmp_path_factory):
    if not REAL_RECORDING.is_dir():
        pytest.skip("../shared/data/ximu3_lower_body not available")
    bag = tmp_path_factory.mktemp("ximu3") / "lower_body"
    assert import_ximu3.main([str(REAL_RECORDING), "--out", str(bag), "--storage", "mcap"]) == 0

    samples = {name: ([], []) for name in SEGMENTS}
    for record in read_bag(bag):
        name = record.topic.split("/")[2]
        fields = imu_message_to_arrays(record.message)
        samples[name][0].append(fields["stamp_ns"] / 1e9)
        samples[name][1].append(fields["quaternion_wxyz"])
    reference = np.loadtxt(REFERENCE, delimiter=",", comments="#")
    times = reference[:, 0]
    R_WS = {}
    for name, (t, q) in samples.items():
        t = np.array(t)
        slerp = Slerp(t, Rotation.from_quat(np.array(q), scalar_first=True))
        R_WS[name] = slerp(np.clip(times, t[0], t[-1])).as_matrix()  # clip: the reference prints µs-rounded times

    plant = multibody.MultibodyPlant()
    plant.add_urdf(str(MODEL), base_joint="floating")
    plant.finalize()
    q_cal = plant.default_positions()
    standing = times < times[0] + 0.5
    calibration = assembly.calibrate_imus(
        plant, q_cal, {name: name for name in SEGMENTS}, {name: R_WS[name][standing] for name in SEGMENTS},
        alignment="enu", base_imu="pelvis", base_heading_axis="-z", base_body="pelvis")
    osensors = calibration.make_orientation_sensors(SEGMENTS)
    assembler = assembly.Assembler(plant)
    assembler.adopt_assembly_goal(osensors)
    base = plant.floating_base_joints()[0]
    assembler.lock_positions([base.position_start + k for k in (4, 5, 6)])
    assembler.set_positions(q_cal)  # no joint limits: the range assertions below must be able to fail
    observations = np.stack([calibration.to_model_world(R_WS[name]) for name in SEGMENTS], axis=1)
    Q = assembler.track_sequence(times, observations)

    X_WB = plant.calc_body_poses(Q)
    residual_deg = {}
    for k, name in enumerate(SEGMENTS):
        R_model = X_WB[:, calibration.bodies[name], :3, :3] @ calibration.R_BS[name]
        relative = np.swapaxes(R_model, -1, -2) @ observations[:, k]
        residual_deg[name] = np.degrees(np.linalg.norm(Rotation.from_matrix(relative).as_rotvec(), axis=1))
    angles_deg = {f"{side}_{joint}": np.degrees(Q[:, plant.get_joint_by_name(f"{side}_{joint}").position_start])
                  for side in ("left", "right") for joint in JOINTS}
    return {"times": times, "standing": standing, "angles": angles_deg, "residuals": residual_deg,
            "reference": reference}


def test_knee_flexion_stays_in_the_anatomical_range(estimate):
    for side in ("left", "right"):
        knee = estimate["angles"][f"{side}_knee_flexion"]
        assert KNEE_RANGE_DEG[0] <= knee.min() and knee.max() <= KNEE_RANGE_DEG[1], side
        assert knee.max() > 30.0, side  # the subject walks: swing-phase flexion is several tens of degrees


def test_both_legs_alike_in_range_of_motion(estimate):
    angles = estimate["angles"]
    for joint in ("hip_flexion", "knee_flexion"):
        left, right = angles[f"left_{joint}"], angles[f"right_{joint}"]
        rom_left, rom_right = np.ptp(left), np.ptp(right)
        assert abs(rom_left - rom_right) < 0.25 * max(rom_left, rom_right), (joint, rom_left, rom_right)


def test_standing_calibration_pose_is_neutral(estimate):
    standing = estimate["standing"]
    for name, values in estimate["angles"].items():
        assert np.abs(values[standing]).max() < STANDING_BOUND_DEG, name


def test_per_sensor_residual_median_is_small(estimate):
    for name, values in estimate["residuals"].items():
        assert np.median(values) < RESIDUAL_MEDIAN_BOUND_DEG, (name, np.median(values))


def test_knee_flexion_agrees_with_imumocap(estimate):
    reference = estimate["reference"]
    for column, side in ((1, "left"), (2, "right")):
        difference = estimate["angles"][f"{side}_knee_flexion"] - reference[:, column]
        rms = np.sqrt(np.mean(difference**2))
        assert rms < KNEE_RMS_VS_IMUMOCAP_BOUND_DEG, (side, rms)
