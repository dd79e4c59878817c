"""ROS-free estimator core: configuration, input validation, gyro velocities and the Estimator cycle.

You are in ``ros_dofkit.core.estimator``. The live node and offline replay both drive
:class:`~ros_dofkit.core.estimator.estimator.Estimator` with plain arrays; nothing here imports ROS. This package
exports only the light modules (configuration, input checks, velocities) so that parameter validation in the ROS
layer does not load the compiled estimator; import ``Estimator`` from ``ros_dofkit.core.estimator.estimator``.
"""

from ros_dofkit.core.estimator.config import (
    CALIBRATE,
    EstimatorConfig,
    EstimatorConfigError,
    HeadingEstimation,
    ImuConfig,
    UnknownNameError,
)
from ros_dofkit.core.estimator.inputs import InputStatus, RejectReason
from ros_dofkit.core.estimator.velocity import solve_velocities_from_gyros

__all__ = [
    "CALIBRATE",
    "EstimatorConfig",
    "EstimatorConfigError",
    "HeadingEstimation",
    "ImuConfig",
    "InputStatus",
    "RejectReason",
    "UnknownNameError",
    "solve_velocities_from_gyros",
]

