"""Subcommands of the ``dofkit`` command, one module each.

A subcommand module exposes ``register(subparsers)``, which adds its parser (with its own help) and sets
``func`` (called with the parsed arguments; returns an exit status or None). It holds argument parsing and output,
no math, and imports heavy modules inside ``func`` so that ``dofkit --help`` stays fast.
To add a subcommand, write the module and list it in :data:`SUBCOMMAND_MODULES`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Modules of ``ros_dofkit.commands`` that ``dofkit`` offers, in the order ``dofkit --help`` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = ("env", "import_ximu3", "demo", "record", "replay", "play", "export")


def load_subcommand_modules() -> list[ModuleType]:
    """Import every module of :data:`SUBCOMMAND_MODULES`; raise TypeError for one without ``register``."""
    modules = []
    for name in SUBCOMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        if not callable(getattr(module, "register", None)):
            raise TypeError(f"subcommand module {module.__name__} must define register(subparsers); it does not")
        modules.append(module)
    return modules


def add_simulation_arguments(parser) -> None:
    """The simulator options that ``dofkit demo`` and ``dofkit record`` share: motion length, noise, seed, rates."""
    from ros_dofkit.replay.demo import DEFAULT_DURATION_S, DEFAULT_ENCODER_RATE_HZ, DEFAULT_IMU_RATE_HZ

    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, metavar="SECONDS",
                        help=f"seconds of simulated motion (default {DEFAULT_DURATION_S:g})")
    parser.add_argument("--noise", default="default", choices=["none", "low", "default", "high"],
                        help="sensor noise preset (default: default)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the motion and of the sensor noise (default 0)")
    parser.add_argument("--imu-rate", type=float, default=DEFAULT_IMU_RATE_HZ, metavar="HZ",
                        help=f"IMU sample rate (default {DEFAULT_IMU_RATE_HZ:g})")
    parser.add_argument("--encoder-rate", type=float, default=DEFAULT_ENCODER_RATE_HZ, metavar="HZ",
                        help=f"encoder joint-state rate (default {DEFAULT_ENCODER_RATE_HZ:g})")
