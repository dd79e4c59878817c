"""core/assembly/hinge_calibration.py against the simulator's truth: config/lower_body.yaml's model with seven raw
IMUs (gyro + accelerometer through a VQF each, so every filter has a heading of its own), standing still for 2 s,
then moving every joint (the floating base held). The static calibration alone leaves each leg IMU's mounting off by
its filter's heading; the joints between IMUs (knees exact, 2-dof ankles) must bring them back to the true ones."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from raw_imu_scenarios import HOLD_S, NOISE, HoldThenMove  # noqa: E402
from ros_dofkit.core.assembly.calibration import average_rotations  # noqa: E402
from ros_dofkit.core.assembly.errors import AssemblyValueError  # noqa: E402
from ros_dofkit.core.assembly.hinge_calibration import (  # noqa: E402
    OrientationSeries,
    calibrate_hinge_headings,
    joint_pairs,
    pair_misfit,
)
from ros_dofkit.core.estimator.orientation_filter import FilterSettings, OrientationFilter  # noqa: E402
from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory  # noqa: E402
from ros_dofkit.core.spatial import (  # noqa: E402
    matrix_to_rotvec,
    quat_to_matrix,
    rotation_angle,
    rotation_x,
    rotation_z,
    rotvec_to_matrix,
)
from ros_dofkit.replay.setup import build_plant, model_specs_from_parameters  # noqa: E402
from ros_dofkit.ros.parameters import load_parameter_file  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "config" / "lower_body.yaml"
LEG_IMUS = ("left_upper_leg", "left_lower_leg", "left_foot", "right_upper_leg", "right_lower_leg", "right_foot")
SECONDS = 40.0
# Stated bounds: VQF's inclination error (~0.2-0.5 deg, README) and the noise of a 40 s fit; far below the heading
# errors the static calibration leaves (tens of degrees, asserted).
MOUNTING_BOUND_DEG = 1.5
STATIC_ERROR_DEG = 20.0


@pytest.fixture(scope="module")
def lower_body():
    values = load_parameter_file(CONFIG)
    plant = build_plant(model_specs_from_parameters(values))
    names = list(values["imu_names"])
    mountings = {name: rotation_z(0.7 * k) @ rotation_x(0.4 * (k % 3)) for k, name in enumerate(names)}
    imus = tuple(SimulatedImu(name, values[f"imus.{name}.body"], mountings[name]) for name in names)
    trajectory = HoldThenMove(plant, 3, sine=SineTrajectory(plant, seed=3, max_amplitude=0.5, max_translation=0.05),
                              encoder_joints=())
    run = SensorSimulator(plant, imus, trajectory=trajectory, noise=NOISE, seed=3).run(SECONDS)
    bodies = {name: int(plant.get_body_by_name(values[f"imus.{name}.body"]).index) for name in names}
    X_WB = plant.calc_body_poses(trajectory.q_hold)
    orientations, static = {}, {}
    for name in names:
        readings = run.imu(name)
        filtered = OrientationFilter(FilterSettings(sample_time_s=0.01)).run(
            readings.stamps, readings.angular_velocity, readings.linear_acceleration)
        stamps = readings.stamps[filtered.present]
        R_FS = quat_to_matrix(filtered.quaternion_wxyz[filtered.present])
        orientations[name] = OrientationSeries(stamps, R_FS)
        # The static calibration on the hold (calibrate_imus' R_BS = R_WB0ᵀ R_GS0), each filter in its own heading.
        static[name] = X_WB[bodies[name], :3, :3].T @ average_rotations(R_FS[stamps < HOLD_S])
    return {"plant": plant, "q_cal": trajectory.q_hold, "bodies": bodies, "truth": mountings, "static": static,
            "orientations": orientations, "run": run}


def _error_deg(R, R_true) -> float:
    return math.degrees(rotation_angle(np.asarray(R).T @ R_true))


def test_joint_pairs_are_the_knees_and_the_two_dof_ankles(lower_body):
    pairs = joint_pairs(lower_body["plant"], lower_body["bodies"])
    assert [(p.parent_imu, p.child_imu, p.hinge) for p in pairs] == [
        ("left_upper_leg", "left_lower_leg", True), ("right_upper_leg", "right_lower_leg", True),
        ("left_lower_leg", "left_foot", False), ("right_lower_leg", "right_foot", False)]  # hips: 3 dof, none


def test_joints_bring_every_leg_mounting_back_to_the_truth(lower_body):
    truth, static = lower_body["truth"], lower_body["static"]
    for name in LEG_IMUS:  # the failure this fixes: the static calibration keeps each filter's heading
        assert _error_deg(static[name], truth[name]) > STATIC_ERROR_DEG, name
    result = calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], static,
                                      lower_body["orientations"], LEG_IMUS)
    assert sorted(result.turns) == sorted(LEG_IMUS)
    for name in LEG_IMUS:
        assert _error_deg(result.R_BS[name], truth[name]) < MOUNTING_BOUND_DEG, name
    for fit in result.fits:
        # a knee's mirrored solution fits as well; it is the limits that chose (the truth check above)
        assert fit.outside < 0.05 and fit.samples > 0.9 * SECONDS * 100, fit


def test_turns_are_the_filter_headings(lower_body):
    """The turn of each IMU is the heading of its filter's frame in G: Rz(turn) R_FS = R_GS (the truth)."""
    result = calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"],
                                      lower_body["static"], lower_body["orientations"], LEG_IMUS)
    for name in LEG_IMUS:
        readings, series = lower_body["run"].imu(name), lower_body["orientations"][name]
        j = int(np.searchsorted(series.stamps, HOLD_S))  # the end of the hold, before the filter's heading drifts
        R_GS = quat_to_matrix(readings.true_quaternion_wxyz[int(np.searchsorted(readings.stamps, series.stamps[j]))])
        assert math.degrees(rotation_angle(R_GS.T @ rotation_z(result.turns[name]) @ series.R_GS[j])) < 1.5, name


def test_held_imus_are_not_turned_and_a_held_shank_still_turns_its_foot(lower_body):
    """Only ``turnable`` IMUs turn; a pair with one turnable side turns that side against the other's heading."""
    truth = dict(lower_body["static"])
    for name in ("left_upper_leg", "left_lower_leg"):
        truth[name] = lower_body["truth"][name]  # known mountings ...
    orientations = dict(lower_body["orientations"])
    for name in ("left_upper_leg", "left_lower_leg"):  # ... and their streams in G (the simulator's truth)
        readings = lower_body["run"].imu(name)
        orientations[name] = OrientationSeries(readings.stamps, quat_to_matrix(readings.true_quaternion_wxyz))
    result = calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], truth,
                                      orientations, ["left_foot"])
    assert list(result.turns) == ["left_foot"]
    assert _error_deg(result.R_BS["left_foot"], lower_body["truth"]["left_foot"]) < MOUNTING_BOUND_DEG


def test_a_window_without_joint_motion_is_refused(lower_body):
    still = {name: OrientationSeries(series.stamps[series.stamps < HOLD_S], series.R_GS[series.stamps < HOLD_S])
             for name, series in lower_body["orientations"].items()}
    with pytest.raises(AssemblyValueError, match="turned .* deg in the window, at least 10 needed"):
        calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"],
                                 lower_body["static"], still, LEG_IMUS)


def test_missing_mountings_and_disjoint_samples_are_refused(lower_body):
    static = dict(lower_body["static"])
    del static["left_foot"]
    with pytest.raises(AssemblyValueError, match=r"no mounting R_BS for IMU\(s\) \['left_foot'\]"):
        calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], static,
                                 lower_body["orientations"], LEG_IMUS)
    orientations = dict(lower_body["orientations"])
    shank = orientations["left_lower_leg"]
    orientations["left_lower_leg"] = OrientationSeries(shank.stamps + 2.0 * SECONDS, shank.R_GS)  # never together
    with pytest.raises(AssemblyValueError, match="0 samples where both have an orientation, at least 20 needed"):
        calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"],
                                 lower_body["static"], orientations, LEG_IMUS)
    knee = next(p for p in joint_pairs(lower_body["plant"], lower_body["bodies"]) if p.child_imu == "left_lower_leg")
    with pytest.raises(AssemblyValueError, match="0 samples where both have an orientation"):
        pair_misfit(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], lower_body["static"],
                    orientations, knee, {})
    del orientations["left_lower_leg"]
    with pytest.raises(AssemblyValueError, match=r"hinge misfit: no orientations for IMU\(s\) \['left_lower_leg'\]"):
        pair_misfit(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], lower_body["static"],
                    orientations, knee, {})
    with pytest.raises(AssemblyValueError, match=r"no mounting R_BS for IMU\(s\) \['left_foot'\]"):
        pair_misfit(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], static, lower_body["orientations"],
                    next(p for p in joint_pairs(lower_body["plant"], lower_body["bodies"])
                         if p.child_imu == "left_foot"), {})


def test_misfit_at_the_fitted_turns_is_the_fits_rms(lower_body):
    """Round trip: the per-sample misfit at the fitted turns gives back each knee's fit RMS (chord RMS as an
    angle); on the simulator's pure hinges it stays near the filters' inclination error."""
    result = calibrate_hinge_headings(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"],
                                      lower_body["static"], lower_body["orientations"], LEG_IMUS)
    for fit in (f for f in result.fits if f.pair.hinge):
        misfit = pair_misfit(lower_body["plant"], lower_body["q_cal"], lower_body["bodies"], lower_body["static"],
                             lower_body["orientations"], fit.pair, result.turns).misfit
        assert len(misfit) == fit.samples
        chord_rms = math.sqrt(float(np.mean((2.0 * np.sin(misfit / 2.0)) ** 2)))
        assert 2.0 * math.asin(chord_rms / 2.0) == pytest.approx(fit.rms, abs=1e-9)
        assert math.degrees(fit.rms) < 2.0, fit


def test_misfit_is_a_heading_step_of_one_side(lower_body):
    """Analytic: a shank turning about the knee axis a (found from the plant by a finite difference of the knee
    coordinate) below a still thigh sees a; after its stream's heading steps by ε it sees Rz(ε) a, so the misfit is
    0 before and the angle between a and Rz(ε) a after."""
    plant, q_cal, bodies = lower_body["plant"], np.asarray(lower_body["q_cal"], dtype=float), lower_body["bodies"]
    pair = next(p for p in joint_pairs(plant, bodies) if p.child_imu == "left_lower_leg")
    names = list(plant.articulated_view().position_names())
    q = q_cal.copy()
    q[plant.articulated_view().q_indices[names.index("left_knee_flexion")]] += 1e-6
    shank = bodies["left_lower_leg"]
    R0, R1 = plant.calc_body_poses(q_cal)[shank, :3, :3], plant.calc_body_poses(q)[shank, :3, :3]
    a_G = matrix_to_rotvec(R1 @ R0.T) / 1e-6
    R_GS0 = {name: plant.calc_body_poses(q_cal)[bodies[name], :3, :3] @ lower_body["truth"][name]
             for name in ("left_upper_leg", "left_lower_leg")}
    stamps = np.arange(0.0, 4.0, 0.01)
    step, epsilon = stamps >= 2.0, math.radians(7.0)
    heading = rotation_z(np.where(step, epsilon, 0.0))
    flexion = rotvec_to_matrix(np.outer(1.2 * np.sin(2.0 * stamps) ** 2, a_G))
    still = np.repeat(R_GS0["left_upper_leg"][None], len(stamps), axis=0)
    orientations = {"left_upper_leg": OrientationSeries(stamps, still),
                    "left_lower_leg": OrientationSeries(stamps, heading @ flexion @ R_GS0["left_lower_leg"])}
    expected = math.acos(float(a_G @ rotation_z(epsilon) @ a_G))
    for turns in ({}, {"left_upper_leg": 0.4}):  # a still thigh sees a whatever its turn
        result = pair_misfit(plant, q_cal, bodies, lower_body["truth"], orientations, pair, turns)
        np.testing.assert_allclose(result.stamps, stamps)
        np.testing.assert_allclose(result.misfit[~step], 0.0, atol=1e-9)
        np.testing.assert_allclose(result.misfit[step], expected, atol=1e-9)
    assert expected > 0.9 * epsilon  # the knee axis is nearly horizontal at the pose: the misfit is about ε
