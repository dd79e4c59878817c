"""What the Odometry covariance costs per cycle on the node's hot path (issue 13.3).

Where you are: ``benchmarks`` (run as ``.venv/bin/python -m benchmarks.odometry_covariance``). Imports the
estimator core and the replay's parameter-file reader. The node computes ``SolveCovarianceModel.covariances`` once
per cycle while its Odometry topic has a subscriber; this times it on the shipped floating-base configurations
with every IMU observed (the largest normal matrix), best of ``--repeat`` rounds of ``--number`` calls. Wall time:
on a loaded machine compare runs made together.
"""

from __future__ import annotations

import argparse
import dataclasses
import timeit
from pathlib import Path

import numpy as np

from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.odometry import SolveCovarianceModel
from ros_dofkit.replay.setup import ReplaySetup

CONFIGS = ("quadruped.yaml", "lower_body.yaml")
CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"


def cycle_of(setup: ReplaySetup):
    """An estimator of ``setup`` and one cycle at rest in which every IMU counts as observed."""
    estimator = Estimator(setup.plant, setup.config)
    for imu in setup.config.imus:
        estimator.add_imu(imu.name, 0.0, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    names = list(estimator.joint_state_names)
    estimator.add_joint_state(names, np.zeros(len(names)), stamp=0.0)
    result = estimator.step(0.0)
    return estimator, dataclasses.replace(result, observed_sensors=tuple(setup.config.imu_names))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200, help="calls per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the best is reported)")
    args = parser.parse_args(argv)
    for name in CONFIGS:
        estimator, result = cycle_of(ReplaySetup.from_parameter_file(CONFIG_DIR / name))
        model = SolveCovarianceModel(estimator, 1e-4, 1e-4)
        model.covariances(result)  # compiled (or loaded) before timing
        best = min(timeit.repeat(lambda m=model, r=result: m.covariances(r), number=args.number, repeat=args.repeat))
        print(f"{name}: {len(result.observed_sensors)} IMUs, {int(model.free.sum())} free velocities: "
              f"{best / args.number * 1e6:.1f} us per cycle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
