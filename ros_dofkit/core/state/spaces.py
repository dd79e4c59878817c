"""State spaces with dair_pll's layout, in NumPy: FixedBaseSpace, FloatingBaseSpace, ProductSpace.

You are in ``ros_dofkit.core.state``. A state space is a Lie group G (configurations q, ``n_q`` coordinates)
times its Lie algebra (velocities v, ``n_v`` coordinates); a state is ``x = [q, v]`` with ``n_x = n_q + n_v``.
Every array has the state index on its last axis and any number of leading batch axes (SPEC 4.1, 9.7, 9.8).

* ``FixedBaseSpace(n)``: ``R^n``, ``n_q = n_v = n``, group operation is addition (Drake's layout unchanged).
* ``FloatingBaseSpace(n_joints)``: ``SE(3) x R^n_joints`` with
  ``q = [qw, qx, qy, qz, p_WBo_W (3), joints]`` (same as Drake) and
  ``v = [w_WB_B (body axes, 3), v_WBo_W (world axes, 3), joint rates]`` (dair_pll; *not* Drake's v).
  The group acts on the right on the rotation: ``exponential(q, dq)`` rotates by ``exp(dq_rot)`` about body
  axes, ``R' = R_WB exp([dq_rot]x)``; translation and joints add.
* ``ProductSpace(spaces)``: layout ``[q_1, ..., q_k, v_1, ..., v_k]`` (all configurations, then all velocities).

Names follow dair_pll's ``state_space.py``. Differences from upstream, on purpose: quaternions are checked and
normalized (§9.7); ``project_configuration`` normalizes with the norm kept per batch entry (upstream divides by
a norm without ``keepdim``, which broadcasts wrongly for batches); the logarithm returns the shorter rotation
(angle in ``[0, pi]``); ``rot_err`` / ``pos_err`` accept any batch shape; ``x_split`` returns per-space states
``[q_i, v_i]`` cut from both halves of the product layout (upstream cuts ``x`` at cumulative ``n_x``, which only
matches a ``[x_1, x_2, ...]`` layout that the product space never uses).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from ros_dofkit.core.spatial import (
    QuaternionError,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_rotvec,
    rotvec_to_quat,
)
from ros_dofkit.core.state.errors import StateDimensionError
from ros_dofkit.core.state.floating_base import as_float_array

Comparison = Callable[[np.ndarray, np.ndarray], float]


def concat_last(*parts: np.ndarray) -> np.ndarray:
    """Concatenate along the last axis after broadcasting the leading (batch) axes of every part."""
    batch = np.broadcast_shapes(*(np.shape(part)[:-1] for part in parts))
    return np.concatenate([np.broadcast_to(part, batch + np.shape(part)[-1:]) for part in parts], axis=-1)


class StateSpace(ABC):
    """A configuration Lie group with its algebra as velocities; subclasses give the four group primitives.

    Derived operations (``state_difference``, ``shift_state``, ``finite_difference``, ``euler_step``,
    ``project_state``) are built here from ``configuration_difference``, ``exponential`` and
    ``project_configuration`` so that each space only states its own geometry.
    """

    def __init__(self, n_q: int, n_v: int) -> None:
        for label, value in (("n_q", n_q), ("n_v", n_v)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{label} must be an int, got {type(value).__name__}")
            if value < 0:
                raise StateDimensionError(f"{label} must be >= 0, got {value}")
        self.n_q = int(n_q)
        self.n_v = int(n_v)
        self.n_x = self.n_q + self.n_v
        self.comparisons: dict[str, Comparison] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_q={self.n_q}, n_v={self.n_v})"

    # --- validation --------------------------------------------------------------------------------------
    def _check(self, name: str, array, expected: int) -> np.ndarray:
        array = as_float_array(name, array)
        if array.shape[-1] != expected:
            raise StateDimensionError(
                f"{type(self).__name__}: {name} must have last axis {expected}, got shape {array.shape}"
            )
        return array

    # --- group primitives ------------------------------------------------------------------------------
    @abstractmethod
    def configuration_difference(self, q_1, q_2) -> np.ndarray:
        """``dq`` (``(..., n_v)``) with ``exponential(q_1, dq) == q_2``: the group log of ``q_1^-1 q_2``."""

    @abstractmethod
    def exponential(self, q, dq) -> np.ndarray:
        """``q exp(dq)`` (``(..., n_q)``); the inverse of :meth:`configuration_difference`."""

    @abstractmethod
    def project_configuration(self, q) -> np.ndarray:
        """Nearest-enough group element to ``q``; the identity on the group, per batch entry."""

    @abstractmethod
    def zero_state(self) -> np.ndarray:
        """Group identity with zero velocity, shape ``(n_x,)``."""

    # --- layout ----------------------------------------------------------------------------------------
    def q(self, x) -> np.ndarray:
        """Configuration part ``x[..., :n_q]``."""
        return self._check("x", x, self.n_x)[..., : self.n_q]

    def v(self, x) -> np.ndarray:
        """Velocity part ``x[..., n_q:]``."""
        return self._check("x", x, self.n_x)[..., self.n_q :]

    def q_v(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(q, v)`` split of a state."""
        x = self._check("x", x, self.n_x)
        return x[..., : self.n_q], x[..., self.n_q :]

    def x(self, q, v) -> np.ndarray:
        """State ``[q, v]``; leading axes of ``q`` and ``v`` broadcast."""
        q = self._check("q", q, self.n_q)
        v = self._check("v", v, self.n_v)
        return concat_last(q, v)

    # --- derived operations ----------------------------------------------------------------------------
    def state_difference(self, x_1, x_2) -> np.ndarray:
        """``[configuration_difference(q_1, q_2), v_2 - v_1]``, shape ``(..., 2 n_v)``."""
        q_1, v_1 = self.q_v(x_1)
        q_2, v_2 = self.q_v(x_2)
        return concat_last(self.configuration_difference(q_1, q_2), v_2 - v_1)

    def shift_state(self, x, dx) -> np.ndarray:
        """``[exponential(q, dx_q), v + dx_v]``; the inverse of :meth:`state_difference`."""
        q, v = self.q_v(x)
        dx = self._check("dx", dx, 2 * self.n_v)
        return self.x(self.exponential(q, dx[..., : self.n_v]), v + dx[..., self.n_v :])

    def finite_difference(self, q, q_plus, dt: float) -> np.ndarray:
        """Velocity ``v`` with ``q_plus == q exp(v dt)``."""
        if not dt > 0.0:
            raise StateDimensionError(f"dt must be > 0 s, got {dt}")
        return self.configuration_difference(q, q_plus) / dt

    def euler_step(self, q, v, dt: float) -> np.ndarray:
        """``q exp(v dt)``; the inverse of :meth:`finite_difference`."""
        return self.exponential(q, self._check("v", v, self.n_v) * dt)

    def project_state(self, x) -> np.ndarray:
        """``[project_configuration(q), v]``."""
        q, v = self.q_v(x)
        return self.x(self.project_configuration(q), v)


class FixedBaseSpace(StateSpace):
    """``R^n`` joint coordinates of a fixed-base chain: ``n_q = n_v = n``; Drake's coordinates unchanged."""

    def __init__(self, n_joints: int) -> None:
        super().__init__(n_joints, n_joints)
        self.n_joints = self.n_q

    def __repr__(self) -> str:
        return f"FixedBaseSpace({self.n_joints})"

    def __eq__(self, other) -> bool:
        return type(other) is FixedBaseSpace and other.n_joints == self.n_joints

    __hash__ = None

    def configuration_difference(self, q_1, q_2) -> np.ndarray:
        """``q_2 - q_1``."""
        return self._check("q_2", q_2, self.n_q) - self._check("q_1", q_1, self.n_q)

    def exponential(self, q, dq) -> np.ndarray:
        """``q + dq``."""
        return self._check("q", q, self.n_q) + self._check("dq", dq, self.n_v)

    def project_configuration(self, q) -> np.ndarray:
        """A copy of ``q`` (every vector is a group element)."""
        return self._check("q", q, self.n_q).copy()

    def zero_state(self) -> np.ndarray:
        """Zeros, shape ``(2 n,)``."""
        return np.zeros(self.n_x)


class FloatingBaseSpace(StateSpace):
    """``SE(3) x R^n_joints`` for a floating-base chain, dair_pll's coordinates (see the module docstring).

    ``q = [quat_WB (w,x,y,z), p_WBo_W, joints]``, ``v = [w_WB_B, v_WBo_W, joint rates]``;
    ``n_q = 7 + n_joints``, ``n_v = 6 + n_joints``. ``comparisons`` holds ``rot_err`` and ``pos_err``.
    """

    QUATERNION = slice(0, 4)
    BASE_POSITION = slice(4, 7)

    def __init__(self, n_joints: int) -> None:
        if isinstance(n_joints, bool) or not isinstance(n_joints, (int, np.integer)):
            raise TypeError(f"n_joints must be an int, got {type(n_joints).__name__}")
        if n_joints < 0:
            raise StateDimensionError(f"n_joints must be >= 0, got {n_joints}")
        super().__init__(7 + int(n_joints), 6 + int(n_joints))
        self.n_joints = int(n_joints)
        self.comparisons.update({"rot_err": self.rot_err, "pos_err": self.pos_err})

    def __repr__(self) -> str:
        return f"FloatingBaseSpace({self.n_joints})"

    def __eq__(self, other) -> bool:
        return type(other) is FloatingBaseSpace and other.n_joints == self.n_joints

    __hash__ = None

    def _q_or_x(self, q_or_x) -> np.ndarray:
        array = as_float_array("q_or_x", q_or_x)
        if array.shape[-1] not in (self.n_q, self.n_x):
            raise StateDimensionError(
                f"{self!r}: expected a configuration (last axis {self.n_q}) or a state ({self.n_x}), "
                f"got shape {array.shape}"
            )
        return array

    def quat(self, q_or_x) -> np.ndarray:
        """The base quaternion ``(..., 4)`` (w, x, y, z) of a configuration or state, as stored."""
        return self._q_or_x(q_or_x)[..., self.QUATERNION]

    def base(self, q_or_x) -> np.ndarray:
        """The base position ``p_WBo_W`` ``(..., 3)`` of a configuration or state."""
        return self._q_or_x(q_or_x)[..., self.BASE_POSITION]

    def configuration_difference(self, q_1, q_2) -> np.ndarray:
        """``[log(quat_1^-1 quat_2) (body axes of 1), p_2 - p_1 (world axes), joints_2 - joints_1]``.

        The rotation vector is the shorter of the two rotations (angle in ``[0, pi]``), so ``q`` and ``-q``
        give the same answer. Quaternions are checked and normalized (§9.7).
        """
        q_1 = self._check("q_1", q_1, self.n_q)
        q_2 = self._check("q_2", q_2, self.n_q)
        relative = quat_multiply(quat_conjugate(quat_normalize(q_1[..., :4])), quat_normalize(q_2[..., :4]))
        return concat_last(quat_to_rotvec(relative), q_2[..., 4:] - q_1[..., 4:])

    def exponential(self, q, dq) -> np.ndarray:
        """``[quat ⊗ exp(dq_rot), p + dq_lin, joints + dq_joints]``; the quaternion of ``q`` is normalized first."""
        q = self._check("q", q, self.n_q)
        dq = self._check("dq", dq, self.n_v)
        quat = quat_multiply(quat_normalize(q[..., :4]), rotvec_to_quat(dq[..., :3]))
        return concat_last(quat, q[..., 4:] + dq[..., 3:])

    def project_configuration(self, q) -> np.ndarray:
        """Divide each batch entry's quaternion by its own norm.

        Any finite nonzero quaternion is projected (no closeness tolerance: this is a projection, not an
        input check); a zero or non-finite one raises :class:`QuaternionError`.
        """
        q = self._check("q", q, self.n_q).copy()
        q[..., :4] = quat_normalize(q[..., :4], tolerance=np.inf)
        return q

    def zero_state(self) -> np.ndarray:
        """Identity quaternion, zero position, joints and velocities: ``[1, 0, ..., 0]`` of length ``n_x``."""
        zero = np.zeros(self.n_x)
        zero[0] = 1.0
        return zero

    def rotation_distance(self, q_or_x_1, q_or_x_2) -> np.ndarray:
        """Geodesic angle (rad, in ``[0, pi]``) between the two base orientations, per batch entry."""
        relative = quat_multiply(
            quat_conjugate(quat_normalize(self.quat(q_or_x_1))), quat_normalize(self.quat(q_or_x_2))
        )
        return np.linalg.norm(quat_to_rotvec(relative), axis=-1)

    def base_distance(self, q_or_x_1, q_or_x_2) -> np.ndarray:
        """Euclidean distance (m) between the two base origins, per batch entry."""
        return np.linalg.norm(self.base(q_or_x_2) - self.base(q_or_x_1), axis=-1)

    def rot_err(self, x_1, x_2) -> float:
        """Batch mean of :meth:`rotation_distance` over all leading axes (a single state is a batch of 1)."""
        return float(np.mean(self.rotation_distance(x_1, x_2)))

    def pos_err(self, x_1, x_2) -> float:
        """Batch mean of :meth:`base_distance` over all leading axes (a single state is a batch of 1)."""
        return float(np.mean(self.base_distance(x_1, x_2)))


class ProductSpace(StateSpace):
    """Cartesian product of spaces with dair_pll's layout ``x = [q_1, ..., q_k, v_1, ..., v_k]``.

    ``q_splits`` / ``v_splits`` are the cumulative ``n_q`` / ``n_v`` of the factors without the final total
    (NumPy int arrays), the cut points of :meth:`q_split` / :meth:`v_split`.
    """

    def __init__(self, spaces: Sequence[StateSpace]) -> None:
        spaces = list(spaces)
        for i, space in enumerate(spaces):
            if not isinstance(space, StateSpace):
                raise TypeError(f"ProductSpace factor {i} must be a StateSpace, got {type(space).__name__}")
        self.spaces = spaces
        n_qs = [space.n_q for space in spaces]
        n_vs = [space.n_v for space in spaces]
        super().__init__(sum(n_qs), sum(n_vs))
        self.q_splits = np.cumsum(n_qs, dtype=np.int64)[:-1]
        self.v_splits = np.cumsum(n_vs, dtype=np.int64)[:-1]

    def __repr__(self) -> str:
        return f"ProductSpace({self.spaces!r})"

    def __eq__(self, other) -> bool:
        return type(other) is ProductSpace and other.spaces == self.spaces

    __hash__ = None

    def q_split(self, q) -> list[np.ndarray]:
        """Per-factor configurations (views) of a product configuration ``(..., n_q)``."""
        if not self.spaces:
            self._check("q", q, 0)
            return []
        return np.split(self._check("q", q, self.n_q), self.q_splits, axis=-1)

    def v_split(self, v) -> list[np.ndarray]:
        """Per-factor velocities (views) of a product velocity ``(..., n_v)``."""
        if not self.spaces:
            self._check("v", v, 0)
            return []
        return np.split(self._check("v", v, self.n_v), self.v_splits, axis=-1)

    def x_split(self, x) -> list[np.ndarray]:
        """Per-factor states ``[q_i, v_i]`` of a product state laid out ``[q_1..q_k, v_1..v_k]``.

        Upstream's ``x_split`` cuts at cumulative ``n_x``, which is wrong for this layout whenever there is
        more than one factor with ``n_x > 0``; this one cuts q and v separately and pairs them.
        """
        q, v = self.q_v(x)
        return [np.concatenate([q_i, v_i], axis=-1) for q_i, v_i in zip(self.q_split(q), self.v_split(v), strict=True)]

    def x_join(self, xs: Sequence) -> np.ndarray:
        """Inverse of :meth:`x_split`: product state from per-factor states ``[q_i, v_i]``."""
        xs = list(xs)
        if len(xs) != len(self.spaces):
            raise StateDimensionError(f"expected {len(self.spaces)} factor states, got {len(xs)}")
        pairs = [space.q_v(x_i) for space, x_i in zip(self.spaces, xs, strict=True)]
        if not pairs:
            return np.zeros(0)
        return concat_last(*[q for q, _ in pairs], *[v for _, v in pairs])

    def configuration_difference(self, q_1, q_2) -> np.ndarray:
        """Concatenation of the factors' configuration differences."""
        diffs = [
            space.configuration_difference(a, b)
            for space, a, b in zip(self.spaces, self.q_split(q_1), self.q_split(q_2), strict=True)
        ]
        return (
            concat_last(*diffs)
            if diffs
            else np.zeros(np.broadcast_shapes(np.shape(q_1)[:-1], np.shape(q_2)[:-1]) + (0,))
        )

    def exponential(self, q, dq) -> np.ndarray:
        """Concatenation of the factors' exponentials."""
        parts = [
            space.exponential(a, b) for space, a, b in zip(self.spaces, self.q_split(q), self.v_split(dq), strict=True)
        ]
        return concat_last(*parts) if parts else np.zeros(np.shape(q)[:-1] + (0,))

    def project_configuration(self, q) -> np.ndarray:
        """Concatenation of the factors' projections."""
        parts = [space.project_configuration(a) for space, a in zip(self.spaces, self.q_split(q), strict=True)]
        return concat_last(*parts) if parts else np.zeros(np.shape(q)[:-1] + (0,))

    def zero_state(self) -> np.ndarray:
        """Factors' zero states rearranged into ``[q_1..q_k, v_1..v_k]``."""
        return self.x_join([space.zero_state() for space in self.spaces]) if self.spaces else np.zeros(0)


__all__ = ["FixedBaseSpace", "FloatingBaseSpace", "ProductSpace", "QuaternionError", "StateSpace"]
