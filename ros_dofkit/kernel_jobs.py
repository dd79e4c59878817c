"""Compiling numba kernels in several processes at once, each kernel once.

Where you are: the top layer, beside precompile.py, which is its only user (``python -m ros_dofkit.precompile``, run
by ``./run``'s set-up and setup.py's install step). It imports numba and the standard library only.

Why: numba compiles a kernel in the process that first calls it and caches the machine code beside the source, one
index file per kernel. Two processes that compile the same kernel at once would both spend the time, and numba's
index update (read the index, pick a free data-file number, write both) is not atomic across processes: two
signatures of one kernel saved at once can end up with the index of one naming the data of the other.
:func:`share_compiles` makes each kernel's compile-or-load exclusive across processes (a ``flock`` on a lock file
beside the kernel's index): the first process compiles and saves, the others wait and then load its result. Worker
processes that run different programs' warm-ups (:func:`run_tasks`) therefore split the compile work between them
instead of repeating it. Locks are taken caller before callee (a kernel compiles the kernels it calls inside its
own compile), and calls between kernels form no cycle, so two processes never wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
from collections.abc import Callable, Iterable
from pathlib import Path

from numba.core.dispatcher import Dispatcher


def cached_kernels(modules: Iterable) -> list:
    """The ``cache=True`` numba dispatchers defined in ``modules`` (module objects)."""
    return [value for module in modules for value in vars(module).values()
            if isinstance(value, Dispatcher) and value._cache is not None and value.py_func.__module__ ==
            module.__name__]


def lock_path(kernel: Dispatcher) -> Path:
    """The lock file of ``kernel``'s cache entries: beside numba's index file (``<index>.nbi.lock``)."""
    return Path(kernel._cache._cache_file._index_path + ".lock")


@contextlib.contextmanager
def _exclusive(path: Path, held: set):
    """Hold an exclusive ``flock`` on ``path`` (re-entrant within this process). A lock file that cannot be made
    (cache directory not writable) means no lock: numba then cannot save its cache there either."""
    if path in held:
        yield
        return
    try:
        handle = open(path, "a")  # noqa: SIM115 (closed below, after the lock's release)
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
            fcntl.flock(handle, fcntl.LOCK_UN)


def share_compiles(kernels: Iterable[Dispatcher]) -> None:
    """Make every compile-or-load of ``kernels`` in this process exclusive across processes (see the module
    docstring). numba calls ``dispatcher.compile`` both for a call from Python and for a kernel called inside
    another one's compile, so wrapping it covers both."""
    held: set = set()
    for kernel in kernels:
        if "compile" in vars(kernel):  # already shared
            continue
        original = kernel.compile
        path = lock_path(kernel)

        def compile_exclusively(sig, original=original, path=path):
            with _exclusive(path, held):
                return original(sig)

        kernel.compile = compile_exclusively


def _run_one(task: Callable) -> str:
    task()
    return task.__name__


def run_tasks(tasks: list[Callable], jobs: int, before: Callable[[], None] | None = None) -> None:
    """Run ``tasks`` (module-level functions, no arguments) in ``jobs`` forked worker processes, in order of the list
    (a free worker takes the next task), or here, one after the other, when ``jobs`` is 1. ``before`` runs first in
    every process that runs tasks (e.g. :func:`share_compiles`). An exception of a task is raised here."""
    if jobs <= 1 or len(tasks) <= 1:
        if before is not None:
            before()
        for task in tasks:
            task()
        return
    # fork: the workers start with this process's imports (numba, the package), and no interpreter start-up hook
    # runs again (the ROS wheels' .pth re-executes a fresh interpreter).
    context = multiprocessing.get_context("fork")
    with context.Pool(min(jobs, len(tasks)), initializer=before) as pool:
        for _ in pool.imap_unordered(_run_one, tasks, chunksize=1):
            pass
