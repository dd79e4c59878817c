"""Tests of ros_dofkit/models/lower_body.urdf: structure, dimensions and sign conventions.

Pinocchio (an independent URDF parser and kinematics library) is the reference; the package's own plant is checked
against it when ros_dofkit.core.multibody is available.
"""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import ros_dofkit

MODEL = Path(ros_dofkit.__file__).parent / "models" / "lower_body.urdf"
REAL_RECORDING = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ximu3_lower_body"
DEVICE_FOLDERS = ["pelvis", "left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg",
                  "right_foot"]
H = 1.75  # body height the segment lengths are scaled to (Winter's proportions)
JOINTS = [f"{side}_{name}" for side in ("left", "right") for name in
          ("hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion", "ankle_inversion")]


@pytest.fixture(scope="module")
def pinocchio_model():
    model = pin.buildModelFromUrdf(str(MODEL))  # root welded to the universe: the neutral standing pose
    return model, model.createData()


def frame_position(model, data, q, name):
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(name)].translation.copy()


def frame_rotation(model, data, q, name):
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(name)].rotation.copy()


def q_with(model, **angles):
    q = pin.neutral(model)
    for name, value in angles.items():
        q[model.joints[model.getJointId(name)].idx_q] = value
    return q


def test_twelve_revolute_joints_with_the_stated_names(pinocchio_model):
    model, _ = pinocchio_model
    assert model.nq == 12 and model.nv == 12
    assert sorted(model.names[1:]) == sorted(JOINTS)
    knee = model.getJointId("left_knee_flexion")
    assert model.lowerPositionLimit[model.joints[knee].idx_q] == pytest.approx(np.radians(-5), abs=1e-4)
    assert model.upperPositionLimit[model.joints[knee].idx_q] == pytest.approx(np.radians(150), abs=1e-4)


def test_imu_frames_are_named_after_the_recording_folders(pinocchio_model):
    model, _ = pinocchio_model
    folders = sorted(p.name for p in REAL_RECORDING.iterdir() if p.is_dir()) if REAL_RECORDING.is_dir() \
        else sorted(DEVICE_FOLDERS)
    imu_frames = sorted(f.name[: -len("_imu")] for f in model.frames
                        if f.name.endswith("_imu") and f.type == pin.FrameType.BODY)
    assert imu_frames == folders


def test_standing_pose_dimensions(pinocchio_model):
    model, data = pinocchio_model
    q = pin.neutral(model)
    for side, sign in (("left", 1), ("right", -1)):
        hip = frame_position(model, data, q, f"{side}_hip_flexion_link")
        knee = frame_position(model, data, q, f"{side}_lower_leg")
        ankle = frame_position(model, data, q, f"{side}_foot")
        sole = frame_position(model, data, q, f"{side}_sole")
        np.testing.assert_allclose(hip, [0, sign * 0.09, 0], atol=1e-12)
        np.testing.assert_allclose(hip - knee, [0, 0, 0.245 * H], atol=1e-3)  # Winter: thigh 0.245 H
        np.testing.assert_allclose(knee - ankle, [0, 0, 0.246 * H], atol=1e-3)  # shank 0.246 H
        # Feet below the pelvis by the leg length: hip height 0.530 H above the floor.
        np.testing.assert_allclose(sole, [0, sign * 0.09, -0.530 * H], atol=2e-3)
    # Every link frame is REP-103 aligned in the neutral pose (identity rotation), except the pelvis IMU's
    # documented mounting (z backward).
    for frame in model.frames:
        if frame.type == pin.FrameType.BODY and frame.name != "pelvis_imu":
            np.testing.assert_allclose(frame_rotation(model, data, q, frame.name), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(frame_rotation(model, data, q, "pelvis_imu") @ [0, 0, 1], [-1, 0, 0], atol=1e-12)


@pytest.mark.parametrize("side,sign", [("left", 1), ("right", -1)])
def test_positive_angles_mean_the_stated_anatomical_motion(pinocchio_model, side, sign):
    model, data = pinocchio_model
    a = np.radians(20)
    knee0 = frame_position(model, data, pin.neutral(model), f"{side}_lower_leg")
    ankle0 = frame_position(model, data, pin.neutral(model), f"{side}_foot")

    knee = frame_position(model, data, q_with(model, **{f"{side}_hip_flexion": a}), f"{side}_lower_leg")
    assert knee[0] > knee0[0] + 0.1  # hip flexion: knee forward
    knee = frame_position(model, data, q_with(model, **{f"{side}_hip_adduction": a}), f"{side}_lower_leg")
    assert sign * (knee[1] - knee0[1]) < -0.1  # hip adduction: knee toward the midline
    R = frame_rotation(model, data, q_with(model, **{f"{side}_hip_rotation": a}), f"{side}_upper_leg")
    assert sign * (R @ [1, 0, 0])[1] < -0.3  # internal rotation: the thigh's front turns toward the midline
    ankle = frame_position(model, data, q_with(model, **{f"{side}_knee_flexion": a}), f"{side}_foot")
    assert ankle[0] < ankle0[0] - 0.1  # knee flexion: shank backward
    R = frame_rotation(model, data, q_with(model, **{f"{side}_ankle_dorsiflexion": a}), f"{side}_foot")
    assert (R @ [1, 0, 0])[2] > 0.3  # dorsiflexion: toes up
    R = frame_rotation(model, data, q_with(model, **{f"{side}_ankle_inversion": a}), f"{side}_foot")
    assert sign * (R @ [0, 0, -1])[1] < -0.3  # inversion: the sole faces the midline


def test_plant_loads_the_model_and_agrees_with_pinocchio(pinocchio_model):
    try:
        from ros_dofkit.core.multibody import MultibodyPlant
    except ImportError:
        pytest.skip("ros_dofkit.core.multibody is not available yet")
    model, data = pinocchio_model
    plant = MultibodyPlant()
    plant.add_urdf(str(MODEL), base_joint="floating")
    plant.finalize()
    assert plant.num_positions() == 7 + 12 and plant.num_velocities() == 6 + 12
    rng = np.random.default_rng(7)
    for _ in range(5):
        q_pin = pin.randomConfiguration(model, model.lowerPositionLimit, model.upperPositionLimit)
        q = plant.default_positions()
        for name in JOINTS:
            q[plant.get_joint_by_name(name).position_start] = q_pin[model.joints[model.getJointId(name)].idx_q]
        quaternion = rng.normal(size=4)
        quaternion /= np.linalg.norm(quaternion)
        q[:4] = quaternion
        q[4:7] = rng.normal(size=3)
        R_WP = pin.Quaternion(quaternion[0], *quaternion[1:]).toRotationMatrix()
        X_WP = pin.SE3(R_WP, q[4:7])
        pin.framesForwardKinematics(model, data, q_pin)
        for name in [f"{d}_imu" for d in DEVICE_FOLDERS] + ["left_sole", "right_sole"]:
            expected = (X_WP * data.oMf[model.getFrameId(name)]).homogeneous
            np.testing.assert_allclose(plant.calc_frame_pose(q, name), expected, atol=1e-12)
