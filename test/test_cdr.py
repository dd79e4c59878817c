"""ros_dofkit.ros.cdr against rosbags' CDR serializer/deserializer (and rclpy's serialize_message where installed):
encoders byte for byte, decoders field for field, on random messages with the layouts' edge cases (empty frame_id,
string lengths that change the alignment, empty arrays, mixed layouts in one batch), and the fall-backs
(big-endian input, unexpected sizes, garbled bytes)."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.serde import SerdeError

from ros_dofkit.ros import cdr
from ros_dofkit.ros.bag_io import make_typestore

TYPESTORE = make_typestore()
T = TYPESTORE.types
FRAMES = ["", "a", "ab", "abc", "abcd", "abcde", "hand_imu", "world/odom_frame_7"]


def stamp(ns):
    return T["builtin_interfaces/msg/Time"](sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def header(ns, frame=""):
    return T["std_msgs/msg/Header"](stamp=stamp(ns), frame_id=frame)


def serialize(message, little_endian=True):
    return bytes(TYPESTORE.serialize_cdr(message, message.__msgtype__, little_endian=little_endian))


def random_stamps(rng, n):
    return np.concatenate([[0, 2**31 * 1_000_000_000 - 1], rng.integers(0, 2**40, n)])[:n]


def random_names(rng, n):
    return [FRAMES[rng.integers(1, len(FRAMES))] + str(k) for k in range(n)]


def joint_state(ns, names, position, velocity, effort, frame=""):
    return T["sensor_msgs/msg/JointState"](header=header(ns, frame), name=list(names), position=np.asarray(position),
                                           velocity=np.asarray(velocity), effort=np.asarray(effort))


@pytest.mark.parametrize("frame", FRAMES)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
@pytest.mark.parametrize("fields", [(True, True, False), (True, False, False), (True, True, True), (False, True, False),
                                    (False, False, True)])
def test_joint_state_encoding_is_rosbags_byte_for_byte(frame, n, fields):
    rng = np.random.default_rng(n + 10 * len(frame))
    count = 4
    stamps = random_stamps(rng, count)
    names = random_names(rng, n)
    values = [rng.normal(size=(count, n)) if present else None for present in fields]
    encoded = cdr.encode_joint_states(stamps, names, *values, frame_id=frame)
    assert len(encoded) == count
    for k in range(count):
        arrays = [v[k] if v is not None else np.zeros(0) for v in values]
        assert encoded[k] == serialize(joint_state(stamps[k], names, *arrays, frame=frame))


def test_joint_state_decoding_matches_rosbags_over_mixed_layouts():
    rng = np.random.default_rng(1)
    messages, raw = [], []
    for _ in range(120):
        n = int(rng.integers(0, 6))
        names = random_names(rng, n)
        position = rng.normal(size=n) if rng.random() < 0.9 else np.zeros(0)
        velocity = rng.normal(size=n) if rng.random() < 0.5 else np.zeros(0)
        effort = rng.normal(size=n) if rng.random() < 0.3 else np.zeros(0)
        frame = FRAMES[int(rng.integers(0, len(FRAMES)))]
        message = joint_state(int(rng.integers(0, 2**40)), names, position, velocity, effort, frame)
        messages.append(message)
        raw.append(serialize(message, little_endian=rng.random() > 0.1))  # some big-endian: rosbags decodes them
    # Repeat a layout many times (the fast path) with different values.
    for k in range(50):
        message = joint_state(k * 7_000_000, ["j1", "j22", "j333"], rng.normal(size=3), rng.normal(size=3), [])
        messages.append(message)
        raw.append(serialize(message))
    batch = cdr.decode_joint_states(raw)
    for k, message in enumerate(messages):
        assert batch.stamp_ns[k] == message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        assert batch.frame_id[k] == message.header.frame_id
        assert batch.name[k] == tuple(message.name)
        for field in ("position", "velocity", "effort"):
            np.testing.assert_array_equal(getattr(batch, field)[k], getattr(message, field))
    # The blocks hold every message once; their matrices' rows are the per-message values.
    assert sorted(k for block in batch.blocks for k in block.members.tolist()) == list(range(len(messages)))
    for block in batch.blocks:
        for row, k in enumerate(block.members.tolist()):
            assert (batch.name[k], batch.frame_id[k]) == (block.names, block.frame_id)
            for field in ("position", "velocity", "effort"):
                np.testing.assert_array_equal(getattr(block, field)[row], getattr(messages[k], field))
    assert len(batch.blocks) < len(messages)  # the repeated layout is one block


def imu(ns, frame, rng, absent=()):
    Quaternion, Vector3 = T["geometry_msgs/msg/Quaternion"], T["geometry_msgs/msg/Vector3"]
    covariances = {name: rng.normal(size=9) for name in ("orientation", "angular_velocity", "linear_acceleration")}
    for name in absent:
        covariances[name][0] = -1.0
    q = rng.normal(size=4)
    w, a = rng.normal(size=3), rng.normal(size=3)
    return T["sensor_msgs/msg/Imu"](
        header=header(ns, frame), orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3]),
        orientation_covariance=covariances["orientation"], angular_velocity=Vector3(x=w[0], y=w[1], z=w[2]),
        angular_velocity_covariance=covariances["angular_velocity"],
        linear_acceleration=Vector3(x=a[0], y=a[1], z=a[2]),
        linear_acceleration_covariance=covariances["linear_acceleration"])


def check_imu(batch, k, message):
    assert batch.stamp_ns[k] == message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
    assert batch.frame_id[k] == message.header.frame_id
    o, w, a = message.orientation, message.angular_velocity, message.linear_acceleration
    np.testing.assert_array_equal(batch.orientation_xyzw[k], [o.x, o.y, o.z, o.w])
    np.testing.assert_array_equal(batch.angular_velocity[k], [w.x, w.y, w.z])
    np.testing.assert_array_equal(batch.linear_acceleration[k], [a.x, a.y, a.z])
    np.testing.assert_array_equal(batch.orientation_covariance[k], message.orientation_covariance)
    np.testing.assert_array_equal(batch.angular_velocity_covariance[k], message.angular_velocity_covariance)
    np.testing.assert_array_equal(batch.linear_acceleration_covariance[k], message.linear_acceleration_covariance)


def test_imu_decoding_matches_rosbags_for_every_frame_length_and_endianness():
    rng = np.random.default_rng(2)
    messages, raw = [], []
    for k in range(200):
        frame = FRAMES[k % len(FRAMES)]
        absent = [name for name in ("orientation", "angular_velocity") if rng.random() < 0.2]
        message = imu(int(rng.integers(0, 2**40)), frame, rng, absent)
        messages.append(message)
        raw.append(serialize(message, little_endian=k % 13 != 0))
    batch = cdr.decode_imus(raw)
    for k, message in enumerate(messages):
        check_imu(batch, k, message)
    empty = cdr.decode_imus([])
    assert empty.orientation_xyzw.shape == (0, 4)


def test_garbled_and_truncated_messages_fall_back_to_rosbags_and_raise_its_error():
    rng = np.random.default_rng(3)
    good = serialize(imu(5, "hand_imu", rng))
    with pytest.raises((SerdeError, ValueError, IndexError)):
        cdr.decode_imus([good, good[: len(good) // 2]])
    state = serialize(joint_state(5, ["a", "b"], [1.0, 2.0], [], []))
    with pytest.raises((SerdeError, ValueError, IndexError)):
        cdr.decode_joint_states([state, state[:-5]])
    # A frame_id that is not NUL-terminated is not read by the fast path: the result is rosbags'.
    garbled = bytearray(good)
    garbled[12 + 8] = ord("x")  # overwrite the NUL of "hand_imu"
    expected = TYPESTORE.deserialize_cdr(bytes(garbled), "sensor_msgs/msg/Imu")
    check_imu(cdr.decode_imus([bytes(garbled)]), 0, expected)


@pytest.mark.parametrize("sizes", [(2, 0, 0), (2, 2, 0), (2, 0, 2), (2, 2, 2), (0, 0, 0), (3, 0, 1), (1, 1, 0)])
def test_joint_states_serialized_by_rclpy_with_empty_sequences_decode(sizes):
    """rclpy's serialize_message (Fast CDR on rmw_fastrtps) sizes an empty float64 sequence as if its values were
    aligned and leaves the difference as unwritten bytes at the end (rosbags rejects the message for its size);
    both decoders read such messages, with padding bytes that differ from message to message, as rclpy does."""
    serialization = pytest.importorskip("rclpy.serialization")
    sensor_msgs = pytest.importorskip("sensor_msgs.msg")
    n_pos, n_vel, n_eff = sizes
    datas, expected = [], []
    for k in range(4):
        state = sensor_msgs.JointState()
        state.header.frame_id = "base_link"
        state.header.stamp.sec, state.header.stamp.nanosec = 40 + k, 123
        state.name = [f"joint_{i}" for i in range(n_pos)]
        state.position = [0.5 * k + i for i in range(n_pos)]
        state.velocity = [-1.0 * i - k for i in range(n_vel)]
        state.effort = [10.0 + i for i in range(n_eff)]
        datas.append(bytes(serialization.serialize_message(state)))
        back = serialization.deserialize_message(datas[-1], sensor_msgs.JointState)
        expected.append((list(back.name), list(back.position), list(back.velocity), list(back.effort)))
    batch = cdr.decode_joint_states(datas)
    for k, (names, position, velocity, effort) in enumerate(expected):
        assert batch.stamp_ns[k] == (40 + k) * 1_000_000_000 + 123 and batch.frame_id[k] == "base_link"
        assert list(batch.name[k]) == names
        assert (batch.position[k].tolist(), batch.velocity[k].tolist(), batch.effort[k].tolist()) == (
            position, velocity, effort)
        message = cdr.joint_state_message(datas[k], TYPESTORE)
        assert (list(message.name), message.position.tolist(), message.velocity.tolist(),
                message.effort.tolist()) == (names, position, velocity, effort)
        assert message.header.frame_id == "base_link" and message.header.stamp.sec == 40 + k


def test_joint_state_trailing_bytes_are_accepted_only_where_fast_cdr_leaves_them():
    full = serialize(joint_state(5, ["a", "b"], [1.0, 2.0], [3.0, 4.0], [5.0, 6.0]))
    positions_only = serialize(joint_state(5, ["a", "b"], [1.0, 2.0], [], []))
    for data in (full + bytes(8), positions_only + bytes(2), positions_only + bytes(16)):
        with pytest.raises(cdr.CdrLayoutError, match="unexpected bytes"):
            cdr.joint_state_message(data, TYPESTORE)
    for data in (full + bytes(8), positions_only + bytes(16)):
        with pytest.raises(SerdeError):  # the batch decoder hands them to rosbags, which refuses them
            cdr.decode_joint_states([data])
    # rosbags itself reads up to 3 trailing bytes: the batch decoder gives its result.
    assert cdr.decode_joint_states([positions_only + bytes(2)]).position[0].tolist() == [1.0, 2.0]
    for extra in (4, 8, 12):
        assert cdr.joint_state_message(positions_only + bytes(extra), TYPESTORE).position.tolist() == [1.0, 2.0]
        assert cdr.decode_joint_states([positions_only + bytes(extra)]).position[0].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("k", [0, 1, 3])
def test_tf_message_encoding_is_rosbags_byte_for_byte(k):
    rng = np.random.default_rng(k)
    count = 3
    stamps = random_stamps(rng, count)
    parents = [FRAMES[(i + 1) % len(FRAMES)] for i in range(k)]
    children = [FRAMES[(3 * i + 2) % len(FRAMES)] + "_child" * i for i in range(k)]
    translations = rng.normal(size=(count, k, 3))
    quaternions = rng.normal(size=(count, k, 4))
    encoded = cdr.encode_tf_messages(stamps, parents, children, translations, quaternions)
    Vector3, Quaternion = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    for n in range(count):
        transforms = [T["geometry_msgs/msg/TransformStamped"](
            header=header(stamps[n], parents[i]), child_frame_id=children[i],
            transform=T["geometry_msgs/msg/Transform"](
                translation=Vector3(x=translations[n, i, 0], y=translations[n, i, 1], z=translations[n, i, 2]),
                rotation=Quaternion(x=quaternions[n, i, 0], y=quaternions[n, i, 1], z=quaternions[n, i, 2],
                                    w=quaternions[n, i, 3])))
            for i in range(k)]
        assert encoded[n] == serialize(T["tf2_msgs/msg/TFMessage"](transforms=transforms))


@pytest.mark.parametrize("frames", [("", ""), ("odom", "base_link"), ("world", "abc"), ("w", "trunk_12345")])
@pytest.mark.parametrize("covariance", [False, True])
def test_odometry_encoding_is_rosbags_byte_for_byte(frames, covariance):
    rng = np.random.default_rng(len(frames[1]))
    count = 3
    stamps = random_stamps(rng, count)
    position, quaternion = rng.normal(size=(count, 3)), rng.normal(size=(count, 4))
    linear, angular = rng.normal(size=(count, 3)), rng.normal(size=(count, 3))
    pose_cov = rng.normal(size=(count, 36)) if covariance else None
    twist_cov = rng.normal(size=(count, 36)) if covariance else None
    encoded = cdr.encode_odometry(stamps, frames[0], frames[1], position, quaternion, linear, angular, pose_cov,
                                  twist_cov)
    Vector3, Point, Quaternion = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Point"], (
        T["geometry_msgs/msg/Quaternion"])
    for n in range(count):
        pose = T["geometry_msgs/msg/Pose"](position=Point(x=position[n, 0], y=position[n, 1], z=position[n, 2]),
                                           orientation=Quaternion(x=quaternion[n, 0], y=quaternion[n, 1],
                                                                  z=quaternion[n, 2], w=quaternion[n, 3]))
        twist = T["geometry_msgs/msg/Twist"](linear=Vector3(x=linear[n, 0], y=linear[n, 1], z=linear[n, 2]),
                                             angular=Vector3(x=angular[n, 0], y=angular[n, 1], z=angular[n, 2]))
        message = T["nav_msgs/msg/Odometry"](
            header=header(stamps[n], frames[0]), child_frame_id=frames[1],
            pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=(
                pose_cov[n] if covariance else np.zeros(36))),
            twist=T["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=(
                twist_cov[n] if covariance else np.zeros(36))))
        assert encoded[n] == serialize(message)


@pytest.mark.parametrize("label", ["", "x", "sensor_error_deg:upper_arm,forearm,wrist,hand"])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_float64_multi_array_encoding_is_rosbags_byte_for_byte(label, n):
    values = np.random.default_rng(n).normal(size=(3, n))
    values[0, :1] = np.nan  # NaN (an unobserved sensor) passes through bit for bit
    encoded = cdr.encode_float64_multi_arrays(label, values)
    for k in range(3):
        dimension = T["std_msgs/msg/MultiArrayDimension"](label=label, size=n, stride=n)
        message = T["std_msgs/msg/Float64MultiArray"](
            layout=T["std_msgs/msg/MultiArrayLayout"](dim=[dimension], data_offset=0), data=values[k])
        assert encoded[k] == serialize(message)


def test_packed_encodings_are_the_same_messages_as_one_matrix():
    """packed=True returns the (N, size) uint8 matrix whose rows are the messages the list form gives (which the
    tests above compare with rosbags byte for byte), for every encoder."""
    rng = np.random.default_rng(7)
    stamps = random_stamps(rng, 4)
    calls = [
        lambda packed: cdr.encode_joint_states(stamps, ["a", "bb"], rng_values[0], rng_values[1], packed=packed),
        lambda packed: cdr.encode_tf_messages(stamps, ["w", "a"], ["a", "b_link"], rng_values[2], rng_values[3],
                                              packed=packed),
        lambda packed: cdr.encode_odometry(stamps, "odom", "base", rng_values[4], rng_values[5], rng_values[4],
                                           rng_values[4], packed=packed),
        lambda packed: cdr.encode_float64_multi_arrays("e", rng_values[0], packed=packed)]
    rng_values = [rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2, 3)),
                  rng.normal(size=(4, 2, 4)), rng.normal(size=(4, 3)), rng.normal(size=(4, 4))]
    for call in calls:
        listed, matrix = call(False), call(True)
        assert matrix.dtype == np.uint8 and matrix.shape == (4, len(listed[0]))
        assert [row.tobytes() for row in matrix] == listed


def test_encoders_reject_bad_shapes_and_stamps():
    with pytest.raises(ValueError, match="expected shape"):
        cdr.encode_joint_states([1, 2], ["a"], np.zeros((3, 1)))
    with pytest.raises(ValueError, match="non-negative"):
        cdr.encode_joint_states([-1], ["a"], np.zeros((1, 1)))
    with pytest.raises(ValueError, match="child frames"):
        cdr.encode_tf_messages([1], ["a", "b"], ["c"], np.zeros((1, 2, 3)), np.zeros((1, 2, 4)))


# ---------------------------------------------------------------------------------------------- rclpy
def test_codecs_agree_with_rclpy_serialization():
    serialization = pytest.importorskip("rclpy.serialization")
    sensor_msgs = pytest.importorskip("sensor_msgs.msg")
    tf2_msgs = pytest.importorskip("tf2_msgs.msg")
    geometry_msgs = pytest.importorskip("geometry_msgs.msg")
    nav_msgs = pytest.importorskip("nav_msgs.msg")
    rng = np.random.default_rng(7)

    # Decoding what rclpy serializes.
    for frame in FRAMES:
        message = sensor_msgs.Imu()
        message.header.frame_id = frame
        message.header.stamp.sec, message.header.stamp.nanosec = 12, 345
        message.orientation.x, message.orientation.w = 0.6, 0.8
        message.angular_velocity.z = 1.5
        message.orientation_covariance[0] = -1.0
        message.linear_acceleration_covariance[8] = 2.5
        batch = cdr.decode_imus([serialization.serialize_message(message)])
        assert batch.stamp_ns[0] == 12_000_000_345 and batch.frame_id[0] == frame
        np.testing.assert_array_equal(batch.orientation_xyzw[0], [0.6, 0.0, 0.0, 0.8])
        assert batch.angular_velocity[0, 2] == 1.5 and batch.orientation_covariance[0, 0] == -1.0
        assert batch.linear_acceleration_covariance[0, 8] == 2.5
        state = sensor_msgs.JointState()
        state.header.frame_id = frame
        state.name = ["a", "bcd", "ef"]
        state.position, state.velocity, state.effort = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]
        decoded = cdr.decode_joint_states([serialization.serialize_message(state)])
        assert decoded.name[0] == ("a", "bcd", "ef") and decoded.frame_id[0] == frame
        np.testing.assert_array_equal(decoded.effort[0], [7.0, 8.0, 9.0])

    # Encoding: what we write deserializes in rclpy to the same values.
    names = ["arm_joint1", "j2", "abc"]
    position, velocity = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    for k, data in enumerate(cdr.encode_joint_states([5, 1_000_000_007], names, position, velocity)):
        message = serialization.deserialize_message(data, sensor_msgs.JointState)
        assert list(message.name) == names and len(message.effort) == 0
        np.testing.assert_array_equal(message.position, position[k])
        np.testing.assert_array_equal(message.velocity, velocity[k])
    assert message.header.stamp.sec == 1 and message.header.stamp.nanosec == 7
    translations, quaternions = rng.normal(size=(1, 2, 3)), rng.normal(size=(1, 2, 4))
    data = cdr.encode_tf_messages([9], ["world", "a"], ["a", "bb_link"], translations, quaternions)[0]
    message = serialization.deserialize_message(data, tf2_msgs.TFMessage)
    assert [t.child_frame_id for t in message.transforms] == ["a", "bb_link"]
    assert message.transforms[1].transform.rotation.w == quaternions[0, 1, 3]
    assert message.transforms[0].transform.translation.y == translations[0, 0, 1]
    data = cdr.encode_odometry([9], "world", "trunk", [[1.0, 2.0, 3.0]], [[0.0, 0.0, 0.6, 0.8]], [[4.0, 5.0, 6.0]],
                               [[7.0, 8.0, 9.0]])[0]
    message = serialization.deserialize_message(data, nav_msgs.Odometry)
    assert message.child_frame_id == "trunk" and message.pose.pose.orientation.w == 0.8
    assert message.twist.twist.angular.z == 9.0 and message.pose.pose.position.x == 1.0
    assert isinstance(message.pose.pose, geometry_msgs.Pose)
    # Byte for byte where rclpy initializes every byte (a message without alignment padding).
    transform = geometry_msgs.TransformStamped()
    transform.header.frame_id, transform.child_frame_id = "abc", "abcdefg"  # 4 + 4 and 4 + 8 bytes: no padding
    transform.header.stamp.sec = 3
    transform.transform.translation.x, transform.transform.rotation.w = 1.25, 1.0
    tf_message = tf2_msgs.TFMessage(transforms=[transform])
    ours = cdr.encode_tf_messages([3_000_000_000], ["abc"], ["abcdefg"], [[[1.25, 0.0, 0.0]]],
                                  [[[0.0, 0.0, 0.0, 1.0]]])[0]
    assert ours == serialization.serialize_message(tf_message)
