"""numba's kernel cache: whether it is cold, and filling it ahead of the first start.

Where you are: the top layer (beside cli.py), run as ``python -m ros_dofkit.precompile`` by ``./run``'s set-up and
by the package's install step (setup.py), so that the first ``ros2 launch`` or ``dofkit replay`` after an install
starts without compiling; and imported by the estimator node (nodes/common.run_node) and ``dofkit replay`` to say
so when they are about to compile. It imports numba and the core (no ROS package: replay stays ROS-free).

The kernels are ``@njit(cache=True)`` functions of :data:`KERNEL_MODULES`; numba keeps each one's machine code in
``__pycache__`` beside its source, keyed on the source file's stamp, so a fresh install (or a changed source)
starts cold. numba compiles a kernel called from another one into its caller, so which kernels get a cache entry
of their own depends on the path taken: "warm" is therefore recorded per program, beside numba's files, keyed on
the kernel sources' stamps (:func:`mark_warm`). Filling the cache = running what the programs run: one estimator
cycle per shipped configuration (what the node's start-up does) and one short offline replay of a recorded bag (what
``dofkit replay`` does).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from ros_dofkit import cli
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.ros.parameters import (
    estimator_config_from_parameters,
    load_parameter_file,
    model_specs_from_parameters,
)

#: Modules holding ``@njit(cache=True)`` kernels (test/test_precompile.py checks the list against the sources).
KERNEL_MODULES = (
    "ros_dofkit.core.spatial",
    "ros_dofkit.core.multibody.compiled",
    "ros_dofkit.core.assembly.kernels",
    "ros_dofkit.core.estimator.rules",
    "ros_dofkit.core.estimator.offline",
    "ros_dofkit.core.estimator.heading",  # issue 19.2 (compiled on first use: no shipped config enables it)
)
#: Seconds to compile what each program compiles at its first start with a cold cache, between what was measured
#: on a quiet machine and on a loaded 2-core one (README, "First start": node 47-91 s, replay of a 2 s bag 103 s
#: loaded): the online estimator's kernels, and the offline replay's.
COMPILE_SECONDS = {"estimator": 60, "replay": 70}
#: The shipped estimator configurations, as laid out in the source tree (config/ beside the package).
SOURCE_CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"


def kernel_modules() -> list:
    return [importlib.import_module(name) for name in KERNEL_MODULES]


def _stamp_path(program: str) -> Path:
    # Beside numba's own cache files (the kernels' __pycache__, or numba's fallback when that is not writable).
    kernel = next(value for value in vars(kernel_modules()[0]).values()
                  if isinstance(value, Dispatcher) and value._cache is not None)
    return Path(kernel._cache._cache_path) / f"ros_dofkit_{program}_kernels.stamp"


def _sources_stamp() -> str:
    """What numba keys its cache on (source files and their stamps), plus the numba and Python versions."""
    parts = [numba.__version__, sys.version]
    for module in kernel_modules():
        stat = os.stat(module.__file__)
        parts.append(f"{module.__file__} {stat.st_mtime} {stat.st_size}")
    return "\n".join(parts)


def first_start_note(program: str) -> str | None:
    """``"compiling kernels (first start, about N s)"`` when ``program`` ("estimator" or "replay") has not run
    with the current kernel sources yet (see :func:`mark_warm`), else None."""
    try:
        warm = _stamp_path(program).read_text() == _sources_stamp()
    except OSError:
        warm = False
    return None if warm else f"compiling kernels (first start, about {COMPILE_SECONDS[program]} s)"


def mark_warm(program: str) -> None:
    """Record that ``program``'s kernels are compiled for the current sources (after its first start). A cache
    directory that cannot be written only means the note is shown again."""
    with contextlib.suppress(OSError):
        _stamp_path(program).write_text(_sources_stamp())


def warm_up(plant, config) -> None:
    """One cycle of a scratch Estimator of ``config`` at rest: compiles (or loads) every kernel the online
    estimator runs, so that the first real input is served at full speed."""
    scratch = Estimator(plant, config)
    for imu in config.imus:
        scratch.add_imu(imu.name, 0.0, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    scratch.add_joint_state(list(scratch.joint_state_names), np.zeros(len(scratch.joint_state_names)), stamp=0.0)
    scratch.step(0.0)


def warm_up_config(path) -> None:
    """:func:`warm_up` for the estimator parameter file ``path`` (config/*.yaml)."""
    values = load_parameter_file(path)
    plant = build_plant(model_specs_from_parameters(values))
    instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    warm_up(plant, estimator_config_from_parameters(values, instances))


def replay_once() -> None:
    """Record a short bag of the demo arm and replay it offline, as ``dofkit record`` / ``dofkit replay`` do."""
    with tempfile.TemporaryDirectory(prefix="dofkit_precompile_") as folder, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        bag = Path(folder) / "bag"
        for arguments in (["record", str(bag), "--duration", "1", "--noise", "none"],
                          ["replay", str(bag), "--config", f"{bag}.estimator.yaml", "--out", str(Path(folder) / "out"),
                           "--quiet"]):
            status = cli.main(arguments)
            if status != 0:
                raise RuntimeError(f"dofkit {' '.join(arguments)} failed with status {status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ros_dofkit.precompile", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", type=Path,
                        help=f"estimator parameter files to warm up (default: {SOURCE_CONFIG_DIR}/*.yaml)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    if first_start_note("estimator") is None and first_start_note("replay") is None:
        print("ros_dofkit kernels: cache up to date", file=sys.stderr)
        return 0
    print("ros_dofkit kernels: compiling (once per install, so that the first start is quick)", file=sys.stderr)
    for path in args.configs or sorted(SOURCE_CONFIG_DIR.glob("*.yaml")):
        warm_up_config(path)
    mark_warm("estimator")
    replay_once()
    mark_warm("replay")
    print(f"ros_dofkit kernels: compiled in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
