"""Observation input of the public entry points: named data columns and IMU quaternions, turned into the layout the
solver reads.

You are in the ROS-free assembly layer (``ros_dofkit.core.assembly``). This module may import NumPy,
``core.spatial`` and the assembly errors; ``OrientationSensors.move_all_observations``,
``Markers.move_all_observations`` and ``Assembler.track_sequence`` call :func:`observation_input` on what the caller
handed them, and everything behind those entry points (conditions, solver, compiled kernels) keeps seeing one
array per condition, ``(..., n_obs, 3, 3)`` rotations ``R_GO`` or ``(..., n_obs, 3)`` points ``p_GO``, column k
being observation slot k, NaN = unobserved.

It exists for two traps of that layout. The columns follow the observation order (``define_observation_order``, or
the order the sensors were added when none was defined), which nothing at the call shows: the caller may name its
columns (``sensors=[names]``) and they are put in their slots. And IMUs give quaternions, not matrices: an
OrientationSensors observation may be a ``(w, x, y, z)`` quaternion, checked by the rule of the node's IMU input
(SPEC 9.7, ``spatial.quat_validity``).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

import numpy as np

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly.condition import SensorSet
from ros_dofkit.core.assembly.errors import AssemblyValueError, near_matches


def observation_input(condition, data, sensors=None, *, leading_axes: int = 0, what: str = "observations"):
    """``data`` for ``condition`` (an OrientationSensors or Markers) as ``(..., n_obs) + station shape`` floats.

    ``data`` has ``leading_axes`` axes (frames) before the column axis. Its columns are the observation slots in
    order, or, with ``sensors`` (a sequence of sensor names or indices, one per column), the named sensors: each
    column goes to its sensor's slot and slots nobody named are unobserved (NaN). For an OrientationSensors, a
    column is a 3x3 rotation ``R_GO`` or a unit quaternion ``(w, x, y, z)`` (``data`` ending in 4): a quaternion
    within ``spatial.QUAT_NORM_TOLERANCE`` of unit length is normalized, four NaNs mean unobserved, anything else
    (zero, partly NaN, infinite, farther from unit) raises :class:`AssemblyValueError` naming the sensor, the
    column and the frame. The shape itself is checked by the caller.
    """
    condition._ensure_observation_order()
    data = np.asarray(data, dtype=float)
    columns = None if sensors is None else _sensor_columns(condition, sensors, data, leading_axes, what)
    if data.ndim == leading_axes + 2 and data.shape[-1] == 4 and condition._station_shape == (3, 3):
        data = _rotations_from_quaternions(condition, data, columns, leading_axes, what)
    if columns is None:
        return data
    slots = np.array([condition._sensor_to_obs[ix] for ix in columns], dtype=np.int64)
    full = np.full(data.shape[:leading_axes] + (condition.get_num_observations(),) + data.shape[leading_axes + 1:],
                   np.nan)
    full[(slice(None),) * leading_axes + (slots,)] = data
    return full


def sequence_inputs(observations: dict, sensors=None) -> dict:
    """``Assembler.track_sequence``'s ``{condition: (T, ...) frames}`` with each sensor set's frames passed through
    :func:`observation_input` (one leading frame axis). ``sensors``: None, the column names of the only condition,
    or ``{condition: names}``. Other conditions' data are left for the Assembler to check."""
    if sensors is None:
        sensors = {}
    elif not isinstance(sensors, dict):
        if len(observations) != 1:
            raise AssemblyValueError(
                "track_sequence: observations are given for several conditions; pass sensors as a dict "
                "{condition: [names, ...]}"
            )
        sensors = {next(iter(observations)): sensors}
    for condition in sensors:
        if condition not in observations:
            raise AssemblyValueError(
                f"track_sequence: sensors given for {getattr(condition, 'name', condition)!r}, which has no "
                "observations"
            )
    return {
        condition: observation_input(condition, data, sensors.get(condition), leading_axes=1,
                                     what=f"track_sequence ({condition.name!r})")
        if isinstance(condition, SensorSet) else data
        for condition, data in observations.items()
    }


def _sensor_columns(condition, sensors, data, leading_axes: int, what: str) -> list[int]:
    """Sensor index of each data column, from names or indices; each a sensor with an observation slot, once."""
    kind = condition._kind
    if isinstance(sensors, (str, bytes, Mapping, AbstractSet)) or not isinstance(sensors, Iterable):
        raise AssemblyValueError(f"{what}: sensors must be a sequence of {kind} names or indices, got {sensors!r}")
    columns = []
    for entry in sensors:
        if isinstance(entry, str):
            ix = condition._index_of(entry)
            if ix is None:
                raise AssemblyValueError(
                    f"{what}: unknown {kind} {entry!r} in sensors; {near_matches(entry, condition._names)}"
                )
        elif isinstance(entry, numbers.Integral) and not isinstance(entry, bool):
            ix = condition._check_sensor_index(entry)
        else:
            raise AssemblyValueError(
                f"{what}: sensors entry {entry!r}: expected the name (str) or index (int) of one {kind}"
            )
        if condition._sensor_to_obs[ix] < 0:
            raise AssemblyValueError(
                f"{what}: {kind} {condition._names[ix]!r} has no observation slot in the order defined by "
                "define_observation_order"
            )
        columns.append(ix)
    repeated = [condition._names[ix] for k, ix in enumerate(columns) if ix in columns[:k]]
    if repeated:
        raise AssemblyValueError(f"{what}: sensors names {list(dict.fromkeys(repeated))} more than once")
    axis = data.shape[leading_axes] if data.ndim > leading_axes else None
    if axis != len(columns):
        raise AssemblyValueError(
            f"{what}: sensors names {len(columns)} columns, but the data has shape {data.shape} "
            f"(columns on axis {leading_axes})"
        )
    return columns


def _rotations_from_quaternions(condition, quat, columns, leading_axes: int, what: str) -> np.ndarray:
    """``(..., n, 3, 3)`` rotations of ``(..., n, 4)`` quaternions; four NaNs give a NaN matrix (unobserved)."""
    unobserved = np.all(np.isnan(quat), axis=-1)
    ok, norm = spatial.quat_validity(quat)
    bad = ~(ok | unobserved)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        column = index[leading_axes]
        ix = columns[column] if columns is not None else condition._obs_to_sensor[column]
        sensor = f"{condition._kind} {condition._names[ix]!r}" if ix >= 0 else "a slot without sensor"
        frames = index[:leading_axes]
        frame = "" if not frames else f" of frame {frames[0] if len(frames) == 1 else frames}"
        raise AssemblyValueError(
            f"{what}: column {column} ({sensor}){frame}: "
            f"{spatial.describe_quaternion_problem(quat[index], float(norm[index]))}; expected a unit quaternion "
            f"(w, x, y, z) within {spatial.QUAT_NORM_TOLERANCE:g} of unit length, or four NaNs for no observation"
        )
    unit = np.where(ok[..., None], quat / np.where(ok, norm, 1.0)[..., None], np.nan)
    return spatial.quat_to_matrix(unit)
