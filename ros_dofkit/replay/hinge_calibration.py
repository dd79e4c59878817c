"""Raw IMUs' headings from the bag's motion (``dofkit replay --calibrate START END --hinge-calibration``).

You are in ``ros_dofkit.replay``; imports the core's ``assembly.hinge_calibration`` (the math, with its paper),
``estimator.setup`` (IMU bodies), ``estimator.orientation_filter`` (which samples are raw) and this package's
``calibration`` (the static calibration it refines). Used by ``replay.bag_replay``.

Why: a raw IMU (gyro + accelerometer, no magnetometer) calibrated on a static pose keeps its own heading inside its
mounting (a turn about the body's vertical at the pose, for a standing person each segment's long axis), and the
joints it spans come out wrong as soon as the segments tilt. The joints between IMUs (knee hinges, 2-dof ankles)
fix each such IMU's heading from its orientation filter's output over the bag, from the static window's start to its
end (a fresh run of the filter, the same as the static calibration's): the calibrated parameters then carry, per
turned IMU, the turned mounting and ``filter_heading`` (the same turn added to its filter's output), and the whole bag
replays with them as with any known mounting.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ros_dofkit.core.assembly.errors import AssemblyValueError
from ros_dofkit.core.assembly.hinge_calibration import OrientationSeries, calibrate_filter_headings
from ros_dofkit.core.estimator.orientation_filter import OrientationFilter, is_raw
from ros_dofkit.core.estimator.setup import build as build_estimator_setup
from ros_dofkit.core.spatial import quat_to_matrix
from ros_dofkit.replay.calibration import (
    BagCalibration,
    calibrated_parameters,
    input_stamp_ns,
    setup_with_parameters,
)
from ros_dofkit.replay.pipeline import ReplayError


def raw_imus(inputs, config) -> list:
    """Names of the IMUs whose every sample in ``inputs`` goes through the raw-IMU filter (``is_raw``)."""
    sensors = np.asarray(inputs.imu_sensor, dtype=np.int64)
    accel = inputs.imu_linear_acceleration
    accel_present = inputs.imu_linear_acceleration_present
    names = []
    for i, imu in enumerate(config.imus):
        rows = np.flatnonzero(sensors == i)
        if rows.size == 0 or accel is None:
            continue
        present = np.ones(rows.size, bool) if accel_present is None else np.asarray(accel_present)[rows]
        raw = is_raw(imu.orientation, np.asarray(inputs.imu_orientation_present)[rows],
                     np.asarray(inputs.imu_angular_velocity_present)[rows], present, np.asarray(accel)[rows])
        if np.all(raw):
            names.append(imu.name)
    return names


def orientation_series(inputs, config, R_WG, first_ns: int, start_s: float, names) -> dict:
    """{IMU name: :class:`OrientationSeries`} of the IMUs ``names`` from the samples stamped ``start_s`` s after
    ``first_ns`` or later, in G (``R_WG``): a raw IMU's from a fresh run of its filter (``OrientationFilter`` with its
    settings, as the static calibration's started on the same first sample), the others' from their messages."""
    sensors = np.asarray(inputs.imu_sensor, dtype=np.int64)
    stamps = np.asarray(inputs.imu_stamp, dtype=float)
    # seconds after the first stamp counted in ns, as the static window's (a float difference put the bag's first
    # sample 2.5e-10 s before it, and its filter then started one sample later than the static calibration's)
    imu_inputs = np.asarray(inputs.kind) == 0
    relative = np.empty(len(stamps))
    relative[np.asarray(inputs.row)[imu_inputs]] = (input_stamp_ns(inputs)[imu_inputs] - first_ns) * 1e-9
    raw = set(raw_imus(inputs, config))
    series = {}
    for i, imu in enumerate(config.imus):
        if imu.name not in names:
            continue
        rows = np.flatnonzero((sensors == i) & (relative >= start_s))
        rows = rows[np.argsort(stamps[rows], kind="stable")]
        if imu.name in raw:
            run = OrientationFilter(imu.filter).run(stamps[rows], inputs.imu_angular_velocity[rows],
                                                    inputs.imu_linear_acceleration[rows])
            rows, quaternion = rows[run.present], run.quaternion_wxyz[run.present]
        else:
            present = np.asarray(inputs.imu_orientation_present, dtype=bool)[rows]
            rows, quaternion = rows[present], inputs.imu_quaternion_wxyz[rows[present]]
        if rows.size >= 2:
            series[imu.name] = OrientationSeries(stamps[rows], R_WG @ quat_to_matrix(quaternion))
    return series


def hinge_calibrated(inputs, setup, calibration: BagCalibration, source: str = "the bag") -> BagCalibration:
    """``calibration`` (the static one, on ``setup``: the configuration before it) with the headings of its raw,
    statically calibrated IMUs turned from the joints between IMUs (``core.assembly.hinge_calibration``); its
    ``hinge`` field holds the :class:`~ros_dofkit.core.assembly.hinge_calibration.HingeCalibration`. Raises
    :class:`ReplayError` when no such IMU shares a joint with another IMU, a joint moved too little, or the world
    alignment does not keep the vertical (``calibrate_filter_headings``, which the live node's ``~/calibrate_hinges``
    calls too)."""
    result = calibration.result
    config = setup.config
    turnable = [name for name in raw_imus(inputs, config) if name in result.R_BS]
    # in the filters' frames F as the stand left them (the calibrated configuration: an aligned raw IMU's filter
    # turned by its heading offset, as the live filter is); calibrate_filter_headings turns them into G with R_WG
    orientations = orientation_series(inputs, calibration.setup.config, np.eye(3), calibration.first_stamp_ns,
                                      calibration.start_s, set(config.imu_names))
    bodies = dict(zip(config.imu_names, build_estimator_setup(setup.plant, config).body_index.tolist(),
                      strict=True))
    mountings = {imu.name: result.R_BS.get(imu.name, None if imu.needs_calibration else imu.mounting)
                 for imu in config.imus}
    try:
        hinge = calibrate_filter_headings(setup.plant, result.q_cal, result.R_WG, bodies, mountings, orientations,
                                          turnable)
    except AssemblyValueError as error:
        raise ReplayError(f"hinge calibration on {source}: {error}") from None
    offsets = dict(result.heading_offsets)
    for name, turn in hinge.filter_turns.items():
        offsets[name] = offsets.get(name, 0.0) + turn
    refined = dataclasses.replace(result, R_BS={**result.R_BS, **hinge.R_BS}, heading_offsets=offsets)
    parameters = calibrated_parameters(setup.values, refined)
    return dataclasses.replace(calibration, result=refined, parameters=parameters, hinge=hinge,
                               setup=setup_with_parameters(setup, parameters))
