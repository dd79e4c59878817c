"""OrientationSensors: IMU orientations as an assembly condition (Simbody's ``SimTK::OrientationSensors``).

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy and ``assembly.condition``, ``errors``
and ``so3``.

An *osensor* is a frame S fixed on body B by the rotation ``R_BS`` (Simbody: ``orientationInB``), with a weight
w ≥ 0. An *observation* is a measured ground-frame orientation ``R_GO`` (3x3; NaN anywhere = unobserved). At a
configuration q, with ``R_GS = R_GB(q) R_BS`` and the rotation-error vector ``φ = a n̂_G = log(R_GO R_GSᵀ)``
(see :mod:`ros_dofkit.core.assembly.so3`), over the active osensors whose observation is finite (SPEC 3.3):

    goal      = Σ w a² / (2 Σ w)                       (0 when nothing contributes, SPEC 9.4)
    ∂goal/∂v  = Σ J_ω(B)ᵀ (−w φ) / Σ w                 (Simbody's torques τ_G = R_GS(−w a n̂_S), SPEC 3.4)
    ∂goal/∂q  = N⁺(q)ᵀ ∂goal/∂v
    errors    = [√w φ] per active osensor (zeros while its observation is NaN)          (SPEC 9.5)
    ∂errors/∂v = [−√w J_r⁻¹(φ) J_ω(B)]

J_ω(B) is the angular-velocity Jacobian of body B in G with respect to the generalized velocities v; ground G is
the plant's world frame W. Osensors on the world body are ignored (SPEC 9.6).
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.assembly import so3
from ros_dofkit.core.assembly.condition import SensorSet
from ros_dofkit.core.assembly.errors import AssemblyValueError
from ros_dofkit.core.assembly.observations import observation_input

#: Tolerance on |RᵀR − I| and |det R − 1| for a mounting rotation R_BS.
ROTATION_TOLERANCE = 1e-6


class OrientationSensors(SensorSet):
    """Orientation sensors on bodies matched to observed ground orientations. Simbody: ``OrientationSensors``."""

    _kind = "orientation sensor"
    _station_shape = (3, 3)

    def __init__(self, name: str = "OrientationSensors"):
        super().__init__(name)

    def _validate_station(self, station) -> np.ndarray:
        R_BS = np.asarray(station, dtype=float)
        if R_BS.shape != (3, 3):
            raise AssemblyValueError(f"orientation sensor R_BS: expected a 3x3 rotation matrix, got shape {R_BS.shape}")
        if not so3.is_rotation_matrix(R_BS, ROTATION_TOLERANCE):
            det = np.linalg.det(R_BS) if np.all(np.isfinite(R_BS)) else float("nan")
            raise AssemblyValueError(
                f"orientation sensor R_BS is not a rotation: expected orthonormal with det +1 within "
                f"{ROTATION_TOLERANCE:g}, got |RᵀR − I|max = {np.max(np.abs(R_BS.T @ R_BS - np.eye(3))):.3g}, "
                f"det = {det:.6g}"
            )
        return R_BS.copy()

    # -- construction (Simbody names in the docstrings) -------------------------------------------------------
    def add_osensor(self, name, body, R_BS, weight: float = 1.0) -> int:
        """Add an osensor on ``body`` (Body, body index or body name); returns its index. Simbody: ``addOSensor``.

        ``name`` is trimmed; None or blank gives ``"_UNNAMED_<index>"``. A duplicate name, a weight that is not
        finite or negative, or an ``R_BS`` that is not a rotation raises ``ValueError``. Side effects (as
        Simbody): the observation order and all observations are forgotten and the adopting Assembler is
        uninitialized, so define the observation order after the last osensor.
        """
        return self._add(name, body, R_BS, weight)

    def define_observation_order(self, order=()) -> None:
        """Say which osensor each observation slot belongs to. Simbody: ``defineObservationOrder``.

        ``order`` holds osensor names or indices; empty means the identity (one slot per osensor). An unknown or
        empty name, None, or an index out of range marks a slot whose data is supplied but ignored. Naming one
        osensor in two slots raises. All observations are reset to NaN and the Assembler is uninitialized.
        """
        self._define_observation_order(order)

    # -- setup queries ------------------------------------------------------------------------------------------
    def get_num_osensors(self) -> int:
        """Simbody: ``getNumOSensors``."""
        return len(self._names)

    def get_osensor_name(self, ix: int) -> str:
        """Simbody: ``getOSensorName``."""
        return self._names[self._check_sensor_index(ix)]

    def get_osensor_ix(self, name: str) -> int | None:
        """Index of the osensor called ``name`` (trimmed), or None (Simbody's invalid index). ``getOSensorIx``."""
        return self._index_of(name)

    def get_osensor_weight(self, ix: int) -> float:
        """Simbody: ``getOSensorWeight``."""
        return self._weights[self._check_sensor_index(ix)]

    def get_osensor_body(self, ix: int) -> int:
        """Body index of the osensor (a body given by name needs an adopting Assembler). ``getOSensorBody``."""
        return self._sensor_body_index(ix)

    def get_osensor_station(self, ix: int) -> np.ndarray:
        """``R_BS`` of the osensor (a copy). Simbody: ``getOSensorStation``."""
        return self._stations[self._check_sensor_index(ix)].copy()

    def get_observation_ix_for_osensor(self, ix: int) -> int | None:
        """Observation slot of the osensor, or None if it has none. Simbody: ``getObservationIxForOSensor``."""
        return self._observation_for_sensor(ix)

    def get_osensor_ix_for_observation(self, ox: int) -> int | None:
        """Osensor of an observation slot, or None if the slot is ignored. ``getOSensorIxForObservation``."""
        return self._sensor_for_observation(ox)

    def has_osensor(self, ox: int) -> bool:
        """Simbody: ``hasOSensor(ObservationIx)``."""
        return self._sensor_for_observation(ox) is not None

    def get_osensors_on_body(self, body) -> list[int]:
        """Active osensors on ``body`` in index order; needs an adopting Assembler, which gets initialized.

        Simbody: ``getOSensorsOnBody``.
        """
        return self._sensors_on_body(body)

    # -- per frame ---------------------------------------------------------------------------------------------
    def move_all_observations(self, R_GO, sensors=None) -> None:
        """Set every observation. Simbody: ``moveAllObservations``.

        ``R_GO`` holds one column per observation slot: ``(get_num_observations(), 3, 3)`` rotations, or
        ``(get_num_observations(), 4)`` unit quaternions (w, x, y, z) as IMUs give them (normalized within
        ``spatial.QUAT_NORM_TOLERANCE``; four NaNs = unobserved; zero, non-finite or far from unit raises
        AssemblyValueError naming the sensor). Column k is slot k: the order given to
        :meth:`define_observation_order`, or, if none was defined (the identity order is then set up), the order in
        which the osensors were added. ``sensors`` (names or indices, one per column) names the columns instead:
        each goes to its osensor's slot, and osensors not named are unobserved. See ``observations.py``.
        """
        self._move_all_observations(observation_input(self, R_GO, sensors, what="move_all_observations"))

    def move_one_observation(self, ox: int, R_GO) -> None:
        """Set observation slot ``ox`` (3x3, NaN = unobserved). Simbody: ``moveOneObservation``."""
        self._move_one_observation(ox, R_GO)

    def get_observation(self, ox: int) -> np.ndarray:
        """Simbody: ``getObservation``."""
        return self._get_observation(ox)

    def get_all_observations(self) -> np.ndarray:
        """``(get_num_observations(), 3, 3)`` copy. Simbody: ``getAllObservations``."""
        return self._observations_array().copy()

    def change_osensor_weight(self, ix: int, weight: float) -> None:
        """Simbody: ``changeOSensorWeight``; a change to or from 0 uninitializes the Assembler."""
        self._change_weight(ix, weight)

    def find_current_osensor_orientation(self, ix: int) -> np.ndarray:
        """``R_GS = R_GB R_BS`` at the Assembler's current q. Simbody: ``findCurrentOSensorOrientation``."""
        ix = self._check_sensor_index(ix)
        plant = self._plant()
        X_WB = plant.calc_body_poses(self._current_q())[self._sensor_body_index(ix)]
        return X_WB[:3, :3] @ self._stations[ix]

    def find_current_osensor_error(self, ix: int) -> float:
        """Unweighted angle |a| in [0, π] (radians) between the osensor and its observation at the current q.

        0 if the osensor has no observation or it has a NaN. Simbody: ``findCurrentOSensorError``.
        """
        ox = self._observation_for_sensor(ix)
        if ox is None:
            return 0.0
        R_GO = self._observations[ox]
        if not np.all(np.isfinite(R_GO)):
            return 0.0
        R_GS = self.find_current_osensor_orientation(ix)
        return float(abs(so3.simbody_rotation_angle(R_GS.T @ R_GO)))

    def find_current_osensor_errors(self) -> np.ndarray:
        """:meth:`find_current_osensor_error` of every osensor (n_osensors,) from one forward-kinematics pass."""
        n = len(self._names)
        errors = np.zeros(n)
        if n == 0:
            return errors
        plant = self._plant()
        X_WB = plant.calc_body_poses(self._current_q())
        for ix in range(n):
            ox = self._observation_for_sensor(ix)
            if ox is None or not np.all(np.isfinite(self._observations[ox])):
                continue
            R_GS = X_WB[self._sensor_body_index(ix), :3, :3] @ self._stations[ix]
            errors[ix] = abs(so3.simbody_rotation_angle(R_GS.T @ self._observations[ox]))
        return errors

    # -- reference evaluation (readable; the Assembler's compiled path must agree) ---------------------------
    def _evaluate(self, q, need_jacobians: bool):
        """Rotation-error vectors φ (active order), observed flags, weights and (optionally) J_ω per sensor."""
        plant = self._plant()
        _, bodies, R_BS, weights, R_GO = self.active_observations()
        X_WB = plant.calc_body_poses(np.asarray(q, dtype=float))
        observed = self.is_observed(R_GO)
        phi = np.zeros((len(bodies), 3))
        if len(bodies):
            R_GS = X_WB[bodies, :3, :3] @ R_BS
            phi[observed] = so3.rotation_error_vector(R_GS[observed], R_GO[observed])
        jacobians = None
        if need_jacobians:
            jacobians = {int(b): plant.calc_angular_jacobian(q, _body(plant, b)) for b in set(bodies.tolist())}
        return bodies, weights, observed, phi, jacobians

    def calc_goal(self, q) -> float:
        """Simbody's goal Σ w a² / (2 Σ w) at q (0 when no osensor contributes). Simbody: ``calcGoal``."""
        _, weights, observed, phi, _ = self._evaluate(q, need_jacobians=False)
        total = weights[observed].sum()
        if total == 0.0:
            return 0.0
        return float(np.sum(weights[observed] * np.sum(phi[observed] ** 2, axis=1)) / (2.0 * total))

    def calc_goal_gradient(self, q, wrt: str = "q") -> np.ndarray:
        """Analytic gradient of :meth:`calc_goal`: ``wrt="v"`` gives (nv,), ``wrt="q"`` (nq,) = N⁺ᵀ ∂goal/∂v.

        Simbody: ``calcGoalGradient`` (which keeps only the free q's; the Assembler does that selection here).
        """
        if wrt not in ("q", "v"):
            raise AssemblyValueError(f"wrt: expected 'q' or 'v', got {wrt!r}")
        plant = self._plant()
        bodies, weights, observed, phi, jacobians = self._evaluate(q, need_jacobians=True)
        grad_v = np.zeros(plant.num_velocities())
        total = weights[observed].sum()
        if total > 0.0:
            # Per-body torques (Simbody's dEdR), then J_ωᵀ.
            torque = {}
            for k in np.flatnonzero(observed):
                torque[int(bodies[k])] = torque.get(int(bodies[k]), 0.0) - weights[k] * phi[k]
            for b, tau in torque.items():
                grad_v += jacobians[b].T @ tau
            grad_v /= total
        if wrt == "v":
            return grad_v
        return plant.calc_n_plus_matrix(np.asarray(q, dtype=float)).T @ grad_v

    def calc_errors(self, q) -> np.ndarray:
        """Stacked ``√w φ`` (3 per active osensor, active order; zeros while unobserved), SPEC 9.5.

        Simbody: ``calcErrors`` (not implemented upstream; ros_dofkit decision 9.5).
        """
        _, weights, observed, phi, _ = self._evaluate(q, need_jacobians=False)
        return (np.sqrt(weights)[:, None] * phi * observed[:, None]).reshape(-1)

    def calc_error_jacobian(self, q) -> np.ndarray:
        """``∂errors/∂v``: rows ``−√w J_r⁻¹(φ) J_ω(B)`` per active observed osensor, zero rows otherwise.

        Simbody: ``calcErrorJacobian`` (w.r.t. v here; Simbody uses the free q's).
        """
        plant = self._plant()
        bodies, weights, observed, phi, jacobians = self._evaluate(q, need_jacobians=True)
        J = np.zeros((3 * len(bodies), plant.num_velocities()))
        for k in np.flatnonzero(observed):
            J[3 * k : 3 * k + 3] = -np.sqrt(weights[k]) * so3.inverse_right_jacobian(phi[k]) @ jacobians[int(bodies[k])]
        return J


def _body(plant, index: int):
    """The plant's Body object with this index (what the plant's Jacobian functions accept as a frame)."""
    return plant.get_body(int(index)) if hasattr(plant, "get_body") else int(index)
