"""A replay's results written to a bag as the node publishes them: the node's topics, layouts and stamps.

Where you are: ``ros_dofkit.replay``. Imports ``ros_dofkit.ros.bag_io`` (the open bag), ``ros_dofkit.ros.cdr``
(bulk encoding), ``ros_dofkit.ros.tf_tree`` (frame names, parents, owned transforms and the /tf vs /tf_static
split, as the node's TfBuilder), ``core.estimator.offline.relative_poses`` and ``core.estimator.odometry`` (the
Odometry twist and the solve covariance), ``ros.parameters`` (the node's noise parameters); ``replay.messages``
for message-by-message writing.
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.estimator.odometry import SolveCovarianceModel, base_odometries
from ros_dofkit.core.estimator.offline import relative_poses
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.setup import JOINT_STATE_MSGTYPE, ReplaySetup
from ros_dofkit.ros import cdr
from ros_dofkit.ros.bag_io import BagWriter
from ros_dofkit.ros.parameters import NODE_PARAMETERS
from ros_dofkit.ros.tf_tree import tf_tree_from_parameters


def _parameter(setup: ReplaySetup, name: str):
    """A node parameter of the replay's configuration (its schema default when the file does not set it)."""
    return setup.values.get(name, next(spec.default for spec in NODE_PARAMETERS if spec.name == name))


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
        # Instances whose joint_states carry every articulated coordinate (a robot of one instance): the same messages
        # as the namespace's joint_states, encoded once.
        self._whole_instances = {topic for topic, names, q_index, v_index in self._instances
                                 if names == self._names and np.array_equal(q_index, self._art_q)
                                 and np.array_equal(v_index, self._art_v)}
        # Frame names, parents, owned transforms and the /tf vs /tf_static split as the node's TfBuilder makes them.
        tree = tf_tree_from_parameters(plant, setup.values)
        self._frame_ids, self._parent_frames = tree.frame_ids, tree.parent_frame_ids
        self._parent = np.asarray(plant.tree.parent)
        self._moving, self._fixed = list(tree.moving_bodies), list(tree.fixed_bodies)
        self._plant = plant
        # As the node: an Odometry topic per planar or floating base on the world, covariances from each cycle's
        # solve with the node's noise parameters.
        self._odometry = [(f"{self._namespace}/odometry/{plant.get_model_instance_name(base.joint.model_instance)}",
                           base) for base in base_odometries(plant)]
        self._covariance_model = SolveCovarianceModel(estimator, _parameter(setup, "imu_orientation_stddev") ** 2,
                                                      _parameter(setup, "imu_angular_velocity_stddev") ** 2
                                                      ) if self._odometry else None
        self._sensor_names = tuple(estimator.config.imu_names)
        self._errors_label = "sensor_error_deg:" + ",".join(self._sensor_names)
        self._static_written = False
        self._pending: list = []

    def _relative(self, X_WB, bodies):
        """(parent frames, child frames, X_PC (..., n, 4, 4)) of ``bodies``: X_PC = inv(X_WP) X_WC, batched over
        the leading axes of ``X_WB`` (..., num_bodies, 4, 4)."""
        bodies = np.asarray(bodies, dtype=np.int64)
        parents = self._parent[bodies]
        X_PC = relative_poses(X_WB, parents, bodies)
        return ([self._parent_frames[b] for b in bodies], [self._frame_ids[b] for b in bodies], X_PC)

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
            covariances = self._covariance_model.covariances(result) if self._odometry else None
            for topic, base in self._odometry:
                X_WB_k = np.asarray(result.X_WB[base.body])
                twist = base.twist(X_WB_k[:3, :3], v)
                odometry = factory.odometry(stamp_ns, self._parent_frames[base.body], self._frame_ids[base.body],
                                            X_WB_k, twist.linear, twist.angular,
                                            base.covariance(X_WB_k[:3, :3], covariances))
                bag.write(topic, stamp_ns, odometry)
            if self._moving:
                bag.write("/tf", stamp_ns, factory.tf_message(stamp_ns, parents, children, X_PC[k], quaternions[k]))
            bag.write(f"{self._namespace}/sensor_errors", stamp_ns, factory.float_array(
                self._errors_label, [result.sensor_errors_deg[name] for name in self._sensor_names]))

    def write_run(self, run, rows) -> None:
        """Write the cycles ``rows`` of an :class:`~ros_dofkit.core.estimator.offline.OfflineRun` at once: the same
        topics, messages and order as :meth:`write` + :meth:`flush`, encoded in bulk (``ros_dofkit.ros.cdr``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        self.flush()
        bag = self.bag
        cycles = rows.tolist()
        if rows[-1] - rows[0] + 1 == rows.size:  # consecutive cycles (as usual): views, not copies of the poses
            rows = slice(cycles[0], cycles[-1] + 1)
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
        whole = cdr.encode_joint_states(stamps, self._names, q[:, self._art_q], v[:, self._art_v], packed=True)
        streams.append((topic, JOINT_STATE_MSGTYPE, whole))
        for topic, names, q_index, v_index in self._instances:
            streams.append((topic, JOINT_STATE_MSGTYPE, whole if topic in self._whole_instances else
                            cdr.encode_joint_states(stamps, names, q[:, q_index], v[:, v_index], packed=True)))
        covariances = [self._covariance_model.at(run.q[row], run.observed[row], run.weights[row])
                       for row in cycles] if self._odometry else []
        for topic, base in self._odometry:
            R_WB = X_WB[:, base.body, :3, :3]
            twist = base.twist(R_WB, v)
            quaternions = matrix_to_quat(R_WB)
            covariance = [base.covariance(R, c) for R, c in zip(R_WB, covariances, strict=True)]
            streams.append((topic, "nav_msgs/msg/Odometry", cdr.encode_odometry(
                stamps, self._parent_frames[base.body], self._frame_ids[base.body], X_WB[:, base.body, :3, 3],
                quaternions[:, [1, 2, 3, 0]], twist.linear, twist.angular,
                np.array([c.pose.reshape(-1) for c in covariance]).reshape(-1, 36),
                np.array([c.twist.reshape(-1) for c in covariance]).reshape(-1, 36), packed=True)))
        if self._moving:
            parents, children, X_PC = self._relative(X_WB, self._moving)
            quaternions = matrix_to_quat(X_PC[..., :3, :3])
            streams.append(("/tf", "tf2_msgs/msg/TFMessage", cdr.encode_tf_messages(
                stamps, parents, children, X_PC[..., :3, 3], quaternions[..., [1, 2, 3, 0]], packed=True)))
        columns = [list(run.sensor_names).index(name) for name in self._sensor_names]
        streams.append((f"{self._namespace}/sensor_errors", "std_msgs/msg/Float64MultiArray",
                        cdr.encode_float64_multi_arrays(self._errors_label, run.sensor_errors_deg[rows][:, columns],
                                                        packed=True)))
        for topic, msgtype, _ in streams:
            bag.add_topic(topic, msgtype)
        bag.write_streams(stamps, [(topic, messages) for topic, _, messages in streams])
