"""ros_dofkit.core.multibody.errors: the exceptions the plant, its joints and the URDF parser raise.

Where you are: ``ros_dofkit.core.multibody``, below the plant's other modules.

Each class derives from the built-in type a caller would naturally catch (doc/architecture.md, "Errors").
Imports only ``ros_dofkit.core.errors``, whose classes (shared with ``core.state`` and ``core.estimator``: one
class per name) are re-exported here: ``MultibodyValueError``, ``UnknownNameError``, ``PlantNotFinalizedError``.
"""

from __future__ import annotations

from ros_dofkit.core.errors import MultibodyValueError, PlantNotFinalizedError, UnknownNameError

__all__ = [
    "AmbiguousNameError",
    "JointNotSupportedError",
    "MultibodyIndexError",
    "MultibodyValueError",
    "PlantFinalizedError",
    "PlantNotFinalizedError",
    "TopologyError",
    "URDFError",
    "UnknownNameError",
]


class AmbiguousNameError(MultibodyValueError):
    """A name exists in several model instances and no model instance was given to disambiguate."""


class PlantFinalizedError(RuntimeError):
    """A building call (add_body, add_joint, ...) after ``MultibodyPlant.finalize()``."""


class TopologyError(MultibodyValueError):
    """The bodies and joints do not form a tree rooted at the world (two inboard joints, wrong order, ...)."""


class JointNotSupportedError(RuntimeError):
    """A generic joint operation that the joint type does not implement (Drake throws std::logic_error)."""


class URDFError(MultibodyValueError):
    """A malformed URDF document; the message names the offending element."""


class MultibodyIndexError(IndexError):
    """An index (coordinate suffix, body, joint, frame, model instance) outside its valid range."""
