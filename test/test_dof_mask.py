"""Tests of ros_dofkit.core.dof_mask.DofMask without a plant: the value type, set algebra, gather/scatter.

The worked examples come from Drake's DofMask documentation (seeds/000) and SPEC section 1.6; the laws are
checked with hypothesis against plain Python sets/lists as the independent reference.
"""

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros_dofkit.core.dof_mask import (
    DofMask,
    DofMaskError,
    DofMaskIndexError,
    DofMaskSizeError,
    DofMaskTypeError,
    DofMaskValueError,
)

SEED_MASK = [True, True, False, False, True]

# The machine is shared and loaded: the properties are cheap, but a wall-clock deadline would make them flaky.
no_deadline = settings(deadline=None)

bool_lists = st.lists(st.booleans(), max_size=40)


@st.composite
def same_size_lists(draw, how_many=2):
    size = draw(st.integers(min_value=0, max_value=40))
    return [draw(st.lists(st.booleans(), min_size=size, max_size=size)) for _ in range(how_many)]


@st.composite
def mask_and_array(draw, batch_shape=()):
    bits = draw(bool_lists)
    values = draw(st.lists(st.floats(-1e6, 1e6), min_size=len(bits), max_size=len(bits)))
    batch = draw(st.sampled_from([(), (2,), (3, 2)])) if batch_shape is None else batch_shape
    offsets = np.arange(int(np.prod(batch, dtype=int))).reshape(batch)[..., None]
    return bits, np.asarray(values, dtype=float) + offsets


# ------------------------------------------------------------------------------------------------------
# Constructors


def test_default_constructor_is_empty():
    mask = DofMask()
    assert mask.size() == 0 and mask.count() == 0 and len(mask) == 0
    assert mask == [] and list(mask) == []


@pytest.mark.parametrize("size", [0, 1, 7, np.int64(4)])
@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_size_value_constructor(size, value):
    mask = DofMask(size=size, value=value)
    assert mask.size() == int(size)
    assert mask.count() == (int(size) if value else 0)
    assert list(mask) == [bool(value)] * int(size)


@pytest.mark.parametrize(("size", "value"), [(3, True), (3, False), (0, True), (np.int64(2), np.True_)])
def test_positional_size_value_constructor_as_pydrake(size, value):
    # pydrake.planning.DofMask(size, value): the positional form gives the same mask as the keywords.
    mask = DofMask(size, value)
    assert mask == DofMask(size=size, value=value)
    assert list(mask) == [bool(value)] * int(size)


@pytest.mark.parametrize(
    ("args", "mentioned"),
    [((-3, True), "-3"), ((True, True), "integer"), ((2.0, True), "integer"), (("ab", True), "integer"),
     ((2, 1), "bool"), (([True, False], True), "either values or size")],
)
def test_positional_size_value_constructor_rejects_bad_arguments(args, mentioned):
    with pytest.raises((TypeError, ValueError), match=mentioned) as info:
        DofMask(*args)
    assert isinstance(info.value, DofMaskError)


def test_negative_size_raises_value_error_naming_the_size():
    with pytest.raises(ValueError, match="-3") as info:
        DofMask(size=-3, value=True)
    assert isinstance(info.value, DofMaskSizeError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": True, "value": True},
        {"size": 2.0, "value": True},
        {"size": "2", "value": True},
        {"size": 2, "value": 1},
        {"size": 2, "value": "yes"},
        {"size": 2},
        {"value": True},
        {"values": [True], "size": 1},
        {"values": [True], "value": True},
    ],
)
def test_size_value_constructor_rejects_bad_types(kwargs):
    with pytest.raises(TypeError) as info:
        DofMask(**kwargs)
    assert isinstance(info.value, DofMaskTypeError)


@pytest.mark.parametrize(
    "values",
    [
        [True, False, True],
        (True, False, True),
        np.array([True, False, True]),
        [np.bool_(True), False, np.bool_(True)],
        np.array([True, False, True], dtype=object),
        (bit for bit in [True, False, True]),
        DofMask([True, False, True]),
    ],
    ids=["list", "tuple", "ndarray", "numpy_bools", "object_array", "generator", "mask"],
)
def test_values_constructor_accepts_sequences_of_bools(values):
    mask = DofMask(values)
    assert mask.size() == 3 and mask.count() == 2
    assert list(mask) == [True, False, True]
    assert DofMask(values=[True, False, True]) == mask


@pytest.mark.parametrize(
    ("values", "mentioned"),
    [
        ([True, 2], "2"),
        ([True, "a"], "'a'"),
        ([1, 0], "1"),
        ([True, None], "None"),
        ([[True]], "[True]"),
        ([True, 1.0], "1.0"),
    ],
)
def test_values_constructor_rejects_non_bool_entries_naming_entry_and_position(values, mentioned):
    with pytest.raises(TypeError, match="position") as info:
        DofMask(values)
    assert mentioned in str(info.value)
    assert isinstance(info.value, DofMaskTypeError)


@pytest.mark.parametrize("values", ["TF", b"\x01", {True, False}, {True: 1}, 3, 3.5, object()])
def test_values_constructor_rejects_non_sequences(values):
    with pytest.raises(TypeError, match="sequence of bools"):
        DofMask(values)


def test_values_constructor_hint_for_size_value():
    # DofMask(4) has no value: refused (as pydrake, which has no one-argument int form), naming both spellings.
    with pytest.raises(TypeError, match=r"DofMask\(n, b\) or DofMask\(size=n, value=b\)"):
        DofMask(4)


def test_values_constructor_rejects_numeric_arrays_and_wrong_rank():
    with pytest.raises(TypeError, match="int64"):
        DofMask(np.array([1, 0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        DofMask(np.ones((2, 2), dtype=bool))


def test_mask_does_not_alias_its_source():
    source = np.array([True, False, True])
    mask = DofMask(source)
    source[1] = True
    assert list(mask) == [True, False, True] and mask.count() == 2


# ------------------------------------------------------------------------------------------------------
# Immutability and introspection


def test_mask_is_immutable():
    mask = DofMask(SEED_MASK)
    with pytest.raises(AttributeError, match="immutable"):
        mask._bits = np.zeros(5, dtype=bool)
    with pytest.raises(AttributeError, match="immutable"):
        mask.extra = 1
    with pytest.raises(AttributeError, match="immutable"):
        del mask._count
    with pytest.raises(ValueError):
        mask.as_array()[2] = True
    with pytest.raises(TypeError):
        mask[2] = True
    assert list(mask) == SEED_MASK


@no_deadline
@given(bool_lists)
def test_size_count_len_iter_getitem_agree_with_the_list(bits):
    mask = DofMask(bits)
    assert mask.size() == len(mask) == len(bits)
    assert mask.count() == sum(bits)
    assert list(mask) == bits
    assert all(type(bit) is bool for bit in mask)
    assert [mask[i] for i in range(len(bits))] == bits
    assert [mask[np.int64(i)] for i in range(len(bits))] == bits
    assert all(type(mask[i]) is bool for i in range(len(bits)))
    assert np.array_equal(np.asarray(mask), np.array(bits, dtype=bool).reshape(len(bits)))


@pytest.mark.parametrize("index", [5, 6, 100, -1, -5])
def test_getitem_out_of_range_names_index_and_size(index):
    mask = DofMask(SEED_MASK)
    with pytest.raises(IndexError) as info:
        mask[index]
    assert isinstance(info.value, DofMaskIndexError)
    assert str(index) in str(info.value) and "size 5" in str(info.value)


def test_getitem_on_empty_mask_raises():
    with pytest.raises(IndexError, match="size 0"):
        DofMask()[0]


@pytest.mark.parametrize("index", [slice(0, 2), True, 1.0, "1", None])
def test_getitem_rejects_slices_and_non_integers(index):
    with pytest.raises(TypeError, match=r"\[0, 5\)"):
        DofMask(SEED_MASK)[index]


def test_membership_and_reversal_follow_the_sequence_protocol():
    mask = DofMask([False, False, True])
    assert True in mask and False in mask
    assert True not in DofMask(size=3, value=False)
    assert list(reversed(mask)) == [True, False, False]


def test_numpy_interop():
    mask = DofMask(SEED_MASK)
    assert np.array_equal(np.arange(5)[np.asarray(mask)], [0, 1, 4])
    assert np.array_equal(np.arange(5)[mask], [0, 1, 4])
    assert np.asarray(mask, dtype=float).tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    copied = np.array(mask, copy=True)
    copied[2] = True
    assert mask[2] is False


# ------------------------------------------------------------------------------------------------------
# Equality, hashing, text, pickling


def test_equality_with_masks_and_sequences():
    mask = DofMask([False, True])
    assert mask == DofMask([False, True])
    assert mask == [False, True]
    assert [False, True] == mask
    assert mask == (False, True)
    assert (False, True) == mask
    assert mask == np.array([False, True])
    assert np.array([False, True]) == mask  # a single bool, not an elementwise array
    assert (np.array([False, True]) == mask) is True
    assert mask != [True, False]
    assert mask != DofMask([True, True])
    assert not (mask != [False, True])


def test_different_sizes_are_unequal_not_an_error():
    assert DofMask([True]) != DofMask([True, True])
    assert DofMask([True]) != [True, False]
    assert DofMask() != [False]
    assert DofMask() == DofMask(size=0, value=True)


@pytest.mark.parametrize("other", [3, None, "01", object(), [0, 1], {False, True}, np.array([[False, True]])])
def test_equality_with_non_bool_sequences_is_not_implemented(other):
    mask = DofMask([False, True])
    assert mask.__eq__(other) is NotImplemented
    assert (mask == other) is False
    assert (mask != other) is True


@no_deadline
@given(bool_lists, bool_lists)
def test_equality_and_hash_agree_with_tuples(a, b):
    mask_a, mask_b = DofMask(a), DofMask(b)
    assert (mask_a == mask_b) == (a == b)
    assert (mask_a != mask_b) == (a != b)
    assert hash(mask_a) == hash(tuple(a))
    if a == b:
        assert hash(mask_a) == hash(mask_b)


def test_masks_work_as_set_members_and_dict_keys():
    masks = {DofMask([True, False]), DofMask((True, False)), DofMask([False, True])}
    assert len(masks) == 2
    table = {DofMask(SEED_MASK): "seed"}
    assert table[DofMask(np.array(SEED_MASK))] == "seed"
    assert table[tuple(SEED_MASK)] == "seed"


@pytest.mark.parametrize(
    ("bits", "text"),
    [
        ([True, False, False, True, True], "[1, 0, 0, 1, 1]"),
        ([], "[]"),
        ([False], "[0]"),
        ([True, False, True], "[1, 0, 1]"),
    ],
)
def test_to_string_and_str(bits, text):
    mask = DofMask(bits)
    assert mask.to_string() == text
    assert str(mask) == text


def test_repr_is_explicit():
    assert repr(DofMask([True, False, True])) == "DofMask([True, False, True])"
    assert repr(DofMask()) == "DofMask([])"


@no_deadline
@given(bool_lists)
def test_repr_evaluates_back_and_pickle_round_trips(bits):
    mask = DofMask(bits)
    assert eval(repr(mask), {"DofMask": DofMask}) == mask
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(mask, protocol=protocol))
        assert type(restored) is DofMask
        assert restored == mask and restored.count() == mask.count() and hash(restored) == hash(mask)
    assert copy.copy(mask) == mask and copy.deepcopy(mask) == mask


# ------------------------------------------------------------------------------------------------------
# Combining masks


def test_set_operations_examples():
    a = DofMask([True, True, False, False])
    b = DofMask([True, False, True, False])
    assert a.complement() == [False, False, True, True] == ~a
    assert a.union(b) == [True, True, True, False] == a | b
    assert a.intersect(b) == [True, False, False, False] == a & b
    assert a.subtract(b) == [False, True, False, False] == a - b
    assert b.subtract(a) == [False, False, True, False] == b - a
    assert a == [True, True, False, False] and b == [True, False, True, False]  # operands untouched
    assert a.union(other=b) == a | b


def test_set_operations_accept_sequences_of_bools_on_either_side():
    a = DofMask([True, True, False, False])
    other = [True, False, True, False]
    assert a | other == [True, True, True, False] and isinstance(a | other, DofMask)
    assert other | a == [True, True, True, False] and isinstance(other | a, DofMask)
    assert other & a == [True, False, False, False]
    assert other - a == [False, False, True, False]
    assert np.array(other) - a == [False, False, True, False]
    assert a.intersect(tuple(other)) == [True, False, False, False]


@pytest.mark.parametrize("operation", ["union", "intersect", "subtract"])
def test_set_operations_raise_naming_both_sizes(operation):
    a, b = DofMask(size=4, value=True), DofMask(size=3, value=True)
    with pytest.raises(ValueError, match=r"size 4.*size 3") as info:
        getattr(a, operation)(b)
    assert isinstance(info.value, DofMaskSizeError)
    with pytest.raises(ValueError, match=r"size 3.*size 4"):
        getattr(b, operation)(a)


def test_set_operators_raise_on_size_mismatch_and_wrong_types():
    a = DofMask(size=4, value=True)
    for combine in (lambda: a | [True], lambda: a & [True], lambda: a - [True], lambda: [True] - a):
        with pytest.raises(ValueError, match="size"):
            combine()
    for combine in (lambda: a | 3, lambda: a & "TTFF", lambda: a - [1, 1, 1, 1], lambda: 3 | a):
        with pytest.raises(TypeError):
            combine()
    with pytest.raises(TypeError, match="bools"):
        a.union([1, 1, 1, 1])


@no_deadline
@given(same_size_lists(3))
def test_set_algebra_laws(lists):
    a, b, c = (DofMask(bits) for bits in lists)
    size = a.size()
    assert ~~a == a
    assert ~(a | b) == ~a & ~b
    assert ~(a & b) == ~a | ~b
    assert a - b == a & ~b
    assert a.complement().count() == size - a.count()
    assert a | b == b | a and a & b == b & a
    assert (a | b) | c == a | (b | c) and (a & b) & c == a & (b & c)
    assert a & (b | c) == (a & b) | (a & c)
    assert (a | b).count() + (a & b).count() == a.count() + b.count()
    assert a | ~a == DofMask(size=size, value=True)
    assert a & ~a == DofMask(size=size, value=False)
    # Independent reference: Python sets of selected indices.
    set_a, set_b = ({i for i, bit in enumerate(bits) if bit} for bits in lists[:2])
    assert set((a | b).selected_to_full_index()) == set_a | set_b
    assert set((a & b).selected_to_full_index()) == set_a & set_b
    assert set((a - b).selected_to_full_index()) == set_a - set_b


# ------------------------------------------------------------------------------------------------------
# Gathering


def test_get_from_array_seed_example():
    mask = DofMask(SEED_MASK)
    full_vec = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    assert mask.get_from_array(full_vec).tolist() == [0.0, 10.0, 40.0]
    selected = np.empty(mask.count())
    returned = mask.get_from_array(full_vec, selected)
    assert returned is selected
    assert selected.tolist() == [0.0, 10.0, 40.0]


def test_get_from_array_accepts_array_likes_and_keeps_dtype():
    mask = DofMask(SEED_MASK)
    assert mask.get_from_array([0, 10, 20, 30, 40]).tolist() == [0, 10, 40]
    assert mask.get_from_array((0, 10, 20, 30, 40)).dtype.kind == "i"
    names = ["j0", "j1", "j2", "j3", "j4"]
    assert mask.get_from_array(names).tolist() == ["j0", "j1", "j4"]
    assert DofMask().get_from_array([]).shape == (0,)
    assert DofMask(size=3, value=False).get_from_array([1.0, 2.0, 3.0]).shape == (0,)


def test_get_from_array_batch_axes():
    mask = DofMask(SEED_MASK)
    full = np.arange(2 * 3 * 5).reshape(2, 3, 5)
    gathered = mask.get_from_array(full)
    assert gathered.shape == (2, 3, 3)
    assert np.array_equal(gathered, full[..., [0, 1, 4]])
    out = np.zeros((2, 3, 3))
    mask.get_from_array(full, out=out)
    assert np.array_equal(out, full[..., [0, 1, 4]])


@pytest.mark.parametrize("full_vec", [np.zeros(4), np.zeros(6), np.zeros((2, 4)), np.float64(1.0)])
def test_get_from_array_wrong_full_size_names_size_and_shape(full_vec):
    with pytest.raises(ValueError, match=r"\(\.\.\., 5\).*shape") as info:
        DofMask(SEED_MASK).get_from_array(full_vec)
    assert isinstance(info.value, DofMaskSizeError)
    assert str(np.shape(full_vec)) in str(info.value)


@pytest.mark.parametrize("out_shape", [(2,), (4,), (1, 3), (3, 1)])
def test_get_from_array_wrong_out_shape_raises_and_leaves_out_untouched(out_shape):
    out = np.full(out_shape, 7.0)
    with pytest.raises(ValueError, match=r"\(3,\)") as info:
        DofMask(SEED_MASK).get_from_array(np.arange(5.0), out)
    assert isinstance(info.value, DofMaskSizeError)
    assert str(out_shape) in str(info.value)
    assert np.all(out == 7.0)


def test_get_from_array_bad_out_objects():
    mask = DofMask(SEED_MASK)
    with pytest.raises(TypeError, match="ndarray"):
        mask.get_from_array(np.arange(5.0), [0.0, 0.0, 0.0])
    read_only = np.full(3, 7.0)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only") as info:
        mask.get_from_array(np.arange(5.0), read_only)
    assert isinstance(info.value, DofMaskValueError)
    int_out = np.full(3, 7)
    with pytest.raises(TypeError, match=r"float64.*int64"):
        mask.get_from_array(np.arange(5.0) + 0.5, int_out)
    assert np.all(int_out == 7)
    float_out = np.zeros(3)
    mask.get_from_array(np.arange(5), float_out)  # int into float is same-kind safe
    assert float_out.tolist() == [0.0, 1.0, 4.0]


def test_get_from_array_ragged_input_is_a_type_error():
    with pytest.raises(TypeError, match="full_vec"):
        DofMask([True, True]).get_from_array([[1.0, 2.0], [3.0]])


@no_deadline
@given(mask_and_array(batch_shape=None))
def test_get_from_array_matches_fancy_indexing_by_selected_to_full_index(mask_and_full):
    bits, full = mask_and_full
    mask = DofMask(bits)
    expected = full[..., mask.selected_to_full_index()] if bits else full[..., :0]
    assert np.array_equal(mask.get_from_array(full), expected)


def test_get_columns_from_matrix_example_and_out():
    mask = DofMask(SEED_MASK)
    full_mat = np.arange(15.0).reshape(3, 5)
    expected = np.array([[0.0, 1.0, 4.0], [5.0, 6.0, 9.0], [10.0, 11.0, 14.0]])
    assert np.array_equal(mask.get_columns_from_matrix(full_mat), expected)
    out = np.empty((3, 3))
    assert mask.get_columns_from_matrix(full_mat, out) is out
    assert np.array_equal(out, expected)
    assert mask.get_columns_from_matrix(full_mat.tolist()).shape == (3, 3)
    batch = np.arange(2 * 6 * 5).reshape(2, 6, 5)
    assert np.array_equal(mask.get_columns_from_matrix(batch), batch[..., [0, 1, 4]])
    assert DofMask(size=5, value=False).get_columns_from_matrix(full_mat).shape == (3, 0)


def test_get_columns_from_matrix_preconditions():
    mask = DofMask(SEED_MASK)
    with pytest.raises(ValueError, match=r"\(\.\.\., rows, 5\).*\(3, 4\)"):
        mask.get_columns_from_matrix(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"\(5,\)"):
        mask.get_columns_from_matrix(np.zeros(5))
    for out_shape in [(2, 3), (3, 2), (3, 5), (1, 3, 3)]:
        out = np.full(out_shape, 7.0)
        with pytest.raises(ValueError, match=r"\(3, 3\)") as info:
            mask.get_columns_from_matrix(np.zeros((3, 5)), out)
        assert str(out_shape) in str(info.value)
        assert np.all(out == 7.0)
    with pytest.raises(TypeError, match="ndarray"):
        mask.get_columns_from_matrix(np.zeros((3, 5)), [[0.0] * 3] * 3)


@no_deadline
@given(mask_and_array(), st.integers(min_value=1, max_value=4))
def test_restricted_jacobian_times_selected_rates_equals_full_product(mask_and_full, rows):
    # J[:, selected] @ v_selected == J @ v_full when the unselected rates are zero.
    bits, full_vec = mask_and_full
    mask = DofMask(bits)
    jacobian = np.outer(np.arange(1.0, rows + 1.0), np.cos(np.arange(len(bits))))
    v_selected = mask.get_from_array(full_vec)
    v_full = mask.set_in_copy(v_selected, np.zeros(len(bits)))
    assert np.allclose(mask.get_columns_from_matrix(jacobian) @ v_selected, jacobian @ v_full, atol=1e-6)


# ------------------------------------------------------------------------------------------------------
# Scattering


def test_set_in_array_seed_example():
    mask = DofMask(SEED_MASK)
    full_vec = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    assert mask.set_in_array(np.array([-10.0, -20.0, -30.0]), full_vec) is None
    assert full_vec.tolist() == [-10.0, -20.0, 2.0, 3.0, -30.0]


def test_set_in_array_batches_and_broadcasting():
    mask = DofMask(SEED_MASK)
    out = np.tile(np.arange(5.0), (2, 1))
    mask.set_in_array([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]], out)
    assert out.tolist() == [[-1.0, -2.0, 2.0, 3.0, -3.0], [-4.0, -5.0, 2.0, 3.0, -6.0]]
    mask.set_in_array([9.0, 8.0, 7.0], out)  # one vec broadcast over the batch
    assert out.tolist() == [[9.0, 8.0, 2.0, 3.0, 7.0]] * 2
    DofMask(size=3, value=False).set_in_array([], out[:, :3])
    assert out.tolist() == [[9.0, 8.0, 2.0, 3.0, 7.0]] * 2


@pytest.mark.parametrize(
    ("vec", "out_shape", "message"),
    [
        (np.zeros(2), (5,), r"\(\.\.\., 3\).*count 3.*\(2,\)"),
        (np.zeros(4), (5,), r"count 3.*\(4,\)"),
        (np.float64(1.0), (5,), r"count 3.*\(\)"),
        (np.zeros(3), (4,), r"\(\.\.\., 5\).*size 5.*\(4,\)"),
        (np.zeros(3), (6,), r"size 5.*\(6,\)"),
        (np.zeros((3, 3)), (2, 5), r"\(3,\).*\(2,\)"),
        (np.zeros((2, 3)), (5,), r"\(2,\).*\(\)"),
    ],
)
def test_set_in_array_size_errors_leave_out_untouched(vec, out_shape, message):
    out = np.full(out_shape, 7.0)
    with pytest.raises(ValueError, match=message) as info:
        DofMask(SEED_MASK).set_in_array(vec, out)
    assert isinstance(info.value, DofMaskSizeError)
    assert np.all(out == 7.0)


def test_set_in_array_bad_out_objects_leave_out_untouched():
    mask = DofMask(SEED_MASK)
    as_list = [0.0] * 5
    with pytest.raises(TypeError, match=r"ndarray.*list"):
        mask.set_in_array([1.0, 2.0, 3.0], as_list)
    assert as_list == [0.0] * 5
    read_only = np.full(5, 7.0)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mask.set_in_array([1.0, 2.0, 3.0], read_only)
    int_out = np.full(5, 7)
    with pytest.raises(TypeError, match=r"float64.*int64"):
        mask.set_in_array([1.5, 2.0, 3.0], int_out)
    assert np.all(int_out == 7)


def test_set_in_copy_is_the_returning_form():
    mask = DofMask(SEED_MASK)
    full_vec = np.arange(5)
    result = mask.set_in_copy([-10, -20, -30], full_vec)
    assert result.tolist() == [-10, -20, 2, 3, -30]
    assert full_vec.tolist() == [0, 1, 2, 3, 4]
    promoted = mask.set_in_copy([0.5, 0.25, 0.125], full_vec)
    assert promoted.dtype == np.float64 and promoted.tolist() == [0.5, 0.25, 2.0, 3.0, 0.125]
    batch = mask.set_in_copy([[1, 2, 3], [4, 5, 6]], full_vec)
    assert batch.tolist() == [[1, 2, 2, 3, 3], [4, 5, 2, 3, 6]]
    with pytest.raises(ValueError, match="count 3"):
        mask.set_in_copy([1, 2], full_vec)
    with pytest.raises(ValueError, match="size 5"):
        mask.set_in_copy([1, 2, 3], [1, 2, 3])
    with pytest.raises(ValueError, match="broadcast"):
        mask.set_in_copy(np.zeros((3, 3)), np.zeros((2, 5)))


@no_deadline
@given(mask_and_array(batch_shape=None), st.data())
def test_gather_scatter_round_trips(mask_and_full, data):
    bits, full = mask_and_full
    mask = DofMask(bits)
    # scatter what was gathered: nothing changes
    out = full.copy()
    mask.set_in_array(mask.get_from_array(full), out)
    assert np.array_equal(out, full)
    assert np.array_equal(mask.set_in_copy(mask.get_from_array(full), full), full)
    # gather what was scattered: the values come back; unselected entries keep theirs
    values = np.asarray(
        data.draw(st.lists(st.floats(-1e6, 1e6), min_size=mask.count(), max_size=mask.count())), dtype=float
    )
    out = full.copy()
    mask.set_in_array(values, out)
    assert np.array_equal(mask.get_from_array(out), np.broadcast_to(values, (*full.shape[:-1], mask.count())))
    assert np.array_equal(mask.complement().get_from_array(out), mask.complement().get_from_array(full))
    # the two masks of a partition rebuild any vector
    rebuilt = np.zeros_like(full)
    mask.set_in_array(mask.get_from_array(full), rebuilt)
    (~mask).set_in_array((~mask).get_from_array(full), rebuilt)
    assert np.array_equal(rebuilt, full)


# ------------------------------------------------------------------------------------------------------
# Index maps


@pytest.mark.parametrize(
    ("bits", "selected_to_full"),
    [
        ([True, False, False, True, False], [0, 3]),
        ([False, False, False], []),
        ([], []),
        (SEED_MASK, [0, 1, 4]),
    ],
)
def test_selected_to_full_index(bits, selected_to_full):
    result = DofMask(bits).selected_to_full_index()
    assert result == selected_to_full
    assert all(type(index) is int for index in result)


@pytest.mark.parametrize(
    ("bits", "full_to_selected"),
    [
        ([True, False, False, True, False, True, False], [0, None, None, 1, None, 2, None]),
        ([False, False], [None, None]),
        ([], []),
    ],
)
def test_full_to_selected_index(bits, full_to_selected):
    result = DofMask(bits).full_to_selected_index()
    assert result == full_to_selected
    assert all(index is None or type(index) is int for index in result)


@no_deadline
@given(bool_lists)
def test_index_maps_are_inverse(bits):
    mask = DofMask(bits)
    selected_to_full = mask.selected_to_full_index()
    full_to_selected = mask.full_to_selected_index()
    assert len(selected_to_full) == mask.count() and len(full_to_selected) == mask.size()
    assert selected_to_full == sorted(selected_to_full)
    assert all(full_to_selected[full] == k for k, full in enumerate(selected_to_full))
    assert all((full_to_selected[i] is None) == (not bits[i]) for i in range(len(bits)))


# ------------------------------------------------------------------------------------------------------
# Exceptions


def test_every_error_is_a_dof_mask_error_and_a_builtin():
    assert issubclass(DofMaskSizeError, ValueError) and issubclass(DofMaskSizeError, DofMaskError)
    assert issubclass(DofMaskValueError, ValueError) and issubclass(DofMaskValueError, DofMaskError)
    assert issubclass(DofMaskIndexError, IndexError) and issubclass(DofMaskIndexError, DofMaskError)
    assert issubclass(DofMaskTypeError, TypeError) and issubclass(DofMaskTypeError, DofMaskError)
