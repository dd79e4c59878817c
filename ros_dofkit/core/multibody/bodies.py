"""ros_dofkit.core.multibody.bodies: bodies, frames fixed on bodies, joint actuators and the plant state.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy and ``multibody.errors`` only.

These are plain records owned by a :class:`~ros_dofkit.core.multibody.plant.MultibodyPlant`; the plant creates
them (``add_body``, ``add_frame``, ``add_joint_actuator``, ``create_default_state``) and assigns their indices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import MultibodyValueError


def as_transform(X, what: str) -> np.ndarray:
    """Validate a 4x4 homogeneous rigid transform and return it as a float64 copy.

    Raises MultibodyValueError when the shape is not (4, 4), an entry is not finite, the last row is not
    [0, 0, 0, 1] or the rotation block is not orthonormal with determinant +1 (tolerance 1e-6).
    """
    X = np.array(X, dtype=float)
    if X.shape != (4, 4):
        raise MultibodyValueError(f"{what}: expected a 4x4 homogeneous transform, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise MultibodyValueError(f"{what}: expected finite entries, got {X.tolist()}")
    if not np.allclose(X[3], [0.0, 0.0, 0.0, 1.0], atol=1e-12):
        raise MultibodyValueError(f"{what}: expected last row [0, 0, 0, 1], got {X[3].tolist()}")
    R = X[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0.0:
        raise MultibodyValueError(f"{what}: the 3x3 block is not a proper rotation (R^T R != I or det < 0)")
    return X


class Frame:
    """A frame F fixed on a body B at pose ``X_BF`` (Drake's FixedOffsetFrame; a body frame has X_BF = I).

    ``index`` is the frame's place in the plant's frame list: body frames come first (frame i is the frame of
    body i), other frames follow in the order added; it is assigned by ``MultibodyPlant.finalize()`` for frames
    that are not body frames (None before).
    """

    def __init__(self, name: str, body: Body, X_BF=None):
        if not isinstance(name, str) or not name:
            raise MultibodyValueError(f"a frame name must be a non-empty string, got {name!r}")
        self.name = name
        self.body = body
        self.X_BF = np.eye(4) if X_BF is None else as_transform(X_BF, f"X_BF of frame {name!r}")
        self.index: int | None = None

    @property
    def model_instance(self) -> int:
        return self.body.model_instance

    def is_body_frame(self) -> bool:
        return self.body.body_frame is self

    def __repr__(self) -> str:
        return f"Frame(name={self.name!r}, body={self.body.name!r}, index={self.index})"


class Body:
    """A rigid body (Drake's RigidBody, a URDF link). Only kinematics matter here, so there is no inertia.

    ``index`` is the BodyIndex (0 is the world); ``body_frame`` is the frame B of the body itself.
    """

    def __init__(self, name: str, model_instance: int, index: int):
        if not isinstance(name, str) or not name:
            raise MultibodyValueError(f"a body name must be a non-empty string, got {name!r}")
        self.name = name
        self.model_instance = model_instance
        self.index = index
        self.body_frame = Frame(name, self)
        self.body_frame.index = index

    def __repr__(self) -> str:
        return f"Body(name={self.name!r}, index={self.index}, model_instance={self.model_instance})"


class JointActuator:
    """An actuator driving one joint (Drake's JointActuator; a URDF ``<transmission>`` with one joint).

    ``effort_limit`` is in N or N·m, +inf when unknown.
    """

    def __init__(self, name: str, joint, index: int, effort_limit: float = math.inf):
        if not isinstance(name, str) or not name:
            raise MultibodyValueError(f"an actuator name must be a non-empty string, got {name!r}")
        effort_limit = float(effort_limit)
        if math.isnan(effort_limit) or effort_limit <= 0.0:
            raise MultibodyValueError(f"actuator {name!r}: expected a positive effort limit, got {effort_limit}")
        if joint.num_velocities != 1:
            raise MultibodyValueError(
                f"actuator {name!r}: expected a joint with one velocity, joint {joint.name!r} of type "
                f"{joint.type_name!r} has {joint.num_velocities}"
            )
        self.name = name
        self.joint = joint
        self.index = index
        self.effort_limit = effort_limit

    @property
    def model_instance(self) -> int:
        return self.joint.model_instance

    def __repr__(self) -> str:
        return f"JointActuator(name={self.name!r}, joint={self.joint.name!r}, index={self.index})"


@dataclass
class MultibodyState:
    """What Drake keeps in a Context for kinematics: positions ``q`` (nq,), velocities ``v`` (nv,) and the
    per-joint damping parameters (``damping[joint_index]``, one coefficient per joint velocity).

    Made by ``MultibodyPlant.create_default_state()`` (Drake's CreateDefaultContext); the arrays are mutable.
    """

    q: np.ndarray
    v: np.ndarray
    damping: dict[int, np.ndarray] = field(default_factory=dict)

    def copy(self) -> MultibodyState:
        return MultibodyState(self.q.copy(), self.v.copy(), {k: d.copy() for k, d in self.damping.items()})
