"""ros_dofkit.core.assembly: orientation-sensor (IMU) and marker inverse kinematics, as Simbody's Assembler does it.

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core, above ``core.multibody`` and ``core.spatial``); this
file only re-exports its modules' public names.

* :class:`OrientationSensors` and :class:`Markers` — assembly conditions (SPEC section 3, decisions 9.4-9.6).
* :class:`Assembler` — adopts conditions as goals or hard errors, locks and bounds coordinates, and solves with a
  compiled Gauss-Newton / Levenberg-Marquardt iteration (``assemble``, ``track``, ``track_sequence``).
* :mod:`~ros_dofkit.core.assembly.calibration` — OpenSense's IMU placement (R_BS from a static pose, SPEC 8.1).
"""

from ros_dofkit.core.assembly.assembler import Assembler
from ros_dofkit.core.assembly.calibration import (
    HEADING_AXES,
    NED_TO_ENU,
    ImuCalibration,
    average_rotations,
    calibrate_imus,
)
from ros_dofkit.core.assembly.condition import AssemblyCondition
from ros_dofkit.core.assembly.errors import (
    AssembleFailed,
    AssemblyIndexError,
    AssemblyStateError,
    AssemblyValueError,
    TrackFailed,
)
from ros_dofkit.core.assembly.markers import Markers
from ros_dofkit.core.assembly.orientation_sensors import OrientationSensors

__all__ = [
    "AssembleFailed",
    "Assembler",
    "AssemblyCondition",
    "AssemblyIndexError",
    "AssemblyStateError",
    "AssemblyValueError",
    "HEADING_AXES",
    "ImuCalibration",
    "Markers",
    "NED_TO_ENU",
    "OrientationSensors",
    "TrackFailed",
    "average_rotations",
    "calibrate_imus",
]
