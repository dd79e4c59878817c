"""The ``dofkit`` command: one entry point, one subcommand per module in ``ros_dofkit.commands``.

Where you are: the top layer. ``dofkit SUBCOMMAND --help`` shows each subcommand's options; ``./run SUBCOMMAND``
does the same after setting up the project's environment. Imports only ``ros_dofkit.commands`` (which imports
the work modules when a subcommand runs).

Signals: SIGINT, SIGTERM and SIGHUP (Ctrl-C, ``timeout``, systemd, ``docker stop``, a closed terminal) all stop a
subcommand the same way: a :class:`Interrupted` (a KeyboardInterrupt) is raised where the subcommand is, so
that its outputs are removed on the way out (they are written aside and renamed only when complete:
``ros_dofkit.ros.output_files``), then ``dofkit`` prints one line and exits with 128 + the signal number
(130 for SIGINT), without a traceback. Further signals while it unwinds are ignored, so that the clean-up runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from ros_dofkit import __version__, commands

#: Signals that stop a subcommand with clean-up (SIGHUP does not exist on every platform).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """A subcommand was stopped by ``signum``; a KeyboardInterrupt, so that code that ends cleanly on Ctrl-C ends
    so on SIGTERM and SIGHUP too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum, frame) -> None:
    # Once: what the subcommand does while it unwinds (removing partial outputs) is not interrupted again.
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def _command_name(args: argparse.Namespace) -> str:
    words = ["dofkit", args.command]
    if getattr(args, "import_format", None):
        words.append(args.import_format)
    return " ".join(words)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="dofkit",
        description="ros_dofkit: joint-configuration estimation from encoders and IMUs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in commands.load_subcommand_modules():
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the chosen subcommand and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        raise RuntimeError(
            f"subcommand '{args.command}' registered no function: its register() must call set_defaults(func=...)"
        )
    # Handlers can be set only in the main thread (a test may call main() from another).
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, _stop) for signum in STOP_SIGNALS} if main_thread else {}
    try:
        status = func(args)
    except KeyboardInterrupt as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        print(f"{_command_name(args)}: interrupted by {signal.Signals(signum).name}; unfinished outputs were "
              "removed", file=sys.stderr)
        return 128 + int(signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    return 0 if status is None else int(status)
