"""ros_dofkit.core.multibody.joints: the joint types of the plant and their kinematics.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy, ``core.spatial`` and
``multibody.bodies`` / ``errors``.

A joint connects a parent body P to a child body C through a frame F fixed on P (``frame_on_parent``, pose
``X_PF``) and a frame M fixed on C (``frame_on_child``, pose ``X_CM``); the joint sets ``X_FM(q)``, so
``X_WC = X_WP @ X_PF @ X_FM(q) @ inv(X_CM)`` (doc/architecture.md, "Joint frames").

Each joint type states, batched over leading axes of its coordinates:

* ``calc_X_FM(q_j)``: the pose of M in F, (..., 4, 4);
* ``calc_motion_subspace(q_j)``: ``H_FM_F`` (..., 6, nv_j) with ``V_FM_F = H_FM_F @ v_j``, where
  ``V_FM_F = [w_FM_F; v_FMo_F]`` is the spatial velocity of M in F (angular, then the velocity of Mo);
* ``calc_n_matrix(q_j)``: ``N`` (..., nq_j, nv_j) with ``q̇_j = N v_j``, and ``calc_n_plus_matrix`` its left inverse;
* ``integrate(q_j, dv_j)`` and ``difference(q0_j, q1_j)``, the exact inverse of each other.

Coordinate values live in a :class:`~ros_dofkit.core.multibody.bodies.MultibodyState`; the accessors that take a
Drake Context take a state here. A URDF mimic joint is a revolute or prismatic joint with ``mimic`` set: it has
no coordinates of its own (nq = nv = 0), its single motion value being ``multiplier * q[source] + offset``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import spatial
from .bodies import Body, Frame, MultibodyState, as_transform
from .errors import JointNotSupportedError, MultibodyIndexError, MultibodyValueError, PlantFinalizedError

#: How far (m) a transform handed to ``PlanarJoint.set_default_pose`` / ``set_pose`` may leave the joint plane
#: (|p_z|) before it is rejected (SPEC §9.3).
PLANAR_TRANSLATION_TOLERANCE = 1e-6
#: How far (rad) its z axis may tilt away from F's z axis before it is rejected (SPEC §9.3).
PLANAR_TILT_TOLERANCE = 1e-6


def _vector(values, size: int, what: str) -> np.ndarray:
    """A float copy of ``values`` checked to have ``size`` finite-or-infinite (not NaN) entries."""
    array = np.array(values, dtype=float).reshape(-1) if np.ndim(values) <= 1 else np.array(values, dtype=float)
    if array.shape != (size,):
        raise MultibodyValueError(f"{what}: expected {size} values, got shape {np.shape(values)}")
    if np.any(np.isnan(array)):
        raise MultibodyValueError(f"{what}: expected numbers, got NaN in {array.tolist()}")
    return array


def _unit_axis(axis, what: str) -> np.ndarray:
    axis = _vector(axis, 3, what)
    norm = float(np.linalg.norm(axis))
    if not np.all(np.isfinite(axis)) or norm < 1e-12:
        raise MultibodyValueError(f"{what}: expected a finite nonzero 3-vector, got {axis.tolist()}")
    return axis / norm


def _as_frame(frame, what: str) -> Frame:
    if isinstance(frame, Body):
        return frame.body_frame
    if not isinstance(frame, Frame):
        raise TypeError(f"{what}: expected a Frame or Body, got {type(frame).__name__}")
    return frame


class JointValues(np.ndarray):
    """Per-coordinate values of a joint (default positions, limits): a plain float array that can also be called.

    ros_dofkit exposes these as properties (``joint.default_positions``) where pydrake has methods
    (``joint.default_positions()``); calling the array returns a copy of it, so code ported from pydrake runs
    unchanged and both spellings give the same values.
    """

    def __call__(self) -> np.ndarray:
        return np.array(self, dtype=float)


def _joint_values(values: np.ndarray) -> JointValues:
    return np.array(values, dtype=float).view(JointValues)


@dataclass(frozen=True)
class Mimic:
    """URDF ``<mimic>``: this joint's value is ``multiplier * value(source) + offset`` (robot_state_publisher)."""

    source: Joint
    multiplier: float = 1.0
    offset: float = 0.0


class Joint:
    """Base class: a joint between ``frame_on_parent`` (F) and ``frame_on_child`` (M). Drake's ``Joint``.

    Subclasses set the class attributes ``TYPE_NAME`` (Drake ``kTypeName``), ``POSITION_SUFFIXES`` and
    ``VELOCITY_SUFFIXES``. ``index``, ``position_start`` and ``velocity_start`` are assigned by the plant
    (the starts at ``finalize()``; -1 for joints without coordinates).
    """

    TYPE_NAME = ""
    POSITION_SUFFIXES: tuple[str, ...] = ()
    VELOCITY_SUFFIXES: tuple[str, ...] = ()

    def __init__(self, name: str, frame_on_parent, frame_on_child, damping=None):
        if not isinstance(name, str) or not name:
            raise MultibodyValueError(f"a joint name must be a non-empty string, got {name!r}")
        self.name = name
        self.frame_on_parent = _as_frame(frame_on_parent, f"joint {name!r} frame_on_parent")
        self.frame_on_child = _as_frame(frame_on_child, f"joint {name!r} frame_on_child")
        if self.frame_on_parent.body is self.frame_on_child.body:
            raise MultibodyValueError(f"joint {name!r}: parent and child are the same body {self.parent_body.name!r}")
        self.index: int | None = None
        self.position_start = -1
        self.velocity_start = -1
        self._plant = None
        nq, nv = self.num_positions, self.num_velocities
        self._default_positions = self._zero_configuration()
        self._position_limits = (np.full(nq, -np.inf), np.full(nq, np.inf))
        self._velocity_limits = (np.full(nv, -np.inf), np.full(nv, np.inf))
        self._acceleration_limits = (np.full(nv, -np.inf), np.full(nv, np.inf))
        self._effort_limits = np.full(nv, np.inf)
        self._damping = self._check_damping(np.zeros(nv) if damping is None else damping)

    # ----- structure -------------------------------------------------------------------------------------
    @property
    def type_name(self) -> str:
        """Drake ``type_name()``."""
        return self.TYPE_NAME

    @property
    def num_positions(self) -> int:
        return len(self.POSITION_SUFFIXES)

    @property
    def num_velocities(self) -> int:
        return len(self.VELOCITY_SUFFIXES)

    @property
    def num_motion_dofs(self) -> int:
        """How many values ``calc_X_FM`` takes (1 for a mimic joint even though it has no coordinates)."""
        return len(self.POSITION_SUFFIXES)

    @property
    def position_suffixes(self) -> tuple[str, ...]:
        return self.POSITION_SUFFIXES if self.num_positions else ()

    @property
    def velocity_suffixes(self) -> tuple[str, ...]:
        return self.VELOCITY_SUFFIXES if self.num_velocities else ()

    def position_suffix(self, position_index_in_joint: int) -> str:
        """Drake ``position_suffix``; raises IndexError outside ``[0, num_positions)``."""
        return self._suffix(self.position_suffixes, position_index_in_joint, "position")

    def velocity_suffix(self, velocity_index_in_joint: int) -> str:
        """Drake ``velocity_suffix``; raises IndexError outside ``[0, num_velocities)``."""
        return self._suffix(self.velocity_suffixes, velocity_index_in_joint, "velocity")

    def _suffix(self, suffixes, i, kind) -> str:
        if not isinstance(i, (int, np.integer)) or not 0 <= i < len(suffixes):
            raise MultibodyIndexError(
                f"joint {self.name!r} ({self.type_name}): {kind} index must be in [0, {len(suffixes)}), got {i!r}"
            )
        return suffixes[i]

    @property
    def parent_body(self) -> Body:
        return self.frame_on_parent.body

    @property
    def child_body(self) -> Body:
        return self.frame_on_child.body

    @property
    def model_instance(self) -> int:
        return self.child_body.model_instance

    @property
    def X_PF(self) -> np.ndarray:
        """Pose of the joint frame F in the parent body P."""
        return self.frame_on_parent.X_BF

    @property
    def X_CM(self) -> np.ndarray:
        """Pose of the joint frame M in the child body C."""
        return self.frame_on_child.X_BF

    def can_rotate(self) -> bool:
        raise NotImplementedError

    def can_translate(self) -> bool:
        raise NotImplementedError

    def is_velocity_equal_to_qdot(self) -> bool:
        """True when v == q̇ for this joint (Drake's mobilizer ``is_velocity_equal_to_qdot``)."""
        return True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, parent={self.parent_body.name!r}, "
            f"child={self.child_body.name!r}, index={self.index})"
        )

    # ----- defaults, limits, damping ----------------------------------------------------------------------
    def _zero_configuration(self) -> np.ndarray:
        return np.zeros(self.num_positions)

    def _check_not_finalized(self, what: str) -> None:
        if self._plant is not None and self._plant.is_finalized():
            raise PlantFinalizedError(f"joint {self.name!r}: {what} must be called before the plant is finalized")

    @property
    def default_positions(self) -> JointValues:
        """Drake ``default_positions()``: a copy, (num_positions,); ``joint.default_positions()`` works too."""
        return _joint_values(self._default_positions)

    def set_default_positions(self, default_positions) -> None:
        """Drake ``set_default_positions``; size must be ``num_positions``. Limits are not enforced (as Drake)."""
        q = _vector(default_positions, self.num_positions, f"joint {self.name!r} default positions")
        if not np.all(np.isfinite(q)):
            raise MultibodyValueError(f"joint {self.name!r} default positions: expected finite values, got {q}")
        self._default_positions = q

    def _check_limits(self, lower, upper, size: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
        lower = _vector(lower, size, f"joint {self.name!r} {kind} lower limits")
        upper = _vector(upper, size, f"joint {self.name!r} {kind} upper limits")
        if np.any(lower > upper):
            raise MultibodyValueError(
                f"joint {self.name!r}: {kind} lower limits {lower.tolist()} exceed upper limits {upper.tolist()}"
            )
        return lower, upper

    def set_position_limits(self, lower_limits, upper_limits) -> None:
        """Drake ``set_position_limits``; never changes the default positions. Allowed after finalize (the plant
        reads limits when asked)."""
        self._position_limits = self._check_limits(lower_limits, upper_limits, self.num_positions, "position")

    def set_velocity_limits(self, lower_limits, upper_limits) -> None:
        """Drake ``set_velocity_limits``."""
        self._velocity_limits = self._check_limits(lower_limits, upper_limits, self.num_velocities, "velocity")

    def set_acceleration_limits(self, lower_limits, upper_limits) -> None:
        """Drake ``set_acceleration_limits``."""
        self._acceleration_limits = self._check_limits(
            lower_limits, upper_limits, self.num_velocities, "acceleration"
        )

    def set_effort_limits(self, effort_limits) -> None:
        """Magnitude of the generalized force per velocity (N or N·m; URDF ``<limit effort>``), each > 0 or inf.
        Drake keeps this on the JointActuator; it is kept on the joint too so unactuated URDF joints keep it.
        """
        limits = _vector(effort_limits, self.num_velocities, f"joint {self.name!r} effort limits")
        if np.any(limits <= 0.0):
            raise MultibodyValueError(f"joint {self.name!r}: effort limits must be > 0, got {limits.tolist()}")
        self._effort_limits = limits

    # Copies as JointValues, so that pydrake's method spelling (``joint.position_lower_limits()``) works as well.
    effort_limits = property(lambda self: _joint_values(self._effort_limits))
    position_lower_limits = property(lambda self: _joint_values(self._position_limits[0]))
    position_upper_limits = property(lambda self: _joint_values(self._position_limits[1]))
    velocity_lower_limits = property(lambda self: _joint_values(self._velocity_limits[0]))
    velocity_upper_limits = property(lambda self: _joint_values(self._velocity_limits[1]))
    acceleration_lower_limits = property(lambda self: _joint_values(self._acceleration_limits[0]))
    acceleration_upper_limits = property(lambda self: _joint_values(self._acceleration_limits[1]))

    def _check_damping(self, damping) -> np.ndarray:
        if np.ndim(damping) == 0:
            damping = np.full(self.num_velocities, float(damping))
        d = _vector(damping, self.num_velocities, f"joint {self.name!r} damping")
        if np.any(d < 0.0) or not np.all(np.isfinite(d)):
            raise MultibodyValueError(f"joint {self.name!r}: damping must be finite and >= 0, got {d.tolist()}")
        return d

    @property
    def damping(self) -> np.ndarray:
        """Default viscous damping per velocity (N·s/m translational, N·m·s rotational)."""
        return self._damping.copy()

    def default_damping_vector(self) -> np.ndarray:
        """Drake ``default_damping_vector``."""
        return self._damping.copy()

    def set_default_damping_vector(self, damping) -> None:
        """Drake ``set_default_damping_vector``: size num_velocities, entries >= 0, before the plant is finalized.
        Unlike Drake, a joint not yet added to a plant accepts it too (nothing here needs the plant)."""
        self._check_not_finalized("set_default_damping_vector")
        self._damping = self._check_damping(damping)

    def get_damping_vector(self, state: MultibodyState) -> np.ndarray:
        """Drake ``GetDampingVector(context)``: the damping stored in ``state`` (defaults when never set)."""
        return state.damping.get(self.index, self._damping).copy()

    def set_damping_vector(self, state: MultibodyState, damping) -> Joint:
        """Drake ``SetDampingVector(context, d)``: store damping in ``state``; size and sign are checked."""
        state.damping[self.index] = self._check_damping(damping)
        return self

    # ----- state access -----------------------------------------------------------------------------------
    def _q_slice(self, state: MultibodyState) -> slice:
        if self.position_start < 0 and self.num_positions:
            raise JointNotSupportedError(f"joint {self.name!r} has no coordinates yet: finalize the plant first")
        return slice(self.position_start, self.position_start + self.num_positions)

    def _v_slice(self, state: MultibodyState) -> slice:
        if self.velocity_start < 0 and self.num_velocities:
            raise JointNotSupportedError(f"joint {self.name!r} has no coordinates yet: finalize the plant first")
        return slice(self.velocity_start, self.velocity_start + self.num_velocities)

    def get_positions(self, state: MultibodyState) -> np.ndarray:
        return np.array(state.q[self._q_slice(state)])

    def set_positions(self, state: MultibodyState, q_joint) -> Joint:
        state.q[self._q_slice(state)] = _vector(q_joint, self.num_positions, f"joint {self.name!r} positions")
        return self

    def get_velocities(self, state: MultibodyState) -> np.ndarray:
        return np.array(state.v[self._v_slice(state)])

    def set_velocities(self, state: MultibodyState, v_joint) -> Joint:
        state.v[self._v_slice(state)] = _vector(v_joint, self.num_velocities, f"joint {self.name!r} velocities")
        return self

    def motion_positions(self, q) -> np.ndarray:
        """The values ``calc_X_FM`` needs, taken from a full q (..., nq): own coordinates or the mimic rule."""
        q = np.asarray(q, dtype=float)
        return q[..., self.position_start:self.position_start + self.num_positions]

    def motion_velocities(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        return v[..., self.velocity_start:self.velocity_start + self.num_velocities]

    def get_pose(self, state: MultibodyState) -> np.ndarray:
        """``X_FM`` at the state's positions (Drake ``GetPose``), 4x4."""
        return self.calc_X_FM(self.motion_positions(state.q))

    def get_spatial_velocity(self, state: MultibodyState) -> np.ndarray:
        """``V_FM_F = [w_FM_F; v_FMo_F]`` at the state (Drake ``GetSpatialVelocity``), shape (6,)."""
        H = self.calc_motion_subspace(self.motion_positions(state.q))
        return H @ self.motion_velocities(state.v)

    def get_default_pose(self) -> np.ndarray:
        """``X_FM`` at the default positions (Drake ``GetDefaultPose``)."""
        return self.calc_X_FM(self._default_positions)

    def set_default_pose(self, X_FM) -> None:
        """Drake ``SetDefaultPose``; only joints that can represent a general pose implement it."""
        raise JointNotSupportedError(f"set_default_pose(X_FM) is not implemented for joint type {self.type_name}")

    def set_pose(self, state: MultibodyState, X_FM) -> Joint:
        """Drake ``SetPose(context, X_FM)``; only joints that can represent a general pose implement it."""
        raise JointNotSupportedError(
            f"set_pose(state, X_FM) is not implemented by the {self.type_name} joint {self.name!r}"
        )

    def set_spatial_velocity(self, state: MultibodyState, V_FM_F) -> Joint:
        """Drake ``SetSpatialVelocity``; only the quaternion floating joint implements it."""
        raise JointNotSupportedError(
            f"set_spatial_velocity(state, V_FM) is not implemented by the {self.type_name} joint {self.name!r}"
        )

    def set_random_state(self, state: MultibodyState, generator: np.random.Generator) -> None:
        """Drake ``SetRandomState``: without a distribution, the default positions and zero velocity."""
        self.set_positions(state, self._default_positions)
        self.set_velocities(state, np.zeros(self.num_velocities))

    # ----- kinematics (overridden per type) ---------------------------------------------------------------
    def calc_X_FM(self, q_joint) -> np.ndarray:
        raise NotImplementedError

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        raise NotImplementedError

    def calc_n_matrix(self, q_joint) -> np.ndarray:
        """``N`` with ``q̇_j = N v_j`` (identity for joints with v == q̇)."""
        q_joint = np.asarray(q_joint, dtype=float)
        return np.broadcast_to(np.eye(self.num_positions), q_joint.shape[:-1] + (self.num_positions,) * 2).copy()

    def calc_n_plus_matrix(self, q_joint) -> np.ndarray:
        """``N⁺`` with ``v_j = N⁺ q̇_j``."""
        return self.calc_n_matrix(q_joint)

    def integrate(self, q_joint, dv_joint) -> np.ndarray:
        """``q_j ⊕ dv_j``."""
        return np.asarray(q_joint, dtype=float) + np.asarray(dv_joint, dtype=float)

    def difference(self, q0_joint, q1_joint) -> np.ndarray:
        """``dv_j`` with ``integrate(q0_j, dv_j) == q1_j``."""
        return np.asarray(q1_joint, dtype=float) - np.asarray(q0_joint, dtype=float)


class WeldJoint(Joint):
    """Zero-dof joint holding M at the fixed pose ``X_FM`` in F (Drake ``WeldJoint``; URDF ``fixed``)."""

    TYPE_NAME = "weld"

    def __init__(self, name: str, frame_on_parent, frame_on_child, X_FM=None):
        super().__init__(name, frame_on_parent, frame_on_child)
        self.X_FM = np.eye(4) if X_FM is None else as_transform(X_FM, f"X_FM of weld joint {name!r}")

    def can_rotate(self) -> bool:
        return False

    def can_translate(self) -> bool:
        return False

    def calc_X_FM(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        return np.broadcast_to(self.X_FM, q_joint.shape[:-1] + (4, 4)).copy()

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        return np.zeros(q_joint.shape[:-1] + (6, 0))


class _OneDofJoint(Joint):
    """Shared code of revolute and prismatic joints: a unit ``axis`` in F (equal in M), optional mimic."""

    def __init__(self, name, frame_on_parent, frame_on_child, axis, pos_lower_limit, pos_upper_limit, damping,
                 mimic: Mimic | None):
        self.axis = _unit_axis(axis, f"joint {name!r} axis")
        self.mimic = None
        if mimic is not None:
            self._check_mimic(name, mimic)
            self.mimic = mimic
        super().__init__(name, frame_on_parent, frame_on_child, damping)
        if self.num_positions:
            self.set_position_limits([pos_lower_limit], [pos_upper_limit])

    @staticmethod
    def _check_mimic(name: str, mimic: Mimic) -> None:
        if not isinstance(mimic, Mimic):
            raise TypeError(f"joint {name!r}: mimic must be a Mimic, got {type(mimic).__name__}")
        if not isinstance(mimic.source, _OneDofJoint):
            raise MultibodyValueError(
                f"joint {name!r} mimics {mimic.source.name!r} of type {mimic.source.type_name!r}; "
                "expected a revolute or prismatic source"
            )
        if not (math.isfinite(mimic.multiplier) and math.isfinite(mimic.offset)):
            raise MultibodyValueError(f"joint {name!r}: mimic multiplier and offset must be finite, got {mimic}")

    @property
    def num_positions(self) -> int:
        return 0 if getattr(self, "mimic", None) is not None else 1

    @property
    def num_velocities(self) -> int:
        return self.num_positions

    @property
    def num_motion_dofs(self) -> int:
        return 1

    def mimic_chain(self) -> tuple[Joint, float, float]:
        """The joint that owns the coordinate this joint follows, with the composed multiplier and offset.

        A mimic of a mimic follows the first non-mimic source: ``m2 * (m1 * q + o1) + o2``.
        """
        joint, multiplier, offset = self, 1.0, 0.0
        seen = set()
        while joint.mimic is not None:
            if id(joint) in seen:
                raise MultibodyValueError(f"joint {self.name!r}: mimic chain forms a cycle")
            seen.add(id(joint))
            m = joint.mimic
            multiplier, offset = multiplier * m.multiplier, multiplier * m.offset + offset
            joint = m.source
        return joint, multiplier, offset

    def motion_positions(self, q) -> np.ndarray:
        if self.mimic is None:
            return super().motion_positions(q)
        source, multiplier, offset = self.mimic_chain()
        return multiplier * source.motion_positions(q) + offset

    def motion_velocities(self, v) -> np.ndarray:
        if self.mimic is None:
            return super().motion_velocities(v)
        source, multiplier, _ = self.mimic_chain()
        return multiplier * source.motion_velocities(v)


class RevoluteJoint(_OneDofJoint):
    """Rotation by angle θ about the unit ``axis`` â of F (Drake ``RevoluteJoint``; URDF revolute/continuous).

    ``X_FM(θ) = (exp(θ [â]×), 0)``; ``V_FM_F = [â θ̇; 0]``.
    """

    TYPE_NAME = "revolute"
    POSITION_SUFFIXES = ("q",)
    VELOCITY_SUFFIXES = ("w",)

    def __init__(self, name: str, frame_on_parent, frame_on_child, axis, pos_lower_limit=-np.inf,
                 pos_upper_limit=np.inf, damping=0.0, mimic: Mimic | None = None):
        super().__init__(name, frame_on_parent, frame_on_child, axis, pos_lower_limit, pos_upper_limit, damping,
                         mimic)

    def can_rotate(self) -> bool:
        return True

    def can_translate(self) -> bool:
        return False

    def calc_X_FM(self, q_joint) -> np.ndarray:
        angle = np.asarray(q_joint, dtype=float)[..., 0]
        return spatial.make_transform(spatial.rotvec_to_matrix(angle[..., None] * self.axis))

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        H = np.zeros(q_joint.shape[:-1] + (6, 1))
        H[..., :3, 0] = self.axis
        return H

    def get_angle(self, state: MultibodyState) -> float:
        """Drake ``get_angle``."""
        return float(self.motion_positions(state.q)[0])

    def set_angle(self, state: MultibodyState, angle: float) -> RevoluteJoint:
        """Drake ``set_angle`` (not clamped)."""
        return self.set_positions(state, [angle])

    def get_angular_rate(self, state: MultibodyState) -> float:
        return float(self.motion_velocities(state.v)[0])

    def set_angular_rate(self, state: MultibodyState, rate: float) -> RevoluteJoint:
        return self.set_velocities(state, [rate])


class PrismaticJoint(_OneDofJoint):
    """Translation d along the unit ``axis`` â of F (Drake ``PrismaticJoint``; URDF prismatic).

    ``X_FM(d) = (I, d â)``; ``V_FM_F = [0; â ḋ]``.
    """

    TYPE_NAME = "prismatic"
    POSITION_SUFFIXES = ("x",)
    VELOCITY_SUFFIXES = ("v",)

    def __init__(self, name: str, frame_on_parent, frame_on_child, axis, pos_lower_limit=-np.inf,
                 pos_upper_limit=np.inf, damping=0.0, mimic: Mimic | None = None):
        super().__init__(name, frame_on_parent, frame_on_child, axis, pos_lower_limit, pos_upper_limit, damping,
                         mimic)

    def can_rotate(self) -> bool:
        return False

    def can_translate(self) -> bool:
        return True

    def calc_X_FM(self, q_joint) -> np.ndarray:
        d = np.asarray(q_joint, dtype=float)[..., 0]
        return spatial.make_transform(None, d[..., None] * self.axis)

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        H = np.zeros(q_joint.shape[:-1] + (6, 1))
        H[..., 3:, 0] = self.axis
        return H

    def get_translation(self, state: MultibodyState) -> float:
        """Drake ``get_translation``."""
        return float(self.motion_positions(state.q)[0])

    def set_translation(self, state: MultibodyState, translation: float) -> PrismaticJoint:
        """Drake ``set_translation`` (not clamped)."""
        return self.set_positions(state, [translation])

    def get_translation_rate(self, state: MultibodyState) -> float:
        return float(self.motion_velocities(state.v)[0])

    def set_translation_rate(self, state: MultibodyState, rate: float) -> PrismaticJoint:
        return self.set_velocities(state, [rate])


class PlanarJoint(Joint):
    """M translates in F's x-y plane and rotates about Fz = Mz (Drake ``PlanarJoint``, SPEC §2).

    ``q = (x, y, θ)``: ``X_FM(q) = (R_z(θ), [x, y, 0])``. ``v = q̇ = (ẋ, ẏ, θ̇)`` with the translational rates
    expressed in F, so ``V_FM_F = [0, 0, θ̇; ẋ, ẏ, 0]``. ``damping = [d_x, d_y, d_θ]`` (N·s/m, N·m·s), each >= 0.
    Values written to a state are neither clamped to the limits nor wrapped.

    Generic pose API (SPEC §2.5, §9.3): Drake's planar joint throws for SetDefaultPose / SetPose /
    SetSpatialVelocity. Here ``set_default_pose`` and ``set_pose`` also accept a full 4x4 ``X_FM`` and project it
    onto the plane (x = p_x, y = p_y, θ = atan2(R₁₀, R₀₀)), raising MultibodyValueError when it leaves the plane
    by more than PLANAR_TRANSLATION_TOLERANCE / PLANAR_TILT_TOLERANCE; ``get_pose``, ``get_default_pose`` and
    ``get_spatial_velocity`` work; ``set_spatial_velocity`` still raises JointNotSupportedError (use
    ``set_translational_velocity`` / ``set_angular_velocity``). Damping lives in the state
    (``get_damping_vector(state)`` / ``set_damping_vector(state, d)``) where Drake uses a Context parameter.
    """

    TYPE_NAME = "planar"
    POSITION_SUFFIXES = ("x", "y", "qz")
    VELOCITY_SUFFIXES = ("vx", "vy", "wz")

    def __init__(self, name: str, frame_on_parent, frame_on_child, damping=(0.0, 0.0, 0.0)):
        if np.ndim(damping) == 0:
            raise MultibodyValueError(f"planar joint {name!r}: damping must be a 3-vector, got {damping!r}")
        super().__init__(name, frame_on_parent, frame_on_child, damping)
        self._random_pose: tuple[Callable, Callable, Callable] | None = None

    def can_rotate(self) -> bool:
        return True

    def can_translate(self) -> bool:
        return True

    def default_damping(self) -> np.ndarray:
        """Drake ``default_damping()``: [d_x, d_y, d_θ]."""
        return self._damping.copy()

    # defaults
    def get_default_translation(self) -> np.ndarray:
        return self._default_positions[:2].copy()

    def set_default_translation(self, p_FoMo_F) -> None:
        """Sets (x, y), keeps θ. Out-of-limit values are accepted (as Drake)."""
        p = _vector(p_FoMo_F, 2, f"planar joint {self.name!r} default translation")
        self.set_default_positions([p[0], p[1], self._default_positions[2]])

    def get_default_rotation(self) -> float:
        return float(self._default_positions[2])

    def set_default_rotation(self, theta: float) -> None:
        """Sets θ, keeps (x, y)."""
        self.set_default_positions([self._default_positions[0], self._default_positions[1], float(theta)])

    def set_default_pose(self, p_FoMo_F_or_X_FM, theta: float | None = None) -> None:
        """Drake ``set_default_pose(p_FoMo_F, θ)``, or (SPEC §9.3) ``set_default_pose(X_FM)`` with a 4x4 transform.

        A transform is projected onto the joint plane: x = p_x, y = p_y, θ = atan2(R₁₀, R₀₀). It is rejected with
        MultibodyValueError when it leaves the plane: |p_z| > PLANAR_TRANSLATION_TOLERANCE (m) or the angle between
        Mz and Fz > PLANAR_TILT_TOLERANCE (rad). (Drake's generic SetDefaultPose throws for planar joints.)
        """
        self.set_default_positions(self._pose_to_positions(p_FoMo_F_or_X_FM, theta, "set_default_pose"))

    def _pose_to_positions(self, p_or_X, theta, what: str) -> np.ndarray:
        if theta is not None:
            p = _vector(p_or_X, 2, f"planar joint {self.name!r} {what} translation")
            return np.array([p[0], p[1], float(theta)])
        if np.shape(p_or_X) != (4, 4):
            raise MultibodyValueError(
                f"planar joint {self.name!r} {what}: expected (p_FoMo_F (2,), theta) or X_FM (4, 4), "
                f"got one argument of shape {np.shape(p_or_X)}"
            )
        return self.project_pose(p_or_X)

    def project_pose(self, X_FM) -> np.ndarray:
        """(x, y, θ) of a rigid transform that lies in the joint plane (SPEC §9.3); raises if it does not."""
        X = as_transform(X_FM, f"planar joint {self.name!r} X_FM")
        R, p = X[:3, :3], X[:3, 3]
        if abs(p[2]) > PLANAR_TRANSLATION_TOLERANCE:
            raise MultibodyValueError(
                f"planar joint {self.name!r}: X_FM leaves the joint plane; expected |p_z| <= "
                f"{PLANAR_TRANSLATION_TOLERANCE:g} m, got p_z = {p[2]:.6g} m"
            )
        tilt = math.atan2(math.hypot(R[0, 2], R[1, 2]), R[2, 2])  # angle between Mz and Fz, well conditioned
        if tilt > PLANAR_TILT_TOLERANCE:
            raise MultibodyValueError(
                f"planar joint {self.name!r}: X_FM tilts Mz away from Fz; expected at most "
                f"{PLANAR_TILT_TOLERANCE:g} rad, got {tilt:.6g} rad"
            )
        return np.array([p[0], p[1], math.atan2(R[1, 0], R[0, 0])])

    # state accessors
    def get_translation(self, state: MultibodyState) -> np.ndarray:
        """(x, y) = p_FoMo_F."""
        return self.get_positions(state)[:2]

    def set_translation(self, state: MultibodyState, p_FoMo_F) -> PlanarJoint:
        p = _vector(p_FoMo_F, 2, f"planar joint {self.name!r} translation")
        self._q_slice(state)
        state.q[self.position_start:self.position_start + 2] = p
        return self

    def get_rotation(self, state: MultibodyState) -> float:
        return float(state.q[self.position_start + 2])

    def set_rotation(self, state: MultibodyState, theta: float) -> PlanarJoint:
        self._q_slice(state)
        state.q[self.position_start + 2] = float(theta)
        return self

    def set_pose(self, state: MultibodyState, p_FoMo_F_or_X_FM, theta: float | None = None) -> PlanarJoint:
        """Drake ``set_pose(context, p_FoMo_F, θ)``; also accepts a 4x4 ``X_FM``, projected as in set_default_pose."""
        self._q_slice(state)
        return self.set_positions(state, self._pose_to_positions(p_FoMo_F_or_X_FM, theta, "set_pose"))

    def get_translational_velocity(self, state: MultibodyState) -> np.ndarray:
        """v_FoMo_F = (ẋ, ẏ)."""
        return self.get_velocities(state)[:2]

    def set_translational_velocity(self, state: MultibodyState, v_FoMo_F) -> PlanarJoint:
        v = _vector(v_FoMo_F, 2, f"planar joint {self.name!r} translational velocity")
        self._v_slice(state)
        state.v[self.velocity_start:self.velocity_start + 2] = v
        return self

    def get_angular_velocity(self, state: MultibodyState) -> float:
        return float(state.v[self.velocity_start + 2])

    def set_angular_velocity(self, state: MultibodyState, theta_dot: float) -> PlanarJoint:
        self._v_slice(state)
        state.v[self.velocity_start + 2] = float(theta_dot)
        return self

    # random state
    def set_random_pose_distribution(self, p_FoMo_F, theta) -> None:
        """Drake ``set_random_pose_distribution``: ``p_FoMo_F`` is two callables and ``theta`` one callable, each
        mapping a ``numpy.random.Generator`` to a float (e.g. ``lambda g: g.uniform() + 1``); every
        ``set_random_state`` draws a fresh sample. The velocity stays zero.
        """
        if len(p_FoMo_F) != 2:
            raise MultibodyValueError(
                f"planar joint {self.name!r}: expected two callables for (x, y), got {len(p_FoMo_F)}"
            )
        for f in (*p_FoMo_F, theta):
            if not callable(f):
                raise TypeError(f"planar joint {self.name!r}: distribution entries must be callable, got {f!r}")
        self._random_pose = (p_FoMo_F[0], p_FoMo_F[1], theta)

    def set_random_state(self, state: MultibodyState, generator: np.random.Generator) -> None:
        if self._random_pose is None:
            super().set_random_state(state, generator)
            return
        self.set_positions(state, [float(f(generator)) for f in self._random_pose])
        self.set_velocities(state, np.zeros(3))

    # kinematics
    def calc_X_FM(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        p = np.concatenate([q_joint[..., :2], np.zeros(q_joint.shape[:-1] + (1,))], axis=-1)
        return spatial.make_transform(spatial.rotation_z(q_joint[..., 2]), p)

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        H = np.zeros(q_joint.shape[:-1] + (6, 3))
        H[..., 2, 2] = 1.0
        H[..., 3, 0] = 1.0
        H[..., 4, 1] = 1.0
        return H


class QuaternionFloatingJoint(Joint):
    """Free motion of M in F (Drake ``QuaternionFloatingJoint``; URDF ``floating``).

    ``q = [qw, qx, qy, qz, x, y, z]`` (q_FM, p_FoMo_F); ``v = [w_FM_F, v_FMo_F]`` (6). The quaternion is
    normalized when used, so ``X_FM = (R(q/|q|), p)``, if it is within ``spatial.QUAT_NORM_TOLERANCE`` of unit
    length (else QuaternionError, as in the plant's kinematics).
    v != q̇: ``q̇_quat = ½ (0, w_FM_F) ⊗ q_FM`` and ``ṗ = v``.
    ``integrate`` composes ``exp(dω) ⊗ q_FM`` with dω expressed in F.
    """

    TYPE_NAME = "quaternion_floating"
    POSITION_SUFFIXES = ("qw", "qx", "qy", "qz", "x", "y", "z")
    VELOCITY_SUFFIXES = ("wx", "wy", "wz", "vx", "vy", "vz")

    def __init__(self, name: str, frame_on_parent, frame_on_child, angular_damping: float = 0.0,
                 translational_damping: float = 0.0):
        angular_damping, translational_damping = float(angular_damping), float(translational_damping)
        super().__init__(name, frame_on_parent, frame_on_child,
                         [angular_damping] * 3 + [translational_damping] * 3)

    def _zero_configuration(self) -> np.ndarray:
        return np.array([1.0, 0, 0, 0, 0, 0, 0])

    def set_default_positions(self, default_positions) -> None:
        q = _vector(default_positions, 7, f"joint {self.name!r} default positions")
        q[:4] = spatial.quat_normalize(q[:4])
        super().set_default_positions(q)

    def can_rotate(self) -> bool:
        return True

    def can_translate(self) -> bool:
        return True

    def is_velocity_equal_to_qdot(self) -> bool:
        return False

    def set_default_pose(self, X_FM) -> None:
        """Drake ``SetDefaultPose``."""
        self.set_default_positions(self._pose_positions(X_FM))

    def _pose_positions(self, X_FM) -> np.ndarray:
        X = as_transform(X_FM, f"joint {self.name!r} X_FM")
        return np.concatenate([spatial.matrix_to_quat(X[:3, :3]), X[:3, 3]])

    def get_quaternion(self, state: MultibodyState) -> np.ndarray:
        """q_FM (w, x, y, z) as stored."""
        return self.get_positions(state)[:4]

    def set_quaternion(self, state: MultibodyState, q_FM) -> QuaternionFloatingJoint:
        """Stores q_FM normalized (a zero or far-from-unit quaternion raises QuaternionError)."""
        self._q_slice(state)
        state.q[self.position_start:self.position_start + 4] = spatial.quat_normalize(q_FM)
        return self

    def get_translation(self, state: MultibodyState) -> np.ndarray:
        """p_FoMo_F."""
        return self.get_positions(state)[4:]

    def set_translation(self, state: MultibodyState, p_FoMo_F) -> QuaternionFloatingJoint:
        self._q_slice(state)
        state.q[self.position_start + 4:self.position_start + 7] = _vector(p_FoMo_F, 3, "p_FoMo_F")
        return self

    def set_pose(self, state: MultibodyState, X_FM) -> QuaternionFloatingJoint:
        """Drake ``SetPose(context, X_FM)``."""
        self._q_slice(state)
        return self.set_positions(state, self._pose_positions(X_FM))

    def get_angular_velocity(self, state: MultibodyState) -> np.ndarray:
        """w_FM_F."""
        return self.get_velocities(state)[:3]

    def set_angular_velocity(self, state: MultibodyState, w_FM_F) -> QuaternionFloatingJoint:
        self._v_slice(state)
        state.v[self.velocity_start:self.velocity_start + 3] = _vector(w_FM_F, 3, "w_FM_F")
        return self

    def get_translational_velocity(self, state: MultibodyState) -> np.ndarray:
        """v_FMo_F."""
        return self.get_velocities(state)[3:]

    def set_translational_velocity(self, state: MultibodyState, v_FMo_F) -> QuaternionFloatingJoint:
        self._v_slice(state)
        state.v[self.velocity_start + 3:self.velocity_start + 6] = _vector(v_FMo_F, 3, "v_FMo_F")
        return self

    def set_spatial_velocity(self, state: MultibodyState, V_FM_F) -> QuaternionFloatingJoint:
        """Drake ``SetSpatialVelocity``: v = [w_FM_F; v_FMo_F]."""
        return self.set_velocities(state, V_FM_F)

    def calc_X_FM(self, q_joint) -> np.ndarray:
        """``(R(quat/|quat|), p)``; the quaternion rule of the plant's kinematics (``spatial.quat_normalize``)."""
        q_joint = np.asarray(q_joint, dtype=float)
        try:
            quat = spatial.quat_normalize(q_joint[..., :4])
        except spatial.QuaternionError as error:
            raise spatial.QuaternionError(f"floating joint {self.name!r}: {error}") from error
        return spatial.make_transform(spatial.quat_to_matrix(quat), q_joint[..., 4:7])

    def calc_motion_subspace(self, q_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        return np.broadcast_to(np.eye(6), q_joint.shape[:-1] + (6, 6)).copy()

    def calc_n_matrix(self, q_joint) -> np.ndarray:
        """``N = [[½ E(q), 0], [0, I]]`` with ``E(q) = [-u^T; w I - [u]×]`` for q = (w, u)."""
        q_joint = np.asarray(q_joint, dtype=float)
        w, u = q_joint[..., :1], q_joint[..., 1:4]
        N = np.zeros(q_joint.shape[:-1] + (7, 6))
        N[..., 0, :3] = -0.5 * u
        N[..., 1:4, :3] = 0.5 * (w[..., None] * np.eye(3) - spatial.skew(u))
        N[..., 4:, 3:] = np.eye(3)
        return N

    def calc_n_plus_matrix(self, q_joint) -> np.ndarray:
        """``N⁺ = [[2 (-u, w I + [u]×), 0], [0, I]]``; ``N⁺ N = I`` for a unit quaternion."""
        q_joint = np.asarray(q_joint, dtype=float)
        w, u = q_joint[..., :1], q_joint[..., 1:4]
        Np = np.zeros(q_joint.shape[:-1] + (6, 7))
        Np[..., :3, 0] = -2.0 * u
        Np[..., :3, 1:4] = 2.0 * (w[..., None] * np.eye(3) + spatial.skew(u))
        Np[..., 3:, 4:] = np.eye(3)
        return Np

    def integrate(self, q_joint, dv_joint) -> np.ndarray:
        q_joint = np.asarray(q_joint, dtype=float)
        dv_joint = np.asarray(dv_joint, dtype=float)
        quat = spatial.quat_multiply(spatial.rotvec_to_quat(dv_joint[..., :3]), q_joint[..., :4])
        return np.concatenate([quat, q_joint[..., 4:7] + dv_joint[..., 3:6]], axis=-1)

    def difference(self, q0_joint, q1_joint) -> np.ndarray:
        q0_joint = np.asarray(q0_joint, dtype=float)
        q1_joint = np.asarray(q1_joint, dtype=float)
        dq = spatial.quat_multiply(q1_joint[..., :4], spatial.quat_conjugate(q0_joint[..., :4]))
        return np.concatenate([spatial.quat_to_rotvec(dq), q1_joint[..., 4:7] - q0_joint[..., 4:7]], axis=-1)
