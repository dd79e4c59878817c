"""Shutdown of ros_dofkit's nodes (ros_dofkit.nodes.common.run_node) as real processes: a terminal's Ctrl-C.

In a terminal, Ctrl-C sends SIGINT to every process of the foreground group, and ``ros2 launch`` forwards one
more to each node: a node gets two, the second possibly while it is cleaning up after the first. Both must end
it with status 0 and no traceback. The first test makes the bad moment certain (a relay whose clean-up announces
itself and takes a second; the second SIGINT comes inside it); the second sends two SIGINTs back to back to
every node executable.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0  # s: a first start may compile the estimator's kernels (cached afterwards)

SLOW_CLEAN_UP_RELAY = """
import sys, time
import rclpy
from ros_dofkit.nodes.common import run_node
from ros_dofkit.nodes.relay import RelayNode

class SlowCleanUpRelay(RelayNode):
    def destroy_node(self):
        print("cleaning up", flush=True)
        time.sleep(1.0)
        super().destroy_node()
        print("cleaned up", flush=True)

def spin(node):
    print("spinning", flush=True)  # built and handed over: a SIGINT from now on finds a node to clean up
    rclpy.spin(node)

sys.exit(run_node(SlowCleanUpRelay, "dofkit_relay", spin=spin))
"""


def assert_clean_exit(process) -> None:
    status = process.wait_for_exit(timeout=TIMEOUT)
    output = process.output()
    assert status == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output


def test_a_second_sigint_during_clean_up_ends_the_node_cleanly(ros_processes):
    relay = ros_processes.start(sys.executable, "-c", SLOW_CLEAN_UP_RELAY)
    relay.wait_for_output("spinning", timeout=TIMEOUT)
    os.killpg(relay.pid, signal.SIGINT)
    relay.wait_for_output("cleaning up")
    os.killpg(relay.pid, signal.SIGINT)
    assert_clean_exit(relay)
    assert "cleaned up" in relay.output()  # the clean-up was not cut short


@pytest.mark.parametrize("executable, arguments, ready", [
    ("estimator", ["--params-file", str(ROOT / "config" / "arm_4imu.yaml")], "estimator ready"),
    ("joint_state_filter", ["-p", "joint_names:=[arm_joint1]"], "joint_state_filter ready"),
    ("dofkit_relay", [], "relaying"),
])
def test_two_sigints_back_to_back_end_every_node_cleanly(ros_processes, executable, arguments, ready):
    node = ros_processes.start(executable, "--ros-args", *arguments)
    node.wait_for_output(ready, timeout=TIMEOUT)
    os.killpg(node.pid, signal.SIGINT)
    os.killpg(node.pid, signal.SIGINT)
    assert_clean_exit(node)
