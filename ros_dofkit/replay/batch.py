"""Offline replay in bulk: a bag's raw messages -> arrays -> the batched estimator -> encoded outputs -> a bag.

You are in ``ros_dofkit.replay``; imports ``ros_dofkit.ros.bag_io`` (raw messages) and ``ros_dofkit.ros.cdr`` (bulk
decoding), ``replay.inputs`` (the topic checks both paths share) and the core's ``OfflineInputs``; used by
``replay.bag_replay``. ``dofkit replay`` takes this path by default (every configuration); it computes what the
streaming path (:class:`~ros_dofkit.replay.pipeline.ReplayLoop` over ``process_imu`` / ``process_joint_state``)
computes, bit for bit, but decodes and encodes whole topics with ``ros_dofkit.ros.cdr``, runs the cycle rules over
a window at a time and the solver over sequences (``Estimator.feed``), and writes the output bag with bulk inserts.
A bag is read in windows of a bounded number of messages (:func:`iter_offline_inputs`), so memory does not grow with
its length.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from operator import itemgetter

import numpy as np
from rosbags.serde import SerdeError

from ros_dofkit.core.estimator.inputs import nanoseconds_to_seconds
from ros_dofkit.core.estimator.offline import JointStateLayoutRows, OfflineInputs
from ros_dofkit.replay.inputs import decode_odometries, magnetic_field_topics, validate_input_topics
from ros_dofkit.ros.bag_io import BagError, RawMessages, iter_raw, make_typestore
from ros_dofkit.ros.cdr import decode_imus, decode_joint_states
from ros_dofkit.ros.imu_messages import MAGNETIC_FIELD_MSGTYPE, magnetic_field_to_arrays
from ros_dofkit.ros.magnetometer_frames import window_fields_match

_DECODE_ERRORS = (SerdeError, struct.error, ValueError, IndexError, UnicodeDecodeError, OverflowError)

#: Messages per window of a windowed read: ~2.5 s of 4 IMUs at 400 Hz. A window's raw, decoded and estimated data take
#: ~5-10 MB; replays of a 300 s bag in windows of 4096 to 32768 messages took the same time within 5% (per-window
#: overhead is small), and a single window for the whole bag was ~2x slower (arrays far beyond the caches). 4096
#: rather than 8192: a process's first window pays for its fresh pages (the heap grows to a window's working set),
#: and the smaller window halves that: the first replay of benchmarks/replay_speed.py's 10 s bag in a process
#: ~1,800 instead of ~4,500 page faults, ~4 ms less CPU (loaded machine; a 60 s bag: the same CPU within 2%).
WINDOW_MESSAGES = 4096


def iter_offline_inputs(path, setup, topics: dict | None = None, truth_topic: str | None = None, typestore=None,
                        window: int | None = WINDOW_MESSAGES) -> Iterator[tuple[OfflineInputs, list]]:
    """The estimator inputs of the bag at ``path`` in bag order, as consecutive windows of at most ``window``
    messages (None: one window): ``(inputs, truth_blocks)`` per window, ``inputs`` an :class:`OfflineInputs`
    (header stamps, as the streaming path offers them) and ``truth_blocks`` the window's ``truth_topic`` messages
    as ``(stamps_ns (k,), names, positions (k, n))`` blocks of consecutive messages sharing their layout
    (``replay.inputs.truth_from_blocks``).

    ``topics``: the bag's ``{topic: (msgtype, count)}`` already checked against ``setup``
    (``replay.inputs.check_input_topics``), or a dict to fill: when empty, the topics are checked while the bag is
    opened (one opening) and written into it. Raises :class:`BagError` for a bag that cannot drive ``setup`` or a
    message that cannot be decoded (when the window holding it is read).
    """
    checked_already = dict(topics) if topics else None
    seen = topics if topics is not None else {}

    def select(available: dict) -> list:
        checked = checked_already if checked_already is not None else validate_input_topics(path, available, setup)
        seen.update(checked)
        wanted = [t for t in (*setup.imu_topics, setup.joint_states_topic, setup.odometry_topic,
                              *magnetic_field_topics(setup)) if t in checked]
        if truth_topic is not None and truth_topic in checked:
            wanted.append(truth_topic)
        return wanted

    newest_imu_frames = {}  # the magnetometer frame rule's state across windows (ros.magnetometer_frames)
    for raw in iter_raw(path, topics=select, window=window, stamps=False):  # the header stamps are used
        yield offline_inputs_from_raw(raw, setup, truth_topic, typestore, path, newest_imu_frames)


def read_offline_inputs(path, setup, topics: dict | None = None, truth_topic: str | None = None, typestore=None):
    """The whole bag at once (:func:`iter_offline_inputs` in one window): ``(inputs, truth_blocks, topics)``."""
    seen = dict(topics) if topics else {}
    windows = list(iter_offline_inputs(path, setup, seen, truth_topic, typestore, window=None))
    if windows:
        return windows[0][0], windows[0][1], seen
    empty = RawMessages([], np.zeros(0, dtype=np.int64), [], {})
    return offline_inputs_from_raw(empty, setup, truth_topic, typestore, path)[0], [], seen


def _field_inputs(fields: dict, setup, topic_index, messages, offered_before, newest_imu_frames: dict,
                  message_positions, imus, imu_sensor, imu_positions) -> dict:
    """``OfflineInputs``' ``field_*`` arrays of a window's magnetometer ``messages`` (at ``message_positions`` among
    the window's, its Imu messages ``imus`` at ``imu_positions``), none when none is configured."""
    if not fields:
        return {}
    sensor_of_topic = [setup.config.imu_names.index(name) for name in fields.values()]
    records = [magnetic_field_to_arrays(message) for message in messages]
    stamps_ns = np.array([stamp_ns for stamp_ns, _ in records], dtype=np.int64)
    sensor = np.array([sensor_of_topic[j] for j in topic_index.tolist()], dtype=np.int64)
    return {"field_sensor": sensor,
            "field_stamp": nanoseconds_to_seconds(stamps_ns),
            "field_vector": np.array([f for _, f in records], dtype=float).reshape(-1, 3),
            "field_position": np.asarray(offered_before, dtype=np.int64),
            "field_frames_match": window_fields_match(
                newest_imu_frames, sensor_of_topic, sensor,
                [message.header.frame_id for message in messages], message_positions, imu_sensor, imus.frame_id,
                imu_positions)}


def _picked(data: list, positions: np.ndarray):
    """The messages ``data[positions]`` (a sequence): itemgetter's tuple, made in C."""
    if positions.size == len(data):
        return data
    if positions.size < 2:
        return [data[p] for p in positions.tolist()]
    return itemgetter(*positions.tolist())(data)


def offline_inputs_from_raw(raw: RawMessages, setup, truth_topic: str | None, typestore, path,
                            newest_imu_frames: dict | None = None) -> tuple:
    """``(OfflineInputs, truth_blocks)`` of raw messages in stamp order (see :func:`iter_offline_inputs`);
    ``newest_imu_frames`` the magnetometer frame rule's state carried from the windows before (updated)."""
    # A code per message: IMU topic k -> k (its sensor is imu_sensor_of[k]), joint states -> IMUS, truth -> IMUS + 1,
    # odometry -> IMUS + 2.
    imu_topics = list(setup.imu_topics)
    imus_count = len(imu_topics)
    codes = {topic: k for k, topic in enumerate(imu_topics)}
    codes[setup.joint_states_topic] = imus_count
    if truth_topic is not None:
        codes[truth_topic] = imus_count + 1
    if setup.odometry_topic is not None:
        codes[setup.odometry_topic] = imus_count + 2
    fields = magnetic_field_topics(setup)  # raw IMUs' magnetometers -> codes IMUS + 3 + j
    codes.update({topic: imus_count + 3 + j for j, topic in enumerate(fields)})
    imu_sensor_of = np.array([setup.config.imu_names.index(setup.imu_topics[t]) for t in imu_topics], dtype=np.int64)
    if raw.topic_index is not None:  # the reader's topic index: one code per topic, then NumPy
        index, names = raw.topic_index
        code = np.array([codes[name] for name in names], dtype=np.int64)[index] if names else np.zeros(0, np.int64)
    else:
        code = np.fromiter(map(codes.__getitem__, raw.topics), dtype=np.int64, count=len(raw.topics))
    imu_positions = np.flatnonzero(code < imus_count)
    js_positions = np.flatnonzero(code == imus_count)
    truth_positions = np.flatnonzero(code == imus_count + 1)
    odometry_positions = np.flatnonzero(code == imus_count + 2)
    data = raw.data
    field_messages = []
    try:
        imus = decode_imus(_picked(data, imu_positions), typestore)
        joint_states = decode_joint_states(_picked(data, js_positions), typestore)
        truth = decode_joint_states(_picked(data, truth_positions), typestore)
        odometry = decode_odometries(_picked(data, odometry_positions), typestore, setup.odometry_frames)
        field_positions = np.flatnonzero(code >= imus_count + 3)
        if field_positions.size:  # few and slow: one rosbags message each, read as the streaming path reads it
            store = typestore if typestore is not None else make_typestore()
            field_messages = [store.deserialize_cdr(bytes(raw.data[p]), MAGNETIC_FIELD_MSGTYPE)
                              for p in field_positions.tolist()]
    except _DECODE_ERRORS as error:
        raise BagError(f"corrupt bag {path}: a message cannot be decoded ({error})") from None

    # As ros.imu_messages.imu_message_to_arrays + inputs.bag_inputs: a field whose covariance[0] is -1 is absent
    # (NaN), and presence is read from the first component.
    xyzw = imus.orientation_xyzw
    quaternion = np.where((imus.orientation_covariance[:, :1] == -1), np.nan, xyzw[:, [3, 0, 1, 2]])
    gyro = np.where(imus.angular_velocity_covariance[:, :1] == -1, np.nan, imus.angular_velocity)
    accel_present = imus.linear_acceleration_covariance[:, 0] != -1  # raw IMUs' orientation filters read it
    imu_sensor = imu_sensor_of[code[imu_positions]]

    inputs_mask = (code <= imus_count) | (code == imus_count + 2)  # IMUs, joint states, odometry
    offered = code[inputs_mask]
    kind = np.select([offered == imus_count, offered == imus_count + 2], [1, 2], 0)  # 0 IMU, 1 joints, 2 odometry
    row = np.empty(len(code), dtype=np.int64)
    row[imu_positions] = np.arange(len(imu_positions))
    row[js_positions] = np.arange(len(js_positions))
    row[odometry_positions] = np.arange(len(odometry_positions))
    stamp_ns = np.empty(len(code), dtype=np.int64)
    stamp_ns[imu_positions] = imus.stamp_ns
    stamp_ns[js_positions] = joint_states.stamp_ns
    stamp_ns[odometry_positions] = odometry.stamp_ns
    velocities = [v if v.size else None for v in joint_states.velocity]
    inputs = OfflineInputs(
        kind=kind, row=row[inputs_mask], imu_sensor=imu_sensor, imu_stamp=nanoseconds_to_seconds(imus.stamp_ns),
        imu_quaternion_wxyz=quaternion, imu_angular_velocity=gyro,
        imu_orientation_present=~np.isnan(quaternion[:, 0]), imu_angular_velocity_present=~np.isnan(gyro[:, 0]),
        js_stamp=nanoseconds_to_seconds(joint_states.stamp_ns), js_names=joint_states.name,
        js_positions=joint_states.position, js_velocities=velocities, stamp_ns=stamp_ns[inputs_mask],
        js_layouts=[JointStateLayoutRows(block.members, block.names, block.position, block.velocity)
                    for block in joint_states.blocks],
        imu_linear_acceleration=imus.linear_acceleration, imu_linear_acceleration_present=accel_present,
        odom_stamp=nanoseconds_to_seconds(odometry.stamp_ns), odom_position=odometry.position,
        odom_quaternion_wxyz=odometry.quaternion_wxyz, odom_frames_match=odometry.frames_match,
        imu_orientation_covariance=imus.orientation_covariance,
        **_field_inputs(fields, setup, code[field_positions] - imus_count - 3, field_messages,
                        np.cumsum(inputs_mask)[field_positions], {} if newest_imu_frames is None else newest_imu_frames,
                        field_positions, imus, imu_sensor, imu_positions))
    # (stamps_ns, names, positions) per block of consecutive truth messages of one layout: the whole window when its
    # messages share one (as usual), else one block per message, in bag order.
    if len(truth.blocks) == 1:
        block = truth.blocks[0]
        truth_blocks = [(truth.stamp_ns, block.names, block.position)]
    else:
        rows = sorted((i, k, block) for block in truth.blocks for k, i in enumerate(block.members.tolist()))
        truth_blocks = [(truth.stamp_ns[i:i + 1], block.names, block.position[k:k + 1]) for i, k, block in rows]
    return inputs, truth_blocks
