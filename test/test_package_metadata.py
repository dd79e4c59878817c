"""The package's metadata agrees with itself and with the environment.

package.xml, setup.py and ``ros_dofkit.__version__`` name the same package and version; every console script
declared in setup.py is installed and imports; every ROS package that package.xml declares for run time is
importable here; the ``dofkit`` command dispatches to exactly the subcommand modules that exist.

rosdep: every key of package.xml resolves on ROS 2 Jazzy + Ubuntu 24.04, checked against the real keys extracted from
ros/rosdistro (test/fixtures/rosdep_keys_jazzy_noble.txt, written by tools/rosdep_keys.py; its first line names the
rosdistro commit), and every third-party module that the package, its launch files or its tests import (parsed with
ast) maps, through MODULE_KEYS, to a key package.xml declares (run time for the package, run or test time for tests).
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
REAL_KEYS = ROOT / "test" / "fixtures" / "rosdep_keys_jazzy_noble.txt"
DEPENDENCY_TAGS = ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend")

#: Third-party top-level module -> the rosdep key that installs it. A ROS package (rclpy, launch, launch_ros,
#: ament_index_python, *_msgs, *_srvs, *_interfaces) is its own key and is not listed.
MODULE_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "matplotlib": "python3-matplotlib",
    "numba": "python3-numba",
    "yaml": "python3-yaml",
    "ruamel": "python3-ruamel.yaml",
    "rosbags": "python3-rosbags-pip",
    # dependencies of rosbags that ros_dofkit imports itself; no rosdep key of their own (rosdistro has no python3-lz4,
    # python3-apsw or zstd binding key), so the rosbags key, whose pip install brings them, declares them
    "lz4": "python3-rosbags-pip",
    "apsw": "python3-rosbags-pip",
    "backports": "python3-rosbags-pip",  # backports.zstd
    "compression": "python3-rosbags-pip",  # compression.zstd: the standard library from Python 3.14 on
    # tests only
    "pytest": "python3-pytest",
    "hypothesis": "python3-hypothesis",
    "pinocchio": "pinocchio",
}
#: Run-time modules with no rosdep key on Jazzy/noble: pinned in requirements/runtime.txt and named, with the pip line,
#: in a package.xml comment (test_pip_only_dependencies_are_pinned_and_named_in_package_xml).
PIP_ONLY_MODULES = {"vqf": "vqf==2.1.2"}
ROS_PACKAGE_MODULES = ("rclpy", "launch", "launch_ros", "launch_testing", "launch_testing_ros", "ament_index_python")


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


def real_rosdep_keys() -> set[str]:
    lines = REAL_KEYS.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# rosdep keys that resolve on ROS 2 Jazzy + Ubuntu 24.04 (noble): ros/rosdistro commit")
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def third_party_imports(*directories: str) -> dict[str, set[str]]:
    """Top-level module -> files importing it (absolute imports, try/except ones included), without the standard
    library, ros_dofkit and the repository's own helper modules (benchmarks, test/*.py)."""
    own = {"ros_dofkit", "benchmarks"} | {path.stem for path in (ROOT / "test").glob("*.py")}
    found: dict[str, set[str]] = {}
    for directory in directories:
        for path in sorted((ROOT / directory).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in own:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def rosdep_key(module: str) -> str | None:
    if module in ROS_PACKAGE_MODULES or module.endswith(ROS_DEPENDENCY_SUFFIXES):
        return module
    return MODULE_KEYS.get(module)


def check_declared(imports: dict[str, set[str]], declared: set[str]) -> list[str]:
    problems = []
    for module, files in sorted(imports.items()):
        if module in PIP_ONLY_MODULES:
            continue
        key = rosdep_key(module)
        where = ", ".join(sorted(files)[:3])
        if key is None:
            problems.append(f"{module} (imported by {where}) has no entry in MODULE_KEYS: add its rosdep key")
        elif key not in declared:
            problems.append(f"{module} (imported by {where}): declare its rosdep key {key!r} in package.xml")
    return problems


def test_every_package_xml_key_resolves_with_rosdep_on_jazzy_noble():
    real = real_rosdep_keys()
    assert {"rclpy", "tf2_msgs", "python3-numpy", "python3-rosbags-pip", "pinocchio"} <= real
    assert "example-robot-data" not in real  # the key issue 15 found missing
    declared = [key for tag in DEPENDENCY_TAGS for key in package_xml(tag)]
    unknown = sorted(set(declared) - real)
    assert not unknown, f"package.xml keys that rosdep cannot resolve on Jazzy/noble: {unknown}"
    assert len(declared) == len(set(declared)), "a key is declared twice"


def test_module_keys_are_real_rosdep_keys():
    assert not sorted(set(MODULE_KEYS.values()) - real_rosdep_keys())


def test_every_third_party_import_of_the_package_is_a_run_time_dependency():
    imports = third_party_imports("ros_dofkit", "launch")
    assert {"numpy", "rosbags", "rclpy", "ruamel"} <= set(imports)  # the parse sees the package's imports
    run_time = set(package_xml("exec_depend")) | set(package_xml("depend"))
    assert not check_declared(imports, run_time)


def test_pip_only_dependencies_are_pinned_and_named_in_package_xml():
    real = real_rosdep_keys()
    runtime = (ROOT / "requirements" / "runtime.txt").read_text(encoding="utf-8").splitlines()
    package_text = " ".join((ROOT / "package.xml").read_text(encoding="utf-8").split())
    for module, pin in PIP_ONLY_MODULES.items():
        assert not {f"python3-{module}", f"python3-{module}-pip"} & real, f"{module} has a rosdep key now: declare it"
        assert pin in runtime, f"requirements/runtime.txt must pin {pin}"
        assert f"pip install {pin}" in package_text, f"package.xml must say, in a comment, to pip install {pin}"


def test_every_third_party_import_of_the_tests_is_declared():
    imports = third_party_imports("test")
    assert {"pytest", "hypothesis", "pinocchio"} <= set(imports)
    declared = set(package_xml("exec_depend")) | set(package_xml("depend")) | set(package_xml("test_depend"))
    assert not check_declared(imports, declared)


def test_an_undeclared_import_is_named_with_what_to_add():
    problems = check_declared({"trimesh": {"x.py"}, "numpy": {"y.py"}}, {"python3-scipy"})
    assert problems == ["numpy (imported by y.py): declare its rosdep key 'python3-numpy' in package.xml",
                        "trimesh (imported by x.py) has no entry in MODULE_KEYS: add its rosdep key"]


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
