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

**A floating base's heading** (``use_yaw`` on a floating joint). The IMUs observe roll and pitch absolutely, but
yaw only in their own earth frames, whose common heading drifts (no magnetometer, or a disturbed one). With the
base floating and every observation a rotation, the orientation solve is invariant to one rotation Rz(δ) of all
observations about the world's vertical: the solution turns by Rz(δ), joint angles unchanged. So the base's yaw is
not an estimated coordinate to replace but a choice of that common heading, made at the output: the solve runs in
the IMUs' frame (its warm starts, its heading filter, untouched), and each cycle's solution is turned about the
world's vertical through the base origin,

    R_WB' = Rz(Δ) R_WB,   Δ = ψ_odom - ψ(R_WB),   ψ(R) = atan2(R[1, 0], R[0, 0])  (ZYX yaw),

so that the published base yaw is the odometry's (Rz(Δ) adds Δ to the ZYX yaw and leaves roll and pitch); every
body turns with the base (the joints do not change) and the gyro velocities, solved on the turned poses, turn
alike. ψ_odom is the matched odometry sample's (the translation's stamp rules: the newest at or before the cycle
within ``stale_timeout_s``); a cycle without a match keeps the last Δ (as the translation holds), none before the
first match or after a reset (the IMUs' heading is published as it is). :func:`turn_headings` applies it;
``validate_odometry`` puts ψ_odom of the base link in the header (world) frame in value :data:`YAW`.
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

OdometryTarget = namedtuple("OdometryTarget", ["kind", "X_FW", "X_BM", "count", "heading"])
OdometryTarget.__doc__ = """What :func:`validate_odometry` reads: ``kind`` (:data:`ODOMETRY_PLANAR` or
:data:`ODOMETRY_FLOATING`), ``X_FW`` (4, 4) = X_WF⁻¹ of the base joint's parent frame, ``X_BM`` (4, 4) of its child
frame on the base link, ``count`` the coordinates set (2 or 3), ``heading`` a floating base's yaw is taken too
(value :data:`YAW`, module docstring)."""

#: Values an odometry sample carries: the base coordinates (up to 3), then a floating base's yaw (NaN: not taken).
VALUES = 4
YAW = 3


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
        use_yaw: the heading is taken too (a planar base: its θ coordinate; a floating base: the output's yaw,
            :func:`turn_headings`).
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
    base (naming those that have one) and :class:`EstimatorConfigError` when none or several qualify."""
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
                            X_BM=np.ascontiguousarray(joint.frame_on_child.X_BF, dtype=float), count=len(q_index),
                            heading=bool(odometry.use_yaw and not planar))
    return OdometryBase(joint=joint, body=joint.child_body.index, instance=instance, q_index=q_index,
                        art_index=art_index, target=target, use_yaw=odometry.use_yaw)


@njit(cache=True, inline="always", error_model="numpy")
def validate_odometry(position, quaternion_wxyz, frames_match, target, values):
    """The decision on one Odometry pose: ``position`` (3,) and ``quaternion_wxyz`` (4,) of the base link in the
    header frame. Returns :data:`ODOMETRY_OK` and fills ``values[:target.count]`` with the base coordinates and,
    with ``target.heading``, ``values[YAW]`` with the base link's yaw ψ(R_WB) (module docstring), or the reason
    code: ``unknown_frame`` (``frames_match`` False: header or child frame is not the configured one),
    ``non_finite`` (a NaN/Inf position), or the quaternion's (``inputs.quaternion_check``: the one rule of every
    input's quaternion). ``values`` is NaN when refused (and where not taken)."""
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
    if target.heading:
        values[YAW] = math.atan2(X_WB[1, 0], X_WB[0, 0])
    return ODOMETRY_OK


@njit(cache=True, error_model="numpy")
def validate_odometries(position, quaternion_wxyz, frames_match, target, code, values):
    """:func:`validate_odometry` over rows (a window of messages): ``code`` (n,), ``values`` (n, :data:`VALUES`)."""
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
#: of the newest accepted samples (``stamp`` (L,), ``values`` (L, :data:`VALUES`), oldest at ``head``, ``count`` of
#: them, stamps increasing), the source's last accepted stamp (NaN: none since the last reset), its rejections by
#: reason.
MEMORY = np.dtype([
    ("head", np.int64), ("count", np.int64), ("last_stamp", np.float64),
    ("counts", np.int64, (len(RejectReason),)),
    ("stamp", np.float64, (MEMORY_LENGTH,)), ("values", np.float64, (MEMORY_LENGTH, VALUES)),
], align=True)

#: What a cycle took of the odometry: the base coordinates and a floating base's yaw (NaN: none matched, the base
#: holds) and whether none did.
MATCH = np.dtype([("values", np.float64, (VALUES,)), ("stale", np.bool_)], align=True)


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
    for a in range(VALUES):
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
    for a in range(VALUES):
        out.values[a] = np.nan
    for n in range(memory.count - 1, -1, -1):
        k = (memory.head + n) % MEMORY_LENGTH
        if memory.stamp[k] <= stamp + SAME_INSTANT_S:
            if memory.stamp[k] >= stamp - timeout:
                out.stale = False
                for a in range(VALUES):
                    out.values[a] = memory.values[k, a]
            return


# ---------------------------------------------------------------------------------------------- a floating base's yaw
@njit(cache=True, inline="always", error_model="numpy")
def _quaternion_product(a0, a1, a2, a3, b0, b1, b2, b3):
    """Hamilton product (w, x, y, z) of two quaternions given by their components."""
    return (a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3, a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
            a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1, a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0)


@njit(cache=True, error_model="numpy")
def turn_headings(Q, yaw, reset, q_start, R_WF, R_MB_x, q_WF, held, out_Q, delta):
    """A floating base's yaw from odometry (module docstring), over the cycles of a run: ``Q`` (C, nq) the solves
    (in the IMUs' frame), ``yaw`` (C,) each cycle's matched ψ_odom (NaN: none), ``reset`` (C,) the cycle restarts
    tracking (the held Δ is forgotten first), ``q_start`` the base quaternion's first coordinate, ``R_WF`` (3, 3)
    of the joint's parent frame, ``R_MB_x`` (3,) the first column of R_MB, ``q_WF`` (4,) R_WF's quaternion,
    ``held`` (1,) the Δ carried from the previous run (NaN: none; updated). Writes ``out_Q`` = ``Q`` with each
    cycle's base quaternion q_FM turned to q_FW ⊗ q_z(Δ) ⊗ q_WF ⊗ q_FM (R_WB' = Rz(Δ) R_WB), and ``delta`` (C,)
    the Δ applied (NaN: none). Cycle by cycle with scalar arithmetic: a run of one cycle gives the same bits."""
    for c in range(Q.shape[0]):
        for i in range(Q.shape[1]):
            out_Q[c, i] = Q[c, i]
        if reset[c]:
            held[0] = np.nan
        w, x, y, z = Q[c, q_start], Q[c, q_start + 1], Q[c, q_start + 2], Q[c, q_start + 3]
        if not math.isnan(yaw[c]):
            # first column of R_WB = R_WF R_FM R_MB: R_FM r with r = R_MB's first column, then R_WF
            r0, r1, r2 = R_MB_x[0], R_MB_x[1], R_MB_x[2]
            v0 = (1 - 2 * (y * y + z * z)) * r0 + 2 * (x * y - w * z) * r1 + 2 * (x * z + w * y) * r2
            v1 = 2 * (x * y + w * z) * r0 + (1 - 2 * (x * x + z * z)) * r1 + 2 * (y * z - w * x) * r2
            v2 = 2 * (x * z - w * y) * r0 + 2 * (y * z + w * x) * r1 + (1 - 2 * (x * x + y * y)) * r2
            u0 = R_WF[0, 0] * v0 + R_WF[0, 1] * v1 + R_WF[0, 2] * v2
            u1 = R_WF[1, 0] * v0 + R_WF[1, 1] * v1 + R_WF[1, 2] * v2
            turn = yaw[c] - math.atan2(u1, u0)
            held[0] = math.atan2(math.sin(turn), math.cos(turn))  # wrapped into (-π, π]
        delta[c] = held[0]
        if math.isnan(held[0]):
            continue
        half = 0.5 * held[0]
        c_h, s_h = math.cos(half), math.sin(half)
        # q_z(Δ) ⊗ q_WF ⊗ q_FM, then q_FW ⊗ (that) with q_FW the conjugate of q_WF
        a = _quaternion_product(c_h, 0.0, 0.0, s_h, q_WF[0], q_WF[1], q_WF[2], q_WF[3])
        a = _quaternion_product(a[0], a[1], a[2], a[3], w, x, y, z)
        a = _quaternion_product(q_WF[0], -q_WF[1], -q_WF[2], -q_WF[3], a[0], a[1], a[2], a[3])
        for k in range(4):
            out_Q[c, q_start + k] = a[k]
