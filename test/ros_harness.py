"""Harness for tests that run real ROS 2: package executables as subprocesses, a probe node, waits with deadlines.

Where you are: test/, imported by tests and by the ``ros_node`` / ``ros_processes`` fixtures of conftest.py
(which also isolates the session: ROS_DOMAIN_ID, ROS_LOG_DIR, fast-discovery DDS profile).

* :class:`RosProcess` starts a console script of ros_dofkit (found in this interpreter's bin/, on PATH, or in
  an ament prefix's lib/ros_dofkit) with a copy of ``os.environ`` — the ROS wheels need the library path their
  bootstrap put there — in its own process group, its output in a log file; :meth:`RosProcess.stop` always
  ends it (SIGINT, then SIGTERM, then SIGKILL).
* :class:`RosTestNode` is an rclpy node with its own context and executor in the test process; every wait
  (publisher/subscription matches, N messages, a condition) spins it until a deadline and raises
  :class:`HarnessTimeout` saying what it waited for.

Nothing here sleeps for a fixed time to "let discovery happen": tests wait for the event they need.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PACKAGE_NAME = "ros_dofkit"
DEFAULT_TIMEOUT = 10.0

_live_processes: set[RosProcess] = set()


class HarnessTimeout(AssertionError):
    """A wait with a deadline ran out; the message says what was awaited and what was seen."""


def find_executable(name: str | Path) -> Path:
    """Path of the package executable ``name``: pip/venv bin/, then PATH, then ``<ament prefix>/lib/ros_dofkit``.

    A path (a Path, or a string with a "/") is taken as it is.
    """
    if isinstance(name, Path) or "/" in name:
        path = Path(name)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise FileNotFoundError(f"executable {path} does not exist or is not executable")
    candidates = [Path(sys.executable).parent / name]
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    try:
        from ament_index_python.packages import get_package_prefix

        candidates.append(Path(get_package_prefix(PACKAGE_NAME)) / "lib" / PACKAGE_NAME / name)
    except (ImportError, LookupError, OSError, ValueError):
        pass  # not installed in an ament prefix (the pip/venv layout): the other candidates apply
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(
        f"executable '{name}' of {PACKAGE_NAME} not found; looked in {', '.join(str(c) for c in candidates)}. "
        "Set up the environment with ./run (pip) or build and source the workspace (colcon)."
    )


class RosProcess:
    """One running package executable; output captured in ``log_path``. Use :meth:`stop` (or a ProcessGroup)."""

    def __init__(self, executable: str | Path, args: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.name = Path(executable).name
        self.args = [str(arg) for arg in args]
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = os.environ.copy()
        environment.update(env or {})
        path = find_executable(executable)
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.popen = subprocess.Popen(
            [str(path), *self.args],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _live_processes.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def describe(self) -> str:
        return f"{self.name} {' '.join(self.args)} (pid {self.pid})".replace("  ", " ")

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def wait_for_output(self, pattern: str, timeout: float = DEFAULT_TIMEOUT) -> re.Match:
        """Wait until the process's output matches the regular expression ``pattern``; return the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            running = self.is_running()  # read before the output: a process may print and exit in between
            match = regex.search(self.output())
            if match:
                return match
            if not running:
                raise HarnessTimeout(
                    f"{self.describe()} exited with status {self.popen.returncode} before printing /{pattern}/; "
                    f"its output:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise HarnessTimeout(
                    f"{self.describe()} did not print /{pattern}/ within {timeout} s; its output:\n{self.output()}"
                )
            time.sleep(0.02)

    def wait_for_exit(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Wait until the process ends by itself; return its exit status."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessTimeout(
                f"{self.describe()} still running after {timeout} s; its output:\n{self.output()}"
            ) from None

    def stop(self, timeout: float = 5.0) -> int:
        """End the process (and anything it started): SIGINT, then SIGTERM, then SIGKILL. Return its exit status."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        returncode = self.popen.wait()
        self._log.close()
        _live_processes.discard(self)
        return returncode


class ProcessGroup:
    """Starts package executables for one test and stops all of them, however the test ends."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.processes: list[RosProcess] = []

    def start(self, executable: str | Path, *args: str, env: dict[str, str] | None = None) -> RosProcess:
        """Start ``executable`` (a package executable's name, or a path) with ``args``; ``env`` adds variables."""
        log_path = self.log_dir / f"{len(self.processes):02d}_{Path(executable).name}.log"
        process = RosProcess(executable, list(args), log_path, env=env)
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            process.stop()


@atexit.register
def _stop_leftover_processes() -> None:
    for process in list(_live_processes):
        process.stop(timeout=1.0)


def assert_one_tf_tree(pairs, root: str) -> None:
    """What a tf2 buffer builds from ``(parent, child)`` frame pairs is one tree under ``root``: every frame has
    exactly one parent, no transform is a self-transform, and every frame reaches ``root``."""
    pairs = set(pairs)
    children = [child for _, child in pairs]
    assert len(children) == len(set(children)), f"a frame with two parents in {sorted(pairs)}"
    assert all(parent != child for parent, child in pairs), f"a self-transform in {sorted(pairs)}"
    parent_of = {child: parent for parent, child in pairs}
    for frame in parent_of:
        seen = set()
        while frame in parent_of:
            assert frame not in seen, f"a loop through {frame}"
            seen.add(frame)
            frame = parent_of[frame]
        assert frame == root, f"{sorted(seen)} do not reach {root!r}"


class MessageCollector:
    """Messages received on one subscription, in arrival order."""

    def __init__(self):
        self.messages: list = []
        self.subscription = None

    def __len__(self) -> int:
        return len(self.messages)

    def _append(self, message) -> None:
        self.messages.append(message)


class RosTestNode:
    """An rclpy node in the test process with its own context and executor; waits spin it until a deadline."""

    def __init__(self, name: str = "dofkit_test_probe"):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._extra_nodes = []

    def create_node(self, name: str, **node_kwargs):
        """Another node in this context, spun by the same executor and destroyed by :meth:`close`."""
        import rclpy

        node = rclpy.create_node(name, context=self.context, **node_kwargs)
        self.executor.add_node(node)
        self._extra_nodes.append(node)
        return node

    def create_publisher(self, msg_type, topic: str, qos=10):
        return self.node.create_publisher(msg_type, topic, qos)

    def collect(self, msg_type, topic: str, qos=10) -> MessageCollector:
        """Subscribe to ``topic`` and keep every message in the returned collector."""
        collector = MessageCollector()
        collector.subscription = self.node.create_subscription(msg_type, topic, collector._append, qos)
        return collector

    def spin_until(
        self,
        condition: Callable[[], bool],
        description: str | Callable[[], str],
        timeout: float = DEFAULT_TIMEOUT,
        every: Callable[[], None] | None = None,
        period: float = 0.1,
    ) -> None:
        """Spin until ``condition()`` holds, calling ``every()`` each ``period`` s; HarnessTimeout at the deadline."""
        start = time.monotonic()
        deadline = start + timeout
        next_call = start
        while not condition():
            now = time.monotonic()
            if now > deadline:
                awaited = description() if callable(description) else description
                raise HarnessTimeout(f"timed out after {timeout} s waiting for {awaited}")
            if every is not None and now >= next_call:
                every()
                next_call = now + period
            self.executor.spin_once(timeout_sec=min(0.02, max(deadline - now, 0.0)))

    def wait_for_subscriptions(self, publisher, count: int = 1, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until ``count`` subscriptions have matched ``publisher`` (QoS-compatible, discovered)."""
        self.spin_until(
            lambda: publisher.get_subscription_count() >= count,
            lambda: f"{count} subscription(s) to match the publisher on {publisher.topic_name} "
            f"(matched: {publisher.get_subscription_count()})",
            timeout,
        )

    def wait_for_publishers(self, collector: MessageCollector, count: int = 1, timeout: float = DEFAULT_TIMEOUT):
        """Wait until ``count`` publishers have matched the collector's subscription."""
        subscription = collector.subscription
        self.spin_until(
            lambda: subscription.get_publisher_count() >= count,
            lambda: f"{count} publisher(s) to match the subscription on {subscription.topic_name} "
            f"(matched: {subscription.get_publisher_count()})",
            timeout,
        )

    def wait_for_messages(
        self,
        collector: MessageCollector,
        count: int,
        timeout: float = DEFAULT_TIMEOUT,
        every: Callable[[], None] | None = None,
        period: float = 0.1,
    ) -> list:
        """Wait until the collector holds ``count`` messages (optionally calling ``every()``, e.g. to publish)."""
        self.spin_until(
            lambda: len(collector) >= count,
            lambda: f"{count} message(s) on {collector.subscription.topic_name} (received {len(collector)})",
            timeout,
            every=every,
            period=period,
        )
        return collector.messages

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        for node in [*self._extra_nodes, self.node]:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
