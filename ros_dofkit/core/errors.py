"""The exceptions that several core packages raise under one name: one class each, re-exported where used.

Where you are: ``ros_dofkit.core``, below every core package (it imports only the standard library), so that the
plant (``core.multibody``), the state conventions (``core.state``) and the estimator (``core.estimator``) raise the
same class for the same mistake: a caller catching ``ros_dofkit.core.multibody.UnknownNameError`` catches every
unknown-name error of the core, whichever module raised it.

Why the roots live here: an unknown name is a bad value for the plant (:class:`MultibodyValueError`) and, when it
comes from the estimator's configuration, a configuration error (:class:`EstimatorConfigError`, which the node
and replay catch to report "cannot start"). One class derives from both, so those roots sit below both packages;
``core.multibody.errors`` and ``core.estimator.config`` re-export them (the same objects).
"""

from __future__ import annotations

import difflib


class MultibodyValueError(ValueError):
    """A value or array handed to the plant or a joint has the wrong size, sign, order or is not finite."""


class EstimatorConfigError(ValueError):
    """A configuration value is malformed, out of range or inconsistent with the robot."""


class UnknownNameError(MultibodyValueError, EstimatorConfigError):
    """A name (body, joint, frame, actuator, model instance, sensor) that does not exist.

    Two forms: ``UnknownNameError(kind, name, valid_names, where="")`` composes the message and lists the
    closest valid names (difflib), in ``.near_matches``; ``UnknownNameError(message)`` takes a message already
    composed (it should name the valid names). A ValueError, a :class:`MultibodyValueError` and an
    :class:`EstimatorConfigError`.
    """

    def __init__(self, *args, where: str = ""):
        if len(args) < 3:  # a composed message
            super().__init__(*args)
            self.kind = self.name = None
            self.near_matches: list = []
            self.valid_names: list = []
            return
        kind, name, valid_names = args[0], args[1], args[2]
        where = args[3] if len(args) > 3 else where
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


class PlantNotFinalizedError(RuntimeError):
    """A query that needs coordinates or kinematics before ``MultibodyPlant.finalize()``."""
