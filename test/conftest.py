"""pytest configuration of ros_dofkit's tests: an isolated ROS 2 environment per test session.

Where you are: test/, loaded by pytest before any test module, hence before any ``import rclpy``. At import time
this file gives the session

* its own ``ROS_DOMAIN_ID`` in 1..101, claimed with a lock file so that concurrent sessions on this machine
  (several developers, CI) never share a domain and never see each other's topics;
* its own ``ROS_LOG_DIR`` (a temporary directory, removed when the session passes, kept and named when it fails);
* the package's fast-discovery Fast DDS profile (config/fastdds_fast_discovery.xml), named in both variables:
  Fast DDS 2.x (the Jazzy wheels) reads only ``FASTRTPS_DEFAULT_PROFILES_FILE``, Fast DDS 3 only
  ``FASTDDS_DEFAULT_PROFILES_FILE``.

Processes started through the harness (test/ros_harness.py) inherit all three through ``os.environ``.
Fixtures: ``ros_node`` (an rclpy node in the test process), ``ros_processes`` (starts package executables and
always stops them), ``ros2_workspace`` (the environment for ``ros2 launch ros_dofkit`` and the ``ros2`` verbs:
a colcon install of the checkout, see test/ros2_workspace.py), and from test/opensim_guard.py a guard that fails
any test after which ``import opensim`` changed the environment (import it with ``importorskip_opensim``).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from opensim_guard import opensim_leaves_environment_alone  # noqa: F401 (an autouse fixture)

DOMAIN_IDS = range(1, 102)


def _claim_domain_id() -> tuple[int, object]:
    """Lock one domain id for this process's lifetime; start from the pid so sessions spread out."""
    lock_dir = Path(tempfile.gettempdir()) / "ros_dofkit_domain_locks"
    lock_dir.mkdir(exist_ok=True)
    first = os.getpid() % len(DOMAIN_IDS)
    for offset in range(len(DOMAIN_IDS)):
        domain_id = DOMAIN_IDS[(first + offset) % len(DOMAIN_IDS)]
        lock_file = open(lock_dir / f"{domain_id}.lock", "w")  # held open: the lock lasts the session
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            continue
        return domain_id, lock_file
    raise RuntimeError(f"every ROS_DOMAIN_ID in {DOMAIN_IDS.start}..{DOMAIN_IDS.stop - 1} is locked under {lock_dir}")


SESSION_DOMAIN_ID, _DOMAIN_LOCK = _claim_domain_id()
SESSION_LOG_DIR = Path(tempfile.mkdtemp(prefix="ros_dofkit_test_"))
os.environ["ROS_DOMAIN_ID"] = str(SESSION_DOMAIN_ID)
os.environ["ROS_LOG_DIR"] = str(SESSION_LOG_DIR / "ros_log")
FAST_DISCOVERY_PROFILE = Path(__file__).resolve().parent.parent / "config" / "fastdds_fast_discovery.xml"
os.environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(FAST_DISCOVERY_PROFILE)
os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(FAST_DISCOVERY_PROFILE)
# Only this machine's participants: tests never talk to (or disturb) other hosts on the network.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_LOCALHOST_ONLY", None)
os.environ.pop("ROS_STATIC_PEERS", None)


def pytest_report_header(config) -> str:
    return f"ROS_DOMAIN_ID={SESSION_DOMAIN_ID}, logs in {SESSION_LOG_DIR}"


def pytest_sessionfinish(session, exitstatus) -> None:
    if exitstatus == 0:
        shutil.rmtree(SESSION_LOG_DIR, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if exitstatus != 0 and SESSION_LOG_DIR.exists():
        terminalreporter.write_line(f"ROS logs and process output of this session kept in {SESSION_LOG_DIR}")


@pytest.fixture
def ros_node():
    """An rclpy node with its own context and executor in the test process; shut down after the test."""
    from ros_harness import RosTestNode

    node = RosTestNode()
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def ros_processes(request):
    """Start package executables with ``ros_processes.start(name, *args)``; all are stopped after the test.

    Their combined output is printed at teardown, so pytest shows it next to a failure.
    """
    from ros_harness import ProcessGroup

    group = ProcessGroup(SESSION_LOG_DIR / "processes" / re.sub(r"[^\w.-]+", "_", request.node.name))
    try:
        yield group
    finally:
        group.stop_all()
        for process in group.processes:
            print(f"----- output of {process.describe()} -----\n{process.output()}")


@pytest.fixture(scope="session")
def ros2_workspace(tmp_path_factory) -> dict[str, str]:
    """Environment in which ``ros2 launch ros_dofkit ...``, ``launch_test`` and the ``ros2`` verbs work: the
    checkout built once per session with colcon (test/ros2_workspace.py). Skips, saying why, without the
    launch system."""
    import ros2_workspace

    if ros2_workspace.MISSING:
        pytest.skip(ros2_workspace.SKIP_REASON)
    prefix = ros2_workspace.colcon_build(tmp_path_factory.mktemp("ros2_workspace"))
    return ros2_workspace.workspace_environment(prefix)
