"""ros_dofkit.core.multibody: a kinematic multibody plant (Drake's MultibodyPlant, kinematics only).

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core, above ``core.spatial`` and ``core.errors``); this file
only re-exports its modules' public names.

Model instances of bodies and joints (weld, revolute, prismatic, planar, quaternion floating, URDF mimic),
URDF loading, forward kinematics and frame Jacobians over flat arrays (``plant.tree``), batched over q.
The contract is doc/architecture.md, "The plant".
"""

from .bodies import Body, Frame, JointActuator, MultibodyState
from .errors import (
    AmbiguousNameError,
    JointNotSupportedError,
    MultibodyIndexError,
    MultibodyValueError,
    PlantFinalizedError,
    PlantNotFinalizedError,
    TopologyError,
    UnknownNameError,
    URDFError,
)
from .joints import (
    PLANAR_TILT_TOLERANCE,
    PLANAR_TRANSLATION_TOLERANCE,
    Joint,
    Mimic,
    PlanarJoint,
    PrismaticJoint,
    QuaternionFloatingJoint,
    RevoluteJoint,
    WeldJoint,
)
from .plant import ArticulatedView, MultibodyPlant
from .tree import (
    JOINT_PLANAR,
    JOINT_PRISMATIC,
    JOINT_QUATERNION_FLOATING,
    JOINT_REVOLUTE,
    JOINT_WELD,
    KinematicTree,
)
from .urdf import URDFModel, URDFWarning, parse_urdf

__all__ = [
    "JOINT_PLANAR",
    "JOINT_PRISMATIC",
    "JOINT_QUATERNION_FLOATING",
    "JOINT_REVOLUTE",
    "JOINT_WELD",
    "PLANAR_TILT_TOLERANCE",
    "PLANAR_TRANSLATION_TOLERANCE",
    "AmbiguousNameError",
    "ArticulatedView",
    "Body",
    "Frame",
    "Joint",
    "JointActuator",
    "JointNotSupportedError",
    "KinematicTree",
    "Mimic",
    "MultibodyIndexError",
    "MultibodyPlant",
    "MultibodyState",
    "MultibodyValueError",
    "PlanarJoint",
    "PlantFinalizedError",
    "PlantNotFinalizedError",
    "PrismaticJoint",
    "QuaternionFloatingJoint",
    "RevoluteJoint",
    "TopologyError",
    "URDFError",
    "URDFModel",
    "URDFWarning",
    "UnknownNameError",
    "WeldJoint",
    "parse_urdf",
]
