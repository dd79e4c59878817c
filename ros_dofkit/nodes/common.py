"""What every node executable of ros_dofkit shares: start-up errors, parameter declaration, the process lifecycle.

You are in ``ros_dofkit.nodes``: thin rclpy programs. This module holds no robot logic; each node module builds its
Node class and hands it to :func:`run_node` from its console-script ``main``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import numpy as np
import rclpy
from rclpy.clock import Clock, ClockChange, ClockType, JumpThreshold
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from ros_dofkit.precompile import first_start_note, mark_warm
from ros_dofkit.ros.parameters import (
    BOOL,
    DOUBLE,
    DOUBLE_ARRAY,
    INTEGER,
    STRING,
    STRING_ARRAY,
    make_descriptor,
    validate_value,
)
from ros_dofkit.ros.qos import QosOverrideError

_PARAMETER_TYPES = {
    STRING: Parameter.Type.STRING,
    STRING_ARRAY: Parameter.Type.STRING_ARRAY,
    DOUBLE: Parameter.Type.DOUBLE,
    DOUBLE_ARRAY: Parameter.Type.DOUBLE_ARRAY,
    INTEGER: Parameter.Type.INTEGER,
    BOOL: Parameter.Type.BOOL,
}


class StartupError(RuntimeError):
    """The node cannot start: a parameter or the robot is invalid. The message says which and why."""


def declare_specs(node: Node, specs) -> dict:
    """Declare each ParameterSpec with its descriptor; return {name: value} (the spec default when unset).

    A value of the wrong type or out of range is reported as :class:`StartupError` naming the parameter."""
    values = {}
    for spec in specs:
        default = spec.default
        try:
            if isinstance(default, list) and not default:
                # An empty list has no type of its own: declare by type, fall back to [] when no override exists.
                parameter = node.declare_parameter(spec.name, _PARAMETER_TYPES[spec.type], make_descriptor(spec))
            else:
                parameter = node.declare_parameter(spec.name, default, make_descriptor(spec))
            try:
                value = parameter.value
            except ParameterUninitializedException:
                value = None
        except ParameterException as error:
            raise StartupError(f"parameter {spec.name!r}: {error}") from error
        except (TypeError, ValueError) as error:  # rclpy raises these for a wrong type of override
            raise StartupError(f"parameter {spec.name!r} ({spec.type}): {error}") from error
        if value is None:
            value = list(default) if isinstance(default, list) else default
        if isinstance(value, (tuple, np.ndarray)) or type(value).__name__ == "array":
            value = list(value)
        reason = validate_value(spec, value)
        if reason:
            raise StartupError(reason)
        values[spec.name] = value
    return values


class ClockSeconds:
    """Now on a node's clock (``node.get_clock()``) in seconds, for a node that reads it on every input message:
    ``seconds()`` is ``clock.now()`` in seconds, None under sim time before the first /clock.

    While ROS time is inactive (no ``use_sim_time``) a ROS clock reads the system clock (rcl: CLOCK_REALTIME, what
    ``time.time_ns`` reads), so no rclpy Time needs building; under sim time it is ``clock.now()``, which is 0 until
    the first /clock message. Whether ROS time is active is asked once, then followed through a jump callback on
    the clock's activation changes (rcl calls it when the node's TimeSource switches ``use_sim_time``) rather than
    asked on every read (a lock and an rcl call: ~1 us of each message, ~2 paced at 500 Hz)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._system_time = False
        self._jumps = None
        if clock.clock_type == ClockType.ROS_TIME:
            # The callback first, then the state: an activation between the two is not missed.
            self._jumps = clock.create_jump_callback(JumpThreshold(min_forward=None, min_backward=None,
                                                                   on_clock_change=True),
                                                     post_callback=self._on_jump)
            self._system_time = not clock.ros_time_is_active

    def _on_jump(self, jump) -> None:
        if jump.clock_change == ClockChange.ROS_TIME_ACTIVATED:
            self._system_time = False
        elif jump.clock_change == ClockChange.ROS_TIME_DEACTIVATED:
            self._system_time = True

    def seconds(self) -> float | None:
        if self._system_time:
            return time.time_ns() * 1e-9
        nanoseconds = self.clock.now().nanoseconds
        return None if nanoseconds == 0 else nanoseconds * 1e-9


def run_node(make_node: Callable[[], Node], name: str, spin: Callable[[Node], None] = rclpy.spin,
             args: list[str] | None = None, kernels: str | None = None) -> int:
    """Initialize rclpy, build the node, spin it until shutdown; return the process exit status.

    A node that compiles numba kernels names them with ``kernels`` (the program name ros_dofkit.precompile
    tracks, "estimator"): while that cache is cold it first logs "compiling kernels (first start, about N s)",
    and marks it warm once the node is built. A first start is never silent.

    0 after SIGINT/SIGTERM or an external shutdown; 2 when the node cannot start (:class:`StartupError`, an
    invalid QoS override parameter, or arguments rcl refuses such as a missing or malformed ``--params-file``),
    after one FATAL log line saying why. The node is always destroyed and rclpy shut down, whatever happened.

    Only the first SIGINT interrupts: a terminal's Ctrl-C reaches every process of its group and ``ros2 launch``
    forwards another, so a second one may come while the node is cleaning up. From the first SIGINT (or the start
    of the clean-up) on, SIGINT is ignored for the rest of the process, which is ending.
    """
    stopping = False

    def interrupt_once(signum, frame):
        # rclpy's own handler (installed by init) shuts its context down, then calls this one.
        nonlocal stopping
        if not stopping:
            stopping = True
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt_once)
    try:
        rclpy.init(args=args)
    except _rclpy.RCLError as error:  # a missing or malformed --params-file, bad --ros-args: rcl refuses them
        rclpy.logging.get_logger(name).fatal(f"cannot start: {str(error).splitlines()[0]}")
        return 2
    node = None
    status = 0
    try:
        note = first_start_note(kernels) if kernels else None
        if note:
            rclpy.logging.get_logger(name).info(note)
        node = make_node()
        if note:
            mark_warm(kernels)
        spin(node)
    except (StartupError, QosOverrideError) as error:
        rclpy.logging.get_logger(name).fatal(f"cannot start: {error}")
        status = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stopping = True
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return status
