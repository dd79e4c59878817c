"""The exception every reader and writer of ``ros_dofkit.core.recordings`` raises for a bad file or table.

Where you are: ``ros_dofkit.core.recordings`` -- pure Python, no ROS. It exists so that a command can catch one type
for every recording format (x-IMU3, OpenSim/OpenSense tables, CSV, Movella DOT) and print its one-line message,
which locates the problem: file, line (1-based), and where it applies the column.
"""

from __future__ import annotations

from pathlib import Path


class RecordingError(ValueError):
    """A recording or table is missing, malformed or inconsistent; ``path``, ``line`` and ``column`` locate it
    (the message starts with them when a path is given; without one, the message itself names row and column)."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None,
                 column: str | None = None):
        self.path = None if path is None else Path(path)
        self.line = line
        self.column = column
        where = ""
        if path is not None:
            where = f"{path}" + (f", line {line}" if line is not None else "")
            where += (f", column {column!r}" if column is not None else "") + ": "
        super().__init__(where + message)
