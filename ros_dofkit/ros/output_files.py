"""Output that is complete or absent: files and bag folders written aside, then renamed into place.

Where you are: ``ros_dofkit.ros`` (the edge that writes what users keep: bags, summaries, plots, parameter
files). Imports only the standard library; ``ros_dofkit.ros.bag_io`` and ``ros_dofkit.replay`` use it.

Why: a command killed half-way (SIGTERM from ``timeout``/systemd/``docker stop``, SIGKILL, a crash) must not
leave a half-written file at the path the user asked for, which a later run would then refuse or a reader
would take for a result. The rule: the output path holds either a complete output or nothing.

How: an output is first written to a sibling *partial* path, ``.<name>.partial-<pid>`` in the same folder
(so on the same file system), and renamed onto its final name when complete; ``rename(2)`` of a file or a
folder on one file system is atomic. A bag folder is written as ``.<name>.partial-<pid>/<name>``, so that the
storage files inside it are named after the final folder (rosbag2 names them ``<folder>.db3``/``.mcap``), and
only that inner folder is renamed. On failure or on a signal turned into an exception (``ros_dofkit.cli``
does that for SIGTERM and SIGHUP) the caller removes the partial path. After SIGKILL nothing can run: the
partial path stays, and the next writer of that output finds it (:func:`abandoned_partials`: its pid is no
longer alive), removes it and says so in one line.

A pid that was reused by an unrelated live process hides an abandoned partial until that process ends; it is
never removed while its pid lives (it may be another run writing the same output right now).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

#: Infix of partial paths: ``.<name>.partial-<pid>``.
PARTIAL_INFIX = ".partial-"


class OutputExistsError(FileExistsError):
    """The output path exists already; outputs are never overwritten unless the caller says so."""


def partial_path(final, pid: int | None = None) -> Path:
    """The partial path of ``final`` for process ``pid`` (default: this process): ``.<name>.partial-<pid>``."""
    final = Path(final)
    return final.with_name(f".{final.name}{PARTIAL_INFIX}{os.getpid() if pid is None else pid}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def abandoned_partials(final) -> list[Path]:
    """The partial paths of ``final`` left by processes that no longer run (killed while writing it)."""
    final = Path(final)
    pattern = re.compile(re.escape(f".{final.name}{PARTIAL_INFIX}") + r"(\d+)")
    parent = final.parent if str(final.parent) else Path(".")
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and not _pid_alive(int(match.group(1))):
            found.append(entry)
    return sorted(found)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def remove_abandoned_partials(final, stream=None) -> list[Path]:
    """Remove the abandoned partial paths of ``final`` (:func:`abandoned_partials`), saying so in one line on
    ``stream`` (default stderr) when there were any; returns them."""
    found = abandoned_partials(final)
    for path in found:
        _remove(path)
    if found:
        stream = sys.stderr if stream is None else stream
        names = ", ".join(path.name for path in found)
        print(f"note: removed the unfinished output {names} of an earlier run that was killed while writing "
              f"{Path(final).name}", file=stream)
    return found


class PartialFolder:
    """A new output folder written aside: ``path`` (``.<name>.partial-<pid>/<name>``) is where to write;
    :meth:`commit` renames it onto ``final``, :meth:`discard` removes everything. A context manager that commits
    on success and discards on any exception (KeyboardInterrupt and signals included).

    Raises :class:`OutputExistsError` when ``final`` exists (at creation and again at commit)."""

    def __init__(self, final):
        self.final = Path(final)
        if self.final.exists():
            raise OutputExistsError(f"refusing to overwrite {self.final}: it exists already; choose a new output path")
        remove_abandoned_partials(self.final)
        self.partial = partial_path(self.final)
        _remove(self.partial)  # a leftover of an earlier process with our pid: that process is gone
        self.partial.mkdir(mode=0o755, parents=True)
        self.path = self.partial / self.final.name
        self._done = False

    def commit(self) -> Path:
        """Move the complete folder onto ``final`` (atomic) and remove the partial folder; returns ``final``."""
        if self._done:
            return self.final
        if self.final.exists():  # someone else wrote it meanwhile: keep theirs
            self.discard()
            raise OutputExistsError(f"refusing to overwrite {self.final}: it appeared while this output was "
                                    "written; choose a new output path")
        os.rename(self.path, self.final)
        self._done = True
        _remove(self.partial)
        return self.final

    def discard(self) -> None:
        """Remove the partial output (nothing appears at ``final``)."""
        self._done = True
        _remove(self.partial)

    def __enter__(self) -> PartialFolder:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def write_file(final, write, overwrite: bool = True) -> Path:
    """Create the file ``final`` complete or not at all: ``write(path)`` writes the content to a partial path
    beside it, which is then renamed onto ``final`` (``os.replace``). ``overwrite=False`` raises
    :class:`OutputExistsError` instead of replacing an existing file (also when it appears meanwhile)."""
    final = Path(final)
    if not overwrite and final.exists():
        raise OutputExistsError(f"refusing to overwrite {final}: it exists already")
    remove_abandoned_partials(final)
    partial = partial_path(final)
    try:
        write(partial)
        if overwrite:
            os.replace(partial, final)
        else:
            appeared = f"refusing to overwrite {final}: it appeared while it was written"
            try:
                os.link(partial, final)  # fails if final exists: no moment at which an existing file is replaced
            except FileExistsError:
                raise OutputExistsError(appeared) from None
            except OSError:  # a file system without hard links
                if final.exists():
                    raise OutputExistsError(appeared) from None
                os.replace(partial, final)
            _remove(partial)
    except BaseException:
        _remove(partial)
        raise
    return final


def write_text(final, text: str, overwrite: bool = True) -> Path:
    """:func:`write_file` of UTF-8 text."""
    return write_file(final, lambda path: Path(path).write_text(text, encoding="utf-8"), overwrite=overwrite)
