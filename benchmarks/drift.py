"""Heading drift must not become joint error: a long simulated session, per-frame IK beside fusion on the chain.

Where you are: benchmarks/ -- a script that prints numbers; not a test (test/test_bench_drift.py runs it briefly,
test/test_estimator_heading.py asserts the method). Run

    ./run bench drift [--minutes 10] [--models arm lower_body lower_body_gait] [--seed 0]
                      [--steps-per-min 0.5 --step-deg 10]

Scenarios (``ros_dofkit.core.simulation``, 100 Hz IMUs, every IMU's heading a random walk of
``--drift`` deg/min (3 by default: sigma_psi = 3/sqrt(60) deg/sqrt(s)), orientation noise 0.5 deg, gyro noise
0.01 rad/s and a 0.005 rad/s gyro bias that walks):
* ``arm``: the demo's 7-dof arm, 4 IMUs on links 3, 5, 6, 7, encoders on joints 1-2 (50 Hz), joints 3-7 estimated;
* ``lower_body``: config/lower_body.yaml's model (pelvis on a floating base, 3-dof hips, knees, 2-dof ankles),
  7 IMUs, every joint estimated, moving along slow sines (0.05-0.35 Hz, pelvis translation 0.05 m): the hip
  centres accelerate horizontally by ~0.1 m/s^2 RMS;
* ``lower_body_gait``: the same model and IMUs walking on a treadmill (``core.simulation.GaitTrajectory``: joint
  angles and pelvis motion of normal gait at 0.9 strides/s, sources in ``LOWER_BODY_GAIT``): the hip centres
  accelerate by ~1 m/s^2 RMS, as in a lower-body IMU suit's recordings. A leg's heading behind its 3-dof hip is
  observed only through that acceleration (``core.estimator.heading``), so both sessions are reported.

Rows, side by side on the same inputs:
* ``per-frame IK``: today's estimator, every IMU orientation trusted (OpenSense's model);
* ``fusion (orientations)``: the same estimator with ``heading_estimation`` on (``core.estimator.heading``);
* ``fusion (raw IMUs)``: every IMU raw (gyro + accelerometer through the estimator's VQF,
  ``core.estimator.orientation_filter``, issue 19.1), each filter's initial heading aligned with the model as a
  calibration would, then the same fusion; a raw IMU's heading drifts with its gyro bias, so the fusion assumes
  the walk of :func:`raw_drift_deg_per_min`;
* ``imumocap``: x-io's imumocap 1.3.1 where it applies (a link's rotation is its IMU's times a calibrated offset,
  no optimisation, no joint model): on the lower body, knee flexion (its ``Joint`` angle, the model and sign of
  benchmarks/ximu3_imumocap_reference.py), with the IMU offsets set to the simulated mountings.

Printed: joint-angle RMS (deg) per estimated joint per minute for each row; PASS/MISS for "every estimated
joint's RMS < 2 deg in every minute" (fusion from orientations), and for real time: the estimator's per-cycle
cost in its streaming path (``Estimator.process_imu`` / ``process_joint_state``, one message at a time, as the
node calls it) with the 7 IMUs of the lower body at 100 Hz, as a ratio to the 10 ms period, on one core.
"""

from __future__ import annotations

if __name__ == "__main__":  # only when run as the benchmark: importing this module must not change the environment
    import single_core  # this script's folder is first on sys.path

    single_core.limit_threads()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.heading_bound import MONTE_CARLO_WALKS, joint_bounds, session_information  # noqa: E402
from benchmarks.single_core import pin_to_one_cpu  # noqa: E402
from benchmarks.ximu3_imumocap_reference import build_model  # noqa: E402
from ros_dofkit.core.estimator.config import EstimatorConfig, HeadingEstimation, ImuConfig  # noqa: E402
from ros_dofkit.core.estimator.estimator import Estimator  # noqa: E402
from ros_dofkit.core.estimator.offline import OfflineInputs  # noqa: E402
from ros_dofkit.core.estimator.orientation_filter import (  # noqa: E402
    FilterSettings,
    OrientationFilter,
    heading_offset,
)
from ros_dofkit.core.estimator.robot import build_plant  # noqa: E402
from ros_dofkit.core.simulation import (  # noqa: E402
    STANDARD_GRAVITY,
    GaitTrajectory,
    SensorNoise,
    SensorSimulator,
    SimulatedImu,
    SineTrajectory,
)
from ros_dofkit.core.spatial import quat_to_matrix, rotation_x, rotation_z  # noqa: E402
from ros_dofkit.replay.demo_robot import (  # noqa: E402
    DEMO_CENTRE,
    DEMO_ENCODER_JOINTS,
    DEMO_MAX_AMPLITUDE,
    build_demo_robot,
)
from ros_dofkit.ros.parameters import load_parameter_file, model_specs_from_parameters  # noqa: E402

LOWER_BODY_CONFIG = REPO / "config" / "lower_body.yaml"
GOAL_DEG = 2.0
#: Samples after a raw filter's first output at which its heading is aligned with the truth (its warm-up).
RAW_ALIGNMENT_SAMPLE = 5
#: Orientation noise (deg per axis) the fusion assumes: twice the simulated 0.5 deg.
ORIENTATION_NOISE_DEG = 1.0
PERIOD_S = 0.01


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A plant, its simulated session and the estimator configuration (heading estimation off)."""

    name: str
    plant: object
    simulator: SensorSimulator
    config: EstimatorConfig


def session_noise(drift_deg_per_min: float, steps_per_min: float = 0.0, step_deg: float = 0.0) -> SensorNoise:
    """The sensors of a long session: white noise as the demo's default, heading random walk, gyro bias walk, and
    optionally heading steps (magnetic disturbances) at Poisson times."""
    return SensorNoise(orientation_deg=0.5, gyro=0.01, accelerometer=0.05, gyro_bias=0.005,
                       heading_random_walk_deg_per_sqrt_s=drift_deg_per_min / math.sqrt(60.0),
                       gyro_bias_random_walk=1e-4, encoder_noise=2e-4, encoder_resolution=2 * math.pi / 2**14,
                       heading_steps_per_min=steps_per_min, heading_step_deg=step_deg)


def arm_scenario(noise: SensorNoise, seed: int) -> Scenario:
    robot = build_demo_robot()
    trajectory = SineTrajectory(robot.plant, seed=seed, centre=DEMO_CENTRE, max_amplitude=DEMO_MAX_AMPLITUDE)
    simulator = SensorSimulator(robot.plant, robot.imus, DEMO_ENCODER_JOINTS, trajectory=trajectory, noise=noise,
                                encoder_rate_hz=50.0, seed=seed)
    return Scenario("arm", robot.plant, simulator, robot.estimator_config)


def lower_body_scenario(noise: SensorNoise, seed: int, gait: bool = False) -> Scenario:
    """config/lower_body.yaml's model and IMUs with known mountings (each IMU turned on its segment), moving along
    slow sines (0.05-0.35 Hz, pelvis translation 0.05 m: the hip centres accelerate by ~0.1 m/s^2) or, with
    ``gait``, walking (``core.simulation.GaitTrajectory``: hip centres ~1 m/s^2)."""
    values = load_parameter_file(LOWER_BODY_CONFIG)
    plant = build_plant(model_specs_from_parameters(values))
    names = list(values["imu_names"])
    mountings = [rotation_z(0.7 * k) @ rotation_x(0.4 * (k % 3)) for k in range(len(names))]
    imus = tuple(SimulatedImu(name, values[f"imus.{name}.body"], R) for name, R in zip(names, mountings,
                                                                                         strict=True))
    trajectory = GaitTrajectory(plant, seed=seed) if gait else SineTrajectory(plant, seed=seed, max_amplitude=0.5,
                                                                             max_translation=0.05)
    simulator = SensorSimulator(plant, imus, trajectory=trajectory, noise=noise, seed=seed)
    config = EstimatorConfig(imus=tuple(ImuConfig(imu.name, imu.body, mounting=imu.R_BS, position=imu.p_BS)
                                        for imu in imus),
                             estimated_joints={"lower_body": "all"}, use_joint_limits=True)
    return Scenario("lower_body_gait" if gait else "lower_body", plant, simulator, config)


def lower_body_gait_scenario(noise: SensorNoise, seed: int) -> Scenario:
    return lower_body_scenario(noise, seed, gait=True)


SCENARIOS = {"arm": arm_scenario, "lower_body": lower_body_scenario, "lower_body_gait": lower_body_gait_scenario}


def simulation_window(run, imu_names) -> OfflineInputs:
    """Every sample of a :class:`~ros_dofkit.core.simulation.SimulationRun` as one offline window, in the order of
    ``run.events()`` (stamp order; ties: encoders first, then IMUs in configuration order)."""
    stamps, order, sensor, quaternion, gyro, accel = [], [], [], [], [], []
    for i, name in enumerate(imu_names):
        readings = run.imu(name)
        stamps.append(readings.stamps)
        order.append(np.full(len(readings.stamps), 1 + i))
        sensor.append(np.full(len(readings.stamps), i, dtype=np.int64))
        quaternion.append(readings.quaternion_wxyz)
        gyro.append(readings.angular_velocity)
        accel.append(readings.linear_acceleration)
    imu_stamp = np.concatenate(stamps)
    encoders = run.encoders
    js_stamp = np.asarray(encoders.stamps) if encoders is not None else np.zeros(0)
    all_stamps = np.concatenate([js_stamp, imu_stamp])
    tie = np.concatenate([np.zeros(len(js_stamp))] + order)
    sequence = np.lexsort((np.arange(len(all_stamps)), tie, all_stamps))
    is_imu = sequence >= len(js_stamp)
    kind = np.where(is_imu, 0, 1).astype(np.int64)
    # rows: the IMU arrays and joint states in offering order
    imu_rows = sequence[is_imu] - len(js_stamp)
    js_rows = sequence[~is_imu]
    row = np.empty(len(sequence), dtype=np.int64)
    row[is_imu] = np.arange(len(imu_rows))
    row[~is_imu] = np.arange(len(js_rows))
    n = len(imu_rows)
    return OfflineInputs(
        kind=kind, row=row, imu_sensor=np.concatenate(sensor)[imu_rows], imu_stamp=imu_stamp[imu_rows],
        imu_quaternion_wxyz=np.concatenate(quaternion)[imu_rows], imu_angular_velocity=np.concatenate(gyro)[imu_rows],
        imu_orientation_present=np.ones(n, bool), imu_angular_velocity_present=np.ones(n, bool),
        imu_linear_acceleration=np.concatenate(accel)[imu_rows], imu_linear_acceleration_present=np.ones(n, bool),
        js_stamp=js_stamp[js_rows], js_names=[tuple(encoders.names)] * len(js_rows) if encoders is not None else [],
        js_positions=[encoders.positions[k] for k in js_rows] if encoders is not None else [],
        js_velocities=[encoders.velocities[k] for k in js_rows] if encoders is not None else [])


def acceleration_noise(noise: SensorNoise) -> float:
    """The fusion's ``acceleration_noise`` (m/s^2 per horizontal axis) for the simulated sensors: the accelerometer's
    white noise and the tilt error the fusion assumes (:data:`ORIENTATION_NOISE_DEG`, twice the simulated) times g,
    which turns gravity into a horizontal error. Measured against the simulator's truth (the joint-centre
    measurement's scatter, both lower-body sessions), the simulated IMUs' own error is ~0.1 m/s^2: this keeps the
    same 2x margin as the orientation noise (0.18 m/s^2 for the session's sensors; the default 0.3 is for real
    IMUs on skin, whose lever arms and soft tissue add to it)."""
    return math.hypot(noise.accelerometer, STANDARD_GRAVITY * math.radians(ORIENTATION_NOISE_DEG))


def raw_drift_deg_per_min(noise: SensorNoise) -> float:
    """Heading random walk (deg per minute) the fusion assumes for a raw IMU. Without a magnetometer its heading
    turns at the vertical component of its gyro bias, whose RMS over the bias's random direction is
    ``noise.gyro_bias`` / sqrt(3); the walk's one-minute step is one minute of that turn (9.92 deg/min for 0.005
    rad/s), what a user reads off the gyro's data sheet. Offsets relative to a reference walk with it too
    (``heading.reference_walk``: a leg against the pelvis at sqrt(2) times this). A ramp is not a random walk: this
    only matches its one-minute growth. The former 20 deg/min (the whole bias, 17.2 deg/min, as if vertical),
    doubled for relative offsets by the reference's walk, made the raw rows worse (README, "Heading drift")."""
    return math.degrees(noise.gyro_bias / math.sqrt(3.0)) * 60.0


def with_heading(config: EstimatorConfig, drift_deg_per_min: float, noise: SensorNoise,
                 acceleration: float | None = None) -> EstimatorConfig:
    """``config`` with heading estimation on: the simulated drift, :data:`ORIENTATION_NOISE_DEG` and
    ``acceleration`` noise (None: :func:`acceleration_noise` of the simulated sensors ``noise``)."""
    return dataclasses.replace(config, heading_estimation=HeadingEstimation(
        enabled=True, drift_deg_per_min=drift_deg_per_min, orientation_noise_deg=ORIENTATION_NOISE_DEG,
        acceleration_noise=acceleration_noise(noise) if acceleration is None else acceleration))


def raw_imu_config(config: EstimatorConfig, run, drift_deg_per_min: float, noise: SensorNoise,
                   acceleration: float | None = None) -> EstimatorConfig:
    """``config`` with every IMU raw (``orientation="filter"``: VQF on gyro + accelerometer,
    ``core.estimator.orientation_filter``) and heading estimation on. Each filter's initial heading is aligned with
    the model as ``Estimator.calibrate`` would: the turn about the vertical from the filter's output to the true
    orientation after its warm-up (:data:`RAW_ALIGNMENT_SAMPLE`). Without a magnetometer a raw IMU's heading drifts
    with its gyro bias (degrees per minute): the filter's random walk is set to ``drift_deg_per_min``."""
    imus = []
    for imu in config.imus:
        readings = run.imu(imu.name)
        settings = FilterSettings(sample_time_s=PERIOD_S)
        filtered = OrientationFilter(settings).run(readings.stamps, readings.angular_velocity,
                                                   readings.linear_acceleration)
        k = int(np.flatnonzero(filtered.present)[0]) + RAW_ALIGNMENT_SAMPLE
        psi = heading_offset(quat_to_matrix(filtered.quaternion_wxyz[k]), quat_to_matrix(
            readings.true_quaternion_wxyz[k]))
        imus.append(dataclasses.replace(imu, orientation="filter", filter=dataclasses.replace(
            settings, heading_offset=psi)))
    return dataclasses.replace(with_heading(config, drift_deg_per_min, noise, acceleration), imus=tuple(imus))


def joint_errors(scenario: Scenario, run, result, estimator) -> tuple:
    """(names, minute (C,), error (C, joints) deg) of the estimated articulated coordinates against the truth
    on the simulation's grid."""
    estimated = np.flatnonzero(estimator.setup.estimated)
    names = [estimator.setup.art_names[k] for k in estimated]
    index = np.clip(np.round((result.stamp - run.times[0]) * scenario.simulator.imu_rate_hz).astype(int), 0,
                    len(run.times) - 1)
    truth = run.truth_positions[index][:, estimated]
    error = np.degrees(result.q[:, estimator.setup.art_q[estimated]] - truth)
    return names, ((result.stamp - run.times[0]) // 60.0).astype(int), error


def rms_per_minute(minute, error, minutes: int) -> np.ndarray:
    """(minutes, joints) RMS; the one cycle at exactly t = minutes * 60 s counts in the last minute."""
    minute = np.minimum(minute, minutes - 1)
    return np.array([np.sqrt(np.mean(error[minute == m] ** 2, axis=0)) for m in range(minutes)])


def print_table(label: str, names, table, goal: float | None = None) -> None:
    print(f"  {label}: joint-angle RMS [deg] per minute")
    print("    " + "minute".ljust(8) + "".join(name[-18:].rjust(19) for name in names))
    for m, row in enumerate(table):
        print("    " + str(m + 1).ljust(8) + "".join(f"{value:19.3f}" for value in row))
    if goal is not None:
        worst = float(np.max(table))
        print(f"    worst minute of any joint: {worst:.3f} deg (goal < {goal:g} deg)")


def print_bound(bound, fusion_table) -> None:
    """The information bound of the session (``benchmarks.heading_bound``) beside the fusion's worst minutes."""
    print("  information bound (benchmarks/heading_bound.py: the correctly specified Kalman filter, causal, and its "
          "RTS smoother, two-sided, on the information of the simulated sensors)")
    print("    heading std, RMS over the session [deg], causal / smoothed: " + ", ".join(
        f"{name} {bound.heading['causal'][name]:.2f} / {bound.heading['smoothed'][name]:.2f}"
        for name in bound.heading["causal"]))
    worst = np.max(fusion_table, axis=0)
    print("    worst minute per joint [deg], fusion / expected RMS at the causal bound / at the smoothed bound:")
    for name, fused, causal, smoothed in zip(bound.names, worst, bound.causal, bound.smoothed, strict=True):
        print(f"      {name[-24:]:24s} {fused:6.2f} / {causal:5.2f} / {smoothed:5.2f}")
    for label, draws in (("over walks and noise", bound.walks), ("on this session's walk", bound.session)):
        print(f"    worst minute of any joint, {MONTE_CARLO_WALKS} draws {label} (median, 90 %) [deg]: causal "
              f"{draws['causal'][0]:.2f} ({draws['causal'][1]:.2f}), smoothed {draws['smoothed'][0]:.2f} "
              f"({draws['smoothed'][1]:.2f}); fusion {float(np.max(fusion_table)):.2f}")


def bound_verdict(bound) -> str:
    """The verdict's note on the bound: the causal bound's worst minute on this session's walk (median over the
    noise), and whether any causal estimator could meet the goal on this motion."""
    causal, smoothed = bound.session["causal"][0], bound.session["smoothed"][0]
    note = f"; causal information bound {causal:.2f} deg worst minute (smoothed {smoothed:.2f})"
    if causal >= GOAL_DEG:
        note += f": no causal estimator meets {GOAL_DEG:g} deg on this motion"
    return note


def run_scenario(scenario: Scenario, minutes: float, drift: float, acceleration: float | None = None) -> dict:
    """Simulate once, estimate with every row (``acceleration``: the fusion's acceleration noise, None: from the
    sensors); returns the tables and the fusion's per-cycle timing."""
    started = time.perf_counter()
    run = scenario.simulator.run(minutes * 60.0)
    simulated = time.perf_counter() - started
    window = simulation_window(run, scenario.config.imu_names)
    noise = scenario.simulator.noise
    whole_minutes = max(1, int(math.ceil(minutes)))
    tables = {}
    for label, config in (("per-frame IK", scenario.config),
                          ("fusion (orientations)", with_heading(scenario.config, drift, noise, acceleration)),
                          ("fusion (raw IMUs)", raw_imu_config(scenario.config, run, raw_drift_deg_per_min(noise),
                                                               noise, acceleration))):
        estimator = Estimator(scenario.plant, config)
        started = time.perf_counter()
        result = estimator.run(window)
        elapsed = time.perf_counter() - started
        names, minute, error = joint_errors(scenario, run, result, estimator)
        tables[label] = (names, rms_per_minute(minute, error, whole_minutes), elapsed / max(len(result.stamp), 1))
        if label == "fusion (orientations)":
            tables["heading"] = estimator.heading_estimates()
            info = session_information(scenario.plant, config, run, noise)
            tables["bound"] = joint_bounds(info, drift, PERIOD_S)
            tables["reference"] = info.reference
    tables["run"] = run
    tables["simulated_s"] = simulated
    return tables


def streaming_cycle_cost(scenario: Scenario, config: EstimatorConfig, seconds: float) -> float:
    """Mean seconds per cycle of the streaming entry points (one message at a time) with ``config``, over
    ``seconds`` of the scenario's input (best of two passes; the first also warms up)."""
    run = scenario.simulator.run(seconds)
    window = simulation_window(run, scenario.config.imu_names)
    estimator = Estimator(scenario.plant, config)
    encoders = run.encoders
    messages = []
    for k in range(len(window.kind)):
        r = window.row[k]
        if window.kind[k] == 0:
            messages.append((0, scenario.config.imu_names[window.imu_sensor[r]], window.imu_stamp[r],
                             window.imu_quaternion_wxyz[r], window.imu_angular_velocity[r]))
        else:
            messages.append((1, encoders.names, window.js_stamp[r], window.js_positions[r], window.js_velocities[r]))
    best = math.inf
    for _ in range(2):
        estimator.reset()
        cycles = 0
        started = time.perf_counter()
        for kind, name, stamp, a, b in messages:
            if kind == 0:
                cycles += len(estimator.process_imu(name, stamp, a, b)[1])
            else:
                cycles += len(estimator.process_joint_state(name, a, b, stamp=stamp)[1])
        best = min(best, (time.perf_counter() - started) / max(cycles, 1))
    return best


def imumocap_knees(scenario: Scenario, run):
    """imumocap 1.3.1's knee flexion (deg) on the lower body's simulated IMUs: its ``Link`` model of
    benchmarks/ximu3_imumocap_reference.py (link frames = the URDF's body frames in the neutral pose), each link's
    IMU offset set to the simulated mounting R_BS (what its calibration would find), then
    ``set_pose_from_imus`` per sample. Returns (names, error (T, 2) deg against the truth) or a reason string."""
    try:
        imumocap = importlib.import_module("imumocap")
    except ImportError as error:
        return f"not available: {error} (the bench extra has imumocap 1.3.1)"
    root, links, knees = build_model(imumocap)
    for imu in scenario.simulator.imus:
        links[imu.name].imu = imumocap.Matrix(rotation=np.asarray(imu.R_BS))
    streams = {readings.name: readings for readings in run.imus}
    index = streams["pelvis"].sample_index
    for readings in run.imus:
        index = np.intersect1d(index, readings.sample_index)
    rotations = {name: quat_to_matrix(readings.quaternion_wxyz[np.searchsorted(readings.sample_index, index)])
                 for name, readings in streams.items()}
    flexion = np.empty((len(index), 2))
    for k in range(len(index)):
        imumocap.set_pose_from_imus(root, {name: imumocap.Matrix(rotation=R[k]) for name, R in rotations.items()})
        flexion[k] = [knees["left"].get()[0], knees["right"].get()[0]]
    names = ["left_knee_flexion", "right_knee_flexion"]
    truth = run.truth_positions[index][:, [run.truth_names.index(name) for name in names]]
    return names, run.times[index], flexion - np.degrees(truth)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--drift", type=float, default=3.0, help="heading random walk per IMU, deg per minute")
    parser.add_argument("--models", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps-per-min", type=float, default=0.0,
                        help="heading steps (magnetic disturbances) per IMU per minute (default none)")
    parser.add_argument("--step-deg", type=float, default=10.0, help="size of a heading step, deg")
    parser.add_argument("--acceleration-noise", type=float, default=None,
                        help="the fusion's heading_estimation.acceleration_noise, m/s^2 (default: from the simulated "
                             "sensors, see acceleration_noise())")
    parser.add_argument("--timing-seconds", type=float, default=20.0,
                        help="seconds of lower-body input for the streaming per-cycle cost")
    args = parser.parse_args(argv)
    pin_to_one_cpu()
    noise = session_noise(args.drift, args.steps_per_min, args.step_deg)
    steps = f", heading steps of {args.step_deg:g} deg {args.steps_per_min:g}/min" if args.steps_per_min else ""
    print(f"drift benchmark: {args.minutes:g} min at 100 Hz, heading random walk {args.drift:g} deg/min per IMU "
          f"(sigma_psi {args.drift / math.sqrt(60):.3f} deg/sqrt(s)){steps}, seed {args.seed}, one core; fusion: "
          f"orientation noise {ORIENTATION_NOISE_DEG:g} deg, acceleration noise "
          f"{acceleration_noise(noise) if args.acceleration_noise is None else args.acceleration_noise:.3f} m/s^2, "
          f"raw IMUs' heading walk {raw_drift_deg_per_min(noise):.2f} deg/min")
    verdicts = []
    for name in args.models:
        scenario = SCENARIOS[name](noise, args.seed)
        tables = run_scenario(scenario, args.minutes, args.drift, args.acceleration_noise)
        run = tables["run"]
        print(f"\n{name}: {len(scenario.config.imus)} IMUs, simulated in {tables['simulated_s']:.1f} s")
        for label in ("per-frame IK", "fusion (orientations)", "fusion (raw IMUs)"):
            names, table, per_cycle = tables[label]
            print_table(f"{label} (estimator {per_cycle * 1e6:.0f} us per cycle, batch)", names, table,
                        GOAL_DEG if label.startswith("fusion") else None)
        bound = tables["bound"]
        print_bound(bound, tables["fusion (orientations)"][1])
        for label, short in (("fusion (orientations)", "fusion"), ("fusion (raw IMUs)", "fusion from raw IMUs")):
            worst = float(np.max(tables[label][1]))
            detail = f"worst {worst:.3f} deg"
            if label == "fusion (orientations)":
                detail += bound_verdict(bound)
            verdicts.append((f"{name}: every estimated joint < {GOAL_DEG:g} deg RMS in every minute ({short})",
                             worst < GOAL_DEG, detail))
        if name == "arm":
            print("  imumocap: not applicable (it models human segment chains: no encoders, no 1-dof arm joints)")
        else:
            knees = imumocap_knees(scenario, run)
            if isinstance(knees, str):
                print(f"  imumocap: {knees}")
            else:
                knee_names, stamps, error = knees
                minute = ((stamps - run.times[0]) // 60.0).astype(int)
                print_table("imumocap 1.3.1 (knee flexion, its per-frame link rotations)", knee_names,
                            rms_per_minute(minute, error, max(1, int(math.ceil(args.minutes)))))
        reference = tables["reference"]
        print("  heading offsets at the end, estimated vs simulated [deg] (std; observable)"
              + (f", relative to the reference {reference}:" if reference else ":"))
        held = run.imu(reference).heading_error[-1] if reference else 0.0
        for readings in run.imus:
            estimate = tables["heading"][readings.name]
            print(f"    {readings.name:18s} {math.degrees(estimate['heading_offset_rad']):8.2f}  vs "
                  f"{math.degrees(readings.heading_error[-1] - held):8.2f}   "
                  f"({math.degrees(estimate['heading_std_rad']):.2f}; {'yes' if estimate['observable'] else 'no'})")
    lower_body = lower_body_scenario(noise, args.seed)
    cost = streaming_cycle_cost(lower_body, with_heading(lower_body.config, args.drift, noise, args.acceleration_noise),
                                args.timing_seconds)
    peer = streaming_cycle_cost(lower_body, lower_body.config, args.timing_seconds)
    ratio = cost / PERIOD_S
    print(f"\nreal time: streaming per-cycle cost with heading estimation, lower body (7 IMUs, 100 Hz): "
          f"{cost * 1e6:.0f} us = {ratio:.3f} of the 10 ms period ({cost / peer:.2f}x per-frame IK's "
          f"{peer * 1e6:.0f} us in the same run)")
    verdicts.append(("real time at 100 Hz with 7 IMUs on one core (cost / period < 1)", ratio < 1.0,
                     f"ratio {ratio:.3f}"))
    print()
    for text, ok, detail in verdicts:
        print(f"{'PASS' if ok else 'MISS'}  {text}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
