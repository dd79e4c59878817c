"""Tests of ros_dofkit.core.state.spaces: FixedBaseSpace, FloatingBaseSpace, ProductSpace (dair_pll layout)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros_dofkit.core.spatial import QuaternionError, matrix_to_quat, quat_to_matrix, rotation_x, rotation_z
from ros_dofkit.core.state import FixedBaseSpace, FloatingBaseSpace, ProductSpace, StateDimensionError


def random_configuration(rng, space, batch):
    if isinstance(space, ProductSpace):
        parts = [random_configuration(rng, s, batch) for s in space.spaces]
        return np.concatenate(parts, axis=-1) if parts else np.zeros(batch + (0,))
    q = rng.normal(size=batch + (space.n_q,))
    if isinstance(space, FloatingBaseSpace):
        q[..., :4] /= np.linalg.norm(q[..., :4], axis=-1, keepdims=True)
    return q


def same_rotation(quat_a, quat_b):
    np.testing.assert_allclose(quat_to_matrix(quat_a), quat_to_matrix(quat_b), atol=1e-12)


SPACES = [
    FixedBaseSpace(0),
    FixedBaseSpace(3),
    FloatingBaseSpace(0),
    FloatingBaseSpace(4),
    ProductSpace([FloatingBaseSpace(2), FixedBaseSpace(3), FixedBaseSpace(0), FloatingBaseSpace(0)]),
]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), index=st.integers(0, len(SPACES) - 1), batch=st.sampled_from([(), (4,), (2, 3)]))
def test_exponential_and_difference_are_inverses(seed, index, batch):
    space = SPACES[index]
    rng = np.random.default_rng(seed)
    q_1 = random_configuration(rng, space, batch)
    q_2 = random_configuration(rng, space, batch)
    dq = space.configuration_difference(q_1, q_2)
    assert dq.shape == batch + (space.n_v,)
    q_2_back = space.exponential(q_1, dq)
    # q and -q are the same rotation: compare through the state-space distance, then the parts.
    np.testing.assert_allclose(space.configuration_difference(q_2, q_2_back), 0.0, atol=1e-12)
    # small perturbations come back exactly (no hemisphere ambiguity below pi)
    small = 0.5 * rng.uniform(-1, 1, size=batch + (space.n_v,))
    np.testing.assert_allclose(space.configuration_difference(q_1, space.exponential(q_1, small)), small, atol=1e-12)
    # states: shift / difference and euler step / finite difference
    v = rng.normal(size=batch + (space.n_v,))
    x_1 = space.x(q_1, v)
    dx = np.concatenate([small, rng.normal(size=batch + (space.n_v,))], axis=-1)
    np.testing.assert_allclose(space.state_difference(x_1, space.shift_state(x_1, dx)), dx, atol=1e-12)
    np.testing.assert_allclose(space.finite_difference(q_1, space.euler_step(q_1, small, 0.01), 0.01), small, atol=1e-9)


def test_floating_exponential_rotates_about_body_axes():
    space = FloatingBaseSpace(1)
    R_WB = rotation_z(0.8) @ rotation_x(0.3)
    q = np.concatenate([matrix_to_quat(R_WB), [1.0, 2.0, 3.0, 0.5]])
    dq = np.array([0.0, 0.0, 0.4, 0.1, 0.0, 0.0, -0.5])
    q_new = space.exponential(q, dq)
    same_rotation(q_new[:4], matrix_to_quat(R_WB @ rotation_z(0.4)))  # right multiplication: body axes
    np.testing.assert_allclose(q_new[4:], [1.1, 2.0, 3.0, 0.0])  # world-axes translation and joints add
    np.testing.assert_allclose(space.configuration_difference(q, q_new), dq, atol=1e-14)


def test_floating_difference_takes_the_shorter_rotation():
    space = FloatingBaseSpace(0)
    q_1 = np.array([1.0, 0, 0, 0, 0, 0, 0])
    angle = 1.2
    q_2 = np.array([np.cos(angle / 2), np.sin(angle / 2), 0, 0, 0, 0, 0])
    np.testing.assert_allclose(space.configuration_difference(q_1, q_2)[:3], [angle, 0, 0], atol=1e-15)
    np.testing.assert_allclose(space.configuration_difference(q_1, -q_2)[:3], [angle, 0, 0], atol=1e-15)


def test_project_configuration_normalizes_each_batch_entry():
    # Upstream divides (B, 4) by a norm of shape (B,): wrong for B = 4 without any error. Here each row is
    # divided by its own norm.
    space = FloatingBaseSpace(1)
    rng = np.random.default_rng(1)
    q = rng.normal(size=(4, 8)) * np.array([[1.0], [2.0], [3.0], [0.5]])
    projected = space.project_configuration(q)
    for row_in, row_out in zip(q, projected, strict=True):
        np.testing.assert_allclose(row_out[:4], row_in[:4] / np.linalg.norm(row_in[:4]), atol=1e-15)
        np.testing.assert_array_equal(row_out[4:], row_in[4:])
    np.testing.assert_allclose(np.linalg.norm(projected[:, :4], axis=-1), 1.0, atol=1e-15)
    # the identity on the group
    np.testing.assert_allclose(space.project_configuration(projected), projected, atol=1e-15)
    x = np.concatenate([q, rng.normal(size=(4, 7))], axis=-1)
    np.testing.assert_allclose(space.project_state(x)[:, :8], projected)
    with pytest.raises(QuaternionError):
        space.project_configuration(np.zeros(8))
    with pytest.raises(QuaternionError):
        space.project_configuration(np.array([np.nan, 1, 0, 0, 0, 0, 0, 0]))


def test_zero_states():
    np.testing.assert_array_equal(FixedBaseSpace(2).zero_state(), np.zeros(4))
    np.testing.assert_array_equal(FloatingBaseSpace(1).zero_state(), [1.0] + [0.0] * 14)
    product = ProductSpace([FixedBaseSpace(1), FloatingBaseSpace(0)])
    expected = np.zeros(1 + 7 + 1 + 6)
    expected[1] = 1.0  # after q_1 (one fixed coordinate) comes the floating quaternion
    np.testing.assert_array_equal(product.zero_state(), expected)
    assert ProductSpace([]).zero_state().shape == (0,)


def test_product_layout_and_splits():
    floating, fixed = FloatingBaseSpace(1), FixedBaseSpace(2)
    space = ProductSpace([floating, fixed])
    assert (space.n_q, space.n_v, space.n_x) == (10, 9, 19)
    np.testing.assert_array_equal(space.q_splits, [8])
    np.testing.assert_array_equal(space.v_splits, [7])
    x = np.arange(19.0)
    # [q_1 (8) | q_2 (2) | v_1 (7) | v_2 (2)]
    q_parts = space.q_split(space.q(x))
    v_parts = space.v_split(space.v(x))
    np.testing.assert_array_equal(q_parts[0], np.arange(0, 8))
    np.testing.assert_array_equal(q_parts[1], [8, 9])
    np.testing.assert_array_equal(v_parts[0], np.arange(10, 17))
    np.testing.assert_array_equal(v_parts[1], [17, 18])
    x_1, x_2 = space.x_split(x)
    np.testing.assert_array_equal(x_1, np.r_[0:8, 10:17])
    np.testing.assert_array_equal(x_2, [8, 9, 17, 18])
    # upstream's cut at cumulative n_x (15) would give x_2 = x[15:] = [15, 16, 17, 18]: not a state of space 2
    assert not np.array_equal(x_2, x[15:])
    np.testing.assert_array_equal(space.x_join([x_1, x_2]), x)
    batch = np.stack([x, x + 100.0])
    parts = space.x_split(batch)
    assert parts[0].shape == (2, 15) and parts[1].shape == (2, 4)
    np.testing.assert_array_equal(space.x_join(parts), batch)


def test_product_operations_act_per_factor():
    rng = np.random.default_rng(5)
    factors = [FloatingBaseSpace(1), FixedBaseSpace(2), FloatingBaseSpace(0)]
    space = ProductSpace(factors)
    q_1 = random_configuration(rng, space, (3,))
    q_2 = random_configuration(rng, space, (3,))
    diff = space.configuration_difference(q_1, q_2)
    expected = np.concatenate(
        [
            f.configuration_difference(a, b)
            for f, a, b in zip(factors, space.q_split(q_1), space.q_split(q_2), strict=True)
        ],
        -1,
    )
    np.testing.assert_array_equal(diff, expected)
    q_raw = q_1 * 3.0
    projected = space.project_configuration(q_raw)
    np.testing.assert_allclose(np.linalg.norm(projected[:, 0:4], axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(projected[:, 10:14], axis=-1), 1.0)
    np.testing.assert_array_equal(projected[:, 8:10], q_raw[:, 8:10])


def test_rot_err_and_pos_err():
    space = FloatingBaseSpace(0)
    angles = np.array([0.1, 0.5, 2.0])
    x_1 = np.zeros((3, 13))
    x_1[:, 0] = 1.0
    x_2 = x_1.copy()
    x_2[:, 0] = np.cos(angles / 2)
    x_2[:, 3] = np.sin(angles / 2)
    x_2[:, 4] = [3.0, 0.0, 0.0]
    x_2[:, 5] = [4.0, 1.0, 0.0]
    assert space.rot_err(x_1, x_2) == pytest.approx(np.mean(angles), abs=1e-14)
    assert space.pos_err(x_1, x_2) == pytest.approx((5.0 + 1.0 + 0.0) / 3.0)
    assert space.comparisons["rot_err"](x_1, x_2) == space.rot_err(x_1, x_2)
    np.testing.assert_allclose(space.rotation_distance(x_1, x_2), angles, atol=1e-14)
    # any batch shape, and single states
    assert space.rot_err(x_1[0], x_2[0]) == pytest.approx(0.1)
    assert space.rot_err(x_1.reshape(3, 1, 13), x_2.reshape(3, 1, 13)) == pytest.approx(np.mean(angles))
    # a rotation by more than pi is measured the short way
    x_3 = x_1[:1].copy()
    x_3[0, :4] = [np.cos(3.5 / 2), 0.0, 0.0, np.sin(3.5 / 2)]
    assert space.rot_err(x_1[:1], x_3) == pytest.approx(2 * np.pi - 3.5)


def test_validation_errors():
    space = FloatingBaseSpace(2)
    with pytest.raises(StateDimensionError, match="last axis 9, got shape \\(8,\\)"):
        space.configuration_difference(np.zeros(8), np.zeros(9))
    with pytest.raises(StateDimensionError, match="last axis 17"):
        space.q_v(np.zeros(16))
    with pytest.raises(StateDimensionError, match=">= 0"):
        FixedBaseSpace(-1)
    with pytest.raises(TypeError, match="int"):
        FloatingBaseSpace(1.5)
    with pytest.raises(TypeError, match="factor 1 must be a StateSpace"):
        ProductSpace([FixedBaseSpace(1), "not a space"])
    with pytest.raises(StateDimensionError, match="expected 2 factor states, got 1"):
        ProductSpace([FixedBaseSpace(1), FixedBaseSpace(1)]).x_join([np.zeros(2)])
    with pytest.raises(QuaternionError):
        space.exponential(np.zeros(9), np.zeros(8))


def test_space_equality():
    assert FloatingBaseSpace(2) == FloatingBaseSpace(2)
    assert FloatingBaseSpace(2) != FixedBaseSpace(2)
    assert ProductSpace([FixedBaseSpace(1)]) == ProductSpace([FixedBaseSpace(1)])
    assert ProductSpace([FixedBaseSpace(1)]) != ProductSpace([FixedBaseSpace(2)])
