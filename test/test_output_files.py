"""Tests of ros_dofkit.ros.output_files: outputs appear complete or not at all, and the partial output of a killed
process is found, removed and reported by the next writer (never one whose process still runs)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ros_dofkit.ros.output_files import (
    OutputExistsError,
    PartialFolder,
    abandoned_partials,
    partial_path,
    write_file,
    write_text,
)


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    return int(finished.stdout)


def test_partial_path_is_a_hidden_sibling_named_after_the_output_and_the_pid(tmp_path):
    assert partial_path(tmp_path / "out", 123) == tmp_path / ".out.partial-123"
    assert partial_path(tmp_path / "summary.txt") == tmp_path / f".summary.txt.partial-{os.getpid()}"


def test_folder_is_absent_while_written_and_complete_after_commit(tmp_path):
    final = tmp_path / "bag"
    with PartialFolder(final) as output:
        assert output.path == tmp_path / f".bag.partial-{os.getpid()}" / "bag"
        output.path.mkdir()
        (output.path / "bag.db3").write_bytes(b"data")
        assert not final.exists()
    assert (final / "bag.db3").read_bytes() == b"data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"]  # no partial folder left


@pytest.mark.parametrize("exception", [RuntimeError("boom"), KeyboardInterrupt()])
def test_folder_left_by_an_exception_leaves_nothing(tmp_path, exception):
    final = tmp_path / "bag"
    with pytest.raises(type(exception)), PartialFolder(final) as output:
        output.path.mkdir()
        (output.path / "bag.db3").write_bytes(b"half")
        raise exception
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_refused_before_and_at_commit(tmp_path):
    final = tmp_path / "bag"
    final.mkdir()
    with pytest.raises(OutputExistsError, match="refusing to overwrite"):
        PartialFolder(final)
    final.rmdir()
    output = PartialFolder(final)
    output.path.mkdir()
    (final / "theirs").mkdir(parents=True)  # another writer finished first: theirs is kept
    with pytest.raises(OutputExistsError, match="appeared"):
        output.commit()
    assert [p.name for p in tmp_path.iterdir()] == ["bag"] and (final / "theirs").is_dir()


def test_abandoned_partial_of_a_dead_process_is_removed_with_a_note(tmp_path, dead_pid, capsys):
    final = tmp_path / "bag"
    abandoned = partial_path(final, dead_pid)
    (abandoned / "bag").mkdir(parents=True)
    (abandoned / "bag" / "bag.db3").write_bytes(b"half")
    unrelated = tmp_path / f".other.partial-{dead_pid}"
    unrelated.mkdir()
    assert abandoned_partials(final) == [abandoned]
    with PartialFolder(final) as output:
        output.path.mkdir()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and abandoned.name in err and "killed" in err
    assert not abandoned.exists() and unrelated.exists() and final.is_dir()


def test_partial_of_a_live_process_is_left_alone(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = partial_path(tmp_path / "bag", sleeper.pid)
        live.mkdir()
        assert abandoned_partials(tmp_path / "bag") == []
        with PartialFolder(tmp_path / "bag") as output:
            output.path.mkdir()
        assert live.is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_file_written_through_a_partial_path(tmp_path, dead_pid, capsys):
    final = tmp_path / "summary.txt"
    partial_path(final, dead_pid).write_text("half")
    write_text(final, "one\n")
    assert final.read_text() == "one\n"
    assert "killed" in capsys.readouterr().err
    write_text(final, "two\n")  # replaced whole
    assert final.read_text() == "two\n"
    with pytest.raises(OutputExistsError):
        write_text(final, "three\n", overwrite=False)
    assert final.read_text() == "two\n"

    def fails(path):
        path.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(tmp_path / "new.txt", fails)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.txt"]
    write_text(tmp_path / "new.txt", "x", overwrite=False)
    assert (tmp_path / "new.txt").read_text() == "x"
