"""ros_dofkit.nodes.common: the shutdown of ros_dofkit's nodes (run_node) as real processes, and ClockSeconds.

In a terminal, Ctrl-C sends SIGINT to every process of the foreground group, and ``ros2 launch`` forwards one
more to each node: a node gets two, the second possibly while it is cleaning up after the first. Both must end
it with status 0 and no traceback. The first test makes the bad moment certain (a relay whose clean-up announces
itself and takes a second; the second SIGINT comes inside it); the second sends two SIGINTs back to back to
every node executable. ``ClockSeconds`` (the estimator's clock read per input message) is checked against the
clock's own ``now()`` under wall and sim time, also when ``use_sim_time`` is switched at run time.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.parameter import Parameter
from rclpy.time import Time

from ros_dofkit.nodes.common import ClockSeconds

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


def test_clock_seconds_reads_what_the_clock_reads_under_wall_and_sim_time():
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        wall = rclpy.create_node("clock_seconds_wall", context=context).get_clock()
        for clock, reference in ((wall, wall), (wall, Clock(clock_type=ClockType.SYSTEM_TIME)),
                                 (Clock(clock_type=ClockType.STEADY_TIME),) * 2):
            before = reference.now().nanoseconds * 1e-9
            assert before <= ClockSeconds(clock).seconds() <= reference.now().nanoseconds * 1e-9
        sim = rclpy.create_node("clock_seconds_sim", context=context,
                                parameter_overrides=[Parameter("use_sim_time", value=True)]).get_clock()
        assert sim.ros_time_is_active and ClockSeconds(sim).seconds() is None  # no /clock message yet
        sim.set_ros_time_override(Time(seconds=12, nanoseconds=500_000_000, clock_type=ClockType.ROS_TIME))
        assert ClockSeconds(sim).seconds() == 12.5
    finally:
        rclpy.try_shutdown(context=context)


def test_clock_seconds_follows_use_sim_time_switched_at_run_time():
    """The reader asks whether ROS time is active once and then follows the clock's activation changes: switching
    ``use_sim_time`` on and off at run time moves it between the /clock time and the system clock."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("clock_seconds_switch", context=context)
        reader = ClockSeconds(node.get_clock())
        system = Clock(clock_type=ClockType.SYSTEM_TIME)
        before = system.now().nanoseconds * 1e-9
        assert before <= reader.seconds() <= system.now().nanoseconds * 1e-9
        node.set_parameters([Parameter("use_sim_time", value=True)])
        assert node.get_clock().ros_time_is_active and reader.seconds() is None  # no /clock message yet
        node.get_clock().set_ros_time_override(Time(seconds=3, nanoseconds=250_000_000,
                                                    clock_type=ClockType.ROS_TIME))
        assert reader.seconds() == 3.25
        node.set_parameters([Parameter("use_sim_time", value=False)])
        before = system.now().nanoseconds * 1e-9
        assert not node.get_clock().ros_time_is_active
        assert before <= reader.seconds() <= system.now().nanoseconds * 1e-9
    finally:
        rclpy.try_shutdown(context=context)
