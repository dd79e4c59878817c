"""Recording the demo simulator to a ROS 2 bag (``dofkit record``), with the estimator configuration beside it.

You are in ``ros_dofkit.replay``. The bag holds what the live robot would publish (Imu per sensor, encoder
JointState) plus the truth on ``/ground_truth/joint_states`` and, optionally, ``/clock``; the parameter file
written next to it configures the estimator for that bag (``dofkit replay BAG --config FILE``, or the node).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ros_dofkit.replay.bags import CLOCK_TOPIC, MessageFactory, absolute_topic, simulation_records
from ros_dofkit.ros.bag_io import BagError, BagWriter
from ros_dofkit.ros.output_files import write_text


@dataclass(frozen=True)
class RecordOutcome:
    """Where the bag and its configuration went, and the message count per topic."""

    bag_path: Path
    config_path: Path | None
    counts: dict
    duration_s: float


def default_config_path(bag_path) -> Path:
    """``<bag>.estimator.yaml`` beside the bag folder."""
    bag_path = Path(bag_path)
    return bag_path.with_name(bag_path.name + ".estimator.yaml")


def record_demo(out_path, options, storage: str = "sqlite3", clock: bool = False, config_path=None) -> RecordOutcome:
    """Simulate the demo robot with ``options`` (a DemoOptions) and write the bag ``out_path``.

    Refuses to overwrite the bag or the configuration file (:class:`BagError`). ``config_path`` False-like
    (empty string) skips the configuration file; None writes :func:`default_config_path`.
    """
    from ros_dofkit.core.simulation import noise_preset
    from ros_dofkit.replay.demo import simulate_demo
    from ros_dofkit.replay.demo_robot import build_demo_robot, parameter_yaml

    out_path = Path(out_path)
    config_path = default_config_path(out_path) if config_path is None else (Path(config_path) if config_path
                                                                             else None)
    if out_path.exists():
        raise BagError(f"refusing to overwrite {out_path}: it exists already; choose a new output path")
    if config_path is not None and config_path.exists():
        raise BagError(f"refusing to overwrite the configuration {config_path}: it exists already")
    robot = build_demo_robot()
    run = simulate_demo(robot, options)
    factory = MessageFactory()
    imu_topics = {imu.name: absolute_topic(imu.topic) for imu in robot.estimator_config.imus}
    records = simulation_records(run, factory, imu_topics,
                                 absolute_topic(robot.parameters["joint_states_topic"]),
                                 clock_topic=CLOCK_TOPIC if clock else None, noise=noise_preset(options.noise))
    with BagWriter(out_path, storage=storage, typestore=factory.typestore) as bag:
        counts = bag.write_all(records)
    if config_path is not None:
        try:
            write_text(config_path, "# ros_dofkit estimator configuration for the bag " + out_path.name
                       + " (written by dofkit record)\n" + parameter_yaml(robot.parameters), overwrite=False)
        except FileExistsError as error:
            raise BagError(str(error)) from None
    return RecordOutcome(out_path, config_path, counts, float(run.times[-1] - run.times[0]))
