"""The robot's odometry as an estimator input: which base coordinates a pose sets, and when a message is refused.

You are in the ROS-free estimator core; this module imports NumPy, numba, the estimator's configuration, the reason
codes of ``inputs`` and the bases ``odometry`` publishes. It exists so that a planar or floating base can take its
translation (and, for a planar base, optionally its heading) from ``nav_msgs/Odometry`` -- wheel or legged odometry,
robot_localization -- while the rotations the IMUs observe stay estimated. The node and offline replay hand the
message's pose (and whether its frames are the configured ones, a ROS matter decided at the edge) to
:func:`validate_odometry`, compiled; the cycle rules (``rules``) then apply the stamp checks and pick the sample
each cycle uses, the same bits live and offline.

Frames: the odometry pose is ``X_WB`` of the base link B in the frame the base hangs from (REP-105's ``odom``, the
plant's world W). The base joint connects F (on the world, ``X_WF``) to M (on B, ``X_BM``), so its coordinates
follow from ``X_FM = X_WF⁻¹ X_WB X_BM``:

* floating joint (q = [qw qx qy qz x y z]): the translation ``p_FM_F`` = X_FM's translation (3 coordinates);
* planar joint (q = [x, y, θ]): x, y = X_FM's translation in F's plane, θ = atan2(R_FM[1, 0], R_FM[0, 0]) when the
  heading is taken too (``OdometryConfig.use_yaw``; the projection ``PlanarJoint.project_pose`` uses).

A floating base's heading is not taken from odometry: its quaternion is one estimated coordinate block, and
replacing its yaw would need a heading offset on every IMU of the chain (issue 19's heading estimation).
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from numba import njit

from ros_dofkit.core.errors import EstimatorConfigError
from ros_dofkit.core.estimator.config import EstimatorConfig, UnknownNameError, describe_unknown
from ros_dofkit.core.estimator.inputs import QUATERNION_OK, REASON_CODE, RejectReason, quaternion_check
from ros_dofkit.core.estimator.odometry import base_odometries

ODOMETRY_PLANAR = 0
ODOMETRY_FLOATING = 1

#: Status of a message :func:`validate_odometry` keeps (reason codes are >= 0).
ODOMETRY_OK = -1
_NON_FINITE = REASON_CODE[RejectReason.NON_FINITE]
_UNKNOWN_FRAME = REASON_CODE[RejectReason.UNKNOWN_FRAME]

OdometryTarget = namedtuple("OdometryTarget", ["kind", "X_FW", "X_BM", "count"])
OdometryTarget.__doc__ = """What :func:`validate_odometry` reads: ``kind`` (:data:`ODOMETRY_PLANAR` or
:data:`ODOMETRY_FLOATING`), ``X_FW`` (4, 4) = X_WF⁻¹ of the base joint's parent frame, ``X_BM`` (4, 4) of its child
frame on the base link, ``count`` the coordinates set (2 or 3)."""


@dataclass(frozen=True, eq=False)
class OdometryBase:
    """The base joint an odometry stream drives (build with :func:`odometry_base`).

    Attributes:
        joint: the planar or floating joint; ``body`` its child body's index (the base link, the Odometry child).
        instance: its model instance's name.
        q_index: (k,) the plant position indices the odometry sets, in :func:`validate_odometry`'s value order.
        art_index: (m,) the articulated coordinates among them (planar bases: x, y and with the heading θ), which
            are therefore measured, never estimated; empty for a floating base (its translation is held anyway).
        target: the :class:`OdometryTarget` the compiled validation reads.
        use_yaw: the heading is taken too.
    """

    joint: object
    body: int
    instance: str
    q_index: np.ndarray
    art_index: np.ndarray
    target: OdometryTarget
    use_yaw: bool


def odometry_base(plant, config: EstimatorConfig, art_q) -> OdometryBase | None:
    """The base ``config.odometry`` drives on ``plant`` (None without odometry). ``art_q`` (n_art,) the plant
    position index of each articulated coordinate. Raises :class:`UnknownNameError` for an instance without such a
    base (naming those that have one) and :class:`EstimatorConfigError` when none or several qualify, or for a
    heading asked of a floating base."""
    odometry = config.odometry
    if odometry is None:
        return None
    joints = {plant.get_model_instance_name(base.joint.model_instance): base.joint
              for base in base_odometries(plant)}
    if odometry.model_instance is None:
        if len(joints) != 1:
            raise EstimatorConfigError(
                f"odometry: the robot has {len(joints)} model instances with a planar or floating base attached to "
                f"the world ({sorted(joints)}); name the one the odometry drives (odometry_instance)")
        instance = next(iter(joints))
    else:
        instance = odometry.model_instance
        if instance not in joints:
            raise UnknownNameError("odometry: " + describe_unknown(
                "model instance with a planar or floating base on the world", instance, sorted(joints)))
    joint = joints[instance]
    start = joint.position_start
    planar = joint.type_name == "planar"
    if not planar and odometry.use_yaw:
        raise EstimatorConfigError(
            f"odometry use_yaw: {joint.name!r} is a floating base, whose rotation (yaw included) is estimated from "
            "its IMUs; take the heading from odometry on a planar base, or fuse both in robot_localization")
    if planar:
        q_index = np.arange(start, start + (3 if odometry.use_yaw else 2), dtype=np.int64)
    else:
        q_index = np.arange(start + 4, start + 7, dtype=np.int64)
    position_of = {int(q): k for k, q in enumerate(np.asarray(art_q))}
    art_index = np.array([position_of[int(q)] for q in q_index if int(q) in position_of], dtype=np.int64)
    X_WF = np.asarray(joint.frame_on_parent.X_BF, dtype=float)
    X_FW = np.eye(4)
    X_FW[:3, :3] = X_WF[:3, :3].T
    X_FW[:3, 3] = -X_WF[:3, :3].T @ X_WF[:3, 3]
    target = OdometryTarget(kind=ODOMETRY_PLANAR if planar else ODOMETRY_FLOATING, X_FW=X_FW,
                            X_BM=np.ascontiguousarray(joint.frame_on_child.X_BF, dtype=float), count=len(q_index))
    return OdometryBase(joint=joint, body=joint.child_body.index, instance=instance, q_index=q_index,
                        art_index=art_index, target=target, use_yaw=odometry.use_yaw)


@njit(cache=True, inline="always", error_model="numpy")
def validate_odometry(position, quaternion_wxyz, frames_match, target, values):
    """The decision on one Odometry pose: ``position`` (3,) and ``quaternion_wxyz`` (4,) of the base link in the
    header frame. Returns :data:`ODOMETRY_OK` and fills ``values[:target.count]`` with the base coordinates (module
    docstring), or the reason code: ``unknown_frame`` (``frames_match`` False: header or child frame is not the
    configured one), ``non_finite`` (a NaN/Inf position), or the quaternion's (``inputs.quaternion_check``: the one
    rule of every input's quaternion). ``values`` is NaN when refused."""
    for k in range(values.shape[0]):
        values[k] = np.nan
    if not frames_match:
        return _UNKNOWN_FRAME
    for a in range(3):
        if not math.isfinite(position[a]):
            return _NON_FINITE
    code, norm = quaternion_check(quaternion_wxyz[0], quaternion_wxyz[1], quaternion_wxyz[2], quaternion_wxyz[3])
    if code != QUATERNION_OK:
        return code
    w, x, y, z = quaternion_wxyz[0] / norm, quaternion_wxyz[1] / norm, quaternion_wxyz[2] / norm, \
        quaternion_wxyz[3] / norm
    X_WB = np.empty((4, 4))
    X_WB[0, 0], X_WB[0, 1], X_WB[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
    X_WB[1, 0], X_WB[1, 1], X_WB[1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
    X_WB[2, 0], X_WB[2, 1], X_WB[2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
    for a in range(3):
        X_WB[a, 3] = position[a]
        X_WB[3, a] = 0.0
    X_WB[3, 3] = 1.0
    X_FM = target.X_FW @ X_WB @ target.X_BM
    for a in range(min(target.count, 3) if target.kind == ODOMETRY_FLOATING else 2):
        values[a] = X_FM[a, 3]
    if target.kind == ODOMETRY_PLANAR and target.count == 3:
        values[2] = math.atan2(X_FM[1, 0], X_FM[0, 0])
    return ODOMETRY_OK


@njit(cache=True, error_model="numpy")
def validate_odometries(position, quaternion_wxyz, frames_match, target, code, values):
    """:func:`validate_odometry` over rows (a window of messages): ``code`` (n,), ``values`` (n, 3)."""
    for n in range(code.shape[0]):
        code[n] = validate_odometry(position[n], quaternion_wxyz[n], frames_match[n], target, values[n])


# ---------------------------------------------------------------------------------------------- the rules' memory
#: Accepted odometry samples kept for matching (the newest; at 100 Hz, 0.32 s: more than a cycle ever looks back).
MEMORY_LENGTH = 32

#: Seconds within which an odometry stamp counts as the cycle's own instant: float seconds resolve an epoch stamp
#: (1.8e9 s) to 0.24 µs, and a time offset applied in integer nanoseconds may land a rounding step after the IMU's
#: stamp of the same instant; 1 µs is far below any sensor period.
SAME_INSTANT_S = 1e-6

#: The odometry source's memory in the cycle rules, one record (a single array, as the rules' state is kept): a ring
#: of the newest accepted samples (``stamp`` (L,), ``values`` (L, 3), oldest at ``head``, ``count`` of them, stamps
#: increasing), the source's last accepted stamp (NaN: none since the last reset), its rejections by reason.
MEMORY = np.dtype([
    ("head", np.int64), ("count", np.int64), ("last_stamp", np.float64),
    ("counts", np.int64, (len(RejectReason),)),
    ("stamp", np.float64, (MEMORY_LENGTH,)), ("values", np.float64, (MEMORY_LENGTH, 3)),
], align=True)

#: What a cycle took of the odometry: the base coordinates (NaN: none matched, the base holds) and whether none did.
MATCH = np.dtype([("values", np.float64, (3,)), ("stale", np.bool_)], align=True)


def new_memory() -> np.ndarray:
    """An empty memory, (1,) :data:`MEMORY`."""
    memory = np.zeros(1, dtype=MEMORY)
    memory["last_stamp"] = np.nan
    return memory


@njit(cache=True, inline="always", error_model="numpy")
def forget(memory):
    """Nothing heard (a reset of the rules); the counters stay. ``memory``: the :data:`MEMORY` record."""
    memory.head = 0
    memory.count = 0
    memory.last_stamp = np.nan


@njit(cache=True, inline="always", error_model="numpy")
def remember(memory, stamp, values):
    """Keep an accepted sample (stamped after every kept one: the rules refuse the others); the oldest goes when
    the ring is full."""
    if memory.count == MEMORY_LENGTH:
        memory.head = (memory.head + 1) % MEMORY_LENGTH
        memory.count -= 1
    k = (memory.head + memory.count) % MEMORY_LENGTH
    memory.stamp[k] = stamp
    for a in range(3):
        memory.values[k, a] = values[a]
    memory.count += 1
    memory.last_stamp = stamp


@njit(cache=True, inline="always", error_model="numpy")
def match(memory, stamp, timeout, out):
    """What a cycle at ``stamp`` takes, into ``out`` (a :data:`MATCH` record): the newest kept sample stamped at
    or before ``stamp`` (up to :data:`SAME_INSTANT_S` after it counts as the same instant) and not older than
    ``stamp - timeout`` (the encoders' sample-and-hold, without a value from the cycle's future: a stream of
    odometry ahead of the IMUs is not used early, and no cycle waits for the next message as interpolation
    would); else NaN values (the base coordinates hold their last value) and ``stale``."""
    out.stale = True
    for a in range(3):
        out.values[a] = np.nan
    for n in range(memory.count - 1, -1, -1):
        k = (memory.head + n) % MEMORY_LENGTH
        if memory.stamp[k] <= stamp + SAME_INSTANT_S:
            if memory.stamp[k] >= stamp - timeout:
                out.stale = False
                for a in range(3):
                    out.values[a] = memory.values[k, a]
            return
