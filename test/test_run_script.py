"""The ``./run`` entry point: usage, benchmark lookup, an idempotent set-up, and the README/CI agreement.

The set-up itself is exercised by every ``./run test`` (and from a fresh clone by ``bash .ci/run``); here the
already set-up environment must be recognised as such: a second ``./run`` installs nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "run"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def test_usage():
    result = run("help")
    assert result.returncode == 0
    for command in ("./run demo", "./run test", "./run bench NAME"):
        assert command in result.stdout
    assert run().returncode == 2


def test_unknown_benchmark_lists_the_available_ones():
    result = run("bench", "no_such_benchmark")
    assert result.returncode == 1
    assert "no benchmark 'no_such_benchmark' (expected benchmarks/no_such_benchmark.py)" in result.stderr
    available = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_"))
    assert re.search(r"available: (.*)", result.stderr).group(1).split() == available


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(), reason="runs only inside the environment ./run made"
)
def test_second_run_installs_nothing():
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    result = subprocess.run([str(RUN), "env"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            stdin=subprocess.DEVNULL, env=environment)
    assert result.returncode == 0, result.stderr
    assert "ros_dofkit setup:" not in result.stderr, "the set-up ran again although nothing changed"
    assert "tf2_msgs" in result.stdout


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["./run demo", "./run test"]
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == "exec ./run test"
