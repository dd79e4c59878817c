"""Heading offsets and gyro biases on the chain (ros_dofkit.core.estimator.heading, issue 19.2): the residual
Jacobians against finite differences, the observability rule on analytic chains, the filter recovering known
offsets on a 2-link hinge chain and on the demo arm's simulated drift, the gyro bias estimate, the configuration's
validation, the streaming entry point giving the offline one's bits, and the joint-centre acceleration constraint
(the angle measurement, the joint pairs, offsets behind ball joints recovered from exact simulated readings)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from benchmarks.drift import arm_scenario, lower_body_scenario, session_noise, simulation_window
from ros_dofkit.core.estimator import EstimatorConfig, EstimatorConfigError, ImuConfig, UnknownNameError
from ros_dofkit.core.estimator import setup as problem
from ros_dofkit.core.estimator.config import HeadingEstimation
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.heading import (
    MAX_HEADING_STD,
    HeadingFilter,
    HeadingModel,
    acceleration_information,
    information_update,
    new_work,
    schur_information,
    stack_residuals,
)
from ros_dofkit.core.multibody.plant import MultibodyPlant
from ros_dofkit.core.simulation import SensorNoise, SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_y, rotation_z, rotvec_to_matrix
from ros_dofkit.ros.estimator_messages import NodeStatistics, diagnostics_message
from ros_dofkit.ros.parameters import NODE_PARAMETERS, ParameterValueError, estimator_config_from_parameters

ON = HeadingEstimation(enabled=True)


def two_link_urdf(axis1: str, axis2: str = "0 1 0") -> str:
    """Base -> hinge j1 -> link a -> hinge j2 (0.3 m up) -> link b."""
    limit = '<limit lower="-3" upper="3" effort="1" velocity="1"/>'
    return (f'<robot name="two"><link name="base"/><link name="a"/><link name="b"/>'
            f'<joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="{axis1}"/>{limit}'
            f'</joint><joint name="j2" type="revolute"><parent link="a"/><child link="b"/>'
            f'<origin xyz="0 0 0.3"/><axis xyz="{axis2}"/>{limit}</joint></robot>')


def two_link_plant(axis1: str, base: str = "fixed", axis2: str = "0 1 0"):
    plant = MultibodyPlant()
    plant.add_urdf(two_link_urdf(axis1, axis2), model_name="two", base_joint=base)
    plant.finalize()
    return plant


TWO_IMUS = (ImuConfig("ia", "a", mounting=rotation_x(0.3)), ImuConfig("ib", "b", mounting=rotation_y(-0.5)))


def heading_filter(plant, config):
    return HeadingFilter(problem.build(plant, config), config.heading_estimation, config.stale_timeout_s)


# ---------------------------------------------------------------------------------------------- the Jacobians
def residuals(plant, model, R_BS, q, R_WO, delta):
    """(r, J over free v, E) of the module's kernel at q with observations R_WO corrected by delta."""
    tree = plant.tree.kernel_arguments()
    m = int(model.column.max()) + 1
    work = new_work(tree, plant.num_velocities(), len(model.body), len(model.free_v), m)
    corrected = np.array([rotation_z(-delta[model.column[i]]) @ R_WO[i] if model.column[i] >= 0 else R_WO[i]
                          for i in range(len(R_WO))])
    stack_residuals(tree, q, corrected, np.arange(len(R_WO)), model, R_BS, work)
    return work.r.copy(), work.J.copy(), work.E.copy(), work


@pytest.mark.parametrize("base", ["fixed", "floating"])
def test_residual_jacobians_match_central_finite_differences(base):
    plant = two_link_plant("0 0 1", base, axis2="1 0 0")
    config = EstimatorConfig(imus=TWO_IMUS, heading_estimation=ON)
    setup = problem.build(plant, config)
    free_v = np.flatnonzero(setup.free_v).astype(np.int64)
    model = HeadingModel(setup.body_index, np.sqrt([2.0, 0.5]), np.array([0, 1], dtype=np.int64), free_v)
    R_BS = np.stack([imu.mounting for imu in TWO_IMUS])
    rng = np.random.default_rng(3)
    q = np.asarray(plant.default_positions(), dtype=float).copy()
    q[setup.art_q] = rng.uniform(-1.0, 1.0, len(setup.art_q))
    if base == "floating":
        quaternion = rng.normal(size=4)
        q[:4] = quaternion / np.linalg.norm(quaternion)
    # observations 20-40 deg away from the model, so the J_r^-1 / J_l^-1 factors are far from the identity
    X_WB = plant.calc_body_poses(q)
    R_WO = np.stack([X_WB[b, :3, :3] @ R_BS[i] @ rotvec_to_matrix(rng.normal(0.0, 0.4, 3))
                     for i, b in enumerate(setup.body_index)])
    delta = np.array([0.2, -0.35])
    r, J, E, _ = residuals(plant, model, R_BS, q, R_WO, delta)
    h = 1e-6
    for a, column in enumerate(free_v):
        dv = np.zeros(plant.num_velocities())
        dv[column] = h
        plus = residuals(plant, model, R_BS, plant.integrate_positions(q, dv), R_WO, delta)[0]
        minus = residuals(plant, model, R_BS, plant.integrate_positions(q, -dv), R_WO, delta)[0]
        np.testing.assert_allclose(J[:, a], (plus - minus) / (2 * h), atol=1e-7)
    for c in range(2):
        step = np.zeros(2)
        step[c] = h
        plus = residuals(plant, model, R_BS, q, R_WO, delta + step)[0]
        minus = residuals(plant, model, R_BS, q, R_WO, delta - step)[0]
        np.testing.assert_allclose(E[:, c], (plus - minus) / (2 * h), atol=1e-7)
    # To first order the offset column is minus the world vertical, scaled, on its sensor's rows only.
    _, _, E0, _ = residuals(plant, model, R_BS, q, np.stack([X_WB[b, :3, :3] @ R_BS[i]
                                                              for i, b in enumerate(setup.body_index)]), 0 * delta)
    np.testing.assert_allclose(E0[:, 0], -math.sqrt(2.0) * np.r_[0, 0, 1, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(E0[:, 1], -math.sqrt(0.5) * np.r_[0, 0, 0, 0, 0, 1], atol=1e-15)


def test_schur_information_is_the_projected_normal_matrix():
    """S = E^T (I - P_J) E and g = E^T (I - P_J) r, computed densely with a pseudo-inverse."""
    plant = two_link_plant("0 1 0", "floating")
    config = EstimatorConfig(imus=TWO_IMUS, heading_estimation=ON)
    setup = problem.build(plant, config)
    free_v = np.flatnonzero(setup.free_v).astype(np.int64)
    model = HeadingModel(setup.body_index, np.ones(2), np.array([0, 1], dtype=np.int64), free_v)
    R_BS = np.stack([imu.mounting for imu in TWO_IMUS])
    rng = np.random.default_rng(5)
    q = np.asarray(plant.default_positions(), dtype=float).copy()
    q[setup.art_q] = [0.4, -0.7]
    R_WO = np.stack([rotvec_to_matrix(rng.normal(0.0, 0.3, 3)) for _ in range(2)])
    r, J, E, work = residuals(plant, model, R_BS, q, R_WO, np.zeros(2))
    schur_information(work)
    projector = np.eye(len(r)) - J @ np.linalg.pinv(J)
    np.testing.assert_allclose(work.S, E.T @ projector @ E, atol=1e-9)
    np.testing.assert_allclose(work.g, E.T @ projector @ r, atol=1e-9)


# ---------------------------------------------------------------------------------------------- observability
@pytest.mark.parametrize(("axis1", "base", "reference", "columns"), [
    ("0 1 0", "fixed", None, [0, 1]),       # horizontal first hinge: both headings observable, no reference
    ("0 0 1", "fixed", "ia", [-1, 0]),      # vertical first hinge absorbs a common heading: ia is the reference
    ("0 1 0", "floating", "ia", [-1, 0]),   # a floating base's yaw absorbs a common heading
])
def test_observability_rule_on_a_two_link_chain(axis1, base, reference, columns):
    heading = heading_filter(two_link_plant(axis1, base), EstimatorConfig(imus=TWO_IMUS, heading_estimation=ON))
    assert heading.reference == reference
    assert heading._model.column.tolist() == columns
    assert [heading.offsets()[name][2] for name in ("ia", "ib")] == [c >= 0 for c in columns]


def test_a_vertical_hinge_between_two_imus_leaves_their_relative_heading_unobservable():
    # j2 vertical (about z of link a, whose z stays vertical under the vertical j1): nothing fixes ib's heading
    plant = two_link_plant("0 0 1", "fixed", axis2="0 0 1")
    heading = heading_filter(plant, EstimatorConfig(imus=TWO_IMUS, heading_estimation=ON))
    assert heading.reference == "ia"
    assert heading.offsets()["ib"][2] is False


def test_encoders_fix_the_world_heading_of_the_arm_and_a_configured_reference_is_held(arm):
    plant, config = arm
    measured = heading_filter(plant, dataclasses.replace(config, heading_estimation=ON))
    assert measured.reference is None and all(o[2] for o in measured.offsets().values())
    everything = dataclasses.replace(config, estimated_joints={"arm": "all"}, heading_estimation=ON)
    free = heading_filter(plant, everything)
    assert free.reference == "upper_arm"  # joint 1 (vertical) absorbs a common heading once it is estimated
    assert all(o[2] for name, o in free.offsets().items() if name != "upper_arm")
    held = heading_filter(plant, dataclasses.replace(everything, heading_estimation=HeadingEstimation(
        enabled=True, reference_imu="hand")))
    assert held.reference == "hand" and held.offsets()["hand"] == (0.0, 0.0, False)


@pytest.fixture(scope="module")
def arm():
    scenario = arm_scenario(SensorNoise(), 0)
    return scenario.plant, scenario.config


# ---------------------------------------------------------------------------------------------- the filter
def hinge_chain_inputs(plant, offset_b: float, seconds: float, rate: float = 100.0):
    """Exact orientations of the 2-link chain (hinges about y, then about link a's x) moving both joints, IMU b's
    world turned by ``offset_b`` about the vertical; the messages in stamp order."""
    messages = []
    for k in range(int(seconds * rate)):
        t = k / rate
        q = np.array([0.6 * math.sin(1.3 * t), 0.8 + 0.5 * math.sin(0.9 * t + 1.0)])
        X_WB = plant.calc_body_poses(q)
        for imu, body, offset in zip(TWO_IMUS, ("a", "b"), (0.0, offset_b), strict=True):
            R = rotation_z(offset) @ X_WB[plant.get_body_by_name(body).index, :3, :3] @ imu.mounting
            messages.append((imu.name, t, matrix_to_quat(R), q))
    return messages


def test_filter_recovers_a_known_heading_offset_on_a_hinge_chain():
    # (A heading error is orthogonal to a horizontal hinge: with both hinges about y, per-frame IK would not even
    # turn it into joint error. About link a's x, tilted by q1, it does.)
    plant = two_link_plant("0 1 0", axis2="1 0 0")
    offset = math.radians(10.0)
    messages = hinge_chain_inputs(plant, offset, 3.0)
    results = {}
    for enabled in (False, True):
        config = EstimatorConfig(imus=TWO_IMUS, heading_estimation=HeadingEstimation(
            enabled=enabled, initial_deg=20.0, drift_deg_per_min=0.1, orientation_noise_deg=0.5))
        estimator = Estimator(plant, config)
        errors = []
        for name, t, quaternion, q in messages:
            for result in estimator.process_imu(name, t, quaternion, np.zeros(3))[1]:
                errors.append(np.abs(result.q - q))
        results[enabled] = (np.array(errors), estimator.heading_estimates())
    # Per-frame IK turns the offset into joint error; the filter finds the offset and removes the error.
    assert np.max(results[False][0][-50:]) > math.radians(1.0)
    estimates = results[True][1]
    assert estimates["ib"]["heading_offset_rad"] == pytest.approx(offset, abs=math.radians(0.05))
    assert estimates["ia"]["heading_offset_rad"] == pytest.approx(0.0, abs=math.radians(0.05))
    assert np.max(results[True][0][-50:]) < math.radians(0.05)


def test_filter_follows_the_simulated_drift_of_the_demo_arm():
    scenario = arm_scenario(SensorNoise(orientation_deg=0.5, heading_random_walk_deg_per_sqrt_s=1.5), 2)
    run = scenario.simulator.run(20.0)
    window = simulation_window(run, scenario.config.imu_names)
    worst = {}
    for enabled in (False, True):
        estimator = Estimator(scenario.plant, dataclasses.replace(scenario.config, heading_estimation=HeadingEstimation(
            enabled=enabled, drift_deg_per_min=1.5 * math.sqrt(60.0), orientation_noise_deg=1.0)))
        out = estimator.run(window)
        index = np.round(out.stamp * 100).astype(int)
        estimated = np.flatnonzero(estimator.setup.estimated)
        error = out.q[:, estimator.setup.art_q[estimated]] - run.truth_positions[index][:, estimated]
        worst[enabled] = np.degrees(np.sqrt(np.mean(error[-500:] ** 2, axis=0))).max()
        if enabled:
            for readings in run.imus:
                estimate = estimator.heading_estimates()[readings.name]["heading_offset_rad"]
                assert math.degrees(abs(estimate - readings.heading_error[-1])) < 1.5, readings.name
    assert worst[False] > 2.0 and worst[True] < 1.0, worst


def test_gyro_bias_is_estimated_from_the_orientation_stream_and_removed_from_velocities():
    plant = two_link_plant("0 1 0")
    bias = np.array([0.02, -0.01, 0.015])
    config = EstimatorConfig(imus=TWO_IMUS, heading_estimation=HeadingEstimation(
        enabled=True, gyro_bias_time_constant_s=2.0))
    estimator = Estimator(plant, config)
    last = None
    for k in range(2000):
        t = k / 100.0
        q = np.array([0.6 * math.sin(1.3 * t), 0.8 + 0.5 * math.sin(0.9 * t + 1.0)])
        v = np.array([0.6 * 1.3 * math.cos(1.3 * t), 0.5 * 0.9 * math.cos(0.9 * t + 1.0)])
        X_WB = plant.calc_body_poses(q)
        for imu, body in zip(TWO_IMUS, ("a", "b"), strict=True):
            index = plant.get_body_by_name(body).index
            R_WS = X_WB[index, :3, :3] @ imu.mounting
            w_S = R_WS.T @ (plant.calc_angular_jacobian(q, plant.get_body_by_name(body)) @ v) + bias
            results = estimator.process_imu(imu.name, t, matrix_to_quat(R_WS), w_S)[1]
            last = results[-1] if results else last
    for estimate in estimator.heading_estimates().values():
        np.testing.assert_allclose(estimate["gyro_bias"], bias, atol=2e-3)
    np.testing.assert_allclose(last.v, v, atol=5e-3)


# ---------------------------------------------------------------------------------------------- configuration
@pytest.mark.parametrize(("field", "value"), [("enabled", 1), ("drift_deg_per_min", 0.0),
                                              ("orientation_noise_deg", -1.0), ("initial_deg", math.nan),
                                              ("gyro_bias_time_constant_s", "30"), ("reference_imu", ""),
                                              ("acceleration_noise", -0.1)])
def test_bad_heading_settings_are_refused_naming_the_setting(field, value):
    with pytest.raises(EstimatorConfigError, match=f"heading_estimation.{field}"):
        HeadingEstimation(**{field: value})


@pytest.mark.parametrize("position", [(0.1, 0.2), (0.0, math.inf, 0.0), "up", None])
def test_a_bad_imu_position_is_refused_naming_the_imu(position):
    with pytest.raises(EstimatorConfigError, match=r"IMU 'ia' position: expected 3 finite numbers"):
        ImuConfig("ia", "a", position=position)


def test_an_unknown_reference_imu_lists_the_imus():
    with pytest.raises(UnknownNameError, match="'ia', 'ib'"):
        EstimatorConfig(imus=TWO_IMUS, heading_estimation=HeadingEstimation(enabled=True, reference_imu="ic"))
    with pytest.raises(EstimatorConfigError, match="expected HeadingEstimation"):
        EstimatorConfig(imus=TWO_IMUS, heading_estimation={"enabled": True})


# ---------------------------------------------------------------------------------------------- one rule set
def test_streaming_equals_batch_bit_for_bit_with_heading_estimation():
    noise = SensorNoise(orientation_deg=0.5, gyro=0.01, gyro_bias=0.005, heading_random_walk_deg_per_sqrt_s=1.0,
                        dropout=0.02, stamp_jitter_s=0.001, encoder_noise=2e-4)
    scenario = arm_scenario(noise, 4)
    run = scenario.simulator.run(3.0)
    window = simulation_window(run, scenario.config.imu_names)
    config = dataclasses.replace(scenario.config, heading_estimation=ON)
    batch_estimator = Estimator(scenario.plant, config)
    batch = batch_estimator.run(window)
    streaming_estimator = Estimator(scenario.plant, config)
    streamed = []
    for k in range(len(window.kind)):
        r = window.row[k]
        if window.kind[k] == 0:
            streamed += streaming_estimator.process_imu(
                config.imu_names[window.imu_sensor[r]], window.imu_stamp[r], window.imu_quaternion_wxyz[r],
                window.imu_angular_velocity[r])[1]
        else:
            streamed += streaming_estimator.process_joint_state(
                window.js_names[r], window.js_positions[r], window.js_velocities[r], stamp=window.js_stamp[r])[1]
    assert len(streamed) == len(batch.stamp) > 250
    np.testing.assert_array_equal(np.array([result.q for result in streamed]), batch.q)
    np.testing.assert_array_equal(np.array([result.v for result in streamed]), batch.v)
    for name, estimate in batch_estimator.heading_estimates().items():
        other = streaming_estimator.heading_estimates()[name]
        assert other["heading_offset_rad"] == estimate["heading_offset_rad"] != 0.0
        np.testing.assert_array_equal(other["gyro_bias"], estimate["gyro_bias"])
    # and the heading changes the solution: the same inputs without it give other joint angles
    plain = Estimator(scenario.plant, scenario.config).run(window)
    assert not np.array_equal(plain.q, batch.q)


def test_diagnostics_publish_each_imus_heading_offset_and_gyro_bias():
    plant = two_link_plant("0 1 0", axis2="1 0 0")
    for enabled in (True, False):
        config = EstimatorConfig(imus=TWO_IMUS, heading_estimation=HeadingEstimation(
            enabled=enabled, initial_deg=20.0, drift_deg_per_min=0.1, orientation_noise_deg=0.5))
        estimator = Estimator(plant, config)
        statistics = NodeStatistics(["ia", "ib"])
        for name, t, quaternion, _ in hinge_chain_inputs(plant, math.radians(10.0), 2.0):
            for result in estimator.process_imu(name, t, quaternion, np.zeros(3))[1]:
                statistics.record_output(result, t)
        message = diagnostics_message(None, "est", estimator, statistics, 2.0)
        values = {status.name: {kv.key: kv.value for kv in status.values} for status in message.status}
        if not enabled:
            assert "heading_offset_deg" not in values["est: imu ib"]
            continue
        assert float(values["est: imu ib"]["heading_offset_deg"]) == pytest.approx(10.0, abs=0.1)
        assert float(values["est: imu ia"]["heading_offset_deg"]) == pytest.approx(0.0, abs=0.1)
        assert values["est: imu ib"]["heading_observable"] == "true"
        assert 0.0 < float(values["est: imu ib"]["heading_std_deg"]) < 1.0
        assert {f"gyro_bias_rad_s.{axis}" for axis in "xyz"} <= set(values["est: imu ia"])


def test_node_parameters_declare_and_validate_the_heading_settings():
    values = {"imu_names": ["ia", "ib"], "imus.ia.body": "a", "imus.ib.body": "b",
              "heading_estimation.enabled": True, "heading_estimation.drift_deg_per_min": 5.0,
              "heading_estimation.reference_imu": "ib"}
    config = estimator_config_from_parameters(values, ["two"])
    assert config.heading_estimation == HeadingEstimation(enabled=True, drift_deg_per_min=5.0, reference_imu="ib")
    assert estimator_config_from_parameters({**values, "heading_estimation.reference_imu": ""}, ["two"]
                                            ).heading_estimation.reference_imu is None
    with pytest.raises(ParameterValueError, match=r"heading_estimation.drift_deg_per_min: expected values in"):
        estimator_config_from_parameters({**values, "heading_estimation.drift_deg_per_min": 0.0}, ["two"])
    with pytest.raises(ParameterValueError, match="unknown IMU 'ic'"):
        estimator_config_from_parameters({**values, "heading_estimation.reference_imu": "ic"}, ["two"])
    described = {spec.name for spec in NODE_PARAMETERS}
    assert {f"heading_estimation.{name}" for name in ("enabled", "drift_deg_per_min", "orientation_noise_deg",
                                                      "initial_deg", "reference_imu", "gyro_bias_time_constant_s",
                                                      "acceleration_noise")
            } <= described
    positioned = estimator_config_from_parameters({**values, "imus.ia.position": [0.1, 0.0, -0.2],
                                                   "heading_estimation.acceleration_noise": 0.5}, ["two"])
    np.testing.assert_array_equal(positioned.imus[0].position, [0.1, 0.0, -0.2])
    assert positioned.heading_estimation.acceleration_noise == 0.5
    with pytest.raises(ParameterValueError, match="imus.ia.position"):
        estimator_config_from_parameters({**values, "imus.ia.position": [0.1, 0.0]}, ["two"])


def two_branch_urdf() -> str:
    """A fixed base with two branches, each a 3-dof joint (three hinges through one point) to link a_k, then a
    hinge about a_k's y to link b_k: each branch's common heading is absorbed by its 3-dof joint."""
    limit = '<limit lower="-3" upper="3" effort="1" velocity="1"/>'
    links, joints = ['<link name="base"/>'], []
    for k, side in enumerate((1, -1)):
        chain = [f"s{k}x", f"s{k}y", f"a{k}"]
        links += [f'<link name="{name}"/>' for name in chain + [f"b{k}"]]
        parents = ["base", *chain[:2]]
        for (parent, child, axis) in zip(parents, chain, ("1 0 0", "0 1 0", "0 0 1"), strict=True):
            origin = f'<origin xyz="0 {0.2 * side} 0"/>' if parent == "base" else ""
            joints.append(f'<joint name="{child}_j" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
                          f'{origin}<axis xyz="{axis}"/>{limit}</joint>')
        joints.append(f'<joint name="b{k}_j" type="revolute"><parent link="a{k}"/><child link="b{k}"/>'
                      f'<origin xyz="0 0 -0.4"/><axis xyz="0 1 0"/>{limit}</joint>')
    return f'<robot name="branches">{"".join(links)}{"".join(joints)}</robot>'


def test_an_unobservable_direction_gets_no_information_from_noisy_cycles():
    plant = MultibodyPlant()
    plant.add_urdf(two_branch_urdf(), model_name="branches", base_joint="fixed")
    plant.finalize()
    imus = tuple(ImuConfig(f"i{body}", body) for body in ("a0", "b0", "a1", "b1"))
    config = EstimatorConfig(imus=imus, heading_estimation=HeadingEstimation(enabled=True, initial_deg=2.0))
    estimator = Estimator(plant, config)
    heading = estimator._heading
    assert heading.reference == "ia0" and [o[2] for o in heading.offsets().values()] == [False, True, False, False]
    rng = np.random.default_rng(0)
    for k in range(300):
        t = k / 100.0
        q = 0.4 * np.sin(np.arange(8) + 1.1 * t) + np.r_[0, 0, 0, 0.8, 0, 0, 0, 0.8]
        X_WB = plant.calc_body_poses(q)
        for imu in imus:
            R = X_WB[plant.get_body_by_name(imu.body).index, :3, :3] @ rotvec_to_matrix(rng.normal(0, 0.01, 3))
            estimator.process_imu(imu.name, t, matrix_to_quat(R), np.zeros(3))
    # columns: ib0, ia1, ib1; the second branch's common heading (ia1 + ib1) is unobservable
    null = np.array([0.0, 1.0, 1.0]) / math.sqrt(2.0)
    assert abs(null @ heading.delta) < 1e-12
    assert null @ heading.P @ null >= math.radians(2.0) ** 2
    assert heading.P[0, 0] < 0.1 * math.radians(2.0) ** 2  # ib0 is seen


def test_heading_estimation_is_turned_on_and_off_at_run_time():
    plant = two_link_plant("0 1 0", axis2="1 0 0")
    off = EstimatorConfig(imus=TWO_IMUS)
    estimator = Estimator(plant, off)
    assert estimator.heading_estimates() == {}
    on = dataclasses.replace(off, heading_estimation=HeadingEstimation(enabled=True, initial_deg=20.0,
                                                                       drift_deg_per_min=0.1))
    estimator.update_settings(on)
    for name, t, quaternion, _ in hinge_chain_inputs(plant, math.radians(10.0), 2.0):
        estimator.process_imu(name, t, quaternion, np.zeros(3))
    assert estimator.heading_estimates()["ib"]["heading_offset_rad"] == pytest.approx(math.radians(10.0),
                                                                                      abs=math.radians(0.1))
    estimator.update_settings(off)
    assert estimator.heading_estimates() == {}


# ------------------------------------------------------------------------------- joint-centre acceleration
def ball_joint_plant(centres=("0 0 -0.3",)):
    """Fixed base -> prismatic x -> link p -> per centre (in p) three hinges through it -> link c, c1, ..."""
    limit = '<limit lower="-3" upper="3" effort="1" velocity="1"/>'
    joints = [("base", "p", "prismatic", "1 0 0", "0 0 0")]
    for k, centre in enumerate(centres):
        tag = "" if k == 0 else str(k)
        joints += [("p", f"cx{tag}", "revolute", "1 0 0", centre),
                   (f"cx{tag}", f"cy{tag}", "revolute", "0 1 0", "0 0 0"),
                   (f"cy{tag}", f"c{tag}", "revolute", "0 0 1", "0 0 0")]
    text = '<link name="base"/>' + "".join(f'<link name="{child}"/>' for _, child, *_ in joints) + "".join(
        f'<joint name="{child}_j" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{origin}"/><axis xyz="{axis}"/>{limit}</joint>' for parent, child, kind, axis, origin in joints)
    plant = MultibodyPlant()
    plant.add_urdf(f'<robot name="ball">{text}</robot>', model_name="ball", base_joint="fixed")
    plant.finalize()
    return plant


BALL_IMUS = (SimulatedImu("ip", "p", rotation_x(0.3), np.array([0.05, 0.02, -0.1])),
             SimulatedImu("ic", "c", rotation_y(-0.5), np.array([0.03, 0.0, -0.25])))


def ball_joint_window(offsets, seconds: float, imus=BALL_IMUS, centres=("0 0 -0.3",)):
    """Exact simulated readings of IMUs on the ball-joint chain (lever arms included), IMU k + 1's world turned by
    ``offsets[k]``."""
    plant = ball_joint_plant(centres)
    trajectory = SineTrajectory(plant, seed=1, max_amplitude=0.5, max_translation=0.1, frequency_range=(0.6, 1.0))
    run = SensorSimulator(plant, imus, trajectory=trajectory, noise=SensorNoise(), seed=1).run(seconds)
    window = simulation_window(run, [imu.name for imu in imus])
    for k, offset in enumerate(offsets):
        turned = window.imu_sensor == k + 1
        R = [rotation_z(offset) @ quat_to_matrix(row) for row in window.imu_quaternion_wxyz[turned]]
        window.imu_quaternion_wxyz[turned] = np.array([matrix_to_quat(matrix) for matrix in R])
    return plant, window


def ball_config(noise: float, imus=BALL_IMUS) -> EstimatorConfig:  # exact readings: noise stands for model errors
    return EstimatorConfig(
        imus=tuple(ImuConfig(imu.name, imu.body, mounting=imu.R_BS, position=imu.p_BS) for imu in imus),
        heading_estimation=HeadingEstimation(enabled=True, reference_imu="ip", initial_deg=20.0,
                                             drift_deg_per_min=0.1, orientation_noise_deg=0.5,
                                             acceleration_noise=noise))


def test_horizontal_joint_centre_acceleration_measures_the_heading_difference():
    rng = np.random.default_rng(5)
    u_parent = np.array([1.5, -0.7, 9.0])
    for theta in rng.uniform(-3.0, 3.0, 5):
        information, gradient = acceleration_information(rotation_z(theta) @ u_parent, u_parent, 0.01)
        # |u_h|^2 = 2.74 (cos, sin) of the turn, each side's variance 0.01
        assert information == pytest.approx(math.cos(theta) * 2.74 / 0.02)
        assert gradient == pytest.approx(math.sin(theta) * 2.74 / 0.02)
        assert math.atan2(gradient, information) == pytest.approx(theta, abs=1e-12)
    # no horizontal acceleration: no information
    assert acceleration_information(np.array([0.0, 0.0, 9.8]), np.array([0.0, 0.0, 9.7]), 0.01) == (0.0, 0.0)


def test_joint_centre_acceleration_is_unbiased_when_the_noise_is_as_large_as_the_acceleration():
    # errors in variables: each side sees v (0.1 m/s^2, slowly turning) with independent noise of 0.1 per axis. Summed
    # over samples, the information is |v|^2 / (2 noise2) and the step gradient / information is tan(theta): the
    # mean-based weight |(u_c + u_p) / 2|^2 would count the noise as signal (1.5x here) and shrink the step
    rng = np.random.default_rng(11)
    theta, sigma, count = math.radians(3.0), 0.1, 400_000
    angle = np.linspace(0.0, 40.0, count)
    v = 0.1 * np.stack([np.cos(angle), np.sin(angle), np.zeros(count)], axis=1)
    u_parent = v + sigma * rng.standard_normal((count, 3))
    u_child = v @ rotation_z(theta).T + sigma * rng.standard_normal((count, 3))
    sums = np.sum([acceleration_information(c, p, sigma ** 2) for c, p in zip(u_child, u_parent, strict=True)],
                  axis=0)
    assert sums[0] / count == pytest.approx(math.cos(theta) * 0.01 / (2 * sigma ** 2), rel=0.02)
    assert math.atan2(sums[1], sums[0]) == pytest.approx(theta, abs=math.radians(0.15))


def test_offsets_relative_to_a_reference_walk_together_with_it():
    # the prediction: P grows by rate2 dt (I + c c^T), c = 1 for an offset relative to the reference (its own walk
    # moves it: the covariance of differences of independent walks), 0 for one that is not; an offset at the
    # variance ceiling stops growing
    m, dt, rate2 = 3, 2.0, 0.3
    common = np.array([1.0, 1.0, 0.0])
    work = new_work(two_link_plant("0 0 1").tree.kernel_arguments(), 2, 3, 2, m)
    delta, P, S, g = np.zeros(m), np.zeros((m, m)), np.zeros((m, m)), np.zeros(m)
    assert information_update(delta, P, S, g, dt, rate2, common, 1.0, work)
    np.testing.assert_allclose(P, rate2 * dt * (np.eye(m) + np.outer(common, common)), rtol=1e-12)
    walks = np.random.default_rng(2).normal(0.0, math.sqrt(rate2 * dt), (200_000, m + 1))
    differences = walks[:, 1:] - walks[:, :1] * np.r_[common, 0.0][None, :m]  # relative to walk 0 (the reference)
    np.testing.assert_allclose(np.cov(differences.T), P, atol=0.01)
    P[:, :] = 0.0
    P[0, 0] = MAX_HEADING_STD ** 2
    assert information_update(delta, P, S, g, dt, rate2, common, 1.0, work)
    assert P[0, 0] == MAX_HEADING_STD ** 2 and P[0, 1] == 0.0
    assert P[1, 1] == pytest.approx(2 * rate2 * dt) and P[2, 2] == pytest.approx(rate2 * dt) and P[1, 2] == 0.0


def test_the_offsets_relative_to_the_reference_are_those_it_shares_an_unseen_heading_with():
    floating = lower_body_scenario(session_noise(3.0), 0)
    legs = heading_filter(floating.plant, dataclasses.replace(floating.config, heading_estimation=ON))
    assert legs.reference == "pelvis" and legs._common.tolist() == pytest.approx([1.0] * 6)
    fixed = heading_filter(two_link_plant("1 0 0"), EstimatorConfig(imus=TWO_IMUS, heading_estimation=ON))
    assert fixed.reference is None and fixed._common.tolist() == [0.0, 0.0]
    # a fixed base seen through two ball joints: ia0 is branch 0's reference; branch 1 is not relative to it
    plant = MultibodyPlant()
    plant.add_urdf(two_branch_urdf(), model_name="branches", base_joint="fixed")
    plant.finalize()
    branches = heading_filter(plant, EstimatorConfig(imus=tuple(ImuConfig(f"i{body}", body) for body in (
        "a0", "b0", "a1", "b1")), heading_estimation=ON))
    assert branches.reference == "ia0" and branches._common.tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)


def test_joint_pairs_find_the_ball_joint_and_no_hinge():
    plant = ball_joint_plant()
    heading = Estimator(plant, ball_config(0.3))._heading
    assert [heading.pairs.child.tolist(), heading.pairs.parent.tolist()] == [[1], [0]]
    hinge = Estimator(two_link_plant("0 1 0", axis2="1 0 0"), EstimatorConfig(
        imus=TWO_IMUS, heading_estimation=HeadingEstimation(enabled=True, reference_imu="ia")))._heading
    assert hinge.pairs.child.shape == (0,)


def test_joint_centre_acceleration_recovers_the_heading_offset_behind_a_ball_joint():
    offset = math.radians(12.0)
    plant, window = ball_joint_window([offset], 6.0)
    estimates = {}
    for noise in (0.0, 0.1):
        estimator = Estimator(plant, ball_config(noise))
        estimator.run(window)
        estimates[noise] = estimator.heading_estimates()["ic"]
    # orientations alone: the ball joint absorbs ic's heading (no information, the estimate stays at its start)
    assert estimates[0.0]["heading_offset_rad"] == 0.0
    assert estimates[0.0]["heading_std_rad"] > math.radians(19.0)
    assert estimates[0.1]["heading_offset_rad"] == pytest.approx(offset, abs=math.radians(0.3))
    assert estimates[0.1]["heading_std_rad"] < math.radians(0.5)
    # observable: not from orientations alone, but through the joint centre's acceleration
    assert not estimates[0.0]["observable"] and estimates[0.1]["observable"]


def ic_offset_in_both_paths(plant, window, config) -> float:
    """ic's heading offset estimate after the batch run of ``window`` and after feeding it message by message to
    the streaming entry point, which must give the same q and offset bit for bit."""
    batch_estimator = Estimator(plant, config)
    batch = batch_estimator.run(window)
    streaming_estimator = Estimator(plant, config)
    streamed = []
    for k in range(len(window.kind)):
        r = window.row[k]
        streamed += streaming_estimator.process_imu(
            config.imu_names[window.imu_sensor[r]], window.imu_stamp[r], window.imu_quaternion_wxyz[r],
            window.imu_angular_velocity[r], linear_acceleration=window.imu_linear_acceleration[r])[1]
    np.testing.assert_array_equal(np.array([result.q for result in streamed]), batch.q)
    batch_offset = batch_estimator.heading_estimates()["ic"]["heading_offset_rad"]
    assert streaming_estimator.heading_estimates()["ic"]["heading_offset_rad"] == batch_offset
    return batch_offset


def test_streaming_equals_batch_bit_for_bit_with_the_joint_centre_acceleration():
    plant, window = ball_joint_window([math.radians(12.0)], 1.5)
    assert ic_offset_in_both_paths(plant, window, ball_config(0.3)) != 0.0


def test_one_parent_imu_serves_two_ball_joints_with_their_own_lever_arms():
    # like a pelvis IMU and two hips: each joint end's lever arm points to its own centre
    imus = (*BALL_IMUS, SimulatedImu("ic1", "c1", rotation_x(-0.4), np.array([0.0, 0.04, -0.2])))
    offsets = [math.radians(12.0), math.radians(-7.0)]
    plant, window = ball_joint_window(offsets, 6.0, imus, centres=("0 0.15 -0.3", "0 -0.15 -0.3"))
    estimator = Estimator(plant, ball_config(0.1, imus))
    assert estimator._heading.pairs.parent.tolist() == [0, 0]
    estimator.run(window)
    estimates = estimator.heading_estimates()
    for name, offset in zip(("ic", "ic1"), offsets, strict=True):
        assert estimates[name]["heading_offset_rad"] == pytest.approx(offset, abs=math.radians(0.3))


# ------------------------------------------------------------------------------------ the lower body walking
LEG_OFFSETS_DEG = {"left_upper_leg": 8.0, "left_lower_leg": 9.0, "left_foot": 7.0, "right_upper_leg": -6.0,
                   "right_lower_leg": -5.0, "right_foot": -6.5}


def turned_lower_body_window(gait: bool, seconds: float):
    """A lower-body session (benchmarks/drift.py's scenario: walking or slow sines) with white sensor noise and no
    drift, each leg IMU's world turned by a constant :data:`LEG_OFFSETS_DEG` (the pelvis' is the reference)."""
    scenario = lower_body_scenario(session_noise(0.0), 0, gait=gait)
    window = simulation_window(scenario.simulator.run(seconds), scenario.config.imu_names)
    for k, name in enumerate(scenario.config.imu_names):
        if name in LEG_OFFSETS_DEG:
            turned = window.imu_sensor == k
            R = rotation_z(math.radians(LEG_OFFSETS_DEG[name])) @ quat_to_matrix(window.imu_quaternion_wxyz[turned])
            window.imu_quaternion_wxyz[turned] = matrix_to_quat(R)
    return scenario, window


def test_the_hip_centres_acceleration_makes_each_legs_heading_observable():
    scenario = lower_body_scenario(SensorNoise(), 0)
    for noise, legs in ((0.3, True), (0.0, False)):
        config = dataclasses.replace(scenario.config, heading_estimation=HeadingEstimation(
            enabled=True, acceleration_noise=noise))
        estimates = Estimator(scenario.plant, config).heading_estimates()
        assert [estimates[name]["observable"] for name in LEG_OFFSETS_DEG] == [legs] * 6
        assert estimates["pelvis"]["observable"] is False and estimates["pelvis"]["heading_std_rad"] == 0.0


def test_walking_recovers_each_legs_heading_behind_its_hip():
    # orientations fix each leg's segments relative to each other (knee hinge, 2-dof ankle); only the hip centre's
    # horizontal acceleration, seen from the pelvis and the thigh, fixes the leg's heading relative to the pelvis
    config_settings = HeadingEstimation(enabled=True, initial_deg=10.0, drift_deg_per_min=0.1)
    errors = {}
    for gait in (True, False):
        scenario, window = turned_lower_body_window(gait, 20.0)
        config = dataclasses.replace(scenario.config, heading_estimation=config_settings)
        estimator = Estimator(scenario.plant, config)
        estimator.run(window)
        estimates = estimator.heading_estimates()
        errors[gait] = [math.degrees(estimates[name]["heading_offset_rad"]) - offset
                        for name, offset in LEG_OFFSETS_DEG.items()]
    assert np.max(np.abs(errors[True])) < 0.5
    # the slow sines move the hip centres by ~0.1 m/s^2: far less information in the same time
    assert np.max(np.abs(errors[False])) > 2.0 * np.max(np.abs(errors[True]))


def test_chain_information_of_a_ball_joint_turns_the_child_about_the_vertical_and_sees_nothing():
    # behind a ball joint the child's heading offset is absorbed: no information from exact orientations, and an
    # estimated offset larger by dd turns the corrected observation, hence the solved child, by exactly -dd about
    # the world vertical
    plant = ball_joint_plant()
    config = ball_config(0.1)
    heading = HeadingFilter(problem.build(plant, config), config.heading_estimation, config.stale_timeout_s,
                            [imu.position for imu in config.imus])
    R_BS = np.stack([imu.mounting for imu in config.imus])
    rng = np.random.default_rng(3)
    child = plant.get_body_by_name("c")
    body = child.index
    for q in rng.uniform(-1.0, 1.0, (4, plant.num_positions())):
        chain = heading.chain_information(q, R_BS)
        assert chain.S.shape == (1, 1) and abs(chain.S[0, 0]) < 1e-9
        free = np.flatnonzero(problem.build(plant, config).free_v)
        turn = np.asarray(plant.calc_angular_jacobian(q, child))[:, free] @ chain.dq_dd[:, 0]
        np.testing.assert_allclose(turn, [0.0, 0.0, -1.0], atol=1e-9)
        X_WB = plant.calc_body_poses(q)
        np.testing.assert_allclose(chain.R_WS[1], X_WB[body, :3, :3] @ R_BS[1], atol=1e-12)
        np.testing.assert_allclose(chain.p_WS[1], X_WB[body, :3, :3] @ BALL_IMUS[1].p_BS + X_WB[body, :3, 3],
                                   atol=1e-12)
        np.testing.assert_allclose(chain.p_WJ[0], X_WB[plant.get_body_by_name("cx").index, :3, 3], atol=1e-12)
