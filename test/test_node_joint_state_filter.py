"""Tests of ``joint_state_filter`` (ros_dofkit.nodes.joint_state_filter): the selection logic against the shipped
robots, the message filter, and the node as a real process over DDS (foundation harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sensor_msgs.msg import JointState

from ros_dofkit.nodes.common import StartupError
from ros_dofkit.nodes.joint_state_filter import (
    FILTER_PARAMETERS,
    filter_joint_state,
    robot_parameters_from_estimator,
    selected_coordinates,
)
from ros_dofkit.ros.parameters import load_parameter_file
from ros_dofkit.ros.qos import output_qos

ROOT = Path(__file__).resolve().parents[1]
MOBILE = {"urdf_files": ["mobile_base.urdf", "arm7.urdf"], "model_names_of_files": ["base", "arm"],
          "base_joints": ["planar", "fixed"], "parent_frames": ["world", "arm_mount"]}


def values(**overrides):
    result = {spec.name: spec.default for spec in FILTER_PARAMETERS}
    result.update(overrides)
    return result


def test_select_by_model_instance_is_the_instance_dof_mask():
    assert selected_coordinates(values(**MOBILE, model_names=["base"])) == (
        "base_link_x", "base_link_y", "base_link_qz", "left_wheel_joint", "right_wheel_joint")
    assert selected_coordinates(values(**MOBILE, model_names=["arm"])) == tuple(f"arm_joint{i}" for i in range(1, 8))


@pytest.mark.parametrize("config, instance, joints", [
    ("arm_4imu.yaml", "arm", tuple(f"arm_joint{i}" for i in range(1, 8))),
    ("mobile_manipulator.yaml", "base", ("base_link_x", "base_link_y", "base_link_qz", "left_wheel_joint",
                                         "right_wheel_joint")),
])
def test_an_estimator_config_names_the_instances_as_the_estimator_does(config, instance, joints):
    """The launch file's ``config`` argument: ``model_names:=arm`` selects what the estimator config calls arm."""
    robot = robot_parameters_from_estimator(load_parameter_file(ROOT / "config" / config))
    assert "model_names" not in robot  # the estimator's instance names become the filter's model_names_of_files
    assert selected_coordinates(values(**robot, model_names=[instance])) == joints


def test_select_by_joint_names_expands_multi_dof_joints_and_unites():
    selected = selected_coordinates(values(**MOBILE, joint_names=["base_link", "arm_joint7"], model_names=[]))
    assert selected == ("base_link_x", "base_link_y", "base_link_qz", "arm_joint7")
    assert selected_coordinates(values(joint_names=["a", "b"])) == ("a", "b")  # no robot: names taken literally


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({}, "select something"),
        ({"model_names": ["arm"]}, "needs the robot"),
        ({**MOBILE, "model_names": ["armm"]}, "did you mean 'arm'"),
        ({**MOBILE, "joint_names": ["arm_joint9"]}, "arm_joint1"),
        ({"urdf_files": ["nope.urdf"], "joint_names": ["a"]}, "not found"),
    ],
)
def test_bad_selection_stops_with_reason(overrides, fragment):
    with pytest.raises(StartupError) as info:
        selected_coordinates(values(**overrides))
    assert fragment in str(info.value)


def test_filter_keeps_order_header_and_optional_arrays():
    msg = JointState(name=["c", "a", "b"], position=[3.0, 1.0, 2.0], velocity=[], effort=[30.0, 10.0, 20.0])
    msg.header.stamp.sec, msg.header.frame_id = 7, "f"
    out = filter_joint_state(msg, frozenset({"a", "c"}))
    assert list(out.name) == ["c", "a"] and list(out.position) == [3.0, 1.0]
    assert list(out.velocity) == [] and list(out.effort) == [30.0, 10.0]
    assert out.header.stamp.sec == 7 and out.header.frame_id == "f"
    assert filter_joint_state(msg, frozenset({"z"})) is None
    with pytest.raises(ValueError, match="velocity has 1 entries for 3 names"):
        filter_joint_state(JointState(name=["a", "b", "c"], position=[1.0, 2.0, 3.0], velocity=[1.0]), frozenset("a"))


@pytest.mark.ros
def test_filter_node_republishes_the_masked_joints(ros_node, ros_processes, tmp_path):
    from test_node_estimator import estimator_executable

    params = tmp_path / "filter.yaml"
    params.write_text(
        "/**:\n  ros__parameters:\n"
        "    urdf_files: [mobile_base.urdf, arm7.urdf]\n    model_names_of_files: [base, arm]\n"
        "    base_joints: [planar, fixed]\n    parent_frames: [world, arm_mount]\n"
        "    model_names: [base]\n    joint_names: [arm_joint2]\n"
        "    input_topic: /f/in\n    output_topic: /f/out\n"
    )
    node = ros_processes.start(estimator_executable(tmp_path, "joint_state_filter"), "--ros-args", "--params-file",
                               str(params))
    node.wait_for_output("joint_state_filter ready", timeout=60)
    publisher = ros_node.create_publisher(JointState, "/f/in", 10)
    received = ros_node.collect(JointState, "/f/out", output_qos())
    ros_node.wait_for_subscriptions(publisher, timeout=30)
    names = ["arm_joint1", "arm_joint2", "base_link_qz", "left_wheel_joint", "gripper"]
    message = JointState(name=names, position=[1.0, 2.0, 3.0, 4.0, 5.0], velocity=[0.1, 0.2, 0.3, 0.4, 0.5])
    message.header.stamp.sec = 42
    ros_node.wait_for_messages(received, 1, timeout=30, every=lambda: publisher.publish(message))
    out = received.messages[-1]
    assert list(out.name) == ["arm_joint2", "base_link_qz", "left_wheel_joint"]
    assert list(out.position) == [2.0, 3.0, 4.0] and list(out.velocity) == [0.2, 0.3, 0.4]
    assert out.header.stamp.sec == 42
    publisher.publish(JointState(name=["arm_joint2"], position=[1.0, 2.0]))  # malformed: dropped, node runs on
    node.wait_for_output("dropped a malformed JointState", timeout=30)
    assert node.is_running()
