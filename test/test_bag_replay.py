"""``dofkit record`` -> ``dofkit replay``: the estimate reproduces the simulated truth (sqlite3 and mcap), outputs
are the node's topics (TF checked against forward kinematics), the input bag is untouched, bad bags are rejected
with the message a user needs, and a clock jump back in the bag resets tracking."""

from __future__ import annotations

import gc
import hashlib
import math
import shutil
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from ros_dofkit import cli
from ros_dofkit.core.spatial import quat_to_matrix
from ros_dofkit.replay import bag_replay
from ros_dofkit.replay.bag_replay import collector_paused, replay_bag
from ros_dofkit.replay.demo import DemoOptions, simulate_demo
from ros_dofkit.replay.demo_robot import build_demo_robot
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import Truth
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.bag_io import BagError, BagWriter, read_bag


def tree_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in Path(path).rglob("*") if p.is_file()):
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def record(tmp_path, name, *args):
    status = cli.main(["record", str(tmp_path / name), *args])
    assert status == 0
    return tmp_path / name, tmp_path / f"{name}.estimator.yaml"


def truth_messages(bag):
    return {r.stamp_ns: r.message for r in read_bag(bag, topics=["/ground_truth/joint_states"])}


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_exact_recording_is_reproduced_to_solver_precision(tmp_path, storage, capsys):
    bag, config = record(tmp_path, "exact", "--storage", storage, "--duration", "2", "--noise", "none",
                         "--encoder-rate", "100", "--clock")
    before = tree_hash(bag)
    out = tmp_path / "estimated"
    status = cli.main(["replay", str(bag), "--config", str(config), "--out", str(out), "--storage", storage,
                       "--quiet", "--plot", str(tmp_path / "replay.png")])
    text = capsys.readouterr().out
    assert status == 0, text
    assert tree_hash(bag) == before  # the input bag is never modified
    assert (tmp_path / "replay.png").read_bytes().startswith(b"\x89PNG")
    assert "arm_joint5" in text and "RMS" in text

    truth = truth_messages(bag)
    estimates = list(read_bag(out, topics=["/estimated/joint_states"]))
    assert len(estimates) >= 195
    compared = 0
    for record_ in estimates:
        message = record_.message
        stamp_ns = message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        assert stamp_ns == record_.stamp_ns
        if stamp_ns not in truth:
            continue
        expected = dict(zip(truth[stamp_ns].name, truth[stamp_ns].position, strict=True))
        for name, value in zip(message.name, message.position, strict=True):
            assert value == pytest.approx(expected[name], abs=1e-8), (name, stamp_ns)
        compared += 1
    assert compared >= 195
    per_instance = list(read_bag(out, topics=["/estimated/arm/joint_states"]))
    assert len(per_instance) == len(estimates)
    assert tuple(per_instance[0].message.name) == tuple(f"arm_joint{i}" for i in range(1, 8))


def test_tf_output_composes_to_forward_kinematics_of_the_truth(tmp_path):
    bag, config = record(tmp_path, "tf", "--duration", "1", "--noise", "none", "--encoder-rate", "100")
    setup = ReplaySetup.from_parameter_file(config)
    out = tmp_path / "tf_out"
    replay_bag(bag, setup, out)
    static = {}
    for r in read_bag(out, topics=["/tf_static"]):
        for t in r.message.transforms:
            static[t.child_frame_id] = (t.header.frame_id, t.transform)
    truth = truth_messages(bag)
    plant = setup.plant
    checked = 0
    for r in read_bag(out, topics=["/tf"]):
        if r.stamp_ns not in truth:
            continue
        frames = dict(static)
        for t in r.message.transforms:
            assert t.header.stamp.sec * 1_000_000_000 + t.header.stamp.nanosec == r.stamp_ns
            frames[t.child_frame_id] = (t.header.frame_id, t.transform)

        def pose(frame, frames=frames):
            if frame == "world":
                return np.eye(4)
            parent, transform = frames[frame]
            X = np.eye(4)
            rot = transform.rotation
            X[:3, :3] = quat_to_matrix([rot.w, rot.x, rot.y, rot.z])
            X[:3, 3] = [transform.translation.x, transform.translation.y, transform.translation.z]
            return pose(parent, frames) @ X

        q = np.zeros(plant.num_positions())
        names = list(plant.position_names())
        for name, value in zip(truth[r.stamp_ns].name, truth[r.stamp_ns].position, strict=True):
            q[names.index(name)] = value
        for link in ("arm_link7", "arm_tool", "arm_link3"):
            np.testing.assert_allclose(pose(link), plant.calc_frame_pose(q, link), atol=1e-8)
        checked += 1
    assert checked > 50


def test_noisy_recording_meets_the_demo_accuracy_and_refuses_overwrites(tmp_path, capsys):
    bag, config = record(tmp_path, "noisy", "--duration", "3")
    setup = ReplaySetup.from_parameter_file(config)
    outcome = replay_bag(bag, setup, tmp_path / "noisy_out")
    report = outcome.report
    assert report.meets(2.0)
    assert set(report.joint_names[:5]) == {f"arm_joint{i}" for i in range(3, 8)}
    assert np.all(report.rms_deg[report.estimated] > 0.05)  # noise is there, and the estimate is not the truth
    capsys.readouterr()
    assert cli.main(["record", str(bag)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert cli.main(["replay", str(bag), "--config", str(config), "--out", str(tmp_path / "noisy_out"),
                     "--quiet"]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err


def bag_storage_file(bag: Path) -> Path:
    return next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_bags_are_rejected_with_a_clear_message(tmp_path, storage, damage, capsys):
    bag, config = record(tmp_path, "damaged", "--storage", storage, "--duration", "2")
    storage_file = bag_storage_file(bag)
    data = bytearray(storage_file.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        rng = np.random.default_rng(0)
        start = len(data) // 3
        data[start:start + len(data) // 3] = rng.integers(0, 256, len(data) // 3, dtype=np.uint8).tobytes()
    storage_file.write_bytes(bytes(data))
    before = tree_hash(bag)
    capsys.readouterr()
    out = tmp_path / "damaged_out"
    status = cli.main(["replay", str(bag), "--config", str(config), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("dofkit replay: error:")
    assert "Traceback" not in err
    assert str(bag) in err and ("corrupt" in err or "cannot read" in err), err
    assert not out.exists()  # no half-written output is left behind
    assert tree_hash(bag) == before


def test_reading_and_writing_beside_the_estimation_writes_the_sequential_bytes(tmp_path, monkeypatch):
    """On more than one core the batched replay reads and writes in threads of their own (replay.overlap): the
    output bag is byte for byte the one-thread bag, whatever the window; a window that cannot be decoded leaves
    no output and no thread behind."""
    bag, config = record(tmp_path, "overlap", "--duration", "2")
    setup = ReplaySetup.from_parameter_file(config)
    monkeypatch.setattr(bag_replay, "usable_cores", lambda: 1)
    (tmp_path / "sequential").mkdir()
    replay_bag(bag, setup, tmp_path / "sequential" / "out", window=300)
    monkeypatch.setattr(bag_replay, "usable_cores", lambda: 2)
    threads = threading.active_count()
    for window in (300, 1000, 10**9):
        (tmp_path / f"overlapped_{window}").mkdir()
        replay_bag(bag, setup, tmp_path / f"overlapped_{window}" / "out", window=window)
        assert tree_hash(tmp_path / f"overlapped_{window}") == tree_hash(tmp_path / "sequential")
    assert threading.active_count() == threads

    damaged = tmp_path / "damaged"
    shutil.copytree(bag, damaged)
    database = bag_storage_file(damaged)
    with sqlite3.connect(database) as connection:  # one IMU message late in the bag loses its body
        connection.execute("UPDATE messages SET data = substr(data, 1, 20) WHERE id = (SELECT max(id) FROM messages "
                           "WHERE topic_id = (SELECT id FROM topics WHERE type = 'sensor_msgs/msg/Imu' LIMIT 1))")
    with pytest.raises(BagError, match="cannot be decoded"):
        replay_bag(damaged, setup, tmp_path / "damaged_out", window=300)
    assert not (tmp_path / "damaged_out").exists()
    assert not any(path.name.startswith(".damaged_out") for path in tmp_path.iterdir())
    assert threading.active_count() == threads


def test_wrong_types_missing_topics_and_missing_bags_are_named(tmp_path, capsys):
    _, config = record(tmp_path, "reference", "--duration", "1")
    factory = MessageFactory()
    String = factory.typestore.types["std_msgs/msg/String"]
    wrong = tmp_path / "wrong_type"
    with BagWriter(wrong) as writer:
        writer.write("/joint_states", 1_000_000_000, String(data="not a joint state"))
        writer.write("/imu/hand/data", 1_000_000_000, factory.joint_state(1_000_000_000, ["a"], [0.0]))
    capsys.readouterr()
    assert cli.main(["replay", str(wrong), "--config", str(config), "--out", str(tmp_path / "o1"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "topic /imu/hand/data carries sensor_msgs/msg/JointState" in err and "sensor_msgs/msg/Imu" in err, err

    unrelated = tmp_path / "unrelated"
    with BagWriter(unrelated) as writer:
        writer.write("/chatter", 1_000_000_000, String(data="hello"))
    assert cli.main(["replay", str(unrelated), "--config", str(config), "--out", str(tmp_path / "o2"),
                     "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "/imu/hand/data" in err and "/chatter" in err

    assert cli.main(["replay", str(tmp_path / "nowhere"), "--config", str(config), "--out",
                     str(tmp_path / "o3"), "--quiet"]) == 1
    assert "bag not found" in capsys.readouterr().err
    not_a_bag = tmp_path / "folder"
    not_a_bag.mkdir()
    assert cli.main(["replay", str(not_a_bag), "--config", str(config), "--out", str(tmp_path / "o4"),
                     "--quiet"]) == 1
    assert "cannot read the bag" in capsys.readouterr().err
    assert cli.main(["replay", str(wrong), "--config", str(tmp_path / "none.yaml"), "--out",
                     str(tmp_path / "o5"), "--quiet"]) == 1
    assert "configuration file not found" in capsys.readouterr().err
    for name in ("o1", "o2", "o3", "o4", "o5"):
        assert not (tmp_path / name).exists()


def test_stamps_jumping_back_in_a_bag_reset_tracking_and_keep_the_estimate_right(tmp_path):
    """A looping recording: the same 1.5 s twice, header stamps going back; bag times keep increasing."""
    robot = build_demo_robot()
    run = simulate_demo(robot, DemoOptions(duration_s=1.5, noise="none", encoder_rate_hz=100.0))
    factory = MessageFactory()
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    records = list(simulation_records(run, factory, imu_topics))
    offset = 5_000_000_000
    bag = tmp_path / "looped"
    with BagWriter(bag, typestore=factory.typestore) as writer:
        for topic, stamp_ns, message in records:
            writer.write(topic, stamp_ns, message)
        for topic, stamp_ns, message in records:
            writer.write(topic, stamp_ns + offset, message)  # header stamps unchanged: time goes back
    setup = ReplaySetup.from_parameters(robot.parameters)
    outcome = replay_bag(bag, setup, tmp_path / "looped_out")
    assert outcome.statistics.resets == 1
    resets = [r for r in outcome.results if r.tracking_reset]
    assert len(resets) == 2  # the start and the jump
    truth = Truth(np.asarray(run.times), run.truth_names, np.asarray(run.truth_positions))
    names = list(outcome.results[0].position_names)
    second_pass = outcome.results[len(outcome.results) // 2 + 5:]
    assert second_pass and all(r.stamp < 2.6 for r in second_pass)
    estimate = np.array([r.q for r in second_pass])
    expected = truth.at([r.stamp for r in second_pass], names)
    np.testing.assert_allclose(estimate, expected, atol=1e-6)
    assert math.isfinite(outcome.report.rms_deg.max())


def test_replay_refuses_to_write_onto_its_input(tmp_path):
    bag, config = record(tmp_path, "self", "--duration", "1")
    with pytest.raises(BagError, match="differ"):
        replay_bag(bag, ReplaySetup.from_parameter_file(config), bag)
    shutil.rmtree(bag)


def test_floating_base_replay_writes_odometry_matching_the_true_base(tmp_path):
    """config/quadruped.yaml: a trunk IMU estimates the floating base's rotation, encoders give the legs; the
    replay's nav_msgs/Odometry carries the base orientation (world frame) and its angular velocity in the body
    frame (REP-105 child frame), checked against the simulated truth."""
    from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
    from ros_dofkit.core.spatial import quat_to_matrix as to_matrix

    config = Path(__file__).resolve().parents[1] / "config" / "quadruped.yaml"
    setup = ReplaySetup.from_parameter_file(config)
    plant = setup.plant
    view = plant.articulated_view()
    legs = list(view.position_names())
    trajectory = SineTrajectory(plant, seed=2, max_amplitude=0.3, max_translation=0.05)
    simulator = SensorSimulator(plant, [SimulatedImu("trunk", "trunk_imu_link")], legs, trajectory,
                                imu_rate_hz=100.0, encoder_rate_hz=100.0, seed=2)
    run = simulator.run(2.0, start_s=1.0)
    factory = MessageFactory()
    bag = tmp_path / "quadruped"
    with BagWriter(bag, typestore=factory.typestore) as writer:
        writer.write_all(simulation_records(run, factory, {"trunk": "/imu/trunk/data"}))
    out = tmp_path / "quadruped_out"
    outcome = replay_bag(bag, setup, out)
    assert outcome.report is not None and np.all(outcome.report.rms_deg < 1e-6)

    floating = plant.floating_base_joints()[0]
    qs, vs = floating.position_start, floating.velocity_start
    truth_by_ns = {int(round(t * 1e9)): k for k, t in enumerate(run.times)}
    odometry = list(read_bag(out, topics=["/estimated/odometry/quadruped"]))
    assert len(odometry) >= 195
    checked = 0
    for record_ in odometry:
        message = record_.message
        assert message.header.frame_id == "world" and message.child_frame_id == floating.child_body.name
        k = truth_by_ns.get(record_.stamp_ns)
        if k is None:
            continue
        o = message.pose.pose.orientation
        R_WB = to_matrix([o.w, o.x, o.y, o.z])
        np.testing.assert_allclose(R_WB, to_matrix(run.q[k, qs:qs + 4]), atol=1e-7)
        if checked > 5:  # the first cycles' velocities come from finite differences of a cold start
            w = message.twist.twist.angular
            w_B_true = to_matrix(run.q[k, qs:qs + 4]).T @ run.v[k, vs:vs + 3]
            np.testing.assert_allclose([w.x, w.y, w.z], w_B_true, atol=1e-6)
        checked += 1
    assert checked >= 195


def test_replay_loop_clock_input_going_back_resets_tracking():
    """The loop's ClockInput is the receive clock (as /clock online): a jump back resets the tracker, and the
    samples that follow (stamps back at the start) are tracked again instead of rejected as out of order."""
    from ros_dofkit.core.estimator.estimator import Estimator
    from ros_dofkit.replay.pipeline import ClockInput, ReplayLoop, simulation_inputs

    robot = build_demo_robot()
    run = simulate_demo(robot, DemoOptions(duration_s=1.0, noise="none", encoder_rate_hz=100.0))
    loop = ReplayLoop(Estimator(robot.plant, robot.estimator_config))
    inputs = list(simulation_inputs(run))
    for item in inputs:
        loop.feed(item)
    first_pass = loop.statistics.cycles
    loop.feed(ClockInput(float(run.times[-1])))
    loop.feed(ClockInput(float(run.times[0])))  # looping playback: the clock goes back
    for item in inputs:
        loop.feed(item)
    assert loop.estimator.statistics()["resets"] == 1
    assert loop.statistics.rejected == 0
    assert loop.statistics.cycles == 2 * first_pass
    truth = Truth(np.asarray(run.times), run.truth_names, np.asarray(run.truth_positions))
    second = loop.results[first_pass:]
    assert second[0].tracking_reset
    names = list(second[0].position_names)
    np.testing.assert_allclose([r.q for r in second], truth.at([r.stamp for r in second], names), atol=1e-6)


def test_offline_replay_follows_the_node_tf_ownership_and_refuses_a_second_parent(tmp_path):
    """The same TF rules as the node (ros/tf_tree.py): with robot_localization owning odom -> trunk the replay
    writes no transform for the trunk, the rest hangs below it, and the Odometry's header is odom; a world frame
    naming a link of the model is refused before anything is written."""
    from ros_dofkit.core.simulation import SensorSimulator, SimulatedImu, SineTrajectory
    from ros_dofkit.replay.pipeline import ReplayError
    from ros_dofkit.ros.parameters import load_parameter_file

    values = load_parameter_file(Path(__file__).resolve().parents[1] / "config" / "quadruped.yaml")
    setup = ReplaySetup.from_parameters({**values, "world_frame": "odom", "publish_root_tf": False})
    plant = setup.plant
    legs = list(plant.articulated_view().position_names())
    run = SensorSimulator(plant, [SimulatedImu("trunk", "trunk_imu_link")], legs,
                          SineTrajectory(plant, seed=2, max_amplitude=0.3, max_translation=0.0), seed=2).run(0.3)
    factory = MessageFactory()
    bag = tmp_path / "quadruped"
    with BagWriter(bag, typestore=factory.typestore) as writer:
        writer.write_all(simulation_records(run, factory, {"trunk": "/imu/trunk/data"}, truth_topic=None))
    out = tmp_path / "out"
    replay_bag(bag, setup, out)
    pairs = {(t.header.frame_id, t.child_frame_id) for r in read_bag(out, topics=["/tf", "/tf_static"])
             for t in r.message.transforms}
    assert pairs and not any(child == "trunk" for _, child in pairs)
    assert any(parent == "trunk" for parent, _ in pairs)
    headers = {(r.message.header.frame_id, r.message.child_frame_id)
               for r in read_bag(out, topics=["/estimated/odometry/quadruped"])}
    assert headers == {("odom", "trunk")}
    with pytest.raises(ReplayError, match="second parent"):
        ReplaySetup.from_parameters({**values, "world_frame": "fl_shank"})


def test_the_garbage_collector_is_as_it_was_after_the_pause_even_after_an_error():
    """The batched replay pauses Python's cyclic collector (``collector_paused``); afterwards it is on again, also
    when the block raised, and a collector the caller had turned off stays off."""
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), collector_paused():
        print(1 / 0)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
