"""The demo's built-in robot: the shipped 7-dof arm, four IMUs, encoders on the two shoulder joints.

You are in ``ros_dofkit.replay``; imports the core's robot builder and simulator types and the node's parameter
schema (``ros_dofkit.ros.parameters``). One description serves every consumer: the simulator (where the IMUs sit, how
the arm moves), the estimator core (an :class:`EstimatorConfig`) and the estimator node (the same settings as
ROS parameters, written to a parameter YAML). It mirrors config/arm_4imu.yaml except that the wrist IMU's
mounting is known (the demo does not run a calibration step). Everything it needs ships inside the package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.core.simulation import SimulatedImu
from ros_dofkit.core.spatial import quat_to_matrix
from ros_dofkit.ros.parameters import estimator_config_from_parameters, model_specs_from_parameters

#: Shipped URDF (ros_dofkit/models) and model instance name.
DEMO_URDF = "arm7.urdf"
DEMO_MODEL = "arm"

#: (IMU name, body, mounting R_BS as a (w, x, y, z) quaternion).
DEMO_IMUS = (
    ("upper_arm", "arm_link3", (1.0, 0.0, 0.0, 0.0)),
    ("forearm", "arm_link5", (0.0, 1.0, 0.0, 0.0)),
    ("wrist", "arm_link6", (0.5, 0.5, 0.5, 0.5)),
    ("hand", "arm_link7", (0.7071067811865476, 0.0, 0.0, 0.7071067811865476)),
)

#: Coordinates measured by encoders (locked in the estimator) and estimated from the IMUs.
DEMO_ENCODER_JOINTS = ("arm_joint1", "arm_joint2")
DEMO_ESTIMATED_JOINTS = ("arm_joint3", "arm_joint4", "arm_joint5", "arm_joint6", "arm_joint7")

#: Centre of the demo motion: elbow and wrist bent, away from the poses where two joint axes align (there
#: orientation sensors cannot tell those joints apart).
DEMO_CENTRE = {"arm_joint2": -0.6, "arm_joint4": -2.0, "arm_joint6": 1.7}
DEMO_MAX_AMPLITUDE = 0.6

#: Estimator settings of the demo (node parameter names).
DEMO_ESTIMATION = {"stale_timeout": 0.1, "accuracy": 1e-4}


@dataclass(frozen=True)
class DemoRobot:
    """The plant and the three views of the demo robot's set-up."""

    plant: object
    imus: tuple  # SimulatedImu
    estimator_config: object  # EstimatorConfig
    parameters: dict  # flat node parameters

    @property
    def encoder_joints(self) -> tuple:
        return DEMO_ENCODER_JOINTS

    @property
    def estimated_joints(self) -> tuple:
        return DEMO_ESTIMATED_JOINTS


def demo_parameters(imu_topic_prefix: str = "imu") -> dict:
    """The estimator node's parameters for the demo robot (flat names, as in a parameter YAML)."""
    values = {
        "urdf_files": [DEMO_URDF],
        "model_names": [DEMO_MODEL],
        "base_joints": ["fixed"],
        "parent_frames": ["world"],
        "joint_states_topic": "joint_states",
        "imu_names": [name for name, _, _ in DEMO_IMUS],
        f"estimated.{DEMO_MODEL}": list(DEMO_ESTIMATED_JOINTS),
        **DEMO_ESTIMATION,
    }
    for name, body, mounting in DEMO_IMUS:
        values[f"imus.{name}.body"] = body
        values[f"imus.{name}.topic"] = f"{imu_topic_prefix}/{name}/data"
        values[f"imus.{name}.mounting"] = list(mounting)
    return values


def parameter_yaml(values: dict, node_name: str = "/**") -> str:
    """A ROS 2 parameter file (``<node>: ros__parameters: ...``) holding the flat ``values``, nested by dots."""
    tree: dict = {}
    for name, value in values.items():
        node = tree
        *parents, leaf = name.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value

    def emit(node, indent):
        lines = []
        for key, value in node.items():
            if isinstance(value, dict):
                lines.append(f"{' ' * indent}{key}:")
                lines.extend(emit(value, indent + 2))
            else:
                lines.append(f"{' ' * indent}{key}: {_yaml_value(value)}")
        return lines

    return "\n".join([f"{node_name}:", "  ros__parameters:", *emit(tree, 4)]) + "\n"


def _yaml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def build_demo_robot() -> DemoRobot:
    """Plant, simulated IMUs, estimator configuration and node parameters of the demo robot."""
    parameters = demo_parameters()
    plant = build_plant(model_specs_from_parameters(parameters))
    instance_names = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    config = estimator_config_from_parameters(parameters, instance_names)
    imus = tuple(
        SimulatedImu(name, body, quat_to_matrix(np.asarray(mounting)), model_instance=DEMO_MODEL)
        for name, body, mounting in DEMO_IMUS
    )
    return DemoRobot(plant=plant, imus=imus, estimator_config=config, parameters=parameters)
