"""Plant coordinates <-> JointState arrays by name, plus the floating bases as pose + twist.

You are in ``ros_dofkit.core.state``. This is Drake's removed ``RobotStateLcmMessageTranslator`` (SPEC 5)
adapted to ``sensor_msgs/JointState`` and this project's plant with the decisions of SPEC 9.9. It works on
:class:`JointStateArrays` (the four arrays of a JointState, no ROS types); ``ros_dofkit.ros.state_messages``
converts them to and from messages.

What travels where:

* JointState carries every coordinate of a joint whose v == q̇: revolute and prismatic joints under the
  joint name, planar joints under their coordinate names ``<joint>_x``, ``<joint>_y``, ``<joint>_qz`` (the
  entry's velocity is the matching ``vx``, ``vy``, ``wz``), in plant q order. URDF mimic joints have no
  coordinates and are not listed (robot_state_publisher computes them from their source).
* A quaternion floating base travels as pose + twist (:class:`~ros_dofkit.core.state.floating_base.
  BasePoseTwist`: ``X_WB`` and ``V_WB`` in W, SPEC 5.4; ``child_twist()`` gives the Odometry twist).
* Efforts are exchanged with a torque vector in **actuator order** (``plant.get_joint_actuator(i)``,
  ``i < plant.num_actuators()``), not q order.

Message rules (SPEC 9.9, made explicit):

* ``name`` holds distinct strings. ``position``, ``velocity`` and ``effort`` each have exactly ``len(name)``
  entries or are empty; an empty array means "not given" (ROS allows empty velocity/effort, and an empty
  position, e.g. an effort-only message). Any other length rejects the message whole, naming the array and
  both lengths. ±inf rejects the message.
* A NaN entry means "no value for this joint" (ros2_control's joint_state_broadcaster publishes NaN for a
  joint without that interface): decoding keeps the previous value, as for a joint absent from the message.
* Decoding: names matched to the plant; unknown names ignored; plant joints absent from the message keep
  their previous values. Encoding: only entries whose names the plant knows are written; others untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ros_dofkit.core.spatial import (
    invert_transform,
    make_transform,
    matrix_to_quat,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
)
from ros_dofkit.core.state.errors import (
    JointStateMessageError,
    StateDimensionError,
    UnsupportedModelError,
)
from ros_dofkit.core.state.floating_base import BasePoseTwist, as_float_array
from ros_dofkit.core.state.plant_state import (
    QUATERNION_FLOATING,
    ModelInstanceCoordinates,
    model_instance_coordinates,
    require_finalized,
    resolve_model_instance,
)

#: Joint types whose coordinates go into JointState (all have v == q̇).
ARTICULATED_JOINT_TYPES = ("revolute", "prismatic", "planar")
#: Joint types without coordinates.
WELD = "weld"


def _message_array(field: str, values, n_names: int) -> np.ndarray:
    try:
        array = np.array([] if values is None else values, dtype=float)
    except (TypeError, ValueError) as error:
        raise JointStateMessageError(f"JointState {field}: expected numbers, got {values!r} ({error})") from None
    if array.ndim != 1:
        raise JointStateMessageError(f"JointState {field}: expected a 1-D array, got shape {array.shape}")
    if array.size not in (0, n_names):
        raise JointStateMessageError(
            f"JointState {field} has {array.size} entries but name has {n_names}; each of position, velocity and "
            "effort must have one entry per name or be empty (not given); message rejected"
        )
    if np.any(np.isinf(array)):
        bad = int(np.flatnonzero(np.isinf(array))[0])
        raise JointStateMessageError(f"JointState {field}[{bad}] is {array[bad]}; expected a finite value or NaN")
    array.flags.writeable = False
    return array


class JointStateArrays:
    """The four arrays of a ``sensor_msgs/JointState`` (no header), validated at construction.

    ``name`` (distinct strings), ``position``, ``velocity``, ``effort`` (float arrays of ``len(name)``
    entries, or empty = not given; NaN = no value for that joint). Instances are immutable (read-only arrays);
    encoding returns a new instance.
    """

    __slots__ = ("effort", "name", "position", "velocity")

    def __init__(self, name: Sequence[str], position=(), velocity=(), effort=()):
        if isinstance(name, str) or not isinstance(name, Sequence | np.ndarray):
            raise JointStateMessageError(f"JointState name: expected a sequence of strings, got {name!r}")
        names = tuple(name)
        for i, entry in enumerate(names):
            if not isinstance(entry, str):
                raise JointStateMessageError(f"JointState name[{i}]: expected a str, got {type(entry).__name__}")
        if len(set(names)) != len(names):
            seen, repeated = set(), []
            for entry in names:
                if entry in seen and entry not in repeated:
                    repeated.append(entry)
                seen.add(entry)
            raise JointStateMessageError(f"JointState name has duplicated entries {repeated}; message rejected")
        object.__setattr__(self, "name", names)
        object.__setattr__(self, "position", _message_array("position", position, len(names)))
        object.__setattr__(self, "velocity", _message_array("velocity", velocity, len(names)))
        object.__setattr__(self, "effort", _message_array("effort", effort, len(names)))

    def __setattr__(self, key, value):
        raise AttributeError("JointStateArrays is immutable; encoding returns a new message")

    def __len__(self) -> int:
        return len(self.name)

    def __repr__(self) -> str:
        return (
            f"JointStateArrays(name={list(self.name)!r}, position={self.position.tolist()!r}, "
            f"velocity={self.velocity.tolist()!r}, effort={self.effort.tolist()!r})"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, JointStateArrays):
            return NotImplemented
        return self.name == other.name and all(
            np.array_equal(getattr(self, f), getattr(other, f), equal_nan=True)
            for f in ("position", "velocity", "effort")
        )

    __hash__ = None

    def replace(self, **fields) -> JointStateArrays:
        """A copy with some of ``name``, ``position``, ``velocity``, ``effort`` replaced (validated again)."""
        values = {f: getattr(self, f) for f in self.__slots__}
        unknown = set(fields) - set(values)
        if unknown:
            raise TypeError(f"unknown JointStateArrays fields {sorted(unknown)}; fields are {sorted(values)}")
        values.update(fields)
        return JointStateArrays(**values)


class JointStateTranslator:
    """Translate between a plant's ``(q, v, tau)`` and :class:`JointStateArrays` (Drake's translator, SPEC 5).

    Constructor checks (SPEC 5.5 translated to this plant; each raises :class:`UnsupportedModelError` unless
    noted):

    1. The plant is finalized (:class:`PlantNotFinalizedError`).
    2. The selected model instances (default: every instance but the world) are valid and distinct, and own at
       least one non-world body.
    3. Each instance has at most one quaternion floating joint; it connects the world to the instance's root
       body, and its coordinates are the first 7 of the instance's q and the first 6 of its v.
    4. Every other joint is a weld, revolute, prismatic (mimic ones included) or planar joint.
    5. Coordinate names of the selected instances are distinct (two copies of one robot need one translator
       per instance).
    6. Every actuator of a selected instance drives a joint with one coordinate of its own (revolute or
       prismatic, not a mimic), and no joint has two actuators.

    Drake's "at most one fixed root" and "the root is fixed or floating" do not apply: several instances may be
    welded to the world, and a planar or 1-dof root travels in JointState like any other joint.
    """

    def __init__(self, plant, model_instances: Sequence | None = None):
        require_finalized(plant)
        self.plant = plant
        if model_instances is None:
            model_instances = range(1, plant.num_model_instances())
        elif isinstance(model_instances, (str, int, np.integer)):
            model_instances = [model_instances]
        indices = [resolve_model_instance(plant, mi) for mi in model_instances]
        if len(set(indices)) != len(indices):
            raise UnsupportedModelError(f"model instances must be distinct, got {indices}")
        if not any(b != 0 for i in indices for b in plant.get_body_indices(i)):
            raise UnsupportedModelError(
                f"model instances {[plant.get_model_instance_name(i) for i in indices]} own no body other than "
                "the world; expected at least one"
            )
        self.model_instances = indices
        self._nq = plant.num_positions()
        self._nv = plant.num_velocities()
        self._coordinates: dict[int, ModelInstanceCoordinates] = {}
        position_names = plant.position_names()
        names, q_index, v_index = [], [], []
        for index in indices:
            coords = model_instance_coordinates(plant, index)  # check 3
            self._coordinates[index] = coords
            joints = sorted(
                (plant.get_joint(j) for j in plant.get_joint_indices(index)),
                key=lambda joint: (joint.position_start < 0, joint.position_start),
            )
            for joint in joints:
                if joint.type_name == QUATERNION_FLOATING:
                    continue
                if joint.type_name not in ARTICULATED_JOINT_TYPES + (WELD,):
                    raise UnsupportedModelError(
                        f"joint {joint.name!r} of model instance {coords.name!r} has type {joint.type_name!r}; "
                        f"expected one of {list(ARTICULATED_JOINT_TYPES + (WELD,))} or a floating base"
                    )
                if joint.num_positions != joint.num_velocities:
                    raise UnsupportedModelError(
                        f"joint {joint.name!r} has {joint.num_positions} positions and {joint.num_velocities} "
                        "velocities; expected v == q̇"
                    )
                for k in range(joint.num_positions):
                    names.append(position_names[joint.position_start + k])
                    q_index.append(joint.position_start + k)
                    v_index.append(joint.velocity_start + k)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise UnsupportedModelError(
                f"coordinate names {repeated} occur more than once among the selected model instances; a JointState "
                "cannot tell them apart (for copies of one robot, use one translator per model instance)"
            )
        order = np.argsort(q_index, kind="stable")
        self.names: tuple[str, ...] = tuple(names[i] for i in order)
        self.q_indices = np.asarray(q_index, dtype=np.int64)[order]
        self.v_indices = np.asarray(v_index, dtype=np.int64)[order]
        self._slot = {name: i for i, name in enumerate(self.names)}
        self._actuator_of = self._map_actuators(plant, set(indices), position_names)
        self._match_cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    @staticmethod
    def _map_actuators(plant, selected: set[int], position_names) -> dict[str, int]:
        actuator_of: dict[str, int] = {}
        for i in range(plant.num_actuators()):
            actuator = plant.get_joint_actuator(i)
            joint = actuator.joint
            if joint.model_instance not in selected:
                continue
            if joint.type_name not in ("revolute", "prismatic") or joint.num_positions != 1:
                raise UnsupportedModelError(
                    f"actuator {actuator.name!r} drives joint {joint.name!r} ({joint.type_name}, "
                    f"{joint.num_positions} own coordinates); expected a revolute or prismatic joint with one "
                    "coordinate"
                )
            name = position_names[joint.position_start]
            if name in actuator_of:
                raise UnsupportedModelError(
                    f"joint {joint.name!r} has two actuators (indices {actuator_of[name]} and {i}); expected one"
                )
            actuator_of[name] = i
        return actuator_of

    def __repr__(self) -> str:
        return f"JointStateTranslator(model_instances={self.model_instances}, names={list(self.names)})"

    # ----- introspection ---------------------------------------------------------------------------------
    def actuated_names(self) -> tuple[str, ...]:
        """Message names that have an actuator, in actuator order."""
        return tuple(sorted(self._actuator_of, key=self._actuator_of.get))

    def floating_base_instances(self) -> list[int]:
        """Selected model instances whose base is a quaternion floating joint."""
        return [i for i, c in self._coordinates.items() if c.has_floating_base]

    # ----- vector checks ---------------------------------------------------------------------------------
    def _plant_vector(self, label: str, value, size: int) -> np.ndarray:
        array = as_float_array(label, value)
        if array.shape != (size,):
            raise StateDimensionError(f"{label}: expected shape ({size},) for this plant, got {array.shape}")
        return array

    def _torque(self, value) -> np.ndarray:
        return self._plant_vector("tau (actuator order)", value, self.plant.num_actuators())

    # ----- JointState ------------------------------------------------------------------------------------
    def initialize_message(self) -> JointStateArrays:
        """Drake ``InitializeMessage``: every translated coordinate name in q order, all four arrays zero."""
        zeros = np.zeros(len(self.names))
        return JointStateArrays(self.names, zeros, zeros, zeros)

    def _match(self, names: tuple[str, ...], table: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(message entry indices, table values) of the names in ``table``; cached per name list."""
        key = (names, id(table))
        hit = self._match_cache.get(key)
        if hit is None:
            pairs = [(i, table[n]) for i, n in enumerate(names) if n in table]
            hit = tuple(np.array(column, dtype=np.int64).reshape(-1) for column in zip(*pairs, strict=True)) or (
                np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.int64),
            )
            for column in hit:
                column.flags.writeable = False
            # Publishers repeat one name list; a few entries cover them. Clear rather than evict: cheap, bounded.
            if len(self._match_cache) >= 32:
                self._match_cache.clear()
            self._match_cache[key] = hit
        return hit

    def _known(self, message: JointStateArrays) -> tuple[np.ndarray, np.ndarray]:
        """(message entry indices, translator slots) of the names this translator knows."""
        if not isinstance(message, JointStateArrays):
            raise TypeError(f"expected a JointStateArrays, got {type(message).__name__}")
        return self._match(message.name, self._slot)

    @staticmethod
    def _filled(array: np.ndarray, size: int) -> np.ndarray:
        # An empty ("not given") array becomes NaN ("no value") so that names we do not write stay valueless.
        return np.full(size, np.nan) if array.size == 0 else array.copy()

    def encode_kinematics(self, q, v=None, message: JointStateArrays | None = None) -> JointStateArrays:
        """Drake ``EncodeMessageKinematics``: a copy of ``message`` (default :meth:`initialize_message`) with
        the position (and, if ``v`` is given, velocity) of every name the plant knows set from ``q`` / ``v``.

        Names the plant does not know keep their values; plant joints missing from the message are not added.
        An empty position/velocity array is filled (NaN for unknown names) when written.
        """
        q = self._plant_vector("q", q, self._nq)
        message = self.initialize_message() if message is None else message
        entries, slots = self._known(message)
        position = self._filled(message.position, len(message))
        position[entries] = q[self.q_indices[slots]]
        velocity = message.velocity
        if v is not None:
            v = self._plant_vector("v", v, self._nv)
            velocity = self._filled(message.velocity, len(message))
            velocity[entries] = v[self.v_indices[slots]]
        return message.replace(position=position, velocity=velocity)

    def decode_kinematics(self, message: JointStateArrays, q, v) -> tuple[np.ndarray, np.ndarray]:
        """Drake ``DecodeMessageKinematics``: copies of ``q`` and ``v`` updated from the message by name.

        Only names present in the message with a given (non-empty, non-NaN) value are written; everything else
        keeps the value passed in. Floating bases are untouched (see :meth:`decode_base`).
        """
        q = self._plant_vector("q", q, self._nq).copy()
        v = self._plant_vector("v", v, self._nv).copy()
        entries, slots = self._known(message)
        if message.position.size:
            values = message.position[entries]
            given = ~np.isnan(values)
            q[self.q_indices[slots[given]]] = values[given]
        if message.velocity.size:
            values = message.velocity[entries]
            given = ~np.isnan(values)
            v[self.v_indices[slots[given]]] = values[given]
        return q, v

    def _actuated(self, message: JointStateArrays) -> tuple[np.ndarray, np.ndarray]:
        """(message entry indices, actuator indices) of the actuated names in the message."""
        return self._match(message.name, self._actuator_of)

    def encode_effort(self, tau, message: JointStateArrays | None = None) -> JointStateArrays:
        """Drake ``EncodeMessageTorque``: ``effort[i] = tau[actuator of name i]`` for actuated names.

        ``tau`` has ``plant.num_actuators()`` entries in actuator order. Efforts of unactuated or unknown names
        are untouched (an empty effort array is filled with NaN for them).
        """
        tau = self._torque(tau)
        message = self.initialize_message() if message is None else message
        if not isinstance(message, JointStateArrays):
            raise TypeError(f"expected a JointStateArrays, got {type(message).__name__}")
        entries, actuators = self._actuated(message)
        effort = self._filled(message.effort, len(message))
        effort[entries] = tau[actuators]
        return message.replace(effort=effort)

    def decode_effort(self, message: JointStateArrays, tau) -> np.ndarray:
        """Drake ``DecodeMessageTorque``: a copy of ``tau`` (actuator order) updated from actuated names."""
        tau = self._torque(tau).copy()
        if not isinstance(message, JointStateArrays):
            raise TypeError(f"expected a JointStateArrays, got {type(message).__name__}")
        if message.effort.size:
            entries, actuators = self._actuated(message)
            values = message.effort[entries]
            given = ~np.isnan(values)
            tau[actuators[given]] = values[given]
        return tau

    # ----- floating base ---------------------------------------------------------------------------------
    def _floating_joint(self, model_instance):
        if model_instance is None:
            floating = self.floating_base_instances()
            if len(floating) != 1:
                names = [self.plant.get_model_instance_name(i) for i in floating]
                raise UnsupportedModelError(
                    f"expected exactly one floating-base model instance to choose by default, found {names}; "
                    "pass model_instance"
                )
            model_instance = floating[0]
        index = resolve_model_instance(self.plant, model_instance)
        coords = self._coordinates.get(index)
        if coords is None:
            raise UnsupportedModelError(
                f"model instance {self.plant.get_model_instance_name(index)!r} is not translated here; "
                f"this translator covers {[c.name for c in self._coordinates.values()]}"
            )
        if not coords.has_floating_base:
            raise UnsupportedModelError(
                f"model instance {coords.name!r} has no floating base; its root's pose follows from JointState "
                "and the model (TF), there is no base pose/twist to translate"
            )
        return coords.floating_joint

    def encode_base(self, q, v=None, model_instance=None) -> BasePoseTwist:
        """Pose ``X_WB`` and twist ``V_WB`` (in W) of a floating base body B from plant ``q`` ``(..., nq)`` and
        ``v`` ``(..., nv)`` (SPEC 5.4; default zero velocity). Batched.

        The joint sets ``X_FM``; with ``X_WF`` its frame on the world and ``X_MB = inv(X_BM)``:
        ``X_WB = X_WF X_FM X_MB``, ``w_WB_W = R_WF w_FM_F``, ``v_WBo_W = R_WF (v_FMo_F + w_FM_F x p_MoBo_F)``.
        """
        joint = self._floating_joint(model_instance)
        q = as_float_array("q", q, last_dim=self._nq)
        s = joint.position_start
        quat_FM = quat_normalize(q[..., s : s + 4])
        X_FM = make_transform(quat_to_matrix(quat_FM), q[..., s + 4 : s + 7])
        X_WF = joint.X_PF  # the parent is the world body (checked at construction)
        X_MB = invert_transform(joint.X_CM)
        X_WB = X_WF @ X_FM @ X_MB
        quat_WB = matrix_to_quat(X_WB[..., :3, :3])
        if v is None:
            return BasePoseTwist(X_WB[..., :3, 3], quat_WB)
        v = as_float_array("v", v, last_dim=self._nv)
        w_FM_F = v[..., joint.velocity_start : joint.velocity_start + 3]
        v_FMo_F = v[..., joint.velocity_start + 3 : joint.velocity_start + 6]
        p_MoBo_F = quat_rotate(quat_FM, X_MB[:3, 3])
        R_WF = X_WF[:3, :3]
        w_WB_W = w_FM_F @ R_WF.T
        v_WBo_W = (v_FMo_F + np.cross(w_FM_F, p_MoBo_F)) @ R_WF.T
        return BasePoseTwist(X_WB[..., :3, 3], quat_WB, w_WB_W, v_WBo_W)

    def decode_base(self, base: BasePoseTwist, q, v, model_instance=None) -> tuple[np.ndarray, np.ndarray]:
        """Copies of ``q`` and ``v`` with the floating joint set so that B has ``base``'s pose and twist.

        Inverse of :meth:`encode_base`: ``X_FM = X_FW X_WB X_BM``, ``w_FM_F = R_FW w_WB_W``,
        ``v_FMo_F = R_FW v_WBo_W - w_FM_F x p_MoBo_F``. Only the floating joint's coordinates change.
        """
        if not isinstance(base, BasePoseTwist):
            raise TypeError(f"expected a BasePoseTwist, got {type(base).__name__}")
        joint = self._floating_joint(model_instance)
        q = as_float_array("q", q, last_dim=self._nq)
        v = as_float_array("v", v, last_dim=self._nv)
        X_FW = invert_transform(joint.X_PF)
        X_BM = joint.X_CM
        X_FM = X_FW @ base.X_WB @ X_BM
        quat_FM = matrix_to_quat(X_FM[..., :3, :3])
        R_FW = X_FW[:3, :3]
        w_FM_F = base.w_WB_W @ R_FW.T
        p_MoBo_F = quat_rotate(quat_FM, invert_transform(X_BM)[:3, 3])
        v_FMo_F = base.v_WBo_W @ R_FW.T - np.cross(w_FM_F, p_MoBo_F)
        batch = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], base.p_WBo_W.shape[:-1])
        q_out = np.array(np.broadcast_to(q, batch + (self._nq,)))
        v_out = np.array(np.broadcast_to(v, batch + (self._nv,)))
        s, t = joint.position_start, joint.velocity_start
        q_out[..., s : s + 4] = quat_FM
        q_out[..., s + 4 : s + 7] = X_FM[..., :3, 3]
        v_out[..., t : t + 3] = w_FM_F
        v_out[..., t + 3 : t + 6] = v_FMo_F
        return q_out, v_out


__all__ = ["ARTICULATED_JOINT_TYPES", "JointStateArrays", "JointStateTranslator"]
