"""ros_dofkit.core.multibody.tree: the kinematic tree as flat arrays, and kinematics as loops over them.

This is the path the plant computes with and the layout compiled kernels (numba, in core/assembly) read.
The readable reference over Joint objects is in ``kinematics.py``; tests hold the two to 1e-12.
"""

from __future__ import annotations

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


def _motion_value(tree: KinematicTree, q: np.ndarray, b: int) -> np.ndarray:
    """The single motion value (B,) of the 1-dof (possibly mimic) joint of body b."""
    if tree.mimic_q[b] >= 0:
        return tree.mimic_multiplier[b] * q[:, tree.mimic_q[b]] + tree.mimic_offset[b]
    return q[:, tree.q_start[b]]


def _joint_transform(tree: KinematicTree, q: np.ndarray, b: int) -> np.ndarray | None:
    """X_FM (B, 4, 4) of body b's inboard joint, None for a weld."""
    kind = tree.joint_type[b]
    if kind == JOINT_WELD:
        return None
    batch = q.shape[0]
    X = np.zeros((batch, 4, 4))
    X[:, 3, 3] = 1.0
    if kind == JOINT_REVOLUTE:
        X[:, :3, :3] = spatial.rotvec_to_matrix(_motion_value(tree, q, b)[:, None] * tree.axis[b])
    elif kind == JOINT_PRISMATIC:
        X[:, :3, :3] = np.eye(3)
        X[:, :3, 3] = _motion_value(tree, q, b)[:, None] * tree.axis[b]
    elif kind == JOINT_PLANAR:
        s = q[:, tree.q_start[b]:tree.q_start[b] + 3]
        c, n = np.cos(s[:, 2]), np.sin(s[:, 2])
        X[:, 0, 0], X[:, 0, 1], X[:, 1, 0], X[:, 1, 1], X[:, 2, 2] = c, -n, n, c, 1.0
        X[:, 0, 3], X[:, 1, 3] = s[:, 0], s[:, 1]
    else:  # JOINT_QUATERNION_FLOATING
        s = q[:, tree.q_start[b]:tree.q_start[b] + 7]
        X[:, :3, :3] = spatial.quat_to_matrix(s[:, :4] / np.linalg.norm(s[:, :4], axis=1, keepdims=True))
        X[:, :3, 3] = s[:, 4:]
    return X


def tree_kinematics(tree: KinematicTree, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward sweep over a batch ``q`` (B, nq).

    Returns ``X_WB`` (B, nb, 4, 4), ``R_WF`` (B, nb, 3, 3) (orientation of each inboard joint's F in W) and
    ``p_WMo`` (B, nb, 3) (origin of each inboard joint's M in W); the last two are what Jacobians need.
    """
    batch = q.shape[0]
    nb = tree.num_bodies
    X_WB = np.empty((batch, nb, 4, 4))
    R_WF = np.empty((batch, nb, 3, 3))
    p_WMo = np.zeros((batch, nb, 3))
    X_WB[:, 0] = np.eye(4)
    R_WF[:, 0] = np.eye(3)
    for b in range(1, nb):
        X_WF = X_WB[:, tree.parent[b]] @ tree.X_PF[b]
        R_WF[:, b] = X_WF[:, :3, :3]
        X_FM = _joint_transform(tree, q, b)
        X_WM = X_WF if X_FM is None else X_WF @ X_FM
        p_WMo[:, b] = X_WM[:, :3, 3]
        X_WB[:, b] = X_WM @ tree.X_MC[b]
    return X_WB, R_WF, p_WMo


def tree_jacobian(tree: KinematicTree, R_WF: np.ndarray, p_WMo: np.ndarray, body: int,
                  p_WQ: np.ndarray) -> np.ndarray:
    """``J`` (B, 6, nv) with ``[w_WB_W; v_WQ_W] = J v`` for point Q (p_WQ (B, 3)) fixed on ``body``.

    Walks from the body to the world; a joint at body k with motion subspace columns (a_F, b_F) adds
    ``[R_WF a_F; R_WF b_F + (R_WF a_F) × (p_WQ - p_WMo)]`` to the columns of its velocities (for a mimic joint,
    ``mimic_multiplier`` times that to the source's column).
    """
    batch = p_WQ.shape[0]
    J = np.zeros((batch, 6, tree.nv))
    k = body
    while k > 0:
        kind = tree.joint_type[k]
        if kind != JOINT_WELD:
            R = R_WF[:, k]
            r = p_WQ - p_WMo[:, k]
            if kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
                column, scale = (tree.v_start[k], 1.0) if tree.mimic_v[k] < 0 else (
                    tree.mimic_v[k], tree.mimic_multiplier[k])
                axis_W = R @ tree.axis[k]
                if kind == JOINT_REVOLUTE:
                    J[:, :3, column] += scale * axis_W
                    J[:, 3:, column] += scale * np.cross(axis_W, r)
                else:
                    J[:, 3:, column] += scale * axis_W
            elif kind == JOINT_PLANAR:
                v0 = tree.v_start[k]
                J[:, 3:, v0] = R[:, :, 0]
                J[:, 3:, v0 + 1] = R[:, :, 1]
                J[:, :3, v0 + 2] = R[:, :, 2]
                J[:, 3:, v0 + 2] = np.cross(R[:, :, 2], r)
            else:  # JOINT_QUATERNION_FLOATING
                v0 = tree.v_start[k]
                J[:, :3, v0:v0 + 3] = R
                # column i of the angular block is R[:, :, i] × r = -[r]× R[:, :, i]
                J[:, 3:, v0:v0 + 3] = -spatial.skew(r) @ R
                J[:, 3:, v0 + 3:v0 + 6] = R
        k = tree.parent[k]
    return J
