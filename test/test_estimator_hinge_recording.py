"""core/estimator/hinge_recording.py (the live node's ``~/calibrate_hinges``) on the simulated lower body with seven
raw IMUs (test/raw_imu_scenarios.raw_lower_body: the stand, then every joint moving). The node's path (samples offered
one by one with ``Estimator.process_imu``, ``calibrate`` at the stand's end, the motion recorded, fitted and adopted)
against the offline path (``dofkit replay --calibrate 0 1.5 --hinge-calibration``: ``calibrate_from_inputs`` and
``replay.hinge_calibration.hinge_calibrated`` on the same inputs): the same mountings; the knees then follow the
simulator's truth; each failure is a typed error that leaves the estimator as it was."""

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from benchmarks.drift import simulation_window  # noqa: E402
from raw_imu_scenarios import joint_errors_deg, raw_lower_body  # noqa: E402
from ros_dofkit.core.estimator.estimator import Estimator  # noqa: E402
from ros_dofkit.core.estimator.hinge_recording import (  # noqa: E402
    HingeCalibrationError,
    HingeRecording,
    HingeRecordingSettings,
)
from ros_dofkit.core.spatial import matrix_to_quat, rotation_angle  # noqa: E402
from ros_dofkit.replay.calibration import calibrate_from_inputs  # noqa: E402
from ros_dofkit.replay.hinge_calibration import hinge_calibrated  # noqa: E402
from ros_dofkit.replay.setup import ReplaySetup  # noqa: E402

SECONDS = 30.0
STAND_END_S = 1.5  # inside raw_imu_scenarios.HOLD_S
RECORD_S = 18.0  # the motion recorded after the stand; the rest of the session is tracked with the result
LEG_IMUS = ("left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg", "right_foot")
KNEES = ("left_knee_flexion", "right_knee_flexion")
# Both paths see the same filter outputs, the same stand samples and the same motion samples; the recorded R_GS are
# the rules' (the quaternion normalised once more), so the mountings agree to rounding, far below the fit's own
# accuracy (1.5 deg against the truth, test_replay_hinge_calibration).
SAME_MOUNTING_DEG = 1e-6
# A raw IMU aligned by the stand has its live window emptied there (samples of its old heading): its recording lacks
# the stand's still samples (ΔR = I) that the offline series holds, which moves the fit by micro-degrees (4e-6 seen).
ALIGNED_MOUNTING_DEG = 1e-3


def _offer(estimator, inputs, rows, names=None) -> list:
    """Offer the inputs' IMU rows ``rows`` (IMU ``names[sensor]``, default the estimator's) one by one as the node
    does, those of IMUs the estimator has; the results of the cycles they complete."""
    names = estimator.config.imu_names if names is None else names
    results = []
    for r in rows:
        if names[inputs.imu_sensor[r]] not in estimator.config.imu_names:
            continue
        _, done = estimator.process_imu(
            names[inputs.imu_sensor[r]], float(inputs.imu_stamp[r]), inputs.imu_quaternion_wxyz[r],
            inputs.imu_angular_velocity[r], bool(inputs.imu_orientation_present[r]), True,
            linear_acceleration=inputs.imu_linear_acceleration[r])
        results.extend(done)
    return results


def _first(inputs, n: int):
    """The first ``n`` inputs of an IMU-only window (the recording the offline path reads)."""
    imu = {f.name: getattr(inputs, f.name)[:n] for f in dataclasses.fields(inputs)
           if f.name.startswith("imu_") and getattr(inputs, f.name) is not None}
    return dataclasses.replace(inputs, kind=inputs.kind[:n], row=inputs.row[:n], **imu)


@pytest.fixture(scope="module")
def session():
    setup, run, truth = raw_lower_body(SECONDS)
    inputs = simulation_window(run, list(setup.config.imu_names))
    assert np.all(inputs.kind == 0) and np.array_equal(inputs.row, np.arange(len(inputs.row)))  # IMUs only
    relative = inputs.imu_stamp - inputs.imu_stamp.min()
    stand = np.flatnonzero(relative < STAND_END_S)
    motion = np.flatnonzero((relative >= STAND_END_S) & (relative < STAND_END_S + RECORD_S))
    after = np.flatnonzero(relative >= STAND_END_S + RECORD_S)
    recorded = _first(inputs, int(motion[-1]) + 1)  # the same recording, as a bag: stand and motion
    static = calibrate_from_inputs(recorded, setup, 0.0, STAND_END_S)
    offline = hinge_calibrated(recorded, setup, static)
    # the node's calibration window holds the whole stand, as the offline calibration's does
    config = dataclasses.replace(setup.config, calibration_window=max(static.result.num_samples.values()))
    return {"setup": setup, "run": run, "truth": truth, "inputs": inputs, "offline": offline, "config": config,
            "stand": stand, "motion": motion, "after": after}


def _calibrated_on_the_stand(session) -> Estimator:
    estimator = Estimator(session["setup"].plant, session["config"])
    _offer(estimator, session["inputs"], session["stand"])
    estimator.calibrate()
    return estimator


def _mountings(estimator) -> dict:
    return {name: estimator.mounting(name) for name in estimator.config.imu_names}


def test_the_node_path_gives_the_offline_mountings_and_the_knees_follow_the_truth(session):
    estimator = _calibrated_on_the_stand(session)
    recording = HingeRecording(estimator, HingeRecordingSettings(duration_s=RECORD_S - 0.1))  # a sample's slack
    _offer(estimator, session["inputs"], session["motion"][:-210])
    assert not recording.done
    _offer(estimator, session["inputs"], session["motion"][-210:])
    assert recording.done and recording.covered_s == pytest.approx(RECORD_S, abs=0.05)
    hinge = recording.finish()
    offline = session["offline"]
    assert sorted(hinge.turns) == sorted(LEG_IMUS) == sorted(offline.hinge.turns)
    for name in estimator.config.imu_names:
        live, expected = estimator.mounting(name), np.asarray(offline.result.R_BS[name])
        assert math.degrees(rotation_angle(live.T @ expected)) < SAME_MOUNTING_DEG, name
    for name in LEG_IMUS:
        assert math.degrees(rotation_angle(estimator.mounting(name).T @ session["truth"][name])) < 5.0, name
        assert hinge.filter_turns[name] == pytest.approx(
            offline.parameters[f"imus.{name}.filter_heading"], abs=1e-9), name
    # the running estimator tracks the rest of the session with them
    results = [r for r in _offer(estimator, session["inputs"], session["after"]) if r.initialized]
    assert len(results) > 500
    rms = np.sqrt(np.mean(joint_errors_deg(results, session["run"], KNEES) ** 2, axis=0))
    assert rms.max() < 2.0, rms


def test_a_raw_imu_with_a_known_mounting_beside_calibrated_ones_gives_the_offline_mountings(session):
    """The left thigh's raw IMU has a known mounting (the truth): the stand turns its filter onto the model's heading
    and holds it, its neighbours are turned from it. The offline path's motion series run that filter with the
    stand's turn too (the calibrated configuration's ``filter_heading``), as the live filter runs."""
    values = dict(session["setup"].values)
    values["imus.left_upper_leg.calibrate"] = False
    values["imus.left_upper_leg.mounting"] = matrix_to_quat(session["truth"]["left_upper_leg"]).tolist()
    setup = ReplaySetup.from_parameters(values)
    inputs = session["inputs"]
    recorded = _first(inputs, int(session["motion"][-1]) + 1)
    static = calibrate_from_inputs(recorded, setup, 0.0, STAND_END_S)
    assert list(static.result.heading_offsets) == ["left_upper_leg"]
    offline = hinge_calibrated(recorded, setup, static)
    estimator = Estimator(setup.plant, dataclasses.replace(setup.config, calibration_window=session["config"]
                                                           .calibration_window))
    _offer(estimator, inputs, session["stand"])
    estimator.calibrate()
    recording = HingeRecording(estimator, HingeRecordingSettings(duration_s=RECORD_S - 0.1))
    _offer(estimator, inputs, session["motion"])
    hinge = recording.finish()
    assert "left_upper_leg" not in hinge.turns and "left_lower_leg" in hinge.turns
    assert math.degrees(rotation_angle(estimator.mounting("left_lower_leg").T @ session["truth"]["left_lower_leg"])
                        ) < 5.0
    assert sorted(offline.result.R_BS) == sorted(set(estimator.config.imu_names) - {"left_upper_leg"})
    for name, expected in offline.result.R_BS.items():
        assert math.degrees(rotation_angle(estimator.mounting(name).T @ expected)) < ALIGNED_MOUNTING_DEG, name
    assert math.degrees(rotation_angle(estimator.mounting("left_upper_leg").T @ session["truth"]["left_upper_leg"])
                        ) < 1e-6  # known: held


def test_without_a_stand_calibration_it_refuses_and_records_nothing(session):
    estimator = Estimator(session["setup"].plant, session["config"])
    _offer(estimator, session["inputs"], session["stand"])
    before = _mountings(estimator)
    with pytest.raises(HingeCalibrationError, match="no stand calibration yet: call ~/calibrate"):
        HingeRecording(estimator, HingeRecordingSettings())
    assert all(estimator.mounting(n) is None and before[n] is None for n in before)


def test_too_little_motion_is_refused_and_the_estimator_keeps_its_stand_mountings(session):
    estimator = _calibrated_on_the_stand(session)
    before = _mountings(estimator)
    recording = HingeRecording(estimator, HingeRecordingSettings(duration_s=0.3))
    still = session["stand"][-len(session["stand"]) // 3:]  # the last half second of the stand, again, later
    inputs = session["inputs"]
    _offer(estimator, dataclasses.replace(inputs, imu_stamp=inputs.imu_stamp + 0.5), still)
    assert recording.done
    with pytest.raises(HingeCalibrationError, match="turned .* deg in the window, at least 10 needed"):
        recording.finish()
    for name, R in _mountings(estimator).items():
        assert np.array_equal(R, before[name]), name
    assert estimator.calibrate().R_BS  # the windows are back to calibration_window: a stand calibrates again


def test_a_clock_jump_back_while_recording_interrupts_the_recording(session):
    """A looping bag sends the clock back: the rules reset and the estimator drops what it kept, so the recording is
    no longer whole and says so (the node then refuses with that reason instead of waiting for the inputs to stop);
    a recording started after the jump is whole."""
    estimator = _calibrated_on_the_stand(session)
    recording = HingeRecording(estimator, HingeRecordingSettings(duration_s=RECORD_S))
    inputs, motion = session["inputs"], session["motion"]
    _offer(estimator, inputs, motion[:len(motion) // 4])
    assert recording.covered_s > 1.0 and not recording.interrupted
    _offer(estimator, inputs, session["stand"])  # the bag from its start again: more than stamp_jump_reset_s back
    assert recording.interrupted and not recording.done
    recording.cancel()
    again = HingeRecording(estimator, HingeRecordingSettings(duration_s=RECORD_S))
    _offer(estimator, inputs, motion[:len(motion) // 4])
    assert not again.interrupted and again.covered_s > 1.0


def test_a_model_without_raw_imus_on_hinges_is_refused(session):
    """IMUs that report their own orientation: nothing has a filter heading to fix (the offline path's refusal)."""
    config = session["config"]
    sensors = dataclasses.replace(config, imus=tuple(dataclasses.replace(imu, orientation="sensor")
                                                     for imu in config.imus))
    estimator = Estimator(session["setup"].plant, sensors)
    _offer(estimator, session["inputs"], session["stand"])  # the simulator's orientations are in the messages
    estimator.calibrate()
    with pytest.raises(HingeCalibrationError, match="no raw IMU calibrated on the stand shares a hinge"):
        HingeRecording(estimator, HingeRecordingSettings())


def test_a_model_without_hinges_between_imus_is_refused(session):
    """Raw IMUs on the pelvis and the feet only: between them a hip, a knee and an ankle, no one- or two-joint
    hinge; nothing to fit."""
    config = session["config"]
    kept = ("pelvis", "left_foot", "right_foot")
    feet = dataclasses.replace(config, imus=tuple(imu for imu in config.imus if imu.name in kept))
    estimator = Estimator(session["setup"].plant, feet)
    _offer(estimator, session["inputs"], session["stand"], names=config.imu_names)
    estimator.calibrate()
    with pytest.raises(HingeCalibrationError, match=r"shares a hinge .* IMU pairs across hinges \[\]"):
        HingeRecording(estimator, HingeRecordingSettings())


@pytest.mark.parametrize("settings, match", [
    (dict(duration_s=0.0), "duration_s: expected a finite number of seconds > 0, got 0.0"),
    (dict(duration_s=math.inf), "duration_s"),
    (dict(max_samples=19), "max_samples: expected an integer >= 20, got 19"),
    (dict(max_samples=True), "max_samples"),
])
def test_bad_settings_are_typed_errors(settings, match):
    with pytest.raises(HingeCalibrationError, match=match):
        HingeRecordingSettings(**settings)
