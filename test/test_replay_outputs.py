"""replay/outputs.py: the Odometry a replay writes carries the node's solve covariance (the same
SolveCovarianceModel and BaseOdometry as the node), on the batched and the streaming path alike, for a floating
base (quadruped.yaml) and a planar one (mobile_manipulator.yaml), whose twist is checked against the truth."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.odometry import UNOBSERVED_VARIANCE, SolveCovarianceModel, base_odometries
from ros_dofkit.core.estimator.setup import build
from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.replay.bag_replay import replay_bag
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.bag_io import BagWriter, read_bag
from ros_dofkit.ros.parameters import load_parameter_file

CONFIG = Path(__file__).resolve().parents[1] / "config"


def simulated_bag(tmp_path, setup, imus, name):
    plant = setup.plant
    measured = [n for n, e in zip(plant.articulated_view().position_names(), setup_estimated(setup), strict=True)
                if not e]
    trajectory = SineTrajectory(plant, seed=4, max_amplitude=0.3, max_translation=0.2)
    run = SensorSimulator(plant, imus, measured, trajectory, imu_rate_hz=100.0, encoder_rate_hz=100.0,
                          seed=4).run(1.0, start_s=1.0)
    factory = MessageFactory()
    bag = tmp_path / name
    topics = {imu.name: f"/{setup.config.imu(imu.name).topic}" for imu in imus}
    with BagWriter(bag, typestore=factory.typestore) as writer:
        writer.write_all(simulation_records(run, factory, topics))
    return bag, run


def setup_estimated(setup):
    return build(setup.plant, setup.config).estimated


def odometry_messages(out, instance):
    return [r.message for r in read_bag(out, topics=[f"/estimated/odometry/{instance}"])]


@pytest.mark.parametrize("batch", [True, False])
def test_floating_base_odometry_carries_the_solve_covariance(tmp_path, batch):
    setup = ReplaySetup.from_parameter_file(CONFIG / "quadruped.yaml")
    bag, _ = simulated_bag(tmp_path, setup, [SimulatedImu("trunk", "trunk_imu_link")], "quadruped")
    out = tmp_path / "out"
    replay_bag(bag, setup, out, batch=batch)
    messages = odometry_messages(out, "quadruped")
    assert len(messages) >= 95
    stddev = 0.01  # the parameters' default imu_orientation_stddev and imu_angular_velocity_stddev
    for message in messages:
        pose = np.asarray(message.pose.covariance).reshape(6, 6)
        twist = np.asarray(message.twist.covariance).reshape(6, 6)
        # One IMU on the trunk, weight 1: the trunk rotation has the IMU's own variance on every axis; the held
        # translation and its rate are unobserved, never 0.
        np.testing.assert_allclose(pose[3:, 3:], stddev**2 * np.eye(3), atol=1e-12)
        np.testing.assert_allclose(twist[3:, 3:], stddev**2 * np.eye(3), atol=1e-12)
        assert np.all(np.diag(pose)[:3] == UNOBSERVED_VARIANCE) and np.all(np.diag(twist)[:3] == UNOBSERVED_VARIANCE)


def test_planar_base_gets_an_odometry_output_with_its_heading_covariance_and_twist(tmp_path):
    """mobile_manipulator.yaml: the base heading (base_link_qz) is estimated from the base IMU, x and y are
    measured. The Odometry (header world, child base_link) has the heading's variance from the solve, the rest
    large; its twist is the base's in its own frame (REP-105), against the simulated truth; the batched and
    streaming replays write the same messages."""
    setup = ReplaySetup.from_parameter_file(CONFIG / "mobile_manipulator.yaml")
    imus = [SimulatedImu("base", "base_imu_link"), SimulatedImu("forearm", "arm_link5"),
            SimulatedImu("hand", "arm_link7")]
    bag, run = simulated_bag(tmp_path, setup, imus, "mobile")
    replay_bag(bag, setup, tmp_path / "batch", batch=True)
    replay_bag(bag, setup, tmp_path / "stream", batch=False)
    batch, stream = odometry_messages(tmp_path / "batch", "base"), odometry_messages(tmp_path / "stream", "base")
    assert len(batch) >= 95 and len(batch) == len(stream)
    joint = next(j for j in (setup.plant.get_joint(i) for i in range(setup.plant.num_joints()))
                 if j.type_name == "planar")
    vs = joint.velocity_start
    by_stamp = {int(round(t * 1e9)): k for k, t in enumerate(run.times)}
    checked = 0
    for a, b in zip(batch, stream, strict=True):
        np.testing.assert_array_equal(a.pose.covariance, b.pose.covariance)
        np.testing.assert_array_equal(a.twist.covariance, b.twist.covariance)
        assert (a.header.frame_id, a.child_frame_id) == ("world", "base_link")
        pose = np.asarray(a.pose.covariance).reshape(6, 6)
        twist = np.asarray(a.twist.covariance).reshape(6, 6)
        assert 0 < pose[5, 5] < 1e-3 and 0 < twist[5, 5] < 1e-3  # the estimated heading and its rate
        np.testing.assert_allclose(np.diag(pose)[:5], UNOBSERVED_VARIANCE, rtol=1e-12)
        np.testing.assert_allclose(np.diag(twist)[:5], UNOBSERVED_VARIANCE, rtol=1e-12)  # turned into B by R_BF
        stamp = a.header.stamp.sec * 1_000_000_000 + a.header.stamp.nanosec
        k = by_stamp.get(stamp)
        if k is None or checked > 60:
            continue
        theta = run.q[k, joint.position_start + 2]
        c, s = math.cos(theta), math.sin(theta)
        xdot, ydot, thetadot = run.v[k, vs:vs + 3]
        if checked > 5:  # the first cycles' velocities come from finite differences of a cold start
            np.testing.assert_allclose([a.twist.twist.angular.x, a.twist.twist.angular.y, a.twist.twist.angular.z],
                                       [0.0, 0.0, thetadot], atol=1e-6)
            np.testing.assert_allclose([a.twist.twist.linear.x, a.twist.twist.linear.y],
                                       [c * xdot + s * ydot, -s * xdot + c * ydot], atol=1e-6)
        checked += 1
    assert checked > 50


def test_a_planar_base_whose_heading_is_measured_reports_it_unobserved():
    """With the heading not estimated (estimated.base: [none]) the whole pose is unobserved by the IMUs."""
    values = load_parameter_file(CONFIG / "mobile_manipulator.yaml")
    setup = ReplaySetup.from_parameters({**values, "estimated.base": ["none"]})
    estimator = Estimator(setup.plant, setup.config)
    (base,) = base_odometries(setup.plant)
    covariances = SolveCovarianceModel(estimator, 1e-4, 1e-4).at(setup.plant.default_positions(),
                                                                  np.ones(3, dtype=bool))
    covariance = base.covariance(np.eye(3), covariances)
    assert np.all(np.diag(covariance.pose) == UNOBSERVED_VARIANCE)
    assert np.all(np.diag(covariance.twist) == UNOBSERVED_VARIANCE)
