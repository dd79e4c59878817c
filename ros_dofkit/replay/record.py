"""Recording the demo simulator to a ROS 2 bag (``dofkit record``), with the estimator configuration beside it.

You are in ``ros_dofkit.replay``. Imports the demo robot and simulator (``replay.demo``, ``replay.demo_robot``,
``core.simulation``), ``replay.messages`` / ``replay.setup`` for the messages and topics and ``ros_dofkit.ros``
to write (``bag_io``, ``imu_messages``, ``output_files``); ``demo_dds`` publishes :func:`simulation_records` live.
The bag holds what the live robot would publish (Imu per sensor, encoder JointState) plus the truth on
``/ground_truth/joint_states`` and, optionally, ``/clock``; the parameter file written next to it configures the
estimator for that bag (``dofkit replay BAG --config FILE``, or the node).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ros_dofkit.core.simulation import noise_preset
from ros_dofkit.replay.demo import simulate_demo
from ros_dofkit.replay.demo_robot import build_demo_robot, parameter_yaml
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.pipeline import ReplayError
from ros_dofkit.replay.setup import CLOCK_TOPIC, TRUTH_TOPIC, absolute_topic
from ros_dofkit.ros.bag_io import BagError, BagWriter
from ros_dofkit.ros.imu_messages import make_imu_message
from ros_dofkit.ros.output_files import write_text


@dataclass(frozen=True)
class RecordOutcome:
    """Where the bag and its configuration went, and the message count per topic."""

    bag_path: Path
    config_path: Path | None
    counts: dict
    duration_s: float


class SimulationRecord(NamedTuple):
    """One simulated message as a bag or a publisher takes it (``BagWriter.write_all`` unpacks it): its topic, its
    stamp in nanoseconds (bag time = header stamp) and the rosbags message."""

    topic: str
    stamp_ns: int
    message: object


def simulation_records(run, factory: MessageFactory, imu_topics: dict, joint_states_topic: str = "/joint_states",
                       truth_topic: str | None = TRUTH_TOPIC, clock_topic: str | None = None,
                       noise=None, stamp_offset_ns: int = 0) -> Iterator[SimulationRecord]:
    """The :class:`SimulationRecord` of every message of a :class:`~ros_dofkit.core.simulation.SimulationRun`, in
    stamp order.

    ``imu_topics`` maps IMU name -> topic. Bag stamps equal header stamps. The truth (all articulated
    coordinates) and ``/clock`` are written on the IMU time grid when their topics are given. ``noise`` (a
    SensorNoise) fills the IMU covariances with the configured standard deviations. ``stamp_offset_ns`` is added
    to every stamp (e.g. to put simulated time onto the wall clock).
    """
    missing = [r.name for r in run.imus if r.name not in imu_topics]
    if missing:
        raise ReplayError(f"no topic for simulated IMU(s) {missing}; topics given for {sorted(imu_topics)}")
    stddevs = {}
    if noise is not None:
        stddevs = dict(orientation_stddev=math.radians(noise.orientation_deg) or None,
                       angular_velocity_stddev=noise.gyro or None,
                       linear_acceleration_stddev=noise.accelerometer or None)
    entries = []  # (stamp_ns, order, topic, builder)
    for stamp, kind, name, k in run.events():
        stamp_ns = int(round(stamp * 1e9)) + stamp_offset_ns
        if kind == "imu":
            readings = run.imu(name)
            entries.append((stamp_ns, 2, imu_topics[name], lambda ns, r=readings, k=k: make_imu_message(
                factory.typestore, ns, f"{r.name}_imu", r.quaternion_wxyz[k], r.angular_velocity[k],
                r.linear_acceleration[k], **stddevs)))
        else:
            encoders = run.encoders
            entries.append((stamp_ns, 1, joint_states_topic, lambda ns, e=encoders, k=k: factory.joint_state(
                ns, e.names, e.positions[k], e.velocities[k])))
    for k, stamp in enumerate(run.times):
        stamp_ns = int(round(float(stamp) * 1e9)) + stamp_offset_ns
        if clock_topic is not None:
            entries.append((stamp_ns, 0, clock_topic, lambda ns: factory.clock(ns)))
        if truth_topic is not None:
            entries.append((stamp_ns, 3, truth_topic, lambda ns, k=k: factory.joint_state(
                ns, run.truth_names, run.truth_positions[k], run.truth_velocities[k])))
    entries.sort(key=lambda e: (e[0], e[1]))
    for stamp_ns, _, topic, build in entries:
        yield SimulationRecord(topic, stamp_ns, build(stamp_ns))


def default_config_path(bag_path) -> Path:
    """``<bag>.estimator.yaml`` beside the bag folder."""
    bag_path = Path(bag_path)
    return bag_path.with_name(bag_path.name + ".estimator.yaml")


def record_demo(out_path, options, storage: str = "sqlite3", clock: bool = False, config_path=None) -> RecordOutcome:
    """Simulate the demo robot with ``options`` (a DemoOptions) and write the bag ``out_path``.

    Refuses to overwrite the bag or the configuration file (:class:`BagError`). ``config_path`` False-like
    (empty string) skips the configuration file; None writes :func:`default_config_path`.
    """
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
