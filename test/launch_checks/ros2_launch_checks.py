"""launch_testing checks of one launch file of ros_dofkit, started as a user starts it: ``ros2 launch ros_dofkit FILE``.

Where you are: test/launch_checks/, a launch_testing test file (``generate_test_description`` plus unittest
classes), run by test/test_launch_integration.py through launch_testing's own runner ``launch_test`` (its pytest
plugin does not load under pytest 9; see README, "Launch and ros2 CLI tests"). By hand, where ``ros2 launch
ros_dofkit`` works (a colcon install of the package on AMENT_PREFIX_PATH):

    launch_test test/launch_checks/ros2_launch_checks.py launch_file:=arm_4imu.launch.py namespace:=lt

Launch arguments: ``launch_file`` (one of launch/*.launch.py) and that file's own arguments, passed on to it when
non-empty (estimators: namespace, use_sim_time, config, urdf, robot_description; joint_state_filter: also
model_names, joint_names, input, output). Expected topics, QoS and parameters come from the documented interface
(README, doc/architecture.md) and the parameter file, never from the running node.

``ros2 launch`` runs in a session of its own, so that the last active check can do what a terminal's Ctrl-C does:
SIGINT to the whole process group (the node gets it from the terminal and once more from ``ros2 launch``). One
launch serves every check of a file; each check waits with its own deadline.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import launch_testing.markers
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from rcl_interfaces.srv import GetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import parameter_value_to_python
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

from launch import LaunchDescription
from ros_dofkit.ros.parameters import load_parameter_file

PACKAGE = "ros_dofkit"
#: Arguments passed on to the launch file when given (the union of what the package's launch files declare).
PASSED_ON = ("namespace", "use_sim_time", "config", "urdf", "robot_description", "model_names", "joint_names",
             "input", "output")
READY_TIMEOUT = 150.0  # s: a cold numba cache (no ./run set-up before) compiles the kernels first
GRAPH_TIMEOUT = 10.0  # s: discovery of the node's endpoints (under 1 s with the test profile; loaded machine)
SHUTDOWN_TIMEOUT = 15.0  # s: SIGINT to every process until `ros2 launch` has exited
LAUNCH_PROCESS = "ros2_launch"

RELIABLE_VOLATILE = (ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
RELIABLE_TRANSIENT_LOCAL = (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)
SENSOR_DATA = (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE)


def ros2_executable() -> str:
    """``ros2`` of this interpreter's environment (a venv), else the one on PATH (a sourced ROS 2)."""
    beside = Path(sys.executable).parent / "ros2"
    return str(beside) if beside.exists() else (shutil.which("ros2") or "ros2")


def _launch_command(context):
    arguments = [f"{name}:={LaunchConfiguration(name).perform(context)}" for name in PASSED_ON
                 if LaunchConfiguration(name).perform(context)]
    # setsid: `ros2 launch` leads a process group of its own, as in a terminal.
    command = ["setsid", ros2_executable(), "launch", PACKAGE, LaunchConfiguration("launch_file").perform(context),
               *arguments]
    # unbuffered: the checks wait for lines of its output as they come
    return [ExecuteProcess(cmd=command, name=LAUNCH_PROCESS, output="screen",
                           additional_env={"PYTHONUNBUFFERED": "1"})]


@launch_testing.markers.keep_alive  # the last active check ends `ros2 launch` itself: not a premature death
def generate_test_description():
    return LaunchDescription([
        DeclareLaunchArgument("launch_file", description="launch file of ros_dofkit to check"),
        *[DeclareLaunchArgument(name, default_value="") for name in PASSED_ON],
        OpaqueFunction(function=_launch_command),
        launch_testing.actions.ReadyToTest(),
    ])


class Expected:
    """The documented interface of the node a launch file starts, for these launch arguments."""

    def __init__(self, test_args: dict):
        self.args = test_args
        self.launch_file = test_args["launch_file"]
        namespace = test_args.get("namespace", "").strip("/")
        self.namespace = f"/{namespace}" if namespace else ""
        self.filter = self.launch_file == "joint_state_filter.launch.py"
        self.node_name = "joint_state_filter" if self.filter else "estimator"
        self.ready = f"{self.node_name} ready"

    def topic(self, name: str) -> str:
        return name if name.startswith("/") else f"{self.namespace}/{name}"

    def parameter_file(self) -> dict:
        """Flat parameters of the estimator's parameter file (``config`` argument, else the launch file's own)."""
        path = self.args.get("config") or os.path.join(
            get_package_share_directory(PACKAGE), "config", self.launch_file.replace(".launch.py", ".yaml"))
        return load_parameter_file(path)

    def publishers(self) -> dict:
        """{resolved topic: (type, (reliability, durability))} of the outputs (README, doc/architecture.md)."""
        if self.filter:
            return {self.topic(self.args.get("output") or "joint_states_filtered"):
                    ("sensor_msgs/msg/JointState", RELIABLE_VOLATILE)}
        values = self.parameter_file()
        out = values.get("output_namespace", "estimated").strip("/")
        prefix = f"{out}/" if out else ""
        topics = {
            self.topic(f"{prefix}joint_states"): ("sensor_msgs/msg/JointState", RELIABLE_VOLATILE),
            self.topic(f"{prefix}sensor_errors"): ("std_msgs/msg/Float64MultiArray", RELIABLE_VOLATILE),
            "/tf": ("tf2_msgs/msg/TFMessage", RELIABLE_VOLATILE),
            "/tf_static": ("tf2_msgs/msg/TFMessage", RELIABLE_TRANSIENT_LOCAL),
            "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", RELIABLE_VOLATILE),
        }
        for instance, base in zip(values["model_names"], values["base_joints"], strict=True):
            topics[self.topic(f"{prefix}{instance}/joint_states")] = ("sensor_msgs/msg/JointState", RELIABLE_VOLATILE)
            if base == "floating":
                topics[self.topic(f"{prefix}odometry/{instance}")] = ("nav_msgs/msg/Odometry", RELIABLE_VOLATILE)
        return topics

    def subscriptions(self) -> dict:
        """{resolved topic: (type, QoS)} of the inputs: sensor data QoS (the ``input_qos`` default)."""
        if self.filter:
            return {self.topic(self.args.get("input") or "joint_states"): ("sensor_msgs/msg/JointState", SENSOR_DATA)}
        values = self.parameter_file()
        topics = {self.topic(values.get("joint_states_topic", "joint_states")): ("sensor_msgs/msg/JointState",
                                                                                 SENSOR_DATA)}
        for name in values["imu_names"]:
            topics[self.topic(values[f"imus.{name}.topic"])] = ("sensor_msgs/msg/Imu", SENSOR_DATA)
        return topics


class GraphProbe:
    """An rclpy node of its own context that looks at the ROS graph and asks parameters, with deadlines."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)  # not launch_test's own argv
        self.node = rclpy.create_node("ros2_launch_checks_probe", context=self.context)

    def close(self):
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def wait_for(self, condition, what: str, timeout: float = GRAPH_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.05)

    def endpoints(self, kind: str, topic: str, node_name: str, namespace: str) -> list:
        """Publishers or subscriptions (``kind``) of ``node_name`` on ``topic`` once discovered."""
        info = self.node.get_publishers_info_by_topic if kind == "publisher" else \
            self.node.get_subscriptions_info_by_topic
        return self.wait_for(
            lambda: [e for e in info(topic) if e.node_name == node_name and e.node_namespace == (namespace or "/")],
            f"a {kind} of {namespace}/{node_name} on {topic}")

    def parameters(self, node: str, names: list) -> dict:
        client = self.node.create_client(GetParameters, f"{node}/get_parameters")
        try:
            self.wait_for(lambda: client.service_is_ready(), f"{node}/get_parameters")
            future = client.call_async(GetParameters.Request(names=names))
            executor = SingleThreadedExecutor(context=self.context)
            executor.add_node(self.node)
            executor.spin_until_future_complete(future, timeout_sec=GRAPH_TIMEOUT)
            executor.remove_node(self.node)
            assert future.done(), f"{node}/get_parameters did not answer within {GRAPH_TIMEOUT} s"
            return {name: parameter_value_to_python(value) for name, value in zip(names, future.result().values,
                                                                                   strict=True)}
        finally:
            self.node.destroy_client(client)


def wait_until_ready(proc_output, expected: Expected) -> None:
    # `ros2 launch` prints its processes' output (ROS logs go to their stderr) on its stdout.
    proc_output.assertWaitFor(expected.ready, process=LAUNCH_PROCESS, timeout=READY_TIMEOUT, stream="stdout")


class TestRunningLaunch(unittest.TestCase):
    """The node comes up with its documented interface; the launch arguments take effect."""

    @classmethod
    def setUpClass(cls):
        cls.probe = GraphProbe()

    @classmethod
    def tearDownClass(cls):
        cls.probe.close()

    def setUp(self, proc_output, test_args):
        self.expected = Expected(test_args)
        wait_until_ready(proc_output, self.expected)

    def test_node_comes_up_under_its_namespace(self):
        expected = self.expected
        self.probe.wait_for(
            lambda: (expected.node_name, expected.namespace or "/") in self.probe.node.get_node_names_and_namespaces(),
            f"node {expected.namespace}/{expected.node_name} in the graph")

    def test_outputs_have_the_documented_types_and_qos(self):
        for topic, (msg_type, (reliability, durability)) in self.expected.publishers().items():
            (endpoint, *_) = self.probe.endpoints("publisher", topic, self.expected.node_name, self.expected.namespace)
            self.assertEqual(endpoint.topic_type, msg_type, topic)
            self.assertEqual(endpoint.qos_profile.reliability, reliability, topic)
            self.assertEqual(endpoint.qos_profile.durability, durability, topic)

    def test_inputs_have_the_documented_types_and_sensor_data_qos(self):
        for topic, (msg_type, (reliability, durability)) in self.expected.subscriptions().items():
            (endpoint, *_) = self.probe.endpoints("subscription", topic, self.expected.node_name,
                                                  self.expected.namespace)
            self.assertEqual(endpoint.topic_type, msg_type, topic)
            self.assertEqual(endpoint.qos_profile.reliability, reliability, topic)
            self.assertEqual(endpoint.qos_profile.durability, durability, topic)

    def test_estimator_offers_the_calibrate_services(self):
        if self.expected.filter:
            self.skipTest("joint_state_filter offers no service of its own")
        for name in ("calibrate", "calibrate_hinges"):
            service = f"{self.expected.namespace}/estimator/{name}"
            self.probe.wait_for(lambda s=service: (s, ["std_srvs/srv/Trigger"]) in
                                self.probe.node.get_service_names_and_types(), f"service {service} (std_srvs/Trigger)")

    def test_launch_arguments_reach_the_node(self):
        args = self.expected.args
        names = ["use_sim_time"] + [name for name in ("robot_description",) if args.get(name)] + (
            ["urdf_files"] if args.get("urdf") else [])
        values = self.probe.parameters(f"{self.expected.namespace}/{self.expected.node_name}", names)
        self.assertEqual(values["use_sim_time"], args.get("use_sim_time", "false").lower() == "true")
        if args.get("robot_description"):
            self.assertEqual(values["robot_description"], args["robot_description"])
        if args.get("urdf"):
            self.assertEqual(list(values["urdf_files"]), [f.strip() for f in args["urdf"].split(",")])


class TestTerminalInterrupt(unittest.TestCase):
    """Ctrl-C in the terminal: SIGINT to the whole process group. (Runs after TestRunningLaunch: the loader takes
    a module's test classes in name order.)"""

    def test_sigint_to_the_process_group_ends_every_process(self, proc_info, proc_output, test_args):
        wait_until_ready(proc_output, Expected(test_args))
        os.killpg(proc_info[LAUNCH_PROCESS].pid, signal.SIGINT)
        proc_info.assertWaitForShutdown(process=LAUNCH_PROCESS, timeout=SHUTDOWN_TIMEOUT)


@launch_testing.post_shutdown_test()
class TestAfterShutdown(unittest.TestCase):
    def test_every_process_exited_with_status_0_and_no_traceback(self, proc_info, proc_output, test_args):
        launch_testing.asserts.assertExitCodes(proc_info)
        output = "".join(event.text.decode(errors="replace") for event in proc_output)
        node_name = Expected(test_args).node_name
        self.assertRegex(output, rf"\[{node_name}-1\]: process has finished cleanly", output)
        for sign in ("Traceback", "KeyboardInterrupt", "exit code -", "[ERROR]"):
            self.assertNotIn(sign, output)
