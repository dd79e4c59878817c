"""What the launch and ros2 CLI tests need: the ROS 2 launch system, the ``ros2`` command and a colcon install.

Where you are: test/, imported by conftest.py (the ``ros2_workspace`` fixture) and by test/test_launch_*.py. The
launch system (launch, launch_ros, launch_testing, ros2cli) has no pip wheel: ``./run test`` installs it into
.venv from ../shared/ros2_launch when that folder exists (tools/launch_stack.sh), a sourced ROS 2 brings its own,
and otherwise these tests skip with :data:`SKIP_REASON`. ``ros2 launch ros_dofkit FILE`` finds the package
through the ament index, so the tests build the checkout once per session with colcon (``--symlink-install``:
launch and config files and the Python sources are this checkout's, and numba's kernel cache is shared with the
venv's editable install) and run every ``ros2`` command with :func:`workspace_environment`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ros_dofkit"


def ros2_tool(name: str) -> str | None:
    """Path of a launch-system executable (``ros2``, ``launch_test``): beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


MISSING = [name for name in ("launch", "launch_ros", "launch_testing", "ros2cli", "ros2launch", "colcon_core")
           if importlib.util.find_spec(name) is None]
MISSING += [f"the {name} command" for name in ("ros2", "launch_test") if ros2_tool(name) is None]
SKIP_REASON = (
    "needs the ROS 2 launch system and ros2 command line (no pip wheels exist): `./run test` installs them into "
    ".venv from ../shared/ros2_launch when that folder is beside the checkout, or source a ROS 2 Jazzy "
    "installation that has them (ros-jazzy-ros2launch, ros-jazzy-launch-testing-ros, ros-jazzy-ros2cli-common-"
    f"extensions); missing: {', '.join(MISSING)}"
)


def colcon_build(base: Path) -> Path:
    """``colcon build --symlink-install`` of this checkout under ``base``; returns the package's install prefix."""
    command = [
        sys.executable, "-c", "import sys; from colcon_core.command import main; sys.exit(main())",
        "--log-base", str(base / "log"), "build", "--symlink-install", "--base-paths", str(ROOT),
        "--build-base", str(base / "build"), "--install-base", str(base / "install"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or f"Finished <<< {PACKAGE}" not in result.stdout:
        raise RuntimeError(f"colcon build failed:\n{result.stdout}\n{result.stderr}")
    return base / "install" / PACKAGE


def workspace_environment(prefix: Path) -> dict[str, str]:
    """``os.environ`` plus what sourcing the install adds for the package: its ament prefix (and this
    environment's, where the wheels' ament index lives) and its Python path."""
    (site_packages,) = prefix.glob("lib/python3*/site-packages")
    ament = [str(prefix), *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)), sys.prefix]
    return {
        **os.environ,
        "AMENT_PREFIX_PATH": os.pathsep.join(dict.fromkeys(ament)),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site_packages), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",  # tests wait for lines of the launched processes' output
    }
