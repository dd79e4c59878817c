"""Tests of ros_dofkit.precompile: which modules hold kernels, that the kernel groups' warm-ups reach every kernel the
package calls from Python and leave nothing for their programs to compile, and the cold-cache note of a first start.

The note is checked on a copy of the package in a temporary directory, where numba's cache and ros_dofkit's
stamps start empty, as on a fresh install: the note is given until the program marks its kernels warm, and again
once a kernel source changes (numba recompiles then too). The warm-up checks run in subprocesses on the checkout's
kernel cache (filled by ``./run``'s set-up; they compile what is missing), and compare the kernels loaded after a
group's warm-up with those loaded after its program ran.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ros_dofkit import precompile
from ros_dofkit.core import spatial

ROOT = Path(__file__).resolve().parents[1]

NOTE = """
import sys
from ros_dofkit import precompile
assert precompile.__file__.startswith(sys.argv[1]), precompile.__file__
for action in sys.argv[2:]:
    if action == "mark":
        precompile.mark_warm("estimator")
    elif action == "warmed_up":
        precompile.mark_warm("estimator", warmed_up=True)
    elif action == "to_compile":
        print(precompile.groups_to_compile(["demo", "estimator"]))
    else:
        print(precompile.first_start_note(action))
"""


def test_kernel_modules_are_the_modules_with_cached_kernels():
    with_kernels = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "ros_dofkit").rglob("*.py")
        if re.search(r"^@(numba\.)?n?jit\(.*cache=True", path.read_text(encoding="utf-8"), re.MULTILINE)
    }
    assert set(precompile.KERNEL_MODULES) == with_kernels


def note_in_copy(copy: Path, *actions: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", NOTE, str(copy), *actions], cwd=copy,
                            env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_note_is_given_until_the_program_is_warm_and_again_after_a_source_change(tmp_path):
    shutil.copytree(ROOT / "ros_dofkit", tmp_path / "ros_dofkit", ignore=shutil.ignore_patterns("__pycache__"))
    def cold(group):
        return f"compiling kernels (first start, about {precompile.GROUPS[group].compile_seconds} s)"

    assert note_in_copy(tmp_path, "estimator", "replay", "simulator", "mark", "estimator", "replay") == [
        cold("estimator"), cold("replay"), cold("simulator"), "None", cold("replay")]
    kernels = tmp_path / "ros_dofkit" / "core" / "assembly" / "kernels.py"
    os.utime(kernels, (kernels.stat().st_atime, kernels.stat().st_mtime + 10))
    assert note_in_copy(tmp_path, "estimator") == [cold("estimator")]


def test_a_programs_first_start_does_not_spare_the_groups_warm_up(tmp_path):
    """A node marks its group warm after compiling what its own robot runs (the demo's node: the demo arm's); only
    the group's whole warm-up (precompile's main) spares the next ``python -m ros_dofkit.precompile`` the group."""
    shutil.copytree(ROOT / "ros_dofkit", tmp_path / "ros_dofkit", ignore=shutil.ignore_patterns("__pycache__"))
    assert note_in_copy(tmp_path, "to_compile", "mark", "to_compile", "estimator", "warmed_up", "to_compile",
                        "estimator") == [
        "['demo', 'estimator']", "['demo', 'estimator']", "None", "['demo']", "None"]


def test_group_tasks_are_each_taken_once_in_task_order():
    assert precompile.group_tasks(["simulator"]) == [precompile.warm_quaternions]
    everything = precompile.group_tasks(precompile.GROUPS)
    assert everything == list(precompile.TASK_ORDER)  # every task belongs to a group
    assert precompile.group_tasks(["demo", "simulator"]) == [
        precompile.warm_residuals, precompile.warm_velocities, precompile.warm_solver, precompile.warm_demo,
        precompile.warm_tracking, precompile.warm_quaternions]
    # the demo's group is the estimator's for one robot: every configuration's start-up replaces the demo arm's
    assert set(precompile.GROUPS["estimator"].tasks) - set(precompile.GROUPS["demo"].tasks) == {
        precompile.warm_streaming}
    assert set(precompile.GROUPS["demo"].tasks) - set(precompile.GROUPS["estimator"].tasks) == {precompile.warm_demo}


# ------------------------------------------------------------------------------------------- kernels and groups
def kernel_names() -> dict:
    """{module: {kernel function names}} of the cache=True kernels of KERNEL_MODULES, read from the sources."""
    names = {}
    for module in precompile.KERNEL_MODULES:
        tree = ast.parse((ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8"))
        names[module] = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                         and any("cache=True" in ast.unparse(d) for d in node.decorator_list)}
    return names


def is_compiled(function: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in function.decorator_list)


def kernels_called_from_python() -> dict:
    """{"module.kernel": [(file:line, enclosing function), ...]} for every call of a kernel from Python code of the
    package (outside compiled functions): ``name(...)`` of a kernel imported by name or defined in the module, or
    ``alias.name(...)`` of an imported kernel module, or either passed to ``compiled_entry`` (whose entry point the
    caller then calls)."""
    kernels = kernel_names()
    calls: dict = {}
    for path in sorted((ROOT / "ros_dofkit").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        by_name = {name: f"{module}.{name}" for name in kernels.get(module, ())}
        by_alias = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in kernels:
                        by_alias[alias.asname or alias.name] = full
                    elif alias.name in kernels.get(node.module, ()):
                        by_name[alias.asname or alias.name] = full
        functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)]
        compiled = {id(n) for f in functions if is_compiled(f) for n in ast.walk(f)}
        # The innermost function around each node (outer functions first, so inner ones overwrite).
        enclosing = {id(n): f.name for f in sorted(functions, key=lambda f: f.lineno) for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or id(node) in compiled:
                continue
            func, target = node.func, None
            if isinstance(func, ast.Name) and func.id == "compiled_entry" and node.args:
                func = node.args[0]  # compiled_entry(kernel, args): the kernel's machine code, called from Python
            if isinstance(func, ast.Name):
                target = by_name.get(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in by_alias:
                owner = by_alias[func.value.id]
                target = f"{owner}.{func.attr}" if func.attr in kernels[owner] else None
            if target is not None:
                site = (f"{path.relative_to(ROOT)}:{node.lineno}", enclosing.get(id(node), "<module>"))
                calls.setdefault(target, []).append(site)
    return calls


#: Functions whose kernel calls no program makes, with why: only the Assembler's inspection API (calc_residuals,
#: calc_current_goal, calc_current_error_norm) and its Python reference backend (``backend="reference"``, what the
#: tests compare the compiled solver with) reach them; the estimator, and so every program, solves through
#: ``solve_one`` / ``track_frames``. ``Estimator.ready`` belongs to the manual API (add_*, ready, step): the node and
#: the streaming replay offer with process_imu / process_joint_state, whose rules run the cycles themselves.
LIBRARY_ONLY = {
    ("ros_dofkit/core/estimator/estimator.py", "ready"),
    ("ros_dofkit/core/assembly/assembler.py", "_residuals_compiled"),
    ("ros_dofkit/core/assembly/assembler.py", "_error_norm"),
    ("ros_dofkit/core/assembly/assembler.py", "_solve_reference"),
    # the dense reference of the odometry covariance (what test_estimator_odometry checks the compiled one with)
    ("ros_dofkit/core/estimator/odometry.py", "least_squares_covariance"),
}
#: Kernel modules of opt-in features that no shipped configuration enables, so no group warms them: their kernels
#: compile at the first start of a configuration that enables them (KERNEL_MODULES notes why).
OPT_IN = {"ros_dofkit.core.estimator.heading"}
#: Single kernels of opt-in paths: the batch validation of odometry inputs runs only when a replayed bag carries the
#: odometry topic of a configuration that enables it (the streaming odometry rule is warmed: precompile.warm_streaming);
#: a floating base's yaw from odometry (odometry_yaw on a floating base) only with that configuration.
OPT_IN_KERNELS = {"ros_dofkit.core.estimator.odometry_input.validate_odometries",
                  "ros_dofkit.core.estimator.odometry_input.turn_headings"}


def test_the_call_finder_sees_kernels_called_from_python():
    calls = kernels_called_from_python()
    assert "ros_dofkit.core.estimator.rules.offer_imu" in calls  # compiled_entry(rules.offer_imu, ...) in estimator.py
    assert "ros_dofkit.core.estimator.rules.validate_imu" in calls  # rules.validate_imu(...) in estimator.py
    assert "ros_dofkit.core.spatial.matrix_to_quat_into" in calls  # a module's own kernel
    assert "ros_dofkit.core.estimator.offline.kinematics_and_velocities" in calls  # imported by name
    assert "ros_dofkit.core.multibody.compiled.forward_kinematics" in calls
    assert ("ros_dofkit/core/assembly/assembler.py", "_solve_reference") in {
        (site.split(":")[0], function) for site, function in calls["ros_dofkit.core.assembly.kernels.clip_to_bounds"]}


LOADED = """
import json, sys
from numba.core.dispatcher import Dispatcher
from ros_dofkit import precompile
from ros_dofkit.kernel_jobs import cached_kernels


def loaded():
    kernels = cached_kernels(precompile.kernel_modules())
    return sorted(f"{k.py_func.__module__}.{k.py_func.__name__} {sig}" for k in kernels for sig in k.overloads)


for name in json.loads(sys.argv[1]):
    for task in precompile.GROUPS[name].tasks:
        task()
after_warm_up = loaded()
exec(sys.argv[2])
print(json.dumps({"warm_up": after_warm_up, "program": sorted(set(loaded()) - set(after_warm_up))}))
"""


def loaded_kernels(groups: list, program: str = "", cwd: Path = ROOT) -> dict:
    """Runs the warm-up tasks of ``groups``, then the Python code ``program``, in a fresh process; returns the
    kernels (``module.name signature``) loaded by the warm-up, and those the program loaded after it."""
    result = subprocess.run([sys.executable, "-c", LOADED, json.dumps(groups), program], cwd=cwd,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_every_kernel_called_from_python_is_reached_by_a_group_warm_up():
    reached = {entry.split()[0] for entry in loaded_kernels(list(precompile.GROUPS))["warm_up"]}
    called = {kernel: [site for site in sites if (site[0].split(":")[0], site[1]) not in LIBRARY_ONLY]
              for kernel, sites in kernels_called_from_python().items()}
    missing = {kernel: sites for kernel, sites in called.items()
               if sites and kernel not in reached and kernel.rpartition(".")[0] not in OPT_IN
               and kernel not in OPT_IN_KERNELS}
    assert not missing, f"kernels called from Python that no kernel group compiles ahead: {missing}"


@pytest.fixture(scope="module")
def recorded_bag(tmp_path_factory):
    """A 1.5 s demo-arm bag with the default noise, in mcap (precompile's own replay uses no noise and sqlite3)."""
    bag = tmp_path_factory.mktemp("bag") / "arm"
    arguments = ["record", str(bag), "--duration", "1.5", "--storage", "mcap"]
    record = f"import sys; from ros_dofkit import cli; sys.exit(cli.main({arguments!r}))"
    subprocess.run([sys.executable, "-c", record], check=True, capture_output=True, timeout=600, cwd=ROOT)
    return bag


DEMO = ("from ros_dofkit.replay.demo import DemoOptions, run_demo_in_process\n"
        "run_demo_in_process(DemoOptions(duration_s=1.5, seed=3))")
PROGRAMS = {
    "demo": DEMO,
    "estimator": DEMO,
    "simulator": "from ros_dofkit import cli\n"
                 "import tempfile, pathlib\n"
                 "assert cli.main(['record', str(pathlib.Path(tempfile.mkdtemp()) / 'bag'), '--duration', '1']) == 0",
    "replay": "from ros_dofkit import cli\n"
              "import tempfile, pathlib\n"
              "bag, out = {bag!r}, str(pathlib.Path(tempfile.mkdtemp()) / 'out')\n"
              "assert cli.main(['replay', bag, '--config', bag + '.estimator.yaml', '--out', out, '--quiet']) == 0",
}


@pytest.mark.parametrize("group", sorted(PROGRAMS))
def test_after_its_group_warm_up_a_program_loads_no_other_kernel(group, recorded_bag):
    """The streaming estimator on a simulated stream with noise and dropouts (what the node and the demo run), a
    recording (the simulator), a replay of a noisy mcap bag: after their group's warm-up, none of them loads or
    compiles a kernel (or signature) the warm-up did not, so a pre-compiled install starts without compiling."""
    program = PROGRAMS[group].replace("{bag!r}", repr(str(recorded_bag)))
    assert loaded_kernels([group], program)["program"] == []


def test_a_stamp_of_other_sources_removes_every_kernel_modules_cache_files(tmp_path):
    """numba keys a cache entry on its own file only, but the entry holds the kernels it calls from other modules:
    once a stamp records other sources, every kernel module's entries go (and the stamps), the lock files and other
    files stay; with every stamp current nothing goes."""
    stamps, assembly, estimator = tmp_path / "core", tmp_path / "assembly", tmp_path / "estimator"
    for directory in (stamps, assembly, estimator):
        directory.mkdir()
    caches = [assembly / "kernels.track_frames-10.py311.nbi", assembly / "kernels.track_frames-10.py311.1.nbc",
              estimator / "stream.stream_cycle-40.py311.nbi", estimator / "stream.stream_cycle-40.py311.2.nbc"]
    kept = [assembly / "kernels.track_frames-10.py311.nbi.lock", assembly / "kernels.cpython-311.pyc",
            estimator / "rules.offer_imu-5.py311.nbi"]  # rules is not among this call's modules
    for path in caches + kept:
        path.write_text("x")
    modules = [("kernels", assembly), ("stream", estimator)]
    (stamps / "ros_dofkit_estimator_kernels.stamp").write_text("sources A")
    (stamps / "ros_dofkit_replay_warmed_up.stamp").write_text("sources A")

    assert precompile.purge_stale_kernels(stamps, modules, "sources A") == 0
    assert all(path.exists() for path in caches + kept)

    (stamps / "ros_dofkit_replay_warmed_up.stamp").write_text("sources B")
    assert precompile.purge_stale_kernels(stamps, modules, "sources A") == len(caches)
    assert not any(path.exists() for path in caches)
    assert all(path.exists() for path in kept)
    assert not list(stamps.glob("*.stamp"))
    assert precompile.purge_stale_kernels(stamps, modules, "sources A") == 0


def test_each_kernel_modules_cache_directory_is_where_numba_saves_its_entries():
    """The purge reads one directory per kernel module: the one numba saves that module's entries in (a kernel of
    spatial.py, called here, has its index there afterwards)."""
    caches = dict(precompile._module_caches())
    assert set(caches) == {name.rsplit(".", 1)[1] for name in precompile.KERNEL_MODULES}
    spatial.matrix_to_quat(np.eye(3)[None].repeat(40, axis=0))
    assert list(caches["spatial"].glob("spatial.matrix_to_quat_into-*.nbi"))
