"""Test helpers: IMU orientation sensors on a plant's links and their exact observations (shared by the assembly
tests). Not a test module."""

from __future__ import annotations

import numpy as np

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import Assembler, OrientationSensors


def imu_setup(plant, links, rng, backend="compiled", weights=None):
    """An OrientationSensors goal with one IMU per link (random mounting R_BS from ``rng``; weights 1 unless given)
    adopted by a new Assembler: ``(osensors, assembler)``."""
    osensors = OrientationSensors("imus")
    for i, link in enumerate(links):
        weight = 1.0 if weights is None else weights[i]
        osensors.add_osensor(link, link, spatial.rotvec_to_matrix(rng.normal(size=3)), weight)
    osensors.define_observation_order(links)
    assembler = Assembler(plant, backend=backend)
    assembler.adopt_assembly_goal(osensors)
    return osensors, assembler


def observe(plant, osensors, q):
    """Exact observations R_GO (batched over leading axes of q) in the condition's observation order."""
    X_WB = plant.calc_body_poses(q)
    return np.stack(
        [X_WB[..., osensors.get_osensor_body(i), :3, :3] @ osensors.get_osensor_station(i)
         for i in range(osensors.get_num_osensors())],
        axis=-3,
    )
