"""ros_dofkit: joint-configuration estimation from encoders and IMUs, published the ROS 2 way.

Where you are: the package root; it imports nothing (subpackages are imported by name) and exists to name the
package and its version.

Layers (imports only point downwards): ``core`` (pure NumPy/SciPy) <- ``ros`` (message conversion)
<- ``nodes`` (thin rclpy nodes) <- ``cli``. See doc/architecture.md.
"""

__version__ = "0.1.0"
