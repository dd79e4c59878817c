"""What every estimator launch file shares (you are in the ROS edge; launch/<use>.launch.py call this).

Launch arguments: ``config`` (parameter YAML, default the use's file in the package share), ``robot_description``
(URDF XML; non-empty replaces the config's urdf_files), ``urdf`` (comma-separated URDF files replacing the
config's urdf_files), ``namespace``, ``use_sim_time``, ``rviz`` (true: also start rviz2 where it is installed)
and ``rviz_config`` (default the use's ``.rviz`` file in the package share), ``fast_discovery`` (true, the default:
the node runs with the package's fast-discovery Fast DDS profile unless the environment already names a profile
file; see :func:`discovery_environment`). Needs launch and launch_ros (a full ROS 2 install).
"""

from __future__ import annotations

import os
import shutil

PACKAGE = "ros_dofkit"

#: Launch arguments of every estimator launch file.
ESTIMATOR_LAUNCH_ARGUMENTS = ("config", "robot_description", "urdf", "namespace", "use_sim_time", "rviz",
                              "rviz_config", "fast_discovery")
#: The package's fast-discovery Fast DDS profile (in ``<share>/ros_dofkit/config``) and the variables that name a
#: default profile file: Fast DDS 2.x (Jazzy) reads the first, Fast DDS 3 the second.
FAST_DISCOVERY_PROFILE = "fastdds_fast_discovery.xml"
PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")


def default_config_path(config_file: str) -> str:
    """``<share>/ros_dofkit/config/<config_file>`` of the installed package."""
    from ament_index_python.packages import get_package_share_directory

    return os.path.join(get_package_share_directory(PACKAGE), "config", config_file)


def _true(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes")


def rviz_command(rviz: str, rviz_config: str, namespace: str, which=shutil.which) -> list[str] | None:
    """The rviz2 command line for the ``rviz`` / ``rviz_config`` / ``namespace`` launch arguments: None when
    ``rviz`` is not true, ``[]`` when rviz2 is not installed here; rviz2 runs in the estimator's namespace, so its
    RobotModel reads that namespace's ``robot_description``."""
    if not _true(rviz):
        return None
    executable = which("rviz2")
    if executable is None:
        return []
    command = [executable, "-d", rviz_config]
    if namespace.strip("/"):
        command += ["--ros-args", "-r", f"__ns:=/{namespace.strip('/')}"]
    return command


def launch_overrides(robot_description: str, urdf: str, use_sim_time: str) -> dict:
    """Parameter overrides from the launch arguments (plain values; testable without launch)."""
    overrides = {"use_sim_time": _true(use_sim_time)}
    if robot_description.strip():
        overrides["robot_description"] = robot_description
    files = [f.strip() for f in urdf.split(",") if f.strip()]
    if files:
        overrides["urdf_files"] = files
    return overrides


def discovery_environment(fast_discovery: str, profile: str, environment) -> dict:
    """The variables the estimator node is started with for the ``fast_discovery`` launch argument.

    ``fast_discovery`` true and neither :data:`PROFILE_VARIABLES` set in ``environment`` (the launch's): both name
    ``profile``, so Fast DDS 2.x and 3 give the node's participant the profile's announcements (a process that
    starts after the node then discovers it within 0.5 s instead of up to 3 s; README, "Joining a running graph").
    Otherwise nothing: a profile file the user named is theirs, and false keeps Fast DDS's defaults. Other RMWs
    (Cyclone DDS) do not read these variables."""
    if not _true(fast_discovery) or any(environment.get(variable) for variable in PROFILE_VARIABLES):
        return {}
    return {variable: profile for variable in PROFILE_VARIABLES}


def estimator_launch_description(config_file: str, node_name: str = "estimator"):
    """LaunchDescription running the ``estimator`` executable with ``config_file`` and the shared arguments."""
    from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from launch import LaunchDescription

    def make_node(context):
        def value(name):
            return LaunchConfiguration(name).perform(context)

        actions = [
            Node(
                package=PACKAGE,
                executable="estimator",
                name=node_name,
                namespace=value("namespace"),
                parameters=[value("config"), launch_overrides(value("robot_description"), value("urdf"),
                                                              value("use_sim_time"))],
                output="screen",
                additional_env=discovery_environment(value("fast_discovery"),
                                                     default_config_path(FAST_DISCOVERY_PROFILE), context.environment),
            )
        ]
        rviz = rviz_command(value("rviz"), value("rviz_config"), value("namespace"))
        if rviz == []:
            actions.append(LogInfo(msg="rviz:=true, but rviz2 is not installed here: not started"))
        elif rviz:
            actions.append(ExecuteProcess(cmd=rviz, output="screen"))
        return actions

    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=default_config_path(config_file),
                              description="estimator parameter file"),
        DeclareLaunchArgument("robot_description", default_value="",
                              description="URDF XML; non-empty replaces the config's urdf_files"),
        DeclareLaunchArgument("urdf", default_value="",
                              description="comma-separated URDF files replacing the config's urdf_files"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the estimator node"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock (bag replay)"),
        DeclareLaunchArgument("rviz", default_value="false", description="also start rviz2 (where installed)"),
        DeclareLaunchArgument("rviz_config", default_value=default_config_path(config_file.replace(".yaml", ".rviz")),
                              description="rviz2 configuration"),
        DeclareLaunchArgument("fast_discovery", default_value="true",
                              description="Fast DDS: run the node with the package's fast-discovery profile unless "
                                          "FASTRTPS_/FASTDDS_DEFAULT_PROFILES_FILE is set (give it to the drivers "
                                          "too)"),
        OpaqueFunction(function=make_node),
    ])
