"""A replay's reading and writing beside its estimation, on a machine with more than one core.

Where you are: ``ros_dofkit.replay``; imports only the standard library (``threading``, ``queue``, ``os``); used by
``replay.bag_replay``. It exists because a batched replay spends about a third of its time in each of reading +
decoding, estimating and encoding + writing (benchmarks/README.md, replay), and the estimator's compiled kernels
(``rules.schedule``, ``kernels.track_frames``, ``offline.kinematics_and_velocities``, ``offline.sensor_errors``)
and SQLite release the GIL: window k+1 is read and window k-1 written while window k is estimated.

Each stage stays one thread that handles the windows in order, so the output bag is byte for byte the sequential
one. A stage's error is raised in the caller's thread at the point where the sequential replay would have raised
it (the window that failed), and :meth:`Prefetch.close` / :meth:`InOrderCalls.stop` end the threads before the
caller removes its partial output. With one usable core (:func:`usable_cores`, e.g. a process pinned to a CPU), the
caller runs the stages in its own thread, as before.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator

#: A sentinel that ends a stage's queue.
_DONE = object()


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _Failure:
    """An exception raised in a stage's thread, carried to the caller's."""

    def __init__(self, error: BaseException):
        self.error = error


class Prefetch:
    """Iterates ``items`` (a generator, run entirely in a thread of its own: created, advanced and closed there) one
    item ahead of the consumer. Iterating a Prefetch gives the same items in the same order, and raises the
    generator's exception where the generator raised it. :meth:`close` (also at the end of a ``with`` block) stops
    the thread early."""

    def __init__(self, items: Callable[[], Iterator]):
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items,), name="replay-read", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        """Hand ``item`` on, unless the consumer stopped (False)."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, items) -> None:
        generator = None
        try:
            generator = items()
            for item in generator:
                if not self._put(item):
                    return
            self._put(_DONE)
        except BaseException as error:  # noqa: BLE001 -- carried to the consumer's thread and raised there
            self._put(_Failure(error))
        finally:
            if generator is not None:
                generator.close()

    def __iter__(self) -> Iterator:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def close(self) -> None:
        """Stop the thread (the generator is closed in it) and wait for it."""
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class InOrderCalls:
    """``function(*arguments)`` for each :meth:`submit`, in submission order, in a thread of its own, at most one
    call waiting behind the running one (memory stays bounded). An exception of a call is raised by the next
    :meth:`submit` or by :meth:`finish`; the calls after it are skipped."""

    def __init__(self, function: Callable):
        self._function = function
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._failure: BaseException | None = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, name="replay-write", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            arguments = self._queue.get()
            if arguments is _DONE:
                return
            if self._failure is None and not self._cancelled:
                try:
                    self._function(*arguments)
                except BaseException as error:  # noqa: BLE001 -- carried to the caller's thread and raised there
                    self._failure = error

    def _raise_failure(self) -> None:
        if self._failure is not None:
            self.stop()
            raise self._failure

    def submit(self, *arguments) -> None:
        """Queue ``function(*arguments)`` (waits while one call is already waiting)."""
        self._raise_failure()
        self._queue.put(arguments)

    def finish(self) -> None:
        """Wait for every submitted call; raise the first exception of one."""
        self.stop()
        self._raise_failure()

    def stop(self, cancel: bool = False) -> None:
        """End the thread once the submitted calls are done (with ``cancel``: once the running one is; the waiting
        one is skipped); the caller may then close or remove what they wrote."""
        self._cancelled = self._cancelled or cancel
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
