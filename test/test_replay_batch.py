"""The batched offline path (Estimator.feed + ros_dofkit.replay.batch) gives the streaming path's results bit for
bit: the same bag is replayed through ``process_imu`` / ``process_joint_state`` (ReplayLoop) and through the batch,
and every output is compared (q, v, gyro flags, per-sensor errors, stamps, observed/stale sensors, missing
encoders, resets, reject counters by reason and source, cycle statistics) for equality, on a bag with dropouts, a
stale IMU, rejected samples (NaN / zero / non-unit quaternions, covariance[0] == -1, non-finite gyro), encoder
messages for some joints only (and bad ones), a sample out of order and a clock jump back; then the two output
bags are compared message by message."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ros_dofkit.core.estimator.config import HeadingEstimation
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.offline import OfflineRun
from ros_dofkit.core.spatial import quat_to_matrix
from ros_dofkit.replay.bag_replay import NoEstimateError, replay_bag
from ros_dofkit.replay.batch import iter_offline_inputs, read_offline_inputs
from ros_dofkit.replay.demo import DemoOptions, simulate_demo
from ros_dofkit.replay.demo_robot import build_demo_robot
from ros_dofkit.replay.inputs import bag_inputs, check_input_topics
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import ReplayLoop
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import ReplaySetup
from ros_dofkit.ros.bag_io import BagWriter, read_bag, read_raw


def _stamp_ns(message) -> int:
    return message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec


def _with_stamp(factory, message, stamp_ns):
    return dataclasses.replace(message, header=factory.header(stamp_ns, message.header.frame_id))


def edge_case_records(robot, factory):
    """A 1.5 s recording (default noise: dropouts, jitter) made hard: see the module docstring."""
    run = simulate_demo(robot, DemoOptions(duration_s=1.5, imu_rate_hz=200.0, encoder_rate_hz=100.0, seed=3))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    records = list(simulation_records(run, factory, imu_topics))
    Quaternion = factory.typestore.types["geometry_msgs/msg/Quaternion"]
    Vector3 = factory.typestore.types["geometry_msgs/msg/Vector3"]
    out = []
    imu_seen = {}
    encoder_seen = 0
    t0 = records[0].stamp_ns
    for topic, stamp_ns, message in records:
        t = (stamp_ns - t0) * 1e-9
        if topic == "/imu/wrist/data" and 0.5 <= t < 0.8:
            continue  # the wrist IMU falls silent for 0.3 s: stale
        if topic.startswith("/imu/"):
            k = imu_seen[topic] = imu_seen.get(topic, -1) + 1
            if topic == "/imu/hand/data":
                o = message.orientation
                if k == 30:
                    message = dataclasses.replace(message, orientation=Quaternion(x=math.nan, y=o.y, z=o.z, w=o.w))
                elif k == 40:
                    message = dataclasses.replace(message, orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=0.0))
                elif k == 50:
                    message = dataclasses.replace(message, orientation=Quaternion(x=1.5 * o.x, y=1.5 * o.y,
                                                                                  z=1.5 * o.z, w=1.5 * o.w))
                elif k == 60:
                    covariance = np.array(message.orientation_covariance)
                    covariance[0] = -1.0
                    message = dataclasses.replace(message, orientation_covariance=covariance)
                elif k == 70:
                    covariance = np.array(message.angular_velocity_covariance)
                    covariance[0] = -1.0
                    message = dataclasses.replace(message, angular_velocity_covariance=covariance)
                elif k == 80:
                    covariance_o = np.array(message.orientation_covariance)
                    covariance_o[0] = -1.0
                    covariance_w = np.array(message.angular_velocity_covariance)
                    covariance_w[0] = -1.0
                    message = dataclasses.replace(message, orientation_covariance=covariance_o,
                                                  angular_velocity_covariance=covariance_w)
                elif k == 90:
                    w = message.angular_velocity
                    message = dataclasses.replace(message, angular_velocity=Vector3(x=math.inf, y=w.y, z=w.z))
            if topic == "/imu/forearm/data" and k == 100:
                message = _with_stamp(factory, message, _stamp_ns(message) - 20_000_000)  # out of order
            out.append((topic, stamp_ns, message))
            continue
        if topic == "/joint_states":
            encoder_seen += 1
            names, position = list(message.name), np.asarray(message.position)
            velocity = np.asarray(message.velocity)
            if encoder_seen % 3 == 0:  # only the first joint
                message = factory.joint_state(_stamp_ns(message), names[:1], position[:1], velocity[:1])
            elif encoder_seen == 10:
                message = factory.joint_state(_stamp_ns(message), [*names, "not_a_joint"], [*position, 1.0])
            elif encoder_seen == 11:
                message = factory.joint_state(_stamp_ns(message), ["not_a_joint"], [1.0])
            elif encoder_seen == 13:
                message = factory.joint_state(_stamp_ns(message), names, position[:1])
            elif encoder_seen == 14:
                message = factory.joint_state(_stamp_ns(message), [names[0], names[0]], [1.0, 2.0])
            elif encoder_seen == 16:
                message = factory.joint_state(_stamp_ns(message), names, [math.nan, *position[1:]])
            elif encoder_seen == 17:
                message = factory.joint_state(_stamp_ns(message), [], [])
            elif encoder_seen == 19:
                message = factory.joint_state(_stamp_ns(message), names, position)  # no velocities
        out.append((topic, stamp_ns, message))
    # Looping playback: the same messages again, bag time going on, header stamps back at the start.
    offset = out[-1][1] - out[0][1] + 10_000_000
    return out + [(topic, stamp_ns + offset, message) for topic, stamp_ns, message in out]


@pytest.fixture(scope="module")
def edge_bag(tmp_path_factory):
    robot = build_demo_robot()
    factory = MessageFactory()
    path = tmp_path_factory.mktemp("batch") / "edge"
    with BagWriter(path, typestore=factory.typestore) as bag:
        bag.write_all(edge_case_records(robot, factory))
    return path, ReplaySetup.from_parameters(robot.parameters)


def test_batch_equals_streaming_cycle_by_cycle(edge_bag):
    path, setup = edge_bag
    streaming = Estimator(setup.plant, setup.config)
    loop = ReplayLoop(streaming)
    stamps_ns = {}
    for stamp_ns, item in bag_inputs(path, setup):
        stamps_ns[item.stamp] = stamp_ns
        loop.feed(item)
    expected = loop.results

    topics = check_input_topics(path, setup)
    inputs, _, _ = read_offline_inputs(path, setup, topics)
    run = Estimator(setup.plant, setup.config).run(inputs)
    got = run.results()

    assert len(got) == len(expected) > 400
    reasons = streaming.reject_counts()
    for reason in ("non_finite", "zero_quaternion", "non_unit_quaternion", "orientation_absent", "out_of_order",
                   "clock_jump_back", "unknown_name", "duplicate_name", "mismatched_arrays", "empty_message"):
        assert reasons[reason] > 0, reason  # every edge case happened
    assert run.counts_by_reason == reasons
    assert run.counts_by_source == streaming.reject_counts_by_source()
    assert run.statistics == streaming.statistics()
    assert streaming.statistics()["resets"] == 1
    assert int(run.rejected.sum()) == loop.statistics.rejected
    assert any(r.stale_sensors for r in expected) and any(r.missing_encoders for r in expected)
    for a, b in zip(expected, got, strict=True):
        assert a.stamp == b.stamp and a.cycle == b.cycle
        assert stamps_ns[a.stamp] == run.stamp_ns[b.cycle - 1]
        np.testing.assert_array_equal(b.q, a.q)
        np.testing.assert_array_equal(b.v, a.v)
        np.testing.assert_array_equal(b.X_WB, a.X_WB)
        np.testing.assert_array_equal(b.velocity_from_gyro, a.velocity_from_gyro)
        assert list(b.sensor_errors_deg) == list(a.sensor_errors_deg)
        np.testing.assert_array_equal(list(b.sensor_errors_deg.values()), list(a.sensor_errors_deg.values()))
        assert (b.observed_sensors, b.stale_sensors, b.missing_encoders) == (
            a.observed_sensors, a.stale_sensors, a.missing_encoders)
        assert (b.solved, b.failure, b.tracking_reset, b.initialized) == (
            a.solved, a.failure, a.tracking_reset, a.initialized)
        assert b.goal == a.goal


@pytest.mark.parametrize("window", [1, 2, 7, 64, 1000])
def test_windows_fed_one_after_another_give_the_cycles_of_one_run(edge_bag, window):
    """A bag read in windows of `window` messages and fed window by window (the estimator carries its buffered
    samples, encoder values, solution, previous cycle and counters across) gives exactly the cycles of one run over
    the whole bag: every per-cycle array bit for bit (solve times aside), the same rejections, counters and
    statistics, cycle numbers that continue; poses computed on demand when the joined run does not keep them."""
    path, setup = edge_bag
    whole_inputs, _, _ = read_offline_inputs(path, setup)
    offline = Estimator(setup.plant, setup.config)
    whole = offline.run(whole_inputs)
    offline.feed(whole_inputs)  # not reset: these cycles continue the run (and are discarded)
    offline.reset()
    runs = [offline.feed(inputs) for inputs, _ in iter_offline_inputs(path, setup, window=window)]
    assert len(runs) == math.ceil(len(whole_inputs.kind) / window)
    joined = OfflineRun.concatenate(runs)
    for name in OfflineRun.CYCLE_FIELDS:
        if name != "solve_time_s":
            np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name), err_msg=name)
    np.testing.assert_array_equal(joined.X_WB, whole.X_WB)
    np.testing.assert_array_equal(joined.input, whole.input)
    np.testing.assert_array_equal(joined.rejected, whole.rejected)
    assert joined.failure == whole.failure
    assert (joined.counts_by_reason, joined.counts_by_source, joined.statistics) == (
        whole.counts_by_reason, whole.counts_by_source, whole.statistics)
    assert whole.statistics["resets"] == 1
    assert [r.cycle for r in joined.results()] == list(range(1, len(whole) + 1))
    light = OfflineRun.concatenate(runs, keep_poses=False)
    assert light.X_WB is None
    for k in (0, len(whole) // 2, len(whole) - 1):
        np.testing.assert_array_equal(light.result(k).X_WB, whole.X_WB[k])
    if len(runs) > 1:
        with pytest.raises(ValueError, match="consecutive windows"):
            OfflineRun.concatenate([runs[-1], runs[0]])


def test_a_bag_replayed_in_small_windows_gives_the_bytes_of_one_window(edge_bag, tmp_path):
    """replay_bag reads, estimates and writes window by window: the output bag is byte for byte the one-window bag,
    the outcome's statistics and results are the same, and progress rises to 1."""
    path, setup = edge_bag
    one = replay_bag(path, setup, tmp_path / "one", window=10**9)
    fractions = []
    small = replay_bag(path, setup, tmp_path / "small", window=50, progress=lambda f, text: fractions.append(f))
    a, b = read_raw(tmp_path / "one"), read_raw(tmp_path / "small")
    assert a.topics == b.topics and a.stamps_ns.tolist() == b.stamps_ns.tolist() and len(a.topics) > 1000
    assert [bytes(d) for d in a.data] == [bytes(d) for d in b.data]
    assert one.output_counts == small.output_counts
    for name in ("imu_samples", "joint_states", "rejected", "cycles", "resets", "first_stamp", "last_stamp"):
        assert getattr(one.statistics, name) == getattr(small.statistics, name), name
    assert len(one.results) == len(small.results) and small.results[-1].cycle == one.results[-1].cycle
    np.testing.assert_array_equal(small.results[len(small.results) // 2].X_WB, one.results[len(one.results) // 2].X_WB)
    assert len(fractions) > 10 and fractions == sorted(fractions) and fractions[-1] == 1.0


def test_batch_and_streaming_replays_write_the_same_bag(edge_bag, tmp_path):
    path, setup = edge_bag
    fast = replay_bag(path, setup, tmp_path / "fast")
    slow = replay_bag(path, setup, tmp_path / "slow", batch=False)
    assert fast.output_counts == slow.output_counts
    assert fast.statistics.cycles == slow.statistics.cycles and fast.statistics.resets == slow.statistics.resets
    assert fast.statistics.rejected == slow.statistics.rejected
    assert fast.statistics.span_s == slow.statistics.span_s
    assert len(fast.results) == len(slow.results)
    np.testing.assert_array_equal(fast.report.rms_deg, slow.report.rms_deg)
    fast_messages, slow_messages = list(read_bag(tmp_path / "fast")), list(read_bag(tmp_path / "slow"))
    assert [(r.topic, r.stamp_ns) for r in fast_messages] == [(r.topic, r.stamp_ns) for r in slow_messages]

    def flat(message):
        """(strings and integers, floats) of a message, recursively."""
        exact, floats = [], []

        def walk(value):
            if dataclasses.is_dataclass(value):
                for field in dataclasses.fields(value):
                    walk(getattr(value, field.name))
            elif isinstance(value, np.ndarray):
                floats.extend(value.astype(float).tolist())
            elif isinstance(value, list):
                for item in value:
                    walk(item)
            elif isinstance(value, float):
                floats.append(value)
            else:
                exact.append(value)

        walk(message)
        return exact, np.array(floats)

    for a, b in zip(slow_messages, fast_messages, strict=True):
        exact_a, floats_a = flat(a.message)
        exact_b, floats_b = flat(b.message)
        assert exact_a == exact_b, a.topic
        np.testing.assert_array_equal(floats_b, floats_a, err_msg=a.topic)


@pytest.mark.parametrize("change", [{"sync_tolerance_s": 0.001}, {"sync_joint_states": True},
                                    {"sync_tolerance_s": 0.001, "sync_joint_states": True},
                                    {"heading_estimation": HeadingEstimation(enabled=True)}])  # issue 19.2
def test_every_configuration_replays_in_batch_as_streaming(edge_bag, tmp_path, change):
    """Synchronized mode and sync_joint_states run through the batch too, with the streaming path's bytes."""
    path, setup = edge_bag
    setup = dataclasses.replace(setup, config=dataclasses.replace(setup.config, **change))
    fast = replay_bag(path, setup, tmp_path / "fast", window=300)
    slow = replay_bag(path, setup, tmp_path / "slow", batch=False)
    assert hasattr(fast.results, "run") and not hasattr(slow.results, "run")
    a, b = read_raw(tmp_path / "fast"), read_raw(tmp_path / "slow")
    assert a.topics == b.topics and len(a.topics) > 1000
    assert [bytes(d) for d in a.data] == [bytes(d) for d in b.data]
    assert fast.statistics.cycles == slow.statistics.cycles > 100


def test_a_bag_whose_imu_samples_are_all_rejected_fails_alike_on_both_paths(tmp_path):
    """No estimate at all is an error (NoEstimateError naming the rejections), the same on both paths, and no
    output bag is left behind."""
    robot = build_demo_robot()
    factory = MessageFactory()
    run = simulate_demo(robot, DemoOptions(duration_s=0.6, imu_rate_hz=100.0, noise="none"))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    Quaternion = factory.typestore.types["geometry_msgs/msg/Quaternion"]
    path = tmp_path / "all_rejected"
    with BagWriter(path, typestore=factory.typestore) as bag:
        for topic, stamp_ns, message in simulation_records(run, factory, imu_topics):
            if topic.startswith("/imu/"):
                message = dataclasses.replace(message, orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=0.0))
            bag.write(topic, stamp_ns, message)
    setup = ReplaySetup.from_parameters(robot.parameters)
    messages = []
    for name, batch in (("fast", True), ("slow", False)):
        with pytest.raises(NoEstimateError, match=r"no estimate: \d+ of \d+ inputs were rejected") as error:
            replay_bag(path, setup, tmp_path / name, batch=batch)
        assert not (tmp_path / name).exists()
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert "'zero_quaternion'" in messages[0]  # the reason of every rejection above


def test_joint_states_serialized_by_rclpy_replay_as_rosbags_serialized_ones(tmp_path):
    """A bag whose encoder JointStates were serialized by rclpy (Fast CDR: unwritten bytes after an empty velocity
    and effort, which rosbags refuses; bags written with rosbag2_py + serialize_message hold such messages) replays
    on both paths exactly as the same messages serialized by rosbags."""
    serialization = pytest.importorskip("rclpy.serialization")
    sensor_msgs = pytest.importorskip("sensor_msgs.msg")
    robot = build_demo_robot()
    factory = MessageFactory()
    run = simulate_demo(robot, DemoOptions(duration_s=1.0, imu_rate_hz=100.0))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    setup = ReplaySetup.from_parameters(robot.parameters)
    typestore = factory.typestore
    bags = {}
    for serializer in ("rosbags", "rclpy"):
        path = tmp_path / serializer
        with BagWriter(path, typestore=typestore) as bag:
            for topic, stamp_ns, message in simulation_records(run, factory, imu_topics):
                msgtype = message.__msgtype__
                if msgtype == "sensor_msgs/msg/JointState":  # positions only: velocity and effort empty
                    message = dataclasses.replace(message, velocity=np.zeros(0), effort=np.zeros(0))
                data = typestore.serialize_cdr(message, msgtype)
                if serializer == "rclpy" and msgtype == "sensor_msgs/msg/JointState":
                    state = sensor_msgs.JointState()
                    state.header.stamp.sec, state.header.stamp.nanosec = (message.header.stamp.sec,
                                                                          message.header.stamp.nanosec)
                    state.header.frame_id = message.header.frame_id
                    state.name, state.position = list(message.name), message.position.tolist()
                    data = bytes(serialization.serialize_message(state))
                    assert len(data) > len(typestore.serialize_cdr(message, msgtype))  # Fast CDR's unwritten tail
                bag.add_topic(topic, msgtype)
                bag.write_raw([(topic, stamp_ns, data)])
        bags[serializer] = path
    outputs = {}
    for serializer, path in bags.items():
        for batch in (True, False):
            outcome = replay_bag(path, setup, tmp_path / f"out_{serializer}_{batch}", batch=batch)
            assert outcome.statistics.rejected == 0 and outcome.statistics.joint_states > 0
            raw = read_raw(tmp_path / f"out_{serializer}_{batch}")
            outputs[serializer, batch] = (raw.topics, raw.stamps_ns.tolist(), [bytes(d) for d in raw.data])
    assert outputs["rclpy", True] == outputs["rosbags", True]
    assert outputs["rclpy", False] == outputs["rosbags", False]


def test_invalid_and_repeated_stamps_are_rejected_alike_on_both_paths(tmp_path):
    """An IMU header with nanosec >= 1e9 is rejected as invalid_stamp and a repeated sample as repeated_stamp (one
    output per stamp), by the batch and the streaming replay alike."""
    robot = build_demo_robot()
    factory = MessageFactory()
    run = simulate_demo(robot, DemoOptions(duration_s=1.5, imu_rate_hz=100.0, noise="none"))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    Time = factory.typestore.types["builtin_interfaces/msg/Time"]
    records = list(simulation_records(run, factory, imu_topics))
    imu_records = [k for k, record in enumerate(records) if record.topic.startswith("/imu/")]
    bad, repeated = imu_records[20], imu_records[40]
    message = records[bad].message
    stamp = message.header.stamp
    records[bad] = records[bad]._replace(message=dataclasses.replace(message, header=dataclasses.replace(
        message.header, stamp=Time(sec=stamp.sec, nanosec=stamp.nanosec + 1_000_000_000))))
    records.insert(repeated + 1, records[repeated])
    path = tmp_path / "stamps"
    with BagWriter(path, typestore=factory.typestore) as bag:
        bag.write_all(records)
    setup = ReplaySetup.from_parameters(robot.parameters)
    outputs = []
    for name, batch in (("fast", True), ("slow", False)):
        outcome = replay_bag(path, setup, tmp_path / name, batch=batch)
        assert outcome.statistics.rejected == 2
        raw = read_raw(tmp_path / name)
        outputs.append((raw.topics, raw.stamps_ns.tolist(), [bytes(d) for d in raw.data]))
        stamps = [s for t, s in zip(raw.topics, raw.stamps_ns.tolist(), strict=True)
                  if t == setup.output_namespace + "/joint_states"]
        assert len(stamps) > 50
        assert len(stamps) == len(set(stamps))
    assert outputs[0] == outputs[1]


def test_raw_imus_replay_in_batch_as_streaming(tmp_path):
    """Two IMUs of the demo bag publish gyro + accelerometer only (orientation_covariance[0] = -1, so their
    orientation comes from ``core.estimator.orientation_filter``), one accelerometer sample is NaN and one stamp gap
    restarts a filter: both replay paths read the accelerometer from the messages and write the same bytes."""
    robot = build_demo_robot()
    factory = MessageFactory()
    run = simulate_demo(robot, DemoOptions(duration_s=4.0, imu_rate_hz=100.0, noise="default"))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    raw_topics = {imu_topics["upper_arm"], imu_topics["hand"]}
    Vector3 = factory.typestore.types["geometry_msgs/msg/Vector3"]
    path = tmp_path / "raw"
    seen = 0
    with BagWriter(path, typestore=factory.typestore) as bag:
        for topic, stamp_ns, message in simulation_records(run, factory, imu_topics):
            if topic in raw_topics:
                seen += 1
                covariance = np.array(message.orientation_covariance)
                covariance[0] = -1.0
                message = dataclasses.replace(message, orientation_covariance=covariance)
                if seen == 100:
                    message = dataclasses.replace(message, linear_acceleration=Vector3(x=math.nan, y=0.0, z=9.8))
                if 200 <= seen < 260:  # 0.3 s of the hand's and the upper arm's samples lost: a filter restart
                    continue
            bag.write(topic, stamp_ns, message)
    setup = ReplaySetup.from_parameters(robot.parameters)
    fast = replay_bag(path, setup, tmp_path / "fast", window=250)
    slow = replay_bag(path, setup, tmp_path / "slow", batch=False)
    a, b = read_raw(tmp_path / "fast"), read_raw(tmp_path / "slow")
    assert a.topics == b.topics and len(a.topics) > 1000
    assert [bytes(d) for d in a.data] == [bytes(d) for d in b.data]
    assert fast.statistics.cycles == slow.statistics.cycles > 300
    streaming = Estimator(setup.plant, setup.config)
    inputs, _, _ = read_offline_inputs(path, setup, check_input_topics(path, setup))
    streaming.run(inputs)
    counts = streaming.filter_counts()
    assert set(counts) == {"upper_arm", "hand"}
    assert sum(c["non_finite"] for c in counts.values()) == 1 and sum(c["resets"] for c in counts.values()) >= 1


def test_magnetometers_replay_in_batch_as_streaming(tmp_path):
    """The two raw IMUs of the demo bag also publish sensor_msgs/MagneticField at 25 Hz (tesla, the field of their
    orientation in a field whose north is the world's +y), on ``imus.<name>.magnetic_field_topic``, interleaved by
    stamp; one field is NaN and one repeats its predecessor's stamp: both replay paths (batch in windows that cut
    the stream anywhere, and streaming) match the same fields and write the same bytes, which differ from the
    replay that reads no magnetometer. One field of the upper arm is published in the hand's frame: both paths drop
    it (``field_frame_mismatch``, ros.magnetometer_frames); one of the hand's names its frame with a leading "/",
    which tf2 ignores: kept."""
    robot = build_demo_robot()
    factory = MessageFactory()
    run = simulate_demo(robot, DemoOptions(duration_s=4.0, imu_rate_hz=100.0, noise="default"))
    imu_topics = {imu.name: "/" + imu.topic for imu in robot.estimator_config.imus}
    field_topics = {imu_topics[name]: f"/imu/{name}/mag" for name in ("upper_arm", "hand")}
    types = factory.typestore.types
    Vector3, MagneticField = types["geometry_msgs/msg/Vector3"], types["sensor_msgs/msg/MagneticField"]
    field_W = np.array([0.0, 20e-6, -40e-6])
    path, seen, last_field_stamp = tmp_path / "mag", dict.fromkeys(field_topics, 0), {}
    with BagWriter(path, typestore=factory.typestore) as bag:
        for topic, stamp_ns, message in simulation_records(run, factory, imu_topics):
            if topic in field_topics:
                seen[topic] += 1
                if seen[topic] % 4 == 0:
                    q = message.orientation
                    vector = quat_to_matrix([q.w, q.x, q.y, q.z]).T @ field_W
                    hand = topic == imu_topics["hand"]
                    if hand and seen[topic] == 160:
                        vector = np.full(3, np.nan)
                    header = message.header if not (hand and seen[topic] == 240) else dataclasses.replace(
                        message.header, stamp=last_field_stamp[topic])
                    if seen[topic] == 200:  # another IMU's frame / its own with a leading "/"
                        header = dataclasses.replace(header, frame_id="/hand_imu" if hand else "hand_imu")
                    last_field_stamp[topic] = message.header.stamp
                    bag.write(field_topics[topic], stamp_ns, MagneticField(
                        header=header, magnetic_field=Vector3(x=vector[0], y=vector[1], z=vector[2]),
                        magnetic_field_covariance=np.zeros(9)))
                covariance = np.array(message.orientation_covariance)
                covariance[0] = -1.0
                message = dataclasses.replace(message, orientation_covariance=covariance)
            bag.write(topic, stamp_ns, message)
    values = dict(robot.parameters)
    values.update({f"imus.{name}.magnetic_field_topic": f"/imu/{name}/mag" for name in ("upper_arm", "hand")})
    setup = ReplaySetup.from_parameters(values)
    replay_bag(path, setup, tmp_path / "fast", window=333)
    replay_bag(path, setup, tmp_path / "slow", batch=False)
    replay_bag(path, ReplaySetup.from_parameters(robot.parameters), tmp_path / "without")
    a, b, c = (read_raw(tmp_path / name) for name in ("fast", "slow", "without"))
    assert a.topics == b.topics and len(a.topics) > 1000
    assert [bytes(d) for d in a.data] == [bytes(d) for d in b.data]
    assert [bytes(d) for d in a.data] != [bytes(d) for d in c.data]
    estimator = Estimator(setup.plant, setup.config)
    inputs, _, _ = read_offline_inputs(path, setup, check_input_topics(path, setup))
    assert len(inputs.field_stamp) == sum(count // 4 for count in seen.values())
    assert set(inputs.field_sensor.tolist()) == {setup.config.imu_names.index(n) for n in ("upper_arm", "hand")}
    estimator.run(inputs)
    streaming = ReplayLoop(Estimator(setup.plant, setup.config))
    for _, item in bag_inputs(path, setup):
        streaming.feed(item)
    for counts in (estimator.filter_counts(), streaming.estimator.filter_counts()):
        assert [counts["hand"][k] for k in ("field_invalid", "field_out_of_order", "field_frame_mismatch")] == [1, 1, 0]
        assert [counts["upper_arm"][k] for k in ("field_invalid", "field_out_of_order", "field_frame_mismatch")] == [
            0, 0, 1]
