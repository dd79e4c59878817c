"""replay/inputs.py (and the batched reader's use of it): a bag's nav_msgs/Odometry drives the base as on the live
node; the batched and the streaming replay give the same output bytes; bad odometry (NaN, another frame) is dropped
and counted; a wrong message type on the odometry topic is refused before anything is written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
from ros_dofkit.replay.bag_replay import replay_bag
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.record import SimulationRecord, simulation_records
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.bag_io import BagError, BagWriter, read_bag
from ros_dofkit.ros.parameters import load_parameter_file

CONFIG = Path(__file__).resolve().parents[1] / "config"


def mobile_setup(**extra):
    values = load_parameter_file(CONFIG / "mobile_manipulator.yaml")
    return ReplaySetup.from_parameters({**values, "odometry_topic": "odom", "world_frame": "odom", **extra})


def bag_with_odometry(tmp_path, setup, bad=True):
    """A simulated second of the mobile manipulator with 50 Hz odometry of the true base (and, with ``bad``, one
    NaN and one wrong-frame message); returns (bag, run, {stamp_ns: base x, y})."""
    plant = setup.plant
    estimated = set(setup.config.estimated_joints["base"]) | set(setup.config.estimated_joints["arm"])
    measured = [n for n in plant.articulated_view().position_names()
                if n not in estimated and n not in ("base_link_x", "base_link_y")]
    imus = [SimulatedImu(imu.name, imu.body) for imu in setup.config.imus]
    run = SensorSimulator(plant, imus, measured, SineTrajectory(plant, seed=5, max_amplitude=0.3, max_translation=0.5),
                          imu_rate_hz=100.0, encoder_rate_hz=100.0, seed=5).run(1.0, start_s=1.0)
    factory = MessageFactory()
    records = list(simulation_records(run, factory, {imu.name: f"/{imu.topic}" for imu in setup.config.imus}))
    base = plant.get_body_by_name("base_link").index
    poses = {}
    for k in range(0, len(run.times), 2):
        stamp_ns = int(round(run.times[k] * 1e9))
        X_WB = plant.calc_body_poses(run.q[k])[base]
        poses[stamp_ns] = X_WB[:2, 3].copy()
        records.append(SimulationRecord("/odom", stamp_ns, factory.odometry(stamp_ns, "odom", "base_link", X_WB,
                                                                           np.zeros(3), np.zeros(3))))
    if bad:
        t = int(round(run.times[31] * 1e9))
        X = np.eye(4)
        X[1, 3] = math.nan
        records.append(SimulationRecord("/odom", t, factory.odometry(t, "odom", "base_link", X, np.zeros(3),
                                                                     np.zeros(3))))
        records.append(SimulationRecord("/odom", t + 1, factory.odometry(t + 1, "map", "base_link", np.eye(4),
                                                                         np.zeros(3), np.zeros(3))))
    records.sort(key=lambda record: (record.stamp_ns, record.topic != "/odom"))  # an instant's odometry first
    bag = tmp_path / "mobile"
    with BagWriter(bag, typestore=factory.typestore) as writer:
        writer.write_all(records)
    return bag, run, poses


def test_a_bags_odometry_drives_the_base_the_same_on_both_replay_paths(tmp_path):
    setup = mobile_setup()
    assert setup.odometry_topic == "/odom" and setup.odometry_frames == ("odom", "base_link")
    bag, _, poses = bag_with_odometry(tmp_path, setup)
    batch = replay_bag(bag, setup, tmp_path / "batch", batch=True)
    stream = replay_bag(bag, setup, tmp_path / "stream", batch=False)
    topic = "/estimated/base/joint_states"
    batch_messages = list(read_bag(tmp_path / "batch", topics=[topic]))
    stream_messages = list(read_bag(tmp_path / "stream", topics=[topic]))
    assert len(batch_messages) == len(stream_messages) > 90
    stamps = np.array(sorted(poses))
    for a, b in zip(batch_messages, stream_messages, strict=True):
        assert a.stamp_ns == b.stamp_ns
        np.testing.assert_array_equal(a.message.position, b.message.position)
        np.testing.assert_array_equal(a.message.velocity, b.message.velocity)
        newest = stamps[stamps <= a.stamp_ns][-1]  # the newest odometry not after the cycle
        np.testing.assert_allclose(a.message.position[:2], poses[newest], atol=1e-12)
    assert batch.statistics.rejected == stream.statistics.rejected >= 2  # the NaN and the wrong-frame odometry


def test_the_odometry_topic_must_carry_odometry(tmp_path):
    setup = mobile_setup(odometry_topic="imu/hand/data")
    bag, _, _ = bag_with_odometry(tmp_path, mobile_setup(), bad=False)
    with pytest.raises(BagError, match="nav_msgs/msg/Odometry"):
        replay_bag(bag, setup, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bags_imu_covariances_weight_both_replay_paths_alike(tmp_path):
    """imu_covariance_weighting on a bag whose forearm IMU is 0.05 rad off with a 1e-2 rad² covariance and whose
    other IMUs state 1e-6: both replay paths read the covariances from the bag and give the same bits; the bad
    covariance (NaN) is dropped on both; weighting brings the arm nearer the truth than the configured weights."""
    from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotvec_to_matrix

    setup = mobile_setup()
    bag, run, _ = bag_with_odometry(tmp_path, setup, bad=False)
    records = []
    for record in read_bag(bag):
        message = record.message
        if record.topic.startswith("/imu/"):
            variance = 1e-6
            if record.topic == "/imu/forearm/data":
                variance = 1e-2
                o = message.orientation
                w, x, y, z = matrix_to_quat(quat_to_matrix([o.w, o.x, o.y, o.z]) @ rotvec_to_matrix([0.05, 0, 0]))
                o.w, o.x, o.y, o.z = float(w), float(x), float(y), float(z)
            message.orientation_covariance = (variance * np.eye(3)).reshape(-1)
            if record.topic == "/imu/hand/data" and record.stamp_ns == int(round(run.times[50] * 1e9)):
                message.orientation_covariance = np.full(9, np.nan)
        records.append((record.topic, record.stamp_ns, message))
    weighted = tmp_path / "weighted"
    with BagWriter(weighted, typestore=MessageFactory().typestore) as writer:
        writer.write_all(records)
    topic = "/estimated/joint_states"
    errors = {}
    for weighting in (True, False):
        setup = mobile_setup(imu_covariance_weighting=weighting)
        out = {}
        for batch in (True, False):
            path = tmp_path / f"{weighting}-{batch}"
            out[batch] = (replay_bag(weighted, setup, path, batch=batch), list(read_bag(path, topics=[topic])))
        (batch_replay, batch_messages), (stream_replay, stream_messages) = out[True], out[False]
        assert len(batch_messages) == len(stream_messages) > 90
        for a, b in zip(batch_messages, stream_messages, strict=True):
            assert a.stamp_ns == b.stamp_ns
            np.testing.assert_array_equal(a.message.position, b.message.position)
            np.testing.assert_array_equal(a.message.velocity, b.message.velocity)
        assert batch_replay.statistics.rejected == stream_replay.statistics.rejected == (1 if weighting else 0)
        names = list(batch_messages[0].message.name)
        columns = [names.index(f"arm_joint{i}") for i in range(4, 8)]
        truth = {int(round(t * 1e9)): q for t, q in zip(run.times, run.q, strict=True)}
        view = setup.plant.articulated_view()
        q_index = [int(view.q_indices[list(view.position_names()).index(f"arm_joint{i}")]) for i in range(4, 8)]
        errors[weighting] = np.sqrt(np.mean([(np.asarray(m.message.position)[columns] - truth[m.stamp_ns][q_index])
                                             ** 2 for m in batch_messages[10:] if m.stamp_ns in truth]))
    print(f"arm RMS error with / without covariance weighting: {errors[True]:.5f} / {errors[False]:.5f} rad")
    assert errors[True] < 0.7 * errors[False]  # (the forearm alone sees some directions: the bias stays there)


def test_truth_from_blocks_equals_truth_from_the_same_records_one_by_one():
    """The batched reader's truth blocks give the Truth the records give one by one: records with other names or
    another width left out, sorted by stamp with the first of equal stamps kept (so a later repeat is dropped
    whichever block holds it), and None with fewer than two usable records."""
    from ros_dofkit.replay.inputs import truth_from_blocks, truth_from_records

    rng = np.random.default_rng(5)
    names, other = ("a", "b"), ("a", "c")
    stamps = np.array([30, 10, 20, 20, 40, 50, 40], dtype=np.int64) * 1_000_000
    positions = rng.normal(size=(len(stamps), 2))
    labels = [names, names, other, names, names, names, names]
    records = [(int(s), n, p) for s, n, p in zip(stamps, labels, positions, strict=True)]
    # blocks of consecutive records sharing their names, as offline_inputs_from_raw cuts them
    blocks = [(stamps[:2], names, positions[:2]), (stamps[2:3], other, positions[2:3]),
              (stamps[3:5], names, positions[3:5]), (stamps[5:], names, positions[5:])]
    expected, got = truth_from_records(records), truth_from_blocks(blocks)
    assert got.names == expected.names == names
    np.testing.assert_array_equal(got.stamps, expected.stamps)
    np.testing.assert_array_equal(got.positions, expected.positions)
    np.testing.assert_array_equal(got.stamps, np.array([10, 20, 30, 40, 50], dtype=np.int64) * 1_000_000 * 1e-9)
    np.testing.assert_array_equal(got.positions[3], positions[4])  # the first of the two stamps 40, another block's
    assert truth_from_blocks([(stamps[:1], names, positions[:1])]) is None
    assert truth_from_blocks([(stamps[:1], names, positions[:1]), (stamps[2:3], other, positions[2:3])]) is None
    assert truth_from_blocks([]) is None
