"""Bags in and out of the replay loop: simulated streams to a bag, a bag's inputs to the estimator, results to a bag.

You are in ``ros_dofkit.replay`` (the ROS edge, without DDS: messages are rosbags' dataclasses, written and read
through ``ros_dofkit.ros.bag_io``). Topic names and message layouts are the estimator node's, so a bag recorded
here drives the node (``dofkit play``) and a bag written by offline replay looks like a recording of the node:

* inputs: ``/<joint_states_topic>`` (sensor_msgs/JointState), ``/<imus.NAME.topic>`` (sensor_msgs/Imu);
* truth (simulated bags): ``/ground_truth/joint_states`` (every articulated coordinate, positions and velocities);
* outputs: ``/<output_namespace>/joint_states``, ``/<output_namespace>/<instance>/joint_states``,
  ``/<output_namespace>/odometry/<instance>`` (floating bases), ``/<output_namespace>/sensor_errors``
  (std_msgs/Float64MultiArray, degrees), ``/tf`` (every moving joint, stamped with the cycle's input stamp) and
  ``/tf_static`` (fixed joints, once).

Output stamps are the header stamps of the input that completed the cycle (exact nanoseconds, as the node does).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ros_dofkit.core.estimator.inputs import nanoseconds_to_seconds, stamp_nanoseconds
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.replay.pipeline import ImuInput, JointStateInput, ReplayError, Truth
from ros_dofkit.ros.bag_io import BagError, BagWriter, bag_topics, make_typestore, read_bag
from ros_dofkit.ros.tf_tree import frame_ids, moving_and_fixed_bodies

IMU_MSGTYPE = "sensor_msgs/msg/Imu"
JOINT_STATE_MSGTYPE = "sensor_msgs/msg/JointState"
CLOCK_MSGTYPE = "rosgraph_msgs/msg/Clock"
TRUTH_TOPIC = "/ground_truth/joint_states"
CLOCK_TOPIC = "/clock"


def absolute_topic(name: str) -> str:
    """A node-relative topic name as it appears in a bag recorded at the root namespace."""
    return name if name.startswith("/") else "/" + name


def seconds(stamp_ns: int) -> float:
    return nanoseconds_to_seconds(stamp_ns)


def header_stamp_ns(message) -> int:
    """The header stamp in nanoseconds (``INVALID_STAMP_NS`` when nanosec >= 1e9: the estimator rejects it)."""
    stamp = message.header.stamp
    return stamp_nanoseconds(int(stamp.sec), int(stamp.nanosec))


# ---------------------------------------------------------------------------------------------- the set-up
@dataclass(frozen=True)
class ReplaySetup:
    """The robot and estimator of a parameter file, and the topics they use.

    ``imu_topics`` maps a bag topic to an IMU name; ``joint_states_topic`` is the encoder topic in the bag.
    """

    values: dict
    plant: object
    config: object
    imu_topics: dict
    joint_states_topic: str
    output_namespace: str
    world_frame: str
    frame_prefix: str

    @classmethod
    def from_parameters(cls, values: dict) -> ReplaySetup:
        """Build from flat node parameters (``ros_dofkit.ros.parameters``); raises their typed errors."""
        from ros_dofkit.core.estimator.robot import build_plant
        from ros_dofkit.ros.parameters import (
            estimator_config_from_parameters,
            model_specs_from_parameters,
            validate_parameters,
        )

        reasons = validate_parameters(values)
        if reasons:
            raise ReplayError("invalid estimator parameters: " + "; ".join(reasons))
        plant = build_plant(model_specs_from_parameters(values))
        instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
        config = estimator_config_from_parameters(values, instances)
        return cls(
            values=dict(values),
            plant=plant,
            config=config,
            imu_topics={absolute_topic(imu.topic): imu.name for imu in config.imus},
            joint_states_topic=absolute_topic(values.get("joint_states_topic", "joint_states")),
            output_namespace=absolute_topic(values.get("output_namespace", "estimated")).rstrip("/"),
            world_frame=values.get("world_frame", "world"),
            frame_prefix=values.get("frame_prefix", ""),
        )

    @classmethod
    def from_parameter_file(cls, path) -> ReplaySetup:
        from ros_dofkit.ros.parameters import load_parameter_file

        path = Path(path)
        if not path.is_file():
            raise ReplayError(f"configuration file not found: {path}")
        return cls.from_parameters(load_parameter_file(path))


# ---------------------------------------------------------------------------------------------- messages
class MessageFactory:
    """rosbags message objects of the types the replay reads and writes."""

    def __init__(self, typestore=None):
        self.typestore = typestore if typestore is not None else make_typestore()
        types = self.typestore.types
        self._Time = types["builtin_interfaces/msg/Time"]
        self._Header = types["std_msgs/msg/Header"]
        self._JointState = types[JOINT_STATE_MSGTYPE]
        self._Clock = types[CLOCK_MSGTYPE]
        self._TFMessage = types["tf2_msgs/msg/TFMessage"]
        self._TransformStamped = types["geometry_msgs/msg/TransformStamped"]
        self._Transform = types["geometry_msgs/msg/Transform"]
        self._Vector3 = types["geometry_msgs/msg/Vector3"]
        self._Quaternion = types["geometry_msgs/msg/Quaternion"]
        self._Odometry = types["nav_msgs/msg/Odometry"]
        self._PoseWithCovariance = types["geometry_msgs/msg/PoseWithCovariance"]
        self._Pose = types["geometry_msgs/msg/Pose"]
        self._Point = types["geometry_msgs/msg/Point"]
        self._TwistWithCovariance = types["geometry_msgs/msg/TwistWithCovariance"]
        self._Twist = types["geometry_msgs/msg/Twist"]
        self._Float64MultiArray = types["std_msgs/msg/Float64MultiArray"]
        self._MultiArrayLayout = types["std_msgs/msg/MultiArrayLayout"]
        self._MultiArrayDimension = types["std_msgs/msg/MultiArrayDimension"]

    def time(self, stamp_ns: int):
        return self._Time(sec=int(stamp_ns // 1_000_000_000), nanosec=int(stamp_ns % 1_000_000_000))

    def header(self, stamp_ns: int, frame_id: str = ""):
        return self._Header(stamp=self.time(stamp_ns), frame_id=frame_id)

    def joint_state(self, stamp_ns: int, names, positions, velocities=None):
        # The CDR serializer needs contiguous float64 arrays (a row of a column selection is not).
        positions = np.ascontiguousarray(positions, dtype=np.float64)
        velocities = np.zeros(0) if velocities is None else np.ascontiguousarray(velocities, dtype=np.float64)
        return self._JointState(header=self.header(stamp_ns), name=list(names), position=positions,
                                velocity=velocities, effort=np.zeros(0))

    def clock(self, stamp_ns: int):
        return self._Clock(clock=self.time(stamp_ns))

    def tf_message(self, stamp_ns: int, parents, children, X_PC, quaternions=None):
        """TFMessage of one transform per (parent frame, child frame, X_PC) with ``X_PC`` (n, 4, 4);
        ``quaternions`` (n, 4) (w, x, y, z) of their rotations when already known (else computed, in one batch)."""
        if quaternions is None:
            quaternions = matrix_to_quat(X_PC[:, :3, :3]) if len(X_PC) else np.zeros((0, 4))
        Vector3, Quaternion, Transform = self._Vector3, self._Quaternion, self._Transform
        header = self.header
        transforms = []
        for parent, child, X, (w, x, y, z) in zip(parents, children, X_PC.tolist(), quaternions.tolist(),
                                                  strict=True):
            transforms.append(self._TransformStamped(
                header=header(stamp_ns, parent), child_frame_id=child,
                transform=Transform(translation=Vector3(x=X[0][3], y=X[1][3], z=X[2][3]),
                                    rotation=Quaternion(x=x, y=y, z=z, w=w))))
        return self._TFMessage(transforms=transforms)

    def odometry(self, stamp_ns: int, odom_frame: str, child_frame: str, X_WB, w_WB_W, v_WBo_W):
        """nav_msgs/Odometry: pose of B in the odometry frame, twist expressed in B (REP-105 child frame)."""
        R_WB = X_WB[:3, :3]
        w, x, y, z = matrix_to_quat(R_WB)
        v_B = R_WB.T @ np.asarray(v_WBo_W, dtype=float)
        w_B = R_WB.T @ np.asarray(w_WB_W, dtype=float)
        pose = self._Pose(position=self._Point(x=float(X_WB[0, 3]), y=float(X_WB[1, 3]), z=float(X_WB[2, 3])),
                          orientation=self._Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)))
        twist = self._Twist(linear=self._Vector3(x=float(v_B[0]), y=float(v_B[1]), z=float(v_B[2])),
                            angular=self._Vector3(x=float(w_B[0]), y=float(w_B[1]), z=float(w_B[2])))
        return self._Odometry(header=self.header(stamp_ns, odom_frame), child_frame_id=child_frame,
                              pose=self._PoseWithCovariance(pose=pose, covariance=np.zeros(36)),
                              twist=self._TwistWithCovariance(twist=twist, covariance=np.zeros(36)))

    def float_array(self, label: str, values):
        values = np.ascontiguousarray(values, dtype=np.float64)
        dimension = self._MultiArrayDimension(label=label, size=values.size, stride=values.size)
        return self._Float64MultiArray(layout=self._MultiArrayLayout(dim=[dimension], data_offset=0), data=values)


# ---------------------------------------------------------------------------------------------- recording
def simulation_records(run, factory: MessageFactory, imu_topics: dict, joint_states_topic: str = "/joint_states",
                       truth_topic: str | None = TRUTH_TOPIC, clock_topic: str | None = None,
                       noise=None, stamp_offset_ns: int = 0) -> Iterator[tuple[str, int, object]]:
    """``(topic, stamp_ns, message)`` of a :class:`~ros_dofkit.core.simulation.SimulationRun`, in stamp order.

    ``imu_topics`` maps IMU name -> topic. Bag stamps equal header stamps. The truth (all articulated
    coordinates) and ``/clock`` are written on the IMU time grid when their topics are given. ``noise`` (a
    SensorNoise) fills the IMU covariances with the configured standard deviations. ``stamp_offset_ns`` is added
    to every stamp (e.g. to put simulated time onto the wall clock).
    """
    from ros_dofkit.ros.imu_messages import make_imu_message

    missing = [r.name for r in run.imus if r.name not in imu_topics]
    if missing:
        raise ReplayError(f"no topic for simulated IMU(s) {missing}; topics given for {sorted(imu_topics)}")
    stddevs = {}
    if noise is not None:
        stddevs = dict(orientation_stddev=math.radians(noise.orientation_deg) or None,
                       angular_velocity_stddev=noise.gyro or None,
                       linear_acceleration_stddev=noise.accelerometer or None)
    entries = []  # (stamp_ns, order, topic, builder)
    for stamp, kind, name, k in run.events():
        stamp_ns = int(round(stamp * 1e9)) + stamp_offset_ns
        if kind == "imu":
            readings = run.imu(name)
            entries.append((stamp_ns, 2, imu_topics[name], lambda ns, r=readings, k=k: make_imu_message(
                factory.typestore, ns, f"{r.name}_imu", r.quaternion_wxyz[k], r.angular_velocity[k],
                r.linear_acceleration[k], **stddevs)))
        else:
            encoders = run.encoders
            entries.append((stamp_ns, 1, joint_states_topic, lambda ns, e=encoders, k=k: factory.joint_state(
                ns, e.names, e.positions[k], e.velocities[k])))
    for k, stamp in enumerate(run.times):
        stamp_ns = int(round(float(stamp) * 1e9)) + stamp_offset_ns
        if clock_topic is not None:
            entries.append((stamp_ns, 0, clock_topic, lambda ns: factory.clock(ns)))
        if truth_topic is not None:
            entries.append((stamp_ns, 3, truth_topic, lambda ns, k=k: factory.joint_state(
                ns, run.truth_names, run.truth_positions[k], run.truth_velocities[k])))
    entries.sort(key=lambda e: (e[0], e[1]))
    for stamp_ns, _, topic, build in entries:
        yield topic, stamp_ns, build(stamp_ns)


# ---------------------------------------------------------------------------------------------- reading
def check_input_topics(path, setup: ReplaySetup) -> dict:
    """The bag's ``{topic: (msgtype, count)}`` after checking that it can drive ``setup``'s estimator.

    Raises :class:`BagError` naming the problem: no IMU topic of the configuration in the bag (listing what
    the configuration expects and what the bag has), or a configured topic carrying another message type.
    """
    return validate_input_topics(path, bag_topics(path), setup)


def validate_input_topics(path, topics: dict, setup: ReplaySetup) -> dict:
    """:func:`check_input_topics` on a bag's ``{topic: (msgtype, count)}`` already read; returns it."""
    expected = {topic: IMU_MSGTYPE for topic in setup.imu_topics}
    expected[setup.joint_states_topic] = JOINT_STATE_MSGTYPE
    expected[TRUTH_TOPIC] = JOINT_STATE_MSGTYPE
    for topic, msgtype in expected.items():
        if topic in topics and topics[topic][0] != msgtype:
            raise BagError(f"{path}: topic {topic} carries {topics[topic][0]}, but the configuration reads "
                           f"{msgtype} there")
    present = [topic for topic in setup.imu_topics if topic in topics]
    if not present:
        raise BagError(f"{path} has none of the configured IMU topics {sorted(setup.imu_topics)}; its topics are "
                       f"{ {t: m for t, (m, _) in topics.items()} } (check imus.<name>.topic in the configuration)")
    return topics


def bag_inputs(path, setup: ReplaySetup, typestore=None, truth_sink: list | None = None):
    """The estimator inputs of a bag in stamp order (generator); truth messages go to ``truth_sink`` as
    ``(stamp_ns, names, positions)`` when given. The bag's topics are checked first (:func:`check_input_topics`).
    Yields ``(stamp_ns, input)`` pairs: the header stamp in nanoseconds and the ImuInput / JointStateInput."""
    from ros_dofkit.ros.imu_messages import imu_message_to_arrays

    topics = check_input_topics(path, setup)
    wanted = [t for t in (*setup.imu_topics, setup.joint_states_topic) if t in topics]
    if truth_sink is not None and TRUTH_TOPIC in topics:
        wanted.append(TRUTH_TOPIC)
    for record in read_bag(path, topics=wanted, typestore=typestore):  # a garbled message raises BagError there
        message = record.message
        if record.topic == TRUTH_TOPIC:
            truth_sink.append((header_stamp_ns(message), tuple(message.name), np.asarray(message.position)))
            continue
        if record.topic == setup.joint_states_topic:
            stamp_ns = header_stamp_ns(message)
            velocities = np.asarray(message.velocity, dtype=float)
            yield stamp_ns, JointStateInput(seconds(stamp_ns), tuple(message.name),
                                            np.asarray(message.position, dtype=float),
                                            velocities if velocities.size else None)
            continue
        arrays = imu_message_to_arrays(message)
        quaternion, gyro = arrays["quaternion_wxyz"], arrays["angular_velocity"]
        orientation_present = not np.isnan(quaternion[0])
        gyro_present = not np.isnan(gyro[0])
        yield arrays["stamp_ns"], ImuInput(setup.imu_topics[record.topic], seconds(arrays["stamp_ns"]),
                                           quaternion, gyro if gyro_present else None, orientation_present,
                                           gyro_present)


def truth_from_records(records) -> Truth | None:
    """A :class:`Truth` from ``(stamp_ns, names, positions)`` records (those with the names of the first), or None
    when fewer than two such records exist."""
    if len(records) < 2:
        return None
    names = records[0][1]
    width = len(names)
    rows = [(ns, p) for ns, n, p in records if n == names and len(p) == width]
    if len(rows) < 2:
        return None
    # seconds() over every stamp at once (int64 nanoseconds * 1e-9 rounds exactly as the scalar does).
    stamps = np.fromiter((ns for ns, _ in rows), dtype=np.int64, count=len(rows)) * 1e-9
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    keep = np.concatenate([[True], np.diff(stamps) > 0])
    positions = np.stack([p for _, p in rows]).astype(float, copy=False).reshape(len(rows), width)[order]
    return Truth(stamps[keep], names, positions[keep])


# ---------------------------------------------------------------------------------------------- writing
class OutputWriter:
    """Writes each cycle's outputs (the node's topics and layouts) to an open :class:`BagWriter`."""

    #: Cycles queued before they are written (bounds the memory of long replays).
    BATCH = 256

    def __init__(self, bag: BagWriter, setup: ReplaySetup, estimator, factory: MessageFactory):
        self.bag = bag
        self.factory = factory
        plant = setup.plant
        self._namespace = setup.output_namespace
        view = estimator.articulated_view
        self._names = tuple(estimator.joint_state_names)
        self._art_q = np.asarray(view.q_indices, dtype=np.int64)
        self._art_v = np.asarray(view.v_indices, dtype=np.int64)
        self._instances = []
        for instance, mask in estimator.instance_masks.items():
            selected = np.asarray(list(mask), dtype=bool)
            if selected.any():
                self._instances.append((f"{self._namespace}/{instance}/joint_states",
                                        tuple(n for n, s in zip(self._names, selected, strict=True) if s),
                                        self._art_q[selected], self._art_v[selected]))
        # Frame names and the /tf vs /tf_static split as the node's TfBuilder makes them.
        self._frame_ids = frame_ids(plant, setup.frame_prefix, setup.world_frame)
        self._parent = np.asarray(plant.tree.parent)
        self._moving, self._fixed = (list(bodies) for bodies in moving_and_fixed_bodies(plant))
        self._plant = plant
        self._odometry = []
        for joint in estimator.floating_joints:
            if joint.parent_body.index != 0:
                continue
            instance = plant.get_model_instance_name(joint.model_instance)
            R_WF = np.asarray(joint.frame_on_parent.X_BF)[:3, :3]
            self._odometry.append((f"{self._namespace}/odometry/{instance}", joint.child_body.index,
                                   joint.velocity_start, R_WF))
        self._sensor_names = tuple(estimator.config.imu_names)
        self._errors_label = "sensor_error_deg:" + ",".join(self._sensor_names)
        self._static_written = False
        self._pending: list = []

    def _relative(self, X_WB, bodies):
        """(parent frames, child frames, X_PC (..., n, 4, 4)) of ``bodies``: X_PC = inv(X_WP) X_WC, batched over
        the leading axes of ``X_WB`` (..., num_bodies, 4, 4)."""
        from ros_dofkit.core.estimator.offline import relative_poses

        bodies = np.asarray(bodies, dtype=np.int64)
        parents = self._parent[bodies]
        X_PC = relative_poses(X_WB, parents, bodies)
        return ([self._frame_ids[p] for p in parents], [self._frame_ids[b] for b in bodies], X_PC)

    def write(self, result, stamp_ns: int) -> None:
        """Queue one cycle's outputs; they are written in batches of :data:`BATCH` (TF rotations converted
        together) and by :meth:`flush`, which must be called before the bag is closed."""
        self._pending.append((result, stamp_ns))
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        """Write every queued cycle, in order."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        factory, bag = self.factory, self.bag
        if not self._static_written and self._fixed:
            stamp_ns = pending[0][1]
            X_default = self._plant.calc_body_poses(self._plant.default_positions())
            bag.write("/tf_static", stamp_ns, factory.tf_message(stamp_ns, *self._relative(X_default, self._fixed)))
        self._static_written = True
        if self._moving:
            X_WB = np.stack([np.asarray(result.X_WB) for result, _ in pending])
            parents, children, X_PC = self._relative(X_WB, self._moving)
            quaternions = matrix_to_quat(X_PC[..., :3, :3])
        for k, (result, stamp_ns) in enumerate(pending):
            q, v = np.asarray(result.q), np.asarray(result.v)
            bag.write(f"{self._namespace}/joint_states", stamp_ns,
                      factory.joint_state(stamp_ns, self._names, q[self._art_q], v[self._art_v]))
            for topic, names, q_index, v_index in self._instances:
                bag.write(topic, stamp_ns, factory.joint_state(stamp_ns, names, q[q_index], v[v_index]))
            for topic, body, v_start, R_WF in self._odometry:
                X_WB_k = np.asarray(result.X_WB[body])
                odometry = factory.odometry(stamp_ns, self._frame_ids[0], self._frame_ids[body], X_WB_k,
                                            R_WF @ v[v_start:v_start + 3], R_WF @ v[v_start + 3:v_start + 6])
                bag.write(topic, stamp_ns, odometry)
            if self._moving:
                bag.write("/tf", stamp_ns, factory.tf_message(stamp_ns, parents, children, X_PC[k], quaternions[k]))
            bag.write(f"{self._namespace}/sensor_errors", stamp_ns, factory.float_array(
                self._errors_label, [result.sensor_errors_deg[name] for name in self._sensor_names]))

    def write_run(self, run, rows) -> None:
        """Write the cycles ``rows`` of an :class:`~ros_dofkit.core.estimator.offline.OfflineRun` at once: the same
        topics, messages and order as :meth:`write` + :meth:`flush`, encoded in bulk (``ros_dofkit.ros.cdr``)."""
        from ros_dofkit.ros import cdr

        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        self.flush()
        bag = self.bag
        stamps = np.asarray(run.stamp_ns)[rows]
        if not self._static_written and self._fixed:
            # Encoded here too: rosbags' serializer would first generate its code for TFMessage (~10 ms a replay).
            stamp_ns = int(stamps[0])
            X_default = self._plant.calc_body_poses(self._plant.default_positions())
            parents, children, X_PC = self._relative(X_default, self._fixed)
            quaternions = matrix_to_quat(X_PC[:, :3, :3])
            bag.add_topic("/tf_static", "tf2_msgs/msg/TFMessage")
            bag.write_raw([("/tf_static", stamp_ns, cdr.encode_tf_messages(
                [stamp_ns], parents, children, X_PC[None, :, :3, 3], quaternions[None][..., [1, 2, 3, 0]])[0])])
        self._static_written = True
        q, v, X_WB = run.q[rows], run.v[rows], run.X_WB[rows]
        streams = []  # (topic, msgtype, encoded messages), in the per-cycle order of flush()
        topic = f"{self._namespace}/joint_states"
        streams.append((topic, JOINT_STATE_MSGTYPE,
                        cdr.encode_joint_states(stamps, self._names, q[:, self._art_q], v[:, self._art_v])))
        for topic, names, q_index, v_index in self._instances:
            streams.append((topic, JOINT_STATE_MSGTYPE, cdr.encode_joint_states(stamps, names, q[:, q_index],
                                                                                v[:, v_index])))
        for topic, body, v_start, R_WF in self._odometry:
            R_WB = X_WB[:, body, :3, :3]
            w_W = v[:, v_start:v_start + 3] @ R_WF.T
            v_W = v[:, v_start + 3:v_start + 6] @ R_WF.T
            R_BW = np.swapaxes(R_WB, -1, -2)
            linear = np.einsum("nij,nj->ni", R_BW, v_W)
            angular = np.einsum("nij,nj->ni", R_BW, w_W)
            quaternions = matrix_to_quat(R_WB)
            streams.append((topic, "nav_msgs/msg/Odometry", cdr.encode_odometry(
                stamps, self._frame_ids[0], self._frame_ids[body], X_WB[:, body, :3, 3], quaternions[:, [1, 2, 3, 0]],
                linear, angular)))
        if self._moving:
            parents, children, X_PC = self._relative(X_WB, self._moving)
            quaternions = matrix_to_quat(X_PC[..., :3, :3])
            streams.append(("/tf", "tf2_msgs/msg/TFMessage", cdr.encode_tf_messages(
                stamps, parents, children, X_PC[..., :3, 3], quaternions[..., [1, 2, 3, 0]])))
        columns = [list(run.sensor_names).index(name) for name in self._sensor_names]
        streams.append((f"{self._namespace}/sensor_errors", "std_msgs/msg/Float64MultiArray",
                        cdr.encode_float64_multi_arrays(self._errors_label, run.sensor_errors_deg[rows][:, columns])))
        for topic, msgtype, _ in streams:
            bag.add_topic(topic, msgtype)
        bag.write_streams(stamps, [(topic, messages) for topic, _, messages in streams])


# ---------------------------------------------------------------------------------------------- offline replay
@dataclass(frozen=True)
class ReplayOutcome:
    """Offline replay of a bag: its results, statistics, output counts, truth and report (None without truth)."""

    results: list
    statistics: object
    output_counts: dict
    truth: Truth | None
    report: object | None
    estimated_names: tuple
    joint_names: tuple
    #: The calibration taken from the bag (``replay_bag(calibration=...)``), else None.
    calibration: object | None = None


class NoEstimateError(ReplayError):
    """The replay produced no estimate at all (the message says why); no output bag is left behind."""


def no_estimate_reason(config, imu_samples: int, joint_states: int, rejected: int, reject_counts: dict,
                       cycles: int) -> str:
    """Why a replay of ``config`` over such inputs gave no estimate (for :class:`NoEstimateError`)."""
    waiting = [imu.name for imu in config.imus if imu.needs_calibration]
    if waiting:
        return (f"no estimate: IMUs {waiting} wait for calibration (mounting 'calibrate'); pass --calibrate START END "
                "(replay_bag(calibration=(start, end))): the seconds of the bag in which the robot holds its "
                "calibration pose")
    if imu_samples + joint_states == 0:
        return "no estimate: the bag has no input message on the configured topics"
    if rejected:
        reasons = {reason: count for reason, count in reject_counts.items() if count}
        return (f"no estimate: {rejected} of {imu_samples + joint_states} inputs were rejected ({reasons}); none of "
                f"the {cycles} cycles had the IMU samples to estimate from")
    return (f"no estimate: {imu_samples} IMU samples and {joint_states} joint states gave {cycles} cycles, none with "
            "an initialized estimate")


def replay_bag(in_path, setup: ReplaySetup, out_path, storage: str = "sqlite3", progress=None,
               settle_s: float = 0.5, batch: bool = True, calibration: tuple[float, float] | None = None,
               calibration_max_spread_deg: float = 2.0, window: int | None = None) -> ReplayOutcome:
    """Run the estimator core over the bag at ``in_path`` and write its outputs to a new bag at ``out_path``.

    The input bag is only read. On any error the partial output bag is removed (it was created here: the writer
    refuses existing paths) and the error propagates: :class:`BagError` for unreadable, truncated or corrupt
    bags and wrong topic types, :class:`ReplayError` for inputs that give no estimate.
    ``progress(fraction, text)`` is called about five times a second.

    ``batch`` (default): run the batched offline path (:mod:`ros_dofkit.replay.batch`: the same compiled cycle
    rules, the same bits, much faster); with ``batch=False``, feed the streaming entry points message by message
    (:class:`ReplayLoop`). The batched path reads, estimates and writes the bag in windows of at most ``window``
    messages (default ``batch.WINDOW_MESSAGES``): its memory does not grow with the bag's length beyond a few
    hundred bytes per cycle, and its outputs do not depend on
    the window.

    ``calibration`` = ``(start, end)``: first calibrate from the inputs stamped in [start, end) seconds after the
    bag's first input stamp (``ros_dofkit.replay.calibration``: mountings 'calibrate', heading reference), then
    replay the whole bag with the calibrated configuration; the outcome's ``calibration`` holds the result and
    the calibrated parameters. A replay that gives no estimate at all raises :class:`NoEstimateError` (why:
    e.g. IMUs waiting for calibration) and leaves no output bag.
    """
    from ros_dofkit.core.estimator import Estimator
    from ros_dofkit.replay.pipeline import ReplayLoop

    in_path, out_path = Path(in_path), Path(out_path)
    if in_path.resolve() == out_path.resolve():
        raise BagError(f"the output bag must differ from the input bag {in_path}")
    if out_path.exists():
        raise BagError(f"refusing to overwrite {out_path}: it exists already; choose a new output path")
    calibrated = None
    read = None
    if calibration is not None:
        from ros_dofkit.replay.batch import read_offline_inputs
        from ros_dofkit.replay.calibration import calibrate_from_inputs

        if progress is not None:
            progress(0.0, "reading for calibration")
        read = read_offline_inputs(in_path, setup, None, TRUTH_TOPIC, MessageFactory().typestore)
        start, end = calibration
        calibrated = calibrate_from_inputs(read[0], setup, start, end, calibration_max_spread_deg, str(in_path))
        setup = calibrated.setup
    if batch:
        outcome = _replay_bag_batch(in_path, setup, out_path, storage, progress, settle_s, read, window)
        return dataclasses.replace(outcome, calibration=calibrated)
    topics = check_input_topics(in_path, setup)
    total = sum(count for topic, (_, count) in topics.items()
                if topic in setup.imu_topics or topic == setup.joint_states_topic)
    factory = MessageFactory()
    estimator = Estimator(setup.plant, setup.config)
    truth_records: list = []
    # No journal: a replay that fails deletes its output anyway.
    writer = BagWriter(out_path, storage=storage, typestore=factory.typestore, journal=False)
    try:
        outputs = OutputWriter(writer, setup, estimator, factory)
        # Input stamp (s) -> its header stamp (ns), for the recent inputs: outputs carry the exact nanoseconds.
        stamps_ns: OrderedDict = OrderedDict()
        loop = ReplayLoop(estimator)

        def show(stats):
            if progress is not None:
                done = stats.imu_samples + stats.joint_states
                progress(done / total if total else 1.0,
                         f"{done}/{total} inputs, {stats.cycles} cycles, {stats.span_s:.1f} s of input")

        def inputs():
            for stamp_ns, item in bag_inputs(in_path, setup, factory.typestore, truth_records):
                stamps_ns[item.stamp] = stamp_ns
                if len(stamps_ns) > 4096:
                    stamps_ns.popitem(last=False)
                yield item

        def on_result(result):
            if not getattr(result, "initialized", True):
                return
            outputs.write(result, stamps_ns.get(result.stamp, int(round(result.stamp * 1e9))))

        loop.on_result = on_result
        loop.run(inputs(), progress=show)
        if not any(getattr(r, "initialized", True) for r in loop.results):
            stats = loop.statistics
            raise NoEstimateError(no_estimate_reason(setup.config, stats.imu_samples, stats.joint_states,
                                                     stats.rejected, estimator.reject_counts(), stats.cycles))
        outputs.flush()
        writer.close()
    except BaseException:
        writer.close()
        shutil.rmtree(out_path, ignore_errors=True)
        raise
    results = [r for r in loop.results if getattr(r, "initialized", True)]
    return _outcome(results, loop.statistics, writer.counts, truth_records, estimator, setup, topics, settle_s,
                    calibrated)


def _outcome(results, statistics, output_counts: dict, truth_records: list, estimator, setup: ReplaySetup,
             topics: dict, settle_s: float, calibration=None) -> ReplayOutcome:
    """The :class:`ReplayOutcome` of a finished replay (either path): the joint names, estimated first, and the
    report against the truth when the bag held one."""
    from ros_dofkit.replay.pipeline import tracking_report

    truth = truth_from_records(truth_records)
    estimated_mask = np.asarray(list(estimator.estimated_mask), dtype=bool)
    names = tuple(estimator.joint_state_names)
    estimated_names = tuple(n for n, e in zip(names, estimated_mask, strict=True) if e)
    joint_names = estimated_names + tuple(n for n, e in zip(names, estimated_mask, strict=True) if not e)
    report = None
    if truth is not None and len(results):
        compared = tuple(n for n in joint_names if n in truth.names)
        counts = {f"imu {name}": 0 for name in setup.config.imu_names}
        for topic, name in setup.imu_topics.items():
            counts[f"imu {name}"] = topics.get(topic, (None, 0))[1]
        counts["joint_states"] = topics.get(setup.joint_states_topic, (None, 0))[1]
        report = tracking_report(results, truth, compared, estimated_names, counts, statistics.cycle_latency_s,
                                 settle_s=settle_s)
    return ReplayOutcome(results, statistics, output_counts, truth, report, estimated_names, joint_names,
                         calibration)


def _replay_bag_batch(in_path: Path, setup: ReplaySetup, out_path: Path, storage: str, progress,
                      settle_s: float, read=None, window: int | None = None) -> ReplayOutcome:
    """:func:`replay_bag` through the batched offline path (``ros_dofkit.replay.batch``), one window of at most
    ``window`` messages (default ``batch.WINDOW_MESSAGES``) at a time: read, estimated (the estimator carries its
    state from window to window, so the outputs do not depend on the window), written. Kept for the outcome: the
    per-cycle arrays without the poses (a few hundred bytes a cycle). ``read``: the ``read_offline_inputs`` of the
    bag when it was already read whole (calibration), else None."""
    import time

    from ros_dofkit.core.estimator import Estimator
    from ros_dofkit.core.estimator.offline import OfflineRun
    from ros_dofkit.replay.batch import WINDOW_MESSAGES, iter_offline_inputs
    from ros_dofkit.replay.pipeline import ReplayStatistics

    started = time.perf_counter()
    factory = MessageFactory()
    topics: dict = {}
    if read is not None:
        windows = iter([read[:2]])
        topics.update(read[2])
    else:
        windows = iter_offline_inputs(in_path, setup, topics, TRUTH_TOPIC, factory.typestore,
                                      window=window or WINDOW_MESSAGES)
    estimator = offline = Estimator(setup.plant, setup.config)
    runs, truth_records = [], []
    imu_samples = joint_states = rejected = read_messages = 0
    first_stamp = last_stamp = None
    if progress is not None:
        progress(0.0, "reading")
    # No journal: a replay that fails deletes its output anyway.
    writer = BagWriter(out_path, storage=storage, typestore=factory.typestore, journal=False)
    try:
        outputs = OutputWriter(writer, setup, estimator, factory)
        for inputs, window_truth in windows:
            run = offline.feed(inputs)
            outputs.write_run(run, np.flatnonzero(run.initialized))
            # Written: keep a compact copy without the poses (the run's arrays are views of larger buffers).
            runs.append(OfflineRun.concatenate([run], keep_poses=False))
            truth_records += window_truth
            imu_samples += int(np.sum(inputs.kind == 0))
            joint_states += int(np.sum(inputs.kind == 1))
            rejected += int(run.rejected.sum())
            stamps = inputs.input_stamps()
            if stamps.size:
                low, high = float(stamps.min()), float(stamps.max())
                first_stamp = low if first_stamp is None else min(first_stamp, low)
                last_stamp = high if last_stamp is None else max(last_stamp, high)
            read_messages += len(inputs.kind) + len(window_truth)
            if progress is not None:
                total = sum(topics[t][1] for t in (*setup.imu_topics, setup.joint_states_topic, TRUTH_TOPIC)
                            if t in topics) if read is None else read_messages
                progress(min(read_messages / total, 1.0) if total else 1.0,
                         f"{read_messages}/{total} messages, {run.statistics['cycles']} cycles")
        run = OfflineRun.concatenate(runs, keep_poses=False) if runs else None
        if run is None or not run.initialized.any():
            raise NoEstimateError(no_estimate_reason(
                setup.config, imu_samples, joint_states, rejected,
                run.counts_by_reason if run is not None else {}, len(run) if run is not None else 0))
        writer.close()
    except BaseException:
        writer.close()
        shutil.rmtree(out_path, ignore_errors=True)
        raise
    wall = time.perf_counter() - started
    cycles = len(run)
    statistics = ReplayStatistics(
        imu_samples=imu_samples, joint_states=joint_states, rejected=rejected, cycles=cycles,
        resets=run.statistics["resets"],
        # Offline, cycles are computed together: the per-cycle figure is the wall time shared out.
        cycle_latency_s=[wall / cycles] * cycles if cycles else [], wall_time_s=wall,
        first_stamp=first_stamp, last_stamp=last_stamp)
    if progress is not None:
        progress(1.0, f"{cycles} cycles, {statistics.span_s:.1f} s of input")
    return _outcome(run.results(run.initialized), statistics, writer.counts, truth_records, estimator, setup, topics,
                    settle_s)
