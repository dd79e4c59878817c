"""Floating-base coordinate conventions: Drake <-> body-axes angular velocity <-> ROS pose/twist arrays.

You are in ``ros_dofkit.core.state``; this module holds only formulas on plain arrays (no plant, no messages).

Conventions (SPEC section 4.1, 9.7). B is the floating base body, W the world.

* Drake ``QuaternionFloatingJoint`` (the core's convention):
  ``q_base = [qw, qx, qy, qz, x, y, z]`` = quaternion of ``R_WB`` (scalar first) then ``p_WBo_W``;
  ``v_base = [w_WB_W, v_WBo_W]`` = angular velocity of B in W and velocity of B's origin in W, both
  expressed in **world** axes.
* dair_pll's ``FloatingBaseSpace``: same q; velocity ``[w_WB_B, v_WBo_W]``: angular velocity in **body**
  axes, linear velocity left in world axes. Only the angular part changes: ``w_WB_B = R_WB^T w_WB_W``.
* ROS ``geometry_msgs/Pose``: position ``p_WBo_W`` and quaternion in ``(x, y, z, w)`` order.
  ``geometry_msgs/Twist`` as used for ``V_WB`` in W (Drake's translator, SPEC 5.4): ``linear = v_WBo_W``,
  ``angular = w_WB_W``. ``nav_msgs/Odometry`` (REP-105 and the message comment): the twist is expressed in
  the **child** frame B, both parts: ``linear = R_WB^T v_WBo_W = v_WBo_B``, ``angular = w_WB_B``.

Every quaternion that enters a function is checked and normalized by
:func:`ros_dofkit.core.spatial.quat_normalize` (within ``QUAT_NORM_TOLERANCE`` of unit length it is accepted
and normalized; zero, non-finite or further off raises :class:`~ros_dofkit.core.spatial.QuaternionError`);
quaternions that leave are unit length. All functions accept any number of leading batch axes and each
conversion has an exact inverse (up to floating-point rounding) below it.
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.spatial import make_transform, quat_conjugate, quat_normalize, quat_rotate, quat_to_matrix
from ros_dofkit.core.state.errors import StateDimensionError

#: Number of configuration / velocity coordinates of a quaternion floating joint (Drake's layout).
NQ_FLOATING = 7
NV_FLOATING = 6
#: Slices into the floating-joint coordinates.
QUATERNION = slice(0, 4)
POSITION = slice(4, 7)
ANGULAR = slice(0, 3)
LINEAR = slice(3, 6)


def as_float_array(name: str, value, last_dim: int | None = None, min_last_dim: int | None = None) -> np.ndarray:
    """``np.asarray(value, float)`` with a check of the last axis; raises StateDimensionError naming ``name``."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as error:
        raise StateDimensionError(f"{name}: expected a numeric array, got {type(value).__name__} ({error})") from None
    if array.ndim == 0:
        raise StateDimensionError(f"{name}: expected an array of shape (..., n), got a scalar")
    if last_dim is not None and array.shape[-1] != last_dim:
        raise StateDimensionError(f"{name}: expected last axis of length {last_dim}, got shape {array.shape}")
    if min_last_dim is not None and array.shape[-1] < min_last_dim:
        raise StateDimensionError(f"{name}: expected last axis of length >= {min_last_dim}, got shape {array.shape}")
    return array


def quat_wxyz_to_xyzw(quat_wxyz) -> np.ndarray:
    """Reorder a quaternion from the core's ``(w, x, y, z)`` to ROS's ``(x, y, z, w)`` (no normalization)."""
    quat_wxyz = as_float_array("quat_wxyz", quat_wxyz, last_dim=4)
    return np.concatenate([quat_wxyz[..., 1:], quat_wxyz[..., :1]], axis=-1)


def quat_xyzw_to_wxyz(quat_xyzw) -> np.ndarray:
    """Reorder a quaternion from ROS's ``(x, y, z, w)`` to the core's ``(w, x, y, z)`` (no normalization)."""
    quat_xyzw = as_float_array("quat_xyzw", quat_xyzw, last_dim=4)
    return np.concatenate([quat_xyzw[..., 3:], quat_xyzw[..., :3]], axis=-1)


def normalize_base_quaternion(q) -> np.ndarray:
    """Copy of ``q`` (``(..., >=7)``, floating-base coordinates first) with its quaternion normalized (§9.7)."""
    q = as_float_array("q", q, min_last_dim=NQ_FLOATING).copy()
    q[..., QUATERNION] = quat_normalize(q[..., QUATERNION])
    return q


def angular_velocity_world_to_body(quat_WB, w_WB_W) -> np.ndarray:
    """``w_WB_B = R_WB^T w_WB_W``: re-express an angular velocity from world axes in body axes."""
    quat_WB = quat_normalize(as_float_array("quat_WB", quat_WB, last_dim=4))
    return quat_rotate(quat_conjugate(quat_WB), as_float_array("w_WB_W", w_WB_W, last_dim=3))


def angular_velocity_body_to_world(quat_WB, w_WB_B) -> np.ndarray:
    """``w_WB_W = R_WB w_WB_B``; inverse of :func:`angular_velocity_world_to_body`."""
    quat_WB = quat_normalize(as_float_array("quat_WB", quat_WB, last_dim=4))
    return quat_rotate(quat_WB, as_float_array("w_WB_B", w_WB_B, last_dim=3))


def pose_from_base_positions(q_base) -> tuple[np.ndarray, np.ndarray]:
    """ROS pose arrays from Drake floating coordinates.

    ``q_base``: ``(..., 7)`` = ``[qw, qx, qy, qz, x, y, z]``. Returns ``(p_WBo_W (..., 3), quat_WB_xyzw
    (..., 4))``, the fields of ``geometry_msgs/Pose`` (``position``, ``orientation``), quaternion normalized.
    """
    q_base = as_float_array("q_base", q_base, last_dim=NQ_FLOATING)
    return q_base[..., POSITION].copy(), quat_wxyz_to_xyzw(quat_normalize(q_base[..., QUATERNION]))


def base_positions_from_pose(p_WBo_W, quat_WB_xyzw) -> np.ndarray:
    """Drake floating coordinates ``(..., 7)`` from ROS pose arrays; inverse of :func:`pose_from_base_positions`.

    The quaternion arrives in ROS order ``(x, y, z, w)`` and is checked and normalized (§9.7).
    """
    p_WBo_W = as_float_array("p_WBo_W", p_WBo_W, last_dim=3)
    quat = quat_normalize(quat_xyzw_to_wxyz(quat_WB_xyzw))
    if not np.all(np.isfinite(p_WBo_W)):
        raise StateDimensionError(f"p_WBo_W: expected finite values, got {p_WBo_W}")
    batch = np.broadcast_shapes(quat.shape[:-1], p_WBo_W.shape[:-1])
    return np.concatenate([np.broadcast_to(quat, batch + (4,)), np.broadcast_to(p_WBo_W, batch + (3,))], axis=-1)


def world_twist_from_base_velocities(v_base) -> tuple[np.ndarray, np.ndarray]:
    """``(linear, angular)`` of ``V_WB`` expressed in W, from Drake's ``v_base = [w_WB_W, v_WBo_W]``.

    This is the twist of Drake's robot-state translator (SPEC 5.4); ROS's ``geometry_msgs/Twist`` declares
    ``linear`` first, hence the order of the returned pair.
    """
    v_base = as_float_array("v_base", v_base, last_dim=NV_FLOATING)
    return v_base[..., LINEAR].copy(), v_base[..., ANGULAR].copy()


def base_velocities_from_world_twist(v_WBo_W, w_WB_W) -> np.ndarray:
    """Drake's ``v_base = [w_WB_W, v_WBo_W]`` from a world-frame twist; inverse of the function above."""
    v_WBo_W = as_float_array("linear", v_WBo_W, last_dim=3)
    w_WB_W = as_float_array("angular", w_WB_W, last_dim=3)
    batch = np.broadcast_shapes(v_WBo_W.shape[:-1], w_WB_W.shape[:-1])
    return np.concatenate([np.broadcast_to(w_WB_W, batch + (3,)), np.broadcast_to(v_WBo_W, batch + (3,))], axis=-1)


def child_twist_from_base_velocities(q_base, v_base) -> tuple[np.ndarray, np.ndarray]:
    """Odometry twist: ``(v_WBo_B, w_WB_B)``, both parts expressed in the child (body) frame B.

    ``nav_msgs/Odometry.twist`` is "expressed in the coordinate frame given by child_frame_id" (REP-105):
    ``linear = R_WB^T v_WBo_W`` (velocity of B's origin, body axes) and ``angular = R_WB^T w_WB_W``.
    ``q_base``: ``(..., 7)`` Drake floating coordinates; ``v_base``: ``(..., 6)`` = ``[w_WB_W, v_WBo_W]``.
    """
    q_base = as_float_array("q_base", q_base, last_dim=NQ_FLOATING)
    v_base = as_float_array("v_base", v_base, last_dim=NV_FLOATING)
    quat_BW = quat_conjugate(quat_normalize(q_base[..., QUATERNION]))
    return quat_rotate(quat_BW, v_base[..., LINEAR]), quat_rotate(quat_BW, v_base[..., ANGULAR])


def base_velocities_from_child_twist(q_base, v_WBo_B, w_WB_B) -> np.ndarray:
    """Drake's ``v_base = [w_WB_W, v_WBo_W]`` from an Odometry (child-frame) twist; inverse of the above."""
    q_base = as_float_array("q_base", q_base, last_dim=NQ_FLOATING)
    quat_WB = quat_normalize(q_base[..., QUATERNION])
    w_WB_W = quat_rotate(quat_WB, as_float_array("angular", w_WB_B, last_dim=3))
    v_WBo_W = quat_rotate(quat_WB, as_float_array("linear", v_WBo_B, last_dim=3))
    batch = np.broadcast_shapes(w_WB_W.shape[:-1], v_WBo_W.shape[:-1])
    return np.concatenate([np.broadcast_to(w_WB_W, batch + (3,)), np.broadcast_to(v_WBo_W, batch + (3,))], axis=-1)


class BasePoseTwist:
    """Pose and spatial velocity of a floating base B in the world W (Drake's robot-state message, SPEC 5.4).

    ``p_WBo_W`` (..., 3) position of B's origin; ``quat_WB`` (..., 4) orientation ``R_WB`` (w, x, y, z),
    checked and normalized at construction (§9.7); ``w_WB_W`` (..., 3) angular velocity in W axes;
    ``v_WBo_W`` (..., 3) velocity of B's origin in W axes. Leading batch axes broadcast together.
    The ROS views: :meth:`ros_pose` (``geometry_msgs/Pose``), :meth:`world_twist` (twist in W) and
    :meth:`child_twist` (``nav_msgs/Odometry``: both parts in B).
    """

    def __init__(self, p_WBo_W, quat_WB, w_WB_W=None, v_WBo_W=None):
        p_WBo_W = as_float_array("p_WBo_W", p_WBo_W, last_dim=3)
        quat_WB = quat_normalize(as_float_array("quat_WB", quat_WB, last_dim=4))
        w_WB_W = np.zeros(3) if w_WB_W is None else as_float_array("w_WB_W", w_WB_W, last_dim=3)
        v_WBo_W = np.zeros(3) if v_WBo_W is None else as_float_array("v_WBo_W", v_WBo_W, last_dim=3)
        for label, array in (("p_WBo_W", p_WBo_W), ("w_WB_W", w_WB_W), ("v_WBo_W", v_WBo_W)):
            if not np.all(np.isfinite(array)):
                raise StateDimensionError(f"{label}: expected finite values, got {array}")
        batch = np.broadcast_shapes(p_WBo_W.shape[:-1], quat_WB.shape[:-1], w_WB_W.shape[:-1], v_WBo_W.shape[:-1])
        self.p_WBo_W = np.array(np.broadcast_to(p_WBo_W, batch + (3,)))
        self.quat_WB = np.array(np.broadcast_to(quat_WB, batch + (4,)))
        self.w_WB_W = np.array(np.broadcast_to(w_WB_W, batch + (3,)))
        self.v_WBo_W = np.array(np.broadcast_to(v_WBo_W, batch + (3,)))

    def __repr__(self) -> str:
        return (
            f"BasePoseTwist(p_WBo_W={self.p_WBo_W.tolist()}, quat_WB={self.quat_WB.tolist()}, "
            f"w_WB_W={self.w_WB_W.tolist()}, v_WBo_W={self.v_WBo_W.tolist()})"
        )

    @property
    def X_WB(self) -> np.ndarray:
        """``(..., 4, 4)`` pose of B in W."""
        return make_transform(quat_to_matrix(self.quat_WB), self.p_WBo_W)

    @property
    def base_positions(self) -> np.ndarray:
        """Drake floating coordinates ``[quat_WB, p_WBo_W]`` ``(..., 7)``."""
        return np.concatenate([self.quat_WB, self.p_WBo_W], axis=-1)

    @property
    def base_velocities(self) -> np.ndarray:
        """Drake floating velocities ``[w_WB_W, v_WBo_W]`` ``(..., 6)``."""
        return np.concatenate([self.w_WB_W, self.v_WBo_W], axis=-1)

    @classmethod
    def from_base_coordinates(cls, q_base, v_base=None) -> BasePoseTwist:
        """From Drake floating coordinates ``(..., 7)`` and velocities ``(..., 6)`` (default zero)."""
        q_base = as_float_array("q_base", q_base, last_dim=NQ_FLOATING)
        if v_base is None:
            return cls(q_base[..., POSITION], q_base[..., QUATERNION])
        v_base = as_float_array("v_base", v_base, last_dim=NV_FLOATING)
        return cls(q_base[..., POSITION], q_base[..., QUATERNION], v_base[..., ANGULAR], v_base[..., LINEAR])

    def ros_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """``(position, orientation_xyzw)``: the fields of ``geometry_msgs/Pose``."""
        return self.p_WBo_W.copy(), quat_wxyz_to_xyzw(self.quat_WB)

    def world_twist(self) -> tuple[np.ndarray, np.ndarray]:
        """``(linear, angular)`` = ``(v_WBo_W, w_WB_W)``: ``V_WB`` expressed in W."""
        return self.v_WBo_W.copy(), self.w_WB_W.copy()

    def child_twist(self) -> tuple[np.ndarray, np.ndarray]:
        """``(linear, angular)`` = ``(v_WBo_B, w_WB_B)``: the ``nav_msgs/Odometry`` twist (child frame B)."""
        return child_twist_from_base_velocities(self.base_positions, self.base_velocities)

    @classmethod
    def from_ros(cls, position, orientation_xyzw, linear=None, angular=None, twist_frame: str = "child"):
        """From ROS arrays: a Pose and a twist expressed in the ``"child"`` frame B (Odometry) or ``"world"``."""
        q_base = base_positions_from_pose(position, orientation_xyzw)
        if linear is None and angular is None:
            return cls.from_base_coordinates(q_base)
        linear = np.zeros(3) if linear is None else linear
        angular = np.zeros(3) if angular is None else angular
        if twist_frame == "child":
            v_base = base_velocities_from_child_twist(q_base, linear, angular)
        elif twist_frame == "world":
            v_base = base_velocities_from_world_twist(linear, angular)
        else:
            raise ValueError(f"twist_frame must be 'child' or 'world', got {twist_frame!r}")
        batch = np.broadcast_shapes(q_base.shape[:-1], v_base.shape[:-1])
        return cls.from_base_coordinates(np.broadcast_to(q_base, batch + (7,)), v_base)
