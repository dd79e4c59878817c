"""The ROS edge of ros_dofkit: conversions between core types and ROS messages, QoS profiles, parameter schema.

Modules here may import rclpy and message packages; ``ros_dofkit.core`` never does. See doc/architecture.md.
"""
