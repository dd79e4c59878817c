"""Tests of DofMask against real plants: make_from_model, get_joints and the articulated view (SPEC 1.3-1.4, 9.2).

Plants are built from example-robot-data URDFs (Panda arm, Allegro hand, Go1 quadruped). The expected joint
and coordinate orders come from reading the URDF directly (moving, non-mimic joints in document order, which is
parent-before-child for these files) and, independently, from Pinocchio's parser.
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio
import pytest

from robot_models import robots_dir, urdf_path
from ros_dofkit.core.dof_mask import DofMask, DofMaskSizeError, DofMaskTypeError, IncompatiblePlantError
from ros_dofkit.core.multibody import MultibodyPlant

MOVING_TYPES = {"revolute", "continuous", "prismatic", "planar", "floating"}

# A robot with links but no moving joint: a model instance with zero dofs.
SENSOR_MAST_URDF = """<robot name="mast">
  <link name="mast_base"/>
  <link name="mast_top"/>
  <joint name="mast_weld" type="fixed"><parent link="mast_base"/><child link="mast_top"/></joint>
</robot>"""


def panda_urdf() -> Path:
    return urdf_path("panda")


def go1_urdf() -> Path:
    return urdf_path("go1")


def hand_urdf() -> Path:
    """Allegro right hand (16 revolute joints, four fingers branching from the palm)."""
    base = robots_dir()
    path = base / "allegro_hand_description" / "urdf" / "allegro_right_hand.urdf" if base else None
    if path is None or not path.is_file():
        pytest.skip("the Allegro hand URDF of example-robot-data is not installed")
    return path


def urdf_coordinate_joints(path: Path) -> list[str]:
    """Joints that own coordinates (moving, not mimic), in document order: read straight from the XML."""
    root = ET.parse(path).getroot()
    return [
        joint.get("name")
        for joint in root.findall("joint")
        if joint.get("type") in MOVING_TYPES and joint.find("mimic") is None
    ]


def pinocchio_joint_names(path: Path) -> set[str]:
    model = pinocchio.buildModelFromUrdf(str(path))
    return {name for name in model.names[1:]}


def selected_names(mask: DofMask, plant) -> list[str]:
    return mask.get_from_array(np.asarray(plant.position_names(), dtype=object)).tolist()


def joint_names(plant, joint_indices) -> list[str]:
    return [plant.get_joint(index).name for index in joint_indices]


@pytest.fixture(scope="module")
def arm_and_hand():
    plant = MultibodyPlant(name="arm_and_hand")
    plant.add_urdf(str(panda_urdf()), model_name="panda")
    plant.add_urdf(str(hand_urdf()), model_name="hand", X_PF=np.array([
        [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]))
    plant.finalize()
    return plant


@pytest.fixture(scope="module")
def field():
    """A floating quadruped, a fixed arm and a zero-dof instance in one plant."""
    plant = MultibodyPlant(name="field")
    plant.add_urdf(str(go1_urdf()), model_name="go1", base_joint="floating")
    plant.add_urdf(str(panda_urdf()), model_name="panda")
    plant.add_urdf(SENSOR_MAST_URDF, model_name="mast")
    plant.finalize()
    return plant


# ------------------------------------------------------------------------------------------------------
# make_from_model on a plant with two model instances


def test_references_agree():
    # The two independent references agree with each other (Pinocchio also keeps the mimic finger joint).
    assert set(urdf_coordinate_joints(panda_urdf())) == pinocchio_joint_names(panda_urdf()) - {"panda_finger_joint2"}
    assert set(urdf_coordinate_joints(hand_urdf())) == pinocchio_joint_names(hand_urdf())
    assert len(urdf_coordinate_joints(panda_urdf())) == 8 and len(urdf_coordinate_joints(hand_urdf())) == 16


def test_make_from_model_selects_each_instance_in_plant_order(arm_and_hand):
    plant = arm_and_hand
    panda = DofMask.make_from_model(plant, model_name="panda")
    hand = DofMask.make_from_model(plant, model_name="hand")
    assert panda.size() == hand.size() == plant.num_positions() == 24
    assert panda.count() == plant.num_positions(plant.get_model_instance_by_name("panda")) == 8
    assert hand.count() == 16
    # dof order checked by name: the instance's coordinates, parent before child in URDF order
    assert selected_names(panda, plant) == urdf_coordinate_joints(panda_urdf())
    assert selected_names(hand, plant) == urdf_coordinate_joints(hand_urdf())
    # model instances in the order added
    assert panda.selected_to_full_index() == list(range(8))
    assert hand.selected_to_full_index() == list(range(8, 24))
    # the instances partition the plant's dofs
    assert (panda & hand).count() == 0
    assert panda | hand == DofMask(size=24, value=True)
    assert ~panda == hand


def test_make_from_model_by_index_name_and_positional_agree(arm_and_hand):
    plant = arm_and_hand
    for name in ("panda", "hand"):
        index = plant.get_model_instance_by_name(name)
        by_name = DofMask.make_from_model(plant, model_name=name)
        assert DofMask.make_from_model(plant, model_instance=index) == by_name
        assert DofMask.make_from_model(plant, index) == by_name
        assert DofMask.make_from_model(plant, name) == by_name
        assert DofMask.make_from_model(plant=plant, model_instance=np.int64(index)) == by_name


def test_make_from_model_world_instance_is_all_false(arm_and_hand):
    world = DofMask.make_from_model(arm_and_hand, model_name="world")
    assert world == DofMask(size=24, value=False)


def test_make_from_model_unknown_name_raises_the_plants_error_listing_instances(arm_and_hand):
    with pytest.raises(ValueError, match="panda") as info:
        DofMask.make_from_model(arm_and_hand, model_name="pandaa")
    assert "pandaa" in str(info.value)
    with pytest.raises(ValueError) as info:
        DofMask.make_from_model(arm_and_hand, "no_such_robot")
    assert "hand" in str(info.value) and "panda" in str(info.value)


def test_make_from_model_unknown_index_raises(arm_and_hand):
    with pytest.raises((IndexError, ValueError), match="17"):
        DofMask.make_from_model(arm_and_hand, model_instance=17)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"model": "panda", "model_name": "panda"},
        {"model_instance": 1, "model_name": "panda"},
        {"model_instance": "panda"},
        {"model_instance": 1.0},
        {"model_instance": True},
        {"model_name": 1},
    ],
)
def test_make_from_model_argument_errors(arm_and_hand, kwargs):
    with pytest.raises(TypeError) as info:
        DofMask.make_from_model(arm_and_hand, **kwargs)
    assert isinstance(info.value, DofMaskTypeError)


# ------------------------------------------------------------------------------------------------------
# get_joints


def test_get_joints_returns_the_instance_joints_in_order(arm_and_hand):
    plant = arm_and_hand
    panda = DofMask.make_from_model(plant, "panda")
    hand = DofMask.make_from_model(plant, "hand")
    for mask, urdf in ((panda, panda_urdf()), (hand, hand_urdf())):
        joints = mask.get_joints(plant)
        assert joints == sorted(joints) and all(type(index) is int for index in joints)
        assert joint_names(plant, joints) == urdf_coordinate_joints(urdf)
    both = (panda | hand).get_joints(plant)
    assert both == sorted(panda.get_joints(plant) + hand.get_joints(plant))
    assert DofMask(size=24, value=False).get_joints(plant) == []


def test_get_joints_never_reports_welds_or_mimic_joints(arm_and_hand):
    plant = arm_and_hand
    everything = DofMask(size=plant.num_positions(), value=True).get_joints(plant)
    with_coordinates = [j for j in plant.get_joint_indices() if plant.get_joint(j).num_positions > 0]
    assert everything == with_coordinates
    names = joint_names(plant, everything)
    assert "panda_finger_joint2" not in names and "panda_hand_joint" not in names
    assert len(everything) < plant.num_joints()


def test_get_joints_includes_a_joint_if_any_of_its_positions_is_selected():
    plant = MultibodyPlant(name="rover_arm")
    plant.add_urdf(str(panda_urdf()), model_name="panda", base_joint="planar")
    plant.finalize()
    planar = [plant.get_joint(j) for j in plant.get_joint_indices() if plant.get_joint(j).type_name == "planar"]
    assert len(planar) == 1 and planar[0].num_positions == 3
    base = planar[0]
    for offset in range(3):
        bits = [False] * plant.num_positions()
        bits[base.position_start + offset] = True
        assert DofMask(bits).get_joints(plant) == [base.index]
    # the base's three coordinates belong to the panda instance and come first
    panda = DofMask.make_from_model(plant, "panda")
    assert panda.count() == 11
    assert selected_names(panda, plant)[:3] == [f"{base.name}_{suffix}" for suffix in ("x", "y", "qz")]
    assert joint_names(plant, panda.get_joints(plant)) == [base.name, *urdf_coordinate_joints(panda_urdf())]


@pytest.mark.parametrize("size", [0, 23, 25])
def test_get_joints_size_mismatch_names_both_sizes_and_the_plant(arm_and_hand, size):
    with pytest.raises(ValueError) as info:
        DofMask(size=size, value=True).get_joints(arm_and_hand)
    assert isinstance(info.value, DofMaskSizeError)
    message = str(info.value)
    assert f"size {size}" in message and "24 positions" in message and "arm_and_hand" in message


# ------------------------------------------------------------------------------------------------------
# Floating bases: rejected on the plant, masked through the articulated view


def test_floating_base_plant_is_rejected_naming_the_joints_and_the_plant(field):
    floating = [joint.name for joint in field.floating_base_joints()]
    assert len(floating) == 1
    with pytest.raises(IncompatiblePlantError) as info:
        DofMask.make_from_model(field, model_name="panda")  # the panda itself has only v = q̇ joints
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert f"'{floating[0]}' (quaternion_floating, 7 q / 6 v, model instance 'go1')" in message
    assert "plant 'field'" in message and "articulated_view" in message
    with pytest.raises(IncompatiblePlantError, match=floating[0]):
        DofMask.make_from_model(field, model_name="mast")
    with pytest.raises(IncompatiblePlantError, match="'field'"):
        DofMask(size=field.num_positions(), value=False).get_joints(field)


def test_articulated_view_gives_per_instance_masks_on_a_floating_robot(field):
    view = field.articulated_view()
    assert view.num_positions() == field.num_positions() - 7
    legs = DofMask.make_from_model(view, "go1")
    arm = DofMask.make_from_model(view, model_name="panda")
    mast = DofMask.make_from_model(view, "mast")
    assert legs.size() == arm.size() == mast.size() == view.num_positions()
    assert legs.count() == 12 and arm.count() == 8 and mast.count() == 0
    assert legs | arm == DofMask(size=view.num_positions(), value=True)
    # dof order by name: URDF order, and the same joints Pinocchio finds in the quadruped
    assert selected_names(legs, view) == urdf_coordinate_joints(go1_urdf())
    assert set(selected_names(legs, view)) == pinocchio_joint_names(go1_urdf())
    assert selected_names(arm, view) == urdf_coordinate_joints(panda_urdf())
    # joint order by name, through the view's joints
    assert joint_names(view, legs.get_joints(view)) == urdf_coordinate_joints(go1_urdf())
    assert joint_names(view, arm.get_joints(view)) == urdf_coordinate_joints(panda_urdf())
    assert mast.get_joints(view) == []


def test_articulated_view_masks_address_the_right_plant_coordinates(field):
    view = field.articulated_view()
    legs = DofMask.make_from_model(view, "go1")
    go1 = field.get_model_instance_by_name("go1")
    # the plant coordinates of the leg joints, found through the plant's own joints
    leg_q = [field.get_joint(j).position_start for j in field.get_joint_indices(go1)
             if field.get_joint(j).type_name == "revolute"]
    assert legs.get_from_array(view.q_indices).tolist() == leg_q
    q = np.arange(field.num_positions(), dtype=float)
    assert legs.get_from_array(q[view.q_indices]).tolist() == [float(i) for i in leg_q]
    # scatter estimated leg angles back into the plant's q without touching the base or the arm
    q_art = q[view.q_indices]
    legs.set_in_array(-np.arange(1.0, 13.0), q_art)
    q_new = q.copy()
    q_new[view.q_indices] = q_art
    assert q_new[leg_q].tolist() == (-np.arange(1.0, 13.0)).tolist()
    untouched = np.setdiff1d(np.arange(field.num_positions()), leg_q)
    assert np.array_equal(q_new[untouched], q[untouched])


def test_articulated_view_of_a_fixed_base_plant_matches_the_plant(arm_and_hand):
    view = arm_and_hand.articulated_view()
    assert view.num_positions() == arm_and_hand.num_positions()
    for name in ("panda", "hand", "world"):
        mask = DofMask.make_from_model(view, name)
        assert mask == DofMask.make_from_model(arm_and_hand, name)
        assert mask.get_joints(view) == mask.get_joints(arm_and_hand)


# ------------------------------------------------------------------------------------------------------
# Degenerate plants


def test_zero_dof_instance_gives_an_all_false_mask():
    plant = MultibodyPlant(name="arm_with_mast")
    plant.add_urdf(str(panda_urdf()), model_name="panda")
    plant.add_urdf(SENSOR_MAST_URDF, model_name="mast")
    plant.finalize()
    mast = DofMask.make_from_model(plant, "mast")
    assert mast.size() == 8 and mast.count() == 0 and mast == [False] * 8
    assert mast.get_joints(plant) == []


def test_plant_without_dofs_gives_the_empty_mask():
    plant = MultibodyPlant(name="static")
    plant.add_urdf(SENSOR_MAST_URDF, model_name="mast")
    plant.finalize()
    for name in ("mast", "world"):
        mask = DofMask.make_from_model(plant, name)
        assert mask == [] and mask == DofMask() and mask.size() == 0
        assert mask.get_joints(plant) == []
    empty = MultibodyPlant(name="empty")
    empty.finalize()
    assert DofMask.make_from_model(empty, "world") == []
    assert DofMask().get_joints(empty) == []


def test_unfinalized_plant_raises_the_plants_state_error():
    plant = MultibodyPlant(name="under_construction")
    plant.add_urdf(str(panda_urdf()), model_name="panda")
    with pytest.raises(RuntimeError, match="finalize"):
        DofMask.make_from_model(plant, "panda")
    with pytest.raises(RuntimeError, match="finalize"):
        DofMask(size=8, value=True).get_joints(plant)
