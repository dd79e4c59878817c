"""Launch ros_dofkit's joint_state_filter: republish a JointState topic restricted to a DofMask.

Arguments: input (topic), output (topic), model_names / joint_names (comma-separated; one of them), the robot:
config (an estimator parameter file, a bare name taken from the package's config directory: the filter builds the
estimator's robot with the same model instance names), urdf (comma-separated URDF files, relative to the package's
models directory) or robot_description (these two replace the config's robot files), namespace, use_sim_time,
fast_discovery (as the estimator's launch files: the package's fast-discovery Fast DDS profile unless one is named).
Example: ros2 launch ros_dofkit joint_state_filter.launch.py config:=arm_4imu.yaml model_names:=arm
"""

import os

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from ros_dofkit.nodes.joint_state_filter import robot_parameters_from_estimator
from ros_dofkit.ros.launch_support import FAST_DISCOVERY_PROFILE, default_config_path, discovery_environment
from ros_dofkit.ros.parameters import load_parameter_file


def _split(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def _make_node(context):
    def value(name):
        return LaunchConfiguration(name).perform(context)

    parameters = {
        "input_topic": value("input"),
        "output_topic": value("output"),
        "use_sim_time": value("use_sim_time").lower() in ("true", "1", "yes"),
    }
    config = value("config")
    if config:
        path = config if os.sep in config else default_config_path(config)
        parameters.update(robot_parameters_from_estimator(load_parameter_file(path)))
    for key, argument in (("model_names", "model_names"), ("joint_names", "joint_names"), ("urdf_files", "urdf")):
        if _split(value(argument)):
            parameters[key] = _split(value(argument))
    if value("robot_description"):
        parameters["robot_description"] = value("robot_description")
    environment = discovery_environment(value("fast_discovery"), default_config_path(FAST_DISCOVERY_PROFILE),
                                        context.environment)
    return [Node(package="ros_dofkit", executable="joint_state_filter", name="joint_state_filter",
                 namespace=value("namespace"), parameters=[parameters], output="screen", additional_env=environment)]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("input", default_value="joint_states", description="JointState topic to filter"),
        DeclareLaunchArgument("output", default_value="joint_states_filtered", description="filtered topic"),
        DeclareLaunchArgument("model_names", default_value="", description="keep these model instances' joints"),
        DeclareLaunchArgument("joint_names", default_value="", description="keep these joints"),
        DeclareLaunchArgument("config", default_value="", description="estimator parameter file: its robot"),
        DeclareLaunchArgument("urdf", default_value="", description="URDF files, one model instance each"),
        DeclareLaunchArgument("robot_description", default_value="", description="URDF XML (one instance)"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the node"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock (bag replay)"),
        DeclareLaunchArgument("fast_discovery", default_value="true",
                              description="Fast DDS: the package's fast-discovery profile unless one is named"),
        OpaqueFunction(function=_make_node),
    ])
