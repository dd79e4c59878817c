"""The ROS edge of ros_dofkit: conversions between core types and ROS messages, QoS profiles, parameter schema.

Where you are: ``ros_dofkit.ros``, the edge: its modules import ``ros_dofkit.core`` (never the other way round);
``nodes``, ``replay`` and ``commands`` import them.

Modules here may import rclpy and message packages; ``ros_dofkit.core`` never does. See doc/architecture.md.
"""
