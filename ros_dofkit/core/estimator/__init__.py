"""ROS-free estimator core: configuration, input validation, gyro velocities and the Estimator cycle.

You are in ``ros_dofkit.core.estimator``. The live node and offline replay both drive
:class:`~ros_dofkit.core.estimator.estimator.Estimator` with plain arrays; nothing here imports ROS.
"""

from ros_dofkit.core.estimator.config import (
    CALIBRATE,
    EstimatorConfig,
    EstimatorConfigError,
    ImuConfig,
    UnknownNameError,
)
from ros_dofkit.core.estimator.inputs import InputStatus, RejectReason
from ros_dofkit.core.estimator.velocity import solve_velocities_from_gyros

__all__ = [
    "CALIBRATE",
    "Estimator",
    "EstimatorConfig",
    "EstimatorConfigError",
    "EstimatorResult",
    "ImuConfig",
    "InputStatus",
    "RejectReason",
    "UnknownNameError",
    "solve_velocities_from_gyros",
]


def __getattr__(name):
    # The Estimator pulls in the plant, DofMask and assembler; importing it lazily keeps the configuration and
    # validation modules usable on their own (e.g. by parameter validation in the ROS layer).
    if name in ("Estimator", "EstimatorResult", "EstimatorStateError"):
        from ros_dofkit.core.estimator import estimator

        return getattr(estimator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
