"""ros_dofkit.core.multibody.tree: the kinematic tree as flat arrays, and kinematics as loops over them.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy and ``core.spatial`` only.

This is the path the plant computes with and the layout compiled kernels (numba, in core/assembly) read.
The readable reference over Joint objects is in ``kinematics.py``; tests hold the two to 1e-12.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from .. import spatial

JOINT_WELD = 0
JOINT_REVOLUTE = 1
JOINT_PRISMATIC = 2
JOINT_PLANAR = 3
JOINT_QUATERNION_FLOATING = 4

#: type_name of a Joint -> joint type code in ``KinematicTree.joint_type``.
JOINT_TYPE_CODES = {
    "weld": JOINT_WELD,
    "revolute": JOINT_REVOLUTE,
    "prismatic": JOINT_PRISMATIC,
    "planar": JOINT_PLANAR,
    "quaternion_floating": JOINT_QUATERNION_FLOATING,
}


KernelTree = namedtuple("KernelTree", [
    "parent", "joint_type", "X_PF", "X_MC", "axis", "q_start", "v_start", "mimic_q", "mimic_v", "mimic_multiplier",
    "mimic_offset",
])
KernelTree.__doc__ = """The arrays of a :class:`KinematicTree` that compiled kernels read (``core.multibody.compiled``,
the assembler's solver), as one named record: numba takes a namedtuple of arrays as one argument."""


@dataclass(frozen=True, eq=False)
class KinematicTree:
    """The plant's tree as contiguous arrays (C order; float64 and int64). Index b runs over bodies, 0 = world,
    and ``parent[b] < b`` for every b > 0, so one forward sweep visits parents first.

    For body b > 0 with inboard joint (F on the parent P, M on b):
    ``X_WB[b] = X_WB[parent[b]] @ X_PF[b] @ X_FM(type, s) @ X_MC[b]`` where the joint's motion value(s) s are

    * ``q[q_start[b] : q_start[b] + nq]`` for a joint with coordinates
      (revolute/prismatic 1, planar 3 = (x, y, θ), quaternion floating 7 = [qw qx qy qz x y z]);
    * ``mimic_multiplier[b] * q[mimic_q[b]] + mimic_offset[b]`` for a mimic joint (``mimic_q[b] >= 0``);
      mimic chains are resolved to their first non-mimic source; ``mimic_v[b]`` is that source's velocity index;
    * nothing for a weld (its fixed X_FM is folded into ``X_PF``).

    X_FM per type: weld I; revolute ``(exp(s [axis]×), 0)``; prismatic ``(I, s axis)``; planar
    ``(R_z(θ), [x, y, 0])``; quaternion floating ``(R(quat/|quat|), p)``. Velocities (V_FM_F = [w; v_Mo]):
    revolute ``[axis; 0] v``, prismatic ``[0; axis] v``, planar ``[0, 0, v2; v0, v1, 0]``, floating ``v`` (6).

    Fields:
        num_bodies, nq, nv, num_frames: sizes.
        parent: int64[nb], -1 for the world.
        joint_type: int64[nb], JOINT_* codes (world: JOINT_WELD).
        X_PF: float64[nb, 4, 4], pose of F in the parent body (weld: X_PF @ X_FM).
        X_MC: float64[nb, 4, 4], pose of the body in M (= inv(X_CM)).
        axis: float64[nb, 3], unit axis in F for revolute/prismatic, zero otherwise.
        q_start, v_start: int64[nb], first q / v of the inboard joint, -1 if it has none (weld, mimic, world).
        mimic_q, mimic_v: int64[nb], q / v index of the mimic source, -1 if not a mimic joint.
        mimic_multiplier, mimic_offset: float64[nb].
        frame_body: int64[nf], X_BF: float64[nf, 4, 4]: all frames, body frames first (frame i = body i).
    """

    num_bodies: int
    nq: int
    nv: int
    num_frames: int
    parent: np.ndarray
    joint_type: np.ndarray
    X_PF: np.ndarray
    X_MC: np.ndarray
    axis: np.ndarray
    q_start: np.ndarray
    v_start: np.ndarray
    mimic_q: np.ndarray
    mimic_v: np.ndarray
    mimic_multiplier: np.ndarray
    mimic_offset: np.ndarray
    frame_body: np.ndarray
    X_BF: np.ndarray

    def __post_init__(self):
        for name in ("parent", "joint_type", "q_start", "v_start", "mimic_q", "mimic_v", "frame_body"):
            array = np.ascontiguousarray(getattr(self, name), dtype=np.int64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        for name in ("X_PF", "X_MC", "axis", "mimic_multiplier", "mimic_offset", "X_BF"):
            array = np.ascontiguousarray(getattr(self, name), dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        object.__setattr__(self, "_plan", _SweepPlan(self))
        object.__setattr__(self, "_kernel_arguments", KernelTree(*(getattr(self, name) for name in KernelTree._fields)))

    def kernel_arguments(self) -> KernelTree:
        """The tree as compiled kernels take it (built once; the arrays are this tree's, read-only)."""
        return self._kernel_arguments


class _SweepPlan:
    """Index sets derived once from a tree so that the NumPy path works on groups of bodies, not one at a time:
    bodies by joint type (to build every X_FM with one call per type) and by depth (bodies of one depth only
    depend on shallower ones, so each depth is one batched product)."""

    def __init__(self, tree: KinematicTree):
        nb = tree.num_bodies
        depth = np.zeros(nb, dtype=np.int64)
        for b in range(1, nb):
            depth[b] = depth[tree.parent[b]] + 1
        self.levels = [np.flatnonzero(depth == d) for d in range(1, int(depth.max(initial=0)) + 1)]
        kind = tree.joint_type
        self.revolute = np.flatnonzero(kind == JOINT_REVOLUTE)
        self.prismatic = np.flatnonzero(kind == JOINT_PRISMATIC)
        self.planar = np.flatnonzero(kind == JOINT_PLANAR)
        self.floating = np.flatnonzero(kind == JOINT_QUATERNION_FLOATING)
        one_dof = np.concatenate([self.revolute, self.prismatic])
        self.one_dof = one_dof
        self.one_dof_is_mimic = tree.mimic_q[one_dof] >= 0
        # q index and affine map of each 1-dof motion value: s = multiplier * q[index] + offset
        self.one_dof_q = np.where(self.one_dof_is_mimic, tree.mimic_q[one_dof], tree.q_start[one_dof])
        self.one_dof_multiplier = np.where(self.one_dof_is_mimic, tree.mimic_multiplier[one_dof], 1.0)
        self.one_dof_offset = np.where(self.one_dof_is_mimic, tree.mimic_offset[one_dof], 0.0)
        self.one_dof_v = np.where(self.one_dof_is_mimic, tree.mimic_v[one_dof], tree.v_start[one_dof])
        self.X_CM = np.linalg.inv(tree.X_MC)
        self._paths: dict[int, np.ndarray] = {}

    def path(self, tree: KinematicTree, body: int) -> np.ndarray:
        """Bodies from ``body`` up to (not including) the world; cached per body."""
        cached = self._paths.get(body)
        if cached is None:
            path, b = [], body
            while b > 0:
                path.append(b)
                b = tree.parent[b]
            cached = self._paths[body] = np.array(path, dtype=np.int64)
        return cached


def _joint_transforms(tree: KinematicTree, q: np.ndarray) -> np.ndarray:
    """X_FM (B, nb, 4, 4) of every body's inboard joint (identity for welds and the world)."""
    plan = tree._plan
    batch = q.shape[0]
    X_FM = np.zeros((batch, tree.num_bodies, 4, 4))
    X_FM[:, :, 0, 0] = X_FM[:, :, 1, 1] = X_FM[:, :, 2, 2] = X_FM[:, :, 3, 3] = 1.0
    p_FM = X_FM[:, :, :3, 3]  # a view; indexing it keeps the (B, bodies) axes first
    if plan.one_dof.size:
        s = plan.one_dof_multiplier * q[:, plan.one_dof_q] + plan.one_dof_offset  # (B, n1)
        n_revolute = plan.revolute.size
        if n_revolute:
            rotvec = s[:, :n_revolute, None] * tree.axis[plan.revolute]
            X_FM[:, plan.revolute, :3, :3] = spatial.rotvec_to_matrix(rotvec)
        if plan.prismatic.size:
            p_FM[:, plan.prismatic] = s[:, n_revolute:, None] * tree.axis[plan.prismatic]
    if plan.planar.size:
        index = tree.q_start[plan.planar][:, None] + np.arange(3)
        x, y, theta = np.moveaxis(q[:, index], -1, 0)  # each (B, n_planar)
        c, n = np.cos(theta), np.sin(theta)
        X_FM[:, plan.planar, 0, 0], X_FM[:, plan.planar, 0, 1] = c, -n
        X_FM[:, plan.planar, 1, 0], X_FM[:, plan.planar, 1, 1] = n, c
        X_FM[:, plan.planar, 0, 3], X_FM[:, plan.planar, 1, 3] = x, y
    if plan.floating.size:
        s = q[:, tree.q_start[plan.floating][:, None] + np.arange(7)]  # (B, n_floating, 7)
        quat = s[..., :4] / np.linalg.norm(s[..., :4], axis=-1, keepdims=True)
        X_FM[:, plan.floating, :3, :3] = spatial.quat_to_matrix(quat)
        p_FM[:, plan.floating] = s[..., 4:]
    return X_FM


def tree_kinematics(tree: KinematicTree, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward kinematics over a batch ``q`` (B, nq).

    Returns ``X_WB`` (B, nb, 4, 4), ``R_WF`` (B, nb, 3, 3) (orientation of each inboard joint's F in W) and
    ``p_WMo`` (B, nb, 3) (origin of each inboard joint's M in W); the last two are what Jacobians need.
    Each body's local transform ``X_PB = X_PF @ X_FM(q) @ X_MC`` is formed for all bodies at once, then
    ``X_WB = X_WP @ X_PB`` is swept depth by depth.
    """
    plan = tree._plan
    X_PB = tree.X_PF @ _joint_transforms(tree, q) @ tree.X_MC
    X_WB = np.empty_like(X_PB)
    X_WB[:, 0] = np.eye(4)
    for level in plan.levels:
        X_WB[:, level] = X_WB[:, tree.parent[level]] @ X_PB[:, level]
    R_WF = X_WB[:, np.maximum(tree.parent, 0), :3, :3] @ tree.X_PF[:, :3, :3]
    R_WF[:, 0] = np.eye(3)
    p_WMo = (X_WB @ plan.X_CM[:, :, 3:4])[..., :3, 0]
    return X_WB, R_WF, p_WMo


def tree_jacobian(tree: KinematicTree, R_WF: np.ndarray, p_WMo: np.ndarray, body: int,
                  p_WQ: np.ndarray) -> np.ndarray:
    """``J`` (B, 6, nv) with ``[w_WB_W; v_WQ_W] = J v`` for point Q (p_WQ (B, 3)) fixed on ``body``.

    Every joint between the body and the world, with motion subspace columns (a_F, b_F), adds
    ``[R_WF a_F; R_WF b_F + (R_WF a_F) × (p_WQ - p_WMo)]`` to the columns of its velocities (for a mimic joint,
    ``mimic_multiplier`` times that to the source's column).
    """
    plan = tree._plan
    batch = p_WQ.shape[0]
    J = np.zeros((batch, 6, tree.nv))
    path = plan.path(tree, body)
    if path.size == 0:
        return J
    on_path = np.zeros(tree.num_bodies, dtype=bool)
    on_path[path] = True
    selected = on_path[plan.one_dof]
    if selected.any():
        bodies = plan.one_dof[selected]
        columns = plan.one_dof_v[selected]
        scale = plan.one_dof_multiplier[selected]
        revolute = tree.joint_type[bodies] == JOINT_REVOLUTE
        axis_W = (R_WF[:, bodies] @ tree.axis[bodies][:, :, None])[..., 0] * scale[:, None]  # (B, n, 3)
        block = np.zeros((batch, bodies.size, 6))
        block[:, revolute, :3] = axis_W[:, revolute]
        block[:, revolute, 3:] = np.cross(axis_W[:, revolute], p_WQ[:, None] - p_WMo[:, bodies[revolute]])
        block[:, ~revolute, 3:] = axis_W[:, ~revolute]
        # mimic joints on one path can share their source's column: accumulate
        np.add.at(J, (slice(None), slice(None), columns), np.swapaxes(block, 1, 2))
    for k in plan.planar[on_path[plan.planar]]:
        R, r, v0 = R_WF[:, k], p_WQ - p_WMo[:, k], tree.v_start[k]
        J[:, 3:, v0] = R[:, :, 0]
        J[:, 3:, v0 + 1] = R[:, :, 1]
        J[:, :3, v0 + 2] = R[:, :, 2]
        J[:, 3:, v0 + 2] = np.cross(R[:, :, 2], r)
    for k in plan.floating[on_path[plan.floating]]:
        R, r, v0 = R_WF[:, k], p_WQ - p_WMo[:, k], tree.v_start[k]
        J[:, :3, v0:v0 + 3] = R
        J[:, 3:, v0:v0 + 3] = -spatial.skew(r) @ R  # column i: R[:, :, i] × r
        J[:, 3:, v0 + 3:v0 + 6] = R
    return J
