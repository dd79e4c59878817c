"""DofMask: which of a plant's generalized positions are "selected" (Drake's ``drake::planning::DofMask``).

You are in the ROS-free core (``ros_dofkit.core``). This module holds one immutable value type,
:class:`DofMask`, and its exceptions; it knows the plant only through the duck-typed API of
doc/architecture.md (``MultibodyPlant`` or its ``ArticulatedView``). Behaviour: SPEC section 1, with the
project's decisions of section 9.1 (Pythonic API, typed exceptions) and 9.2 (floating bases).

The model
---------
A mask is a vector of ``size`` booleans; entry ``i`` says whether the plant's ``i``-th generalized
position is selected. ``count`` is the number of selected entries. The masked plant must have v = q̇ for
every dof, so the same mask selects velocities too. In ros_dofkit the estimator uses masks to say, per
model instance, which dofs it estimates (selected) and which it takes from encoders (unselected).

Floating bases (SPEC 9.2)
-------------------------
A quaternion floating joint has 7 positions and 6 velocities, so a plant with a free body is rejected by
:meth:`DofMask.make_from_model` exactly as Drake rejects it. Masks are meant for the *articulated*
coordinates -- those of every joint with v = q̇ -- which ``plant.articulated_view()`` exposes as a plant of
its own; the floating base travels separately (as a pose and a twist). On a quadruped::

    plant = MultibodyPlant(name="field")
    plant.add_urdf(go1_urdf, model_name="go1", base_joint="floating")
    plant.add_urdf(panda_urdf, model_name="arm")          # welded to the world
    plant.finalize()
    DofMask.make_from_model(plant, model_name="arm")      # IncompatiblePlantError: names the go1 base
    view = plant.articulated_view()                       # coordinates of every v = q̇ joint
    legs = DofMask.make_from_model(view, model_name="go1")
    q_art = q[view.q_indices]                             # plant q -> articulated q
    q_legs = legs.get_from_array(q_art)                   # the 12 leg angles, in plant order
    legs.set_in_array(q_legs_estimated, q_art)            # write back; arm entries untouched
    q[view.q_indices] = q_art

Design decisions (beyond Drake)
-------------------------------
* Immutable: the bits live in a read-only NumPy array, so masks hash and can be shared freely.
* A mask equals any sequence of bools with the same entries (pydrake's implicit list conversion), and its
  hash equals ``hash(tuple(mask))`` so that it stays consistent with equal tuples.
* Entries must be real booleans (``bool`` or ``numpy.bool_``): ``1`` or ``"a"`` raise :class:`TypeError`.
* ``mask[i]`` takes an integer in ``[0, size)``; negative indexes are rejected as in Drake, and slices are
  rejected because a piece of a mask is no longer sized for any plant (use :meth:`DofMask.as_array`).
* Gather/scatter accept any array-like of any dtype with leading batch axes; an output argument is checked
  completely before it is written, so a failed call leaves it untouched.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

__all__ = [
    "DofMask",
    "DofMaskError",
    "DofMaskIndexError",
    "DofMaskSizeError",
    "DofMaskTypeError",
    "DofMaskValueError",
    "IncompatiblePlantError",
]


class DofMaskError(Exception):
    """Base of every error raised by :mod:`ros_dofkit.core.dof_mask`."""


class DofMaskValueError(DofMaskError, ValueError):
    """An argument has the right type but an unusable value (e.g. a read-only output array)."""


class DofMaskSizeError(DofMaskValueError):
    """Sizes or shapes disagree (mask vs. mask, mask vs. array, mask vs. plant), or a size is negative."""


class IncompatiblePlantError(DofMaskValueError):
    """The plant has a joint whose velocities are not the time derivatives of its positions (v != q̇)."""


class DofMaskIndexError(DofMaskError, IndexError):
    """A dof index lies outside ``[0, size)``."""


class DofMaskTypeError(DofMaskError, TypeError):
    """An argument has the wrong type (non-bool entry, non-integer index, non-array output, ...)."""


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _describe(value) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} of type {type(value).__name__}"


def _is_sequence_like(values) -> bool:
    """Whether ``values`` can be the bools of a mask: an ordered iterable (not text, a set or a mapping)."""
    return isinstance(values, (np.ndarray, DofMask)) or (
        isinstance(values, Iterable) and not isinstance(values, (str, bytes, bytearray, AbstractSet, Mapping))
    )


def _bits_from_values(values) -> np.ndarray:
    """Convert a sequence of bools to a fresh 1-D bool array, rejecting anything that is not a bool."""
    if isinstance(values, DofMask):
        return values._bits
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise DofMaskSizeError(f"DofMask values must be 1-D, got an array of shape {values.shape}")
        if values.dtype == np.bool_:
            return values.copy()
        if values.dtype != object:
            raise DofMaskTypeError(
                f"DofMask values must be bools, got a numpy array of dtype {values.dtype}; "
                f"convert explicitly, e.g. values.astype(bool)"
            )
        values = values.tolist()
    if not _is_sequence_like(values):
        raise DofMaskTypeError(
            f"DofMask values must be an ordered sequence of bools, got {_describe(values)}; "
            f"for a mask of equal entries use DofMask(n, b) or DofMask(size=n, value=b)"
        )
    entries = list(values)
    for i, entry in enumerate(entries):
        if not _is_bool(entry):
            raise DofMaskTypeError(f"DofMask values must be bools, got {_describe(entry)} at position {i}")
    return np.array(entries, dtype=bool).reshape(len(entries))


def _size_from_argument(size) -> int:
    if _is_bool(size):
        raise DofMaskTypeError(f"DofMask size must be an integer, got {_describe(size)}")
    try:
        size = operator.index(size)
    except TypeError:
        raise DofMaskTypeError(f"DofMask size must be an integer, got {_describe(size)}") from None
    if size < 0:
        raise DofMaskSizeError(f"DofMask size must be >= 0, got {size}")
    return size


class DofMask:
    """An immutable mask over a plant's generalized positions (Drake: ``drake::planning::DofMask``).

    Entry ``i`` refers to the plant's ``i``-th position; ``size()`` must equal ``plant.num_positions()``
    whenever the mask meets a plant, and the plant must have v_i = q̇_i for all i (use
    ``plant.articulated_view()`` for robots with floating bases, see the module docstring).

    Constructors (Drake: ``DofMask()``, ``DofMask(int size, bool value)``, ``DofMask(std::vector<bool>)``)::

        DofMask()                          # size 0, count 0
        DofMask(5, True)                   # five selected dofs (pydrake's positional (size, value));
        DofMask(size=5, value=True)        # the same by keyword. DofMask(5) alone raises (no value)
        DofMask([True, False, True])       # or values=[...]; any ordered iterable of bools,
                                           # a numpy bool array, or another DofMask

    Python protocol: ``len`` (= size), iteration (Python bools), ``mask[i]``, ``==``/``!=`` against masks and
    sequences of bools, ``hash``, pickling, ``str`` (= :meth:`to_string`), a ``repr`` that evaluates back,
    ``~ | & -`` for complement/union/intersect/subtract, and ``numpy.asarray(mask)`` (a bool array).
    """

    __slots__ = ("_bits", "_count", "_hash", "_selected")

    # Makes NumPy's binary operators defer to ours, so ``array == mask`` is a single bool like
    # ``mask == array`` instead of an elementwise comparison.
    __array_ufunc__ = None

    def __init__(self, values: Iterable[bool] | np.ndarray | DofMask | int | None = None,
                 value: bool | None = None, *, size: int | None = None):
        if values is not None and value is not None and size is None and not _is_sequence_like(values):
            # pydrake's positional DofMask(size, value): a first argument that is no sequence is the size.
            values, size = None, values
        if values is not None:
            if size is not None or value is not None:
                raise DofMaskTypeError(
                    f"DofMask takes either values or size=/value=, got values and "
                    f"size={size!r}, value={value!r}"
                )
            bits = _bits_from_values(values)
        elif size is None and value is None:
            bits = np.zeros(0, dtype=bool)
        elif size is None or value is None:
            raise DofMaskTypeError(
                f"DofMask(size=, value=) needs both arguments, got size={size!r}, value={value!r}"
            )
        else:
            size = _size_from_argument(size)
            if not _is_bool(value):
                raise DofMaskTypeError(f"DofMask value must be a bool, got {_describe(value)}")
            bits = np.full(size, bool(value), dtype=bool)
        if isinstance(values, DofMask):
            selected = values._selected  # both arrays are read-only, so sharing them is safe
        else:
            bits.flags.writeable = False  # ``bits`` is always a fresh array here
            selected = np.flatnonzero(bits)
            selected.flags.writeable = False
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_selected", selected)
        object.__setattr__(self, "_count", int(selected.size))
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"DofMask is immutable; cannot set attribute {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"DofMask is immutable; cannot delete attribute {name!r}")

    # ----------------------------------------------------------------------------------------------
    # Factories

    @classmethod
    def make_from_model(cls, plant, model: int | str | None = None, *, model_instance: int | None = None,
                        model_name: str | None = None) -> DofMask:
        """The mask selecting every position of one model instance (Drake: ``DofMask::MakeFromModel``).

        Give the instance either positionally (an int is an index, a str a name) or by keyword
        (``model_instance=`` -- Drake's ``model_index`` -- or ``model_name=``), exactly one of them.
        ``plant`` is a finalized ``MultibodyPlant`` or an ``ArticulatedView``.

        The result has ``size == plant.num_positions()``; for every joint ``j`` of the instance, entries
        ``[j.position_start, j.position_start + j.num_positions)`` are True (welds add nothing). An
        instance without joints gives an all-False mask; a plant without positions gives an empty mask.

        Raises:
            IncompatiblePlantError: any joint of the *whole* plant has v != q̇ (it names those joints and
                the plant), even if the requested instance has none; use ``plant.articulated_view()``.
            DofMaskTypeError: not exactly one way of naming the instance, or a wrong type.
            The plant's own error for an unknown name or index (it lists the instances).
        """
        given = [arg for arg in (model, model_instance, model_name) if arg is not None]
        if len(given) != 1:
            raise DofMaskTypeError(
                f"make_from_model needs exactly one of model, model_instance=, model_name=; got "
                f"model={model!r}, model_instance={model_instance!r}, model_name={model_name!r}"
            )
        if model is not None:
            if isinstance(model, str):
                model_name = model
            else:
                model_instance = model
        if model_name is not None:
            if not isinstance(model_name, str):
                raise DofMaskTypeError(f"model_name must be a str, got {_describe(model_name)}")
            model_instance = plant.get_model_instance_by_name(model_name)
        elif _is_bool(model_instance) or not isinstance(model_instance, (int, np.integer)):
            raise DofMaskTypeError(
                f"model_instance must be an integer index or model_name a str, got {_describe(model_instance)}"
            )
        _check_plant_compatible(plant)
        bits = np.zeros(plant.num_positions(), dtype=bool)
        for joint_index in plant.get_joint_indices(int(model_instance)):
            joint = plant.get_joint(joint_index)
            bits[joint.position_start:joint.position_start + joint.num_positions] = True
        return cls(bits)

    # ----------------------------------------------------------------------------------------------
    # Introspection

    def size(self) -> int:
        """Total number of dofs the mask covers, selected or not (Drake: ``size()``); also ``len(mask)``."""
        return self._bits.size

    def count(self) -> int:
        """Number of selected dofs, cached at construction so O(1) (Drake: ``count()``)."""
        return self._count

    def __len__(self) -> int:
        """``size()``, so a mask sizes like the sequence of bools it stands for."""
        return self._bits.size

    def __getitem__(self, index) -> bool:
        """Whether dof ``index`` is selected (Drake: ``operator[]``); ``index`` must lie in ``[0, size)``.

        Negative indexes raise :class:`DofMaskIndexError` (Drake has no wrap-around); slices and other
        non-integers raise :class:`DofMaskTypeError`.
        """
        if _is_bool(index) or isinstance(index, slice):
            raise DofMaskTypeError(
                f"DofMask index must be an integer in [0, {self.size()}), got {_describe(index)}; "
                f"use mask.as_array() for slicing or boolean operations"
            )
        try:
            position = operator.index(index)
        except TypeError:
            raise DofMaskTypeError(
                f"DofMask index must be an integer in [0, {self.size()}), got {_describe(index)}"
            ) from None
        if not 0 <= position < self._bits.size:
            raise DofMaskIndexError(f"DofMask index {position} is out of range [0, {self.size()}) (size {self.size()})")
        return bool(self._bits[position])

    def __iter__(self):
        """The entries as Python bools, dof 0 first (pydrake has no iteration; C++ has none either)."""
        return iter(self._bits.tolist())

    def as_array(self) -> np.ndarray:
        """The mask as a read-only 1-D ``bool`` array of length ``size`` (no copy; no Drake counterpart)."""
        return self._bits

    def __array__(self, dtype=None, copy=None):
        """NumPy conversion: ``numpy.asarray(mask)`` is the bool array, so ``q[mask]`` selects entries."""
        if copy is False and dtype is not None and np.dtype(dtype) != np.bool_:
            raise ValueError(f"DofMask cannot be viewed as {np.dtype(dtype)} without a copy")
        array = self._bits if dtype is None else self._bits.astype(dtype, copy=False)
        return array.copy() if copy else array

    def get_joints(self, plant) -> list[int]:
        """Indices of the plant's joints with at least one selected position, increasing (Drake: ``GetJoints``).

        Walks every joint of ``plant`` (all model instances); a joint is included if *any* of its
        positions is selected, and zero-position joints (welds, mimic joints) never are. ``plant`` is a
        finalized ``MultibodyPlant`` or an ``ArticulatedView``.

        Raises:
            IncompatiblePlantError: some joint of the plant has v != q̇ (names them and the plant).
            DofMaskSizeError: ``size() != plant.num_positions()``.
        """
        _check_plant_compatible(plant)
        if plant.num_positions() != self.size():
            raise DofMaskSizeError(
                f"DofMask of size {self.size()} does not fit plant {_plant_name(plant)!r} with "
                f"{plant.num_positions()} positions"
            )
        joints = []
        for joint_index in plant.get_joint_indices():
            joint = plant.get_joint(joint_index)
            start = joint.position_start
            if joint.num_positions > 0 and self._bits[start:start + joint.num_positions].any():
                joints.append(int(joint_index))
        return sorted(joints)

    # ----------------------------------------------------------------------------------------------
    # Comparison, hashing, text, pickling

    def __eq__(self, other):
        """Elementwise equality with a mask or a sequence of bools (Drake: ``operator==``).

        Different sizes compare unequal (no error). Anything that is not a mask or an ordered sequence of
        bools gives ``NotImplemented``, so Python falls back to "not equal".
        """
        other_bits = _bits_or_none(other)
        if other_bits is None:
            return NotImplemented
        return other_bits.shape == self._bits.shape and bool(np.array_equal(other_bits, self._bits))

    def __hash__(self) -> int:
        # Equal to hash(tuple(mask)): a mask equals the tuple of its bools, so their hashes must agree.
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(tuple(self._bits.tolist())))
        return self._hash

    def to_string(self) -> str:
        """The bits as integers, e.g. ``"[1, 0, 1]"``; ``"[]"`` when empty (Drake: ``to_string()``)."""
        return "[" + ", ".join("1" if bit else "0" for bit in self._bits.tolist()) + "]"

    def __str__(self) -> str:
        """Same as :meth:`to_string`."""
        return self.to_string()

    def __repr__(self) -> str:
        """``DofMask([True, False, True])``: evaluates back to an equal mask (pydrake binds no repr)."""
        return f"DofMask({self._bits.tolist()!r})"

    def __reduce__(self):
        # Pickle as the constructor call: the read-only arrays and the cached hash are rebuilt on load.
        return (DofMask, (self._bits.tolist(),))

    def __copy__(self):
        return self  # immutable: a copy would be indistinguishable

    def __deepcopy__(self, memo):
        return self

    # ----------------------------------------------------------------------------------------------
    # Combining masks. ``other`` may be a DofMask or any sequence of bools (pydrake's implicit conversion).

    def complement(self) -> DofMask:
        """Selected and unselected swapped; count becomes size - count (Drake: ``Complement()``); also ``~mask``."""
        return DofMask(~self._bits)

    def union(self, other) -> DofMask:
        """Dofs selected in ``self`` or ``other`` (Drake: ``Union``); also ``mask | other``.

        Raises :class:`DofMaskSizeError` naming both sizes if they differ.
        """
        return DofMask(self._bits | self._other_bits(other, "union"))

    def intersect(self, other) -> DofMask:
        """Dofs selected in both ``self`` and ``other`` (Drake: ``Intersect``); also ``mask & other``.

        Raises :class:`DofMaskSizeError` naming both sizes if they differ.
        """
        return DofMask(self._bits & self._other_bits(other, "intersect"))

    def subtract(self, other) -> DofMask:
        """Dofs selected in ``self`` but not in ``other`` (Drake: ``Subtract``); also ``mask - other``.

        Raises :class:`DofMaskSizeError` naming both sizes if they differ.
        """
        return DofMask(self._bits & ~self._other_bits(other, "subtract"))

    def _other_bits(self, other, operation: str) -> np.ndarray:
        other_bits = _bits_from_values(other)
        if other_bits.size != self._bits.size:
            raise DofMaskSizeError(
                f"DofMask {operation} needs masks of equal size, got size {self.size()} and size {other_bits.size}"
            )
        return other_bits

    def __invert__(self) -> DofMask:
        return self.complement()

    def __or__(self, other):
        return self.union(other) if _bits_or_none(other) is not None else NotImplemented

    def __and__(self, other):
        return self.intersect(other) if _bits_or_none(other) is not None else NotImplemented

    def __sub__(self, other):
        return self.subtract(other) if _bits_or_none(other) is not None else NotImplemented

    def __ror__(self, other):
        return DofMask(other).union(self) if _bits_or_none(other) is not None else NotImplemented

    def __rand__(self, other):
        return DofMask(other).intersect(self) if _bits_or_none(other) is not None else NotImplemented

    def __rsub__(self, other):
        return DofMask(other).subtract(self) if _bits_or_none(other) is not None else NotImplemented

    # ----------------------------------------------------------------------------------------------
    # Scattering and gathering

    def get_from_array(self, full_vec, out: np.ndarray | None = None) -> np.ndarray:
        """Gather the selected entries, in increasing dof order (Drake: ``GetFromArray``).

        ``full_vec`` has shape ``(..., size)`` (any array-like, any dtype); the result has shape
        ``(..., count)`` and the dtype of ``full_vec``. Example: mask [T, T, F, F, T] on [0, 10, 20, 30, 40]
        gives [0, 10, 40].

        With ``out`` (a writable ndarray of shape ``(..., count)`` with the same leading axes) the values
        are written into it and ``out`` is returned; the casting must be "same_kind" (float into int is
        refused). Everything is checked before ``out`` is written.

        Raises:
            DofMaskSizeError: the last axis of ``full_vec`` is not ``size`` or ``out`` has the wrong shape.
            DofMaskTypeError / DofMaskValueError: ``out`` is not an ndarray, is read-only, or cannot take
                the dtype.
        """
        full = _as_array(full_vec, "full_vec")
        if full.ndim < 1 or full.shape[-1] != self.size():
            raise DofMaskSizeError(
                f"get_from_array expects full_vec of shape (..., {self.size()}) for a mask of size "
                f"{self.size()}, got shape {full.shape}"
            )
        gathered = full[..., self._selected]
        if out is None:
            return gathered
        _write_checked(out, gathered, "get_from_array", "count")
        return out

    def get_columns_from_matrix(self, full_mat, out: np.ndarray | None = None) -> np.ndarray:
        """Gather the selected columns, in increasing dof order (Drake: ``GetColumnsFromMatrix``).

        ``full_mat`` has shape ``(..., rows, size)``; the result has shape ``(..., rows, count)`` (e.g. a
        Jacobian restricted to the selected dofs). ``out``, if given, must have exactly that shape; it is
        written only after every check passed and then returned.

        Raises:
            DofMaskSizeError: ``full_mat`` has fewer than 2 axes, its column count is not ``size``, or
                ``out`` has the wrong shape (the message gives rows and columns expected and received).
            DofMaskTypeError / DofMaskValueError: as for :meth:`get_from_array`.
        """
        full = _as_array(full_mat, "full_mat")
        if full.ndim < 2 or full.shape[-1] != self.size():
            raise DofMaskSizeError(
                f"get_columns_from_matrix expects full_mat of shape (..., rows, {self.size()}) for a mask "
                f"of size {self.size()}, got shape {full.shape}"
            )
        gathered = full[..., self._selected]
        if out is None:
            return gathered
        _write_checked(out, gathered, "get_columns_from_matrix", "rows, count")
        return out

    def set_in_array(self, vec, out: np.ndarray) -> None:
        """Scatter ``vec`` into the selected entries of ``out``, in place (Drake: ``SetInArray``).

        ``vec[..., k]`` goes to ``out[..., i_k]`` where ``i_k`` is the k-th selected dof; unselected entries
        of ``out`` keep their values. ``vec`` has shape ``(..., count)`` whose leading axes broadcast to
        those of ``out`` (shape ``(..., size)``, a writable ndarray). Returns None, like other in-place
        operations; :meth:`set_in_copy` is the returning form. Example: mask [T, T, F, F, T],
        vec [-10, -20, -30], out [0, 1, 2, 3, 4] -> out = [-10, -20, 2, 3, -30].

        Raises (before touching ``out``):
            DofMaskSizeError: ``vec`` does not end in ``count``, ``out`` does not end in ``size``, or the
                leading axes do not broadcast.
            DofMaskTypeError / DofMaskValueError: ``out`` is not an ndarray, is read-only, or cannot take
                ``vec``'s dtype with "same_kind" casting.
        """
        values = _as_array(vec, "vec")
        if values.ndim < 1 or values.shape[-1] != self.count():
            raise DofMaskSizeError(
                f"set_in_array expects vec of shape (..., {self.count()}) for a mask with count "
                f"{self.count()}, got shape {values.shape}"
            )
        _check_output_array(out, "set_in_array")
        if out.ndim < 1 or out.shape[-1] != self.size():
            raise DofMaskSizeError(
                f"set_in_array expects out of shape (..., {self.size()}) for a mask of size {self.size()}, "
                f"got shape {out.shape}"
            )
        if not _broadcasts_to(values.shape[:-1], out.shape[:-1]):
            raise DofMaskSizeError(
                f"set_in_array: leading axes of vec {values.shape[:-1]} do not broadcast to those of out "
                f"{out.shape[:-1]}"
            )
        _check_casting(values, out, "set_in_array")
        out[..., self._selected] = values

    def set_in_copy(self, vec, full_vec) -> np.ndarray:
        """Returning form of :meth:`set_in_array`: a copy of ``full_vec`` with the selected entries set to ``vec``.

        No Drake counterpart (Drake's ``SetInArray`` only writes into an output argument). ``full_vec`` is
        never modified; the result has shape ``broadcast(vec leading axes, full_vec leading axes) + (size,)``
        and the promoted dtype of both inputs.
        """
        values = _as_array(vec, "vec")
        full = _as_array(full_vec, "full_vec")
        if values.ndim < 1 or values.shape[-1] != self.count():
            raise DofMaskSizeError(
                f"set_in_copy expects vec of shape (..., {self.count()}) for a mask with count "
                f"{self.count()}, got shape {values.shape}"
            )
        if full.ndim < 1 or full.shape[-1] != self.size():
            raise DofMaskSizeError(
                f"set_in_copy expects full_vec of shape (..., {self.size()}) for a mask of size {self.size()}, "
                f"got shape {full.shape}"
            )
        try:
            leading = np.broadcast_shapes(values.shape[:-1], full.shape[:-1])
        except ValueError:
            raise DofMaskSizeError(
                f"set_in_copy: leading axes of vec {values.shape[:-1]} and full_vec {full.shape[:-1]} "
                f"do not broadcast"
            ) from None
        result = np.empty((*leading, self.size()), dtype=np.result_type(values, full))
        result[...] = full
        result[..., self._selected] = values
        return result

    # ----------------------------------------------------------------------------------------------
    # Index maps

    def selected_to_full_index(self) -> list[int]:
        """Full index of each selected dof, k-th entry for the k-th selected (Drake: ``GetSelectedToFullIndex``).

        Example: [T, F, F, T, F] gives [0, 3]; a mask with nothing selected gives [].
        """
        return self._selected.tolist()

    def full_to_selected_index(self) -> list[int | None]:
        """For each dof its index among the selected ones, None if unselected (Drake: ``GetFullToSelectedIndex``).

        Example: [T, F, F, T, F, T, F] gives [0, None, None, 1, None, 2, None].
        """
        result: list[int | None] = [None] * self.size()
        for compact, full in enumerate(self._selected.tolist()):
            result[full] = compact
        return result


# --------------------------------------------------------------------------------------------------
# Helpers


def _bits_or_none(other) -> np.ndarray | None:
    """``other`` as bits if it is a mask or a sequence of bools, else None (for operators and ``==``)."""
    if isinstance(other, DofMask):
        return other._bits
    if isinstance(other, (str, bytes, bytearray)) or not isinstance(other, (Sequence, np.ndarray)):
        return None
    try:
        return _bits_from_values(other)
    except DofMaskError:
        return None


def _as_array(value, name: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as error:
        raise DofMaskTypeError(
            f"{name} must be an array-like with a regular shape, got {_describe(value)}: {error}"
        ) from None


def _check_output_array(out, operation: str) -> None:
    if not isinstance(out, np.ndarray):
        raise DofMaskTypeError(f"{operation}: out must be a writable numpy.ndarray, got {_describe(out)}")
    if not out.flags.writeable:
        raise DofMaskValueError(f"{operation}: out is a read-only array of shape {out.shape}")


def _check_casting(values: np.ndarray, out: np.ndarray, operation: str) -> None:
    if not np.can_cast(values.dtype, out.dtype, casting="same_kind"):
        raise DofMaskTypeError(
            f"{operation}: cannot write values of dtype {values.dtype} into out of dtype {out.dtype} "
            f"(same_kind casting)"
        )


def _write_checked(out, gathered: np.ndarray, operation: str, last_axes: str) -> None:
    _check_output_array(out, operation)
    if out.shape != gathered.shape:
        raise DofMaskSizeError(
            f"{operation} expects out of shape {gathered.shape} (..., {last_axes}), got shape {out.shape}"
        )
    _check_casting(gathered, out, operation)
    out[...] = gathered


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _plant_name(plant) -> str:
    name = getattr(plant, "name", None)
    if callable(name):
        name = name()
    return str(name) if name is not None else type(plant).__name__


def _instance_label(plant, joint) -> str:
    try:
        return f", model instance {plant.get_model_instance_name(joint.model_instance)!r}"
    except (AttributeError, LookupError, TypeError, ValueError):
        return ""  # a duck-typed plant without instance names: the joint name alone must do


def _check_plant_compatible(plant) -> None:
    """Drake's DofMask compatibility check, on the whole plant: v_i = q̇_i for every i."""
    if plant.is_velocity_equal_to_qdot():
        return
    offending = []
    for joint_index in plant.get_joint_indices():
        joint = plant.get_joint(joint_index)
        if not joint.is_velocity_equal_to_qdot():
            offending.append(
                f"{joint.name!r} ({joint.type_name}, {joint.num_positions} q / {joint.num_velocities} v"
                f"{_instance_label(plant, joint)})"
            )
    joints = ", ".join(offending) if offending else "(no single joint; nq != nv)"
    raise IncompatiblePlantError(
        f"DofMask requires the plant's i-th velocity to be the time derivative of its i-th position for all i, "
        f"but these joints of plant {_plant_name(plant)!r} are not: {joints}; mask the articulated coordinates "
        f"with DofMask.make_from_model(plant.articulated_view(), ...) instead"
    )
