"""MultibodyPlant building and queries: finalize rules, topology checks, indices and names, per-instance
coordinates, defaults and limits, states, the joint types' own accessors, the flat KinematicTree arrays and the
articulated view used by DofMask."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.multibody import (
    JOINT_PLANAR,
    JOINT_QUATERNION_FLOATING,
    JOINT_REVOLUTE,
    JOINT_WELD,
    AmbiguousNameError,
    JointNotSupportedError,
    Mimic,
    MultibodyIndexError,
    MultibodyPlant,
    MultibodyValueError,
    PlanarJoint,
    PlantFinalizedError,
    PlantNotFinalizedError,
    PrismaticJoint,
    QuaternionFloatingJoint,
    RevoluteJoint,
    TopologyError,
    UnknownNameError,
    WeldJoint,
)


def two_link_plant(finalize=True) -> MultibodyPlant:
    plant = MultibodyPlant("two_link")
    arm = plant.add_model_instance("arm")
    upper = plant.add_body("upper", arm)
    lower = plant.add_body("lower", arm)
    plant.add_joint(RevoluteJoint("shoulder", plant.get_body(0), upper, [0, 0, 1], -2.0, 2.0, damping=0.1))
    elbow_frame = plant.add_frame("elbow_F", upper, spatial.make_transform(None, [1.0, 0, 0]))
    plant.add_joint(PrismaticJoint("slide", elbow_frame, lower, [1, 0, 0], 0.0, 0.5))
    plant.add_frame("tool", lower, spatial.make_transform(spatial.rotation_z(0.5), [0.2, 0, 0]))
    if finalize:
        plant.finalize()
    return plant


def test_queries_before_finalize_raise_and_building_after_raises():
    plant = two_link_plant(finalize=False)
    assert not plant.is_finalized()
    for call in (plant.num_positions, plant.num_velocities, plant.default_positions, plant.create_default_state,
                 plant.position_names, plant.is_velocity_equal_to_qdot, plant.articulated_view,
                 lambda: plant.tree, lambda: plant.calc_body_poses(np.zeros(2))):
        with pytest.raises(PlantNotFinalizedError, match="finalize"):
            call()
    assert plant.num_bodies() == 3 and plant.num_joints() == 2 and plant.num_frames() == 5
    plant.finalize()
    assert plant.is_finalized()
    with pytest.raises(PlantFinalizedError):
        plant.add_body("more", "arm")
    with pytest.raises(PlantFinalizedError):
        plant.add_model_instance("more")
    with pytest.raises(PlantFinalizedError):
        plant.add_frame("f", "upper")
    with pytest.raises(PlantFinalizedError):
        plant.finalize()
    with pytest.raises(PlantFinalizedError):
        plant.add_urdf(urdf_path("panda"))


def test_coordinates_names_defaults_and_limits():
    plant = two_link_plant()
    assert plant.num_positions() == plant.num_velocities() == 2
    assert plant.position_names() == ["shoulder", "slide"] and plant.velocity_names() == ["shoulder", "slide"]
    np.testing.assert_array_equal(plant.position_lower_limits(), [-2.0, 0.0])
    np.testing.assert_array_equal(plant.position_upper_limits(), [2.0, 0.5])
    assert np.all(np.isinf(plant.velocity_upper_limits())) and np.all(np.isinf(plant.acceleration_lower_limits()))
    shoulder = plant.get_joint_by_name("shoulder")
    shoulder.set_default_positions([0.7])
    np.testing.assert_array_equal(plant.default_positions(), [0.7, 0.0])
    state = plant.create_default_state()
    np.testing.assert_array_equal(state.q, [0.7, 0.0])
    np.testing.assert_array_equal(state.v, [0.0, 0.0])
    state.q[1] = 0.3  # mutable, and independent of the defaults
    np.testing.assert_array_equal(plant.default_positions(), [0.7, 0.0])
    assert plant.is_velocity_equal_to_qdot()
    assert plant.get_joint_by_name("slide").position_start == 1


def test_geometry_of_a_hand_built_plant():
    plant = two_link_plant()
    q = np.array([math.pi / 2, 0.25])
    X = plant.calc_body_poses(q)
    np.testing.assert_allclose(X[1], spatial.make_transform(spatial.rotation_z(math.pi / 2)), atol=1e-15)
    np.testing.assert_allclose(X[2][:3, 3], [0.0, 1.25, 0.0], atol=1e-15)
    tool = plant.calc_frame_pose(q, "tool")
    np.testing.assert_allclose(tool[:3, 3], [0.0, 1.45, 0.0], atol=1e-15)
    np.testing.assert_allclose(tool[:3, :3], spatial.rotation_z(math.pi / 2 + 0.5), atol=1e-15)
    J = plant.calc_jacobian(q, "tool")
    np.testing.assert_allclose(J[:, 0], [0, 0, 1, -1.45, 0, 0], atol=1e-15)
    np.testing.assert_allclose(J[:, 1], [0, 0, 0, 0, 1, 0], atol=1e-15)


def test_wrong_sizes_and_types_raise():
    plant = two_link_plant()
    with pytest.raises(MultibodyValueError, match=r"expected shape \(\.\.\., 2\), got \(3,\)"):
        plant.calc_body_poses(np.zeros(3))
    with pytest.raises(MultibodyValueError, match="p_FoQ_F"):
        plant.calc_jacobian(np.zeros(2), "tool", np.zeros(2))
    with pytest.raises(TypeError, match="Frame, Body or frame name"):
        plant.calc_frame_pose(np.zeros(2), 3.5)
    with pytest.raises(MultibodyIndexError, match=r"\[0, 2\)"):
        plant.get_joint(2)
    with pytest.raises(MultibodyIndexError):
        plant.get_model_instance_name(9)
    with pytest.raises(MultibodyValueError, match="dv"):
        plant.integrate_positions(np.zeros(2), np.zeros(3))


def test_unknown_and_ambiguous_names():
    plant = MultibodyPlant()
    for name in ("left", "right"):
        plant.add_urdf(urdf_path("panda"), model_name=name)
    plant.finalize()
    with pytest.raises(AmbiguousNameError, match="'left', 'right'"):
        plant.get_body_by_name("panda_hand")
    assert plant.get_body_by_name("panda_hand", "right").model_instance == plant.get_model_instance_by_name("right")
    with pytest.raises(UnknownNameError, match="did you mean 'panda_joint4'") as error:
        plant.get_joint_by_name("panda_jiont4", "left")
    assert "model instance 'left'" in str(error.value)
    with pytest.raises(UnknownNameError, match="'right'"):
        plant.get_model_instance_by_name("rihgt")
    assert plant.has_joint_named("panda_joint1") and not plant.has_joint_named("panda_joint1", "world")
    assert plant.get_frame_by_name("panda_link3", "left").is_body_frame()


def test_per_instance_positions_and_velocities():
    plant = MultibodyPlant()
    arm = plant.add_urdf(urdf_path("panda"), model_name="arm")
    dog = plant.add_urdf(urdf_path("go1"), model_name="dog", base_joint="floating")
    plant.finalize()
    assert plant.num_positions(arm) == 8 and plant.num_positions("dog") == 19 and plant.num_velocities(dog) == 18
    state = plant.create_default_state()
    q_dog = np.arange(19.0)
    plant.set_positions(state, dog, q_dog)
    np.testing.assert_array_equal(plant.get_positions(state, dog), q_dog)
    np.testing.assert_array_equal(state.q[:8], plant.default_positions()[:8])
    batch = np.zeros((4, plant.num_positions()))
    plant.set_positions(batch, "arm", np.ones(8))
    np.testing.assert_array_equal(plant.get_positions(batch, arm), np.ones((4, 8)))
    plant.set_velocities(state, dog, np.full(18, 2.0))
    np.testing.assert_array_equal(plant.get_velocities(state.v, dog), np.full(18, 2.0))
    with pytest.raises(MultibodyValueError, match="q_instance"):
        plant.set_positions(state, dog, np.zeros(18))
    assert plant.get_body_indices(arm)[0] == 1 and len(plant.get_body_indices("dog")) == plant.num_bodies() - 1 - \
        len(plant.get_body_indices(arm))
    (base,) = plant.floating_base_joints()
    assert base.model_instance == dog and base.type_name == "quaternion_floating"
    np.testing.assert_array_equal(plant.default_positions()[8:15], [1, 0, 0, 0, 0, 0, 0])
    assert not plant.is_velocity_equal_to_qdot()


def test_free_bodies_get_a_floating_joint_and_topology_is_checked():
    plant = MultibodyPlant()
    instance = plant.add_model_instance("m")
    free = plant.add_body("free", instance)
    plant.finalize()
    joint = plant.get_inboard_joint(free)
    assert isinstance(joint, QuaternionFloatingJoint) and joint.name == "free"
    assert plant.position_names() == ["free_qw", "free_qx", "free_qy", "free_qz", "free_x", "free_y", "free_z"]

    plant = MultibodyPlant()
    instance = plant.add_model_instance("m")
    a, b = plant.add_body("a", instance), plant.add_body("b", instance)
    plant.add_joint(WeldJoint("w1", plant.get_body(0), a))
    with pytest.raises(TopologyError, match="already has the inboard joint 'w1'"):
        plant.add_joint(WeldJoint("w2", b, a))
    with pytest.raises(TopologyError, match="world body cannot be a child"):
        plant.add_joint(WeldJoint("w3", a, plant.get_body(0)))
    with pytest.raises(MultibodyValueError, match="already has a joint 'w1'"):
        plant.add_joint(WeldJoint("w1", a, b))
    with pytest.raises(MultibodyValueError, match="same body"):
        WeldJoint("self", a, a)

    plant = MultibodyPlant()
    instance = plant.add_model_instance("m")
    a, b = plant.add_body("a", instance), plant.add_body("b", instance)
    plant.add_joint(RevoluteJoint("j", b, a, [1, 0, 0]))
    plant.add_joint(WeldJoint("w", plant.get_body(0), b))
    with pytest.raises(TopologyError, match="must be added before child body"):
        plant.finalize()

    other = MultibodyPlant()
    foreign = other.add_body("x", other.add_model_instance("o"))
    with pytest.raises(MultibodyValueError, match="another plant"):
        plant.add_joint(WeldJoint("f", plant.get_body(0), foreign))


def test_building_rejects_duplicates_and_bad_values():
    plant = MultibodyPlant()
    with pytest.raises(MultibodyValueError, match="already has a model instance named 'world'"):
        plant.add_model_instance("world")
    instance = plant.add_model_instance("m")
    body = plant.add_body("b", instance)
    with pytest.raises(MultibodyValueError, match="already has a body 'b'"):
        plant.add_body("b", instance)
    with pytest.raises(MultibodyValueError, match="world model instance"):
        plant.add_body("c", 0)
    with pytest.raises(MultibodyValueError, match="already has a frame named 'b'"):
        plant.add_frame("b", body)
    with pytest.raises(MultibodyValueError, match="proper rotation"):
        plant.add_frame("f", body, np.diag([1.0, 1.0, -1.0, 1.0]))
    with pytest.raises(MultibodyValueError, match="nonzero"):
        RevoluteJoint("r", plant.get_body(0), body, [0, 0, 0])
    with pytest.raises(MultibodyValueError, match="exceed"):
        PrismaticJoint("p", plant.get_body(0), body, [0, 0, 1], 1.0, -1.0)
    joint = plant.add_joint(RevoluteJoint("r", plant.get_body(0), body, [0, 0, 2]))
    np.testing.assert_array_equal(joint.axis, [0, 0, 1])
    with pytest.raises(MultibodyValueError, match="one velocity"):
        plant.add_joint_actuator("a", WeldJoint("w", body, plant.add_body("c", instance)))
    with pytest.raises(MultibodyValueError, match="positive effort"):
        plant.add_joint_actuator("a", joint, effort_limit=0.0)
    actuator = plant.add_joint_actuator("motor", "r", effort_limit=3.0)
    assert (actuator.index, actuator.joint, plant.num_actuators("m")) == (0, joint, 1)


def test_revolute_prismatic_and_floating_accessors():
    plant = MultibodyPlant()
    instance = plant.add_model_instance("m")
    a, b, c = (plant.add_body(n, instance) for n in "abc")
    free = plant.add_joint(QuaternionFloatingJoint("free", plant.get_body(0), a, 0.1, 0.2))
    hinge = plant.add_joint(RevoluteJoint("hinge", a, b, [0, 1, 0]))
    slide = plant.add_joint(PrismaticJoint("slide", b, c, [0, 0, 1], mimic=None))
    X = spatial.make_transform(spatial.rotvec_to_matrix([0.1, -0.4, 0.3]), [1.0, 2.0, 3.0])
    free.set_default_pose(X)
    plant.finalize()
    np.testing.assert_allclose(free.get_default_pose(), X, atol=1e-15)
    np.testing.assert_array_equal(free.damping, [0.1, 0.1, 0.1, 0.2, 0.2, 0.2])
    state = plant.create_default_state()
    np.testing.assert_allclose(free.get_pose(state), X, atol=1e-15)
    assert hinge.set_angle(state, 0.4).get_angle(state) == 0.4
    assert slide.set_translation(state, -0.2).get_translation(state) == -0.2
    hinge.set_angular_rate(state, 1.5)
    slide.set_translation_rate(state, -0.5)
    np.testing.assert_array_equal(hinge.get_spatial_velocity(state), [0, 1.5, 0, 0, 0, 0])
    np.testing.assert_array_equal(slide.get_spatial_velocity(state), [0, 0, 0, 0, 0, -0.5])
    np.testing.assert_allclose(slide.get_pose(state), spatial.make_transform(None, [0, 0, -0.2]))
    V = np.array([0.1, 0.2, 0.3, -1.0, -2.0, -3.0])
    free.set_spatial_velocity(state, V)
    np.testing.assert_array_equal(free.get_spatial_velocity(state), V)
    np.testing.assert_array_equal(free.get_angular_velocity(state), V[:3])
    free.set_quaternion(state, [1.0005, 0, 0, 0])  # near-unit: stored normalized
    np.testing.assert_array_equal(free.get_quaternion(state), [1, 0, 0, 0])
    with pytest.raises(ValueError, match="norm 2"):
        free.set_quaternion(state, [2.0, 0, 0, 0])
    free.set_translation(state, [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(state.q[4:7], [4.0, 5.0, 6.0])
    weld_plant = two_link_plant(finalize=False)
    tip = weld_plant.add_body("tip", "arm")
    weld = weld_plant.add_joint(WeldJoint("w", weld_plant.get_body_by_name("lower"), tip, X))
    weld_plant.finalize()
    weld_state = weld_plant.create_default_state()
    np.testing.assert_array_equal(weld.get_pose(weld_state), X)
    np.testing.assert_array_equal(weld.get_spatial_velocity(weld_state), np.zeros(6))
    with pytest.raises(JointNotSupportedError, match="revolute"):
        hinge.set_pose(state, np.eye(4))
    with pytest.raises(JointNotSupportedError, match="not implemented for joint type prismatic"):
        slide.set_default_pose(np.eye(4))
    assert (free.can_rotate(), free.can_translate(), hinge.can_translate(), slide.can_rotate()) == (
        True, True, False, False)


def test_mimic_joint_built_in_code_and_its_jacobian():
    plant = MultibodyPlant()
    instance = plant.add_model_instance("gripper")
    palm, left, right, tip = (plant.add_body(n, instance) for n in ("palm", "left", "right", "tip"))
    plant.add_joint(RevoluteJoint("wrist", plant.get_body(0), palm, [0, 0, 1]))
    driver = plant.add_joint(PrismaticJoint("left_joint", palm, left, [0, 1, 0], 0.0, 0.05))
    follower = plant.add_joint(PrismaticJoint("right_joint", palm, right, [0, 1, 0], mimic=Mimic(driver, -1.0)))
    plant.add_joint(RevoluteJoint("tip_joint", right, tip, [1, 0, 0], mimic=Mimic(follower, 2.0, 0.1)))
    plant.finalize()
    assert plant.num_positions() == 2 and plant.position_names() == ["wrist", "left_joint"]
    q = np.array([0.3, 0.02])
    state = plant.create_default_state()
    state.q[:] = q
    assert follower.get_translation(state) == pytest.approx(-0.02)
    assert plant.get_joint_by_name("tip_joint").get_angle(state) == pytest.approx(2.0 * -0.02 + 0.1)
    state.v[:] = [0.0, 0.5]
    np.testing.assert_allclose(follower.get_spatial_velocity(state), [0, 0, 0, 0, -0.5, 0])
    np.testing.assert_allclose(follower.get_pose(state), spatial.make_transform(None, [0, -0.02, 0]))
    np.testing.assert_allclose(plant.get_joint_by_name("tip_joint").get_spatial_velocity(state), [-1.0, 0, 0, 0, 0, 0])
    with pytest.raises(IndexError):
        follower.position_suffix(0)  # no coordinates of its own
    tree = plant.tree
    assert tree.mimic_q[tip.index] == 1 and tree.mimic_multiplier[tip.index] == -2.0
    assert tree.mimic_offset[tip.index] == pytest.approx(0.1)
    J = plant.calc_jacobian(q, tip, [0.0, 0.0, 0.1])
    eps = 1e-6
    Xp = plant.calc_frame_pose(q + [0, eps], tip)
    Xm = plant.calc_frame_pose(q - [0, eps], tip)
    np.testing.assert_allclose(spatial.matrix_to_rotvec(Xp[:3, :3] @ Xm[:3, :3].T) / (2 * eps), J[:3, 1],
                               atol=1e-8)
    p = np.array([0.0, 0.0, 0.1])
    np.testing.assert_allclose(((Xp - Xm)[:3, :3] @ p + (Xp - Xm)[:3, 3]) / (2 * eps), J[3:, 1], atol=1e-8)
    with pytest.raises(MultibodyValueError, match="revolute or prismatic source"):
        RevoluteJoint("bad", palm, tip, [1, 0, 0], mimic=Mimic(WeldJoint("w", palm, left)))


def test_kinematic_tree_arrays():
    plant = MultibodyPlant()
    plant.add_urdf(urdf_path("panda"), model_name="arm")
    plant.add_urdf(urdf_path("go1"), model_name="dog", base_joint="floating")
    instance = plant.add_model_instance("sled")
    sled = plant.add_body("sled", instance)
    plant.add_joint(PlanarJoint("plane", plant.get_body(0), sled))
    plant.add_frame("imu", sled, spatial.make_transform(None, [0, 0, 0.1]))
    plant.finalize()
    tree = plant.tree
    nb = plant.num_bodies()
    assert (tree.num_bodies, tree.nq, tree.nv, tree.num_frames) == (nb, plant.num_positions(),
                                                                    plant.num_velocities(), plant.num_frames())
    for name in ("parent", "joint_type", "q_start", "v_start", "mimic_q", "mimic_v", "frame_body"):
        array = getattr(tree, name)
        assert array.dtype == np.int64 and array.flags.c_contiguous and not array.flags.writeable
    for name, shape in (("X_PF", (nb, 4, 4)), ("X_MC", (nb, 4, 4)), ("axis", (nb, 3)), ("mimic_multiplier", (nb,)),
                        ("mimic_offset", (nb,)), ("X_BF", (plant.num_frames(), 4, 4))):
        array = getattr(tree, name)
        assert array.dtype == np.float64 and array.flags.c_contiguous and array.shape == shape
    assert tree.parent[0] == -1 and np.all(tree.parent[1:] < np.arange(1, nb))
    np.testing.assert_array_equal(tree.frame_body[:nb], np.arange(nb))
    assert tree.frame_body[-1] == sled.index
    for b in range(1, nb):
        joint = plant.get_inboard_joint(b)
        assert tree.parent[b] == joint.parent_body.index
        assert tree.q_start[b] == joint.position_start and tree.v_start[b] == joint.velocity_start
    assert tree.joint_type[sled.index] == JOINT_PLANAR
    assert tree.joint_type[plant.floating_base_joints()[0].child_body.index] == JOINT_QUATERNION_FLOATING
    assert tree.joint_type[plant.get_body_by_name("trunk").index] == JOINT_WELD
    assert tree.joint_type[plant.get_body_by_name("panda_link3").index] == JOINT_REVOLUTE
    assert tree.joint_type[plant.get_body_by_name("panda_link0").index] == JOINT_WELD
    hand = plant.get_body_by_name("panda_link8").index
    np.testing.assert_array_equal(tree.axis[hand], [0, 0, 0])


def test_articulated_view_drops_floating_coordinates():
    plant = MultibodyPlant("mixed")
    arm = plant.add_urdf(urdf_path("panda"), model_name="arm")
    dog = plant.add_urdf(urdf_path("go1"), model_name="dog", base_joint="floating")
    plant.finalize()
    view = plant.articulated_view()
    assert view.name == "mixed" and view.is_velocity_equal_to_qdot()
    assert view.num_positions() == view.num_velocities() == 8 + 12
    np.testing.assert_array_equal(view.q_indices, list(range(8)) + list(range(15, 27)))
    np.testing.assert_array_equal(view.v_indices, list(range(8)) + list(range(14, 26)))
    names = plant.position_names()
    assert view.position_names() == [names[i] for i in view.q_indices]
    base = plant.floating_base_joints()[0]
    assert base.index not in view.get_joint_indices(dog)
    with pytest.raises(MultibodyValueError, match="not part of the articulated view"):
        view.get_joint(base.index)
    starts = {}
    for index in view.get_joint_indices(dog):
        joint = view.get_joint(index)
        if joint.num_positions:
            starts[joint.name] = joint.position_start
            assert view.q_indices[joint.position_start] == plant.get_joint(index).position_start
    assert sorted(starts.values()) == list(range(8, 20))
    assert view.get_model_instance_by_name("arm") == arm and view.num_model_instances() == 3
    no_float = MultibodyPlant()
    no_float.add_urdf(urdf_path("panda"))
    no_float.finalize()
    np.testing.assert_array_equal(no_float.articulated_view().q_indices, np.arange(8))


def test_dof_mask_works_through_the_articulated_view():
    dof_mask = pytest.importorskip("ros_dofkit.core.dof_mask")
    plant = MultibodyPlant()
    plant.add_urdf(urdf_path("panda"), model_name="arm")
    plant.add_urdf(urdf_path("go1"), model_name="dog", base_joint="floating")
    plant.finalize()
    view = plant.articulated_view()
    mask = dof_mask.DofMask.make_from_model(view, "dog")
    assert mask.size() == 20 and mask.count() == 12
    with pytest.raises(ValueError):
        dof_mask.DofMask.make_from_model(plant, "arm")


def test_joint_values_answer_to_the_pydrake_method_spelling():
    """pydrake has Joint.default_positions() and the limit getters as methods; ros_dofkit has properties. Both
    spellings work and give equal copies (a caller cannot modify the joint through either)."""
    plant = two_link_plant()
    joint = plant.get_joint_by_name("shoulder")
    joint.set_position_limits([-1.0], [2.0])
    for name in ("default_positions", "position_lower_limits", "position_upper_limits", "velocity_lower_limits",
                 "velocity_upper_limits", "acceleration_lower_limits", "acceleration_upper_limits", "effort_limits"):
        as_property = getattr(joint, name)
        as_method = getattr(joint, name)()
        assert type(as_method) is np.ndarray
        np.testing.assert_array_equal(as_method, as_property)
        as_method[...] = 42.0
        as_property[...] = 42.0
        assert not np.any(getattr(joint, name) == 42.0)
    np.testing.assert_array_equal(joint.position_lower_limits(), [-1.0])
    np.testing.assert_array_equal(plant.default_positions(), np.concatenate(
        [plant.get_joint(i).default_positions() for i in plant.get_joint_indices() if plant.get_joint(i).num_positions]
    ))


BRANCHED_URDF = """<robot name="torso">
  <link name="chest"/><link name="l_upper"/><link name="r_upper"/><link name="l_lower"/><link name="r_lower"/>
  <joint name="l1" type="revolute"><parent link="chest"/><child link="l_upper"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="r1" type="revolute"><parent link="chest"/><child link="r_upper"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="l2" type="revolute"><parent link="l_upper"/><child link="l_lower"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="r2" type="revolute"><parent link="r_upper"/><child link="r_lower"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def test_drake_coordinate_mapping_by_names():
    """doc/architecture.md, Drake conventions 1 and 2: URDF order inside an instance, instances in the order added
    and contiguous; the name recipe maps to and from an order like Drake's (depth-first, free bodies last)."""
    plant = MultibodyPlant()
    plant.add_urdf(BRANCHED_URDF, base_joint="floating")
    plant.add_urdf(BRANCHED_URDF, model_name="fixed_torso")
    plant.finalize()
    assert plant.position_names("torso") == [f"chest_{s}" for s in ("qw", "qx", "qy", "qz", "x", "y", "z")] + [
        "l1", "r1", "l2", "r2"]
    assert plant.position_names("fixed_torso") == ["l1", "r1", "l2", "r2"]  # URDF order, not depth-first
    assert plant.position_names() == plant.position_names("torso") + plant.position_names("fixed_torso")
    assert plant.velocity_names("torso")[:6] == [f"chest_{s}" for s in ("wx", "wy", "wz", "vx", "vy", "vz")]
    # Drake's order for this plant: the welded torso's tree first, depth-first; the free torso last.
    depth_first = ["l1", "l2", "r1", "r2"]
    drake_names = {"fixed_torso": depth_first, "torso": plant.position_names("torso")[:7] + depth_first}
    rng = np.random.default_rng(3)
    q = plant.default_positions() + rng.uniform(-0.5, 0.5, plant.num_positions())
    q[:4] /= np.linalg.norm(q[:4])
    q_drake = {}
    for instance, names in drake_names.items():
        ours = plant.position_names(instance)
        q_drake[instance] = plant.get_positions(q, instance)[[ours.index(n) for n in names]]
        perm = [names.index(n) for n in ours]  # the recipe of the doc, instance by instance
        np.testing.assert_array_equal(q_drake[instance][perm], plant.get_positions(q, instance))
    assert q_drake["fixed_torso"][1] == q[plant.get_joint_by_name("l2", "fixed_torso").position_start]
