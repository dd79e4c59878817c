"""IMU calibration: the sensor-to-body rotations R_BS from one static pose (OpenSense's ``IMUPlacer``, SPEC 8.1,
adapted to ROS).

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy, ``core.spatial``, ``so3`` and
``orientation_sensors``.

Frames. X is an IMU's own world frame (what ``sensor_msgs/Imu.orientation`` is relative to: ENU for REP-145
devices, or NED); G is the model world W of the plant, z up (REP-103), so the model's vertical axis is **+z**
(OpenSim's is +y; that is the one deliberate difference). S is the IMU frame, B the body it is mounted on.

Steps, for a static calibration pose q_cal (the robot or subject holds it):

1. World alignment: ``R_GX`` fixed (identity for ENU data, :data:`NED_TO_ENU` for NED data, or any rotation).
   Every orientation becomes ``R_GS = R_GX R_XS`` (OpenSense's pre-multiplication by sensor_to_opensim_rotations).
2. Optional heading correction (base IMU + signed axis h in {x, -x, y, -y, z, -z}): the base IMU's axis h in G and
   the base body's forward axis +x_B in G at q_cal are projected onto the horizontal plane; the rotation
   ``R_z(θ)`` about the vertical that turns the first onto the second pre-multiplies every orientation, so that
   ``R_GX <- R_z(θ) R_GX``. (OpenSense uses acos(h·x_b) with the sign from the vertical component of x_b × h;
   projecting first gives the same angle when both are horizontal and stays correct when they are not.)
3. ``R_BS = R_WB(q_cal)ᵀ R_GS(t_cal)`` per IMU.

Extension: each IMU may give several samples of the static window; they are averaged as quaternions (the
eigenvector of Σ q qᵀ with the largest eigenvalue, Markley et al. 2007), which is the rotation minimizing the sum
of squared chordal distances to the samples and is insensitive to the q / -q sign ambiguity.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import so3
from ros_dofkit.core.assembly.errors import AssemblyValueError, near_matches
from ros_dofkit.core.assembly.orientation_sensors import OrientationSensors

#: ``R_ENU_NED``: maps vectors in a north-east-down world to east-north-up (x_E = y_N, y_N = x_N, z_U = -z_D).
NED_TO_ENU = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])

#: Signed heading axes of the base IMU: letter -> (axis index, sign).
HEADING_AXES = {"x": (0, 1.0), "-x": (0, -1.0), "y": (1, 1.0), "-y": (1, -1.0), "z": (2, 1.0), "-z": (2, -1.0)}

#: The model world's vertical axis (REP-103: z up).
VERTICAL_AXIS = np.array([0.0, 0.0, 1.0])

# A heading direction whose horizontal projection is shorter than this is too close to vertical to define a heading.
_MIN_HORIZONTAL = 1e-3


def average_rotations(R) -> np.ndarray:
    """Mean rotation of samples ``R`` (N, 3, 3) (or a single 3x3): the quaternion mean of Markley et al."""
    R = np.asarray(R, dtype=float)
    if R.shape == (3, 3):
        return R.copy()
    if R.ndim != 3 or R.shape[1:] != (3, 3) or R.shape[0] == 0:
        raise AssemblyValueError(f"average_rotations: expected shape (N, 3, 3) with N >= 1, got {R.shape}")
    if not np.all(np.isfinite(R)):
        raise AssemblyValueError("average_rotations: the samples contain NaN or Inf")
    quats = spatial.matrix_to_quat(R)
    M = quats.T @ quats
    _, vectors = np.linalg.eigh(M)
    return spatial.quat_to_matrix(vectors[:, -1])


def world_alignment(alignment) -> np.ndarray:
    """``R_GX`` from None / "enu" (identity), "ned" (:data:`NED_TO_ENU`) or a 3x3 rotation."""
    if alignment is None:
        return np.eye(3)
    if isinstance(alignment, str):
        key = alignment.strip().lower()
        if key == "enu":
            return np.eye(3)
        if key == "ned":
            return NED_TO_ENU.copy()
        raise AssemblyValueError(f"world alignment {alignment!r}: expected 'enu', 'ned' or a 3x3 rotation matrix")
    R = np.asarray(alignment, dtype=float)
    if not so3.is_rotation_matrix(R):
        raise AssemblyValueError(f"world alignment: expected a 3x3 rotation matrix, got {R!r}")
    return R.copy()


def parse_heading_axis(axis: str) -> tuple[int, float]:
    """(axis index, sign) of a signed axis letter such as "x" or "-y" (case-insensitive)."""
    if not isinstance(axis, str):
        raise AssemblyValueError(f"base heading axis: expected one of {sorted(HEADING_AXES)}, got {axis!r}")
    key = axis.strip().lower()
    if key.startswith("+"):
        key = key[1:]
    if key not in HEADING_AXES:
        raise AssemblyValueError(
            f"base heading axis {axis!r} is not valid; expected one of {', '.join(HEADING_AXES)} (case-insensitive)"
        )
    return HEADING_AXES[key]


def heading_correction(R_GS_base, R_GB_base, axis: str) -> float:
    """Angle θ about the vertical (+z) so that ``R_z(θ)`` turns the base IMU's heading axis onto the base body's +x.

    Both directions are projected onto the horizontal plane first; a direction within 1e-3 of vertical raises.
    """
    index, sign = parse_heading_axis(axis)
    h = sign * np.asarray(R_GS_base, dtype=float)[:, index]
    x_b = np.asarray(R_GB_base, dtype=float)[:, 0]
    h_h = h - (h @ VERTICAL_AXIS) * VERTICAL_AXIS
    x_h = x_b - (x_b @ VERTICAL_AXIS) * VERTICAL_AXIS
    if np.linalg.norm(h_h) < _MIN_HORIZONTAL or np.linalg.norm(x_h) < _MIN_HORIZONTAL:
        raise AssemblyValueError(
            f"heading correction: the base IMU's {axis!r} axis ({np.round(h, 4)}) or the base body's +x axis "
            f"({np.round(x_b, 4)}) is (nearly) vertical, so no heading is defined; choose another axis or disable "
            "heading correction"
        )
    return float(np.arctan2(np.cross(h_h, x_h) @ VERTICAL_AXIS, h_h @ x_h))


@dataclass
class ImuCalibration:
    """Result of :func:`calibrate_imus`.

    Attributes:
        R_BS: IMU name -> 3x3 mounting rotation in its body.
        bodies: IMU name -> body index.
        R_GX: rotation applied to every orientation (world alignment, then heading): ``R_GS = R_GX R_XS``.
        heading_angle: θ of the heading correction about +z (0 when none was done).
    """

    R_BS: dict = field(default_factory=dict)
    bodies: dict = field(default_factory=dict)
    R_GX: np.ndarray = field(default_factory=lambda: np.eye(3))
    heading_angle: float = 0.0

    def to_model_world(self, R_XS) -> np.ndarray:
        """``R_GX @ R_XS`` for IMU orientations (..., 3, 3) in the sensor world (NaN stays NaN)."""
        return self.R_GX @ np.asarray(R_XS, dtype=float)

    def make_orientation_sensors(self, names=None, weights=None, condition_name: str = "imus") -> OrientationSensors:
        """An OrientationSensors condition with one osensor per calibrated IMU, observation order = ``names``.

        ``names`` defaults to the calibration's IMU order; ``weights`` is an optional {name: weight}.
        """
        names = list(self.R_BS) if names is None else list(names)
        weights = {} if weights is None else dict(weights)
        osensors = OrientationSensors(condition_name)
        for name in names:
            if name not in self.R_BS:
                raise AssemblyValueError(f"IMU {name!r} was not calibrated; {near_matches(name, self.R_BS)}")
            osensors.add_osensor(name, self.bodies[name], self.R_BS[name], weights.get(name, 1.0))
        osensors.define_observation_order(names)
        return osensors


def _body_index(plant, body) -> int:
    if isinstance(body, str):
        return int(plant.get_body_by_name(body).index)
    if isinstance(body, numbers.Integral) and not isinstance(body, bool):
        if not 0 <= int(body) < plant.num_bodies():
            raise AssemblyValueError(f"body index {body} out of range [0, {plant.num_bodies()})")
        return int(body)
    if hasattr(body, "index"):
        return int(body.index)
    raise AssemblyValueError(f"body: expected a Body, body index or body name, got {body!r}")


def default_base_body(plant) -> int:
    """The first body attached to the world by a moving joint (OpenSense: child of the first joint on ground); for
    a robot welded to the world, the first body welded to it."""
    parent = plant.tree.parent
    joint_type = plant.tree.joint_type
    children = [b for b in range(1, plant.num_bodies()) if parent[b] == 0]
    if not children:
        raise AssemblyValueError("heading correction: no body is attached to the world, so there is no base body")
    moving = [b for b in children if joint_type[b] != 0]
    return (moving or children)[0]


def calibrate_imus(plant, q_cal, imu_bodies: dict, R_XS: dict, alignment=None, base_imu: str | None = None,
                   base_heading_axis: str | None = None, base_body=None) -> ImuCalibration:
    """Compute every IMU's ``R_BS = R_WB(q_cal)ᵀ R_GX R_XS`` from a static pose (OpenSense ``IMUPlacer.run``).

    Args:
        plant: finalized MultibodyPlant (model world G = W, z up).
        q_cal: (nq,) the calibration pose.
        imu_bodies: {imu name: body (Body, index or name)}.
        R_XS: {imu name: 3x3 orientation in the sensor world, or (N, 3, 3) samples of the static window, averaged}.
        alignment: sensor world -> model world, None/"enu" (identity), "ned", or a 3x3 rotation ``R_GX``.
        base_imu, base_heading_axis: enable heading correction (both or neither): the base IMU's signed axis is
            turned, about +z, onto the base body's +x.
        base_body: the body whose +x is "forward" (default: :func:`default_base_body`).
    """
    q_cal = np.asarray(q_cal, dtype=float)
    if q_cal.shape != (plant.num_positions(),):
        raise AssemblyValueError(f"calibrate_imus: q_cal must have shape ({plant.num_positions()},), got {q_cal.shape}")
    missing = [name for name in imu_bodies if name not in R_XS]
    if missing:
        raise AssemblyValueError(
            f"calibrate_imus: no orientation for IMU(s) {missing}; got orientations for {list(R_XS)}"
        )
    if (base_imu is None) != (base_heading_axis is None):
        raise AssemblyValueError(
            "calibrate_imus: heading correction needs both base_imu and base_heading_axis (or neither), got "
            f"base_imu={base_imu!r}, base_heading_axis={base_heading_axis!r}"
        )
    R_GX = world_alignment(alignment)
    samples = {}
    for name in imu_bodies:
        R = np.asarray(R_XS[name], dtype=float)
        if R.shape != (3, 3) and (R.ndim != 3 or R.shape[1:] != (3, 3)):
            raise AssemblyValueError(f"IMU {name!r}: expected a 3x3 rotation or (N, 3, 3) samples, got shape {R.shape}")
        mean = average_rotations(R)
        if not so3.is_rotation_matrix(mean, 1e-6):
            raise AssemblyValueError(f"IMU {name!r}: the orientation is not a rotation matrix")
        samples[name] = mean
    X_WB = plant.calc_body_poses(q_cal)
    heading = 0.0
    if base_imu is not None:
        if base_imu not in imu_bodies:
            raise AssemblyValueError(
                f"base IMU {base_imu!r} is not among the IMUs; {near_matches(base_imu, imu_bodies)}"
            )
        base = default_base_body(plant) if base_body is None else _body_index(plant, base_body)
        heading = heading_correction(R_GX @ samples[base_imu], X_WB[base, :3, :3], base_heading_axis)
        R_GX = spatial.rotation_z(heading) @ R_GX
    result = ImuCalibration(R_GX=R_GX, heading_angle=heading)
    for name, body in imu_bodies.items():
        b = _body_index(plant, body)
        R_BS = X_WB[b, :3, :3].T @ R_GX @ samples[name]
        # Re-orthonormalize: products of many matrices drift by a few ulps.
        result.R_BS[name] = spatial.quat_to_matrix(spatial.matrix_to_quat(R_BS))
        result.bodies[name] = b
    return result
