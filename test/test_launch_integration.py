"""Launch-system tests of the estimator launch files, for a full ROS 2 installation with ros_dofkit built and
sourced (the ``ros2`` command, launch, launch_ros, ament_index). This machine has the ROS 2 pip wheels only (rclpy
and messages, no launch system), so these tests skip here and say why; test/test_launch_files.py checks
statically what can be checked without them.

Each test runs ``ros2 launch ros_dofkit <file> namespace:=<ns>`` as a process, waits until the node reports
ready, checks that its outputs are advertised under the namespace, and stops it with SIGINT.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest

MISSING = [name for name in ("launch_ros", "launch_testing", "ament_index_python")
           if importlib.util.find_spec(name) is None]
if shutil.which("ros2") is None:
    MISSING.append("the ros2 command")
pytestmark = [
    pytest.mark.ros,
    pytest.mark.skipif(bool(MISSING), reason="needs a full ROS 2 install with the launch system and ros_dofkit "
                       f"installed; missing: {', '.join(MISSING)}"),
]


@pytest.mark.parametrize("launch_file", ["arm_4imu.launch.py", "mobile_manipulator.launch.py", "quadruped.launch.py"])
def test_launch_file_starts_the_estimator(launch_file, ros_node, ros_processes):
    launcher = ros_processes.start(shutil.which("ros2"), "launch", "ros_dofkit", launch_file, "namespace:=lt",
                                   "use_sim_time:=false")
    launcher.wait_for_output("estimator ready", timeout=120)
    ros_node.spin_until(
        lambda: any(name == "/lt/estimated/joint_states" for name, _ in ros_node.node.get_topic_names_and_types()),
        "/lt/estimated/joint_states to be advertised", timeout=30)
    assert launcher.stop() == 0, launcher.output()
