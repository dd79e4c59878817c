"""Test helpers for raw IMUs (gyro + accelerometer only): the demo arm holding its calibration pose, then moving, and
its simulated samples as raw messages. Not a test module (test_estimator_orientation_filter, test_node_estimator)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ros_dofkit.core.estimator.config import EstimatorConfig, ImuConfig
from ros_dofkit.core.estimator.offline import OfflineInputs
from ros_dofkit.core.simulation import SensorNoise, SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.core.spatial import quat_to_matrix, rotation_x, rotation_z
from ros_dofkit.replay.demo_robot import DEMO_CENTRE, DEMO_ENCODER_JOINTS, DEMO_MAX_AMPLITUDE, build_demo_robot
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.parameters import load_parameter_file

ROOT = Path(__file__).resolve().parents[1]

#: Seconds the arm holds its calibration pose before it starts moving, and the ramp into the motion.
HOLD_S = 2.0
RAMP_S = 2.0
#: IMUs of the demo arm that are simulated as raw (no orientation in their messages).
RAW_IMUS = ("upper_arm", "hand")
NOISE = SensorNoise(gyro=0.01, accelerometer=0.05, gyro_bias=0.002, stamp_jitter_s=0.0005, dropout=0.01)
#: The same sensors sampling together (one hub: equal stamps, nothing lost), for the node in synchronized mode.
HUB_NOISE = SensorNoise(gyro=0.01, accelerometer=0.05, gyro_bias=0.002)


class HoldThenMove:
    """The demo motion (or ``sine``, any plant's) entered smoothly from a held pose: q(t) = q_hold + s(t) (q_sine(t)
    - q_hold), s a smoothstep from 0 at HOLD_S to 1 at HOLD_S + RAMP_S. q_hold is the estimator's calibration pose:
    defaults, and the encoder joints at the motion's centre. A floating base is held in its default pose."""

    def __init__(self, plant, seed: int, sine: SineTrajectory | None = None, encoder_joints=DEMO_ENCODER_JOINTS):
        self.plant = plant
        self._sine = sine if sine is not None else SineTrajectory(plant, seed=seed, centre=DEMO_CENTRE,
                                                                  max_amplitude=DEMO_MAX_AMPLITUDE)
        view = plant.articulated_view()
        names = list(view.position_names())
        self.q_hold = np.asarray(plant.default_positions(), dtype=float).copy()
        self._q_indices = np.asarray(view.q_indices, dtype=np.int64)
        self._v_indices = np.asarray(view.v_indices, dtype=np.int64)
        for joint in encoder_joints:
            self.q_hold[view.q_indices[names.index(joint)]] = self._sine.centre[names.index(joint)]

    def evaluate(self, times):
        t = np.atleast_1d(np.asarray(times, dtype=float))
        q_sine, v_sine = self._sine.evaluate(t)
        x = np.clip((t - HOLD_S) / RAMP_S, 0.0, 1.0)[:, None]
        s = x * x * (3.0 - 2.0 * x)
        ds = np.where((x > 0.0) & (x < 1.0), 6.0 * x * (1.0 - x) / RAMP_S, 0.0)
        qi, vi = self._q_indices, self._v_indices  # the articulated coordinates; a floating base stays held
        q = np.repeat(self.q_hold[None], len(t), axis=0)
        v = np.zeros((len(t), self.plant.num_velocities()))
        q[:, qi] += s * (q_sine[:, qi] - self.q_hold[qi])
        v[:, vi] = ds * (q_sine[:, qi] - self.q_hold[qi]) + s * v_sine[:, vi]
        return q, v


def raw_arm(duration_s: float, seed: int = 5, orientation: str = "auto", noise: SensorNoise = NOISE):
    """(robot, EstimatorConfig with RAW_IMUS filtered, SimulationRun, trajectory)."""
    robot = build_demo_robot()
    trajectory = HoldThenMove(robot.plant, seed)
    run = SensorSimulator(robot.plant, robot.imus, DEMO_ENCODER_JOINTS, trajectory=trajectory, noise=noise,
                          seed=seed).run(duration_s)
    imus = tuple(ImuConfig(imu.name, imu.body, imu.topic, imu.mounting, imu.weight, imu.model_instance,
                           orientation=orientation if imu.name in RAW_IMUS else "sensor")
                 for imu in robot.estimator_config.imus)
    config = EstimatorConfig(imus=imus, estimated_joints=robot.estimator_config.estimated_joints,
                             stale_timeout_s=robot.estimator_config.stale_timeout_s)
    return robot, config, run, trajectory


def raw_messages(run):
    """Every sample in stamp order as ``(kind, name, stamp, payload)``: IMUs (kind 0) with payload (quaternion,
    gyro, orientation present, accelerometer); the raw IMUs' quaternion NaN and absent. Encoders: kind 1."""
    messages = []
    for stamp, kind, name, k in run.events():
        if kind == "imu":
            readings = run.imu(name)
            raw = name in RAW_IMUS
            quaternion = np.full(4, np.nan) if raw else np.array(readings.quaternion_wxyz[k])
            messages.append((0, name, stamp, (quaternion, np.array(readings.angular_velocity[k]), not raw,
                                              np.array(readings.linear_acceleration[k]))))
        else:
            messages.append((1, None, stamp, (run.encoders.names, run.encoders.positions[k],
                                              run.encoders.velocities[k])))
    return messages


#: The magnetometer's field in G (tesla): 50 µT, north along G's +y, pointing down (northern hemisphere), so that
#: VQF's 9D earth frame (ENU) is G.
FIELD_G_T = np.array([0.0, 20e-6, -40e-6])


def with_magnetometers(messages, run, names, every: int = 4, noise_t: float = 0.5e-6, seed: int = 3):
    """``messages`` with a magnetometer sample (kind 2, payload: field in S, tesla) of each IMU in ``names`` at
    every ``every``-th of its samples (25 Hz beside 100 Hz gyros), offered just before that IMU sample and stamped
    like it: the field of the simulator's true orientation, R_GS^T FIELD_G_T, plus white noise."""
    rng = np.random.default_rng(seed)
    truth = {name: run.imu(name) for name in names}
    seen, out = dict.fromkeys(names, 0), []
    for message in messages:
        name = message[1]
        if message[0] == 0 and name in seen:
            readings, k = truth[name], seen[name]
            seen[name] += 1
            if k % every == 0:
                R_GS = quat_to_matrix(readings.true_quaternion_wxyz[k])
                out.append((2, name, message[2], R_GS.T @ FIELD_G_T + rng.normal(0.0, noise_t, 3)))
        out.append(message)
    return out


def offline_inputs(messages, names) -> OfflineInputs:
    """``messages`` as one window of the estimator's batch inputs (the same values the streaming calls get);
    magnetometer samples (kind 2) go to the ``field_*`` arrays, offered where they are in ``messages``."""
    index = {name: i for i, name in enumerate(names)}
    offered = np.cumsum([m[0] != 2 for m in messages])  # inputs offered up to each message
    fields = [(m, int(offered[k])) for k, m in enumerate(messages) if m[0] == 2]
    messages = [m for m in messages if m[0] != 2]
    imu = [m for m in messages if m[0] == 0]
    js = [m for m in messages if m[0] == 1]
    kind = np.array([m[0] for m in messages], dtype=np.int64)
    row = np.empty(len(messages), dtype=np.int64)
    row[kind == 0] = np.arange(len(imu))
    row[kind == 1] = np.arange(len(js))
    return OfflineInputs(
        kind=kind, row=row, imu_sensor=np.array([index[m[1]] for m in imu], dtype=np.int64),
        imu_stamp=np.array([m[2] for m in imu]), imu_quaternion_wxyz=np.array([m[3][0] for m in imu]).reshape(-1, 4),
        imu_angular_velocity=np.array([m[3][1] for m in imu]).reshape(-1, 3),
        imu_orientation_present=np.array([m[3][2] for m in imu], dtype=bool),
        imu_angular_velocity_present=np.ones(len(imu), bool),
        js_stamp=np.array([m[2] for m in js]), js_names=[tuple(m[3][0]) for m in js],
        js_positions=[np.array(m[3][1]) for m in js], js_velocities=[np.array(m[3][2]) for m in js],
        imu_linear_acceleration=np.array([m[3][3] for m in imu]).reshape(-1, 3),
        **({} if not fields else dict(
            field_sensor=np.array([index[m[1]] for m, _ in fields], dtype=np.int64),
            field_stamp=np.array([m[2] for m, _ in fields]), field_vector=np.array([m[3] for m, _ in fields]),
            field_position=np.array([p for _, p in fields], dtype=np.int64))))


def joint_errors_deg(results, run, joints) -> np.ndarray:
    """|estimate - truth| (deg) of the named articulated coordinates at every result (truth interpolated)."""
    names = list(run.truth_names)
    columns = [names.index(j) for j in joints]
    stamps = np.array([r.stamp for r in results])
    truth = np.stack([np.interp(stamps, run.times, run.truth_positions[:, c]) for c in columns], axis=1)
    position_names = list(results[0].position_names)
    estimate = np.array([[r.q[position_names.index(j)] for j in joints] for r in results])
    return np.degrees(np.abs(np.vectorize(math.remainder)(estimate - truth, 2 * math.pi)))


def raw_lower_body(seconds: float, noise: SensorNoise = NOISE, seed: int = 4):
    """config/lower_body.yaml's model and seven IMUs, every one raw (``orientation: filter``, a VQF each, no
    magnetometer), holding the calibration pose for HOLD_S then moving every joint (the floating base held; joint
    limits off): ``(setup, run, true mountings {IMU: R_BS})``. The simulated pelvis IMU's -z is vertical, not forward:
    no heading_reference."""
    values = load_parameter_file(ROOT / "config" / "lower_body.yaml")
    for name in ("heading_reference", "heading_axis"):
        values.pop(name)
    values["use_joint_limits"] = False
    for name in values["imu_names"]:
        values[f"imus.{name}.orientation"] = "filter"
    setup = ReplaySetup.from_parameters(values)
    names = list(values["imu_names"])
    mountings = {name: rotation_z(0.7 * k) @ rotation_x(0.4 * (k % 3)) for k, name in enumerate(names)}
    imus = tuple(SimulatedImu(name, values[f"imus.{name}.body"], mountings[name]) for name in names)
    plant = setup.plant
    trajectory = HoldThenMove(plant, seed, sine=SineTrajectory(plant, seed=seed, max_amplitude=0.5,
                                                               max_translation=0.05), encoder_joints=())
    run = SensorSimulator(plant, imus, trajectory=trajectory, noise=noise, seed=seed).run(seconds)
    return setup, run, mountings
