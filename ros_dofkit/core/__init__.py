"""ROS-free core of ros_dofkit: kinematics, DofMask, assembly (IK), state conventions.

Nothing under this package may import rclpy or any ROS message package; test/test_layering.py enforces it.
"""
