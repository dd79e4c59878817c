"""ros/tf_tree.py: frame names, parents, ownership (publish_root_tf / publish_joint_tf), external parent frames,
no self-transforms and no second parents, on the shipped robot models (the rules of its module docstring)."""

from __future__ import annotations

import pytest

from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.ros.tf_tree import TfTreeError, tf_tree, tf_tree_from_parameters
from ros_harness import assert_one_tf_tree


def published_pairs(tree) -> set:
    return {(tree.parent_frame_ids[b], tree.frame_ids[b]) for b in (*tree.moving_bodies, *tree.fixed_bodies)}


@pytest.fixture(scope="module")
def arm():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


def test_default_arm_hangs_from_the_world(arm):
    tree = tf_tree(arm, "r1/")
    pairs = published_pairs(tree)
    assert ("world", "r1/arm_link0") in pairs and ("r1/arm_link0", "r1/arm_link1") in pairs
    assert_one_tf_tree(pairs, "world")
    assert tree.unpublished == {} and tree.external_parents == {}


def test_world_frame_equal_to_the_root_publishes_no_self_transform(arm):
    tree = tf_tree(arm, world_frame="arm_link0")
    pairs = published_pairs(tree)
    assert all(parent != child for parent, child in pairs)
    root = arm.get_body_by_name("arm_link0").index
    assert tree.unpublished == {root: "self-transform"}
    assert_one_tf_tree(pairs, "arm_link0")


def test_world_frame_naming_another_link_is_refused(arm):
    with pytest.raises(TfTreeError, match="arm_link3.*second parent"):
        tf_tree(arm, world_frame="arm_link3")


def test_an_external_parent_frame_hangs_the_arm_from_a_table():
    plant = build_plant([ModelSpec("arm7.urdf", "arm", "fixed", "table")])  # "table": not a frame of the model
    tree = tf_tree(plant, parent_frames=["table"])
    assert tree.external_parents == {"arm": "table"}
    assert ("table", "arm_link0") in published_pairs(tree)
    assert_one_tf_tree(published_pairs(tree), "table")


def test_ownership_switches_leave_the_base_to_odometry():
    """A legged robot whose odom -> trunk belongs to robot_localization: the root transform is not published;
    with publish_joint_tf off nothing below it is either."""
    plant = build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])
    values = {"urdf_files": ["quadruped.urdf"], "base_joints": ["floating"], "world_frame": "odom",
              "publish_root_tf": False}
    tree = tf_tree_from_parameters(plant, values)
    trunk = plant.get_body_by_name("trunk").index
    assert trunk not in tree.moving_bodies and "publish_root_tf" in tree.unpublished[trunk]
    assert tree.parent_frame_of(trunk) == "odom"  # the Odometry header frame
    pairs = published_pairs(tree)
    assert_one_tf_tree(pairs | {("odom", "trunk")}, "odom")  # with robot_localization's transform: one tree
    joints_off = tf_tree_from_parameters(plant, {**values, "publish_joint_tf": False})
    assert joints_off.moving_bodies == () and joints_off.fixed_bodies == ()


def test_mobile_manipulator_under_an_existing_odom_to_base_link():
    values = {"urdf_files": ["mobile_base.urdf", "arm7.urdf"], "model_names": ["base", "arm"],
              "base_joints": ["planar", "fixed"], "parent_frames": ["world", "arm_mount"], "world_frame": "odom",
              "publish_root_tf": False}
    plant = build_plant([ModelSpec("mobile_base.urdf", "base", "planar"),
                         ModelSpec("arm7.urdf", "arm", "fixed", "arm_mount")])
    tree = tf_tree_from_parameters(plant, values)
    pairs = published_pairs(tree)
    assert not any(child == "base_link" for _, child in pairs)
    assert any(parent == "base_link" for parent, _ in pairs)
    assert_one_tf_tree(pairs | {("odom", "base_link")}, "odom")


def test_an_external_parent_naming_a_later_instance_link_is_refused():
    # "arm_link0" is not a frame yet when the base is added: external for the plant, a second parent for TF.
    plant = build_plant([ModelSpec("mobile_base.urdf", "base", "planar", "arm_link3"),
                         ModelSpec("arm7.urdf", "arm")])
    with pytest.raises(TfTreeError, match="arm_link3"):
        tf_tree(plant, parent_frames=["arm_link3", "world"])
