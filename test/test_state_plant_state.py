"""Tests of ros_dofkit.core.state.plant_state: ProductSpace of a plant and plant (q, v) <-> state vectors.

The two-instance plant is a floating Solo-12 quadruped plus a fixed Panda arm from example-robot-data. Truth
for the body-axes angular velocity comes from the plant's own kinematics (body pose and angular Jacobian),
which the state module does not use.
"""

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core.multibody import (
    MultibodyPlant,
    QuaternionFloatingJoint,
    RevoluteJoint,
    WeldJoint,
)
from ros_dofkit.core.state import (
    FixedBaseSpace,
    FloatingBaseSpace,
    PlantNotFinalizedError,
    ProductSpace,
    StateIndexError,
    StateSpaceMismatchError,
    UnknownNameError,
    UnsupportedModelError,
)
from ros_dofkit.core.state.plant_state import (
    PlantStateConverter,
    context_to_state,
    model_instance_coordinates,
    product_space_for_plant,
    space_for_model_instance,
    state_to_context,
)


@pytest.fixture(scope="module")
def quadruped_and_arm():
    plant = MultibodyPlant()
    solo = plant.add_urdf(str(urdf_path("solo12")), base_joint="floating")
    panda = plant.add_urdf(str(urdf_path("panda")), base_joint="fixed")
    plant.finalize()
    return plant, solo, panda


def random_plant_state(plant, rng, batch=()):
    q = np.broadcast_to(plant.default_positions(), batch + (plant.num_positions(),)).copy()
    q += rng.normal(scale=0.5, size=q.shape)
    for joint in plant.floating_base_joints():
        s = joint.position_start
        q[..., s : s + 4] /= np.linalg.norm(q[..., s : s + 4], axis=-1, keepdims=True)
    v = rng.normal(size=batch + (plant.num_velocities(),))
    return q, v


def test_product_space_of_a_two_instance_plant(quadruped_and_arm):
    plant, solo, panda = quadruped_and_arm
    space = product_space_for_plant(plant)
    assert space == ProductSpace([FixedBaseSpace(0), FloatingBaseSpace(12), FixedBaseSpace(8)])
    assert (space.n_q, space.n_v) == (plant.num_positions(), plant.num_velocities())
    np.testing.assert_array_equal(space.q_splits, [0, 19])
    np.testing.assert_array_equal(space.v_splits, [0, 18])
    assert space_for_model_instance(plant, "solo") == FloatingBaseSpace(12)
    assert space_for_model_instance(plant, panda) == FixedBaseSpace(8)
    coords = model_instance_coordinates(plant, solo)
    assert coords.floating_joint is plant.floating_base_joints()[0]
    np.testing.assert_array_equal(coords.q_indices, np.arange(0, 19))
    np.testing.assert_array_equal(coords.v_indices, np.arange(0, 18))


def test_plant_to_state_layout_and_body_angular_velocity(quadruped_and_arm):
    plant, solo, panda = quadruped_and_arm
    converter = PlantStateConverter(plant)
    rng = np.random.default_rng(7)
    q, v = random_plant_state(plant, rng, (4,))
    x = converter.plant_to_state(q, v)
    assert x.shape == (4, 27 + 26)
    space = converter.space
    q_x, v_x = space.q_v(x)
    _, q_solo, q_panda = space.q_split(q_x)
    _, v_solo, v_panda = space.v_split(v_x)
    # configurations are Drake's, per instance, in the plant's own per-instance order
    np.testing.assert_allclose(q_solo, plant.get_positions(q, solo), atol=1e-15)
    np.testing.assert_array_equal(q_panda, plant.get_positions(q, panda))
    np.testing.assert_array_equal(v_panda, plant.get_velocities(v, panda))
    # floating base: angular velocity in body axes, linear velocity still in world axes, joints unchanged
    base = plant.floating_base_joints()[0].child_body
    R_WB = plant.calc_body_poses(q)[:, base.index, :3, :3]
    w_WB_W = np.einsum("bij,bj->bi", plant.calc_angular_jacobian(q, base), v)
    np.testing.assert_allclose(v_solo[:, :3], np.einsum("bji,bj->bi", R_WB, w_WB_W), atol=1e-12)
    np.testing.assert_array_equal(v_solo[:, 3:], plant.get_velocities(v, solo)[:, 3:])


def test_plant_state_round_trips_batched(quadruped_and_arm):
    plant, _, _ = quadruped_and_arm
    converter = PlantStateConverter(plant)
    rng = np.random.default_rng(11)
    for batch in [(), (3,), (2, 2)]:
        q, v = random_plant_state(plant, rng, batch)
        q_back, v_back = converter.state_to_plant(converter.plant_to_state(q, v))
        np.testing.assert_allclose(q_back, q, atol=1e-15)
        np.testing.assert_allclose(v_back, v, atol=1e-13)
        x = converter.plant_to_state(q, v)
        np.testing.assert_allclose(converter.plant_to_state(*converter.state_to_plant(x)), x, atol=1e-13)


def test_context_round_trip_and_subset_of_instances(quadruped_and_arm):
    plant, solo, panda = quadruped_and_arm
    rng = np.random.default_rng(2)
    state = plant.create_default_state()
    state.q[:], state.v[:] = random_plant_state(plant, rng)
    original = state.copy()
    space = product_space_for_plant(plant)
    model_ids = list(range(plant.num_model_instances()))
    x = context_to_state(plant, state, model_ids, space)
    assert x.shape == (space.n_x,)
    fresh = plant.create_default_state()
    state_to_context(plant, fresh, x[None, :], model_ids, space)  # (1, n_x) accepted as upstream
    np.testing.assert_allclose(fresh.q, original.q, atol=1e-15)
    np.testing.assert_allclose(fresh.v, original.v, atol=1e-13)
    # only the arm: the quadruped's coordinates are left alone
    arm_only = PlantStateConverter(plant, ["panda"])
    assert arm_only.space == ProductSpace([FixedBaseSpace(8)])
    x_arm = arm_only.context_to_state(original)
    np.testing.assert_array_equal(x_arm, np.concatenate([original.q[19:], original.v[18:]]))
    target = plant.create_default_state()
    arm_only.state_to_context(x_arm + 1.0, target)
    np.testing.assert_array_equal(target.q[:19], plant.default_positions()[:19])
    np.testing.assert_array_equal(target.q[19:], original.q[19:] + 1.0)
    np.testing.assert_array_equal(target.v[:18], 0.0)
    # the model instance order decides the factor order
    reordered = PlantStateConverter(plant, [panda, solo])
    assert reordered.space == ProductSpace([FixedBaseSpace(8), FloatingBaseSpace(12)])
    x_re = reordered.context_to_state(original)
    np.testing.assert_array_equal(x_re[:8], original.q[19:])


def test_instances_and_spaces_must_correspond(quadruped_and_arm):
    plant, solo, panda = quadruped_and_arm
    with pytest.raises(StateSpaceMismatchError, match="2 model instances .* has 3 factors"):
        PlantStateConverter(
            plant, [solo, panda], ProductSpace([FloatingBaseSpace(12), FixedBaseSpace(8), FixedBaseSpace(0)])
        )
    with pytest.raises(
        StateSpaceMismatchError, match=r"'solo' .* needs FloatingBaseSpace\(12\).* FixedBaseSpace\(18\)"
    ):
        PlantStateConverter(plant, [solo, panda], ProductSpace([FixedBaseSpace(18), FixedBaseSpace(8)]))
    with pytest.raises(StateSpaceMismatchError, match="panda"):
        PlantStateConverter(plant, [solo, panda], ProductSpace([FloatingBaseSpace(12), FixedBaseSpace(7)]))
    with pytest.raises(StateSpaceMismatchError, match="distinct"):
        PlantStateConverter(plant, [panda, "panda"])
    with pytest.raises(TypeError, match="ProductSpace"):
        PlantStateConverter(plant, [panda], FixedBaseSpace(8))
    with pytest.raises(UnknownNameError, match="panda"):
        PlantStateConverter(plant, ["pandas"])
    with pytest.raises(StateIndexError, match=r"\[0, 3\), got 3"):
        PlantStateConverter(plant, [3])
    converter = PlantStateConverter(plant)
    with pytest.raises(ValueError, match="last axis of length 53"):
        converter.state_to_plant(np.zeros(52))
    with pytest.raises(ValueError, match="one state"):
        converter.state_to_context(np.zeros((2, 53)), plant.create_default_state())


def _free_body_plant(build):
    plant = MultibodyPlant()
    instance = plant.add_model_instance("robot")
    world = plant.get_body(0).body_frame
    build(plant, instance, world)
    plant.finalize()
    return plant, instance


def test_floating_joint_must_head_the_instance_coordinates():
    def build(plant, instance, world):
        a = plant.add_body("a", instance)
        b = plant.add_body("b", instance)
        plant.add_joint(RevoluteJoint("hinge", world, a.body_frame, [0, 0, 1]))
        plant.add_joint(QuaternionFloatingJoint("free", world, b.body_frame))

    plant, instance = _free_body_plant(build)
    with pytest.raises(UnsupportedModelError, match=r"starts at q\[1\], v\[1\]; expected .* q\[0\], v\[0\]"):
        space_for_model_instance(plant, instance)


def test_floating_joint_inside_a_chain_is_rejected():
    def build(plant, instance, world):
        a = plant.add_body("a", instance)
        b = plant.add_body("b", instance)
        plant.add_joint(WeldJoint("weld", world, a.body_frame))
        plant.add_joint(QuaternionFloatingJoint("free", a.body_frame, b.body_frame))

    plant, instance = _free_body_plant(build)
    with pytest.raises(UnsupportedModelError, match="expected the world as parent"):
        PlantStateConverter(plant)


def test_two_floating_joints_in_one_instance_are_rejected():
    def build(plant, instance, world):
        for name in ("a", "b"):
            body = plant.add_body(name, instance)
            plant.add_joint(QuaternionFloatingJoint(f"free_{name}", world, body.body_frame))

    plant, instance = _free_body_plant(build)
    with pytest.raises(UnsupportedModelError, match=r"2 quaternion floating joints \['free_a', 'free_b'\]"):
        model_instance_coordinates(plant, instance)


def test_plant_must_be_finalized():
    plant = MultibodyPlant()
    plant.add_model_instance("robot")
    with pytest.raises(PlantNotFinalizedError, match="finalize"):
        PlantStateConverter(plant)
    with pytest.raises(RuntimeError):
        product_space_for_plant(plant)


def test_a_single_model_instance_may_be_passed_alone(quadruped_and_arm):
    plant, _, panda = quadruped_and_arm
    assert PlantStateConverter(plant, "panda").space == PlantStateConverter(plant, [panda]).space
