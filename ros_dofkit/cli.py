"""The ``dofkit`` command: one entry point, one subcommand per module in ``ros_dofkit.commands``.

Where you are: the top layer. ``dofkit SUBCOMMAND --help`` shows each subcommand's options; ``./run SUBCOMMAND``
does the same after setting up the project's environment.
"""

from __future__ import annotations

import argparse

from ros_dofkit import __version__, commands


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
    status = func(args)
    return 0 if status is None else int(status)
