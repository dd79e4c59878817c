"""replay/hinge_calibration.py (``dofkit replay --calibrate START END --hinge-calibration``) on simulated inputs with
known truth: config/lower_body.yaml's model and seven IMUs, every one raw (``orientation: filter``, a VQF each, no
magnetometer), standing still for 2 s then moving every joint (the floating base held). The static calibration on the
stand, then the hinge calibration over the whole window, then the estimator over the same inputs with the calibrated
parameters: the knees must follow the truth, which the static calibration alone does not."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from benchmarks.drift import simulation_window  # noqa: E402
from raw_imu_scenarios import raw_lower_body  # noqa: E402
from ros_dofkit import cli  # noqa: E402
from ros_dofkit.core.estimator.estimator import Estimator  # noqa: E402
from ros_dofkit.core.spatial import rotation_angle  # noqa: E402
from ros_dofkit.replay.bag_replay import replay_bag  # noqa: E402
from ros_dofkit.replay.calibration import calibrate_from_inputs, setup_with_parameters  # noqa: E402
from ros_dofkit.replay.hinge_calibration import hinge_calibrated, raw_imus  # noqa: E402
from ros_dofkit.replay.pipeline import ReplayError  # noqa: E402
from ros_dofkit.replay.setup import ReplaySetup  # noqa: E402

KNEES = ("left_knee_flexion", "right_knee_flexion")
LEG_IMUS = ("left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg", "right_foot")
SECONDS = 30.0
STAND_S = (0.0, 1.5)  # inside raw_imu_scenarios.HOLD_S
# Stated bounds: the IK of the simulator's noisy raw IMUs (VQF inclination 0.2-0.5 deg, README) within the issue's
# 2 deg; the static calibration alone is off by the filters' headings (tens of degrees of mounting error).
KNEE_RMS_BOUND_DEG = 2.0
# Each filter's heading drifts over the window (gyro bias 0.002 rad/s, ~0.1 deg/s, not observable in heading without
# a magnetometer); the fit averages it: a few degrees, against the tens of degrees the stand leaves.
MOUNTING_BOUND_DEG = 5.0
STATIC_KNEE_RMS_DEG = 5.0


@pytest.fixture(scope="module")
def simulated():
    setup, run, mountings = raw_lower_body(SECONDS)
    inputs = simulation_window(run, list(setup.config.imu_names))
    static = calibrate_from_inputs(inputs, setup, *STAND_S)
    return {"setup": setup, "run": run, "inputs": inputs, "static": static, "truth": mountings,
            "hinged": hinge_calibrated(inputs, setup, static)}


def _knee_rms_deg(setup, inputs, run) -> dict:
    result = Estimator(setup.plant, setup.config).run(inputs)
    keep = result.initialized
    stamps = result.stamp[keep]
    rms = {}
    for joint in KNEES:
        truth = np.interp(stamps, run.times, run.truth_positions[:, list(run.truth_names).index(joint)])
        estimate = result.q[keep][:, list(result.position_names).index(joint)]
        rms[joint] = math.degrees(float(np.sqrt(np.mean((estimate - truth) ** 2))))
    return rms


def test_every_imu_is_raw(simulated):
    assert raw_imus(simulated["inputs"], simulated["setup"].config) == list(simulated["setup"].config.imu_names)


def test_calibrated_parameters_carry_the_turned_mountings_and_filter_headings(simulated):
    hinged = simulated["hinged"]
    assert sorted(hinged.hinge.turns) == sorted(LEG_IMUS)  # the pelvis has no hinge to its parent: held
    config = hinged.setup.config
    for imu in config.imus:
        R_BS = np.asarray(imu.mounting)
        if imu.name in LEG_IMUS:
            assert math.degrees(rotation_angle(R_BS.T @ simulated["truth"][imu.name])) < MOUNTING_BOUND_DEG, imu.name
            assert hinged.parameters[f"imus.{imu.name}.filter_heading"] == pytest.approx(
                math.copysign(1.0, hinged.result.R_WG[2, 2]) * hinged.hinge.turns[imu.name]), imu.name
        else:
            assert f"imus.{imu.name}.filter_heading" not in hinged.parameters
    assert "headings turned from hinges (deg): " in hinged.summary()


def test_knees_follow_the_truth_with_the_hinge_calibration_only(simulated):
    static_rms = _knee_rms_deg(simulated["static"].setup, simulated["inputs"], simulated["run"])
    hinged_rms = _knee_rms_deg(simulated["hinged"].setup, simulated["inputs"], simulated["run"])
    assert max(static_rms.values()) > STATIC_KNEE_RMS_DEG, static_rms  # what the calibration is for
    assert max(hinged_rms.values()) < KNEE_RMS_BOUND_DEG, hinged_rms


def test_the_calibrated_parameters_run_with_the_chains_heading_filter(simulated):
    """The hinge calibration's parameters with ``heading_estimation.enabled`` (the raw IMUs' headings then stay tied
    through the knees and the joint centres' accelerations while they drift, benchmarks/ximu3_estimate.py's last raw
    run): the knees still follow the truth."""
    hinged = simulated["hinged"]
    setup = setup_with_parameters(hinged.setup, {**hinged.parameters, "heading_estimation.enabled": True})
    assert setup.config.heading_estimation.enabled
    rms = _knee_rms_deg(setup, simulated["inputs"], simulated["run"])
    assert max(rms.values()) < KNEE_RMS_BOUND_DEG, rms


def test_without_raw_imus_there_is_nothing_to_turn(simulated):
    """IMUs that report their own orientation share one heading: the hinge calibration refuses, saying why."""
    values = dict(simulated["setup"].values)
    for name in values["imu_names"]:
        values[f"imus.{name}.orientation"] = "sensor"
    setup = ReplaySetup.from_parameters(values)
    static = calibrate_from_inputs(simulated["inputs"], setup, *STAND_S)
    with pytest.raises(ReplayError, match="no raw IMU calibrated on the static window shares a hinge"):
        hinge_calibrated(simulated["inputs"], setup, static)


def test_the_option_needs_a_static_calibration(simulated, tmp_path, capsys):
    assert cli.main(["replay", str(tmp_path / "bag"), "--config", str(ROOT / "config" / "lower_body.yaml"), "--out",
                     str(tmp_path / "out"), "--hinge-calibration"]) == 1
    assert "--hinge-calibration needs --calibrate START END" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ReplayError, match="it needs calibration=\\(start, end\\)"):
        replay_bag(tmp_path / "bag", simulated["setup"], tmp_path / "out", hinge_calibration=True)
    assert not (tmp_path / "out").exists()
