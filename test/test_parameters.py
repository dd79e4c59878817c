"""Tests of the estimator node's parameter schema (ros_dofkit.ros.parameters) and the shipped configs/: every
default is valid, every bad value is rejected with a reason, every config file uses only declared parameters and
builds a core EstimatorConfig."""

from pathlib import Path

import numpy as np
import pytest

from ros_dofkit.core.estimator.config import CALIBRATE
from ros_dofkit.ros.parameters import (
    NODE_PARAMETERS,
    ParameterValueError,
    estimated_parameter_spec,
    estimator_config_from_parameters,
    flatten_parameters,
    imu_parameter_specs,
    load_parameter_file,
    model_specs_from_parameters,
    validate_parameters,
    validate_value,
)

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))


def test_every_default_is_valid_and_described():
    specs = [*NODE_PARAMETERS, *imu_parameter_specs("x"), estimated_parameter_spec("arm")]
    names = [spec.name for spec in specs]
    assert len(set(names)) == len(names)
    for spec in specs:
        assert validate_value(spec, spec.default) is None, spec.name
        assert spec.description


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("stale_timeout", 0.0, "expected values in"),
        ("stale_timeout", "0.1", "expected double"),
        ("accuracy", float("nan"), "expected values in"),
        ("input_qos", "fast", "expected one of"),
        ("input_qos_depth", 0, "expected values in"),
        ("input_qos_depth", 2.5, "expected integer"),
        ("use_joint_limits", 1, "expected bool"),
        ("world_alignment", [1.0, 0.0, 0.0], "expected length"),
        ("base_joints", ["fixed", "hinge"], "expected one of"),
        ("heading_axis", "w", "expected one of"),
        ("urdf_files", "arm7.urdf", "expected string_array"),
    ],
)
def test_bad_values_are_rejected_with_reason(name, value, fragment):
    spec = next(s for s in NODE_PARAMETERS if s.name == name)
    reason = validate_value(spec, value)
    assert reason is not None and fragment in reason and name in reason


def test_unknown_parameter_names_are_reported_with_near_matches():
    reasons = validate_parameters({"stale_timout": 0.2})
    assert reasons == ["unknown parameter 'stale_timout'; did you mean ['stale_timeout']?"]


def test_flatten_nested_parameters():
    flat = flatten_parameters({"imus": {"hand": {"body": "l7", "mounting": (1.0, 0.0, 0.0, 0.0)}}, "a": 1})
    assert flat == {"imus.hand.body": "l7", "imus.hand.mounting": [1.0, 0.0, 0.0, 0.0], "a": 1}


def test_model_specs_from_files_and_description():
    specs = model_specs_from_parameters(
        {"urdf_files": ["a.urdf", "b.urdf"], "model_names": ["base", "arm"], "base_joints": ["planar", "fixed"],
         "parent_frames": ["world", "arm_mount"]}
    )
    assert [(s.urdf, s.name, s.base_joint, s.parent_frame) for s in specs] == [
        ("a.urdf", "base", "planar", "world"), ("b.urdf", "arm", "fixed", "arm_mount")]
    specs = model_specs_from_parameters({"robot_description": "<robot name='r'/>", "urdf_files": ["a.urdf"]})
    assert len(specs) == 1 and specs[0].is_xml and specs[0].base_joint == "fixed" and specs[0].name is None
    with pytest.raises(ParameterValueError, match="no robot"):
        model_specs_from_parameters({})
    with pytest.raises(ParameterValueError, match="base_joints: expected 2 entries"):
        model_specs_from_parameters({"urdf_files": ["a.urdf", "b.urdf"], "base_joints": ["fixed"]})
    with pytest.raises(ParameterValueError, match="base_joint"):
        model_specs_from_parameters({"urdf_files": ["a.urdf"], "base_joints": ["hinge"]})


def test_estimator_config_from_parameters():
    values = {
        "imu_names": ["hand", "wrist"],
        "imus.hand.body": "link7",
        "imus.hand.mounting": [0.0, 0.0, 0.0, 1.0],
        "imus.hand.weight": 2.0,
        "imus.wrist.body": "link6",
        "imus.wrist.calibrate": True,
        "imus.wrist.mounting": [1.0, 0, 0, 0, 1, 0, 0, 0, 1],
        "estimated.arm": ["joint3", "joint4"],
        "stale_timeout": 0.25,
        "world_alignment": [0.0, 0.0, 0.0, 1.0],
    }
    config = estimator_config_from_parameters(values, ["arm", "base"])
    hand, wrist = config.imus
    np.testing.assert_allclose(hand.mounting, np.diag([-1.0, -1.0, 1.0]), atol=1e-15)
    assert hand.weight == 2.0 and hand.topic == "imu/hand/data"
    assert wrist.mounting == CALIBRATE
    assert config.estimated_joints == {"arm": ("joint3", "joint4"), "base": "all"}
    assert config.stale_timeout_s == 0.25
    np.testing.assert_allclose(config.R_WG, np.diag([-1.0, -1.0, 1.0]), atol=1e-15)


@pytest.mark.parametrize(
    "values, fragment",
    [
        ({"estimated.arm": ["all", "joint1"]}, "must stand alone"),
        ({"estimated.leg": ["all"]}, "unknown model instances ['leg']"),
        ({"imu_names": ["a"]}, "imus.a.body"),
        ({"imu_names": ["a", "b", "a", "a"]}, "imu_names: names must be unique, got ['a'] more than once"),
        ({"estimated.arm": "joint1"}, "estimated.arm: a plain string must be 'all' or 'none', got 'joint1'; "
                                      "accepted forms: all, none, [all], [none]"),
        ({"imu_names": ["a"], "imus.a.body": "l", "imus.a.mounting": [2.0, 0, 0, 0]}, "expected values in"),
        ({"imu_names": ["a"], "imus.a.body": "l", "imus.a.mounting": [0.5, 0, 0, 0]}, "unit quaternion"),
        ({"accuracy": 0.9}, "accuracy"),
        ({"heading_reference": "nobody"}, "heading_reference"),
    ],
)
def test_estimator_config_rejections(values, fragment):
    with pytest.raises(ParameterValueError) as info:
        estimator_config_from_parameters(values, ["arm"])
    assert fragment in str(info.value)


def test_load_parameter_file_merges_wildcard_and_node_sections(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("/**:\n  ros__parameters:\n    a: 1\n    b: [x]\nestimator:\n  ros__parameters:\n    a: 2\n")
    assert load_parameter_file(path) == {"a": 2, "b": ["x"]}
    path.write_text("other:\n  ros__parameters:\n    a: 1\n")
    with pytest.raises(ParameterValueError, match="no 'ros__parameters'"):
        load_parameter_file(path)


def test_there_are_the_three_required_configs():
    assert {p.name for p in CONFIGS} >= {"arm_4imu.yaml", "mobile_manipulator.yaml", "quadruped.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_files_use_only_declared_parameters_and_build(path):
    values = load_parameter_file(path)
    specs = model_specs_from_parameters(values)
    instance_names = [s.name for s in specs]
    assert validate_parameters(values, instance_names) == []
    config = estimator_config_from_parameters(values, instance_names)
    assert len(config.imus) >= 1


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_files_build_a_working_estimator(path):
    """The shipped robot and sensors of each config build an Estimator; every IMU body exists; one cycle runs."""
    from ros_dofkit.core.estimator.estimator import Estimator
    from ros_dofkit.core.estimator.robot import build_plant

    values = load_parameter_file(path)
    plant = build_plant(model_specs_from_parameters(values))
    instance_names = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    estimator = Estimator(plant, estimator_config_from_parameters(values, instance_names))
    for imu in estimator.config.imus:
        assert estimator.add_imu(imu.name, 1.0, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]).ok
    result = estimator.step()
    assert result.q.shape == (plant.num_positions(),)
    assert estimator.estimated_mask.count() > 0 or estimator.floating_joints  # something is estimated


def test_command_line_parameters_are_found_inside_ros_args_for_this_node():
    from ros_dofkit.ros.parameters import command_line_parameters

    argv = ["estimator", "-p", "ignored:=1", "--ros-args", "--params-file", "x.yaml", "-p", "accuracy:=hello",
            "--param", "stale_timeout:=0.2", "-p", "imu_names:=[a, b]", "-p", "use_joint_limits:=false",
            "-p", "estimator:calibration_window:=7", "-p", "other_node:accuracy:=3.0", "-p", "x:=1e-4", "--",
            "-p", "after:=1"]
    assert command_line_parameters(argv) == {"accuracy": "hello", "stale_timeout": "0.2", "imu_names": "[a, b]",
                                             "use_joint_limits": "false", "calibration_window": "7", "x": "1e-4"}


@pytest.mark.parametrize("word", ["all", "none"])
def test_estimated_plain_word_in_a_parameter_file_is_the_word(tmp_path, word):
    # issue 21.1: `estimated: {arm: all}` was iterated character by character ("duplicated joint names (a, l, l)").
    path = tmp_path / "p.yaml"
    path.write_text(f"estimator:\n  ros__parameters:\n    estimated:\n      arm: {word}\n      base: [{word}]\n")
    values = load_parameter_file(path)
    assert values["estimated.arm"] == word
    assert validate_value(estimated_parameter_spec("arm"), values["estimated.arm"]) is None
    config = estimator_config_from_parameters(values, ["arm", "base"])
    assert config.estimated_joints == {"arm": word, "base": word}


@pytest.mark.ros
def test_estimated_plain_word_through_rclpy_parameter_file(ros_node, tmp_path):
    """The node's path: rcl parses the YAML (a plain string is a STRING parameter, not a STRING_ARRAY); the
    estimated.* parameters are declared with dynamic typing, so `all` arrives as the word and builds the config."""
    from ros_dofkit.nodes.common import declare_specs

    path = tmp_path / "p.yaml"
    path.write_text("estimator_params:\n  ros__parameters:\n    estimated:\n      arm: all\n      base: [joint1]\n")
    node = ros_node.create_node("estimator_params", cli_args=["--ros-args", "--params-file", str(path)],
                                use_global_arguments=False)
    values = declare_specs(node, [estimated_parameter_spec("arm"), estimated_parameter_spec("base")])
    assert values == {"estimated.arm": "all", "estimated.base": ["joint1"]}
    config = estimator_config_from_parameters(values, ["arm", "base"])
    assert config.estimated_joints == {"arm": "all", "base": ("joint1",)}


def test_raw_imu_parameters_reach_the_imu_configuration():
    values = {"urdf_files": ["arm7.urdf"], "model_names": ["arm"], "imu_names": ["hand"],
              "imus.hand.body": "arm_link7", "imus.hand.orientation": "filter", "imus.hand.filter_sample_time": 0.005,
              "imus.hand.filter_max_gap": 0.5, "imus.hand.filter_max_acceleration": 80.0,
              "imus.hand.filter_heading": 0.25, "imus.hand.magnetic_field_topic": "imu/hand/mag",
              "imus.hand.filter_field_timeout": 0.05}
    (imu,) = estimator_config_from_parameters(values, ["arm"]).imus
    assert imu.orientation == "filter"
    assert (imu.magnetic_field_topic, imu.filter.field_timeout_s) == ("imu/hand/mag", 0.05)
    with pytest.raises(ParameterValueError, match=r"imus.hand.filter_field_timeout: .*0"):
        estimator_config_from_parameters({**values, "imus.hand.filter_field_timeout": 0.0}, ["arm"])
    with pytest.raises(ParameterValueError, match="magnetic_field_topic: expected a topic name .* got 'imu/hand/mag' "
                                                  "with orientation 'sensor'"):
        estimator_config_from_parameters({**values, "imus.hand.orientation": "sensor"}, ["arm"])
    assert (imu.filter.sample_time_s, imu.filter.max_gap_s, imu.filter.max_acceleration, imu.filter.heading_offset) == (
        0.005, 0.5, 80.0, 0.25)
    with pytest.raises(ParameterValueError, match=r"imus.hand.orientation: expected one of \['sensor', 'filter', "
                                                  r"'auto'\], got 'raw'"):
        estimator_config_from_parameters({**values, "imus.hand.orientation": "raw"}, ["arm"])
    with pytest.raises(ParameterValueError, match="sample_time_s .* must not exceed max_gap_s"):
        estimator_config_from_parameters({**values, "imus.hand.filter_sample_time": 0.9}, ["arm"])
