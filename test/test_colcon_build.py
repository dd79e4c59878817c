"""colcon builds and tests ros_dofkit as a ROS 2 workspace would, and the installed package runs.

colcon (from PyPI here, from the ROS installation on a ROS machine) builds the checkout into a temporary
build/install base; the tests check the ament_python install layout (executables in lib/ros_dofkit for
``ros2 run``, package.xml and the ament index marker, launch/config files, bundled URDFs), that Python and the
ament index resolve to the installed copy, that the installed ``dofkit_relay`` relays a message, and that
``colcon test`` runs pytest with this repository's configuration and conftest.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sensor_msgs.msg import Imu

from ros_dofkit.ros.qos import output_qos

pytest.importorskip("colcon_core", reason="colcon is not installed (requirements/test.txt installs it)")
pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parent.parent


def console_script_names() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    return [ast.literal_eval(element).split("=")[0].strip() for element in value.elts]
    raise AssertionError("setup.py declares no console_scripts")


def colcon(base: Path, verb: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``colcon VERB`` on this checkout with build/install/log bases under ``base``."""
    command = [
        sys.executable, "-c", "import sys; from colcon_core.command import main; sys.exit(main())",
        "--log-base", str(base / "log"),
        verb, "--base-paths", str(ROOT),
        "--build-base", str(base / "build"), "--install-base", str(base / "install"), *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"colcon {verb} failed:\n{result.stdout}\n{result.stderr}"
    assert "Finished <<< ros_dofkit" in result.stdout
    return result


@pytest.fixture(scope="module")
def colcon_base(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("colcon")
    colcon(base, "build")
    return base


@pytest.fixture(scope="module")
def install_prefix(colcon_base) -> Path:
    return colcon_base / "install" / "ros_dofkit"


def installed_environment(prefix: Path) -> dict[str, str]:
    """What sourcing install/setup.sh adds for this package: its site-packages and its ament prefix."""
    (site_packages,) = prefix.glob("lib/python3*/site-packages")
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site_packages), os.environ.get("PYTHONPATH")])),
        "AMENT_PREFIX_PATH": os.pathsep.join(filter(None, [str(prefix), os.environ.get("AMENT_PREFIX_PATH")])),
    }


def test_colcon_test_runs_the_pytest_suite(colcon_base):
    colcon(colcon_base, "test", "--pytest-args", "test/test_layering.py")
    report = ET.parse(colcon_base / "build" / "ros_dofkit" / "pytest.xml").getroot()
    suite = report if report.tag == "testsuite" else report.find("testsuite")
    expected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "test/test_layering.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    ).stdout.count("test_layering.py::")
    assert expected > 0
    assert int(suite.get("tests")) == expected
    assert int(suite.get("failures")) == int(suite.get("errors")) == 0


def test_install_layout_is_ament_python(install_prefix):
    for name in console_script_names():
        executable = install_prefix / "lib" / "ros_dofkit" / name
        assert executable.is_file() and os.access(executable, os.X_OK), executable
    share = install_prefix / "share" / "ros_dofkit"
    assert (share / "package.xml").read_bytes() == (ROOT / "package.xml").read_bytes()
    assert (install_prefix / "share" / "ament_index" / "resource_index" / "packages" / "ros_dofkit").is_file()
    for pattern, destination in (("launch/*.py", share / "launch"), ("config/*.yaml", share / "config"),
                                 ("config/*.xml", share / "config")):
        for source in ROOT.glob(pattern):
            assert (destination / source.name).read_bytes() == source.read_bytes(), source
    (site_packages,) = install_prefix.glob("lib/python3*/site-packages")
    for source in (ROOT / "ros_dofkit" / "models").glob("*.urdf"):
        assert (site_packages / "ros_dofkit" / "models" / source.name).is_file(), source


def test_installed_executables_run_with_the_interpreter_that_ran_colcon(install_prefix):
    """README's Ubuntu 24.04 recipe runs colcon with a --system-site-packages venv's interpreter: the installed
    executables must name that interpreter, so that ``ros2 run`` sees the venv's pip packages (PEP 668)."""
    for name in console_script_names():
        first_line = (install_prefix / "lib" / "ros_dofkit" / name).read_text(encoding="utf-8").splitlines()[0]
        assert first_line == f"#!{sys.executable}", (name, first_line)


def test_installed_package_resolves_to_the_install_prefix(install_prefix):
    probe = (
        "import ros_dofkit; from ament_index_python.packages import get_package_share_directory as share; "
        "print(ros_dofkit.__file__); print(share('ros_dofkit'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **installed_environment(install_prefix)},
        capture_output=True, text=True, timeout=60, cwd=install_prefix,
    )
    assert result.returncode == 0, result.stderr
    module_file, share_directory = result.stdout.split()
    assert Path(module_file).is_relative_to(install_prefix)
    assert Path(share_directory) == install_prefix / "share" / "ros_dofkit"


def test_installed_relay_runs(install_prefix, ros_node, ros_processes):
    relay = ros_processes.start(
        install_prefix / "lib" / "ros_dofkit" / "dofkit_relay",
        "--ros-args", "-p", "frame_prefix:=installed/",
        "-r", "imu_in:=/colcon_test/imu_in", "-r", "imu_out:=/colcon_test/imu_out",
        env=installed_environment(install_prefix),
    )
    publisher = ros_node.create_publisher(Imu, "/colcon_test/imu_in", 10)
    received = ros_node.collect(Imu, "/colcon_test/imu_out", output_qos())
    sent = Imu()
    sent.header.frame_id = "imu_link"
    sent.linear_acceleration.z = 9.81
    ros_node.wait_for_subscriptions(publisher)
    (message, *_) = ros_node.wait_for_messages(received, 1, every=lambda: publisher.publish(sent))
    assert message.header.frame_id == "installed/imu_link"
    assert message.linear_acceleration.z == 9.81
    assert relay.stop() == 0, relay.output()
