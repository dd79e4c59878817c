"""Markers: position sensors as an assembly condition (Simbody's ``SimTK::Markers``).

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy and ``assembly.condition``, ``errors``
and ``orientation_sensors``.

A *marker* is a station S fixed on body B at ``p_BS`` (Simbody: ``markerInB``), with a weight w ≥ 0. An
*observation* is a measured ground-frame position ``p_GO`` (3,; NaN anywhere = unobserved). At a configuration q,
with ``p_GS = p_GB(q) + R_GB(q) p_BS`` and ``d = p_GS − p_GO``, over the active markers with finite observations:

    goal       = Σ w |d|² / (2 Σ w)                    (0 when nothing contributes, as SPEC 9.4)
    ∂goal/∂v   = Σ J_v(S)ᵀ (w d) / Σ w                 (Simbody applies the force w d at the station)
    ∂goal/∂q   = N⁺(q)ᵀ ∂goal/∂v
    errors     = [√w d] per active marker (zeros while its observation is NaN)
    ∂errors/∂v = [√w J_v(S)]

J_v(S) is the translational Jacobian of the point S fixed on B, in G, w.r.t. v. Markers on the world body are
ignored. Markers and OrientationSensors may act on the same body and be adopted by the same Assembler.
"""

from __future__ import annotations

import numpy as np

from ros_dofkit.core.assembly.condition import SensorSet
from ros_dofkit.core.assembly.errors import AssemblyValueError
from ros_dofkit.core.assembly.observations import observation_input
from ros_dofkit.core.assembly.orientation_sensors import _body


class Markers(SensorSet):
    """Point stations on bodies matched to observed ground positions. Simbody: ``Markers``."""

    _kind = "marker"
    _station_shape = (3,)

    def __init__(self, name: str = "Markers"):
        super().__init__(name)

    def _validate_station(self, station) -> np.ndarray:
        p_BS = np.asarray(station, dtype=float)
        if p_BS.shape != (3,) or not np.all(np.isfinite(p_BS)):
            raise AssemblyValueError(f"marker station p_BS: expected 3 finite numbers, got {station!r}")
        return p_BS.copy()

    def add_marker(self, name, body, p_BS=(0.0, 0.0, 0.0), weight: float = 1.0) -> int:
        """Add a marker at ``p_BS`` on ``body``; same rules as ``OrientationSensors.add_osensor``. ``addMarker``."""
        return self._add(name, body, p_BS, weight)

    def define_observation_order(self, order=()) -> None:
        """Simbody: ``defineObservationOrder``; same rules as for OrientationSensors."""
        self._define_observation_order(order)

    def get_num_markers(self) -> int:
        """Simbody: ``getNumMarkers``."""
        return len(self._names)

    def get_marker_name(self, ix: int) -> str:
        """Simbody: ``getMarkerName``."""
        return self._names[self._check_sensor_index(ix)]

    def get_marker_ix(self, name: str) -> int | None:
        """Index of the marker called ``name``, or None. Simbody: ``getMarkerIx``."""
        return self._index_of(name)

    def get_marker_weight(self, ix: int) -> float:
        """Simbody: ``getMarkerWeight``."""
        return self._weights[self._check_sensor_index(ix)]

    def get_marker_body(self, ix: int) -> int:
        """Simbody: ``getMarkerBody``."""
        return self._sensor_body_index(ix)

    def get_marker_station(self, ix: int) -> np.ndarray:
        """``p_BS`` (a copy). Simbody: ``getMarkerStation``."""
        return self._stations[self._check_sensor_index(ix)].copy()

    def get_observation_ix_for_marker(self, ix: int) -> int | None:
        """Simbody: ``getObservationIxForMarker``."""
        return self._observation_for_sensor(ix)

    def get_marker_ix_for_observation(self, ox: int) -> int | None:
        """Simbody: ``getMarkerIxForObservation``."""
        return self._sensor_for_observation(ox)

    def has_marker(self, ox: int) -> bool:
        """Simbody: ``hasMarker(ObservationIx)``."""
        return self._sensor_for_observation(ox) is not None

    def get_markers_on_body(self, body) -> list[int]:
        """Simbody: ``getMarkersOnBody`` (needs an adopting Assembler)."""
        return self._sensors_on_body(body)

    def move_all_observations(self, p_GO, sensors=None) -> None:
        """Set every observation, shape ``(get_num_observations(), 3)``. Simbody: ``moveAllObservations``.

        Column k is observation slot k (the order of ``define_observation_order``, else the order markers were
        added); ``sensors`` (marker names or indices, one per column) names the columns instead, markers not named
        being unobserved.
        """
        self._move_all_observations(observation_input(self, p_GO, sensors, what="move_all_observations"))

    def move_one_observation(self, ox: int, p_GO) -> None:
        """Simbody: ``moveOneObservation``."""
        self._move_one_observation(ox, p_GO)

    def get_observation(self, ox: int) -> np.ndarray:
        """Simbody: ``getObservation``."""
        return self._get_observation(ox)

    def get_all_observations(self) -> np.ndarray:
        """Simbody: ``getAllObservations``."""
        return self._observations_array().copy()

    def change_marker_weight(self, ix: int, weight: float) -> None:
        """Simbody: ``changeMarkerWeight``."""
        self._change_weight(ix, weight)

    def find_current_marker_location(self, ix: int) -> np.ndarray:
        """``p_GS`` at the Assembler's current q. Simbody: ``findCurrentMarkerLocation``."""
        ix = self._check_sensor_index(ix)
        X_WB = self._plant().calc_body_poses(self._current_q())[self._sensor_body_index(ix)]
        return X_WB[:3, :3] @ self._stations[ix] + X_WB[:3, 3]

    def find_current_marker_error_squared(self, ix: int) -> float:
        """|p_GS − p_GO|² (0 if unobserved). Simbody: ``findCurrentMarkerErrorSquared``."""
        ox = self._observation_for_sensor(ix)
        if ox is None or not np.all(np.isfinite(self._observations[ox])):
            return 0.0
        d = self.find_current_marker_location(ix) - self._observations[ox]
        return float(d @ d)

    def find_current_marker_error(self, ix: int) -> float:
        """|p_GS − p_GO| (0 if unobserved). Simbody: ``findCurrentMarkerError``."""
        return float(np.sqrt(self.find_current_marker_error_squared(ix)))

    def find_current_marker_errors(self) -> np.ndarray:
        """:meth:`find_current_marker_error` of every marker (n_markers,) from one forward-kinematics pass."""
        n = len(self._names)
        errors = np.zeros(n)
        if n == 0:
            return errors
        X_WB = self._plant().calc_body_poses(self._current_q())
        for ix in range(n):
            ox = self._observation_for_sensor(ix)
            if ox is None or not np.all(np.isfinite(self._observations[ox])):
                continue
            X = X_WB[self._sensor_body_index(ix)]
            errors[ix] = np.linalg.norm(X[:3, :3] @ self._stations[ix] + X[:3, 3] - self._observations[ox])
        return errors

    # -- reference evaluation ------------------------------------------------------------------------------------
    def _evaluate(self, q, need_jacobians: bool):
        plant = self._plant()
        _, bodies, p_BS, weights, p_GO = self.active_observations()
        q = np.asarray(q, dtype=float)
        X_WB = plant.calc_body_poses(q)
        observed = self.is_observed(p_GO)
        d = np.zeros((len(bodies), 3))
        if len(bodies):
            p_GS = (X_WB[bodies, :3, :3] @ p_BS[..., None])[..., 0] + X_WB[bodies, :3, 3]
            d[observed] = p_GS[observed] - p_GO[observed]
        jacobians = None
        if need_jacobians:
            jacobians = [plant.calc_jacobian(q, _body(plant, b), p_BS[k])[3:] for k, b in enumerate(bodies)]
        return weights, observed, d, jacobians

    def calc_goal(self, q) -> float:
        """Σ w |p_GS − p_GO|² / (2 Σ w) at q (0 when nothing contributes). Simbody: ``calcGoal``."""
        weights, observed, d, _ = self._evaluate(q, need_jacobians=False)
        total = weights[observed].sum()
        if total == 0.0:
            return 0.0
        return float(np.sum(weights[observed] * np.sum(d[observed] ** 2, axis=1)) / (2.0 * total))

    def calc_goal_gradient(self, q, wrt: str = "q") -> np.ndarray:
        """Analytic gradient of :meth:`calc_goal` w.r.t. v (nv,) or q (nq,). Simbody: ``calcGoalGradient``."""
        if wrt not in ("q", "v"):
            raise AssemblyValueError(f"wrt: expected 'q' or 'v', got {wrt!r}")
        plant = self._plant()
        weights, observed, d, jacobians = self._evaluate(q, need_jacobians=True)
        grad_v = np.zeros(plant.num_velocities())
        total = weights[observed].sum()
        if total > 0.0:
            for k in np.flatnonzero(observed):
                grad_v += jacobians[k].T @ (weights[k] * d[k])
            grad_v /= total
        if wrt == "v":
            return grad_v
        return plant.calc_n_plus_matrix(np.asarray(q, dtype=float)).T @ grad_v

    def calc_errors(self, q) -> np.ndarray:
        """Stacked ``√w (p_GS − p_GO)`` (3 per active marker; zeros while unobserved). Simbody: ``calcErrors``."""
        weights, observed, d, _ = self._evaluate(q, need_jacobians=False)
        return (np.sqrt(weights)[:, None] * d * observed[:, None]).reshape(-1)

    def calc_error_jacobian(self, q) -> np.ndarray:
        """``∂errors/∂v``: rows ``√w J_v(S)`` per active observed marker, zero rows otherwise.

        Simbody: ``calcErrorJacobian`` (w.r.t. v here; Simbody uses the free q's).
        """
        plant = self._plant()
        weights, observed, _, jacobians = self._evaluate(q, need_jacobians=True)
        J = np.zeros((3 * len(weights), plant.num_velocities()))
        for k in np.flatnonzero(observed):
            J[3 * k : 3 * k + 3] = np.sqrt(weights[k]) * jacobians[k]
        return J
