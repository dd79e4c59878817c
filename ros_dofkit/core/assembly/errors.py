"""Exceptions of ros_dofkit.core.assembly (the IMU/marker inverse-kinematics layer).

Where you are: ``ros_dofkit.core.assembly``; imports only the standard library, so that every assembly module can
import it.

Each derives from the built-in type a caller would naturally catch: ``ValueError`` for bad values, ``IndexError``
for indices out of range, ``RuntimeError`` for a solver that could not meet its tolerance or a call made in the
wrong state.
"""

from __future__ import annotations

import difflib


class AssemblyValueError(ValueError):
    """A bad value handed to an assembly condition, the Assembler or the calibration."""


class AssemblyIndexError(IndexError):
    """A sensor, observation or coordinate index outside its valid range."""


class AssemblyStateError(RuntimeError):
    """A call that needs a state the object is not in (e.g. a condition not adopted by an Assembler)."""


class AssembleFailed(RuntimeError):
    """Simbody's ``Assembler::AssembleFailed``: assemble() could not reach the required error tolerance."""


class TrackFailed(RuntimeError):
    """Simbody's ``Assembler::TrackFailed``: track() could not reach the required error tolerance."""


def near_matches(name: str, candidates) -> str:
    """Text listing the candidates closest to ``name`` (or all of them when few), for error messages."""
    candidates = list(candidates)
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    if close:
        return "did you mean " + ", ".join(repr(c) for c in close) + "?"
    if len(candidates) <= 12:
        return "valid names: " + ", ".join(repr(c) for c in candidates)
    return f"valid names include {', '.join(repr(c) for c in candidates[:12])}, ... ({len(candidates)} in all)"
