"""Tests of benchmarks/opensim_peer.py: the OpenSim model converted from our plant has the same kinematics.

OpenSim is a benchmark extra (requirements/bench.txt), not installed by `./run test`: the whole module is skipped
when `import opensim` fails. The truth is independent of the converter: Pinocchio's forward kinematics of the
same URDF, our plant's, and analytic poses of a hand-made URDF with arbitrary axes.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.opensim_peer import opensim_available  # noqa: E402

# Not pytest.importorskip("opensim"): a bare `import opensim` clobbers LD_LIBRARY_PATH for every later subprocess
# (see opensim_peer.import_opensim), which would break the ROS process tests that run after this module.
if not opensim_available():
    pytest.skip("opensim is a benchmark extra (pip install opensim==4.6); not installed here", allow_module_level=True)

import pinocchio  # noqa: E402

from benchmarks import scenarios  # noqa: E402
from benchmarks.opensim_peer import (  # noqa: E402
    LOCK_MODES,
    ImuMount,
    ModelConversionError,
    ModelMismatchError,
    OpenSimImuIk,
    OpenSimPeer,
)
from ros_dofkit.core.multibody import MultibodyPlant  # noqa: E402
from ros_dofkit.core.spatial import rotation_angle  # noqa: E402


def _random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def _angles_between(R_a, R_b):
    return rotation_angle(np.swapaxes(R_a, -1, -2) @ R_b)


def _pinocchio_R_GS(urdf_path, link_names, R_BS, plant, q, floating_start=None):
    """R_WL(q) · R_BS from Pinocchio, with our q mapped onto Pinocchio's joint order by joint name."""
    if floating_start is None:
        model = pinocchio.buildModelFromUrdf(str(urdf_path))
    else:
        model = pinocchio.buildModelFromUrdf(str(urdf_path), pinocchio.JointModelFreeFlyer())
    data = model.createData()
    q_pin = pinocchio.neutral(model)
    for j in range(1, model.njoints):
        name = model.names[j]
        if model.joints[j].shortname() == "JointModelFreeFlyer":
            s = floating_start
            w, x, y, z = q[s:s + 4]
            q_pin[model.idx_qs[j]:model.idx_qs[j] + 7] = [*q[s + 4:s + 7], x, y, z, w]
        elif model.nqs[j] == 1:
            q_pin[model.idx_qs[j]] = q[plant.get_joint_by_name(name).position_start]
    pinocchio.framesForwardKinematics(model, data, q_pin)
    return np.stack([data.oMf[model.getFrameId(name)].rotation @ R for name, R in zip(link_names, R_BS, strict=True)])


def test_panda_imu_frames_match_pinocchio_and_plant():
    plant = scenarios.load_plant(scenarios.PANDA_URDF)
    rng = np.random.default_rng(3)
    links = scenarios.PANDA_IMU_BODIES
    R_BS = [_random_rotation(rng) for _ in links]
    imus = [ImuMount(f"{n}_imu", plant.get_body_by_name(n).index, R) for n, R in zip(links, R_BS, strict=True)]
    finger = plant.get_joint_by_name("panda_finger_joint1").position_start
    peer = OpenSimPeer(plant, imus, locked_positions=[finger])
    assert peer.check_against_plant(num_samples=3, seed=1, tolerance=1e-12) < 1e-12
    for _ in range(3):
        q = plant.default_positions() + rng.uniform(-1.5, 1.5, plant.num_positions())
        q[finger] = plant.default_positions()[finger]
        peer.set_positions(q)
        R_opensim = peer.imu_rotations()
        R_pinocchio = _pinocchio_R_GS(scenarios.robots_dir() / scenarios.PANDA_URDF, links, R_BS, plant, q)
        assert _angles_between(R_opensim, R_pinocchio).max() < 1e-12


def test_humanoid_floating_base_matches_pinocchio():
    plant = scenarios.load_plant(scenarios.HUMANOID_URDF, base_joint="floating")
    rng = np.random.default_rng(4)
    links = scenarios.HUMANOID_IMU_BODIES
    R_BS = [_random_rotation(rng) for _ in links]
    imus = [ImuMount(f"{n}_imu", plant.get_body_by_name(n).index, R) for n, R in zip(links, R_BS, strict=True)]
    s = plant.floating_base_joints()[0].position_start
    default = plant.default_positions()
    default[s + 4:s + 7] = [0.4, -0.2, 0.8]
    peer = OpenSimPeer(plant, imus, default_positions=default)
    assert peer.check_against_plant(num_samples=3, seed=2, tolerance=1e-12) < 1e-12
    q = default + rng.uniform(-0.8, 0.8, plant.num_positions())
    quat = rng.normal(size=4)
    q[s:s + 4] = quat / np.linalg.norm(quat)
    q[s + 4:s + 7] = default[s + 4:s + 7]
    peer.set_positions(q)
    R_pinocchio = _pinocchio_R_GS(scenarios.robots_dir() / scenarios.HUMANOID_URDF, links, R_BS, plant, q,
                                  floating_start=s)
    assert _angles_between(peer.imu_rotations(), R_pinocchio).max() < 1e-12
    # The coordinate round trip: quaternion -> body-fixed XYZ angles -> quaternion (sign is free).
    q_back = peer.get_positions()
    assert min(np.abs(q_back[s:s + 4] - q[s:s + 4]).max(), np.abs(q_back[s:s + 4] + q[s:s + 4]).max()) < 1e-12
    np.testing.assert_allclose(np.delete(q_back, range(s, s + 4)), np.delete(q, range(s, s + 4)), atol=1e-12)


_ODD_AXES_URDF = """<robot name="odd_axes">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="d"/>
  <joint name="slide" type="planar">
    <parent link="base"/><child link="a"/><origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.1"/>
    <axis xyz="0 0 1"/>
  </joint>
  <joint name="tilt" type="revolute">
    <parent link="a"/><child link="b"/><origin xyz="0 0.5 0" rpy="0.5 0.1 -0.7"/>
    <axis xyz="0.3 -0.5 0.8"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="push" type="prismatic">
    <parent link="b"/><child link="c"/><origin xyz="0.2 0 0.1" rpy="-0.4 0.9 0.2"/>
    <axis xyz="0 0 -1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="flip" type="continuous">
    <parent link="c"/><child link="d"/><origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="-1 0 0"/>
  </joint>
</robot>"""


def test_arbitrary_axes_planar_prismatic_match_the_plant():
    plant = MultibodyPlant(name="odd")
    plant.add_urdf(_ODD_AXES_URDF)
    plant.finalize()
    rng = np.random.default_rng(5)
    imus = [ImuMount(f"{n}_imu", plant.get_body_by_name(n).index, _random_rotation(rng)) for n in "abcd"]
    peer = OpenSimPeer(plant, imus)
    assert peer.check_against_plant(num_samples=5, seed=3, tolerance=1e-12) < 1e-12
    # The planar and prismatic translations reach OpenSim too: compare frame origins, not only orientations.
    q = plant.default_positions() + rng.uniform(-0.7, 0.7, plant.num_positions())
    peer.set_positions(q)
    X_WB = plant.calc_body_poses(q)
    np.testing.assert_allclose(peer.imu_positions(), X_WB[[imu.body for imu in imus], :3, 3], atol=1e-12)


def test_mimic_finger_is_frozen_at_the_value_of_its_locked_source():
    plant = scenarios.load_plant(scenarios.PANDA_URDF)
    finger = plant.get_joint_by_name("panda_finger_joint1").position_start
    q_default = plant.default_positions()
    q_default[finger] = 0.03  # both fingers open by 3 cm; the mimic finger moves along its own (-y) axis
    fingers = ["panda_leftfinger", "panda_rightfinger"]
    imus = [ImuMount(f"{n}_imu", plant.get_body_by_name(n).index, np.eye(3)) for n in fingers]
    peer = OpenSimPeer(plant, imus, locked_positions=[finger], default_positions=q_default)
    assert peer.check_against_plant(num_samples=2, tolerance=1e-12) < 1e-12
    peer.set_positions(q_default)
    left, right = peer.imu_positions()
    assert abs(np.linalg.norm(left - right) - 0.06) < 1e-12


def test_mismatched_model_is_detected():
    plant = scenarios.load_plant(scenarios.PANDA_URDF)
    finger = plant.get_joint_by_name("panda_finger_joint1").position_start
    imus = [ImuMount("hand_imu", plant.get_body_by_name("panda_hand").index, np.eye(3))]
    peer = OpenSimPeer(plant, imus, locked_positions=[finger])
    # The plant now believes the sensor is mounted a quarter turn about z differently than OpenSim's frame is.
    peer.imus = (ImuMount("hand_imu", imus[0].body, np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])),)
    with pytest.raises(ModelMismatchError, match="differ by up to 1.57"):
        peer.check_against_plant()


def test_conversion_errors_name_what_was_expected():
    plant = scenarios.load_plant(scenarios.PANDA_URDF)
    hand = plant.get_body_by_name("panda_hand").index
    with pytest.raises(ModelConversionError, match="mimic joint 'panda_finger_joint2'.*free"):
        OpenSimPeer(plant, [ImuMount("hand_imu", hand, np.eye(3))])
    finger = plant.get_joint_by_name("panda_finger_joint1").position_start
    with pytest.raises(ModelConversionError, match="unique.*hand_imu"):
        OpenSimPeer(plant, [ImuMount("hand_imu", hand, np.eye(3))] * 2, locked_positions=[finger])
    with pytest.raises(ModelConversionError, match="proper rotation"):
        ImuMount("bad", hand, 2 * np.eye(3))
    with pytest.raises(ModelConversionError, match="non-world body"):
        OpenSimPeer(plant, [ImuMount("world_imu", 0, np.eye(3))], locked_positions=[finger])


@pytest.mark.parametrize("lock_mode", LOCK_MODES)
def test_opensim_imu_ik_recovers_the_panda_motion_in_every_lock_mode(lock_mode):
    scenario = scenarios.panda_scenario(num_frames=15)
    peer = OpenSimPeer(scenario.plant, scenario.imus, locked_positions=scenario.locked_positions,
                       default_positions=scenario.q_start)
    run = OpenSimImuIk(peer, accuracy=1e-4, lock_mode=lock_mode).solve(scenario.times, scenario.R_GO)
    assert run.q.shape == scenario.q_true.shape
    # Accuracy 1e-4 on the goal leaves joint errors of the order of 1e-3 rad; 0.1 rad was the start error.
    assert scenario.joint_errors(run.q).max() < 1e-2
    assert run.track_seconds > 0 and run.tracked_frames_per_second > 0
    # Locked, lockQ'd or free: no IMU observes the finger, so it stays where it started.
    locked = list(scenario.locked_positions)
    np.testing.assert_array_equal(run.q[:, locked], np.tile(scenario.q_start[locked], (15, 1)))
    # The peer stays usable after a solve, and a second solve from its defaults gives the same answer.
    assert peer.check_against_plant(num_samples=1) < 1e-12
    np.testing.assert_allclose(OpenSimImuIk(peer, lock_mode=lock_mode).solve(scenario.times, scenario.R_GO).q, run.q,
                               atol=1e-12)


def test_lockq_and_free_modes_reach_the_same_solution_through_lbfgs_more_accurately_than_constraints():
    """Simbody's Assembler picks IPOPT as soon as a constraint (a locked OpenSim coordinate) exists, LBFGS otherwise:
    the two LBFGS modes agree with each other and stop closer to the truth than OpenSense's locks (at accuracy 1e-4
    IPOPT stops ~5e-3 rad off on this motion, LBFGS ~1e-4)."""
    scenario = scenarios.panda_scenario(num_frames=30)
    peer = OpenSimPeer(scenario.plant, scenario.imus, locked_positions=scenario.locked_positions,
                       default_positions=scenario.q_start)
    q = {mode: OpenSimImuIk(peer, lock_mode=mode).solve(scenario.times, scenario.R_GO).q for mode in LOCK_MODES}
    errors = {mode: scenario.joint_errors(q[mode])[1:].max() for mode in LOCK_MODES}
    assert np.abs(q["assembler"] - q["free"]).max() < 1e-3
    assert errors["assembler"] < errors["constraint"] and errors["free"] < errors["constraint"]
    with pytest.raises(ValueError, match="lock_mode among"):
        OpenSimImuIk(peer, lock_mode="welded")


def test_free_mode_leaves_the_unobserved_base_translation_where_it_started():
    scenario = scenarios.humanoid_scenario(num_frames=4)
    peer = OpenSimPeer(scenario.plant, scenario.imus, locked_positions=scenario.locked_positions,
                       default_positions=scenario.q_start)
    s = scenario.floating_q_start
    assert len(peer.locked_coordinates) == len(scenario.locked_positions)  # the translations are among them
    run = OpenSimImuIk(peer, lock_mode="free").solve(scenario.times, scenario.R_GO)
    np.testing.assert_allclose(run.q[:, s + 4:s + 7], np.tile(scenario.q_start[s + 4:s + 7], (4, 1)), atol=1e-9)
    assert scenario.base_orientation_errors(run.q).max() < 1e-2


def test_importing_opensim_leaves_the_process_environment_as_it_was(monkeypatch):
    """`import opensim` (4.6) sets LD_LIBRARY_PATH = PATH on Linux; import_opensim must undo it, or every process
    started afterwards (a ROS node) loses the ROS wheels' libraries."""
    import os

    from benchmarks import opensim_peer

    monkeypatch.delitem(sys.modules, "opensim")  # import it afresh, so that its __init__ runs again
    before = {name: os.environ.get(name) for name in ("LD_LIBRARY_PATH", "PATH", "SIMBODY_HOME")}
    opensim_peer.import_opensim()
    assert {name: os.environ.get(name) for name in before} == before
