"""Plant coordinates <-> ProductSpace state vectors, one factor space per model instance (dair_pll's converter).

You are in ``ros_dofkit.core.state``. Rebuilt from dair_pll's ``DrakeStateConverter`` and
``MultibodyPlantDiagram``'s space construction (SPEC 4.1-4.2, 9.8) on this project's ``MultibodyPlant``:

* :func:`space_for_model_instance`: a model instance whose base body is attached to the world by a
  ``quaternion_floating`` joint gets ``FloatingBaseSpace(nv - 6)``; every other instance gets
  ``FixedBaseSpace(nv)`` (its joints all have v == q̇). The floating joint's coordinates must be the first 7
  of the instance's q and the first 6 of its v, which upstream assumes and this module checks.
* :class:`PlantStateConverter` (``context_to_state`` / ``state_to_context``): gathers each instance's q and v
  from the plant vectors, converts them with :func:`~ros_dofkit.core.state.converters.drake_to_state`, and lays
  them out ``[q_1..q_k, v_1..v_k]``; and back. Model instances and factor spaces are checked to correspond
  one to one (count, kind and size) instead of being zipped with silent truncation.

The instance coordinates are gathered by index arrays, so ``plant_to_state`` / ``state_to_plant`` take
batches ``(..., nq)``, ``(..., nv)`` and ``(..., n_x)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.state.converters import drake_to_state, state_to_drake
from ros_dofkit.core.state.errors import (
    PlantNotFinalizedError,
    StateDimensionError,
    StateIndexError,
    StateSpaceMismatchError,
    UnknownNameError,
    UnsupportedModelError,
    near_matches_text,
)
from ros_dofkit.core.state.floating_base import NQ_FLOATING, NV_FLOATING, as_float_array
from ros_dofkit.core.state.spaces import FixedBaseSpace, FloatingBaseSpace, ProductSpace, StateSpace, concat_last

#: ``Joint.type_name`` of Drake's QuaternionFloatingJoint.
QUATERNION_FLOATING = "quaternion_floating"
WORLD_BODY = 0


def require_finalized(plant) -> None:
    """Raise :class:`PlantNotFinalizedError` unless ``plant.finalize()`` has been called."""
    if not plant.is_finalized():
        raise PlantNotFinalizedError("the plant must be finalized (plant.finalize()) before its coordinates are used")


def resolve_model_instance(plant, model_instance) -> int:
    """Model instance index from an index or a name; unknown names list near matches."""
    count = plant.num_model_instances()
    if isinstance(model_instance, str):
        names = [plant.get_model_instance_name(i) for i in range(count)]
        if model_instance not in names:
            raise UnknownNameError(
                f"no model instance named {model_instance!r}; {near_matches_text(model_instance, names)}"
            )
        return names.index(model_instance)
    if isinstance(model_instance, bool) or not isinstance(model_instance, (int, np.integer)):
        raise TypeError(f"a model instance is an int index or a str name, got {type(model_instance).__name__}")
    if not 0 <= model_instance < count:
        raise StateIndexError(f"model instance index must be in [0, {count}), got {model_instance}")
    return int(model_instance)


@dataclass(frozen=True)
class ModelInstanceCoordinates:
    """Where one model instance's coordinates live in the plant's q and v.

    ``q_indices`` / ``v_indices`` are increasing plant indices (the order of ``plant.get_positions(q, mi)``);
    ``floating_joint`` is the instance's quaternion floating base joint or None. When it is set, its
    coordinates are ``q_indices[:7]`` and ``v_indices[:6]`` (checked at construction).
    """

    model_instance: int
    name: str
    q_indices: np.ndarray
    v_indices: np.ndarray
    floating_joint: object | None

    @property
    def has_floating_base(self) -> bool:
        return self.floating_joint is not None

    def space(self) -> StateSpace:
        """``FloatingBaseSpace(nv - 6)`` for a floating base, else ``FixedBaseSpace(nv)``."""
        if self.has_floating_base:
            return FloatingBaseSpace(len(self.v_indices) - NV_FLOATING)
        return FixedBaseSpace(len(self.v_indices))


def model_instance_coordinates(plant, model_instance) -> ModelInstanceCoordinates:
    """Coordinates of one model instance, with the floating-base structure checks.

    Raises :class:`UnsupportedModelError` when the instance has more than one quaternion floating joint, a
    floating joint whose parent is not the world (not a free base body), or a floating joint whose coordinates
    are not at the head of the instance's q and v.
    """
    require_finalized(plant)
    index = resolve_model_instance(plant, model_instance)
    name = plant.get_model_instance_name(index)
    joints = [plant.get_joint(j) for j in plant.get_joint_indices(index)]
    q_indices = sorted(
        i
        for joint in joints
        if joint.num_positions
        for i in range(joint.position_start, joint.position_start + joint.num_positions)
    )
    v_indices = sorted(
        i
        for joint in joints
        if joint.num_velocities
        for i in range(joint.velocity_start, joint.velocity_start + joint.num_velocities)
    )
    floating = [joint for joint in joints if joint.type_name == QUATERNION_FLOATING]
    if len(floating) > 1:
        raise UnsupportedModelError(
            f"model instance {name!r} has {len(floating)} quaternion floating joints "
            f"{[joint.name for joint in floating]}; expected at most one (its free base)"
        )
    floating_joint = floating[0] if floating else None
    if floating_joint is not None:
        if floating_joint.parent_body.index != WORLD_BODY:
            raise UnsupportedModelError(
                f"model instance {name!r}: floating joint {floating_joint.name!r} connects "
                f"{floating_joint.parent_body.name!r} to {floating_joint.child_body.name!r}; expected the world as "
                "parent (a floating base); floating joints inside a chain are not supported"
            )
        q_start, v_start = floating_joint.position_start, floating_joint.velocity_start
        if q_start != q_indices[0] or v_start != v_indices[0]:
            raise UnsupportedModelError(
                f"model instance {name!r}: the floating joint {floating_joint.name!r} starts at q[{q_start}], "
                f"v[{v_start}]; expected the head of the instance's coordinates, q[{q_indices[0]}], v[{v_indices[0]}]"
            )
    return ModelInstanceCoordinates(
        index, name, np.asarray(q_indices, dtype=np.int64), np.asarray(v_indices, dtype=np.int64), floating_joint
    )


def space_for_model_instance(plant, model_instance) -> StateSpace:
    """The factor space of one model instance (MultibodyPlantDiagram's rule, with the checks above)."""
    return model_instance_coordinates(plant, model_instance).space()


def product_space_for_plant(plant, model_instances=None) -> ProductSpace:
    """``ProductSpace`` of the given model instances (default: all, world first, as dair_pll)."""
    return PlantStateConverter(plant, model_instances).space


class PlantStateConverter:
    """Plant ``(q, v)`` <-> ``ProductSpace`` state ``x`` (dair_pll ``DrakeStateConverter``).

    ``model_instances``: indices or names (or a single one), in the order of the product's factors; default all
    model instances in index order (the world instance contributes ``FixedBaseSpace(0)``, as upstream). ``space``:
    optional ``ProductSpace`` to check against (it must have one factor per model instance, each equal to the
    space the plant implies); default the implied one.
    """

    def __init__(self, plant, model_instances: Sequence | None = None, space: ProductSpace | None = None):
        require_finalized(plant)
        self.plant = plant
        if model_instances is None:
            model_instances = range(plant.num_model_instances())
        elif isinstance(model_instances, (str, int, np.integer)):
            model_instances = [model_instances]
        indices = [resolve_model_instance(plant, mi) for mi in model_instances]
        repeated = sorted({plant.get_model_instance_name(i) for i in indices if indices.count(i) > 1})
        if repeated:
            raise StateSpaceMismatchError(f"model instances must be distinct; repeated: {repeated}")
        self.coordinates = [model_instance_coordinates(plant, i) for i in indices]
        self.model_instances = indices
        implied = [c.space() for c in self.coordinates]
        if space is None:
            space = ProductSpace(implied)
        else:
            self._check_space(space, implied)
        self.space = space
        self._nq = plant.num_positions()
        self._nv = plant.num_velocities()

    def _check_space(self, space, implied: list[StateSpace]) -> None:
        if not isinstance(space, ProductSpace):
            raise TypeError(f"space must be a ProductSpace, got {type(space).__name__}")
        if len(space.spaces) != len(implied):
            raise StateSpaceMismatchError(
                f"{len(self.model_instances)} model instances "
                f"{[c.name for c in self.coordinates]} but the ProductSpace has {len(space.spaces)} factors"
            )
        for coords, given, expected in zip(self.coordinates, space.spaces, implied, strict=True):
            if given != expected:
                raise StateSpaceMismatchError(
                    f"model instance {coords.name!r} (index {coords.model_instance}) needs {expected!r}, "
                    f"the ProductSpace has {given!r} in its place"
                )

    def __repr__(self) -> str:
        return f"PlantStateConverter(model_instances={[c.name for c in self.coordinates]}, space={self.space!r})"

    def plant_to_state(self, q, v) -> np.ndarray:
        """State ``x`` ``(..., n_x)`` from plant coordinates ``q`` ``(..., nq)`` and ``v`` ``(..., nv)``."""
        q = as_float_array("q", q, last_dim=self._nq)
        v = as_float_array("v", v, last_dim=self._nv)
        qs, vs = [], []
        for coords, space in zip(self.coordinates, self.space.spaces, strict=True):
            q_i, v_i = drake_to_state(q[..., coords.q_indices], v[..., coords.v_indices], space)
            qs.append(q_i)
            vs.append(v_i)
        if not qs:
            return np.zeros(np.broadcast_shapes(q.shape[:-1], v.shape[:-1]) + (0,))
        return concat_last(*qs, *vs)

    def state_to_plant(self, x, q=None, v=None) -> tuple[np.ndarray, np.ndarray]:
        """Plant ``(q, v)`` with every listed instance's coordinates taken from state ``x`` ``(..., n_x)``.

        Coordinates of instances not listed come from ``q`` / ``v`` (default: ``plant.default_positions()``
        and zeros); the inputs are not modified. Quaternions are normalized (§9.7).
        """
        x = as_float_array("x", x, last_dim=self.space.n_x)
        q_out = self.plant.default_positions() if q is None else as_float_array("q", q, last_dim=self._nq)
        v_out = np.zeros(self._nv) if v is None else as_float_array("v", v, last_dim=self._nv)
        batch = np.broadcast_shapes(x.shape[:-1], q_out.shape[:-1], v_out.shape[:-1])
        q_out = np.array(np.broadcast_to(q_out, batch + (self._nq,)))
        v_out = np.array(np.broadcast_to(v_out, batch + (self._nv,)))
        q_x, v_x = self.space.q_v(x)
        for coords, space, q_i, v_i in zip(
            self.coordinates, self.space.spaces, self.space.q_split(q_x), self.space.v_split(v_x), strict=True
        ):
            q_d, v_d = state_to_drake(q_i, v_i, space)
            q_out[..., coords.q_indices] = q_d
            v_out[..., coords.v_indices] = v_d
        return q_out, v_out

    def context_to_state(self, plant_state) -> np.ndarray:
        """``(n_x,)`` state of a ``MultibodyState`` (dair_pll ``context_to_state``)."""
        return self.plant_to_state(plant_state.q, plant_state.v)

    def state_to_context(self, x, plant_state) -> None:
        """Write state ``x`` (``(n_x,)`` or ``(1, n_x)``) into a ``MultibodyState`` in place."""
        x = as_float_array("x", x, last_dim=self.space.n_x)
        if x.size != self.space.n_x:
            raise StateDimensionError(f"state_to_context takes one state, (n_x,) or (1, n_x); got shape {x.shape}")
        q, v = self.state_to_plant(x.reshape(self.space.n_x), plant_state.q, plant_state.v)
        plant_state.q[:] = q
        plant_state.v[:] = v


def context_to_state(plant, plant_state, model_instances, space: ProductSpace) -> np.ndarray:
    """dair_pll's ``DrakeStateConverter.context_to_state(plant, context, model_ids, space)``."""
    return PlantStateConverter(plant, model_instances, space).context_to_state(plant_state)


def state_to_context(plant, plant_state, x, model_instances, space: ProductSpace) -> None:
    """dair_pll's ``DrakeStateConverter.state_to_context(plant, context, x, model_ids, space)``."""
    PlantStateConverter(plant, model_instances, space).state_to_context(x, plant_state)


__all__ = [
    "NQ_FLOATING",
    "ModelInstanceCoordinates",
    "PlantStateConverter",
    "context_to_state",
    "model_instance_coordinates",
    "product_space_for_plant",
    "resolve_model_instance",
    "space_for_model_instance",
    "state_to_context",
]
