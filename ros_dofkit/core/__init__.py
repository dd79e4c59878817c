"""ROS-free core of ros_dofkit: kinematics, DofMask, assembly (IK), state conventions.

Where you are: the bottom layer. Its modules import NumPy, SciPy, numba and each other (``errors`` and ``spatial``
lowest), never ``ros_dofkit.ros``, ``nodes``, ``replay`` or ``commands``.

Nothing under this package may import rclpy or any ROS message package; test/test_layering.py enforces it.
"""
