"""ros_dofkit.core.multibody.kinematics: the readable reference implementation of forward kinematics and
frame Jacobians, written over Joint objects and their own ``calc_X_FM`` / ``calc_motion_subspace``.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy and ``core.spatial`` only (it works on
the Joint objects it is given).

The plant computes with the flat-array path in ``tree.py``; this module is the independent statement of the
same math that tests hold it to (1e-12). Batched: q has shape (B, nq).
"""

from __future__ import annotations

import numpy as np

from .. import spatial


def reference_body_poses(plant, q: np.ndarray) -> np.ndarray:
    """``X_WB`` (B, nb, 4, 4): ``X_WC = X_WP @ X_PF @ X_FM(q) @ inv(X_CM)`` body by body, parents first."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    nb = plant.num_bodies()
    X_WB = np.empty((q.shape[0], nb, 4, 4))
    X_WB[:, 0] = np.eye(4)
    for body_index in range(1, nb):
        joint = plant._inboard_joint(body_index)
        X_WP = X_WB[:, joint.parent_body.index]
        X_FM = joint.calc_X_FM(joint.motion_positions(q))
        X_WB[:, body_index] = X_WP @ joint.X_PF @ X_FM @ spatial.invert_transform(joint.X_CM)
    return X_WB


def reference_jacobian(plant, q: np.ndarray, body_index: int, p_BQ: np.ndarray) -> np.ndarray:
    """``J`` (B, 6, nv) with ``[w_WB_W; v_WQ_W] = J v`` for the point Q at ``p_BQ`` (body frame) on a body.

    Each joint on the path from the body to the world contributes, through its motion subspace
    ``H_FM_F = [A; L]``, the columns ``[R_WF A; R_WF L + (R_WF A) × (p_WQ - p_WMo)]`` to its own velocities
    (a mimic joint: multiplier times those to its source's velocity).
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    X_WB = reference_body_poses(plant, q)
    p_WQ = (X_WB[:, body_index] @ np.append(p_BQ, 1.0))[:, :3]
    J = np.zeros((q.shape[0], 6, plant.num_velocities()))
    while body_index > 0:
        joint = plant._inboard_joint(body_index)
        s = joint.motion_positions(q)
        X_WF = X_WB[:, joint.parent_body.index] @ joint.X_PF
        X_WM = X_WF @ joint.calc_X_FM(s)
        H = joint.calc_motion_subspace(s)
        R_WF = X_WF[:, :3, :3]
        angular = R_WF @ H[:, :3]
        linear = R_WF @ H[:, 3:] + np.cross(angular, (p_WQ - X_WM[:, :3, 3])[:, :, None], axis=1)
        columns = np.hstack([angular, linear])
        mimic = getattr(joint, "mimic", None)
        if mimic is None:
            J[:, :, joint.velocity_start:joint.velocity_start + joint.num_velocities] += columns
        else:
            source, multiplier, _ = joint.mimic_chain()
            J[:, :, source.velocity_start:source.velocity_start + 1] += multiplier * columns
        body_index = joint.parent_body.index
    return J
