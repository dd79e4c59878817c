"""What a replay runs: the robot and estimator of a parameter file, and the bag topics they read and write.

Where you are: ``ros_dofkit.replay`` (offline replay and recording, no DDS). Imports the core's robot builder and
``ros_dofkit.ros.parameters`` (the node's parameter schema, so a file that starts the node configures a replay the
same way), ``ros.imu_input`` (an odometry input's frames); no other replay module but ``pipeline`` (its
ReplayError). Topic names and message types are the
estimator node's, so a bag recorded here drives the node (``dofkit play``) and a bag written by offline replay
looks like a recording of the node:

* inputs: ``/<joint_states_topic>`` (sensor_msgs/JointState), ``/<imus.NAME.topic>`` (sensor_msgs/Imu),
  ``/<odometry_topic>`` (nav_msgs/Odometry, when configured);
* truth (simulated bags): ``/ground_truth/joint_states`` (every articulated coordinate, positions and velocities);
* outputs: ``/<output_namespace>/joint_states``, ``/<output_namespace>/<instance>/joint_states``,
  ``/<output_namespace>/odometry/<instance>`` (floating bases), ``/<output_namespace>/sensor_errors``
  (std_msgs/Float64MultiArray, degrees), ``/tf`` (every moving joint, stamped with the cycle's input stamp) and
  ``/tf_static`` (fixed joints, once).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ros_dofkit.core.estimator.odometry_input import odometry_base
from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.replay.pipeline import ReplayError
from ros_dofkit.ros.imu_input import odometry_frames
from ros_dofkit.ros.parameters import (
    estimator_config_from_parameters,
    load_parameter_file,
    model_specs_from_parameters,
    validate_parameters,
)
from ros_dofkit.ros.tf_tree import TfTreeError, tf_tree_from_parameters

IMU_MSGTYPE = "sensor_msgs/msg/Imu"
ODOMETRY_MSGTYPE = "nav_msgs/msg/Odometry"
JOINT_STATE_MSGTYPE = "sensor_msgs/msg/JointState"
CLOCK_MSGTYPE = "rosgraph_msgs/msg/Clock"
TRUTH_TOPIC = "/ground_truth/joint_states"
CLOCK_TOPIC = "/clock"


def absolute_topic(name: str) -> str:
    """A node-relative topic name as it appears in a bag recorded at the root namespace."""
    return name if name.startswith("/") else "/" + name

@dataclass(frozen=True)
class ReplaySetup:
    """The robot and estimator of a parameter file, and the topics they use.

    ``imu_topics`` maps a bag topic to an IMU name; ``joint_states_topic`` is the encoder topic in the bag;
    ``odometry_topic`` the Odometry topic (None: no odometry input) and ``odometry_frames`` the (header, child)
    frames its messages must carry (``ros.imu_input.odometry_frames``).
    """

    values: dict
    plant: object
    config: object
    imu_topics: dict
    joint_states_topic: str
    output_namespace: str
    world_frame: str
    frame_prefix: str
    odometry_topic: str | None = None
    odometry_frames: tuple | None = None

    @classmethod
    def from_parameters(cls, values: dict) -> ReplaySetup:
        """Build from flat node parameters (``ros_dofkit.ros.parameters``); raises their typed errors."""
        reasons = validate_parameters(values)
        if reasons:
            raise ReplayError("invalid estimator parameters: " + "; ".join(reasons))
        plant = build_plant(model_specs_from_parameters(values))
        try:
            tree = tf_tree_from_parameters(plant, values)  # the outputs' TF frames: refused before any output
        except TfTreeError as error:
            raise ReplayError(f"TF: {error}") from error
        instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
        config = estimator_config_from_parameters(values, instances)
        base = odometry_base(plant, config, plant.articulated_view().q_indices)
        return cls(
            values=dict(values),
            plant=plant,
            config=config,
            imu_topics={absolute_topic(imu.topic): imu.name for imu in config.imus},
            joint_states_topic=absolute_topic(values.get("joint_states_topic", "joint_states")),
            output_namespace=absolute_topic(values.get("output_namespace", "estimated")).rstrip("/"),
            world_frame=values.get("world_frame", "world"),
            frame_prefix=values.get("frame_prefix", ""),
            odometry_topic=None if base is None else absolute_topic(config.odometry.topic),
            odometry_frames=None if base is None else odometry_frames(tree, base.body),
        )

    @classmethod
    def from_parameter_file(cls, path) -> ReplaySetup:
        path = Path(path)
        if not path.is_file():
            raise ReplayError(f"configuration file not found: {path}")
        return cls.from_parameters(load_parameter_file(path))
