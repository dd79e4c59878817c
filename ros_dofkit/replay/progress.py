"""A one-line progress display for long commands (demo, replay): updates in place on a terminal.

You are in ``ros_dofkit.replay``. On a terminal the line is rewritten with a carriage return; when the output
is a file or a pipe (CI logs) it prints a new line at most every ``log_period_s`` seconds instead, so logs stay
short. No third-party progress library is needed.
"""

from __future__ import annotations

import sys
import time


class ProgressLine:
    """``update(fraction, text)`` shows ``[#####.....]  42%  text``; ``close()`` ends the line."""

    def __init__(self, stream=None, width: int = 30, log_period_s: float = 5.0, enabled: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_period_s = log_period_s
        self._last_log = -float("inf")
        self._shown = False
        self._finished = False

    def render(self, fraction: float, text: str) -> str:
        fraction = min(max(fraction, 0.0), 1.0)
        filled = int(round(fraction * self.width))
        return f"[{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:3.0f}%  {text}"

    def update(self, fraction: float, text: str = "") -> None:
        if not self.enabled:
            return
        line = self.render(fraction, text)
        if self.interactive:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self._shown = True
        elif not self._finished and (time.monotonic() - self._last_log >= self.log_period_s or fraction >= 1.0):
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_log = time.monotonic()
            self._finished = fraction >= 1.0

    def close(self) -> None:
        if self.enabled and self.interactive and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
