"""The estimator's setup: what the plant and the configuration fix, built and checked once.

You are in the ROS-free estimator core; this module imports the plant's public API, DofMask, the assembler and the
estimator's configuration. It exists so that the streaming and the offline entry points of the estimator read one
description of the problem: which articulated coordinates are estimated (freed) and which measured (locked at
their encoders), the free q / v of the plant (estimated coordinates plus floating-base rotations, SPEC 8.2), the
IMUs' bodies and weights, and the settings the compiled cycle rules read.

Dofs: every joint with v == q-dot is seen through the plant's articulated view (SPEC 9.2); per model instance a
DofMask over those coordinates says which are estimated, the rest are measured. A floating base (quaternion
joint) is estimated in rotation and held in translation (orientation sensors cannot observe position) unless
an odometry input sets it (``odometry_input``; a planar base's x, y and optionally heading too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.assembly import Assembler, OrientationSensors
from ros_dofkit.core.dof_mask import DofMask
from ros_dofkit.core.estimator.config import (
    EstimatorConfig,
    EstimatorConfigError,
    UnknownNameError,
    describe_unknown,
)
from ros_dofkit.core.estimator.odometry_input import OdometryBase, odometry_base
from ros_dofkit.core.estimator.rules import RulesSettings


@dataclass(frozen=True, eq=False)
class EstimatorSetup:
    """The problem an estimator solves on a finalized plant (see the module docstring). Build with :func:`build`.

    Attributes:
        plant, config: what it was built from.
        view: the plant's articulated view; ``art_q`` / ``art_v`` its coordinates' plant indices,
            ``art_names`` their names (the names joint-state input uses), ``name_to_art`` the reverse map.
        instance_masks: {model instance name: DofMask of its articulated coordinates}.
        estimated: (n_art,) bool, True = estimated (free); ``estimated_mask`` the same as a DofMask.
        free_q, free_v: (nq,), (nv,) bool, the plant coordinates the solver frees.
        floating_joints: the plant's floating base joints.
        imu_bodies: the plant body of each configured IMU (config order); ``body_index`` their indices.
        weights: (n_imu,) the IMUs' weights in the solve.
        q_default: (nq,) the plant's default positions.
        odometry: the base an odometry input drives (``odometry_input.OdometryBase``; its articulated coordinates
            are measured, never estimated), or None.
    """

    plant: object
    config: EstimatorConfig
    view: object
    art_q: np.ndarray
    art_v: np.ndarray
    art_names: tuple
    name_to_art: dict
    instance_masks: dict
    estimated: np.ndarray
    estimated_mask: DofMask
    free_q: np.ndarray
    free_v: np.ndarray
    floating_joints: tuple
    imu_bodies: tuple
    body_index: np.ndarray
    weights: np.ndarray
    q_default: np.ndarray
    odometry: OdometryBase | None = None

    @property
    def imu_names(self) -> tuple:
        return tuple(imu.name for imu in self.config.imus)

    def rules_settings(self, config: EstimatorConfig | None = None) -> RulesSettings:
        """The settings the cycle rules read, from ``config`` (default: the setup's; tuning may change at run
        time, see ``Estimator.update_settings``)."""
        config = self.config if config is None else config
        offsets = time_offsets_ns(config)
        return RulesSettings(
            stale_timeout=float(config.stale_timeout_s), jump_reset=float(config.stamp_jump_reset_s),
            future_tolerance=float(config.future_tolerance_s), sync_tolerance=float(config.sync_tolerance_s),
            sync_joint_states=bool(config.sync_joint_states), measured_count=int((~self.estimated).sum()),
            js_offset_ns=int(offsets[-2]), odometry_offset_ns=int(offsets[-1]))


def build(plant, config: EstimatorConfig) -> EstimatorSetup:
    """Check ``config`` against ``plant`` and describe the problem. Raises :class:`UnknownNameError` (listing
    the valid names) for unknown model instances, joints, coordinates or IMU bodies, and
    :class:`EstimatorConfigError` for a plant that is not finalized or a floating joint listed as estimated."""
    if not isinstance(config, EstimatorConfig):
        raise TypeError(f"config: expected EstimatorConfig, got {type(config).__name__}")
    if not plant.is_finalized():
        raise EstimatorConfigError("the plant must be finalized before an Estimator is built on it")
    view = plant.articulated_view()
    art_q = np.asarray(view.q_indices, dtype=np.int64)
    art_v = np.asarray(view.v_indices, dtype=np.int64)
    art_names = tuple(view.position_names())
    instance_names = tuple(plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances()))
    instance_masks = {name: DofMask.make_from_model(view, name) for name in instance_names}
    estimated = _estimated_coordinates(plant, config, view, art_names, instance_masks)
    odometry = odometry_base(plant, config, art_q)
    if odometry is not None:
        estimated[odometry.art_index] = False  # the odometry measures them
    free_q = np.zeros(plant.num_positions(), dtype=bool)
    free_q[art_q[estimated]] = True
    free_v = np.zeros(plant.num_velocities(), dtype=bool)
    free_v[art_v[estimated]] = True
    floating_joints = tuple(plant.floating_base_joints())
    for joint in floating_joints:
        free_q[joint.position_start:joint.position_start + 4] = True
        free_v[joint.velocity_start:joint.velocity_start + 3] = True
    bodies = tuple(_imu_body(plant, imu, instance_names) for imu in config.imus)
    return EstimatorSetup(
        plant=plant, config=config, view=view, art_q=art_q, art_v=art_v, art_names=art_names,
        name_to_art={name: i for i, name in enumerate(art_names)}, instance_masks=instance_masks,
        estimated=estimated, estimated_mask=DofMask(values=estimated.tolist()), free_q=free_q, free_v=free_v,
        floating_joints=floating_joints, imu_bodies=bodies,
        body_index=np.array([body.index for body in bodies], dtype=np.int64),
        weights=np.array([imu.weight for imu in config.imus], dtype=float),
        q_default=np.asarray(plant.default_positions(), dtype=float).copy(), odometry=odometry)


def time_offsets_ns(config: EstimatorConfig) -> np.ndarray:
    """(n_imu + 2,) int64: the time offset (ns) of each IMU, of the joint states and of the odometry."""
    seconds = [imu.time_offset_s for imu in config.imus] + [
        config.joint_state_time_offset_s, 0.0 if config.odometry is None else config.odometry.time_offset_s]
    return np.round(np.asarray(seconds, dtype=float) * 1e9).astype(np.int64)


def _estimated_coordinates(plant, config, view, art_names, instance_masks) -> np.ndarray:
    """(n_art,) bool: the coordinates ``config.estimated_joints`` (or ``default_estimated``) selects."""
    estimated = np.zeros(len(art_names), dtype=bool)
    for instance in config.estimated_joints:
        if instance not in instance_masks:
            raise UnknownNameError(describe_unknown("model instance", instance, list(instance_masks)))
    for instance, mask in instance_masks.items():
        spec = config.estimated_joints.get(instance, config.default_estimated)
        selected = np.asarray(list(mask), dtype=bool)
        if spec == "none":
            continue
        if spec == "all":
            estimated |= selected
            continue
        instance_index = plant.get_model_instance_by_name(instance)
        joints = {view.get_joint(j).name: view.get_joint(j) for j in view.get_joint_indices(instance_index)}
        coordinates = {art_names[i]: i for i in np.flatnonzero(selected)}
        for entry in spec:
            if entry in joints:
                joint = joints[entry]
                estimated[joint.position_start:joint.position_start + joint.num_positions] = True
            elif entry in coordinates:
                estimated[coordinates[entry]] = True
            else:
                floating = [j.name for j in plant.floating_base_joints() if j.model_instance == instance_index]
                if entry in floating:
                    raise EstimatorConfigError(
                        f"estimated_joints[{instance!r}]: {entry!r} is a floating joint; floating bases are "
                        "always estimated in rotation and need not be listed"
                    )
                raise UnknownNameError(describe_unknown(
                    f"joint or coordinate of model instance {instance!r}", entry, [*joints, *coordinates]
                ))
    return estimated


def _imu_body(plant, imu, instance_names):
    instance = None
    if imu.model_instance is not None:
        if imu.model_instance not in instance_names:
            raise UnknownNameError(describe_unknown("model instance", imu.model_instance, list(instance_names)))
        instance = plant.get_model_instance_by_name(imu.model_instance)
    try:
        return plant.get_body_by_name(imu.body, instance) if instance is not None else plant.get_body_by_name(
            imu.body)
    except ValueError as error:
        raise UnknownNameError(f"IMU body: {error}") from error


def build_solver(setup: EstimatorSetup, config: EstimatorConfig, R_BS: dict):
    """``(OrientationSensors, Assembler, names)`` for the IMUs with a known mounting (``R_BS`` {name: R_BS or
    None}), in config order: measured coordinates and floating-base translations locked, ``config``'s accuracy
    and joint-limit choice. ``names``: the solver's sensors, the order of its observations."""
    osensors = OrientationSensors()
    names = [imu.name for imu in config.imus if R_BS[imu.name] is not None]
    for imu, body in zip(config.imus, setup.imu_bodies, strict=True):
        if R_BS[imu.name] is not None:
            osensors.add_osensor(imu.name, body, R_BS[imu.name], weight=imu.weight)
    osensors.define_observation_order(names)
    assembler = Assembler(setup.plant)
    assembler.adopt_assembly_goal(osensors)
    assembler.set_accuracy(config.accuracy)
    if config.use_joint_limits:
        assembler.use_joint_limits()
    locked = np.flatnonzero(~setup.free_q)
    if locked.size:
        assembler.lock_positions(locked)
    return osensors, assembler, tuple(names)
