"""Per-message CDR for the live estimator node: Imu decoding, JointState/TFMessage encoding into fixed templates.

Where you are: the ROS edge (``ros_dofkit.ros``). The node's budget is a few hundred microseconds per sample set,
and rclpy's generic (de)serialization through Python message objects is a large share of it (an Imu message
object costs tens of microseconds to build and read; a TFMessage of 7 TransformStamped objects far more to
build and serialize). Batch codecs (``ros_dofkit.ros.cdr``) pay a fixed NumPy set-up per call, which is right for
a bag and wrong for one message. Here:

* :func:`decode_imu` reads one serialized ``sensor_msgs/Imu`` with ``struct`` at offsets fixed by its frame_id
  length (:func:`decode_imu_reading`: its values as a NumPy view of the bytes, the node's path), and raises
  :class:`MalformedMessageError` for anything that is not a complete Imu (wrong encapsulation, truncated, trailing
  bytes, a frame_id without its NUL or not UTF-8);
* :class:`JointStateEncoder` and :class:`TfMessageEncoder` serialize the node's outputs, whose names and sizes
  never change, by writing the stamp and the values into a byte template made once (``cdr.joint_state_template``,
  ``cdr.tf_message_template``: the templates of the bulk encoders too, one layout code for both), through NumPy
  views of the template's bytes: one array assignment per field, whatever the number of joints or transforms;
* :meth:`TfMessageEncoder.encode_poses` writes the node's per-cycle TFMessage from the body poses in one compiled
  call (:func:`_write_transforms`: relative poses, quaternions and stamps straight into the template), with the
  bits of ``tf_builder``'s object path (the same compiled relative poses and quaternion kernel, the same sign
  rule); through NumPy that cost ~17 us a cycle (a dozen array calls), now ~2.

Wire format (XCDR1 as ROS 2 uses it; see ``ros_dofkit.ros.cdr``): a 4-byte encapsulation header (byte 1 is 1 for
little endian, 0 for big endian), then the fields; alignment is counted from the end of the header; strings are
a uint32 length including the NUL. The bytes produced are identical to rosbags' ``serialize_cdr`` and read back
by rclpy's ``deserialize_message`` as the same message (checked in test/test_live_cdr.py); rclpy's own
serializer differs only in padding bytes, which it leaves uninitialized.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from ros_dofkit.core.estimator.offline import relative_poses_into
from ros_dofkit.core.spatial import matrix_to_quat_into
from ros_dofkit.ros.cdr import CDR_LE_HEADER, align, joint_state_template, tf_message_template

_HEADER = len(CDR_LE_HEADER)
# Imu after its header: orientation (4), orientation_covariance (9), angular_velocity (3), its covariance (9),
# linear_acceleration (3), its covariance (9): 37 float64.
_IMU_DOUBLES = 37
_IMU_BODY = struct.Struct("<37d")
_IMU_BODY_BE = struct.Struct(">37d")
_IMU_HEAD = struct.Struct("<iII")  # header.stamp.sec, header.stamp.nanosec, frame_id's length
_IMU_HEAD_BE = struct.Struct(">iII")


class MalformedMessageError(ValueError):
    """Serialized bytes that are not a complete message of the expected type; the text says what was wrong."""


def decode_imu(data) -> tuple:
    """One serialized ``sensor_msgs/Imu`` -> ``(sec, nanosec, frame_id, values)``.

    ``values`` is the tuple of the 37 float64 after the header: orientation (x, y, z, w) [0:4], its covariance
    [4:13], angular_velocity (x, y, z) [13:16], its covariance [16:25], linear_acceleration [25:28], its covariance
    [28:37]. Raises :class:`MalformedMessageError` when ``data`` is not exactly one Imu."""
    little, sec, nanosec, frame_id, body = _imu_layout(data)
    return sec, nanosec, frame_id, (_IMU_BODY if little else _IMU_BODY_BE).unpack_from(data, body)


def decode_imu_reading(data) -> tuple:
    """:func:`decode_imu` without the frame_id and with the 37 values as a read-only float64 array, ``(sec,
    nanosec, values)``: a view of ``data`` (little endian, the usual), no Python float made (the estimator's
    ``process_imu_reading`` reads it in compiled code). Raises :class:`MalformedMessageError` as :func:`decode_imu`."""
    little, sec, nanosec, _, body = _imu_layout(data)
    if little:
        values = np.frombuffer(data, dtype=np.float64, count=_IMU_DOUBLES, offset=body)
        if not values.flags.writeable:  # (a view of bytes; of a bytearray it would be writable)
            return sec, nanosec, values
    else:
        values = np.array(_IMU_BODY_BE.unpack_from(data, body))
    values = values.copy()
    values.flags.writeable = False
    return sec, nanosec, values


def _imu_layout(data) -> tuple:
    """``(little endian, sec, nanosec, frame_id, offset of the 37 float64)`` of one serialized Imu, checked."""
    size = len(data)
    if size < _HEADER + 12:
        raise MalformedMessageError(f"Imu: expected at least {_HEADER + 12} bytes, got {size}")
    if data[0] != 0 or data[1] not in (0, 1):
        raise MalformedMessageError(f"Imu: expected a plain CDR encapsulation header (00 00 or 00 01), got "
                                    f"{bytes(data[:2]).hex(' ')}")
    little = data[1] == 1
    sec, nanosec, length = (_IMU_HEAD if little else _IMU_HEAD_BE).unpack_from(data, _HEADER)
    text_end = _HEADER + 12 + length
    body = _HEADER + align(12 + length, 8)
    expected = body + 8 * _IMU_DOUBLES
    # Up to 7 trailing bytes are tolerated: serializers may pad the payload to their own alignment (rclpy's
    # serialize_message pads to 8); more means the bytes are something else.
    if length == 0 or not expected <= size < expected + 8:
        raise MalformedMessageError(f"Imu: frame_id of {length} bytes needs a message of {expected} bytes (+ up to "
                                    f"7 padding), got {size}")
    if data[text_end - 1] != 0:
        raise MalformedMessageError("Imu: frame_id is not NUL-terminated")
    try:
        frame_id = bytes(data[_HEADER + 12:text_end - 1]).decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedMessageError(f"Imu: frame_id is not UTF-8 ({error})") from None
    return little, sec, nanosec, frame_id, body


class _FilledTemplate:
    """A message template (``cdr.TemplateBuilder``) and writable NumPy views of its bytes: ``doubles``, the float64
    values (CDR aligns a float64 to 8 bytes counted from the end of the 4-byte encapsulation header, so every float64
    of the message is one element of it), and ``words``, the 4-byte words (stamps: an int32 and a uint32, aligned to
    4 from the start). One array assignment then fills a field of any length, with no per-value Python call."""

    def __init__(self, template):
        self.offsets = template.offsets
        self.buffer = bytearray(template.message())
        size = len(self.buffer)
        self.doubles = np.frombuffer(memoryview(self.buffer)[_HEADER:_HEADER + (size - _HEADER) // 8 * 8], dtype="<f8")
        self.words = np.frombuffer(memoryview(self.buffer)[:size // 4 * 4], dtype="<u4")

    def double_index(self, key: str) -> int:
        """Index in ``doubles`` of the float64 at offset ``key`` (the template builder aligns each to 8)."""
        return (self.offsets[key] - _HEADER) // 8

    def stamp_index(self, key: str) -> int:
        """Index in ``words`` of the stamp (sec, then nanosec) at offset ``key``."""
        return self.offsets[key] // 4


def stamp_words(sec: int, nanosec: int) -> tuple[int, int]:
    """(sec, nanosec) of builtin_interfaces/Time as the two uint32 words of the wire (sec is an int32)."""
    if not (-2**31 <= sec < 2**31 and 0 <= nanosec < 2**32):
        raise ValueError(f"stamp: expected an int32 sec and a uint32 nanosec, got ({sec}, {nanosec})")
    return sec & 0xFFFFFFFF, nanosec


class JointStateEncoder:
    """Serializes ``sensor_msgs/JointState`` messages with fixed ``names`` (positions and velocities, no effort)."""

    def __init__(self, names, frame_id: str = ""):
        self.names = tuple(names)
        count = len(self.names)
        self._message = _FilledTemplate(joint_state_template(self.names, frame_id, effort=False))
        self._stamp = slice(self._message.stamp_index("stamp"), self._message.stamp_index("stamp") + 2)
        start = [self._message.double_index(key) if count else 0 for key in ("position", "velocity")]
        self._position, self._velocity = (slice(i, i + count) for i in start)

    def encode(self, sec: int, nanosec: int, positions, velocities) -> bytes:
        """The message's bytes; ``positions``/``velocities`` are sequences (or arrays) of ``len(names)`` floats."""
        message = self._message
        message.words[self._stamp] = stamp_words(sec, nanosec)
        message.doubles[self._position] = positions
        message.doubles[self._velocity] = velocities
        return bytes(message.buffer)


@njit(cache=True)
def _write_transforms(X_WB, parents, bodies, X_PC, R_PC, quaternions, doubles, translations, rotations, words, stamps,
                      sec_word, nanosec):
    """Into a TFMessage template's ``doubles`` / ``words`` (:class:`TfMessageEncoder`): X_PC = inv(X_WP) X_WC of
    each body of ``bodies`` relative to its ``parents`` entry at the poses ``X_WB`` (1, num_bodies, 4, 4), the
    translations p_PC at ``translations`` (k, 3) and the quaternions (x, y, z, w), w >= 0 (``spatial.matrix_to_quat``'s
    kernel and sign rule), at ``rotations`` (k, 4); the stamp's two words at ``stamps`` (k, 2). Workspaces X_PC
    (1, k, 4, 4), R_PC (k, 3, 3), quaternions (k, 4). Returns False, writing no quaternion, when the quaternion kernel
    declines a matrix (not a proper rotation: the caller then goes through ``matrix_to_quat``, which asks scipy)."""
    relative_poses_into(X_WB, parents, bodies, X_PC)
    for m in range(bodies.shape[0]):
        for i in range(3):
            for j in range(3):
                R_PC[m, i, j] = X_PC[0, m, i, j]
    if not matrix_to_quat_into(R_PC, quaternions):
        return False
    for m in range(bodies.shape[0]):
        sign = -1.0 if quaternions[m, 0] < 0.0 else 1.0  # matrix_to_quat's canonical w >= 0 (negation is exact)
        for i in range(3):
            doubles[translations[m, i]] = X_PC[0, m, i, 3]
            doubles[rotations[m, i]] = sign * quaternions[m, i + 1]
        doubles[rotations[m, 3]] = sign * quaternions[m, 0]
        words[stamps[m, 0]] = sec_word
        words[stamps[m, 1]] = nanosec
    return True


class TfMessageEncoder:
    """Serializes ``tf2_msgs/TFMessage`` messages with a fixed list of (parent, child) frame pairs, all transforms
    stamped alike."""

    def __init__(self, parents, children):
        parents, children = tuple(parents), tuple(children)
        template = tf_message_template(parents, children)  # ValueError unless as many children as parents
        self.count = len(parents)
        self._message = _FilledTemplate(template)
        stamps = np.array([self._message.stamp_index(f"stamp{i}") for i in range(self.count)], dtype=np.intp)
        self._stamps = np.stack([stamps, stamps + 1], axis=1).reshape(self.count, 2)
        # translation (x, y, z) then rotation (x, y, z, w): 7 contiguous float64 per transform
        first = np.array([self._message.double_index(f"translation{i}") for i in range(self.count)], dtype=np.intp)
        self._translations = first[:, None] + np.arange(3)
        self._rotations = first[:, None] + np.arange(3, 7)
        # encode_poses' workspaces
        self._X_PC, self._R_PC, self._q = np.empty((1, self.count, 4, 4)), np.empty((self.count, 3, 3)), np.empty(
            (self.count, 4))

    def encode(self, sec: int, nanosec: int, translations, quaternions_xyzw) -> bytes:
        """The message's bytes; ``translations`` (count, 3), ``quaternions_xyzw`` (count, 4)."""
        message = self._message
        message.doubles[self._translations] = np.asarray(translations, dtype=float).reshape(self.count, 3)
        message.doubles[self._rotations] = np.asarray(quaternions_xyzw, dtype=float).reshape(self.count, 4)
        message.words[self._stamps] = stamp_words(sec, nanosec)
        return bytes(message.buffer)

    def encode_poses(self, sec: int, nanosec: int, X_WB, parents, bodies) -> bytes | None:
        """The message's bytes with transform m = X_PC of body ``bodies[m]`` relative to ``parents[m]`` at the poses
        ``X_WB`` (num_bodies, 4, 4; the rows ``parents`` and ``bodies`` name are read unchecked), its rotation as
        ``spatial.matrix_to_quat`` gives it (x, y, z, w); ``parents`` and ``bodies`` int64 arrays of ``count``.
        None when a relative rotation is not a proper one (the quaternion kernel leaves those to scipy: then
        :meth:`encode` them)."""
        sec_word, nanosec = stamp_words(sec, nanosec)
        X_WB = np.ascontiguousarray(X_WB, dtype=float)
        message = self._message
        if _write_transforms(X_WB[None], parents, bodies, self._X_PC, self._R_PC, self._q, message.doubles,
                             self._translations, self._rotations, message.words, self._stamps, sec_word, nanosec):
            return bytes(message.buffer)
        return None
