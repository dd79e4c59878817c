"""Calibration of an offline replay from a time window of the bag (``dofkit replay --calibrate START END``).

You are in ``ros_dofkit.replay``; imports the estimator core, ``ros_dofkit.ros.parameters`` (the node's parameter
schema) and ``replay.demo_robot`` (parameter files as YAML); used by ``replay.bag_replay``. A configuration whose
IMU mountings are ``calibrate`` (or that sets a ``heading_reference``) cannot estimate until the node's ~/calibrate
service has run while the robot held its calibration pose. Offline, the bag says when that was: the inputs stamped
in [START, END) seconds after the bag's first input stamp are given to an estimator core (``add_imu`` /
``add_joint_state``, no cycles), whose public ``Estimator.calibrate`` (OpenSense's IMUPlacer) returns the mountings
R_BS and the world alignment R_WG. The calibrated parameters are the configuration with those fixed
(``calibrated_parameters``): the whole bag then replays as with any known mounting (on the batched path), and the
same parameters, written to a file, let the live node start calibrated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.estimator.estimator import Estimator, EstimatorStateError
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.replay.demo_robot import parameter_yaml
from ros_dofkit.replay.pipeline import ReplayError
from ros_dofkit.ros.output_files import write_text
from ros_dofkit.ros.parameters import estimator_config_from_parameters, validate_parameters

#: Parameters that only matter before calibration: dropped from the calibrated configuration.
_PRE_CALIBRATION_PARAMETERS = ("heading_reference", "heading_axis")


@dataclass(frozen=True)
class BagCalibration:
    """A calibration taken from a window of a bag.

    ``start_s``, ``end_s``: the window, seconds after ``first_stamp_ns`` (the bag's first input header stamp);
    ``result``: the estimator's :class:`~ros_dofkit.core.estimator.estimator.CalibrationResult` (R_BS per
    calibrated IMU, R_WG, heading angle, spread, samples averaged per IMU); ``parameters``: the calibrated flat
    node parameters; ``setup``: the :class:`~ros_dofkit.replay.setup.ReplaySetup` built from them (same plant).
    """

    start_s: float
    end_s: float
    first_stamp_ns: int
    result: object
    parameters: dict
    setup: object
    hinge: object | None = None  # replay.hinge_calibration's HingeCalibration, when the headings were refined

    def summary(self) -> str:
        """One line: the window, samples per IMU, spread, heading angle."""
        samples = self.result.num_samples
        counts = ", ".join(f"{name} {count}" for name, count in samples.items())
        line = (f"calibrated on [{self.start_s:g}, {self.end_s:g}) s of the bag: {min(samples.values())}-"
                f"{max(samples.values())} samples per IMU ({counts}), spread {self.result.max_spread_deg:.2f} deg, "
                f"heading angle {math.degrees(self.result.heading_angle):.1f} deg")
        if self.hinge is not None:
            turns = ", ".join(f"{name} {math.degrees(turn):.1f}" for name, turn in self.hinge.turns.items())
            line += f"\nheadings turned from hinges (deg): {turns}"
        return line


def _quaternion_parameter(R) -> list:
    """A rotation matrix as the (w, x, y, z) list of a node parameter, w >= 0 (the same rotation either way)."""
    q = matrix_to_quat(np.asarray(R, dtype=float))
    return [float(c) for c in (q if q[0] >= 0 else -q)]


def calibrated_parameters(values: dict, result) -> dict:
    """``values`` (flat node parameters) with a calibration applied: every calibrated IMU's ``mounting`` = its
    R_BS and no ``calibrate``, ``world_alignment`` = R_WG (the heading included), no ``heading_reference`` /
    ``heading_axis`` (already applied), every aligned raw IMU's ``filter_heading`` turned by its heading offset
    (valid for a filter that starts on the same samples, as a replay of the same bag). What a node's ~/calibrate
    leaves behind, as parameters."""
    calibrated = {name: value for name, value in values.items()
                  if not (name.endswith(".calibrate") or name in _PRE_CALIBRATION_PARAMETERS)}
    for name, R_BS in result.R_BS.items():
        calibrated[f"imus.{name}.mounting"] = _quaternion_parameter(R_BS)
    calibrated["world_alignment"] = _quaternion_parameter(result.R_WG)
    for name, turn in result.heading_offsets.items():
        calibrated[f"imus.{name}.filter_heading"] = float(values.get(f"imus.{name}.filter_heading", 0.0)) + turn
    return calibrated


def write_parameter_file(parameters: dict, path, comment: str) -> None:
    """Write flat node parameters as a ROS 2 parameter file (``/**: ros__parameters:``) with a comment line."""
    write_text(path, f"# {comment}\n" + parameter_yaml(parameters))


def setup_with_parameters(setup, parameters: dict):
    """``setup`` (a ReplaySetup) with its configuration rebuilt from ``parameters`` on the same plant."""
    reasons = validate_parameters(parameters)
    if reasons:
        raise ReplayError("calibrated parameters are invalid: " + "; ".join(reasons))
    plant = setup.plant
    instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    config = estimator_config_from_parameters(parameters, instances)
    return dataclasses.replace(setup, values=dict(parameters), config=config)


def check_window(start_s: float, end_s: float) -> tuple[float, float]:
    """``(start_s, end_s)`` as floats; :class:`ReplayError` unless 0 <= START < END, both finite."""
    try:
        start_s, end_s = float(start_s), float(end_s)
    except (TypeError, ValueError):
        raise ReplayError(f"calibration window: expected two numbers START END (seconds), got {start_s!r} "
                          f"{end_s!r}") from None
    if not (math.isfinite(start_s) and math.isfinite(end_s)):
        raise ReplayError(f"calibration window: expected finite seconds, got [{start_s}, {end_s})")
    if start_s < 0.0:
        raise ReplayError(f"calibration window: START is seconds after the bag's first input stamp and must be "
                          f">= 0, got {start_s:g}")
    if end_s <= start_s:
        raise ReplayError(f"calibration window: END must be after START, got [{start_s:g}, {end_s:g})")
    return start_s, end_s


def input_stamp_ns(inputs) -> np.ndarray:
    """(M,) int64 header stamp in ns of every input (offering order): what a calibration window's seconds count
    from (``first_stamp_ns`` = their minimum), for the static window and the hinge calibration's motion alike."""
    stamp_ns = inputs.stamp_ns if inputs.stamp_ns is not None else np.round(inputs.input_stamps() * 1e9)
    return np.asarray(stamp_ns, dtype=np.int64)


def calibrate_from_inputs(inputs, setup, start_s: float, end_s: float, max_spread_deg: float = 2.0,
                          source: str = "the bag") -> BagCalibration:
    """Calibrate ``setup``'s estimator on the inputs (an :class:`~ros_dofkit.core.estimator.offline.OfflineInputs`,
    in offering order) stamped in [``start_s``, ``end_s``) seconds after the first input stamp.

    The window's IMU samples and encoder messages are offered with ``add_imu`` / ``add_joint_state`` (no cycle
    runs; the calibration pose takes the encoder joints' latest values), with a calibration window holding every
    sample of the span, then ``Estimator.calibrate(max_spread_deg=...)``. Raises :class:`ReplayError` for a bad
    window (see :func:`check_window`), a window after the bag's end, an IMU to calibrate without a sample in the
    window, or a failed calibration (the estimator's reason: moved during the window, nothing to calibrate, ...).
    """
    start_s, end_s = check_window(start_s, end_s)
    config = setup.config
    stamp_ns = input_stamp_ns(inputs)
    if stamp_ns.size == 0:
        raise ReplayError(f"cannot calibrate: {source} has no input message on the configured topics")
    first_ns = int(stamp_ns.min())
    span_s = (int(stamp_ns.max()) - first_ns) * 1e-9
    if start_s > span_s:
        raise ReplayError(f"calibration window [{start_s:g}, {end_s:g}) s is outside {source}: its inputs span "
                          f"{span_s:.3f} s after the first input stamp")
    relative_s = (stamp_ns - first_ns) * 1e-9
    selected = np.flatnonzero((relative_s >= start_s) & (relative_s < end_s))
    kind, row = inputs.kind[selected], inputs.row[selected]
    imu_rows = row[kind == 0]
    sensors = np.asarray(inputs.imu_sensor, dtype=np.int64)[imu_rows]
    names = config.imu_names
    counts = {name: int(np.sum(sensors == k)) for k, name in enumerate(names)}
    needed = [imu.name for imu in config.imus if imu.needs_calibration]
    if config.heading_reference and config.heading_reference not in needed:
        needed.append(config.heading_reference)
    empty = [name for name in needed if counts[name] == 0]
    if empty:
        raise ReplayError(f"calibration window [{start_s:g}, {end_s:g}) s of {source} holds no sample of IMU(s) "
                          f"{empty}, which calibration needs (samples in the window: {counts}; the inputs span "
                          f"{span_s:.3f} s)")
    window = max([config.calibration_window, *counts.values()])
    estimator = Estimator(setup.plant, dataclasses.replace(config, calibration_window=window))
    quaternion, gyro = inputs.imu_quaternion_wxyz, inputs.imu_angular_velocity
    has_R, has_w = inputs.imu_orientation_present, inputs.imu_angular_velocity_present
    accel = inputs.imu_linear_acceleration  # raw IMUs' orientation filters read it
    has_a = inputs.imu_linear_acceleration_present
    for k, r in zip(kind.tolist(), row.tolist(), strict=True):
        if k == 0:
            estimator.add_imu(names[inputs.imu_sensor[r]], float(inputs.imu_stamp[r]),
                              quaternion[r] if has_R[r] else (1.0, 0.0, 0.0, 0.0),
                              gyro[r] if has_w[r] else (0.0, 0.0, 0.0), bool(has_R[r]), bool(has_w[r]),
                              linear_acceleration=None if accel is None else accel[r],
                              linear_acceleration_present=has_a is None or bool(has_a[r]))
        else:
            velocities = inputs.js_velocities[r]
            estimator.add_joint_state(inputs.js_names[r], inputs.js_positions[r],
                                      velocities if velocities is not None and len(velocities) else None,
                                      float(inputs.js_stamp[r]))
    try:
        result = estimator.calibrate(max_spread_deg=max_spread_deg)
    except EstimatorStateError as error:
        raise ReplayError(f"calibration on [{start_s:g}, {end_s:g}) s of {source} failed: {error}") from None
    parameters = calibrated_parameters(setup.values, result)
    return BagCalibration(start_s, end_s, first_ns, result, parameters, setup_with_parameters(setup, parameters))
