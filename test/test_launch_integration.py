"""The launch files under the real launch system: ``ros2 launch ros_dofkit FILE`` as a user runs it.

Each case runs test/launch_checks/ros2_launch_checks.py with launch_testing's own runner (``launch_test``, one
launch per case; the checks inside are one per behaviour, each with a deadline): the node comes up under its
namespace, its documented topics and service exist with the documented types and QoS, the launch arguments reach
it, and SIGINT to the whole process group, as a terminal's Ctrl-C, ends every process with status 0 and no
traceback. The cases cover every launch file and every launch argument. A parameter file with an error is checked
here directly: the launch stops by itself, with one readable line saying what is wrong.

Needs the launch system and ``ros2`` (``./run test`` installs them from ../shared/ros2_launch; see
test/ros2_workspace.py); without them every test here skips and says how to get them.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ros2_workspace import MISSING, ROOT, SKIP_REASON, ros2_tool

pytestmark = [pytest.mark.ros, pytest.mark.skipif(bool(MISSING), reason=SKIP_REASON)]

CHECKS = Path(__file__).resolve().parent / "launch_checks" / "ros2_launch_checks.py"
LAUNCH_TEST_TIMEOUT = 240  # s, one whole launch_test run (its checks have their own, shorter deadlines)
ARM_URDF = ROOT / "ros_dofkit" / "models" / "arm7.urdf"


def run_checks(environment: dict, *arguments: str) -> str:
    process = subprocess.Popen([ros2_tool("launch_test"), str(CHECKS), *arguments], env=environment, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=LAUNCH_TEST_TIMEOUT)
    except subprocess.TimeoutExpired:
        # SIGINT: launch_test then stops `ros2 launch` (in a session of its own, a plain kill would orphan it)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
        raise AssertionError(f"launch_test {' '.join(arguments)} ran over {LAUNCH_TEST_TIMEOUT} s:\n{stdout}{stderr}"
                             ) from None
    output = stdout + stderr
    assert process.returncode == 0, output
    # every check ran (none skipped without saying so): 6 while running, 1 after shutdown
    assert re.search(r"Ran 6 tests in .*\n+OK", output), output
    return output


@pytest.mark.parametrize("arguments", [
    ["launch_file:=arm_4imu.launch.py", "namespace:=arm"],
    ["launch_file:=mobile_manipulator.launch.py", "namespace:=mm", "use_sim_time:=true"],
    ["launch_file:=quadruped.launch.py", "namespace:=robot1/quadruped", "use_sim_time:=true"],
    ["launch_file:=lower_body.launch.py", "use_sim_time:=true"],
    ["launch_file:=joint_state_filter.launch.py", "namespace:=filter", "config:=arm_4imu.yaml", "model_names:=arm",
     "use_sim_time:=true"],
], ids=lambda arguments: arguments[0].split(":=")[1].removesuffix(".launch.py"))
def test_launch_file(ros2_workspace, arguments):
    run_checks(ros2_workspace, *arguments)


def test_config_and_urdf_arguments(ros2_workspace, tmp_path):
    """``config`` replaces the parameter file (here: outputs moved to another namespace) and ``urdf`` the
    robot's URDF files (a copy of the arm elsewhere)."""
    config = tmp_path / "arm_custom.yaml"
    config.write_text((ROOT / "config" / "arm_4imu.yaml").read_text() + "    output_namespace: custom_out\n")
    urdf = tmp_path / "arm_copy.urdf"
    urdf.write_text(ARM_URDF.read_text())
    run_checks(ros2_workspace, "launch_file:=arm_4imu.launch.py", f"config:={config}", f"urdf:={urdf}")


def test_robot_description_argument(ros2_workspace):
    run_checks(ros2_workspace, "launch_file:=arm_4imu.launch.py", "namespace:=described",
               f"robot_description:={ARM_URDF.read_text()}")


def test_a_parameter_file_with_an_error_stops_the_launch_with_one_readable_line(ros2_workspace, ros_processes,
                                                                                 tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text((ROOT / "config" / "arm_4imu.yaml").read_text() + "    accuracy: -1.0\n")
    launch = ros_processes.start(ros2_tool("ros2"), "launch", "ros_dofkit", "arm_4imu.launch.py", f"config:={config}",
                                 env=ros2_workspace)
    launch.wait_for_exit(timeout=90)  # by itself: nothing is left to run
    output = launch.output()
    (line,) = [line for line in output.splitlines() if "accuracy" in line]  # the one line: what, value, range
    assert all(part in line for part in ("FATAL", "cannot start", "-1.0", "1e-12", "0.5")), output
    assert "Traceback" not in output, output


def _descendant_environment(parent: int, name: str, timeout: float = 90.0) -> dict:
    """The environment of the process named ``name`` that descends from ``parent`` (read from Linux's /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        family, found = [parent], []
        while family:
            pid = family.pop()
            family += children.get(pid, [])
            with contextlib.suppress(OSError):  # the program or, for a script, its interpreter's first argument
                if name in [Path(a.decode()).name for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]]:
                    found.append(pid)
        for pid in found:
            with contextlib.suppress(OSError):
                pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)
        time.sleep(0.2)
    raise AssertionError(f"no process {name!r} under pid {parent} within {timeout} s")


def test_fast_discovery_argument_gives_the_node_the_profile_unless_one_is_named(ros2_workspace, ros_processes,
                                                                               tmp_path, monkeypatch):
    """The estimator started by a launch file runs with the installed fast-discovery profile named in both Fast DDS
    variables; a profile file the user named (either variable) is left alone, and fast_discovery:=false adds none."""
    variables = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
    bare = {key: value for key, value in ros2_workspace.items() if key not in variables}
    for variable in variables:  # the harness starts processes with os.environ + env (conftest names the profile)
        monkeypatch.delenv(variable, raising=False)
    own = tmp_path / "robot.xml"
    own.write_text((ROOT / "config" / "fastdds_fast_discovery.xml").read_text())
    cases = [({}, [], "installed"), ({"FASTDDS_DEFAULT_PROFILES_FILE": str(own)}, [], "own"),
             ({}, ["fast_discovery:=false"], None)]
    for extra, arguments, expected in cases:
        launch = ros_processes.start(ros2_tool("ros2"), "launch", "ros_dofkit", "arm_4imu.launch.py",
                                     "namespace:=discovery_check", *arguments, env={**bare, **extra})
        environment = _descendant_environment(launch.pid, "estimator")
        launch.stop()
        named = {variable: environment.get(variable) for variable in variables}
        if expected == "installed":
            (profile,) = set(named.values())
            assert profile and profile.endswith("share/ros_dofkit/config/fastdds_fast_discovery.xml"), named
            assert Path(profile).read_text() == (ROOT / "config" / "fastdds_fast_discovery.xml").read_text()
        elif expected == "own":
            assert named == {"FASTRTPS_DEFAULT_PROFILES_FILE": None, "FASTDDS_DEFAULT_PROFILES_FILE": str(own)}
        else:
            assert named == dict.fromkeys(variables), named
