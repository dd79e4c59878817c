"""Orientation filters for raw IMUs compared on the simulator: VQF (pip ``vqf``, the estimator's choice) vs x-io's
imufusion (Fusion AHRS), accuracy and cost per sample.

Where you are: benchmarks/ -- a script that prints numbers; not a test (test/test_bench_smoke.py runs it short).
Run ``./run bench orientation_filters [--duration 600] [--rate 100] [--seeds 3]`` (imufusion is a benchmark extra,
requirements/bench.txt).

Input: the demo arm's four IMUs moving along the demo motion, raw gyro and accelerometer from
``ros_dofkit.core.simulation`` at each IMU's mounting position (lever arm included): gyro noise 0.01 rad/s,
accelerometer noise 0.05 m/s^2, a constant gyro bias of 0.005 rad/s per IMU (random direction), no magnetometer
(6D). Each filter runs with its default settings over every IMU's samples.

Printed per filter, over IMUs and seeds (min-max): inclination RMS (angle between the estimated and the true vertical
in the sensor frame, after the first 5 s), heading drift after the whole run (change of the heading difference to
the truth since 5 s; without a magnetometer neither filter observes heading), and the cost per sample (µs; one
core; wall clock, so compare the ratio to imufusion measured in the same run).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.single_core import limit_threads, pin_to_one_cpu  # noqa: E402

if __name__ == "__main__":
    limit_threads()

import numpy as np  # noqa: E402
from vqf import VQF, offlineVQF  # noqa: E402

from ros_dofkit.core.estimator.orientation_filter import OrientationFilter, heading_offset  # noqa: E402
from ros_dofkit.core.simulation import STANDARD_GRAVITY, SensorNoise, SensorSimulator, SineTrajectory  # noqa: E402
from ros_dofkit.core.spatial import quat_to_matrix  # noqa: E402
from ros_dofkit.replay.demo_robot import DEMO_CENTRE, DEMO_MAX_AMPLITUDE, build_demo_robot  # noqa: E402

NOISE = SensorNoise(gyro=0.01, accelerometer=0.05, gyro_bias=0.005)
SETTLE_S = 5.0


def simulate(duration_s: float, rate_hz: float, seed: int):
    robot = build_demo_robot()
    trajectory = SineTrajectory(robot.plant, seed=seed, centre=DEMO_CENTRE, max_amplitude=DEMO_MAX_AMPLITUDE)
    return SensorSimulator(robot.plant, robot.imus, trajectory=trajectory, noise=NOISE, imu_rate_hz=rate_hz,
                           seed=seed).run(duration_s)


# ---------------------------------------------------------------------------------------------- the filters
def ours(stamps, gyro, accel, period):
    """ros_dofkit's raw-IMU path: orientation_filter.OrientationFilter over the window (VQF underneath)."""
    return OrientationFilter().run(stamps, gyro, accel).quaternion_wxyz


def vqf_per_sample(stamps, gyro, accel, period):
    f = VQF(period)
    out = np.empty((len(gyro), 4))
    for k in range(len(gyro)):
        f.update(gyro[k], accel[k])
        out[k] = f.getQuat6D()
    return out


def vqf_batch(stamps, gyro, accel, period):
    return VQF(period).updateBatch(gyro, accel)["quat6D"]


def vqf_offline(stamps, gyro, accel, period):
    return offlineVQF(gyro, accel, None, period)["quat6D"]


def imufusion_per_sample(stamps, gyro, accel, period):
    import imufusion  # a benchmark extra (requirements/bench.txt)

    ahrs = imufusion.Ahrs()
    ahrs.set_sample_period(period)
    gyro_deg, accel_g = np.degrees(gyro), accel / STANDARD_GRAVITY  # Fusion's units
    out = np.empty((len(gyro), 4))
    for k in range(len(gyro)):
        ahrs.update_no_magnetometer(gyro_deg[k], accel_g[k])
        out[k] = ahrs.get_quaternion()
    return out


FILTERS = (
    ("vqf via orientation_filter (window)", ours),
    ("vqf VQF.update (per sample)", vqf_per_sample),
    ("vqf VQF.updateBatch", vqf_batch),
    ("vqf offlineVQF", vqf_offline),
    ("imufusion Ahrs.update_no_magnetometer", imufusion_per_sample),
)


# ---------------------------------------------------------------------------------------------- accuracy
def inclination_rms_deg(q, q_true) -> float:
    up = quat_to_matrix(q)[:, 2, :]
    up_true = quat_to_matrix(q_true)[:, 2, :]
    return float(np.sqrt(np.mean(np.degrees(np.arccos(np.clip(np.sum(up * up_true, axis=1), -1.0, 1.0))) ** 2)))


def heading_drift_deg(q, q_true) -> float:
    first = heading_offset(quat_to_matrix(q[0]), quat_to_matrix(q_true[0]))
    last = heading_offset(quat_to_matrix(q[-1]), quat_to_matrix(q_true[-1]))
    return abs(math.degrees(math.remainder(last - first, 2 * math.pi)))


def measure(runs, period):
    """{filter: (inclination RMS list, heading drift list, seconds, samples)} over every IMU of every run."""
    results = {name: ([], [], 0.0, 0) for name, _ in FILTERS}
    for run in runs:
        for readings in run.imus:
            stamps = np.ascontiguousarray(readings.stamps)
            gyro = np.ascontiguousarray(readings.angular_velocity)
            accel = np.ascontiguousarray(readings.linear_acceleration)
            settled = np.flatnonzero(stamps > stamps[0] + SETTLE_S)
            for name, function in FILTERS:
                started = time.perf_counter()
                q = function(stamps, gyro, accel, period)
                elapsed = time.perf_counter() - started
                inclination, drift, seconds, samples = results[name]
                inclination.append(inclination_rms_deg(q[settled], readings.true_quaternion_wxyz[settled]))
                drift.append(heading_drift_deg(q[settled], readings.true_quaternion_wxyz[settled]))
                results[name] = (inclination, drift, seconds + elapsed, samples + len(stamps))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="simulated seconds per seed (default 600)")
    parser.add_argument("--rate", type=float, default=100.0, help="IMU rate in Hz (default 100)")
    parser.add_argument("--seeds", type=int, default=3, help="simulated sessions (default 3)")
    args = parser.parse_args(argv)
    runs = [simulate(args.duration, args.rate, seed) for seed in range(args.seeds)]
    pin_to_one_cpu()
    results = measure(runs, 1.0 / args.rate)
    imus = len(runs[0].imus)
    print(f"demo arm, {imus} raw IMUs x {args.seeds} seeds, {args.duration:g} s at {args.rate:g} Hz; gyro noise "
          f"{NOISE.gyro} rad/s, accelerometer {NOISE.accelerometer} m/s^2, gyro bias {NOISE.gyro_bias} rad/s; 6D")
    print(f"{'filter':40s} {'inclination RMS (deg)':>22s} {'heading drift (deg)':>20s} {'us/sample':>10s} "
          f"{'x imufusion':>12s}")
    peer = results["imufusion Ahrs.update_no_magnetometer"]
    peer_cost = peer[2] / peer[3]
    for name, (inclination, drift, seconds, samples) in results.items():
        cost = seconds / samples
        print(f"{name:40s} {min(inclination):9.2f} - {max(inclination):5.2f}      {min(drift):8.1f} - {max(drift):5.1f}"
              f"   {cost * 1e6:8.2f}   {cost / peer_cost:9.2f}")
    ours_inclination = max(results[FILTERS[0][0]][0])
    print(f"choice: vqf (worst inclination RMS {ours_inclination:.2f} deg through orientation_filter vs imufusion "
          f"{max(peer[0]):.2f} deg)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
