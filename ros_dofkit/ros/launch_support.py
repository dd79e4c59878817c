"""What every estimator launch file shares (you are in the ROS edge; launch/<use>.launch.py call this).

Launch arguments: ``config`` (parameter YAML, default the use's file in the package share), ``robot_description``
(URDF XML; non-empty replaces the config's urdf_files), ``urdf`` (comma-separated URDF files replacing the
config's urdf_files), ``namespace`` and ``use_sim_time``. Needs launch and launch_ros (a full ROS 2 install).
"""

from __future__ import annotations

import os

PACKAGE = "ros_dofkit"

#: Launch arguments of every estimator launch file.
ESTIMATOR_LAUNCH_ARGUMENTS = ("config", "robot_description", "urdf", "namespace", "use_sim_time")


def default_config_path(config_file: str) -> str:
    """``<share>/ros_dofkit/config/<config_file>`` of the installed package."""
    from ament_index_python.packages import get_package_share_directory

    return os.path.join(get_package_share_directory(PACKAGE), "config", config_file)


def launch_overrides(robot_description: str, urdf: str, use_sim_time: str) -> dict:
    """Parameter overrides from the launch arguments (plain values; testable without launch)."""
    overrides = {"use_sim_time": use_sim_time.strip().lower() in ("true", "1", "yes")}
    if robot_description.strip():
        overrides["robot_description"] = robot_description
    files = [f.strip() for f in urdf.split(",") if f.strip()]
    if files:
        overrides["urdf_files"] = files
    return overrides


def estimator_launch_description(config_file: str, node_name: str = "estimator"):
    """LaunchDescription running the ``estimator`` executable with ``config_file`` and the shared arguments."""
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from launch import LaunchDescription

    def make_node(context):
        def value(name):
            return LaunchConfiguration(name).perform(context)

        return [
            Node(
                package=PACKAGE,
                executable="estimator",
                name=node_name,
                namespace=value("namespace"),
                parameters=[value("config"), launch_overrides(value("robot_description"), value("urdf"),
                                                              value("use_sim_time"))],
                output="screen",
            )
        ]

    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=default_config_path(config_file),
                              description="estimator parameter file"),
        DeclareLaunchArgument("robot_description", default_value="",
                              description="URDF XML; non-empty replaces the config's urdf_files"),
        DeclareLaunchArgument("urdf", default_value="",
                              description="comma-separated URDF files replacing the config's urdf_files"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the estimator node"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock (bag replay)"),
        OpaqueFunction(function=make_node),
    ])
