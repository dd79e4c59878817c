"""ros_dofkit.core.multibody.plant: MultibodyPlant, a kinematic model of one or more robots (Drake's
MultibodyPlant, kinematics only), and ArticulatedView, the plant seen through its v == q̇ coordinates.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy, ``core.spatial`` and the other
``multibody`` modules.

Build (add_model_instance / add_urdf / add_body / add_joint / add_frame / add_joint_actuator), then finalize()
to assign generalized coordinates and freeze; then query and compute kinematics. The contract with the other
modules is doc/architecture.md, "The plant".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import spatial
from .bodies import Body, Frame, JointActuator, MultibodyState
from .errors import (
    AmbiguousNameError,
    MultibodyIndexError,
    MultibodyValueError,
    PlantFinalizedError,
    PlantNotFinalizedError,
    TopologyError,
    UnknownNameError,
)
from .joints import Joint, QuaternionFloatingJoint
from .tree import JOINT_TYPE_CODES, KinematicTree, tree_jacobian, tree_kinematics
from .urdf import add_urdf_to_plant

WORLD_MODEL_INSTANCE = 0
WORLD_BODY_NAME = "world"


class MultibodyPlant:
    """Model instances of bodies connected by joints into a tree rooted at the world body (body 0).

    Model instance 0 is ``"world"``; user instances are numbered from 1 in the order added. Generalized
    coordinates are assigned at :meth:`finalize`: instances in the order added, inside an instance joints in
    parent-before-child order (URDF order for URDF models). ``q`` arguments of kinematics functions have shape
    ``(nq,)`` or ``(..., nq)``; results carry the same leading axes. In the kinematics (poses, Jacobians, spatial
    velocities) a floating joint's quaternion is normalized when ``| |quat| - 1 | <= spatial.QUAT_NORM_TOLERANCE``
    (1e-3, the rule of ``core.state`` and the node's IMU input, SPEC 9.7); a zero, non-finite or farther quaternion
    raises ``spatial.QuaternionError`` (a ValueError) naming the joint and the batch index.
    """

    def __init__(self, name: str = "plant"):
        self.name = str(name)
        self._instance_names: list[str] = ["world"]
        self._bodies: list[Body] = [Body(WORLD_BODY_NAME, WORLD_MODEL_INSTANCE, 0)]
        self._joints: list[Joint] = []
        self._extra_frames: list[Frame] = []
        self._actuators: list[JointActuator] = []
        self._inboard: dict[int, Joint] = {}
        self._finalized = False
        self._tree: KinematicTree | None = None
        self._tree_floating_q = np.zeros((0, 4), dtype=np.int64)  # q indices of each floating quaternion
        self._nq = 0
        self._nv = 0

    def __repr__(self) -> str:
        return (
            f"MultibodyPlant(name={self.name!r}, model_instances={self._instance_names}, "
            f"bodies={len(self._bodies)}, joints={len(self._joints)}, finalized={self._finalized})"
        )

    # ----- building ---------------------------------------------------------------------------------------
    def _check_building(self, what: str) -> None:
        if self._finalized:
            raise PlantFinalizedError(f"plant {self.name!r}: {what} is not allowed after finalize()")

    def _check_finalized(self, what: str) -> None:
        if not self._finalized:
            raise PlantNotFinalizedError(f"plant {self.name!r}: {what} needs a finalized plant; call finalize() first")

    def add_model_instance(self, name: str) -> int:
        """Drake ``AddModelInstance``; names are unique. Returns the ModelInstanceIndex."""
        self._check_building("add_model_instance")
        if not isinstance(name, str) or not name:
            raise MultibodyValueError(f"a model instance name must be a non-empty string, got {name!r}")
        if name in self._instance_names:
            raise MultibodyValueError(
                f"plant {self.name!r} already has a model instance named {name!r} "
                f"(index {self._instance_names.index(name)})"
            )
        self._instance_names.append(name)
        return len(self._instance_names) - 1

    def add_urdf(self, urdf, model_name: str | None = None, base_joint: str | None = "fixed",
                 parent_frame="world", X_PF=None) -> int:
        """Parse a URDF (file path, or an XML string starting with "<") into a new model instance.

        ``base_joint`` attaches the URDF's root link to ``parent_frame`` (a Frame, Body or frame name) at ``X_PF``:
        ``"fixed"`` (weld), ``"planar"`` or ``"floating"`` (quaternion floating), or None to keep what the URDF
        says (its root welded, unless it has a ``world`` link, whose joints then attach to ``parent_frame``); on a
        URDF with a ``world`` link, "planar" and "floating" replace the URDF's one world joint.
        ``model_name`` defaults to the robot's name. Returns the model instance index. See ``urdf.py``.
        """
        return add_urdf_to_plant(self, urdf, model_name=model_name, base_joint=base_joint,
                                 parent_frame=parent_frame, X_PF=X_PF)

    def add_body(self, name: str, model_instance) -> Body:
        """Drake ``AddRigidBody``; the name is unique inside its model instance."""
        self._check_building("add_body")
        instance = self._instance_index(model_instance)
        if instance == WORLD_MODEL_INSTANCE:
            raise MultibodyValueError("bodies cannot be added to the world model instance (0)")
        if any(b.name == name and b.model_instance == instance for b in self._bodies):
            raise MultibodyValueError(f"model instance {self._instance_names[instance]!r} already has a body {name!r}")
        body = Body(name, instance, len(self._bodies))
        self._bodies.append(body)
        return body

    def _check_own_frame(self, frame: Frame, what: str) -> None:
        body = frame.body
        if not (0 <= body.index < len(self._bodies) and self._bodies[body.index] is body):
            raise MultibodyValueError(f"{what}: frame {frame.name!r} is on body {body.name!r} of another plant")
        if not frame.is_body_frame() and not any(f is frame for f in self._extra_frames):
            self._register_frame(frame)

    def _register_frame(self, frame: Frame) -> None:
        instance = frame.body.model_instance
        for other in self._all_frames():
            if other.name == frame.name and other.model_instance == instance:
                raise MultibodyValueError(
                    f"model instance {self._instance_names[instance]!r} already has a frame named {frame.name!r}"
                )
        self._extra_frames.append(frame)

    def add_frame(self, name: str, body, X_BF=None) -> Frame:
        """Drake ``AddFrame(FixedOffsetFrame)``: a frame fixed on ``body`` (Body, body index or name) at X_BF."""
        self._check_building("add_frame")
        body = self._as_body(body)
        frame = Frame(name, body, X_BF)
        self._register_frame(frame)
        return frame

    def add_joint(self, joint: Joint) -> Joint:
        """Drake ``AddJoint``. The child body must not have an inboard joint yet; names are unique per instance."""
        self._check_building("add_joint")
        if not isinstance(joint, Joint):
            raise TypeError(f"add_joint expects a Joint, got {type(joint).__name__}")
        if joint._plant is not None:
            raise MultibodyValueError(f"joint {joint.name!r} already belongs to a plant")
        self._check_own_frame(joint.frame_on_parent, f"joint {joint.name!r}")
        self._check_own_frame(joint.frame_on_child, f"joint {joint.name!r}")
        child = joint.child_body
        if child.index == 0:
            raise TopologyError(f"joint {joint.name!r}: the world body cannot be a child")
        if child.index in self._inboard:
            raise TopologyError(
                f"joint {joint.name!r}: body {child.name!r} already has the inboard joint "
                f"{self._inboard[child.index].name!r}; a body has exactly one parent"
            )
        if any(j.name == joint.name and j.model_instance == joint.model_instance for j in self._joints):
            raise MultibodyValueError(
                f"model instance {self._instance_names[joint.model_instance]!r} already has a joint {joint.name!r}"
            )
        joint.index = len(self._joints)
        joint._plant = self
        self._joints.append(joint)
        self._inboard[child.index] = joint
        return joint

    def add_joint_actuator(self, name: str, joint, effort_limit: float = math.inf) -> JointActuator:
        """Drake ``AddJointActuator``: an actuator on a one-velocity joint; names unique per instance."""
        self._check_building("add_joint_actuator")
        joint = joint if isinstance(joint, Joint) else self.get_joint_by_name(joint)
        if any(a.name == name and a.model_instance == joint.model_instance for a in self._actuators):
            raise MultibodyValueError(f"an actuator named {name!r} already exists in that model instance")
        actuator = JointActuator(name, joint, len(self._actuators), effort_limit)
        self._actuators.append(actuator)
        return actuator

    def finalize(self) -> None:
        """Drake ``Finalize``: free bodies get a quaternion floating joint to the world (named after the body),
        the topology is checked (each body's parent has a smaller index), coordinates are assigned, frames are
        numbered and ``tree`` is built. Building afterwards raises PlantFinalizedError.
        """
        self._check_building("finalize")
        for body in self._bodies[1:]:
            if body.index not in self._inboard:
                self.add_joint(QuaternionFloatingJoint(body.name, self._bodies[0], body))
        for joint in self._joints:
            if getattr(joint, "mimic", None) is not None and joint.mimic_chain()[0]._plant is not self:
                raise TopologyError(
                    f"joint {joint.name!r} mimics {joint.mimic.source.name!r}, which is not in this plant"
                )
            if joint.parent_body.index >= joint.child_body.index:
                raise TopologyError(
                    f"joint {joint.name!r}: parent body {joint.parent_body.name!r} (index {joint.parent_body.index})"
                    f" must be added before child body {joint.child_body.name!r} (index {joint.child_body.index})"
                )
        q_start = v_start = 0
        for instance in range(len(self._instance_names)):
            for joint in sorted(self._joints_of(instance), key=lambda j: j.child_body.index):
                if joint.num_positions:
                    joint.position_start, joint.velocity_start = q_start, v_start
                    q_start += joint.num_positions
                    v_start += joint.num_velocities
        self._nq, self._nv = q_start, v_start
        for k, frame in enumerate(self._extra_frames):
            frame.index = len(self._bodies) + k
        self._finalized = True
        self._tree = self._build_tree()
        self._tree_floating_q = np.array(
            [np.arange(j.position_start, j.position_start + 4) for j in self.floating_base_joints()], dtype=np.int64
        ).reshape(-1, 4)

    def is_finalized(self) -> bool:
        return self._finalized

    def _build_tree(self) -> KinematicTree:
        nb = len(self._bodies)
        parent = np.full(nb, -1)
        joint_type = np.zeros(nb)
        X_PF = np.tile(np.eye(4), (nb, 1, 1))
        X_MC = np.tile(np.eye(4), (nb, 1, 1))
        axis = np.zeros((nb, 3))
        q_start, v_start = np.full(nb, -1), np.full(nb, -1)
        mimic_q, mimic_v = np.full(nb, -1), np.full(nb, -1)
        mimic_multiplier, mimic_offset = np.ones(nb), np.zeros(nb)
        for b in range(1, nb):
            joint = self._inboard[b]
            parent[b] = joint.parent_body.index
            joint_type[b] = JOINT_TYPE_CODES[joint.type_name]
            X_PF[b] = joint.X_PF @ joint.X_FM if joint.type_name == "weld" else joint.X_PF
            X_MC[b] = spatial.invert_transform(joint.X_CM)
            if hasattr(joint, "axis"):
                axis[b] = joint.axis
            if joint.num_positions:
                q_start[b], v_start[b] = joint.position_start, joint.velocity_start
            if getattr(joint, "mimic", None) is not None:
                source, multiplier, offset = joint.mimic_chain()
                mimic_q[b], mimic_v[b] = source.position_start, source.velocity_start
                mimic_multiplier[b], mimic_offset[b] = multiplier, offset
        frames = self._all_frames()
        return KinematicTree(
            num_bodies=nb, nq=self._nq, nv=self._nv, num_frames=len(frames), parent=parent, joint_type=joint_type,
            X_PF=X_PF, X_MC=X_MC, axis=axis, q_start=q_start, v_start=v_start, mimic_q=mimic_q, mimic_v=mimic_v,
            mimic_multiplier=mimic_multiplier, mimic_offset=mimic_offset,
            frame_body=np.array([f.body.index for f in frames]), X_BF=np.array([f.X_BF for f in frames]),
        )

    @property
    def tree(self) -> KinematicTree:
        """The flat-array tree (see KinematicTree); available after finalize()."""
        self._check_finalized("tree")
        return self._tree

    # ----- model instances, bodies, joints, frames --------------------------------------------------------
    def num_model_instances(self) -> int:
        return len(self._instance_names)

    def get_model_instance_by_name(self, name: str) -> int:
        """Drake ``GetModelInstanceByName``; unknown names raise UnknownNameError listing near matches."""
        if name not in self._instance_names:
            raise UnknownNameError("model instance", name, self._instance_names, f"plant {self.name!r}")
        return self._instance_names.index(name)

    def get_model_instance_name(self, model_instance: int) -> str:
        return self._instance_names[self._instance_index(model_instance)]

    def has_model_instance_named(self, name: str) -> bool:
        return name in self._instance_names

    def _instance_index(self, model_instance) -> int:
        if isinstance(model_instance, str):
            return self.get_model_instance_by_name(model_instance)
        if not isinstance(model_instance, (int, np.integer)) or isinstance(model_instance, bool):
            raise TypeError(f"model_instance must be an int index or a name, got {type(model_instance).__name__}")
        if not 0 <= model_instance < len(self._instance_names):
            raise MultibodyIndexError(
                f"model instance index must be in [0, {len(self._instance_names)}), got {model_instance}"
            )
        return int(model_instance)

    def num_bodies(self) -> int:
        return len(self._bodies)

    def num_joints(self) -> int:
        return len(self._joints)

    def num_frames(self) -> int:
        return len(self._bodies) + len(self._extra_frames)

    def _all_frames(self) -> list[Frame]:
        return [b.body_frame for b in self._bodies] + self._extra_frames

    def get_body(self, body_index: int) -> Body:
        if not isinstance(body_index, (int, np.integer)) or isinstance(body_index, bool):
            raise TypeError(f"body index must be an int, got {type(body_index).__name__}")
        if not 0 <= body_index < len(self._bodies):
            raise MultibodyIndexError(f"body index must be in [0, {len(self._bodies)}), got {body_index}")
        return self._bodies[body_index]

    def get_joint(self, joint_index: int) -> Joint:
        if not isinstance(joint_index, (int, np.integer)) or not 0 <= joint_index < len(self._joints):
            raise MultibodyIndexError(f"joint index must be in [0, {len(self._joints)}), got {joint_index!r}")
        return self._joints[joint_index]

    def get_frame(self, frame_index: int) -> Frame:
        frames = self._all_frames()
        if not 0 <= frame_index < len(frames):
            raise MultibodyIndexError(f"frame index must be in [0, {len(frames)}), got {frame_index}")
        return frames[frame_index]

    def _lookup(self, kind: str, elements, name: str, model_instance):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a string, got {type(name).__name__}")
        where = f"plant {self.name!r}"
        if model_instance is not None:
            instance = self._instance_index(model_instance)
            elements = [e for e in elements if e.model_instance == instance]
            where = f"model instance {self._instance_names[instance]!r}"
        matches = [e for e in elements if e.name == name]
        if not matches:
            raise UnknownNameError(kind, name, [e.name for e in elements], where)
        if len(matches) > 1:
            owners = ", ".join(repr(self._instance_names[e.model_instance]) for e in matches)
            raise AmbiguousNameError(
                f"{kind} name {name!r} exists in model instances {owners}; pass model_instance to choose one"
            )
        return matches[0]

    def get_body_by_name(self, name: str, model_instance=None) -> Body:
        """Drake ``GetBodyByName``; ``model_instance`` (index or name) is needed only if the name is ambiguous."""
        return self._lookup("body", self._bodies, name, model_instance)

    def get_joint_by_name(self, name: str, model_instance=None) -> Joint:
        """Drake ``GetJointByName``."""
        return self._lookup("joint", self._joints, name, model_instance)

    def get_frame_by_name(self, name: str, model_instance=None) -> Frame:
        """Drake ``GetFrameByName``; body frames carry their body's name."""
        return self._lookup("frame", self._all_frames(), name, model_instance)

    def has_body_named(self, name: str, model_instance=None) -> bool:
        return self._has(self._bodies, name, model_instance)

    def has_joint_named(self, name: str, model_instance=None) -> bool:
        return self._has(self._joints, name, model_instance)

    def has_frame_named(self, name: str, model_instance=None) -> bool:
        return self._has(self._all_frames(), name, model_instance)

    def _has(self, elements, name, model_instance) -> bool:
        instance = None if model_instance is None else self._instance_index(model_instance)
        return any(e.name == name and (instance is None or e.model_instance == instance) for e in elements)

    def _joints_of(self, instance: int) -> list[Joint]:
        return [j for j in self._joints if j.model_instance == instance]

    def get_joint_indices(self, model_instance=None) -> list[int]:
        """Drake ``GetJointIndices``: all joints, or those of one model instance, in increasing order."""
        if model_instance is None:
            return [j.index for j in self._joints]
        return [j.index for j in self._joints_of(self._instance_index(model_instance))]

    def get_body_indices(self, model_instance) -> list[int]:
        """Drake ``GetBodyIndices``."""
        instance = self._instance_index(model_instance)
        return [b.index for b in self._bodies if b.model_instance == instance]

    def _inboard_joint(self, body_index: int) -> Joint:
        return self._inboard[body_index]

    def get_inboard_joint(self, body) -> Joint | None:
        """The joint whose child is ``body`` (None for the world)."""
        return self._inboard.get(self._as_body(body).index)

    def _as_body(self, body) -> Body:
        if isinstance(body, Body):
            if not (0 <= body.index < len(self._bodies) and self._bodies[body.index] is body):
                raise MultibodyValueError(f"body {body.name!r} does not belong to plant {self.name!r}")
            return body
        if isinstance(body, str):
            return self.get_body_by_name(body)
        if isinstance(body, (int, np.integer)):
            return self.get_body(int(body))
        raise TypeError(f"expected a Body, body index or body name, got {type(body).__name__}")

    def _as_frame(self, frame) -> Frame:
        if isinstance(frame, Frame):
            self._as_body(frame.body)
            return frame
        if isinstance(frame, Body):
            return self._as_body(frame).body_frame
        if isinstance(frame, str):
            return self.get_frame_by_name(frame)
        raise TypeError(f"expected a Frame, Body or frame name, got {type(frame).__name__}")

    def floating_base_joints(self) -> list[Joint]:
        """The quaternion floating joints, in joint order."""
        return [j for j in self._joints if j.type_name == "quaternion_floating"]

    # ----- actuators --------------------------------------------------------------------------------------
    def num_actuators(self, model_instance=None) -> int:
        if model_instance is None:
            return len(self._actuators)
        instance = self._instance_index(model_instance)
        return sum(1 for a in self._actuators if a.model_instance == instance)

    def get_joint_actuator(self, actuator_index: int) -> JointActuator:
        if not 0 <= actuator_index < len(self._actuators):
            raise MultibodyIndexError(f"actuator index must be in [0, {len(self._actuators)}), got {actuator_index}")
        return self._actuators[actuator_index]

    def get_joint_actuator_by_name(self, name: str, model_instance=None) -> JointActuator:
        return self._lookup("actuator", self._actuators, name, model_instance)

    # ----- coordinates ------------------------------------------------------------------------------------
    def num_positions(self, model_instance=None) -> int:
        self._check_finalized("num_positions")
        if model_instance is None:
            return self._nq
        return sum(j.num_positions for j in self._joints_of(self._instance_index(model_instance)))

    def num_velocities(self, model_instance=None) -> int:
        self._check_finalized("num_velocities")
        if model_instance is None:
            return self._nv
        return sum(j.num_velocities for j in self._joints_of(self._instance_index(model_instance)))

    def _coordinate_joints(self, model_instance=None) -> list[Joint]:
        """Joints with coordinates (of one model instance, or all), in coordinate order."""
        self._check_finalized("coordinates")
        joints = self._joints if model_instance is None else self._joints_of(self._instance_index(model_instance))
        return sorted((j for j in joints if j.num_positions), key=lambda j: j.position_start)

    def _instance_slice(self, model_instance, positions: bool) -> slice:
        self._check_finalized("per-instance coordinates")
        joints = [j for j in self._joints_of(self._instance_index(model_instance)) if j.num_positions]
        if not joints:
            return slice(0, 0)
        if positions:
            start = min(j.position_start for j in joints)
            return slice(start, start + sum(j.num_positions for j in joints))
        start = min(j.velocity_start for j in joints)
        return slice(start, start + sum(j.num_velocities for j in joints))

    def _check_size(self, array, size: int, what: str) -> np.ndarray:
        array = np.asarray(array, dtype=float)
        if array.ndim == 0 or array.shape[-1] != size:
            raise MultibodyValueError(f"{what}: expected shape (..., {size}), got {array.shape}")
        return array

    def get_positions(self, q, model_instance=None) -> np.ndarray:
        """Drake ``GetPositions(context, model_instance)``: q may be a MultibodyState or an array (..., nq)."""
        q = q.q if isinstance(q, MultibodyState) else q
        q = self._check_size(q, self.num_positions(), "q")
        return q.copy() if model_instance is None else q[..., self._instance_slice(model_instance, True)].copy()

    def set_positions(self, q, model_instance, q_instance) -> np.ndarray:
        """Drake ``SetPositions(context, model_instance, q_instance)``: writes into q (a MultibodyState or a
        float ndarray (..., nq)) in place and returns the array.
        """
        target = q.q if isinstance(q, MultibodyState) else q
        self._check_size(target, self.num_positions(), "q")
        sl = self._instance_slice(model_instance, True)
        target[..., sl] = self._check_size(q_instance, sl.stop - sl.start, "q_instance")
        return target

    def get_velocities(self, v, model_instance=None) -> np.ndarray:
        v = v.v if isinstance(v, MultibodyState) else v
        v = self._check_size(v, self.num_velocities(), "v")
        return v.copy() if model_instance is None else v[..., self._instance_slice(model_instance, False)].copy()

    def set_velocities(self, v, model_instance, v_instance) -> np.ndarray:
        target = v.v if isinstance(v, MultibodyState) else v
        self._check_size(target, self.num_velocities(), "v")
        sl = self._instance_slice(model_instance, False)
        target[..., sl] = self._check_size(v_instance, sl.stop - sl.start, "v_instance")
        return target

    def position_names(self, model_instance=None) -> list[str]:
        """Names of q in q order (of one model instance: in its order): joint name, or joint name + "_" + suffix.

        Drake's ``GetPositionNames([model_instance,] add_model_instance_prefix=False, always_add_suffix=False)``
        gives the same names for the same joints, in Drake's order: pair coordinates with Drake by these names,
        never by index (doc/architecture.md, "Conventions that differ from Drake's").
        """
        return [self._coordinate_name(j, s) for j in self._coordinate_joints(model_instance)
                for s in j.position_suffixes]

    def velocity_names(self, model_instance=None) -> list[str]:
        """Names of v in v order (Drake ``GetVelocityNames``, as :meth:`position_names`)."""
        return [self._coordinate_name(j, s) for j in self._coordinate_joints(model_instance)
                for s in j.velocity_suffixes]

    @staticmethod
    def _coordinate_name(joint: Joint, suffix: str) -> str:
        return joint.name if joint.num_positions == 1 else f"{joint.name}_{suffix}"

    def _concatenate(self, attribute: str, size: int) -> np.ndarray:
        parts = [getattr(j, attribute) for j in self._coordinate_joints()]
        return np.concatenate(parts) if parts else np.zeros(size)

    def default_positions(self) -> np.ndarray:
        """Drake ``GetDefaultPositions``, (nq,)."""
        return self._concatenate("default_positions", 0)

    def position_lower_limits(self) -> np.ndarray:
        return self._concatenate("position_lower_limits", 0)

    def position_upper_limits(self) -> np.ndarray:
        return self._concatenate("position_upper_limits", 0)

    def velocity_lower_limits(self) -> np.ndarray:
        return self._concatenate("velocity_lower_limits", 0)

    def velocity_upper_limits(self) -> np.ndarray:
        return self._concatenate("velocity_upper_limits", 0)

    def acceleration_lower_limits(self) -> np.ndarray:
        return self._concatenate("acceleration_lower_limits", 0)

    def acceleration_upper_limits(self) -> np.ndarray:
        return self._concatenate("acceleration_upper_limits", 0)

    def effort_limits(self) -> np.ndarray:
        """(nv,) magnitude of the generalized force per velocity (inf when unknown)."""
        return self._concatenate("effort_limits", 0)

    def is_velocity_equal_to_qdot(self) -> bool:
        """Drake ``IsVelocityEqualToQDot``: nq == nv and every joint has v == q̇."""
        self._check_finalized("is_velocity_equal_to_qdot")
        return self._nq == self._nv and all(j.is_velocity_equal_to_qdot() for j in self._joints)

    def create_default_state(self) -> MultibodyState:
        """Drake ``CreateDefaultContext``: q = default positions, v = 0, damping = each joint's default."""
        self._check_finalized("create_default_state")
        damping = {j.index: j.default_damping_vector() for j in self._joints}
        return MultibodyState(self.default_positions(), np.zeros(self._nv), damping)

    def set_random_state(self, state: MultibodyState, generator: np.random.Generator) -> MultibodyState:
        """Drake ``SetRandomState``: each joint samples its random distribution (defaults if it has none)."""
        self._check_finalized("set_random_state")
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
        for joint in self._coordinate_joints():
            joint.set_random_state(state, generator)
        return state

    def articulated_view(self) -> ArticulatedView:
        """The plant through the coordinates of its v == q̇ joints (SPEC §9.2); see ArticulatedView."""
        return ArticulatedView(self)

    # ----- kinematics -------------------------------------------------------------------------------------
    def _batch(self, q) -> tuple[np.ndarray, tuple[int, ...]]:
        self._check_finalized("kinematics")
        q = self._check_size(q, self._nq, "q")
        # (an explicit batch size: reshape(-1, 0) is ambiguous for a plant without coordinates, all welds)
        return q.reshape(math.prod(q.shape[:-1]), self._nq), q.shape[:-1]

    def _kinematics_batch(self, q) -> tuple[np.ndarray, tuple[int, ...]]:
        """:meth:`_batch` plus the quaternion rule of the kinematics (SPEC 9.7, as ``core.state``): every floating
        joint's quaternion must be finite with ``| |q| - 1 | <= spatial.QUAT_NORM_TOLERANCE``; such a quaternion is
        normalized when used (``tree_kinematics``), anything else raises QuaternionError naming joint and batch
        index (a zero quaternion would otherwise give NaN poses)."""
        q2, batch = self._batch(q)
        index = self._tree_floating_q
        if index.size:
            ok, norm = spatial.quat_validity(q2[:, index])  # (B, n_floating)
            if not ok.all():
                b, k = (int(i) for i in np.argwhere(~ok)[0])
                joint = self.floating_base_joints()[k]
                where = tuple(int(i) for i in np.unravel_index(b, batch)) if batch else ()
                raise spatial.QuaternionError(
                    f"plant {self.name!r} kinematics: floating joint {joint.name!r} has q[{index[k, 0]}:"
                    f"{index[k, 0] + 4}] = {q2[b, index[k]].tolist()} at batch index {where}: "
                    f"{spatial.describe_quaternion_problem(q2[b, index[k]], float(norm[b, k]))}; expected a unit "
                    f"quaternion (w, x, y, z) (within {spatial.QUAT_NORM_TOLERANCE:g} of unit length, then normalized)"
                )
        return q2, batch

    def calc_body_poses(self, q) -> np.ndarray:
        """``X_WB`` for every body, (..., num_bodies, 4, 4); body 0 (world) is the identity."""
        q2, batch = self._kinematics_batch(q)
        X_WB, _, _ = tree_kinematics(self._tree, q2)
        return X_WB.reshape(batch + X_WB.shape[1:])

    def calc_frame_pose(self, q, frame) -> np.ndarray:
        """``X_WF`` (..., 4, 4) of a Frame, Body or frame name (Drake ``CalcRelativeTransform(world, F)``)."""
        frame = self._as_frame(frame)
        q2, batch = self._kinematics_batch(q)
        X_WB, _, _ = tree_kinematics(self._tree, q2)
        return (X_WB[:, frame.body.index] @ frame.X_BF).reshape(batch + (4, 4))

    def calc_frame_poses(self, q, frames: Sequence) -> np.ndarray:
        """``X_WF`` (..., len(frames), 4, 4) of several frames from one kinematic sweep."""
        frames = [self._as_frame(f) for f in frames]
        q2, batch = self._kinematics_batch(q)
        X_WB, _, _ = tree_kinematics(self._tree, q2)
        bodies = [f.body.index for f in frames]
        X = X_WB[:, bodies] @ np.array([f.X_BF for f in frames]).reshape(len(frames), 4, 4)
        return X.reshape(batch + (len(frames), 4, 4))

    def calc_jacobian(self, q, frame, p_FoQ_F=None) -> np.ndarray:
        """``J`` (..., 6, nv): ``[w_WF_W; v_WQ_W] = J v`` for the point Q fixed on frame F at ``p_FoQ_F``
        (default: F's origin), expressed in W. Drake ``CalcJacobianSpatialVelocity(kV, F, p_FoQ_F, W, W)``.
        """
        frame = self._as_frame(frame)
        p_FoQ_F = np.zeros(3) if p_FoQ_F is None else self._check_size(p_FoQ_F, 3, "p_FoQ_F")
        if p_FoQ_F.shape != (3,):
            raise MultibodyValueError(f"p_FoQ_F: expected shape (3,), got {p_FoQ_F.shape}")
        q2, batch = self._kinematics_batch(q)
        X_WB, R_WF, p_WMo = tree_kinematics(self._tree, q2)
        X_WF = X_WB[:, frame.body.index] @ frame.X_BF
        p_WQ = X_WF[:, :3, :3] @ p_FoQ_F + X_WF[:, :3, 3]
        J = tree_jacobian(self._tree, R_WF, p_WMo, frame.body.index, p_WQ)
        return J.reshape(batch + (6, self._nv))

    def calc_spatial_velocity(self, q, v, body) -> np.ndarray:
        """``V_WB_W = [w_WB_W; v_WBo_W]`` (..., 6): the spatial velocity of ``body`` (a Body, body name or Frame)
        in the world, angular velocity first, then the velocity of the body origin Bo, both expressed in W.
        Drake ``EvalBodySpatialVelocityInWorld(context, body)`` (given a Frame: the velocity of that frame's origin,
        Drake ``CalcSpatialVelocityInWorld``). Equal to ``calc_jacobian(q, body) @ v``; q (..., nq) and v (..., nv)
        broadcast over their leading axes.
        """
        v = self._check_size(v, self._nv, "v")
        J = self.calc_jacobian(q, body)
        return (J @ v[..., None])[..., 0]

    def calc_angular_jacobian(self, q, frame) -> np.ndarray:
        """``J_w`` (..., 3, nv) with ``w_WF_W = J_w v`` (Drake ``CalcJacobianAngularVelocity``)."""
        return self.calc_jacobian(q, frame)[..., :3, :]

    def _coordinate_blocks(self):
        for joint in self._coordinate_joints():
            yield (joint, slice(joint.position_start, joint.position_start + joint.num_positions),
                   slice(joint.velocity_start, joint.velocity_start + joint.num_velocities))

    def calc_n_matrix(self, q) -> np.ndarray:
        """``N(q)`` (..., nq, nv) with ``q̇ = N(q) v`` (Drake ``MakeVelocityToQDotMap``)."""
        q2, batch = self._batch(q)
        N = np.zeros((q2.shape[0], self._nq, self._nv))
        for joint, qs, vs in self._coordinate_blocks():
            N[:, qs, vs] = joint.calc_n_matrix(q2[:, qs])
        return N.reshape(batch + (self._nq, self._nv))

    def calc_n_plus_matrix(self, q) -> np.ndarray:
        """``N⁺(q)`` (..., nv, nq) with ``v = N⁺(q) q̇`` (Drake ``MakeQDotToVelocityMap``)."""
        q2, batch = self._batch(q)
        Np = np.zeros((q2.shape[0], self._nv, self._nq))
        for joint, qs, vs in self._coordinate_blocks():
            Np[:, vs, qs] = joint.calc_n_plus_matrix(q2[:, qs])
        return Np.reshape(batch + (self._nv, self._nq))

    def map_velocity_to_qdot(self, q, v) -> np.ndarray:
        """``q̇ = N(q) v`` (Drake ``MapVelocityToQDot``), (..., nq)."""
        q2, batch = self._batch(q)
        v2 = np.broadcast_to(self._check_size(v, self._nv, "v"), batch + (self._nv,)).reshape(-1, self._nv)
        qdot = np.zeros_like(q2)
        for joint, qs, vs in self._coordinate_blocks():
            if joint.is_velocity_equal_to_qdot():
                qdot[:, qs] = v2[:, vs]
            else:
                qdot[:, qs] = (joint.calc_n_matrix(q2[:, qs]) @ v2[:, vs, None])[..., 0]
        return qdot.reshape(batch + (self._nq,))

    def map_qdot_to_velocity(self, q, qdot) -> np.ndarray:
        """``v = N⁺(q) q̇`` (Drake ``MapQDotToVelocity``), (..., nv)."""
        q2, batch = self._batch(q)
        qd2 = np.broadcast_to(self._check_size(qdot, self._nq, "qdot"), batch + (self._nq,)).reshape(-1, self._nq)
        v = np.zeros((q2.shape[0], self._nv))
        for joint, qs, vs in self._coordinate_blocks():
            if joint.is_velocity_equal_to_qdot():
                v[:, vs] = qd2[:, qs]
            else:
                v[:, vs] = (joint.calc_n_plus_matrix(q2[:, qs]) @ qd2[:, qs, None])[..., 0]
        return v.reshape(batch + (self._nv,))

    def integrate_positions(self, q, dv) -> np.ndarray:
        """``q ⊕ dv`` (..., nq): add for v == q̇ joints; quaternion joints ``exp(dv_w) ⊗ q_R`` (dv_w in F), p += dv_v.
        ``d/dε integrate(q, ε e_i)`` at 0 equals ``N(q) e_i``.
        """
        q2, batch = self._batch(q)
        dv2 = np.broadcast_to(self._check_size(dv, self._nv, "dv"), batch + (self._nv,)).reshape(-1, self._nv)
        out = q2.copy()
        for joint, qs, vs in self._coordinate_blocks():
            out[:, qs] = joint.integrate(q2[:, qs], dv2[:, vs])
        return out.reshape(batch + (self._nq,))

    def position_difference(self, q0, q1) -> np.ndarray:
        """``dv`` (..., nv) with ``integrate_positions(q0, dv) == q1`` (rotation part in [0, π])."""
        q0b, batch = self._batch(q0)
        q1 = self._check_size(q1, self._nq, "q1")
        q1b = np.broadcast_to(q1, batch + (self._nq,)).reshape(-1, self._nq)
        dv = np.zeros((q0b.shape[0], self._nv))
        for joint, qs, vs in self._coordinate_blocks():
            dv[:, vs] = joint.difference(q0b[:, qs], q1b[:, qs])
        return dv.reshape(batch + (self._nv,))


class _ArticulatedJoint:
    """A joint of the plant with ``position_start`` / ``velocity_start`` renumbered in articulated coordinates."""

    def __init__(self, joint: Joint, position_start: int, velocity_start: int):
        self._joint = joint
        self.position_start = position_start
        self.velocity_start = velocity_start

    def __getattr__(self, name):
        if name == "_joint":  # not yet set (copy/pickle): do not recurse
            raise AttributeError(name)
        return getattr(self._joint, name)

    @property
    def joint(self) -> Joint:
        """The plant's joint."""
        return self._joint

    def __repr__(self) -> str:
        return f"ArticulatedJoint({self._joint!r}, position_start={self.position_start})"


class ArticulatedView:
    """The plant as seen through the coordinates of every joint with v == q̇ (SPEC §9.2): quaternion floating
    joints are left out, so the view has v == q̇ and DofMask (``make_from_model(view, instance)``) works on it.

    Articulated coordinate k is plant position ``q_indices[k]`` and plant velocity ``v_indices[k]``; gather with
    ``q[..., view.q_indices]``. A plant without floating joints has the same coordinates in its view.
    """

    def __init__(self, plant: MultibodyPlant):
        plant._check_finalized("articulated_view")
        self.plant = plant
        self.name = plant.name
        q_indices, v_indices, self._joints = [], [], {}
        for joint in plant._coordinate_joints():
            if not joint.is_velocity_equal_to_qdot():
                continue
            self._joints[joint.index] = _ArticulatedJoint(joint, len(q_indices), len(v_indices))
            q_indices.extend(range(joint.position_start, joint.position_start + joint.num_positions))
            v_indices.extend(range(joint.velocity_start, joint.velocity_start + joint.num_velocities))
        for joint in plant._joints:
            if joint.num_positions == 0:
                self._joints[joint.index] = _ArticulatedJoint(joint, -1, -1)
        self.q_indices = np.array(q_indices, dtype=np.int64)
        self.v_indices = np.array(v_indices, dtype=np.int64)
        self.q_indices.setflags(write=False)
        self.v_indices.setflags(write=False)

    def num_positions(self) -> int:
        return len(self.q_indices)

    def num_velocities(self) -> int:
        return len(self.v_indices)

    def is_velocity_equal_to_qdot(self) -> bool:
        return True

    def num_model_instances(self) -> int:
        return self.plant.num_model_instances()

    def get_model_instance_by_name(self, name: str) -> int:
        return self.plant.get_model_instance_by_name(name)

    def get_model_instance_name(self, model_instance) -> str:
        return self.plant.get_model_instance_name(model_instance)

    def get_joint_indices(self, model_instance=None) -> list[int]:
        """Plant joint indices of the joints in the view (all but quaternion floating), increasing."""
        return [i for i in self.plant.get_joint_indices(model_instance) if i in self._joints]

    def get_joint(self, joint_index: int):
        """The plant joint with position_start / velocity_start in articulated numbering."""
        joint = self.plant.get_joint(joint_index)
        if joint.index not in self._joints:
            raise MultibodyValueError(
                f"joint {joint.name!r} ({joint.type_name}) has v != q̇ and is not part of the articulated view"
            )
        return self._joints[joint.index]

    def position_names(self) -> list[str]:
        names = self.plant.position_names()
        return [names[i] for i in self.q_indices]

    def velocity_names(self) -> list[str]:
        names = self.plant.velocity_names()
        return [names[i] for i in self.v_indices]
