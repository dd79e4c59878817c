"""``joint_state_filter``: republishes a JointState topic restricted to a DofMask (model instances or joint names).

You are in a thin node (``ros_dofkit.nodes``). Parameters:

* ``input_topic`` (default ``joint_states``) -> ``output_topic`` (default ``joint_states_filtered``);
* ``model_names``: keep the coordinates of these model instances (Drake's ``DofMask::MakeFromModel`` over the
  plant's articulated view) — needs the robot: ``robot_description`` or ``urdf_files`` (+ ``model_names_of_files``,
  ``base_joints``, ``parent_frames`` as for the estimator; :func:`robot_parameters_from_estimator` maps an
  estimator's parameter file onto these, as the launch file's ``config`` argument does);
* ``joint_names``: keep these joints (or coordinates); checked against the robot when one is given, taken
  literally otherwise.

Both selections are united. Output entries keep the input's order, stamp and frame; velocity / effort are passed
through when the input has them. A message whose arrays do not match its names is dropped (counted, throttled
warning); a message without any selected joint publishes nothing.
"""

from __future__ import annotations

import sys
import time

from rclpy.node import Node
from sensor_msgs.msg import JointState

from ros_dofkit.core.dof_mask import DofMask
from ros_dofkit.core.estimator.config import describe_unknown
from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.nodes.common import StartupError, declare_specs, run_node
from ros_dofkit.ros.parameters import ROBOT_PARAMETERS, STRING, STRING_ARRAY, ParameterSpec, model_specs_from_parameters
from ros_dofkit.ros.qos import QosEventMonitor, create_input_subscription, create_output_publisher

NODE_NAME = "joint_state_filter"

FILTER_PARAMETERS = (
    ParameterSpec("input_topic", STRING, "joint_states", "JointState topic to filter", read_only=True),
    ParameterSpec("output_topic", STRING, "joint_states_filtered", "filtered JointState topic", read_only=True),
    ParameterSpec("model_names", STRING_ARRAY, [], "keep the coordinates of these model instances", read_only=True),
    ParameterSpec("joint_names", STRING_ARRAY, [], "keep these joints or coordinates", read_only=True),
    ParameterSpec("model_names_of_files", STRING_ARRAY, [], "model instance name per URDF file (empty: the "
                  "URDF robot names)", read_only=True),
    *[spec for spec in ROBOT_PARAMETERS if spec.name in ("robot_description", "urdf_files", "base_joints",
                                                         "parent_frames")],
)


#: Robot parameters of an estimator parameter file -> the filter's (the estimator's ``model_names`` name the
#: instances of its URDF files; the filter's own ``model_names`` select instances to keep).
ESTIMATOR_ROBOT_PARAMETERS = {"robot_description": "robot_description", "urdf_files": "urdf_files",
                              "model_names": "model_names_of_files", "base_joints": "base_joints",
                              "parent_frames": "parent_frames"}


def robot_parameters_from_estimator(values: dict) -> dict:
    """The filter's robot parameters from an estimator's (flat values of its parameter file), so that the filter
    builds the same robot with the same model instance names."""
    return {ours: values[theirs] for theirs, ours in ESTIMATOR_ROBOT_PARAMETERS.items() if values.get(theirs)}


def selected_coordinates(values: dict) -> tuple:
    """Names of the coordinates the filter keeps (see the module docstring); StartupError if none or unknown."""
    model_names = list(values["model_names"])
    joint_names = list(values["joint_names"])
    if not model_names and not joint_names:
        raise StartupError("select something to keep: set model_names and/or joint_names")
    has_robot = bool(values["urdf_files"] or values["robot_description"].strip())
    if not has_robot:
        if model_names:
            raise StartupError("model_names needs the robot: set robot_description or urdf_files")
        return tuple(joint_names)
    robot = dict(values, model_names=values["model_names_of_files"])
    try:
        plant = build_plant(model_specs_from_parameters(robot))
    except (ValueError, TypeError, OSError) as error:
        raise StartupError(f"robot: {error}") from error
    view = plant.articulated_view()
    coordinates = list(view.position_names())
    selected = DofMask(size=len(coordinates), value=False)
    instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    for name in model_names:
        if name not in instances:
            raise StartupError(describe_unknown("model instance", name, instances))
        selected = selected | DofMask.make_from_model(view, name)
    joints = {}
    for index in view.get_joint_indices():
        joint = view.get_joint(index)
        if joint.num_positions:
            joints[joint.name] = coordinates[joint.position_start:joint.position_start + joint.num_positions]
    values_ = [bool(v) for v in selected]
    for name in joint_names:
        names = joints.get(name, [name] if name in coordinates else None)
        if names is None:
            raise StartupError(describe_unknown("joint or coordinate", name, [*joints, *coordinates]))
        for coordinate in names:
            values_[coordinates.index(coordinate)] = True
    mask = DofMask(values=values_)
    return tuple(coordinates[i] for i in mask.selected_to_full_index())


def filter_joint_state(msg: JointState, keep: frozenset):
    """The entries of ``msg`` whose name is in ``keep`` (order, header kept); None if nothing is kept.
    Raises ValueError when the message's arrays do not match its names."""
    n = len(msg.name)
    for label, values in (("position", msg.position), ("velocity", msg.velocity), ("effort", msg.effort)):
        if len(values) not in (0, n):
            raise ValueError(f"{label} has {len(values)} entries for {n} names")
    indices = [i for i, name in enumerate(msg.name) if name in keep]
    if not indices:
        return None
    out = JointState()
    out.header = msg.header
    out.name = [msg.name[i] for i in indices]
    out.position = [msg.position[i] for i in indices] if len(msg.position) else []
    out.velocity = [msg.velocity[i] for i in indices] if len(msg.velocity) else []
    out.effort = [msg.effort[i] for i in indices] if len(msg.effort) else []
    return out


class JointStateFilterNode(Node):
    """Republishes ``input_topic`` restricted to the selected coordinates (see the module docstring)."""

    def __init__(self, **node_kwargs):
        super().__init__(NODE_NAME, **node_kwargs)
        values = declare_specs(self, FILTER_PARAMETERS)
        self.selected = selected_coordinates(values)
        self._keep = frozenset(self.selected)
        self.dropped = 0
        self._last_warning = -float("inf")
        self.qos_events = QosEventMonitor(self)
        self._publisher = create_output_publisher(self, JointState, values["output_topic"], self.qos_events)
        create_input_subscription(self, JointState, values["input_topic"], self._on_joint_state, self.qos_events)
        self.get_logger().info(
            f"joint_state_filter ready: {values['input_topic']} -> {values['output_topic']} keeping "
            f"{len(self.selected)} coordinate(s) {list(self.selected)}"
        )

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            out = filter_joint_state(msg, self._keep)
        except ValueError as error:
            self.dropped += 1
            if time.monotonic() - self._last_warning > 5.0:
                self._last_warning = time.monotonic()
                self.get_logger().warning(f"dropped a malformed JointState ({self.dropped} so far): {error}")
            return
        if out is not None:
            self._publisher.publish(out)


def main(args: list[str] | None = None) -> None:
    """Console script ``joint_state_filter [--ros-args ...]``: exits 0 on SIGINT/SIGTERM, 2 when it cannot start."""
    sys.exit(run_node(JointStateFilterNode, NODE_NAME, args=args))


if __name__ == "__main__":
    main()
