"""Static checks of launch/*.launch.py, without the launch system: they parse, define
generate_launch_description, and every executable, parameter file and launch argument they name exists; the shared
helper's argument handling is checked directly. test/test_launch_integration.py runs them under ``ros2 launch``."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from ros_dofkit.ros import launch_support
from ros_dofkit.ros.launch_support import ESTIMATOR_LAUNCH_ARGUMENTS, launch_overrides

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
REQUIRED_ARGUMENTS = {"config", "robot_description", "namespace", "use_sim_time"}


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def string_calls(tree: ast.AST, function: str) -> list:
    """First string argument of every call to ``function`` (a Name or an Attribute's attr)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name == function and node.args and isinstance(node.args[0], ast.Constant):
                found.append(node.args[0].value)
    return found


def keyword_strings(tree: ast.AST, keyword: str) -> list:
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
            if kw.arg == keyword and isinstance(kw.value, ast.Constant)]


def test_there_is_a_launch_file_per_use():
    names = {p.name for p in LAUNCH_FILES}
    assert {"arm_4imu.launch.py", "mobile_manipulator.launch.py", "quadruped.launch.py",
            "joint_state_filter.launch.py"} <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_parses_and_defines_generate_launch_description(path):
    tree = parsed(path)
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "generate_launch_description" in functions
    assert ast.get_docstring(tree)


@pytest.mark.parametrize("path", [p for p in LAUNCH_FILES if "estimator_launch_description" in p.read_text()],
                         ids=lambda p: p.name)
def test_estimator_launch_files_name_an_existing_config(path):
    (config,) = string_calls(parsed(path), "estimator_launch_description")
    assert (ROOT / "config" / config).is_file(), f"{path.name} names config/{config}, which does not exist"


def test_estimator_launch_arguments_are_declared_and_used():
    tree = parsed(Path(launch_support.__file__))
    declared = set(string_calls(tree, "DeclareLaunchArgument"))
    assert declared == set(ESTIMATOR_LAUNCH_ARGUMENTS) >= REQUIRED_ARGUMENTS
    used = set(re.findall(r'value\("(\w+)"\)', Path(launch_support.__file__).read_text()))
    assert used == declared
    assert keyword_strings(tree, "executable") == ["estimator"]


def test_filter_launch_file_arguments_and_executable():
    path = ROOT / "launch" / "joint_state_filter.launch.py"
    tree = parsed(path)
    declared = set(string_calls(tree, "DeclareLaunchArgument"))
    used = set(re.findall(r'value\("(\w+)"\)', path.read_text())) | set(
        re.findall(r'\("\w+", "(\w+)"\)', path.read_text()))
    assert {"namespace", "use_sim_time"} <= declared
    assert used <= declared
    assert keyword_strings(tree, "executable") == ["joint_state_filter"]
    from ros_dofkit.nodes.joint_state_filter import FILTER_PARAMETERS

    parameters = {spec.name for spec in FILTER_PARAMETERS} | {"use_sim_time"}
    set_in_file = set(re.findall(r'parameters\["(\w+)"\]', path.read_text())) | set(
        re.findall(r'"(\w+)": value\(', path.read_text())) | set(re.findall(r'\(\("(\w+)", "\w+"\)', path.read_text()))
    assert set_in_file <= parameters


@pytest.mark.parametrize("executable", ["estimator", "joint_state_filter"])
def test_named_executables_exist(executable):
    """The launch files' executables are console scripts ``<name> = ros_dofkit.nodes.<name>:main``."""
    module = importlib.import_module(f"ros_dofkit.nodes.{executable}")
    assert callable(module.main)
    setup = (ROOT / "setup.py").read_text()
    assert f'"{executable} = ros_dofkit.nodes.{executable}:main"' in setup, f"setup.py does not install {executable}"


def test_launch_overrides():
    assert launch_overrides("", "", "false") == {"use_sim_time": False}
    assert launch_overrides("<robot/>", "a.urdf, b.urdf", "True") == {
        "use_sim_time": True, "robot_description": "<robot/>", "urdf_files": ["a.urdf", "b.urdf"]}


def test_rviz_argument_starts_rviz2_where_installed_in_the_estimator_namespace():
    from ros_dofkit.ros.launch_support import rviz_command

    installed = {"rviz2": "/opt/ros/jazzy/bin/rviz2"}.get
    assert rviz_command("false", "a.rviz", "", which=installed) is None
    assert rviz_command("true", "a.rviz", "", which=lambda name: None) == []
    assert rviz_command("true", "a.rviz", "", which=installed) == ["/opt/ros/jazzy/bin/rviz2", "-d", "a.rviz"]
    assert rviz_command("True", "a.rviz", "/robot1/", which=installed)[-3:] == ["--ros-args", "-r", "__ns:=/robot1"]


@pytest.mark.parametrize("path", sorted((ROOT / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_configuration_has_an_rviz_file_showing_its_robot_tf_and_imus(path):
    """RobotModel from the robot_description topic (transient local, as published), TF, one Axes per IMU frame,
    fixed frame the configuration's world frame; installed with the configurations."""
    import yaml

    from ros_dofkit.ros.parameters import load_parameter_file

    values = load_parameter_file(path)
    rviz = yaml.safe_load(path.with_suffix(".rviz").read_text())["Visualization Manager"]
    displays = {display["Class"]: display for display in rviz["Displays"]}
    model = displays["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic" and model["Description Topic"]["Value"] == "robot_description"
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    assert "rviz_default_plugins/TF" in displays
    axes = {d["Reference Frame"] for d in rviz["Displays"] if d["Class"] == "rviz_default_plugins/Axes"}
    prefix = values.get("frame_prefix", "")
    assert axes == {prefix + values[f"imus.{imu}.body"] for imu in values["imu_names"]}
    assert rviz["Global Options"]["Fixed Frame"] == values.get("world_frame", "world")
    assert 'glob("config/*.rviz")' in (ROOT / "setup.py").read_text()


def test_fast_discovery_gives_the_node_the_profile_unless_a_profile_is_named(tmp_path):
    profile = str(ROOT / "config" / launch_support.FAST_DISCOVERY_PROFILE)
    both = {"FASTRTPS_DEFAULT_PROFILES_FILE": profile, "FASTDDS_DEFAULT_PROFILES_FILE": profile}
    assert launch_support.discovery_environment("true", profile, {"PATH": "/usr/bin"}) == both
    assert launch_support.discovery_environment("True", profile, {"FASTDDS_DEFAULT_PROFILES_FILE": ""}) == both
    # a user's own profile file (either variable) is kept, and false leaves Fast DDS's defaults
    own = str(tmp_path / "robot.xml")
    for variable in both:
        assert launch_support.discovery_environment("true", profile, {variable: own}) == {}
    assert launch_support.discovery_environment("false", profile, {}) == {}
    # the profile the launch files name is installed with the configs
    assert (ROOT / "config" / launch_support.FAST_DISCOVERY_PROFILE).is_file()
    assert "config/*.xml" in (ROOT / "setup.py").read_text()
