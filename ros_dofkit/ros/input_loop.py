"""A spin loop for a node whose inputs arrive fast: the input subscriptions get a wait set of their own.

Where you are: the ROS edge (``ros_dofkit.ros``), used by the estimator node's ``main``. rclpy's executors rebuild
a wait set of *every* entity of the node on every wake (subscriptions, timers, the parameter services, one QoS
event handler per publisher and subscription: ~35 entities for the estimator) and hand out one callback per
wake. At 2,000 Imu messages/s that bookkeeping costs more than the estimator's cycle (measured with py-spy:
executor ~35 % of the node's CPU, the estimator's own work ~20 %).

:class:`InputLoop` waits on the input subscriptions only, takes every message they hold (serialized, for the
caller's own decoder) and gives each to its handler; every ``housekeeping_period`` s, at a moment the inputs are
quiet (see :meth:`InputLoop.spin`), and when one of the node's timers is due, it lets the node's ordinary executor
run once without waiting, which serves timers, services, parameter requests and QoS events exactly as
``rclpy.spin`` would (at most one ready callback per pass, as ``spin_once``; a pass that served one is followed by
another soon, so that requests that came together are served together). A pass costs about as much as a sample
set's estimate (rmw waits on every entity), hence one every 50 ms by default rather than every few milliseconds (the
estimator node: every 200 ms, ``nodes.estimator``).
Under sim time the period is at most :data:`SIM_TIME_HOUSEKEEPING_S`: /clock is one of the callbacks a pass serves,
and the node's clock, which judges every input's stamp (future, stale), is only as current as the last /clock
served (at one /clock per 50 ms pass the clock fell ~60 ms behind a bag's data and every input was judged future).
The input subscriptions are ordinary subscriptions of the node (QoS overrides and events as usual): if the executor
happens to find one ready, it calls the same handler with the same bytes.

The wait set is rclpy's own ``_rclpy.WaitSet`` (the one its executors build), kept for the loop's lifetime.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rclpy.executors import (
    ConditionReachedException,
    Executor,
    ExternalShutdownException,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.subscription import Subscription

#: Shortest time between two housekeeping passes (a timer still due after a pass that served something else; the
#: pass after one that served a callback).
_MIN_SPACING_NS = 1_000_000
#: Longest time between two housekeeping passes while the node's clock follows /clock (sim time).
SIM_TIME_HOUSEKEEPING_S = 0.005


class InputLoop:
    """Spins ``node``: input subscriptions served directly, everything else by an executor (see module docstring).

    ``add(subscription, handler)`` registers an input: a subscription created with (or switched to) ``raw``
    messages, and ``handler(data: bytes)`` called for each message, in arrival order per subscription."""

    def __init__(self, node: Node, housekeeping_period: float = 0.05, executor: Executor | None = None,
                 quiet_time: float = 0.0003, overdue_periods: int = 4):
        if not housekeeping_period > 0.0:
            raise ValueError(f"housekeeping_period must be a positive number of seconds, got {housekeeping_period!r}")
        if not quiet_time >= 0.0 or not (isinstance(overdue_periods, int) and overdue_periods >= 1):
            raise ValueError(f"quiet_time must be >= 0 s and overdue_periods an integer >= 1, got {quiet_time!r} "
                             f"and {overdue_periods!r}")
        self.node = node
        self.housekeeping_period = float(housekeeping_period)
        self.quiet_time = float(quiet_time)
        self.overdue_periods = overdue_periods
        self.housekeeping_passes = 0
        self.executor = executor if executor is not None else SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        self._inputs: list[tuple[Subscription, Callable]] = []
        self.messages_taken = 0

    def add(self, subscription: Subscription, handler: Callable[[bytes], None]) -> None:
        if not subscription.raw:
            raise ValueError(f"InputLoop.add: expected a raw subscription (serialized messages, as the loop takes "
                             f"them), got one of {subscription.msg_type.__name__} on {subscription.topic_name} with "
                             f"raw=False")
        self._inputs.append((subscription, handler))

    def _drain(self, ready) -> int:
        taken = 0
        for subscription, handler in self._inputs:
            handle = subscription.handle
            if handle.pointer not in ready:
                continue
            msg_type = subscription.msg_type
            with handle:
                while True:
                    taken_message = handle.take_message(msg_type, True)
                    if taken_message is None:
                        break
                    taken += 1
                    handler(taken_message[0])
        return taken

    def _housekeep(self) -> bool:
        """One housekeeping pass: ``executor.spin_once(timeout_sec=0)``, step for step (rclpy's
        ``SingleThreadedExecutor``), telling whether it ran a callback (a pass that served one is soon followed by
        another: the wait that found it may have found more, which the executor hands out without waiting again).
        Another kind of executor (its own threads) runs its ``spin_once``, told as serving nothing."""
        if type(self.executor) is not SingleThreadedExecutor:
            self.executor.spin_once(timeout_sec=0)
            return False
        try:
            handler, _, _ = self.executor.wait_for_ready_callbacks(timeout_sec=0)
        except (ShutdownException, TimeoutException, ConditionReachedException):
            return False
        handler()
        if handler.exception() is not None:
            raise handler.exception()
        handler.result()
        return True

    def _next_housekeeping(self, now: int, period_ns: int) -> int:
        """When the next pass is due (monotonic ns): a period from now, or sooner when a timer of the node is due
        (its own clock's remaining time: under sim time that clock may run at another pace, the period bounds it)."""
        due = now + period_ns
        for timer in self.node.timers:
            remaining = timer.time_until_next_call()
            if remaining is not None:
                due = min(due, now + max(int(remaining), _MIN_SPACING_NS))
        return due

    def spin(self, until: Callable[[], bool] = lambda: False) -> None:
        """Run until the node's context shuts down or ``until()`` is true (checked at least every period).

        Housekeeping (one executor pass, ~0.3 ms with the estimator's ~35 entities on an unloaded machine, most of
        it rmw's wait on them, and several times that on a loaded one) is due every ``housekeeping_period`` s, or
        sooner when one of the node's timers is due; once due it waits for the inputs to be quiet for
        ``quiet_time`` s, so that it falls between sample sets instead of delaying the rest of a set that has
        begun to arrive; under inputs that are never quiet it runs anyway once overdue by ``overdue_periods``
        periods. A pass serves one ready callback, as ``spin_once``; a pass that served one is followed by others
        ``_MIN_SPACING_NS`` apart (quiet permitting) until two in a row find nothing: a service request or parameter
        change waits at most about a period, and requests that came together are served together."""
        context = self.node.context
        clock = self.node.get_clock()
        quiet_ns = int(self.quiet_time * 1e9)
        with context.handle:
            wait_set = _rclpy.WaitSet(len(self._inputs), 0, 0, 0, 0, 0, context.handle)
        next_housekeeping = time.monotonic_ns()
        quiet = True
        served_before = False
        while context.ok() and not until():
            sim_time = getattr(clock, "ros_time_is_active", False)
            period_ns = int(1e9 * (min(self.housekeeping_period, SIM_TIME_HOUSEKEEPING_S) if sim_time
                                   else self.housekeeping_period))
            overdue_ns = self.overdue_periods * period_ns
            now = time.monotonic_ns()
            due = now >= next_housekeeping
            if due and (quiet or now >= next_housekeeping + overdue_ns):
                try:
                    served = self._housekeep()
                except ExternalShutdownException:
                    return  # the context shut down between the check above and this pass: what spin waits for
                self.housekeeping_passes += 1
                now = time.monotonic_ns()
                # After a callback, the next pass soon: a burst of requests is served pass after pass, not one a
                # period. Also after the empty pass that follows one: rmw (Fast DDS) reports a service with more
                # requests waiting as ready only at every other wait (measured: 5 requests, 10 passes). After two
                # empty passes, a period later or when a timer is due.
                soon = served or served_before
                served_before = served
                next_housekeeping = now + _MIN_SPACING_NS if soon else self._next_housekeeping(now, period_ns)
                due = now >= next_housekeeping
            wait_set.clear_entities()
            for subscription, _ in self._inputs:
                wait_set.add_subscription(subscription.handle)
            wait_set.wait(quiet_ns if due else max(0, next_housekeeping - now))
            ready = wait_set.get_ready_entities("subscription")
            quiet = not ready
            if ready:
                self.messages_taken += self._drain(ready)
