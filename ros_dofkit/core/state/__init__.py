"""State conventions: floating-base conversions, state spaces, plant-state vectors, the JointState translator.

You are in ``ros_dofkit.core.state`` (SPEC sections 4, 5 and 9.7-9.9). Modules:

* ``floating_base``: formulas on plain arrays between Drake's floating coordinates, body-axes angular velocity
  and the ROS pose / twist / odometry-twist conventions.
* ``spaces``: ``FixedBaseSpace``, ``FloatingBaseSpace``, ``ProductSpace`` (dair_pll's layout, NumPy).
* ``converters``: per-instance Drake <-> state-space coordinates and dair_pll's reformat helpers.
* ``plant_state``: building the product space of a plant and plant ``(q, v)`` <-> state vector.
* ``joint_state_translator``: plant coordinates <-> ``JointStateArrays`` (names and arrays of a JointState)
  and the floating base as pose + twist.

Nothing here imports ROS; ``ros_dofkit.ros.state_messages`` builds the messages.
"""

from ros_dofkit.core.state.converters import (
    FixedBaseStateConverter,
    FloatingBaseStateConverter,
    drake_ndarray_reformat,
    drake_to_state,
    state_ndarray_reformat,
    state_to_drake,
)
from ros_dofkit.core.state.errors import (
    JointStateMessageError,
    PlantNotFinalizedError,
    QuaternionError,
    StateDimensionError,
    StateIndexError,
    StateSpaceMismatchError,
    UnknownNameError,
    UnsupportedModelError,
)
from ros_dofkit.core.state.floating_base import (
    BasePoseTwist,
    angular_velocity_body_to_world,
    angular_velocity_world_to_body,
    base_positions_from_pose,
    base_velocities_from_child_twist,
    base_velocities_from_world_twist,
    child_twist_from_base_velocities,
    pose_from_base_positions,
    quat_wxyz_to_xyzw,
    quat_xyzw_to_wxyz,
    world_twist_from_base_velocities,
)
from ros_dofkit.core.state.joint_state_translator import JointStateArrays, JointStateTranslator
from ros_dofkit.core.state.plant_state import (
    ModelInstanceCoordinates,
    PlantStateConverter,
    model_instance_coordinates,
    product_space_for_plant,
    space_for_model_instance,
)
from ros_dofkit.core.state.spaces import (
    FixedBaseSpace,
    FloatingBaseSpace,
    ProductSpace,
    StateSpace,
)

__all__ = [
    "BasePoseTwist",
    "JointStateArrays",
    "JointStateTranslator",
    "ModelInstanceCoordinates",
    "PlantStateConverter",
    "StateIndexError",
    "model_instance_coordinates",
    "product_space_for_plant",
    "space_for_model_instance",
    "FixedBaseSpace",
    "FixedBaseStateConverter",
    "FloatingBaseSpace",
    "FloatingBaseStateConverter",
    "JointStateMessageError",
    "PlantNotFinalizedError",
    "ProductSpace",
    "QuaternionError",
    "StateDimensionError",
    "StateSpace",
    "StateSpaceMismatchError",
    "UnknownNameError",
    "UnsupportedModelError",
    "angular_velocity_body_to_world",
    "angular_velocity_world_to_body",
    "base_positions_from_pose",
    "base_velocities_from_child_twist",
    "base_velocities_from_world_twist",
    "child_twist_from_base_velocities",
    "drake_ndarray_reformat",
    "drake_to_state",
    "pose_from_base_positions",
    "quat_wxyz_to_xyzw",
    "quat_xyzw_to_wxyz",
    "state_ndarray_reformat",
    "state_to_drake",
    "world_twist_from_base_velocities",
]
