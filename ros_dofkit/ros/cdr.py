"""Bulk CDR codecs for the few message types offline replay reads and writes, in NumPy.

Where you are: ``ros_dofkit.ros`` (the ROS edge); imports NumPy and rosbags only (``bag_io`` imports this module,
for its JointState reader and the distributions). rosbags' generic (de)serializers walk a message field by field
in Python (tens of microseconds per message); replay moves tens of thousands of messages whose layout repeats
message after message. Here a message type's layout is computed once and whole batches are read or written as
rows of a byte matrix: values sit at fixed offsets, so one NumPy view per field decodes (or fills) every message.

The wire format (OMG CDR as ROS 2 uses it, "XCDR1"): a 4-byte encapsulation header (byte 1 = 0x01 for little
endian), then the fields in declaration order; a primitive of size s starts at an offset (counted after the
header) that is a multiple of s (8 for float64); strings are a uint32 length that counts the terminating NUL,
then the bytes and the NUL; sequences are a uint32 element count, then the elements; fixed arrays have no count.

Decoders take a list of raw messages and return arrays; a message that does not match the expected layout
(big-endian, another frame_id length than its batch, trailing bytes, an unexpected JointState shape) is decoded by
rosbags instead, so the result is always what rosbags would give, with one exception rosbags refuses: a JointState
with the bytes Fast CDR leaves unwritten after empty sequences (rclpy's ``serialize_message`` writes them; see
:func:`_parse_joint_state_layout`) is read, as ROS itself reads it. Encoders return one ``bytes`` per message,
byte-identical to rosbags' ``serialize_cdr`` (checked by test/test_cdr.py, with rclpy's ``serialize_message``
where rclpy is installed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import itemgetter

import numpy as np
from rosbags.typesys import Stores, get_typestore

from ros_dofkit.core.estimator.inputs import stamp_nanoseconds

#: ROS 2 distributions whose message definitions (rosbags typestores) bags and codecs use (``bag_io`` re-exports).
DISTROS = {"humble": Stores.ROS2_HUMBLE, "jazzy": Stores.ROS2_JAZZY, "kilted": Stores.ROS2_KILTED}
DEFAULT_DISTRO = "jazzy"

#: Encapsulation header of little-endian plain CDR (the only representation encoded or fast-decoded here).
CDR_LE_HEADER = b"\x00\x01\x00\x00"
_HEADER = 4

IMU_MSGTYPE = "sensor_msgs/msg/Imu"
JOINT_STATE_MSGTYPE = "sensor_msgs/msg/JointState"


class CdrLayoutError(ValueError):
    """A message does not have the layout a fast codec expects (the caller falls back to rosbags)."""


def align(offset: int, size: int) -> int:
    """``offset`` rounded up to a multiple of ``size`` (CDR alignment, counted after the encapsulation header)."""
    return offset + (-offset % size)


class TemplateBuilder:
    """Builds one little-endian CDR message field by field, with zeros where values go, and remembers the byte
    offsets (encapsulation header included) of the named values: the template both the bulk encoders here and the
    per-message encoders of ``ros_dofkit.ros.live_cdr`` fill in."""

    def __init__(self):
        self.body = bytearray()
        self.offsets: dict[str, int] = {}

    def _pad(self, size: int) -> None:
        self.body.extend(b"\x00" * (-len(self.body) % size))

    def primitive(self, fmt: str, value, key: str | None = None) -> None:
        size = struct.calcsize(fmt)
        self._pad(size)
        if key is not None:
            self.offsets[key] = _HEADER + len(self.body)
        self.body.extend(struct.pack("<" + fmt, value))

    def float64s(self, count: int, key: str | None = None) -> None:
        """``count`` float64 zeros (a fixed array or the elements of a sequence), aligned to 8 when non-empty."""
        if count:
            self._pad(8)
        if key is not None:
            self.offsets[key] = _HEADER + len(self.body)
        self.body.extend(b"\x00" * (8 * count))

    def string(self, text: str) -> None:
        encoded = text.encode("utf-8")
        self.primitive("I", len(encoded) + 1)
        self.body.extend(encoded + b"\x00")

    def header(self, frame_id: str, key: str) -> None:
        """std_msgs/Header: stamp (int32 sec, uint32 nanosec) at ``key``, then frame_id."""
        self.primitive("i", 0, key)
        self.primitive("I", 0)
        self.string(frame_id)

    def message(self) -> bytes:
        return CDR_LE_HEADER + bytes(self.body)


class _Template:
    """One encoded message with zero values, and the offsets at which a batch fills in its values."""

    def __init__(self, builder: TemplateBuilder):
        self.bytes = np.frombuffer(builder.message(), dtype=np.uint8)
        self.offsets = builder.offsets

    def fill(self, count: int) -> np.ndarray:
        return np.tile(self.bytes, (count, 1))


def _put(rows: np.ndarray, offset: int, values: np.ndarray, dtype: str) -> None:
    """Write ``values`` (count, k) as ``dtype`` into every row at byte ``offset``."""
    values = np.ascontiguousarray(values, dtype=dtype)
    count = rows.shape[0]
    raw = values.reshape(count, -1).view(np.uint8)
    rows[:, offset:offset + raw.shape[1]] = raw


def _stamp_bytes(stamps_ns) -> np.ndarray:
    """builtin_interfaces/Time (int32 sec, uint32 nanosec) of each stamp, as (N, 8) little-endian bytes."""
    stamps_ns = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
    if np.any(stamps_ns < 0):
        raise ValueError("stamps must be non-negative nanoseconds")
    sec, nanosec = np.divmod(stamps_ns, 1_000_000_000)
    if np.any(sec > np.iinfo(np.int32).max):
        raise ValueError("stamps beyond the int32 seconds of builtin_interfaces/Time")
    pair = np.empty((stamps_ns.size, 2), dtype="<u4")
    pair[:, 0], pair[:, 1] = sec, nanosec  # sec is in [0, 2**31): its int32 and uint32 bytes agree
    return pair.view(np.uint8)


def _put_stamps(rows: np.ndarray, offsets, stamps_ns) -> None:
    """The stamps' Time at each byte offset of ``offsets`` of every row (converted once)."""
    raw = _stamp_bytes(stamps_ns)
    for offset in offsets:
        rows[:, offset:offset + 8] = raw


def _result(rows: np.ndarray, packed: bool):
    """The encoders' result: the (N, size) uint8 matrix of the messages when ``packed``, else one bytes each."""
    return rows if packed else [row.tobytes() for row in rows]


def _batch(count: int, name: str, array, width: int | None) -> np.ndarray:
    array = np.asarray(array, dtype=float)
    if width is None:
        array = array.reshape(count, -1)
    elif array.shape != (count, width):
        raise ValueError(f"{name}: expected shape ({count}, {width}), got {array.shape}")
    return array


# ---------------------------------------------------------------------------------------------- templates
#: The float64 sequences of a sensor_msgs/JointState, in wire order.
JOINT_STATE_ARRAYS = ("position", "velocity", "effort")


def joint_state_template(names, frame_id: str = "", position: bool = True, velocity: bool = True,
                         effort: bool = True) -> TemplateBuilder:
    """sensor_msgs/JointState with ``names``: offsets ``stamp`` and, for each array given (else empty), ``position``
    / ``velocity`` / ``effort`` (``len(names)`` float64 each)."""
    builder = TemplateBuilder()
    builder.header(frame_id, "stamp")
    builder.primitive("I", len(names))
    for name in names:
        builder.string(name)
    for key, present in zip(JOINT_STATE_ARRAYS, (position, velocity, effort), strict=True):
        width = len(names) if present else 0
        builder.primitive("I", width)
        builder.float64s(width, key)
    return builder


def tf_message_template(parents, children) -> TemplateBuilder:
    """tf2_msgs/TFMessage of the transforms ``parents[i]`` -> ``children[i]``: offsets ``stamp{i}``,
    ``translation{i}`` (3 float64) and ``rotation{i}`` (4 float64, (x, y, z, w)), the rotation right after the
    translation (7 contiguous float64 per transform)."""
    if len(children) != len(parents):
        raise ValueError(f"expected as many child frames as parent frames, got {len(children)} and {len(parents)}")
    builder = TemplateBuilder()
    builder.primitive("I", len(parents))
    for i, (parent, child) in enumerate(zip(parents, children, strict=True)):
        builder.header(parent, f"stamp{i}")
        builder.string(child)
        builder.float64s(3, f"translation{i}")
        builder.float64s(4, f"rotation{i}")
    return builder


# ---------------------------------------------------------------------------------------------- encoders
def encode_joint_states(stamps_ns, names, positions=None, velocities=None, efforts=None,
                        frame_id: str = "", packed: bool = False):
    """sensor_msgs/JointState messages sharing ``names`` and ``frame_id``: one per stamp, as bytes (``packed``:
    the (N, size) uint8 matrix of them, one message per row, as ``bag_io.BagWriter.write_streams`` takes them).

    ``positions`` / ``velocities`` / ``efforts``: (N, len(names)) arrays, or None for an empty field.
    """
    stamps_ns = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
    count, n = stamps_ns.size, len(names)
    given = {key: values for key, values in (("position", positions), ("velocity", velocities),
                                              ("effort", efforts)) if values is not None}
    fields = {key: _batch(count, key, values, n) for key, values in given.items()}
    template = _Template(joint_state_template(names, frame_id, *(key in given for key in JOINT_STATE_ARRAYS)))
    rows = template.fill(count)
    _put_stamps(rows, [template.offsets["stamp"]], stamps_ns)
    for key, values in fields.items():
        _put(rows, template.offsets[key], values, "<f8")
    return _result(rows, packed)


def encode_tf_messages(stamps_ns, parents, children, translations, quaternions_xyzw, packed: bool = False):
    """tf2_msgs/TFMessage, one per stamp, each with the transforms parent[i] -> child[i] (all stamped alike); bytes
    or, ``packed``, one matrix (see :func:`encode_joint_states`).

    ``translations`` (N, k, 3), ``quaternions_xyzw`` (N, k, 4) in geometry_msgs' (x, y, z, w) order.
    """
    stamps_ns = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
    count, k = stamps_ns.size, len(parents)
    template = _Template(tf_message_template(parents, children))
    # A transform's 7 float64 (translation, then rotation) are contiguous in the message: one (count, k, 7) table,
    # whose bytes are copied transform by transform straight from its strided columns (no copy per field).
    transforms = np.empty((count, k, 7), dtype="<f8")
    transforms[..., :3] = np.asarray(translations, dtype=float).reshape(count, k, 3)
    transforms[..., 3:] = np.asarray(quaternions_xyzw, dtype=float).reshape(count, k, 4)
    raw = transforms.reshape(count, 7 * k).view(np.uint8)
    rows = template.fill(count)
    _put_stamps(rows, [template.offsets[f"stamp{i}"] for i in range(k)], stamps_ns)
    for i in range(k):
        offset = template.offsets[f"translation{i}"]
        rows[:, offset:offset + 56] = raw[:, 56 * i:56 * (i + 1)]
    return _result(rows, packed)


def encode_odometry(stamps_ns, frame_id: str, child_frame_id: str, positions, quaternions_xyzw, linear,
                    angular, pose_covariance=None, twist_covariance=None, packed: bool = False):
    """nav_msgs/Odometry, one per stamp: positions (N, 3), quaternions (N, 4) (x, y, z, w), twist linear and
    angular (N, 3); covariances (N, 36) or None for zeros. Bytes or, ``packed``, one matrix (see
    :func:`encode_joint_states`)."""
    stamps_ns = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
    count = stamps_ns.size
    builder = TemplateBuilder()
    builder.header(frame_id, "stamp")
    builder.string(child_frame_id)
    builder.float64s(3, "position")
    builder.float64s(4, "orientation")
    builder.float64s(36, "pose_covariance")
    builder.float64s(3, "linear")
    builder.float64s(3, "angular")
    builder.float64s(36, "twist_covariance")
    template = _Template(builder)
    rows = template.fill(count)
    _put_stamps(rows, [template.offsets["stamp"]], stamps_ns)
    for key, values, width in (("position", positions, 3), ("orientation", quaternions_xyzw, 4),
                               ("linear", linear, 3), ("angular", angular, 3),
                               ("pose_covariance", pose_covariance, 36), ("twist_covariance", twist_covariance, 36)):
        if values is not None:
            _put(rows, template.offsets[key], _batch(count, key, values, width), "<f8")
    return _result(rows, packed)


def encode_float64_multi_arrays(label: str, values, packed: bool = False):
    """std_msgs/Float64MultiArray, one per row of ``values`` (N, n): one dimension (``label``, size n, stride n),
    data_offset 0. Bytes or, ``packed``, one matrix (see :func:`encode_joint_states`)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values: expected (N, n), got shape {values.shape}")
    count, n = values.shape
    builder = TemplateBuilder()
    builder.primitive("I", 1)
    builder.string(label)
    builder.primitive("I", n)
    builder.primitive("I", n)
    builder.primitive("I", 0)
    builder.primitive("I", n)
    builder.float64s(n, "data")
    template = _Template(builder)
    rows = template.fill(count)
    if n:
        _put(rows, template.offsets["data"], values, "<f8")
    return _result(rows, packed)


# ---------------------------------------------------------------------------------------------- decoders
def _concatenate(datas) -> tuple:
    """(all messages as one uint8 array, start offsets, sizes), padded so that reading a header never leaves it."""
    sizes = np.fromiter(map(len, datas), dtype=np.int64, count=len(datas))
    starts = np.zeros(len(datas), dtype=np.int64)
    if len(datas) > 1:
        np.cumsum(sizes[:-1], out=starts[1:])
    buffer = np.frombuffer(b"".join(datas) + bytes(16), dtype=np.uint8)
    return buffer, starts, sizes


def _joined(datas, members: np.ndarray, count: int) -> np.ndarray:
    """The messages ``datas[members]`` end to end, as one uint8 array (without a Python list in between)."""
    if members.size == count:
        joined = b"".join(datas)
    elif members.size == 1:
        joined = bytes(datas[int(members[0])])
    else:  # itemgetter's tuple is made in C (a map over the members was ~40 ns a message)
        joined = b"".join(itemgetter(*members.tolist())(datas))
    return np.frombuffer(joined, dtype=np.uint8)


def _gather_uint32(buffer: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Little-endian uint32 at each offset of ``buffer`` (int64)."""
    raw = buffer[offsets[:, None] + np.arange(4)]
    return raw.copy().view("<u4").reshape(-1).astype(np.int64)


def _stamps(rows: np.ndarray) -> np.ndarray:
    """builtin_interfaces/Time at the start of each row's body, as int64 nanoseconds."""
    sec = rows[:, _HEADER:_HEADER + 4].copy().view("<i4").reshape(-1).astype(np.int64)
    nanosec = rows[:, _HEADER + 4:_HEADER + 8].copy().view("<u4").reshape(-1).astype(np.int64)
    return stamp_nanoseconds(sec, nanosec)  # INVALID_STAMP_NS where nanosec >= 1e9: the estimator rejects it


def _uint32(data, offset: int) -> int:
    return struct.unpack_from("<I", data, offset)[0]


def _is_little_endian_cdr(data) -> bool:
    return len(data) >= _HEADER and data[0] == 0 and data[1] == 1


@dataclass(frozen=True)
class ImuBatch:
    """Decoded sensor_msgs/Imu messages, one row each. Quaternions in the message's (x, y, z, w) order. The value
    fields are column views of one (N, 37) array (the message's 37 consecutive float64)."""

    stamp_ns: np.ndarray               # (N,) int64
    frame_id: list                     # N str
    orientation_xyzw: np.ndarray       # (N, 4)
    orientation_covariance: np.ndarray  # (N, 9)
    angular_velocity: np.ndarray       # (N, 3)
    angular_velocity_covariance: np.ndarray  # (N, 9)
    linear_acceleration: np.ndarray    # (N, 3)
    linear_acceleration_covariance: np.ndarray  # (N, 9)


def _imu_body_offset(frame_length):
    """Offset (after the encapsulation header) of Imu.orientation for a frame_id of ``frame_length`` bytes
    (NUL included; an int or an array of them)."""
    return align(12 + frame_length, 8)


_IMU_FIELDS = (("orientation_xyzw", 0, 4), ("orientation_covariance", 32, 9), ("angular_velocity", 104, 3),
               ("angular_velocity_covariance", 128, 9), ("linear_acceleration", 200, 3),
               ("linear_acceleration_covariance", 224, 9))
_IMU_TAIL = 296


def _imu_from_rosbags(message) -> tuple:
    stamp = message.header.stamp
    o, w, a = message.orientation, message.angular_velocity, message.linear_acceleration
    return (stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec)), message.header.frame_id,
            {"orientation_xyzw": [o.x, o.y, o.z, o.w], "orientation_covariance": message.orientation_covariance,
             "angular_velocity": [w.x, w.y, w.z], "angular_velocity_covariance": message.angular_velocity_covariance,
             "linear_acceleration": [a.x, a.y, a.z],
             "linear_acceleration_covariance": message.linear_acceleration_covariance})


def decode_imus(datas, typestore=None) -> ImuBatch:
    """Decode sensor_msgs/Imu messages (a list of raw CDR messages, encapsulation header included).

    Messages are grouped by frame_id length; each group is one byte matrix read through fixed offsets. A message
    that is not little-endian CDR or whose size does not match its frame_id is decoded by rosbags (``typestore``,
    default Jazzy) and raises rosbags' SerdeError if it cannot be decoded at all.
    """
    count = len(datas)
    # The fields are 37 consecutive float64 in the message: one row of `table` per message, each field a view of
    # its columns (a size group's messages are then copied in with one row-wise assignment, not one per field).
    table = np.empty((count, _IMU_TAIL // 8))
    out = {name: table[:, offset // 8:offset // 8 + width] for name, offset, width in _IMU_FIELDS}
    stamp_ns = np.empty(count, dtype=np.int64)
    frames = np.empty(count, dtype=object)
    fits = np.zeros(count, dtype=bool)
    sizes = np.fromiter(map(len, datas), dtype=np.int64, count=count)
    # Messages of one size joined are a (n, size) byte matrix as they stand: each size group is checked and read
    # through fixed offsets (one topic's messages usually share a size).
    for size in np.unique(sizes[sizes >= _HEADER + 12]).tolist():
        members = np.flatnonzero(sizes == size)
        block = _joined(datas, members, count).reshape(members.size, size)
        frame_length = block[:, _HEADER + 8:_HEADER + 12].copy().view("<u4").reshape(-1).astype(np.int64)
        expected = _HEADER + _imu_body_offset(frame_length) + _IMU_TAIL
        good = (block[:, 0] == 0) & (block[:, 1] == 1) & (frame_length > 0) & (expected == size)
        nul = np.where(good, _HEADER + 12 + frame_length - 1, 0)
        good &= block[np.arange(members.size), nul] == 0
        if not good.any():
            continue
        # Every good message of the group has its values at one offset (its size fixes the padded frame_id length),
        # so the values are read for the whole group at once; frame_ids by length.
        every = good.all()
        rows, index, frame_length = (block, members, frame_length) if every else (block[good], members[good],
                                                                                  frame_length[good])
        fits[index] = True
        stamp_ns[index] = _stamps(rows)
        body = size - _IMU_TAIL  # = _HEADER + _imu_body_offset(frame length) of every good message
        fields = rows[:, body:size].view("<f8")  # rows are contiguous: a view, no copy
        if index.size == count:
            table[:] = fields
        else:
            table[index] = fields
        lengths = np.unique(frame_length).tolist()
        for length in lengths:
            selected = frame_length == length
            text = rows[:, _HEADER + 12:_HEADER + 12 + length - 1]
            text = text if len(lengths) == 1 else text[selected]
            target = index if len(lengths) == 1 else index[selected]
            if np.all(text == text[0]):  # one sensor's topic: a single frame_id
                frames[target] = bytes(text[0]).decode("utf-8")
            else:
                decoded: dict = {}
                frames[target] = [decoded.get(raw) or decoded.setdefault(raw, raw.decode("utf-8"))
                                  for raw in map(bytes, text)]
    frame_ids = frames.tolist()
    slow = np.flatnonzero(~fits).tolist()
    if slow:
        typestore = typestore if typestore is not None else _default_typestore()
        for i in slow:
            message = typestore.deserialize_cdr(bytes(datas[i]), IMU_MSGTYPE)
            stamp_ns[i], frame_ids[i], values = _imu_from_rosbags(message)
            for name, _, _ in _IMU_FIELDS:
                out[name][i] = np.asarray(values[name], dtype=float)
    return ImuBatch(stamp_ns=stamp_ns, frame_id=frame_ids, **out)


@dataclass(frozen=True)
class JointStateBlock:
    """JointState messages of one layout (frame_id, names, array sizes), read together: ``members`` (g,) their
    indices in the batch, in batch order, and their values as (g, n) read-only matrices, one row per message."""

    members: np.ndarray
    frame_id: str
    names: tuple
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class JointStateBatch:
    """Decoded sensor_msgs/JointState messages: per message its stamp, frame_id, names and value arrays
    (float64, possibly empty; messages of one layout share one matrix, so the arrays are read-only views).

    ``stamp_ns`` (N,) int64; ``blocks``: the messages by layout (:class:`JointStateBlock`; every message is in one),
    the matrices bulk readers take; ``frame_id``, ``name`` (tuples of str), ``position``, ``velocity`` and
    ``effort``: lists with one entry per message, made from the blocks on first use (a reader of the blocks does not
    pay for a Python object per message)."""

    def __init__(self, stamp_ns: np.ndarray, blocks: list):
        self.stamp_ns = stamp_ns
        self.blocks = blocks

    def _column(self, pick) -> list:
        count = len(self.stamp_ns)
        column: list = [None] * count
        for block in self.blocks:
            items = pick(block)
            _place(column, block.members.tolist(), items, block.members.size == count)
        return column

    @cached_property
    def frame_id(self) -> list:
        return self._column(lambda block: [block.frame_id] * block.members.size)

    @cached_property
    def name(self) -> list:
        return self._column(lambda block: [block.names] * block.members.size)

    @cached_property
    def position(self) -> list:
        return self._column(lambda block: list(block.position))

    @cached_property
    def velocity(self) -> list:
        return self._column(lambda block: list(block.velocity))

    @cached_property
    def effort(self) -> list:
        return self._column(lambda block: list(block.effort))


def _parse_joint_state_layout(data) -> tuple:
    """Walk one little-endian JointState: (frame_id, names, {field: (count, count offset, values offset)}, the
    offsets of the bytes that carry frame_id, the names and the counts (not the padding between them, which a
    serializer may leave uninitialized, as rclpy's does)). Raises CdrLayoutError (or struct.error /
    UnicodeDecodeError / IndexError) when the bytes are not one.

    Trailing bytes are accepted where Fast CDR (the serializer of rmw_fastrtps, ROS 2's default middleware, behind
    rclpy's ``serialize_message`` and so behind bags written with it) leaves them: it sizes an empty float64
    sequence as if its (absent) values were aligned to 8, so a message with an empty position, velocity or effort
    can end with 4, 8 or 12 unwritten bytes (measured on Jazzy: 8 for a JointState with positions only)."""
    offset = _HEADER + 8
    frame_length = _uint32(data, offset)
    content = [range(offset, offset + 4 + frame_length)]
    offset += 4
    if frame_length == 0 or offset + frame_length > len(data) or data[offset + frame_length - 1] != 0:
        raise CdrLayoutError("frame_id is not NUL-terminated")
    frame_id = bytes(data[offset:offset + frame_length - 1]).decode("utf-8")
    offset += frame_length
    offset = _HEADER + align(offset - _HEADER, 4)
    count = _uint32(data, offset)
    content.append(range(offset, offset + 4))
    offset += 4
    if count > len(data):
        raise CdrLayoutError("name count beyond the message")
    names = []
    for _ in range(count):
        offset = _HEADER + align(offset - _HEADER, 4)
        length = _uint32(data, offset)
        content.append(range(offset, offset + 4 + length))
        offset += 4
        if length == 0 or offset + length > len(data) or data[offset + length - 1] != 0:
            raise CdrLayoutError("a name is not NUL-terminated")
        names.append(bytes(data[offset:offset + length - 1]).decode("utf-8"))
        offset += length
    fields = {}
    for key in ("position", "velocity", "effort"):
        count_offset = _HEADER + align(offset - _HEADER, 4)
        n = _uint32(data, count_offset)
        offset = count_offset + 4
        if n:
            offset = _HEADER + align(offset - _HEADER, 8)
        fields[key] = (n, count_offset, offset)
        offset += 8 * n
        if offset > len(data):
            raise CdrLayoutError(f"{key} runs beyond the message")
    trailing = len(data) - offset
    empty = any(n == 0 for n, _, _ in fields.values())
    if trailing and not (empty and trailing % 4 == 0 and trailing <= 4 * len(fields)):
        raise CdrLayoutError(f"{trailing} unexpected bytes after the message")
    for _, count_offset, _ in fields.values():
        content.append(range(count_offset, count_offset + 4))
    return frame_id, tuple(names), fields, np.fromiter(chain.from_iterable(content), dtype=np.int64)


def joint_state_message(data, typestore):
    """rosbags' ``sensor_msgs/msg/JointState`` object of one little-endian message, Fast CDR's trailing bytes
    allowed (:func:`_parse_joint_state_layout`), for a reader that decodes message by message."""
    if not _is_little_endian_cdr(data):
        raise CdrLayoutError("not a little-endian CDR message")
    frame_id, names, fields, _ = _parse_joint_state_layout(data)
    sec, nanosec = struct.unpack_from("<iI", data, _HEADER)
    types = typestore.types
    values = {key: np.frombuffer(bytes(data[offset:offset + 8 * n]), dtype="<f8").astype(float)
              for key, (n, _, offset) in fields.items()}
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                          frame_id=frame_id)
    return types[JOINT_STATE_MSGTYPE](header=header, name=list(names), **values)


def _place(column: list, members: list, items: list, whole: bool) -> None:
    """``column[members[k]] = items[k]`` for every k (a slice assignment when ``members`` is every index)."""
    if whole:
        column[:] = items
        return
    for i, item in zip(members, items, strict=True):
        column[i] = item


def decode_joint_states(datas, typestore=None) -> JointStateBatch:
    """Decode sensor_msgs/JointState messages (raw CDR, encapsulation header included).

    The first message of each layout is parsed once; its prefix (frame_id, names and the position count) and
    size identify the messages that repeat it, which are read as rows of one matrix (their velocity and effort
    counts are compared too): one :class:`JointStateBlock` per layout. Others (including big-endian ones) go
    through rosbags, a block of one message each.
    """
    count = len(datas)
    stamp_ns = np.empty(count, dtype=np.int64)
    blocks: list = []
    buffer, starts, sizes = _concatenate(datas)
    usable = sizes >= _HEADER + 12
    head = np.where(usable, starts, 0)
    little = usable & (buffer[head] == 0) & (buffer[head + 1] == 1) if count else usable
    slow = np.flatnonzero(~little).tolist()
    pending = np.flatnonzero(little)
    while pending.size:
        first = int(pending[0])
        try:
            frame_id, message_names, fields, content = _parse_joint_state_layout(datas[first])
        except (CdrLayoutError, struct.error, UnicodeDecodeError, IndexError):
            slow.append(first)
            pending = pending[1:]
            continue
        size = int(sizes[first])
        candidates = pending[sizes[pending] == size]
        rows = _joined(datas, candidates, count).reshape(candidates.size, size)
        # Same layout: frame_id, the names and the three counts agree byte for byte (padding may differ).
        same = np.all(rows[:, content] == rows[0, content], axis=1)
        group = candidates[same]
        rows = rows[same]
        remaining = np.ones(len(pending), dtype=bool)
        remaining[np.searchsorted(pending, group)] = False
        pending = pending[remaining]
        stamp_ns[group] = _stamps(rows)
        matrices = []
        for key in ("position", "velocity", "effort"):
            n, _, offset = fields[key]
            matrix = rows[:, offset:offset + 8 * n].copy().view("<f8").reshape(group.size, n)
            matrix.setflags(write=False)
            matrices.append(matrix)
        blocks.append(JointStateBlock(group, frame_id, message_names, *matrices))
    if slow:
        typestore = typestore if typestore is not None else _default_typestore()
        for i in slow:
            message = typestore.deserialize_cdr(bytes(datas[i]), JOINT_STATE_MSGTYPE)
            stamp = message.header.stamp
            stamp_ns[i] = stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec))
            matrices = []
            for key in ("position", "velocity", "effort"):
                matrix = np.asarray(getattr(message, key), dtype=float).reshape(1, -1)
                matrix.setflags(write=False)
                matrices.append(matrix)
            blocks.append(JointStateBlock(np.array([i], dtype=np.int64), message.header.frame_id,
                                          tuple(message.name), *matrices))
    return JointStateBatch(stamp_ns, blocks)


_TYPESTORE = None


def _default_typestore():
    """The rosbags typestore of :data:`DEFAULT_DISTRO`, made once, for decoders called without one."""
    global _TYPESTORE
    if _TYPESTORE is None:
        _TYPESTORE = get_typestore(DISTROS[DEFAULT_DISTRO])
    return _TYPESTORE
