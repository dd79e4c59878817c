"""Per-model-instance conversion between Drake coordinates and state-space coordinates (dair_pll's converters).

You are in ``ros_dofkit.core.state``. Rebuilt from dair_pll's ``drake_state_converter.py`` (SPEC 4.2):

* :func:`state_ndarray_reformat` / :func:`drake_ndarray_reformat`: a single state as a ``(1, n)`` row /
  a flat ``(n,)`` copy (dair_pll's names).
* :class:`FloatingBaseStateConverter` (dair_pll ``DrakeFloatingBaseStateConverter``): the configuration is
  unchanged, only the angular velocity is re-expressed, ``w_WB_B = R_WB^T w_WB_W`` (to the state) and back.
  The linear velocity stays in world axes, as upstream.
* :class:`FixedBaseStateConverter` (``DrakeFixedBaseStateConverter``): copies.
* :func:`drake_to_state` / :func:`state_to_drake` (``DrakeModelStateConverterFactory``): dispatch on the space.

Unlike upstream the converters keep the leading batch axes of their input (``(..., n)`` in, ``(..., n)`` out)
instead of forcing rows / flat vectors; use the reformat helpers when dair_pll's exact shapes are wanted.
The quaternion is checked and normalized on the way in both directions (§9.7; upstream rotates with the
raw quaternion), so the two directions are exact inverses of each other on any accepted input.
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.state.errors import StateDimensionError
from ros_dofkit.core.state.floating_base import (
    ANGULAR,
    NQ_FLOATING,
    QUATERNION,
    angular_velocity_body_to_world,
    angular_velocity_world_to_body,
    as_float_array,
    normalize_base_quaternion,
)
from ros_dofkit.core.state.spaces import FixedBaseSpace, FloatingBaseSpace, StateSpace


def _single_state(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if any(size != 1 for size in x.shape[:-1]):
        raise StateDimensionError(
            f"{name} reshapes one state; got shape {x.shape} (a batch of {int(np.prod(x.shape[:-1]))} states)"
        )
    return x


def state_ndarray_reformat(x) -> np.ndarray:
    """A copy of one state (Drake coordinates, any shape with a single entry per axis but the last) as ``(1, n)``.

    dair_pll's ``state_ndarray_reformat``; a batch of more than one state is rejected rather than flattened
    into one long row.
    """
    x = _single_state("state_ndarray_reformat", x)
    return np.array(x, copy=True).reshape(1, x.size)


def drake_ndarray_reformat(x) -> np.ndarray:
    """A copy of one state as a flat ``(n,)`` vector (dair_pll's ``drake_ndarray_reformat``)."""
    x = _single_state("drake_ndarray_reformat", x)
    return np.array(x, copy=True).reshape(x.size)


def _check_pair(q, v, n_q_minus_n_v: int, label: str) -> tuple[np.ndarray, np.ndarray]:
    q = as_float_array("q", q)
    v = as_float_array("v", v)
    if q.shape[-1] - v.shape[-1] != n_q_minus_n_v:
        raise StateDimensionError(
            f"{label}: expected len(q) - len(v) == {n_q_minus_n_v}, got q shape {q.shape} and v shape {v.shape}"
        )
    return q, v


class FloatingBaseStateConverter:
    """Drake floating coordinates <-> :class:`FloatingBaseSpace` coordinates of one model instance.

    ``q = [quat_WB, p_WBo_W, joints]`` in both. Drake ``v = [w_WB_W, v_WBo_W, rates]``; state
    ``v = [w_WB_B, v_WBo_W, rates]``.
    """

    @staticmethod
    def drake_to_state(q_drake, v_drake) -> tuple[np.ndarray, np.ndarray]:
        """``(q, v)`` in state coordinates: quaternion normalized, ``w_WB_B = R_WB^T w_WB_W``."""
        q_drake, v_drake = _check_pair(q_drake, v_drake, 1, "floating base")
        if q_drake.shape[-1] < NQ_FLOATING:
            raise StateDimensionError(f"floating base: expected len(q) >= 7, got shape {q_drake.shape}")
        q = normalize_base_quaternion(q_drake)
        v = v_drake.copy()
        v[..., ANGULAR] = angular_velocity_world_to_body(q[..., QUATERNION], v_drake[..., ANGULAR])
        return q, v

    @staticmethod
    def state_to_drake(q, v) -> tuple[np.ndarray, np.ndarray]:
        """``(q_drake, v_drake)``: quaternion normalized, ``w_WB_W = R_WB w_WB_B``."""
        q, v = _check_pair(q, v, 1, "floating base")
        if q.shape[-1] < NQ_FLOATING:
            raise StateDimensionError(f"floating base: expected len(q) >= 7, got shape {q.shape}")
        q_drake = normalize_base_quaternion(q)
        v_drake = v.copy()
        v_drake[..., ANGULAR] = angular_velocity_body_to_world(q_drake[..., QUATERNION], v[..., ANGULAR])
        return q_drake, v_drake


class FixedBaseStateConverter:
    """Drake coordinates <-> :class:`FixedBaseSpace` coordinates of one fixed-base instance: copies."""

    @staticmethod
    def drake_to_state(q_drake, v_drake) -> tuple[np.ndarray, np.ndarray]:
        """Copies of ``q_drake`` and ``v_drake`` (which must have the same length)."""
        q, v = _check_pair(q_drake, v_drake, 0, "fixed base")
        return q.copy(), v.copy()

    @staticmethod
    def state_to_drake(q, v) -> tuple[np.ndarray, np.ndarray]:
        """Copies of ``q`` and ``v`` (which must have the same length)."""
        q, v = _check_pair(q, v, 0, "fixed base")
        return q.copy(), v.copy()


def _converter_for(space: StateSpace, q, v, which: str):
    if isinstance(space, FloatingBaseSpace):
        converter = FloatingBaseStateConverter
    elif isinstance(space, FixedBaseSpace):
        converter = FixedBaseStateConverter
    else:
        raise TypeError(f"space must be a FloatingBaseSpace or a FixedBaseSpace, got {type(space).__name__}")
    n_q, n_v = np.shape(q)[-1:], np.shape(v)[-1:]
    if n_q != (space.n_q,) or n_v != (space.n_v,):
        raise StateDimensionError(
            f"{which} for {space!r}: expected q of length {space.n_q} and v of length {space.n_v}, "
            f"got shapes {np.shape(q)} and {np.shape(v)}"
        )
    return converter


def drake_to_state(q_drake, v_drake, space: StateSpace) -> tuple[np.ndarray, np.ndarray]:
    """Convert one model instance's Drake ``(q, v)`` to ``space``'s coordinates (dispatch on the space type)."""
    return _converter_for(space, q_drake, v_drake, "drake_to_state").drake_to_state(q_drake, v_drake)


def state_to_drake(q, v, space: StateSpace) -> tuple[np.ndarray, np.ndarray]:
    """Convert one factor's state ``(q, v)`` to Drake coordinates; inverse of :func:`drake_to_state`."""
    return _converter_for(space, q, v, "state_to_drake").state_to_drake(q, v)
