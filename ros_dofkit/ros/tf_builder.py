"""TF for a plant: one transform per moving joint from the estimated body poses, fixed joints once (static).

You are in the ROS edge. robot_state_publisher publishes only revolute/prismatic joints and turns planar and
floating joints into fixed ones (SPEC 6.3); here every joint with coordinates is moving (planar and floating
included, SPEC 9.10), stamped with the input's time, and every weld goes to ``/tf_static`` once. A mimic joint
(no coordinates of its own) still moves and is published on ``/tf``.

Frames: each transform is ``X_PC`` (parent link P -> child link C) = ``inv(X_WP) X_WC`` from the cycle's body
poses. Frame names, the frame each transform hangs from (world, an external frame such as ``odom``) and which
transforms are ours to publish come from one :class:`~ros_dofkit.ros.tf_tree.TfTree` (REP-105 ownership, no
self-transforms, no second parents: see ``ros_dofkit.ros.tf_tree``), shared with offline replay.

The live node's per-cycle TFMessage (:meth:`TfBuilder.moving_transforms_serialized`) is written by one compiled call
(``live_cdr.TfMessageEncoder.encode_poses``) with the bits of the object path.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Quaternion, Transform, TransformStamped, Vector3

from ros_dofkit.core.estimator.offline import relative_poses
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.ros.live_cdr import TfMessageEncoder
from ros_dofkit.ros.tf_tree import TfTree, tf_tree

_XYZW = [1, 2, 3, 0]  # (w, x, y, z) -> the message's (x, y, z, w)


def transform_msg(X: np.ndarray) -> Transform:
    """``geometry_msgs/Transform`` of a 4x4 pose (quaternion reordered to x, y, z, w)."""
    w, x, y, z = matrix_to_quat(X[:3, :3])
    return Transform(
        translation=Vector3(x=float(X[0, 3]), y=float(X[1, 3]), z=float(X[2, 3])),
        rotation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)),
    )


class TfBuilder:
    """Builds TransformStamped lists for a finalized plant: the transforms of ``tree`` (default: every transform,
    hanging from ``world_frame``; :class:`~ros_dofkit.ros.tf_tree.TfTreeError` for a world frame naming a link)."""

    def __init__(self, plant, frame_prefix: str = "", world_frame: str = "world", tree: TfTree | None = None):
        self._plant = plant
        self.tree = tf_tree(plant, frame_prefix, world_frame) if tree is None else tree
        self.frame_ids = self.tree.frame_ids
        self._parent_frames = self.tree.parent_frame_ids
        self._parent = np.asarray(self.tree.parent_bodies, dtype=np.int64)
        self._cache = {}
        self.moving_bodies, self.fixed_bodies = self.tree.moving_bodies, self.tree.fixed_bodies
        self._moving_index = np.asarray(self.moving_bodies, dtype=np.int64)
        self._moving_encoder = TfMessageEncoder([self._parent_frames[b] for b in self.moving_bodies],
                                                [self.frame_ids[b] for b in self.moving_bodies])
        self._moving_parents = self._parent[self._moving_index]
        self._X_WB_shape = (plant.num_bodies(), 4, 4)
        # Once now, so that the compiled writer is loaded before the first cycle needs it: for poses as given and as
        # a cycle's result holds them (read-only, which numba compiles apart).
        poses = plant.calc_body_poses(plant.default_positions())
        self.moving_transforms_serialized(poses, 0, 0)
        poses.flags.writeable = False
        self.moving_transforms_serialized(poses, 0, 0)

    def _relative_poses(self, X_WB, bodies):
        """(p_PC (k, 3), R_PC (k, 3, 3)) of X_PC = inv(X_WP) X_WC for all ``bodies`` at once (the compiled rule
        offline replay writes its TF with, so both give the same bits)."""
        X_PC = relative_poses(X_WB, self._parent[bodies], bodies)
        return X_PC[:, :3, 3], X_PC[:, :3, :3]

    def _transforms(self, X_WB, bodies, sec: int, nanosec: int) -> list:
        if not bodies:
            return []
        bodies = np.asarray(bodies)
        p_PC, R_PC = self._relative_poses(X_WB, bodies)
        quaternions = matrix_to_quat(R_PC)  # (w, x, y, z), one batched call
        out = self._messages(tuple(int(b) for b in bodies))
        for k, msg in enumerate(out):
            w, x, y, z = quaternions[k]
            msg.header.stamp.sec = sec
            msg.header.stamp.nanosec = nanosec
            translation, rotation = msg.transform.translation, msg.transform.rotation
            translation.x, translation.y, translation.z = float(p_PC[k, 0]), float(p_PC[k, 1]), float(p_PC[k, 2])
            rotation.x, rotation.y, rotation.z, rotation.w = float(x), float(y), float(z), float(w)
        return list(out)

    def _messages(self, bodies: tuple) -> tuple:
        """TransformStamped objects for ``bodies`` with their frame ids, made once and refilled every cycle
        (publishing serializes them immediately; building messages is a large part of a cycle's cost)."""
        cached = self._cache.get(bodies)
        if cached is None:
            cached = []
            for b in bodies:
                msg = TransformStamped()
                msg.header.frame_id = self._parent_frames[b]
                msg.child_frame_id = self.frame_ids[b]
                cached.append(msg)
            cached = self._cache[bodies] = tuple(cached)
        return cached

    def moving_transforms(self, X_WB, sec: int, nanosec: int) -> list:
        """One TransformStamped per moving joint at the body poses ``X_WB`` (num_bodies, 4, 4). The message objects
        are reused (refilled) by the next call: publish or copy them before calling again."""
        return self._transforms(X_WB, self.moving_bodies, sec, nanosec)

    def moving_transforms_serialized(self, X_WB, sec: int, nanosec: int) -> bytes:
        """The serialized ``tf2_msgs/TFMessage`` of :meth:`moving_transforms` (same transforms, same order),
        ready for ``Publisher.publish``: no message objects are built (the live node's per-cycle path)."""
        if not len(self._moving_index):
            return self._moving_encoder.encode(sec, nanosec, np.zeros((0, 3)), np.zeros((0, 4)))
        if np.shape(X_WB) == self._X_WB_shape:  # (the compiled writer reads the rows its bodies name, unchecked)
            data = self._moving_encoder.encode_poses(sec, nanosec, X_WB, self._moving_parents, self._moving_index)
            if data is not None:
                return data
        p_PC, R_PC = self._relative_poses(X_WB, self._moving_index)  # a pose the compiled writer leaves to scipy
        return self._moving_encoder.encode(sec, nanosec, p_PC, matrix_to_quat(R_PC)[:, _XYZW])

    def static_transforms(self, sec: int = 0, nanosec: int = 0) -> list:
        """One TransformStamped per weld joint (pose independent of q: computed at the default positions)."""
        X_WB = self._plant.calc_body_poses(self._plant.default_positions())
        return self._transforms(X_WB, self.fixed_bodies, sec, nanosec)
