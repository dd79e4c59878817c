"""Typed exceptions of ``ros_dofkit.core.state`` (floating-base conversions, state spaces, translator).

Where you are: ``ros_dofkit.core.state``; imports ``core.errors`` and ``core.spatial`` (QuaternionError) only.

Each derives from the built-in type a caller would catch (architecture.md, "Errors"). Quaternion problems
raise :class:`ros_dofkit.core.spatial.QuaternionError` (a ``ValueError``), re-exported here for convenience, as are
``UnknownNameError`` and ``PlantNotFinalizedError`` of ``ros_dofkit.core.errors`` (one class per name across the
core: catching ``ros_dofkit.core.multibody.UnknownNameError`` catches this module's too).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ros_dofkit.core.errors import PlantNotFinalizedError, UnknownNameError
from ros_dofkit.core.spatial import QuaternionError

__all__ = [
    "JointStateMessageError",
    "PlantNotFinalizedError",
    "QuaternionError",
    "StateDimensionError",
    "StateIndexError",
    "StateSpaceMismatchError",
    "UnknownNameError",
    "UnsupportedModelError",
    "near_matches_text",
]


class StateDimensionError(ValueError):
    """An array has the wrong length or shape for the state space / plant it is used with."""


class StateIndexError(IndexError):
    """A model instance index outside ``[0, plant.num_model_instances())``."""


class StateSpaceMismatchError(ValueError):
    """Model instances and state spaces do not correspond (count, order or kind)."""


class UnsupportedModelError(ValueError):
    """The plant has a structure this module cannot represent (e.g. two floating joints in one instance)."""


class JointStateMessageError(ValueError):
    """A JointState-like message is malformed and was rejected whole (nothing was decoded)."""


def near_matches_text(name: str, valid: Iterable[str], limit: int = 5) -> str:
    """Human-readable hint listing the valid names closest to ``name`` (or all of them if few)."""
    valid = list(valid)
    close = difflib.get_close_matches(name, valid, n=limit, cutoff=0.5)
    if close:
        return f"did you mean one of {close}?"
    if len(valid) <= 12:
        return f"valid names are {valid}"
    return f"{len(valid)} valid names, e.g. {valid[:12]}"
