"""``dofkit env``: where ROS 2 and the numerical packages come from in this environment.

Where you are: a subcommand module (argument parsing and output); imports only the standard library, because it must
run where the numerical or ROS packages it reports on are missing.

Prints one line per dependency (version or location) and exits 1 when rclpy or a message package ros_dofkit needs
is missing, so it doubles as a set-up check. Nothing is imported: packages are located with importlib.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import sys

PYTHON_PACKAGES = ("numpy", "scipy", "numba", "rosbags", "matplotlib")
WIDTH = 19  # name column
ROS_PACKAGES = (
    "rclpy",
    "builtin_interfaces",
    "std_msgs",
    "geometry_msgs",
    "sensor_msgs",
    "nav_msgs",
    "tf2_msgs",
    "diagnostic_msgs",
    "std_srvs",
    "visualization_msgs",
    "rosgraph_msgs",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "env",
        help="show where ROS 2 and the numerical packages come from",
        description="List the versions of the numerical packages and the location of rclpy and of every ROS "
        "message package ros_dofkit uses. Exit status 1 if one of the ROS packages is missing.",
    )
    parser.set_defaults(func=run)


def _package_location(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else spec.origin


def run(args: argparse.Namespace) -> int:
    print(f"{'python':<{WIDTH}} {sys.version.split()[0]} ({sys.executable})")
    for name in PYTHON_PACKAGES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "MISSING"
        print(f"{name:<{WIDTH}} {version}")
    distro = os.environ.get("ROS_DISTRO")
    print(f"{'ROS_DISTRO':<{WIDTH}} {distro if distro else '(not set: ROS 2 from pip wheels)'}")
    for variable in ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION"):
        print(f"{variable:<{WIDTH}} {os.environ.get(variable, '(default)')}")
    missing = []
    for name in ROS_PACKAGES:
        location = _package_location(name)
        if location is None:
            missing.append(name)
        print(f"{name:<{WIDTH}} {location or 'MISSING'}")
    if missing:
        print(f"missing ROS packages: {', '.join(missing)} (run ./run to set up the environment)", file=sys.stderr)
        return 1
    return 0
