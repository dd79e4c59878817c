"""ros_dofkit.core.multibody.errors: the exceptions the plant, its joints and the URDF parser raise.

Each class derives from the built-in type a caller would naturally catch (doc/architecture.md, "Errors").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class MultibodyValueError(ValueError):
    """A value or array handed to the plant or a joint has the wrong size, sign, order or is not finite."""


class UnknownNameError(MultibodyValueError):
    """A body, joint, frame, actuator or model instance name that does not exist.

    The message lists the closest valid names (difflib) so that typos are easy to fix.
    """

    def __init__(self, kind: str, name: str, valid_names: Iterable[str], where: str = ""):
        valid = sorted(set(valid_names))
        close = difflib.get_close_matches(str(name), valid, n=5, cutoff=0.5)
        location = f" in {where}" if where else ""
        if close:
            hint = f"did you mean {', '.join(repr(c) for c in close)}?"
        elif valid:
            shown = ", ".join(repr(v) for v in valid[:20])
            hint = f"valid names are {shown}" + (" ..." if len(valid) > 20 else "")
        else:
            hint = f"there are no {kind}s"
        super().__init__(f"no {kind} named {name!r}{location}; {hint}")
        self.kind = kind
        self.name = name
        self.near_matches = close
        self.valid_names = valid


class AmbiguousNameError(MultibodyValueError):
    """A name exists in several model instances and no model instance was given to disambiguate."""


class PlantFinalizedError(RuntimeError):
    """A building call (add_body, add_joint, ...) after ``MultibodyPlant.finalize()``."""


class PlantNotFinalizedError(RuntimeError):
    """A query that needs coordinates or kinematics before ``MultibodyPlant.finalize()``."""


class TopologyError(MultibodyValueError):
    """The bodies and joints do not form a tree rooted at the world (two inboard joints, wrong order, ...)."""


class JointNotSupportedError(RuntimeError):
    """A generic joint operation that the joint type does not implement (Drake throws std::logic_error)."""


class URDFError(MultibodyValueError):
    """A malformed URDF document; the message names the offending element."""


class MultibodyIndexError(IndexError):
    """An index (coordinate suffix, body, joint, frame, model instance) outside its valid range."""
