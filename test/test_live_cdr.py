"""ros_dofkit.ros.live_cdr: the live node's per-message codecs against two independent serializers (bytes identical
to rosbags' serialize_cdr, read back by rclpy's deserialize_message as the same message; Imu bytes from rclpy's
serialize_message decoded to the same values), and malformed Imu bytes refused with a MalformedMessageError instead
of being misread."""

from __future__ import annotations

import math

import numpy as np
import pytest

rclpy_serialization = pytest.importorskip("rclpy.serialization")
from geometry_msgs.msg import TransformStamped  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from ros_dofkit.ros.live_cdr import (  # noqa: E402
    JointStateEncoder,
    MalformedMessageError,
    TfMessageEncoder,
    decode_imu,
    decode_imu_reading,
)

serialize_message = rclpy_serialization.serialize_message
deserialize_message = rclpy_serialization.deserialize_message
rosbags_typesys = pytest.importorskip("rosbags.typesys")
TYPESTORE = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_JAZZY)


def _rosbags_bytes(msg, msgtype: str) -> bytes:
    """rosbags' serialization of an rclpy message (converted through its fields)."""
    if msgtype == "sensor_msgs/msg/JointState":
        Header = TYPESTORE.types["std_msgs/msg/Header"]
        Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
        JS = TYPESTORE.types[msgtype]
        converted = JS(header=Header(stamp=Time(sec=msg.header.stamp.sec, nanosec=msg.header.stamp.nanosec),
                                     frame_id=msg.header.frame_id),
                       name=list(msg.name), position=np.asarray(msg.position, dtype=float),
                       velocity=np.asarray(msg.velocity, dtype=float), effort=np.asarray(msg.effort, dtype=float))
    else:
        types = TYPESTORE.types
        Time, Header = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
        transforms = [types["geometry_msgs/msg/TransformStamped"](
            header=Header(stamp=Time(sec=t.header.stamp.sec, nanosec=t.header.stamp.nanosec),
                          frame_id=t.header.frame_id),
            child_frame_id=t.child_frame_id,
            transform=types["geometry_msgs/msg/Transform"](
                translation=types["geometry_msgs/msg/Vector3"](x=t.transform.translation.x,
                                                               y=t.transform.translation.y,
                                                               z=t.transform.translation.z),
                rotation=types["geometry_msgs/msg/Quaternion"](x=t.transform.rotation.x, y=t.transform.rotation.y,
                                                               z=t.transform.rotation.z, w=t.transform.rotation.w)))
            for t in msg.transforms]
        converted = types[msgtype](transforms=transforms)
    return bytes(TYPESTORE.serialize_cdr(converted, msgtype))


def _same(encoded: bytes, msg, msg_type, msgtype: str) -> None:
    assert encoded == _rosbags_bytes(msg, msgtype)
    back = deserialize_message(encoded, msg_type)
    assert back == msg


def _imu(frame_id: str, rng) -> Imu:
    msg = Imu()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_123, 987_654_321
    msg.header.frame_id = frame_id
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = rng.normal(size=4).tolist()
    msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = rng.normal(size=3).tolist()
    msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = rng.normal(size=3).tolist()
    msg.orientation_covariance = rng.normal(size=9).tolist()
    msg.angular_velocity_covariance = rng.normal(size=9).tolist()
    msg.linear_acceleration_covariance = rng.normal(size=9).tolist()
    return msg


@pytest.mark.parametrize("frame_id", ["", "a", "imu", "upper_arm_imu", "seven77", "ünïcode/frame"])
def test_decode_imu_reads_what_rclpy_serialized(frame_id):
    rng = np.random.default_rng(len(frame_id))
    msg = _imu(frame_id, rng)
    sec, nanosec, decoded_frame, values = decode_imu(serialize_message(msg))
    assert (sec, nanosec, decoded_frame) == (1_700_000_123, 987_654_321, frame_id)
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    expected = ([o.x, o.y, o.z, o.w], list(msg.orientation_covariance), [w.x, w.y, w.z],
                list(msg.angular_velocity_covariance), [a.x, a.y, a.z], list(msg.linear_acceleration_covariance))
    assert list(values) == [v for part in expected for v in part]  # exact: the same float64 bits


def test_decode_imu_big_endian():
    rng = np.random.default_rng(3)
    msg = _imu("be", rng)
    little = serialize_message(msg)
    # Build the big-endian twin field by field: header, stamp, frame_id length, text, padding, 37 doubles.
    import struct

    _, _, _, values = decode_imu(little)
    text = b"be\x00"
    body = struct.pack(">iII", 1_700_000_123, 987_654_321, len(text)) + text
    body += b"\x00" * (-len(body) % 8) + struct.pack(">37d", *values)
    assert decode_imu(b"\x00\x00\x00\x00" + body) == (1_700_000_123, 987_654_321, "be", values)
    for data in (little, b"\x00\x00\x00\x00" + body, bytearray(little)):  # the reading: the same values, read-only
        sec, nanosec, reading = decode_imu_reading(data)
        assert (sec, nanosec, reading.tolist()) == (1_700_000_123, 987_654_321, list(values))
        assert reading.dtype == np.float64 and not reading.flags.writeable and reading.flags.c_contiguous


@pytest.mark.parametrize("mutate, expected_text", [
    (lambda b: b[:-1], "padding"),                       # truncated by one byte
    (lambda b: b[:40], "padding"),                       # truncated in the values
    (lambda b: b[:10], "at least"),                      # truncated in the header
    (lambda b: b + b"\x00" * 8, "padding"),              # trailing bytes beyond any padding
    (lambda b: b"\x00\x07" + b[2:], "encapsulation"),    # not plain CDR
    (lambda b: b[:12] + b"\xff\xff\xff\x7f" + b[16:], "padding"),   # absurd frame_id length
    (lambda b: b[:12] + b"\x00\x00\x00\x00" + b[16:], "padding"),   # zero length: no NUL possible
    (lambda b: b[:19] + b"x" + b[20:], "NUL"),           # frame_id "imu" loses its NUL
    (lambda b: b[:16] + b"\xff" + b[17:], "UTF-8"),      # invalid UTF-8 in frame_id
    (lambda b: b"", "at least"),
])
def test_decode_imu_refuses_malformed_bytes(mutate, expected_text):
    data = serialize_message(_imu("imu", np.random.default_rng(0)))
    with pytest.raises(MalformedMessageError, match=expected_text):
        decode_imu(mutate(data))
    with pytest.raises(MalformedMessageError, match=expected_text):
        decode_imu_reading(mutate(data))


@pytest.mark.parametrize("names", [(), ("j1",), ("arm_joint1", "arm_joint2", "a_longer_joint_name_3", "x")])
def test_joint_state_encoder_matches_rclpy(names):
    rng = np.random.default_rng(len(names))
    encoder = JointStateEncoder(names)
    for _ in range(3):  # the template is refilled: earlier values must not leak into later messages
        q, v = rng.normal(size=len(names)).tolist(), rng.normal(size=len(names)).tolist()
        sec, nanosec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 999_999_999))
        msg = JointState(name=list(names), position=q, velocity=v)
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
        _same(encoder.encode(sec, nanosec, q, v), msg, JointState, "sensor_msgs/msg/JointState")


def test_joint_state_encoder_frame_id_and_special_values():
    encoder = JointStateEncoder(["a", "bb"], frame_id="base")
    q, v = [-0.0, 2.5], [math.inf, 1e-300]
    msg = JointState(name=["a", "bb"], position=q, velocity=v)
    msg.header.frame_id = "base"
    _same(encoder.encode(0, 0, q, v), msg, JointState, "sensor_msgs/msg/JointState")
    nan = deserialize_message(encoder.encode(0, 0, [math.nan, 1.0], v), JointState)
    assert math.isnan(nan.position[0]) and nan.position[1] == 1.0


@pytest.mark.parametrize("frames", [
    [("world", "arm_link0")],
    [("world", "base"), ("base", "l1"), ("l1", "link_two"), ("link_two", "p/l3")],
])
def test_tf_message_encoder_matches_rclpy(frames):
    rng = np.random.default_rng(len(frames))
    parents, children = zip(*frames, strict=True)
    encoder = TfMessageEncoder(parents, children)
    for _ in range(3):
        p, quat = rng.normal(size=(len(frames), 3)), rng.normal(size=(len(frames), 4))
        sec, nanosec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 999_999_999))
        transforms = []
        for k, (parent, child) in enumerate(frames):
            t = TransformStamped()
            t.header.stamp.sec, t.header.stamp.nanosec = sec, nanosec
            t.header.frame_id, t.child_frame_id = parent, child
            t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = p[k].tolist()
            r = t.transform.rotation
            r.x, r.y, r.z, r.w = quat[k].tolist()
            transforms.append(t)
        _same(encoder.encode(sec, nanosec, p, quat), TFMessage(transforms=transforms), TFMessage,
              "tf2_msgs/msg/TFMessage")


def test_tf_message_encoder_needs_pairs():
    with pytest.raises(ValueError, match="as many child frames"):
        TfMessageEncoder(["a", "b"], ["c"])


def test_decode_imu_tolerates_alignment_padding_only():
    data = serialize_message(_imu("imu", np.random.default_rng(1)))
    assert decode_imu(data + b"\x00" * 7) == decode_imu(data)
