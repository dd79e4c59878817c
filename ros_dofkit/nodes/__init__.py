"""Thin rclpy nodes of ros_dofkit (console scripts): declare and validate parameters, wire topics, call the core.

Where you are: ``ros_dofkit.nodes``, above ``ros_dofkit.ros`` and ``core`` (which node modules import); nothing in
the package imports the nodes (console scripts and launch files start them).

A node file holds no math; see doc/architecture.md.
"""
