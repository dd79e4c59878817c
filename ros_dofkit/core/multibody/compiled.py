"""Compiled (numba) kinematics over a plant's ``KinematicTree``: forward kinematics, point Jacobians, joint-frame
rotations, position integration and its inverse, the position difference.

You are in ``ros_dofkit.core.multibody``; this module imports NumPy, numba and the tree's joint-type codes. It
exists so that the kinematics every compiled consumer needs (the assembler's solver in
``ros_dofkit.core.assembly.kernels``, the estimator's per-cycle outputs) live with the plant and are written once.
They take ``tree`` = ``KinematicTree.kernel_arguments()`` (a ``KernelTree`` named record; the layout and the math
are in ``tree.py``'s docstring) and fill caller-owned arrays: no allocation in the loops.

Performance: helpers are inlined at the numba IR level (``inline="always"``) and take (array, index) instead of
views, and the sweep is one loop in one function: numba reference-counts every array a function receives, and a
call per body cost as much as a body's arithmetic (see ``ros_dofkit.core.assembly.kernels``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ros_dofkit.core.multibody.tree import (
    JOINT_PLANAR,
    JOINT_PRISMATIC,
    JOINT_QUATERNION_FLOATING,
    JOINT_REVOLUTE,
    JOINT_WELD,
)


@njit(cache=True, inline="always")
def _compose_at(A, a, B, b, out, o):
    """out[o] = A[a] @ B[b] for rigid transforms stored in (n, 4, 4) arrays (rows 0-2 of A[a] and B[b] are read;
    the last row is 0 0 0 1)."""
    for i in range(3):
        for j in range(3):
            out[o, i, j] = A[a, i, 0] * B[b, 0, j] + A[a, i, 1] * B[b, 1, j] + A[a, i, 2] * B[b, 2, j]
        out[o, i, 3] = A[a, i, 0] * B[b, 0, 3] + A[a, i, 1] * B[b, 1, 3] + A[a, i, 2] * B[b, 2, 3] + A[a, i, 3]
    out[o, 3, 0] = 0.0
    out[o, 3, 1] = 0.0
    out[o, 3, 2] = 0.0
    out[o, 3, 3] = 1.0


@njit(cache=True, inline="always")
def _set_rotation_about_axis(axis, b, angle, X, x):
    """Rotation block of X[x] = exp(angle [axis[b]]x): Rodrigues' formula (the rest of X[x] is left as it is)."""
    c = math.cos(angle)
    s = math.sin(angle)
    t = 1.0 - c
    x0, y0, z0 = axis[b, 0], axis[b, 1], axis[b, 2]
    X[x, 0, 0] = c + x0 * x0 * t
    X[x, 0, 1] = x0 * y0 * t - z0 * s
    X[x, 0, 2] = x0 * z0 * t + y0 * s
    X[x, 1, 0] = y0 * x0 * t + z0 * s
    X[x, 1, 1] = c + y0 * y0 * t
    X[x, 1, 2] = y0 * z0 * t - x0 * s
    X[x, 2, 0] = z0 * x0 * t - y0 * s
    X[x, 2, 1] = z0 * y0 * t + x0 * s
    X[x, 2, 2] = c + z0 * z0 * t


@njit(cache=True, inline="always")
def _set_quaternion_rotation(w, x, y, z, X, k):
    """Rotation block of X[k] from the quaternion (w, x, y, z), normalized first."""
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    X[k, 0, 0] = 1.0 - 2.0 * (y * y + z * z)
    X[k, 0, 1] = 2.0 * (x * y - w * z)
    X[k, 0, 2] = 2.0 * (x * z + w * y)
    X[k, 1, 0] = 2.0 * (x * y + w * z)
    X[k, 1, 1] = 1.0 - 2.0 * (x * x + z * z)
    X[k, 1, 2] = 2.0 * (y * z - w * x)
    X[k, 2, 0] = 2.0 * (x * z - w * y)
    X[k, 2, 1] = 2.0 * (y * z + w * x)
    X[k, 2, 2] = 1.0 - 2.0 * (x * x + y * y)


@njit(cache=True)
def forward_kinematics(tree, q, X_WB, R_WF, p_WM):
    """Fill X_WB (nb,4,4), R_WF (nb,3,3) and p_WM (nb,3) for configuration q (see tree.tree_kinematics)."""
    forward_kinematics_in(tree, q, X_WB, R_WF, p_WM, np.empty((3, 4, 4)), np.ones((3, 1), dtype=np.bool_))


@njit(cache=True, inline="always")
def forward_kinematics_in(tree, q, X_WB, R_WF, p_WM, S, flags):
    """:func:`forward_kinematics` in the caller's workspaces: ``S`` (3,4,4) scratch and ``flags`` (3,1) (unused by a
    full sweep). For kernels compiled without numba's reference counting (``_nrt=False``), which may not allocate,
    nor call a function that does: numba compiles such a callee without the runtime too and refuses its
    allocation."""
    _kinematics_sweep(tree, q, X_WB, R_WF, p_WM, S, flags, q, False, True)


@njit(cache=True, inline="always", error_model="numpy")
def _kinematics_sweep(tree, q, X_WB, R_WF, p_WM, S, flags, q_last, incremental, every_body):
    """Forward kinematics, parents first: for body b > 0 with parent P, ``X_WF = X_WP X_PF``,
    ``X_WM = X_WF X_FM(q)``, ``X_WB = X_WM X_MC``; R_WF and p_WM are kept for Jacobians. S (>= 3, 4, 4) holds
    X_WF, X_FM, X_WM. The world's rows are set unless ``incremental``; then ``flags`` = (needed, valid, changed)
    and ``q_last`` decide which bodies to recompute (see :func:`update_kinematics`).

    One loop in one function: a (non-inlined) call per body, with the tree passed along, cost as much as a
    body's arithmetic."""
    parent, joint_type, X_PF, X_MC, axis, q_start = tree.parent, tree.joint_type, tree.X_PF, tree.X_MC, tree.axis, \
        tree.q_start
    mimic_q, mimic_multiplier, mimic_offset = tree.mimic_q, tree.mimic_multiplier, tree.mimic_offset
    if not incremental:
        _set_world_kinematics(X_WB, R_WF, p_WM)
    for b in range(1, parent.shape[0]):
        kind = joint_type[b]
        if incremental:
            if not (every_body or flags[0, b]):
                flags[1, b] = False
                continue
            moved = not flags[1, b] or flags[2, parent[b]]
            if not moved and kind != JOINT_WELD:
                if kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
                    k = mimic_q[b] if mimic_q[b] >= 0 else q_start[b]
                    moved = not q[k] == q_last[k]
                else:
                    k = q_start[b]
                    for i in range(k, k + (3 if kind == JOINT_PLANAR else 7)):
                        if not q[i] == q_last[i]:
                            moved = True
            flags[2, b] = moved
            if not moved:
                continue
            flags[1, b] = True
        _compose_at(X_WB, parent[b], X_PF, b, S, 0)
        for i in range(3):
            for j in range(3):
                R_WF[b, i, j] = S[0, i, j]
        # X_WM = X_WF X_FM into S[2]. A revolute or prismatic X_FM is a pure rotation or translation: only its
        # non-trivial products are formed (the others are exact: x·1 + y·0 + z·0 = x), so the values are those of
        # the full 4x4 product (up to the sign of a zero), at a third less arithmetic.
        if kind == JOINT_WELD:
            for i in range(4):
                for j in range(4):
                    S[2, i, j] = S[0, i, j]
        elif kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
            if mimic_q[b] >= 0:
                s = mimic_multiplier[b] * q[mimic_q[b]] + mimic_offset[b]
            else:
                s = q[q_start[b]]
            if kind == JOINT_REVOLUTE:
                u = _unit_axis(axis, b)
                if u >= 0:
                    _rotate_about_unit_axis(S, u, s)
                else:
                    _set_rotation_about_axis(axis, b, s, S, 1)
                    for i in range(3):
                        for j in range(3):
                            S[2, i, j] = S[0, i, 0] * S[1, 0, j] + S[0, i, 1] * S[1, 1, j] + S[0, i, 2] * S[1, 2, j]
                for i in range(3):
                    S[2, i, 3] = S[0, i, 3]
            else:
                t0, t1, t2 = s * axis[b, 0], s * axis[b, 1], s * axis[b, 2]
                for i in range(3):
                    for j in range(3):
                        S[2, i, j] = S[0, i, j]
                    S[2, i, 3] = S[0, i, 0] * t0 + S[0, i, 1] * t1 + S[0, i, 2] * t2 + S[0, i, 3]
            S[2, 3, 0] = 0.0
            S[2, 3, 1] = 0.0
            S[2, 3, 2] = 0.0
            S[2, 3, 3] = 1.0
        else:
            for i in range(4):
                for j in range(4):
                    S[1, i, j] = 1.0 if i == j else 0.0
            if kind == JOINT_PLANAR:
                k = q_start[b]
                c = math.cos(q[k + 2])
                n = math.sin(q[k + 2])
                S[1, 0, 0] = c
                S[1, 0, 1] = -n
                S[1, 1, 0] = n
                S[1, 1, 1] = c
                S[1, 0, 3] = q[k]
                S[1, 1, 3] = q[k + 1]
            else:
                k = q_start[b]
                _set_quaternion_rotation(q[k], q[k + 1], q[k + 2], q[k + 3], S, 1)
                S[1, 0, 3] = q[k + 4]
                S[1, 1, 3] = q[k + 5]
                S[1, 2, 3] = q[k + 6]
            _compose_at(S, 0, S, 1, S, 2)
        for i in range(3):
            p_WM[b, i] = S[2, i, 3]
        if _is_identity_at(X_MC, b):  # a URDF body's frame is its joint's: X_WB = X_WM exactly
            for i in range(4):
                for j in range(4):
                    X_WB[b, i, j] = S[2, i, j]
        else:
            _compose_at(S, 2, X_MC, b, X_WB, b)


@njit(cache=True, inline="always")
def _unit_axis(axis, b):
    """a when axis[b] is exactly the unit vector e_a (a in 0, 1, 2: URDF joints about x, y or z), else -1."""
    for a in range(3):
        if axis[b, a] == 1.0 and axis[b, (a + 1) % 3] == 0.0 and axis[b, (a + 2) % 3] == 0.0:
            return a
    return -1


@njit(cache=True, inline="always")
def _rotate_about_unit_axis(S, a, angle):
    """Rotation block of S[2] = S[0] · exp(angle [e_a]x), the product :func:`_set_rotation_about_axis` and a 3x3
    product give for the unit axis e_a, with the terms of its exact zeros left out. With (a, b, c) a cyclic order of
    the axes, Rodrigues' matrix has R_bb = R_cc = cos, R_cb = sin, R_bc = -sin, R_aa = cos + (1 - cos) and zeros
    elsewhere (each formed there as 0·t ± 0·s or 0 ± ..., +0 or exact); adding a ±0 product leaves a sum as it is,
    so the values are the full product's, up to the sign of a zero, for a third of the arithmetic."""
    c = math.cos(angle)
    s = math.sin(angle)
    t = 1.0 - c
    r_aa = c + t
    b = (a + 1) % 3
    e = (a + 2) % 3
    for i in range(3):
        u, v, w = S[0, i, a], S[0, i, b], S[0, i, e]
        S[2, i, a] = u * r_aa
        S[2, i, b] = v * c + w * s
        S[2, i, e] = v * -s + w * c


@njit(cache=True, inline="always")
def _is_identity_at(X, x):
    """True when the rigid transform X[x] is exactly the identity."""
    for i in range(3):
        for j in range(4):
            if X[x, i, j] != (1.0 if i == j else 0.0):
                return False
    return True


@njit(cache=True, inline="always")
def _set_world_kinematics(X_WB, R_WF, p_WM):
    """Body 0 (the world): X_WB = I, R_WF = I, p_WM = 0."""
    for i in range(4):
        for j in range(4):
            X_WB[0, i, j] = 1.0 if i == j else 0.0
    for i in range(3):
        p_WM[0, i] = 0.0
        for j in range(3):
            R_WF[0, i, j] = 1.0 if i == j else 0.0


@njit(cache=True, inline="always")
def joint_frame_rotations(tree, X_WB, bodies, R_WF):
    """R_WF[k] = R_WP X_PF[k] (rotation block, P = parent of k) for every k in ``bodies``, from poses X_WB (nb, 4, 4)
    that forward kinematics computed: the same products in the same order, so R_WF[k] is bit for bit what
    :func:`forward_kinematics` gives, for one 3x3 product per body. :func:`point_jacobian`'s angular rows read only
    R_WF of the bodies on the path to the world, so they follow from poses alone."""
    parent, X_PF = tree.parent, tree.X_PF
    for n in range(bodies.shape[0]):
        k = bodies[n]
        a = parent[k]
        for i in range(3):
            for j in range(3):
                R_WF[k, i, j] = X_WB[a, i, 0] * X_PF[k, 0, j] + X_WB[a, i, 1] * X_PF[k, 1, j] + \
                    X_WB[a, i, 2] * X_PF[k, 2, j]


@njit(cache=True, inline="always")
def point_jacobian(tree, R_WF, p_WM, body, p_WQ, linear, J):
    """J (6, nv) = [J_ω; J_v(Q)] of point Q (p_WQ in W) fixed on ``body``; the linear rows only if ``linear``."""
    parent, joint_type, axis, v_start = tree.parent, tree.joint_type, tree.axis, tree.v_start
    mimic_v, mimic_multiplier = tree.mimic_v, tree.mimic_multiplier
    J[:, :] = 0.0
    k = body
    # Scalars, not 3-arrays: this runs for every sensor at every Jacobian evaluation, where allocating two small
    # arrays cost as much as the arithmetic.
    while k > 0:
        kind = joint_type[k]
        if kind != JOINT_WELD:
            r0 = p_WQ[0] - p_WM[k, 0]
            r1 = p_WQ[1] - p_WM[k, 1]
            r2 = p_WQ[2] - p_WM[k, 2]
            if kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
                if mimic_v[k] >= 0:
                    column = mimic_v[k]
                    scale = mimic_multiplier[k]
                else:
                    column = v_start[k]
                    scale = 1.0
                a0 = scale * (R_WF[k, 0, 0] * axis[k, 0] + R_WF[k, 0, 1] * axis[k, 1] + R_WF[k, 0, 2] * axis[k, 2])
                a1 = scale * (R_WF[k, 1, 0] * axis[k, 0] + R_WF[k, 1, 1] * axis[k, 1] + R_WF[k, 1, 2] * axis[k, 2])
                a2 = scale * (R_WF[k, 2, 0] * axis[k, 0] + R_WF[k, 2, 1] * axis[k, 1] + R_WF[k, 2, 2] * axis[k, 2])
                if kind == JOINT_REVOLUTE:
                    J[0, column] += a0
                    J[1, column] += a1
                    J[2, column] += a2
                    if linear:
                        J[3, column] += a1 * r2 - a2 * r1
                        J[4, column] += a2 * r0 - a0 * r2
                        J[5, column] += a0 * r1 - a1 * r0
                elif linear:
                    J[3, column] += a0
                    J[4, column] += a1
                    J[5, column] += a2
            elif kind == JOINT_PLANAR:
                v0 = v_start[k]
                for i in range(3):
                    J[i, v0 + 2] = R_WF[k, i, 2]
                if linear:
                    for i in range(3):
                        J[3 + i, v0] = R_WF[k, i, 0]
                        J[3 + i, v0 + 1] = R_WF[k, i, 1]
                    J[3, v0 + 2] = R_WF[k, 1, 2] * r2 - R_WF[k, 2, 2] * r1
                    J[4, v0 + 2] = R_WF[k, 2, 2] * r0 - R_WF[k, 0, 2] * r2
                    J[5, v0 + 2] = R_WF[k, 0, 2] * r1 - R_WF[k, 1, 2] * r0
            else:
                v0 = v_start[k]
                for c in range(3):
                    for i in range(3):
                        J[i, v0 + c] = R_WF[k, i, c]
                    if linear:
                        J[3, v0 + c] = R_WF[k, 1, c] * r2 - R_WF[k, 2, c] * r1
                        J[4, v0 + c] = R_WF[k, 2, c] * r0 - R_WF[k, 0, c] * r2
                        J[5, v0 + c] = R_WF[k, 0, c] * r1 - R_WF[k, 1, c] * r0
                        for i in range(3):
                            J[3 + i, v0 + 3 + c] = R_WF[k, i, c]
        k = parent[k]


@njit(cache=True, inline="always")
def add_rotated_angular_columns(tree, R_WF, body, M, scale, J, row):
    """``J[row:row + 3, c] += scale · M ω_c`` for every velocity column c of the joints between ``body`` and the
    world, where ω_c is column c of J_ω(body) (rows 0-2 of :func:`point_jacobian`) and M is 3x3: a rotated block of
    the angular Jacobian, written only where J_ω is not zero (a sensor's rows touch the dofs of its path alone)."""
    parent, joint_type, axis, v_start = tree.parent, tree.joint_type, tree.axis, tree.v_start
    mimic_v, mimic_multiplier = tree.mimic_v, tree.mimic_multiplier
    k = body
    while k > 0:
        kind = joint_type[k]
        count = 0  # angular columns of this joint (welds and prismatic joints have none)
        column = 0
        f = 1.0
        if kind == JOINT_REVOLUTE:
            column = v_start[k]
            if mimic_v[k] >= 0:
                column = mimic_v[k]
                f = mimic_multiplier[k]
            count = 1
        elif kind == JOINT_PLANAR:
            column = v_start[k] + 2
            count = 1
        elif kind == JOINT_QUATERNION_FLOATING:
            column = v_start[k]
            count = 3
        for c in range(count):
            if kind == JOINT_REVOLUTE:
                w0 = f * (R_WF[k, 0, 0] * axis[k, 0] + R_WF[k, 0, 1] * axis[k, 1] + R_WF[k, 0, 2] * axis[k, 2])
                w1 = f * (R_WF[k, 1, 0] * axis[k, 0] + R_WF[k, 1, 1] * axis[k, 1] + R_WF[k, 1, 2] * axis[k, 2])
                w2 = f * (R_WF[k, 2, 0] * axis[k, 0] + R_WF[k, 2, 1] * axis[k, 1] + R_WF[k, 2, 2] * axis[k, 2])
            else:  # planar: the rotation about F's z; floating: F's three axes
                axis_column = 2 if kind == JOINT_PLANAR else c
                w0, w1, w2 = R_WF[k, 0, axis_column], R_WF[k, 1, axis_column], R_WF[k, 2, axis_column]
            for i in range(3):
                J[row + i, column + c] += scale * (M[i, 0] * w0 + M[i, 1] * w1 + M[i, 2] * w2)
        k = parent[k]


@njit(cache=True, inline="always")
def _joint_coordinates(tree, b):
    """(joint type, first q, first v) of body b's inboard joint; first q < 0: none of its own (weld, mimic)."""
    return tree.joint_type[b], tree.q_start[b], tree.v_start[b]


@njit(cache=True, inline="always")
def integrate_positions(tree, q, dv, out):
    """out = q ⊕ dv: additive for 1-dof and planar joints; floating: quat <- exp(dv_ω) ⊗ quat, p += dv_v."""
    for i in range(q.shape[0]):
        out[i] = q[i]
    for b in range(1, tree.joint_type.shape[0]):
        kind, qs, vs = _joint_coordinates(tree, b)
        if qs < 0:
            continue
        if kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
            out[qs] = q[qs] + dv[vs]
        elif kind == JOINT_PLANAR:
            for i in range(3):
                out[qs + i] = q[qs + i] + dv[vs + i]
        elif kind == JOINT_QUATERNION_FLOATING:
            wx, wy, wz = dv[vs], dv[vs + 1], dv[vs + 2]
            theta = math.sqrt(wx * wx + wy * wy + wz * wz)
            if theta < 1e-6:
                sc = 0.5 - theta * theta / 48.0
            else:
                sc = math.sin(0.5 * theta) / theta
            dw, dx, dy, dz = math.cos(0.5 * theta), sc * wx, sc * wy, sc * wz
            w, x, y, z = q[qs], q[qs + 1], q[qs + 2], q[qs + 3]
            nw = dw * w - dx * x - dy * y - dz * z
            nx = dw * x + dx * w + dy * z - dz * y
            ny = dw * y - dx * z + dy * w + dz * x
            nz = dw * z + dx * y - dy * x + dz * w
            n = math.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
            out[qs] = nw / n
            out[qs + 1] = nx / n
            out[qs + 2] = ny / n
            out[qs + 3] = nz / n
            for i in range(3):
                out[qs + 4 + i] = q[qs + 4 + i] + dv[vs + 3 + i]


@njit(cache=True, inline="always")
def difference_positions(tree, q0, q1, out):
    """out = q1 ⊖ q0, the dv with q0 ⊕ dv = q1 (:func:`integrate_positions`' inverse, the plant's
    ``position_difference``): q1 - q0 for 1-dof and planar joints; floating: p1 - p0 and the rotation vector θ n̂
    (θ in [0, π]) of quat1 ⊗ quat0*, expressed in F. The operations of ``QuaternionFloatingJoint.difference``
    (``spatial.quat_multiply``, ``quat_to_rotvec``) in the same order, so the same bits, except atan2: libm's here,
    NumPy's SIMD loop there, which can differ by an ulp. v entries of no joint (none in a finalized plant) are 0."""
    for i in range(out.shape[0]):
        out[i] = 0.0
    for b in range(1, tree.joint_type.shape[0]):
        kind, qs, vs = _joint_coordinates(tree, b)
        if qs < 0:
            continue
        if kind == JOINT_REVOLUTE or kind == JOINT_PRISMATIC:
            out[vs] = q1[qs] - q0[qs]
        elif kind == JOINT_PLANAR:
            for i in range(3):
                out[vs + i] = q1[qs + i] - q0[qs + i]
        elif kind == JOINT_QUATERNION_FLOATING:
            w1, x1, y1, z1 = q1[qs], q1[qs + 1], q1[qs + 2], q1[qs + 3]
            w2, x2, y2, z2 = q0[qs], -q0[qs + 1], -q0[qs + 2], -q0[qs + 3]  # quat0's conjugate
            w = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
            x = w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2
            y = w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2
            z = w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2
            if w < 0.0:  # q and -q are the same rotation: the shorter way round
                w, x, y, z = -w, -x, -y, -z
            s = math.sqrt(x * x + y * y + z * z)
            # θ / sin(θ/2) with θ = 2 atan2(s, w), and its limit 2 / w near zero
            scale = 2.0 / w if s < 1e-6 else 2.0 * math.atan2(s, w) / s
            out[vs] = scale * x
            out[vs + 1] = scale * y
            out[vs + 2] = scale * z
            for i in range(3):
                out[vs + 3 + i] = q1[qs + 4 + i] - q0[qs + 4 + i]


@njit(cache=True, nogil=True)
def position_differences(tree, Q0, Q1, out):
    """out[c] = Q1[c] ⊖ Q0[c] (:func:`difference_positions`) for each row c of Q0, Q1 (C, nq) into out (C, nv): the
    per-cycle velocity finite differences of the estimator (divided by the cycles' dt by the caller)."""
    for c in range(Q0.shape[0]):
        difference_positions(tree, Q0[c], Q1[c], out[c])
