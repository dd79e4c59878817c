"""Thin rclpy nodes of ros_dofkit (console scripts): declare and validate parameters, wire topics, call the core.

A node file holds no math; see doc/architecture.md.
"""
