"""Tests of ros_dofkit.cli: a signal (SIGINT, SIGTERM, SIGHUP, SIGKILL) during a real ``dofkit replay`` (or record)
never leaves half a bag at ``--out``; the stopped run says so in one line with exit status 128 + signal, no
traceback; after SIGKILL the next run finds the abandoned partial output, removes it, says so and succeeds."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ros_dofkit import cli
from ros_dofkit.ros.bag_io import read_bag
from ros_dofkit.ros.output_files import partial_path

#: The console script ``dofkit`` as the installed entry point runs it.
DOFKIT = [sys.executable, "-c", "import sys; from ros_dofkit.cli import main; sys.exit(main())"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def long_bag(tmp_path_factory):
    """A recorded bag whose replay takes a few seconds (time to be killed in the middle of writing)."""
    folder = tmp_path_factory.mktemp("long")
    bag = folder / "long"
    status = cli.main(["record", str(bag), "--duration", "30", "--imu-rate", "200", "--encoder-rate", "100"])
    assert status == 0
    return bag, folder / "long.estimator.yaml"


def start_replay(bag, config, out) -> subprocess.Popen:
    return subprocess.Popen([*DOFKIT, "replay", str(bag), "--config", str(config), "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def wait_until_writing(process: subprocess.Popen, out: Path, timeout_s: float = 120.0) -> Path:
    """The partial output of ``process`` once the storage file exists (the command is writing). Also watches ``out``
    itself, where a writer that does not write aside would put it, so that these tests fail on such a writer
    instead of waiting."""
    partial = partial_path(out, process.pid)
    deadline = time.monotonic() + timeout_s
    while not any(partial.glob("*/*.db3")) and not any(out.glob("*.db3")):
        assert process.poll() is None, f"the replay ended before it wrote: {process.communicate()}"
        assert time.monotonic() < deadline, "the replay did not start writing"
        time.sleep(0.005)
    return partial


def assert_valid_bag(path: Path) -> None:
    assert (path / "metadata.yaml").is_file()
    assert sum(1 for _ in read_bag(path, topics=["/estimated/joint_states"])) > 1000


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_during_replay_removes_the_output_and_says_so_in_one_line(tmp_path, long_bag, signum):
    bag, config = long_bag
    out = tmp_path / "estimated"
    process = start_replay(bag, config, out)
    partial = wait_until_writing(process, out)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, (stdout, stderr)
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        f"dofkit replay: interrupted by {signal.Signals(signum).name}; unfinished outputs were removed"]
    assert not out.exists() and not partial.exists()
    assert list(tmp_path.iterdir()) == []


def test_sigkill_during_replay_leaves_nothing_at_out_and_the_next_run_cleans_up(tmp_path, long_bag):
    bag, config = long_bag
    out = tmp_path / "estimated"
    process = start_replay(bag, config, out)
    partial = wait_until_writing(process, out)
    process.kill()
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert not out.exists()  # the rule: --out holds a complete bag or nothing
    assert partial.is_dir()  # nothing can run after SIGKILL: the partial output stays beside it

    again = start_replay(bag, config, out)
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, (stdout, stderr)
    notes = [line for line in stderr.splitlines() if partial.name in line]
    assert len(notes) == 1 and "removed" in notes[0] and "killed" in notes[0]
    assert not partial.exists()
    assert_valid_bag(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["estimated"]


def test_sigterm_during_record_leaves_neither_bag_nor_configuration(tmp_path):
    out = tmp_path / "recorded"
    process = subprocess.Popen([*DOFKIT, "record", str(out), "--duration", "30", "--imu-rate", "200"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    partial = wait_until_writing(process, out)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, (stdout, stderr)
    assert stderr.strip().splitlines() == [
        "dofkit record: interrupted by SIGTERM; unfinished outputs were removed"]
    assert not partial.exists()
    assert list(tmp_path.iterdir()) == []  # no bag, no recorded.estimator.yaml
