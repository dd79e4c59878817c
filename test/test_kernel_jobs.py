"""Tests of ros_dofkit.kernel_jobs: processes that compile the same kernels at once compile each kernel once (the others
load it), checked on a tiny cached kernel in a temporary directory with the compiles counted by numba's events; and
the worker pool runs each task once, in worker processes, and raises a task's error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ros_dofkit import kernel_jobs

ROOT = Path(__file__).resolve().parents[1]

TINY_KERNEL = """
from numba import njit


@njit(cache=True)
def scale(x):
    return 2.0 * x
"""

COMPILE_ONCE = """
import pathlib, sys, time
import numpy as np
from numba.core import event
sys.path.insert(0, sys.argv[1])
import tiny
from ros_dofkit.kernel_jobs import share_compiles

share_compiles([tiny.scale])
compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        if ev.data["dispatcher"] is tiny.scale:
            compiles.append(str(ev.data["args"]))

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
go = pathlib.Path(sys.argv[1]) / "go"
while not go.exists():
    time.sleep(0.005)
assert tiny.scale(1.5) == 3.0 and tiny.scale(np.ones(2)).tolist() == [2.0, 2.0]
print(len(compiles))
"""


def test_processes_compiling_at_once_compile_each_kernel_once(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY_KERNEL)
    processes = [subprocess.Popen([sys.executable, "-c", COMPILE_ONCE, str(tmp_path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(3)]
    (tmp_path / "go").touch()
    outcomes = [process.communicate(timeout=300) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in outcomes]
    assert sum(int(out) for out, _ in outcomes) == 2  # two signatures, each compiled by one process
    (tmp_path / "go").touch()
    again = subprocess.run([sys.executable, "-c", COMPILE_ONCE, str(tmp_path)], capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert again.stdout.strip() == "0", again.stderr  # both signatures load from the cache the others wrote


def write_marker(name: str) -> None:
    Path(os.environ["MARKERS"], f"{name}-{os.getpid()}").touch()


def task_a():
    write_marker("a")


def task_b():
    write_marker("b")


def task_c():
    write_marker("c")


def failing_task():
    raise RuntimeError("this warm-up failed")


def test_run_tasks_runs_every_task_once_in_worker_processes_and_raises_their_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKERS", str(tmp_path))
    kernel_jobs.run_tasks([task_a, task_b, task_c], jobs=2)
    markers = sorted(path.name.split("-") for path in tmp_path.iterdir())
    assert [name for name, _ in markers] == ["a", "b", "c"]
    assert str(os.getpid()) not in {pid for _, pid in markers}  # in workers, not here
    with pytest.raises(RuntimeError, match="this warm-up failed"):
        kernel_jobs.run_tasks([task_a, failing_task], jobs=2)
    kernel_jobs.run_tasks([task_a], jobs=2)  # one task: here, no pool
    assert (tmp_path / f"a-{os.getpid()}").exists()
