"""The package's metadata agrees with itself and with the environment.

package.xml, setup.py and ``ros_dofkit.__version__`` name the same package and version; every console script
declared in setup.py is installed and imports; every ROS package that package.xml declares for run time is
importable here; the ``dofkit`` command dispatches to exactly the subcommand modules that exist.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import ros_dofkit
from ros_dofkit import cli, commands
from ros_harness import find_executable

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_XML = ET.parse(ROOT / "package.xml").getroot()
ROS_DEPENDENCY_SUFFIXES = ("_msgs", "_srvs", "_interfaces")


def setup_py_console_scripts() -> list[str]:
    """The console_scripts strings written in setup.py, read with ast (setup.py is not executed)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    return [ast.literal_eval(element) for element in value.elts]
    raise AssertionError("setup.py declares no console_scripts")


def package_xml(tag: str) -> list[str]:
    return [element.text.strip() for element in PACKAGE_XML.findall(tag)]


def test_setup_py_reports_package_xml_name_and_version():
    result = subprocess.run(
        [sys.executable, "setup.py", "--name", "--version"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    name, version = result.stdout.split()
    assert PACKAGE_XML.get("format") == "3"
    assert package_xml("name") == [name] == ["ros_dofkit"]
    assert package_xml("version") == [version] == [ros_dofkit.__version__]


def test_package_xml_is_an_ament_python_package_with_the_ros_dependencies():
    assert package_xml("export/build_type") == ["ament_python"]
    run_time = set(package_xml("exec_depend")) | set(package_xml("depend"))
    for dependency in ("rclpy", "sensor_msgs", "geometry_msgs", "nav_msgs", "tf2_msgs", "diagnostic_msgs",
                       "std_srvs", "python3-numpy", "python3-scipy"):
        assert dependency in run_time
    for dependency in ("python3-pytest", "launch_testing", "launch_testing_ros"):
        assert dependency in package_xml("test_depend")
    assert (ROOT / "resource" / "ros_dofkit").is_file()


def test_every_ros_run_time_dependency_is_importable():
    python_packages = [
        name for name in set(package_xml("exec_depend")) | set(package_xml("depend"))
        if name == "rclpy" or name.endswith(ROS_DEPENDENCY_SUFFIXES)
    ]
    assert "tf2_msgs" in python_packages
    missing = sorted(name for name in python_packages if importlib.util.find_spec(name) is None)
    assert not missing, f"package.xml declares these but they are not importable: {missing}"


def test_console_scripts_are_installed_and_import():
    declared = setup_py_console_scripts()
    assert "dofkit = ros_dofkit.cli:main" in declared
    installed = {
        entry.name: entry.value
        for entry in importlib.metadata.distribution("ros_dofkit").entry_points
        if entry.group == "console_scripts"
    }
    assert installed == dict(item.replace(" ", "").split("=") for item in declared), (
        "the installed entry points differ from setup.py: re-run ./run to reinstall"
    )
    for name, target in installed.items():
        module_name, function_name = target.split(":")
        assert callable(getattr(importlib.import_module(module_name), function_name)), name


def test_every_subcommand_module_is_registered():
    on_disk = sorted(
        path.stem for path in (ROOT / "ros_dofkit" / "commands").glob("*.py") if path.stem != "__init__"
    )
    assert sorted(commands.SUBCOMMAND_MODULES) == on_disk
    for module in commands.load_subcommand_modules():
        assert callable(module.register)


def test_dofkit_version_and_unknown_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"dofkit {ros_dofkit.__version__}"

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no_such_subcommand"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'no_such_subcommand'" in error
    (subparsers,) = [action for action in cli.build_parser()._actions if action.dest == "command"]
    assert "env" in subparsers.choices
    for name in subparsers.choices:
        assert repr(name) in error


def test_dofkit_env_finds_every_ros_package():
    result = subprocess.run([str(find_executable("dofkit")), "env"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split(maxsplit=1) for line in result.stdout.splitlines())
    assert lines["numpy"] == importlib.metadata.version("numpy")
    assert "MISSING" not in lines["tf2_msgs"]
    assert Path(lines["tf2_msgs"]).is_dir()
