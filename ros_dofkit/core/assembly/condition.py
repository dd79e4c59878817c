"""Assembly conditions: the base class, and the shared bookkeeping of sensor sets (OrientationSensors, Markers).

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy and ``assembly.errors`` only.

Simbody's ``AssemblyCondition`` is something an ``Assembler`` adopts, either as a *goal* (a scalar ≥ 0 to
minimize, with a finite weight) or as *errors* (equations to drive to zero, weight ∞). Here a condition
evaluates its goal, goal gradient, errors and error Jacobian at any configuration q of the adopting
Assembler's plant (``ros_dofkit.core.multibody.MultibodyPlant``), readably, from ``plant.calc_body_poses`` and
the plant's frame Jacobians; the Assembler's compiled solver evaluates the same quantities from packed arrays
(see :meth:`SensorSet.packed`) and the tests check that both agree.

``SensorSet`` holds what OrientationSensors and Markers share (SPEC section 3.1): sensors with unique names,
a body, a station (a rotation R_BS or a point p_BS), a weight ≥ 0; an observation order mapping each
observation slot to a sensor (or to nothing); the current observations, where NaN anywhere means unobserved.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ros_dofkit.core.assembly.errors import (
    AssemblyIndexError,
    AssemblyStateError,
    AssemblyValueError,
    near_matches,
)

#: Prefix of the default name of a sensor added without a name (Simbody: "_UNNAMED_" + index).
UNNAMED_PREFIX = "_UNNAMED_"


class AssemblyCondition:
    """Base class of everything an :class:`~ros_dofkit.core.assembly.Assembler` can adopt.

    Simbody: ``SimTK::AssemblyCondition``. Subclasses implement :meth:`initialize_condition`, :meth:`calc_goal`,
    :meth:`calc_goal_gradient`, :meth:`num_errors`, :meth:`calc_errors` and :meth:`calc_error_jacobian`.
    """

    def __init__(self, name: str):
        self._name = str(name)
        self._assembler = None

    @property
    def name(self) -> str:
        """Simbody: ``getName()``."""
        return self._name

    def is_in_assembler(self) -> bool:
        """Simbody: ``isInAssembler()``."""
        return self._assembler is not None

    def get_assembler(self):
        """The adopting Assembler; raises when there is none. Simbody: ``getAssembler()``."""
        if self._assembler is None:
            raise AssemblyStateError(f"assembly condition {self._name!r} has not been adopted by an Assembler")
        return self._assembler

    def attach(self, assembler) -> None:
        """Called by ``Assembler.adopt_assembly_condition``: this condition now belongs to ``assembler``."""
        if self._assembler is not None and self._assembler is not assembler:
            raise AssemblyStateError(
                f"assembly condition {self._name!r} is already adopted by another Assembler; "
                "a condition can belong to one Assembler only"
            )
        self._assembler = assembler

    def _uninitialize_assembler(self) -> None:
        """Simbody: ``uninitializeAssembler()``; called whenever a change needs re-initialization."""
        if self._assembler is not None:
            self._assembler.uninitialize()

    def uninitialize(self) -> None:
        """Called by the Assembler when it re-initializes: the condition rebuilds its state on the next use."""

    def _plant(self):
        return self.get_assembler().plant

    # The interface the Assembler uses; each takes a full configuration q of the plant.
    def initialize_condition(self, plant) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def calc_goal(self, q) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def calc_goal_gradient(self, q, wrt: str = "q") -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def num_errors(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def calc_errors(self, q) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def calc_error_jacobian(self, q) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def _check_weight(weight, what: str) -> float:
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise AssemblyValueError(f"illegal {what} weight {weight!r}: expected a finite real number >= 0")
    weight = float(weight)
    if not math.isfinite(weight) or weight < 0.0:
        raise AssemblyValueError(f"illegal {what} weight {weight!r}: expected a finite real number >= 0")
    return weight


class SensorSet(AssemblyCondition):
    """Sensors fixed on bodies, observations in ground, and the map between them (shared by the two sensor kinds).

    Subclasses set ``_kind`` (the noun used in messages, e.g. "orientation sensor"), ``_station_shape`` and
    implement ``_validate_station``.
    """

    _kind = "sensor"
    _station_shape: tuple = ()

    def __init__(self, name: str):
        super().__init__(name)
        self._names: list[str] = []
        self._name_to_index: dict[str, int] = {}
        self._bodies: list = []  # as given: int body index, a Body-like object with .index, or a body name
        self._stations: list[np.ndarray] = []
        self._weights: list[float] = []
        self._obs_to_sensor: list[int] | None = None  # None: never defined (identity at initialization)
        self._sensor_to_obs: list[int] = []
        self._observations = np.zeros((0,) + self._station_shape)
        # Filled by initialize_condition():
        self._body_index = np.zeros(0, dtype=np.int64)
        self._active = np.zeros(0, dtype=np.int64)  # active sensors, grouped by body index, then by sensor index
        self._initialized = False

    # -- construction ----------------------------------------------------------------------------------------
    def _validate_station(self, station) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _add(self, name, body, station, weight) -> int:
        weight = _check_weight(weight, self._kind)
        station = self._validate_station(station)
        if body is None or isinstance(body, bool):
            raise AssemblyValueError(f"{self._kind} body: expected a Body, body index or body name, got {body!r}")
        if isinstance(body, numbers.Integral) and int(body) < 0:
            raise AssemblyIndexError(f"{self._kind} body index must be >= 0, got {int(body)}")
        index = len(self._names)
        name = "" if name is None else str(name).strip()
        if not name:
            name = f"{UNNAMED_PREFIX}{index}"
        if name in self._name_to_index:
            raise AssemblyValueError(
                f"{self._kind} name {name!r} is already in use by {self._kind} {self._name_to_index[name]}"
            )
        self._names.append(name)
        self._name_to_index[name] = index
        self._bodies.append(int(body) if isinstance(body, numbers.Integral) else body)
        self._stations.append(station)
        self._weights.append(weight)
        # Simbody: adding a sensor forgets the observation order and the observations.
        self._obs_to_sensor = None
        self._sensor_to_obs = []
        self._observations = np.zeros((0,) + self._station_shape)
        self._initialized = False
        self._uninitialize_assembler()
        return index

    def _define_observation_order(self, order) -> None:
        if isinstance(order, (str, bytes)):
            raise AssemblyValueError(
                f"observation order: expected a sequence of {self._kind} names or indices, got the string {order!r}"
            )
        order = list(order) if order is not None else []
        n = len(self._names)
        if not order:
            obs_to_sensor = list(range(n))
        else:
            obs_to_sensor = []
            for entry in order:
                if isinstance(entry, str):
                    obs_to_sensor.append(self._name_to_index.get(entry.strip(), -1) if entry.strip() else -1)
                elif entry is None:
                    obs_to_sensor.append(-1)
                elif isinstance(entry, numbers.Integral) and not isinstance(entry, bool):
                    obs_to_sensor.append(int(entry) if 0 <= int(entry) < n else -1)
                else:
                    raise AssemblyValueError(
                        f"observation order entry {entry!r}: expected a {self._kind} name (str) or index (int)"
                    )
        sensor_to_obs = [-1] * n
        for ox, ix in enumerate(obs_to_sensor):
            if ix < 0:
                continue
            if sensor_to_obs[ix] >= 0:
                raise AssemblyValueError(
                    f"{self._kind} {self._names[ix]!r} (index {ix}) is assigned to two observations, "
                    f"{sensor_to_obs[ix]} and {ox}; each {self._kind} may have at most one observation"
                )
            sensor_to_obs[ix] = ox
        self._obs_to_sensor = obs_to_sensor
        self._sensor_to_obs = sensor_to_obs
        self._observations = np.full((len(obs_to_sensor),) + self._station_shape, np.nan)
        self._initialized = False
        self._uninitialize_assembler()

    def _ensure_observation_order(self) -> None:
        """Simbody sets up the identity order at initialization if none was defined; do it now if needed."""
        if self._obs_to_sensor is None:
            self._define_observation_order([])

    # -- queries -----------------------------------------------------------------------------------------------
    def _check_sensor_index(self, ix) -> int:
        if isinstance(ix, bool) or not isinstance(ix, numbers.Integral):
            raise AssemblyValueError(f"{self._kind} index: expected an int, got {ix!r}")
        if not 0 <= int(ix) < len(self._names):
            raise AssemblyIndexError(f"{self._kind} index {ix} out of range [0, {len(self._names)})")
        return int(ix)

    def _check_observation_index(self, ox) -> int:
        if isinstance(ox, bool) or not isinstance(ox, numbers.Integral):
            raise AssemblyValueError(f"observation index: expected an int, got {ox!r}")
        n = self.get_num_observations()
        if not 0 <= int(ox) < n:
            raise AssemblyIndexError(f"observation index {ox} out of range [0, {n})")
        return int(ox)

    def _index_of(self, name) -> int | None:
        return self._name_to_index.get(str(name).strip())

    def _require_index_of(self, name) -> int:
        ix = self._index_of(name)
        if ix is None:
            raise AssemblyValueError(f"unknown {self._kind} {name!r}; {near_matches(str(name), self._names)}")
        return ix

    def get_num_observations(self) -> int:
        """Number of observation slots per frame (0 until an order is defined). Simbody: ``getNumObservations``."""
        return 0 if self._obs_to_sensor is None else len(self._obs_to_sensor)

    def has_observation(self, ix) -> bool:
        """Simbody: ``hasObservation(OSensorIx / MarkerIx)``."""
        ix = self._check_sensor_index(ix)
        return self._obs_to_sensor is not None and self._sensor_to_obs[ix] >= 0

    def _observation_for_sensor(self, ix) -> int | None:
        ix = self._check_sensor_index(ix)
        if self._obs_to_sensor is None or self._sensor_to_obs[ix] < 0:
            return None
        return self._sensor_to_obs[ix]

    def _sensor_for_observation(self, ox) -> int | None:
        ox = self._check_observation_index(ox)
        ix = self._obs_to_sensor[ox]
        return None if ix < 0 else ix

    def _resolve_body(self, body, plant) -> int:
        if isinstance(body, numbers.Integral):
            if body >= plant.num_bodies():
                raise AssemblyIndexError(f"{self._kind} body index {body} out of range [0, {plant.num_bodies()})")
            return int(body)
        if isinstance(body, str):
            return int(plant.get_body_by_name(body).index)
        if hasattr(body, "index"):
            return int(body.index)
        raise AssemblyValueError(f"{self._kind} body: expected a Body, body index or body name, got {body!r}")

    def _sensor_body_index(self, ix) -> int:
        ix = self._check_sensor_index(ix)
        body = self._bodies[ix]
        if isinstance(body, numbers.Integral):
            return int(body)
        if hasattr(body, "index") and not isinstance(body, str):
            return int(body.index)
        if self._assembler is None:
            raise AssemblyStateError(
                f"{self._kind} {self._names[ix]!r} names its body {body!r}; the name is resolved once an "
                "Assembler (and so a plant) has adopted this condition"
            )
        return self._resolve_body(body, self._plant())

    # -- per-frame data ------------------------------------------------------------------------------------------
    def _validate_observation(self, value) -> np.ndarray:
        value = np.asarray(value, dtype=float)
        if value.shape != self._station_shape:
            raise AssemblyValueError(f"observation: expected shape {self._station_shape}, got {value.shape}")
        return value

    def _move_all_observations(self, observations) -> None:
        observations = np.asarray(observations, dtype=float)
        slots = self._observations_array()  # (n_obs,) + station shape once the order is defined
        if observations.shape != slots.shape:
            raise AssemblyValueError(
                f"move_all_observations: expected {slots.shape[0]} observations of shape {self._station_shape} "
                f"(array shape {slots.shape}), got shape {observations.shape}"
            )
        slots[...] = observations

    def _move_one_observation(self, ox, value) -> None:
        if self.get_num_observations() == 0:
            raise AssemblyStateError(
                "move_one_observation: there are no observations yet; define the observation order first"
            )
        ox = self._check_observation_index(ox)
        self._observations[ox] = self._validate_observation(value)

    def _get_observation(self, ox) -> np.ndarray:
        ox = self._check_observation_index(ox)
        return self._observations[ox].copy()

    def _change_weight(self, ix, weight) -> None:
        ix = self._check_sensor_index(ix)
        weight = _check_weight(weight, self._kind)
        old = self._weights[ix]
        self._weights[ix] = weight
        if (old == 0.0) != (weight == 0.0):
            self._initialized = False
            self._uninitialize_assembler()
        elif self._assembler is not None:
            self._assembler.weights_changed()

    # -- initialization (Simbody: initializeCondition) ---------------------------------------------------------
    def initialize_condition(self, plant) -> None:
        """Resolve bodies and build the active set: sensors with an observation, weight > 0, not on the world.

        Active sensors are grouped by body index and, within a body, kept in sensor-index order (SPEC 3.2).
        Sensors on the world body are ignored (SPEC 9.6).
        """
        self._ensure_observation_order()
        self._body_index = np.array([self._resolve_body(b, plant) for b in self._bodies], dtype=np.int64)
        candidates = [
            ix
            for ix in range(len(self._names))
            if self._sensor_to_obs[ix] >= 0 and self._weights[ix] > 0.0 and self._body_index[ix] != 0
        ]
        candidates.sort(key=lambda ix: (int(self._body_index[ix]), ix))
        self._active = np.array(candidates, dtype=np.int64)
        self._initialized = True

    def uninitialize(self) -> None:
        self._initialized = False

    def _require_initialized(self) -> None:
        if not self._initialized:
            self.get_assembler().initialize()

    def _sensors_on_body(self, body) -> list[int]:
        assembler = self.get_assembler()
        assembler.initialize()
        mbx = self._resolve_body(body, assembler.plant)
        return [int(ix) for ix in self._active if self._body_index[ix] == mbx]

    def num_errors(self) -> int:
        """Three error components per active sensor (SPEC 9.5); rows of an unobserved (NaN) sensor are zero.

        Simbody: ``getNumErrors``.
        """
        self._require_initialized()
        return 3 * len(self._active)

    @property
    def station_shape(self) -> tuple:
        """Shape of one station / observation: (3, 3) orientations, (3,) positions."""
        return self._station_shape

    def active_weights(self) -> np.ndarray:
        """The current weights of the active sensors, in active order (the order of :meth:`packed`); a change that
        keeps the active set calls the adopting Assembler's ``weights_changed()``."""
        return np.array([self._weights[ix] for ix in self._active], dtype=float)

    def observation_array(self) -> np.ndarray:
        """The observation slots (n_obs, *station_shape), in observation order: the live buffer, which the
        Assembler reads each frame and :meth:`restore_observations` writes (no copy, no validation)."""
        return self._observations_array()

    def restore_observations(self, values) -> None:
        """Write already-validated observation slots back (the Assembler after ``track_sequence``: the condition
        holds the last frame's observations); use ``move_all_observations`` for new data."""
        self._observations_array()[...] = values

    def active_observations(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sensor index, body index, station, weight, observation) of the active sensors, in active order."""
        self._require_initialized()
        active = self._active
        stations = np.array([self._stations[ix] for ix in active]).reshape((len(active),) + self._station_shape)
        weights = np.array([self._weights[ix] for ix in active], dtype=float)
        obs = self._observations[[self._sensor_to_obs[ix] for ix in active]].reshape(stations.shape)
        return active, self._body_index[active], stations, weights, obs

    def packed(self) -> dict:
        """Flat arrays the compiled solver reads: active sensors' body, station, weight and observation slot."""
        active, bodies, stations, weights, _ = self.active_observations()
        return {
            "body": np.ascontiguousarray(bodies, dtype=np.int64),
            "station": np.ascontiguousarray(stations, dtype=float),
            "weight": np.ascontiguousarray(weights, dtype=float),
            "obs_slot": np.array([self._sensor_to_obs[ix] for ix in active], dtype=np.int64),
        }

    def _observations_array(self) -> np.ndarray:
        self._ensure_observation_order()
        return self._observations

    @staticmethod
    def is_observed(obs) -> np.ndarray:
        """(n,) True where an observation (n, *station_shape) is finite (NaN = unobserved)."""
        axes = tuple(range(1, obs.ndim))
        return np.all(np.isfinite(obs), axis=axes) if obs.shape[0] else np.zeros(0, dtype=bool)

    def _current_q(self) -> np.ndarray:
        return self.get_assembler().get_positions()
