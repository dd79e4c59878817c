"""The ``ros2`` command line against the estimator started by ``ros2 launch``, as a user inspects it.

One launch serves the module: ``dofkit record`` writes a bag of the demo arm and its estimator configuration,
``ros2 launch ros_dofkit arm_4imu.launch.py config:=<that file> use_sim_time:=true`` starts the estimator and
``dofkit play --loop`` feeds it. Then: ``ros2 param describe`` of every parameter shows the schema's description
and range (ros_dofkit/ros/parameters.py is the truth), ``ros2 param set`` with a bad value is refused with the
reason and changes nothing, ``ros2 service call .../calibrate`` answers (``.../calibrate_hinges`` with its refusal),
and ``ros2 topic echo --once`` of every output prints a message that parses as YAML with the message's fields.

Needs the launch system and ``ros2`` (test/ros2_workspace.py); without them every test here skips and says why.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from ros2_workspace import MISSING, SKIP_REASON, ros2_tool
from ros_dofkit import cli
from ros_dofkit.ros.parameters import DOUBLE, INTEGER, known_parameter_specs, load_parameter_file
from ros_harness import ProcessGroup

pytestmark = [pytest.mark.ros, pytest.mark.skipif(bool(MISSING), reason=SKIP_REASON)]

NODE = "/estimator"
CLI_TIMEOUT = 60  # s per ros2 command (each starts a Python process and discovers the graph)
# No daemon (nothing outlives the tests), so each command discovers the graph itself: give it time on a loaded
# machine. (--spin-time: how long `param list` looks; --timeout: how long the others wait for the node.)
LIST = ("list", "--no-daemon", "--spin-time", "5")
WAIT = ("--no-daemon", "--timeout", "20")


@pytest.fixture(scope="module")
def launched(ros2_workspace, tmp_path_factory):
    """(environment, flat parameters of the config) while ``ros2 launch`` runs the estimator fed by a bag."""
    folder = tmp_path_factory.mktemp("ros2_cli")
    bag = folder / "arm_bag"
    assert cli.main(["record", str(bag), "--duration", "4", "--clock"]) == 0
    config = folder / "arm_bag.estimator.yaml"
    group = ProcessGroup(folder / "processes")
    try:
        launch = group.start(ros2_tool("ros2"), "launch", "ros_dofkit", "arm_4imu.launch.py", f"config:={config}",
                             "use_sim_time:=true", env=ros2_workspace)
        launch.wait_for_output("estimator ready", timeout=120)
        group.start("dofkit", "play", str(bag), "--loop", "--quiet", "--wait-for-subscribers", "/imu/hand/data",
                    env=ros2_workspace)
        yield ros2_workspace, load_parameter_file(config)
        assert launch.stop() == 0, launch.output()
    finally:
        group.stop_all()


def ros2(environment: dict, *arguments: str) -> str:
    """Run ``ros2 ARGUMENTS``; return its output, failing on an error."""
    result = subprocess.run([ros2_tool("ros2"), *arguments], env=environment, capture_output=True, text=True,
                            timeout=CLI_TIMEOUT)
    assert result.returncode == 0, f"ros2 {' '.join(arguments)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def described(output: str) -> dict:
    """{name: {"Description": ..., "Min value": ..., ...}} from ``ros2 param describe`` output."""
    parameters = {}
    current = None
    for line in output.splitlines():
        if line.startswith("Parameter name:"):
            current = parameters.setdefault(line.split(":", 1)[1].strip(), {})
        elif current is not None and ":" in line:
            key, value = line.strip().split(":", 1)
            current[key] = value.strip()
    return parameters


def test_param_describe_shows_every_description_and_range(launched):
    environment, values = launched
    listed = ros2(environment, "param", *LIST, NODE).split()
    specs = known_parameter_specs(values, values["model_names"])
    assert set(specs) <= set(listed)
    descriptions = described(ros2(environment, "param", "describe", *WAIT, NODE, *specs))
    for name, spec in specs.items():
        shown = descriptions[name]
        assert shown["Description"] == spec.description, name
        if spec.value_range is not None and spec.type in (DOUBLE, INTEGER):  # a range rclpy itself enforces
            low, high = spec.value_range
            assert float(shown["Min value"]) == low and float(shown["Max value"]) == high, (name, shown)
        else:
            assert "Min value" not in shown, (name, shown)
        if spec.constraints():  # ranges of arrays, choices, lengths: in words
            assert shown["Additional constraints"] == spec.constraints(), (name, shown)


def test_param_set_with_a_bad_value_is_refused_with_the_reason(launched):
    environment, values = launched
    result = subprocess.run([ros2_tool("ros2"), "param", "set", *WAIT, NODE, "stale_timeout", "-5.0"],
                            env=environment, capture_output=True, text=True, timeout=CLI_TIMEOUT)
    assert "Setting parameter failed" in result.stdout + result.stderr, result
    assert "stale_timeout" in result.stdout + result.stderr and "60.0" in result.stdout + result.stderr, result
    kept = ros2(environment, "param", "get", *WAIT, NODE, "stale_timeout")
    assert float(re.search(r"Double value is: (\S+)", kept).group(1)) == values.get("stale_timeout", 0.1)


def test_service_call_calibrate_answers(launched):
    environment, _ = launched
    output = ros2(environment, "service", "call", f"{NODE}/calibrate", "std_srvs/srv/Trigger")
    answer = re.search(r"Trigger_Response\(success=(True|False), message=(['\"])(.+)\2\)", output)
    assert answer, output  # a reason or a summary, never an empty answer


def test_service_call_calibrate_hinges_refuses_with_the_reason(launched):
    """The demo arm's IMUs report their own orientations: no raw IMU to turn, so ``~/calibrate_hinges`` answers at
    once with success=False and why (no stand calibration yet, or, after one, no raw IMU of it on a hinge)."""
    environment, _ = launched
    output = ros2(environment, "service", "call", f"{NODE}/calibrate_hinges", "std_srvs/srv/Trigger")
    answer = re.search(r"Trigger_Response\(success=False, message=(['\"])hinge calibration refused: (.+)\1\)", output)
    assert answer, output
    assert "no stand calibration yet" in answer.group(2) or "no raw IMU calibrated on the stand" in answer.group(2)


@pytest.mark.parametrize("topic, msg_type, fields, options", [
    ("/estimated/joint_states", "sensor_msgs/msg/JointState", ("header", "name", "position"), ()),
    ("/estimated/arm/joint_states", "sensor_msgs/msg/JointState", ("header", "name", "position"), ()),
    ("/estimated/sensor_errors", "std_msgs/msg/Float64MultiArray", ("layout", "data"), ()),
    ("/tf", "tf2_msgs/msg/TFMessage", ("transforms",), ()),
    # latched (transient local), as a late subscriber such as rviz asks for it
    ("/tf_static", "tf2_msgs/msg/TFMessage", ("transforms",),
     ("--qos-durability", "transient_local", "--qos-reliability", "reliable")),
    ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", ("header", "status"), ()),
], ids=lambda value: value if isinstance(value, str) and value.startswith("/") else None)
def test_topic_echo_once_of_each_output_parses(launched, topic, msg_type, fields, options):
    environment, _ = launched
    # (the type given: without the daemon, echo would have to discover it within its spin time)
    message = yaml.safe_load(ros2(environment, "topic", "echo", "--once", "--no-daemon", "--timeout", "30",
                                  *options, topic, msg_type).split("\n---")[0])
    assert isinstance(message, dict) and set(fields) <= set(message), message
    if "name" in message:
        assert message["name"] and len(message["name"]) == len(message["position"]), message
    if "transforms" in message:
        assert message["transforms"] and all(t["child_frame_id"] for t in message["transforms"]), message
