"""numba's kernel cache: whether it is cold, and filling it ahead of each program's first start.

Where you are: the top layer (beside cli.py), run as ``python -m ros_dofkit.precompile [GROUP ...]`` by ``./run``'s
set-up (the groups of the command being set up) and by the package's install step (setup.py: every group), so that
the first ``ros2 launch``, ``dofkit demo`` or ``dofkit replay`` after an install starts without compiling; and
imported by the estimator node (nodes/common.run_node, nodes/estimator) and ``dofkit replay`` to say so when they are
about to compile. It imports numba, the core and the ROS-free replay helpers (no ROS package: replay stays
ROS-free); kernel_jobs.py runs the compile in parallel processes.

The kernels are ``@njit(cache=True)`` functions of :data:`KERNEL_MODULES`; numba keeps each one's machine code in
``__pycache__`` beside its source, keyed on the source file's stamp, so a fresh install (or a changed source)
starts cold. Which kernels a program compiles depends on the path it takes (a kernel called only inside other
kernels gets no cache entry of its own), so they are compiled by running what the programs run, per
:data:`GROUPS` (the streaming estimator of the node and the demo, the batch estimator of ``dofkit replay``, the
simulator of ``dofkit demo`` / ``dofkit record``), and "warm" is recorded per group, beside numba's files, keyed
on the kernel sources' stamps (:func:`mark_warm`). A group's warm-up is split into tasks that compile disjoint
top-level kernels, so that worker processes share the work (README, "First start").
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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from ros_dofkit import cli
from ros_dofkit.core.estimator import rules
from ros_dofkit.core.estimator import setup as problem
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.odometry import SolveCovarianceModel, base_odometries
from ros_dofkit.core.estimator.offline import kinematics_and_velocities, sensor_errors
from ros_dofkit.core.estimator.robot import build_plant
from ros_dofkit.core.spatial import matrix_to_quat
from ros_dofkit.kernel_jobs import cached_kernels, run_tasks, share_compiles
from ros_dofkit.replay.demo_robot import build_demo_robot
from ros_dofkit.replay.overlap import usable_cores
from ros_dofkit.ros.live_cdr import TfMessageEncoder
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
    "ros_dofkit.core.estimator.inputs",
    "ros_dofkit.core.estimator.odometry",
    "ros_dofkit.core.estimator.odometry_input",
    "ros_dofkit.core.estimator.heading",  # issue 19.2 (compiled on first use: no shipped config enables it)
    "ros_dofkit.core.estimator.stream",
    "ros_dofkit.ros.live_cdr",
)
#: The shipped estimator configurations, as laid out in the source tree (config/ beside the package).
SOURCE_CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
#: Estimator parameter files the streaming warm-up runs (set by :func:`main`; the workers inherit it).
_configs: list = []


def kernel_modules() -> list:
    return [importlib.import_module(name) for name in KERNEL_MODULES]


# ---------------------------------------------------------------------------------------------- warm-up tasks
# Each task compiles (or loads) a set of top-level kernels by running what a program runs, and is a module-level
# function without arguments so that a worker process can run it. Tasks of one group overlap as little as the
# public APIs allow: a kernel two tasks reach is compiled by the first and loaded by the other (kernel_jobs).

def warm_up(plant, config) -> None:
    """Two cycles of a scratch Estimator of ``config`` at rest (the first assembles, the next ones track), its
    receive-clock rule (bad inputs and clock jumps take it) and the odometry covariances' Jacobians: compiles (or
    loads) every kernel the online estimator runs, so that the first real input is served at full speed. The first
    IMU's sample is also offered as read-only arrays, as the in-process demo and streaming replay pass them (views
    of recorded arrays; numba compiles read-only arrays apart)."""
    scratch = Estimator(plant, config)
    names = list(scratch.joint_state_names)
    rest, still = np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
    for stamp in (0.0, 0.01):
        for imu in config.imus:
            scratch.add_imu(imu.name, stamp, rest, still)
        scratch.add_joint_state(names, np.zeros(len(names)), stamp=stamp)
        scratch.step(stamp)
    if config.imus:
        frozen_rest, frozen_still = rest.copy(), still.copy()
        frozen_rest.flags.writeable = frozen_still.flags.writeable = False
        scratch.add_imu(config.imus[0].name, 0.02, frozen_rest, frozen_still)
        scratch.add_imu(config.imus[0].name, 0.025, np.zeros(4), still)  # rejected: parse_imu says why
    scratch.observe_clock(0.0)
    model = SolveCovarianceModel(scratch, 1.0, 1.0)
    model.jacobians(plant.default_positions(), config.imu_names)
    if config.odometry is not None:  # the odometry input's rule
        scratch.process_odometry(0.03, np.zeros(3), [1.0, 0.0, 0.0, 0.0])
    if base_odometries(plant):  # the node's Odometry covariance, compiled
        model.covariances(scratch.step(0.03))
    # Every IMU stale: a cycle the compiled one (core.estimator.stream) leaves to the batch path, whose velocity
    # priors then call the plant's position difference from Python.
    scratch.step(0.04 + 2.0 * config.stale_timeout_s)
    if config.imus:  # the node's offer of an Imu message's values (rules.offer_imu_reading), read-only as it has them
        reading = np.zeros(rules.READING_SIZE)
        reading[3] = 1.0
        reading.flags.writeable = False
        scratch.process_imu_reading(config.imus[0].name, 0.05 + 2.0 * config.stale_timeout_s, reading)
    _warm_tf_writer(plant)


def _warm_tf_writer(plant) -> None:
    """The node's TF writer (``live_cdr.TfMessageEncoder.encode_poses``), for poses as given and as a cycle's result
    holds them (read-only, which numba compiles apart)."""
    poses = plant.calc_body_poses(plant.default_positions())
    encoder, body = TfMessageEncoder(["world"], ["body"]), np.zeros(1, dtype=np.int64)
    encoder.encode_poses(0, 0, poses, body, body)
    poses.flags.writeable = False
    encoder.encode_poses(0, 0, poses, body, body)


def warm_up_parameters(values: dict) -> None:
    """:func:`warm_up` for the estimator node's parameters ``values`` (flat names, as in a parameter file)."""
    plant = build_plant(model_specs_from_parameters(values))
    instances = [plant.get_model_instance_name(i) for i in range(1, plant.num_model_instances())]
    warm_up(plant, estimator_config_from_parameters(values, instances))


def warm_up_config(path, overrides=None) -> None:
    """:func:`warm_up` for the estimator parameter file ``path`` (config/*.yaml), with ``overrides`` (parameter
    values) applied."""
    warm_up_parameters({**load_parameter_file(path), **(overrides or {})})


def warm_streaming() -> None:
    """The node's start-up: :func:`warm_up` per configuration (the cycle rules offer_imu, offer_joint_state,
    take_cycle, then what the solve tasks below compile too)."""
    for path in _configs or sorted(SOURCE_CONFIG_DIR.glob("*.yaml")):
        warm_up_config(path)
    if not _configs:  # the odometry input (13.2), which the shipped files show commented out, switched on
        warm_up_config(SOURCE_CONFIG_DIR / "mobile_manipulator.yaml", {"odometry_topic": "odom"})


def warm_demo() -> None:
    """The demo's node start-up: :func:`warm_up` of the demo robot's node parameters (``dofkit demo`` starts the
    node on them). A fixed-base arm without odometry: the floating-base covariances and the odometry rule, which
    only other robots' configurations run, stay out of the demo's compile (:func:`warm_streaming` has them)."""
    warm_up_parameters(build_demo_robot().parameters)


class DemoSolver(NamedTuple):
    """The demo robot's estimator setup and solver, built as the Estimator builds them (mountings known)."""

    plant: object
    setup: problem.EstimatorSetup
    osensors: object
    assembler: object
    n_sensors: int


def _demo_solver() -> DemoSolver:
    robot = build_demo_robot()
    setup = problem.build(robot.plant, robot.estimator_config)
    R_BS = {imu.name: np.array(imu.mounting) for imu in robot.estimator_config.imus}
    osensors, assembler, names = problem.build_solver(setup, robot.estimator_config, R_BS)
    return DemoSolver(robot.plant, setup, osensors, assembler, len(names))


def _demo_solver_at_rest() -> DemoSolver:
    demo = _demo_solver()
    demo.assembler.set_positions(demo.setup.q_default)
    demo.osensors.move_all_observations(np.repeat(np.eye(3)[None], demo.n_sensors, axis=0))
    return demo


def warm_solver() -> None:
    """A cycle's solve from rest (the assembler's assemble: kernels.track_one), as the estimator's first cycle does:
    the steps and the solve itself; it loads the residuals and Jacobians :func:`warm_residuals` compiles meanwhile in
    another worker. (Compiling the steps from here first gained ~2 CPU s in that split, but made a lone process's
    residuals compile ~7 CPU s slower: measured, not understood.)"""
    _demo_solver_at_rest().assembler.assemble()


def warm_residuals() -> None:
    """A frame's residuals and Jacobians (kernels.make_tracker, gather_frame, evaluate_residuals,
    evaluate_jacobians: the solve's largest leaves) through the Assembler's calc_residuals, which passes the
    solver's argument types, and the tracking's every-body kinematics (kernels.complete_kinematics, through the
    Assembler's warm_body_poses): a worker compiles them while another compiles the rest of the solve."""
    assembler = _demo_solver_at_rest().assembler
    assembler.calc_residuals(need_jacobian=True)
    assembler.warm_body_poses()


def warm_velocities() -> None:
    """A cycle's poses, gyro velocities and sensor errors (offline.kinematics_and_velocities, sensor_errors) with
    the estimator's argument types, at rest."""
    plant, setup = _demo_solver()[:2]
    n_imu, C = len(setup.imu_names), 1
    nv, nb = plant.num_velocities(), plant.num_bodies()
    Q = np.repeat(setup.q_default[None], C, axis=0)
    R_BS = np.repeat(np.eye(3)[None], n_imu, axis=0)
    X_WB = np.empty((C, nb, 4, 4))
    kinematics_and_velocities(plant.tree.kernel_arguments(), Q, np.zeros(C, bool), np.zeros((C, nv)),
                              np.ones((C, n_imu), bool), np.zeros((C, n_imu, 3)), setup.body_index, R_BS,
                              setup.free_v, 1e-6, X_WB, np.empty((C, nv)), np.zeros((C, nv), bool))
    sensor_errors(X_WB, np.ones((C, n_imu), bool), setup.body_index, R_BS, np.eye(3), np.zeros((C, n_imu, 3, 3)),
                  np.empty((C, n_imu)))


def warm_tracking() -> None:
    """Warm-started tracking over frames in one compiled call (track_frames), as an offline replay's chunks."""
    demo = _demo_solver()
    T, nq, nb = 2, demo.plant.num_positions(), demo.plant.num_bodies()
    observations = np.repeat(np.eye(3)[None, None], T, axis=0).repeat(demo.n_sensors, axis=1)
    demo.assembler.set_positions(demo.setup.q_default)
    demo.assembler.track_sequence(np.arange(T) * 0.01, observations, positions=np.full((T, nq), np.nan),
                                  return_info=True, body_poses=np.empty((T, nb, 4, 4)))


def warm_batch() -> None:
    """Record a short bag of the demo arm and replay it offline, as ``dofkit record`` / ``dofkit replay`` do (the
    batch rules' schedule, then the solve)."""
    with tempfile.TemporaryDirectory(prefix="dofkit_precompile_") as folder, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        bag = Path(folder) / "bag"
        for arguments in (["record", str(bag), "--duration", "1", "--noise", "none"],
                          ["replay", str(bag), "--config", f"{bag}.estimator.yaml", "--out", str(Path(folder) / "out"),
                           "--quiet"]):
            status = cli.main(arguments)
            if status != 0:
                raise RuntimeError(f"dofkit {' '.join(arguments)} failed with status {status}")


def warm_quaternions() -> None:
    """Rotation matrices to quaternions (spatial's kernel): the simulator's IMU samples, the node's TF and
    odometry, replay's output messages."""
    matrix_to_quat(np.eye(3))


# ---------------------------------------------------------------------------------------------------- groups
class KernelGroup(NamedTuple):
    """The kernels one kind of program runs, compiled together before its first start.

    programs: the commands that run them (node executables, ``dofkit`` subcommands).
    tasks: warm-ups that compile them (parallel workers take them in :data:`TASK_ORDER`).
    compile_seconds: the first-start note's estimate of a program compiling them alone (README, "First start").
    """

    programs: tuple
    tasks: tuple
    compile_seconds: int


#: The solve's tasks: every estimating program runs them (the demo robot's solver: the argument types are the same
#: for every robot).
_SOLVE = (warm_residuals, warm_velocities, warm_solver, warm_tracking, warm_quaternions)
#: Kernel groups by name (also the names of their warm stamps). ``programs``: the ``./run`` commands (node
#: executables and ``dofkit`` subcommands) that run the group's kernels; ``./run`` compiles a command's groups at its
#: set-up (test/test_run_script.py checks its map against this one). ``demo`` is the part of ``estimator`` that the
#: demo's node runs (its own robot), so that the first ``./run demo`` compiles no other robot's kernels.
GROUPS = {
    "demo": KernelGroup(("demo",), (warm_demo, *_SOLVE), 35),
    "estimator": KernelGroup(("estimator",), (warm_streaming, *_SOLVE), 60),
    "replay": KernelGroup(("replay",), (warm_batch, *_SOLVE), 70),
    "simulator": KernelGroup(("demo", "record"), (warm_quaternions,), 2),
}
#: All tasks, in the order the workers take them (a free worker takes the next): first those that wait for no other
#: task's kernels (the batch replay; the solve's residuals, the velocities, then the rest of the solve, which by
#: then loads the residuals), then those that step an estimator or track (they wait for the solve's compile).
TASK_ORDER = (warm_batch, warm_residuals, warm_velocities, warm_solver, warm_streaming, warm_demo, warm_tracking,
              warm_quaternions)


def group_tasks(groups) -> list[Callable]:
    """The tasks of ``groups`` (names), each once, in :data:`TASK_ORDER`."""
    wanted = {task for name in groups for task in GROUPS[name].tasks}
    return [task for task in TASK_ORDER if task in wanted]


# ---------------------------------------------------------------------------------------------------- stamps
def _stamp_dir() -> Path:
    # Beside numba's own cache files (the kernels' __pycache__, or numba's fallback when that is not writable).
    return Path(cached_kernels(kernel_modules()[:1])[0]._cache._cache_path)


def _stamp_path(group: str, kind: str = "kernels") -> Path:
    return _stamp_dir() / f"ros_dofkit_{group}_{kind}.stamp"


def _is_current(path: Path) -> bool:
    try:
        return path.read_text() == _sources_stamp()
    except OSError:
        return False


def _sources_stamp() -> str:
    """What numba keys its cache on (source files and their stamps), plus the numba and Python versions."""
    parts = [numba.__version__, sys.version]
    for module in kernel_modules():
        stat = os.stat(module.__file__)
        parts.append(f"{module.__file__} {stat.st_mtime} {stat.st_size}")
    return "\n".join(parts)


def first_start_note(program: str) -> str | None:
    """``"compiling kernels (first start, about N s)"`` when the kernel group ``program`` (a :data:`GROUPS` name:
    "estimator", "replay", "simulator") has not been compiled with the current kernel sources yet (see
    :func:`mark_warm`), else None."""
    if _is_current(_stamp_path(program)):
        return None
    return f"compiling kernels (first start, about {GROUPS[program].compile_seconds} s)"


def mark_warm(program: str, warmed_up: bool = False) -> None:
    """Record that the kernel group ``program`` is compiled for the current sources: after a program's first start
    (which compiled what its own configuration runs), or, ``warmed_up``, after the group's whole warm-up, which
    :func:`main` alone records (a node started on one robot, e.g. the demo's, does not spare ``main`` the group's
    other robots' kernels). A cache directory that cannot be written only means the note is shown again."""
    with contextlib.suppress(OSError):
        _stamp_path(program).write_text(_sources_stamp())
        if warmed_up:
            _stamp_path(program, "warmed_up").write_text(_sources_stamp())


def purge_stale_kernels(stamp_dir: Path, module_caches: list, current: str) -> int:
    """Delete the kernel modules' numba cache files when a stamp in ``stamp_dir`` records other kernel sources than
    ``current`` (:func:`_sources_stamp`), and those stamps with them; how many cache files went.

    Why: numba keys a kernel's cache entry on its own source file's stamp only, while the machine code it saves also
    holds the kernels it calls, inlined or linked, from other modules (``stream.stream_cycle`` holds the solver of
    ``assembly/kernels.py``; ``rules.py`` inlines helpers of ``inputs.py``). After a change to a callee's module
    alone (a ``git pull``, an upgrade over an old install, an edit), numba would load the caller's old code: silently
    the old behaviour. A stamp that differs from the current sources says such a change may have happened since the
    caches were written, so every kernel module's entries go and the groups compile afresh. ``module_caches``: (the
    module file's stem, the directory numba caches its kernels in) per kernel module; the lock files of
    :mod:`ros_dofkit.kernel_jobs` stay (another process may hold one)."""
    stamps = sorted(stamp_dir.glob("ros_dofkit_*.stamp"))
    if all(path.read_text() == current for path in stamps):
        return 0
    removed = 0
    for stem, directory in module_caches:
        for path in [*directory.glob(f"{stem}.*.nbi"), *directory.glob(f"{stem}.*.nbc")]:
            path.unlink(missing_ok=True)
            removed += 1
    for path in stamps:
        path.unlink(missing_ok=True)
    return removed


def _module_caches() -> list:
    """(file stem, numba cache directory) of every kernel module (the directory of its first cached kernel)."""
    return [(Path(module.__file__).stem, Path(kernels[0]._cache._cache_path))
            for module in kernel_modules() if (kernels := cached_kernels([module]))]


def groups_to_compile(groups: list) -> list:
    """The ``groups`` (names) whose whole warm-up has not run with the current kernel sources (:func:`mark_warm`)."""
    return [name for name in groups if not _is_current(_stamp_path(name, "warmed_up"))]


def _share_compiles() -> None:
    share_compiles(cached_kernels(kernel_modules()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ros_dofkit.precompile", description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", metavar="GROUP",
                        help=f"kernel groups to compile: {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--config", action="append", type=Path, default=[], metavar="FILE",
                        help=f"estimator parameter file to warm up (repeatable; default: {SOURCE_CONFIG_DIR}/*.yaml)")
    parser.add_argument("--jobs", type=int, default=usable_cores(),
                        help="worker processes (default: the cores this process may use)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown kernel group(s) {', '.join(unknown)}; expected some of: {', '.join(GROUPS)}")
    start = time.monotonic()
    with contextlib.suppress(OSError):  # a cache directory that cannot be written holds no cache to go stale
        removed = purge_stale_kernels(_stamp_dir(), _module_caches(), _sources_stamp())
        if removed:
            print(f"ros_dofkit kernels: the kernel sources changed since the cache was written; {removed} cache files "
                  "removed (a kernel's cache entry holds other modules' kernels too)", file=sys.stderr)
    cold = groups_to_compile(args.groups or list(GROUPS))
    if not cold:
        print("ros_dofkit kernels: cache up to date", file=sys.stderr)
        return 0
    tasks = group_tasks(cold)
    jobs = max(1, min(args.jobs, len(tasks)))
    print(f"ros_dofkit kernels: compiling {', '.join(cold)} ({jobs} processes; once per install, so that the first "
          "start is quick)", file=sys.stderr)
    _configs[:] = args.config
    run_tasks(tasks, jobs, before=_share_compiles)
    for name in cold:
        mark_warm(name, warmed_up=True)
    print(f"ros_dofkit kernels: compiled in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
