"""Forward kinematics and frame Jacobians of the plant against Pinocchio, an independent implementation, on real
robot URDFs from example-robot-data (arms, legged robots and humanoids, floating bases and mimic joints), and every
URDF of example-robot-data: what Pinocchio loads loads here with the same body poses (what Pinocchio refuses is
refused here too).

Pinocchio's conventions differ and are converted here: its free-flyer q is [x y z qx qy qz qw]; continuous
joints use (cos θ, sin θ); mimic joints are independent coordinates unless parsed with mimic=True (we set them
to multiplier * source + offset); fixed-joint links are frames; frame Jacobians have rows [v; ω].
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from robot_models import FLOATING_BASE, all_urdf_files, robots_dir, urdf_path
from ros_dofkit.core.multibody import MultibodyPlant, URDFError, URDFWarning

pin = pytest.importorskip("pinocchio")


def add_real_robot(plant: MultibodyPlant, path, **options) -> None:
    """Real robots carry parts kinematics does not use (transmissions, Gazebo tags): their URDFWarnings are tested
    in test_multibody_urdf.py and expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", URDFWarning)
        plant.add_urdf(path, **options)


def load_both(short_name: str):
    path = urdf_path(short_name)
    plant = MultibodyPlant()
    floating = short_name in FLOATING_BASE
    add_real_robot(plant, path, base_joint="floating" if floating else "fixed")
    plant.finalize()
    model = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating else \
        pin.buildModelFromUrdf(str(path))
    return plant, model


def random_configuration(plant: MultibodyPlant, rng: np.random.Generator) -> np.ndarray:
    q = plant.default_positions()
    lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
    finite = np.isfinite(lower) & np.isfinite(upper)
    q[finite] = rng.uniform(lower[finite], upper[finite])
    q[~finite] = rng.uniform(-np.pi, np.pi, size=(~finite).sum())
    for joint in plant.floating_base_joints():
        quat = rng.normal(size=4)
        q[joint.position_start:joint.position_start + 4] = quat / np.linalg.norm(quat)
    return q


def to_pinocchio(plant: MultibodyPlant, model, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio q for our q, and the matrix M with v_pinocchio = M v (mimic joints follow their source)."""
    q_pin = pin.neutral(model)
    M = np.zeros((model.nv, plant.num_velocities()))
    for joint_id in range(1, model.njoints):
        name, joint_model = model.names[joint_id], model.joints[joint_id]
        iq, iv = joint_model.idx_q, joint_model.idx_v
        if name == "root_joint":
            (base,) = plant.floating_base_joints()
            qw, qx, qy, qz, x, y, z = q[base.position_start:base.position_start + 7]
            q_pin[iq:iq + 7] = [x, y, z, qx, qy, qz, qw]
            # Pinocchio's free-flyer velocity is in the body frame: [v_B; w_B] = blockdiag(R^T, R^T) [v_W; w_W]
            R_WB = pin.Quaternion(qw, qx, qy, qz).toRotationMatrix()
            M[iv:iv + 3, base.velocity_start + 3:base.velocity_start + 6] = R_WB.T
            M[iv + 3:iv + 6, base.velocity_start:base.velocity_start + 3] = R_WB.T
            continue
        joint = plant.get_joint_by_name(name)
        value = float(joint.motion_positions(q)[0])
        if joint_model.nq == 2:
            q_pin[iq:iq + 2] = [np.cos(value), np.sin(value)]
        else:
            q_pin[iq] = value
        if getattr(joint, "mimic", None) is not None:
            source, multiplier, _ = joint.mimic_chain()
            M[iv, source.velocity_start] = multiplier
        else:
            M[iv, joint.velocity_start] = 1.0
    return q_pin, M


ROBOTS = ["panda", "ur5", "tiago", "anymal", "go1", "solo12", "talos_full", "romeo", "g1"]


@pytest.mark.parametrize("short_name", ROBOTS)
def test_every_body_pose_matches_pinocchio(short_name):
    plant, model = load_both(short_name)
    data = model.createData()
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(3):
        q = random_configuration(plant, rng)
        q_pin, _ = to_pinocchio(plant, model, q)
        pin.framesForwardKinematics(model, data, q_pin)
        X_WB = plant.calc_body_poses(q)
        for body_index in range(1, plant.num_bodies()):
            name = plant.get_body(body_index).name
            assert model.existFrame(name, pin.FrameType.BODY), f"pinocchio has no frame for link {name!r}"
            X_pin = data.oMf[model.getFrameId(name, pin.FrameType.BODY)].homogeneous
            np.testing.assert_allclose(X_WB[body_index], X_pin, atol=1e-10, err_msg=name)
            compared += 1
    assert compared == 3 * (plant.num_bodies() - 1)


@pytest.mark.parametrize("short_name", ["panda", "ur5", "tiago", "anymal", "talos_full"])
def test_frame_jacobians_match_pinocchio(short_name):
    """Our [w; v] Jacobian of each link origin equals Pinocchio's LOCAL_WORLD_ALIGNED [v; w] one after mapping
    our v to Pinocchio's (column order, mimic joints, body-frame free-flyer velocity)."""
    plant, model = load_both(short_name)
    data = model.createData()
    rng = np.random.default_rng(12)
    q = random_configuration(plant, rng)
    q_pin, M = to_pinocchio(plant, model, q)
    pin.computeJointJacobians(model, data, q_pin)
    pin.updateFramePlacements(model, data)
    for body_index in range(1, plant.num_bodies()):
        name = plant.get_body(body_index).name
        frame_id = model.getFrameId(name, pin.FrameType.BODY)
        J_pin = pin.getFrameJacobian(model, data, frame_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        J_expected = np.vstack([J_pin[3:], J_pin[:3]]) @ M
        J = plant.calc_jacobian(q, plant.get_body(body_index))
        np.testing.assert_allclose(J, J_expected, atol=1e-10, err_msg=name)


def test_batched_poses_match_pinocchio_per_configuration():
    plant, model = load_both("panda")
    data = model.createData()
    rng = np.random.default_rng(13)
    q = np.stack([random_configuration(plant, rng) for _ in range(5)])
    hand = plant.get_body_by_name("panda_hand")
    X = plant.calc_frame_pose(q, hand)
    for k in range(5):
        pin.framesForwardKinematics(model, data, to_pinocchio(plant, model, q[k])[0])
        np.testing.assert_allclose(X[k], data.oMf[model.getFrameId("panda_hand")].homogeneous, atol=1e-10)


EVERY_URDF = all_urdf_files() or ["(example-robot-data not installed)"]


@pytest.mark.parametrize("relative_path", EVERY_URDF)
def test_every_example_robot_data_urdf_loads_with_pinocchios_body_poses(relative_path):
    """Fixed base, two random configurations, every body; parts kinematics does not use may warn (URDFWarning)."""
    if robots_dir() is None:
        pytest.skip("the pip package example-robot-data is not installed")
    path = robots_dir() / relative_path
    try:
        model = pin.buildModelFromUrdf(str(path))
    except ValueError:  # ur3.urdf: urdfdom's "No name given for the robot"
        with pytest.raises(URDFError, match="<robot> element without a name"):
            MultibodyPlant().add_urdf(path)
        return
    plant = MultibodyPlant()
    add_real_robot(plant, path)
    plant.finalize()
    data = model.createData()
    rng = np.random.default_rng(17)
    for _ in range(2):
        q = random_configuration(plant, rng)
        pin.framesForwardKinematics(model, data, to_pinocchio(plant, model, q)[0])
        X_WB = plant.calc_body_poses(q)
        for body_index in range(1, plant.num_bodies()):
            name = plant.get_body(body_index).name
            X_pin = data.oMf[model.getFrameId(name, pin.FrameType.BODY)].homogeneous
            np.testing.assert_allclose(X_WB[body_index], X_pin, atol=1e-9, err_msg=name)
