"""The names offline replay and recording had in one module before it was split by role; import from the roles.

Where you are: ``ros_dofkit.replay``. Nothing here but re-exports, kept so that callers written against
``ros_dofkit.replay.bags`` (benchmarks, some tests) keep working; new code imports the module of the role:
``replay.setup`` (ReplaySetup, topics), ``replay.messages`` (MessageFactory), ``replay.record``
(simulation_records), ``replay.inputs`` (topic checks, streaming inputs, truth), ``replay.outputs``
(OutputWriter) and ``replay.bag_replay`` (replay_bag, its outcome and errors).
"""

from __future__ import annotations

from ros_dofkit.replay.bag_replay import NoEstimateError, ReplayOutcome, no_estimate_reason, replay_bag
from ros_dofkit.replay.inputs import bag_inputs, check_input_topics, truth_from_records, validate_input_topics
from ros_dofkit.replay.messages import MessageFactory, header_stamp_ns, seconds
from ros_dofkit.replay.outputs import OutputWriter
from ros_dofkit.replay.record import simulation_records
from ros_dofkit.replay.setup import (
    CLOCK_MSGTYPE,
    CLOCK_TOPIC,
    IMU_MSGTYPE,
    JOINT_STATE_MSGTYPE,
    TRUTH_TOPIC,
    ReplaySetup,
    absolute_topic,
)

__all__ = [
    "CLOCK_MSGTYPE",
    "CLOCK_TOPIC",
    "IMU_MSGTYPE",
    "JOINT_STATE_MSGTYPE",
    "TRUTH_TOPIC",
    "MessageFactory",
    "NoEstimateError",
    "OutputWriter",
    "ReplayOutcome",
    "ReplaySetup",
    "absolute_topic",
    "bag_inputs",
    "check_input_topics",
    "header_stamp_ns",
    "no_estimate_reason",
    "replay_bag",
    "seconds",
    "simulation_records",
    "truth_from_records",
    "validate_input_topics",
]
