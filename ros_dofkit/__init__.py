"""ros_dofkit: joint-configuration estimation from encoders and IMUs, published the ROS 2 way.

Layers (imports only point downwards): ``core`` (pure NumPy/SciPy) <- ``ros`` (message conversion)
<- ``nodes`` (thin rclpy nodes) <- ``cli``. See doc/architecture.md.
"""

__version__ = "0.1.0"
