"""benchmarks/scenarios.py: the IK benchmark's robots, IMU placements and ground-truth motions.

A :class:`Scenario` is everything both IK solvers receive (plant, IMU mountings, sample times, observed
sensor orientations R_GO, the starting guess and which coordinates are locked) plus the truth they are
scored against. It is built from our plant's forward kinematics only (NumPy, no solver):

* :func:`panda_scenario`: the Franka Panda of example-robot-data (7 revolute joints; the finger coordinate is
  locked and its mimic twin follows it), 4 IMUs on panda_link3, panda_link5, panda_link7 and panda_hand.
* :func:`humanoid_scenario`: the Unitree G1 (``g1_29dof_rev_1_0.urdf`` loaded with a quaternion floating base
  on its pelvis (the URDF's own world link and floating joint are commented out) + 29
  revolute joints, nq = 36, nv = 35) with 17 IMUs on pelvis, torso, head, both thighs, shanks, feet, upper
  arms, forearms and hands, plus the robot's own two IMU links; the base turns and translates slowly.

Joint motion is a sum of two sines per coordinate about a pose away from kinematic singularities (where two
joint axes align and orientation sensors cannot tell the joints apart), kept inside the joint limits. Every
IMU gets a random, non-trivial mounting rotation R_BS. Observations are exact (R_GO = R_WB(q_true) · R_BS)
unless ``noise_deg`` adds an isotropic random rotation of that standard deviation per axis.
"""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation as ScipyRotation

from benchmarks.opensim_peer import ImuMount
from ros_dofkit.core.spatial import matrix_to_quat, quat_multiply, quat_to_matrix, rotation_angle, rotvec_to_quat

PANDA_URDF = "panda_description/urdf/panda.urdf"
HUMANOID_URDF = "g1_description/urdf/g1_29dof_rev_1_0.urdf"

#: Panda IMU bodies (the issue's choice: two on the arm, one on the flange, one on the hand).
PANDA_IMU_BODIES = ("panda_link3", "panda_link5", "panda_link7", "panda_hand")

#: Panda centre pose ("ready" pose): shoulder bent, elbow bent, wrist at 90°; no two axes align nearby.
PANDA_CENTRE = {
    "panda_joint1": 0.0, "panda_joint2": -0.8, "panda_joint3": 0.0, "panda_joint4": -2.2,
    "panda_joint5": 0.0, "panda_joint6": 1.6, "panda_joint7": 0.8,
}

#: G1 IMU bodies, segment by segment (17).
HUMANOID_IMU_BODIES = (
    "pelvis", "imu_in_pelvis", "torso_link", "imu_in_torso", "head_link",
    "left_hip_yaw_link", "left_knee_link", "left_ankle_roll_link",
    "right_hip_yaw_link", "right_knee_link", "right_ankle_roll_link",
    "left_shoulder_yaw_link", "left_elbow_link", "left_wrist_yaw_link",
    "right_shoulder_yaw_link", "right_elbow_link", "right_wrist_yaw_link",
)

#: G1 centre pose: knees and elbows bent, arms away from the body, shoulders and wrists far from gimbal lock.
HUMANOID_CENTRE = {
    "left_hip_pitch_joint": -0.3, "right_hip_pitch_joint": -0.3,
    "left_knee_joint": 0.6, "right_knee_joint": 0.6,
    "left_ankle_pitch_joint": -0.3, "right_ankle_pitch_joint": -0.3,
    "left_shoulder_roll_joint": 0.4, "right_shoulder_roll_joint": -0.4,
    "left_shoulder_pitch_joint": 0.2, "right_shoulder_pitch_joint": 0.2,
    "left_elbow_joint": 0.8, "right_elbow_joint": 0.8,
}


class ScenarioError(ValueError):
    """A scenario cannot be built as asked (missing robot file, bad sizes, unknown names)."""


def robots_dir() -> Path:
    """The ``robots`` directory of the pip package example-robot-data (installed under cmeel.prefix)."""
    candidates = [Path(sysconfig.get_paths()["purelib"]), Path(sys.prefix) / "lib" /
                  f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"]
    for site in candidates:
        path = site / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if path.is_dir():
            return path
    raise ScenarioError(
        f"expected the example-robot-data robots under <site-packages>/cmeel.prefix/share/example-robot-data/"
        f"robots (pip install example-robot-data); looked in {[str(c) for c in candidates]}"
    )


def load_plant(relative_urdf: str, base_joint: str | None = "fixed"):
    """A finalized MultibodyPlant holding one example-robot-data URDF, its root attached by ``base_joint``."""
    from ros_dofkit.core.multibody import MultibodyPlant

    path = robots_dir() / relative_urdf
    if not path.is_file():
        raise ScenarioError(f"expected the URDF {relative_urdf} under {robots_dir()}, it is not there")
    plant = MultibodyPlant(name=Path(relative_urdf).stem)
    plant.add_urdf(str(path), base_joint=base_joint)
    plant.finalize()
    return plant


@dataclass(frozen=True)
class Scenario:
    """One IK benchmark case: the identical inputs given to every solver, and the truth.

    Attributes:
        name: short label used in the table.
        plant: finalized MultibodyPlant.
        imus: the IMU mountings (name, body index, R_BS), also the observation order.
        times: (T,) sample times, s.
        q_true: (T, nq) ground-truth positions that generated the observations.
        R_GO: (T, n_imus, 3, 3) observed sensor orientations in the world (= OpenSim ground).
        q_start: (nq,) the configuration both solvers assemble from at times[0]; locked coordinates hold it.
        locked_positions: q indices locked during IK (translations of a floating base, a gripper).
        scored_positions: q indices of the revolute joints whose error is reported.
        floating_q_start: q index of the floating base quaternion, or None.
    """

    name: str
    plant: object
    imus: tuple
    times: np.ndarray
    q_true: np.ndarray
    R_GO: np.ndarray
    q_start: np.ndarray
    locked_positions: tuple
    scored_positions: np.ndarray
    floating_q_start: int | None

    @property
    def num_frames(self) -> int:
        return int(self.times.size)

    def description(self) -> str:
        plant = self.plant
        base = "floating base" if self.floating_q_start is not None else "fixed base"
        return (f"{self.name}: {plant.name}, {base}, nq={plant.num_positions()}, nv={plant.num_velocities()}, "
                f"{self.scored_positions.size} estimated joints, {len(self.imus)} IMUs, {self.num_frames} frames "
                f"at {1.0 / (self.times[1] - self.times[0]):.0f} Hz")

    def truncated(self, num_frames: int) -> Scenario:
        """The same scenario with only its first ``num_frames`` frames."""
        if not 1 <= num_frames <= self.num_frames:
            raise ScenarioError(f"expected 1 <= num_frames <= {self.num_frames}, received {num_frames}")
        return Scenario(self.name, self.plant, self.imus, self.times[:num_frames], self.q_true[:num_frames],
                        self.R_GO[:num_frames], self.q_start, self.locked_positions, self.scored_positions,
                        self.floating_q_start)

    def joint_errors(self, Q) -> np.ndarray:
        """(T, n_scored) absolute joint angle errors of estimated positions Q (T, nq) against the truth."""
        Q = np.asarray(Q, dtype=float)
        if Q.shape != self.q_true.shape:
            raise ScenarioError(f"expected estimates of shape {self.q_true.shape}, received {Q.shape}")
        return np.abs(Q[:, self.scored_positions] - self.q_true[:, self.scored_positions])

    def base_orientation_errors(self, Q) -> np.ndarray:
        """(T,) angle (rad) between estimated and true floating base orientation; zeros for a fixed base."""
        Q = np.asarray(Q, dtype=float)
        if self.floating_q_start is None:
            return np.zeros(Q.shape[0])
        s = self.floating_q_start
        R_true = quat_to_matrix(self.q_true[:, s:s + 4])
        R_estimate = quat_to_matrix(Q[:, s:s + 4] / np.linalg.norm(Q[:, s:s + 4], axis=-1, keepdims=True))
        return rotation_angle(np.swapaxes(R_true, -1, -2) @ R_estimate)


def _sines(times, amplitude, rng, base_frequency):
    """(T,) sum of two sines with random phases, peak magnitude <= amplitude."""
    frequencies = base_frequency * rng.uniform(0.7, 1.6, size=2)
    phases = rng.uniform(0.0, 2.0 * np.pi, size=2)
    shares = np.array([0.65, 0.35])
    waves = [s * np.sin(2.0 * np.pi * f * times + p) for s, f, p in zip(shares, frequencies, phases, strict=True)]
    return amplitude * sum(waves)


def _joint_trajectory(plant, times, centre_by_name, amplitude, rng, base_frequency):
    """(T, nq) revolute motion about the centre pose; every revolute coordinate stays 0.05 rad inside its limits."""
    Q = np.tile(plant.default_positions(), (times.size, 1))
    lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
    moving = []
    for j in range(plant.num_joints()):
        joint = plant.get_joint(j)
        if joint.type_name != "revolute" or joint.num_positions != 1:
            continue
        i = joint.position_start
        margin = 0.05
        lo, hi = lower[i] + margin, upper[i] - margin
        centre = float(np.clip(centre_by_name.get(joint.name, 0.0), lo, hi))
        reach = min(amplitude, centre - lo, hi - centre) if np.isfinite(lo) and np.isfinite(hi) else amplitude
        Q[:, i] = centre + _sines(times, max(reach, 0.0), rng, base_frequency)
        moving.append(i)
    unknown = sorted(set(centre_by_name) - {plant.get_joint(j).name for j in range(plant.num_joints())})
    if unknown:
        raise ScenarioError(f"centre pose names joints the plant does not have: {unknown}")
    return Q, np.array(moving, dtype=np.int64)


def _random_mountings(rng, count):
    """``count`` random mounting rotations R_BS, each at least 30° away from the identity."""
    rotations = []
    while len(rotations) < count:
        R = ScipyRotation.random(random_state=rng).as_matrix()
        if rotation_angle(R) > np.radians(30.0):
            rotations.append(R)
    return rotations


def _observe(plant, imus, Q, noise_deg, rng):
    """(T, n, 3, 3) R_GO = R_WB(q) R_BS, optionally rotated by isotropic noise (std noise_deg per axis)."""
    X_WB = plant.calc_body_poses(Q)
    bodies = np.array([imu.body for imu in imus])
    R_BS = np.stack([imu.R_BS for imu in imus])
    R_GO = X_WB[:, bodies, :3, :3] @ R_BS
    if noise_deg > 0:
        noise = rotvec_to_quat(rng.normal(scale=np.radians(noise_deg), size=R_GO.shape[:2] + (3,)))
        R_GO = quat_to_matrix(quat_multiply(matrix_to_quat(R_GO), noise))
    return R_GO


def _imus_on(plant, body_names, rng):
    mountings = _random_mountings(rng, len(body_names))
    return tuple(
        ImuMount(f"{name}_imu", plant.get_body_by_name(name).index, R_BS)
        for name, R_BS in zip(body_names, mountings, strict=True)
    )


def _start_guess(Q0, moving, rng, offset):
    """The assembly starting point: the truth at t0 with every estimated joint off by ±offset rad."""
    q_start = Q0.copy()
    q_start[moving] += offset * rng.choice([-1.0, 1.0], size=moving.size)
    return q_start


def panda_scenario(num_frames=500, rate_hz=100.0, noise_deg=0.0, seed=7, plant=None) -> Scenario:
    """Panda 7-dof + 4 IMUs, smooth motion (0.45 rad amplitude, ~0.3 Hz), see the module docstring."""
    plant = load_plant(PANDA_URDF) if plant is None else plant
    rng = np.random.default_rng(seed)
    times = np.arange(num_frames) / float(rate_hz)
    Q, moving = _joint_trajectory(plant, times, PANDA_CENTRE, 0.45, rng, 0.3)
    imus = _imus_on(plant, PANDA_IMU_BODIES, rng)
    locked = tuple(sorted(set(range(plant.num_positions())) - set(moving.tolist())))
    q_start = _start_guess(Q[0], moving, rng, 0.1)
    return Scenario("panda", plant, imus, times, Q, _observe(plant, imus, Q, noise_deg, rng), q_start, locked,
                    moving, None)


def humanoid_scenario(num_frames=500, rate_hz=100.0, noise_deg=0.0, seed=11, plant=None) -> Scenario:
    """G1 humanoid, floating base + 29 joints, 17 IMUs; the base yaws ±0.6 rad, rolls/pitches ±0.15 rad and
    walks forward at 0.3 m/s while the joints move (0.35 rad amplitude, ~0.3 Hz)."""
    plant = load_plant(HUMANOID_URDF, base_joint="floating") if plant is None else plant
    floating = plant.floating_base_joints()
    if len(floating) != 1:
        raise ScenarioError(f"expected one floating base joint in {HUMANOID_URDF}, found {len(floating)}")
    rng = np.random.default_rng(seed)
    times = np.arange(num_frames) / float(rate_hz)
    Q, moving = _joint_trajectory(plant, times, HUMANOID_CENTRE, 0.35, rng, 0.3)
    s = floating[0].position_start
    roll_pitch_yaw = np.stack([_sines(times, 0.15, rng, 0.2), _sines(times, 0.15, rng, 0.2),
                               _sines(times, 0.6, rng, 0.15)], axis=-1)
    Q[:, s:s + 4] = matrix_to_quat(ScipyRotation.from_euler("xyz", roll_pitch_yaw).as_matrix())
    Q[:, s + 4:s + 7] = np.stack([0.3 * times, 0.05 * np.sin(times), 0.75 + 0.02 * np.sin(2 * times)], axis=-1)
    imus = _imus_on(plant, HUMANOID_IMU_BODIES, rng)
    locked = tuple(sorted(set(range(plant.num_positions())) - set(moving.tolist()) - set(range(s, s + 4))))
    q_start = _start_guess(Q[0], moving, rng, 0.1)
    # The base orientation starts 0.1 rad off too (a rotation about a random axis).
    axis = rng.normal(size=3)
    q_start[s:s + 4] = quat_multiply(Q[0, s:s + 4], rotvec_to_quat(0.1 * axis / np.linalg.norm(axis)))
    return Scenario("humanoid", plant, imus, times, Q, _observe(plant, imus, Q, noise_deg, rng), q_start, locked,
                    moving, s)


SCENARIOS = {"panda": panda_scenario, "humanoid": humanoid_scenario}
