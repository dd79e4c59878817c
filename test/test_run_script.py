"""The ``./run`` entry point: usage, benchmark lookup, the interpreter choice, an idempotent and layered set-up
(runtime commands install only the runtime; ``./run test`` adds the test stack in place), node executables, and the
README/CI agreement.

The set-up itself is exercised by every ``./run test`` (and from a fresh clone by ``bash .ci/run``); here the
already set-up environment must be recognised as such: a second ``./run`` installs nothing. The interpreter choice
is tested on the script's own functions (sourcing ``run`` defines them without running anything) with stand-in
interpreters: tiny shell scripts that answer the version probe, so nothing is installed; the layering on a copy of
the set-up's inputs whose venv interpreter logs the pip calls it is asked to make.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_package_metadata import setup_py_console_scripts

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "run"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def test_usage():
    result = run("help")
    assert result.returncode == 0
    for command in ("./run demo", "./run test", "./run bench NAME"):
        assert command in result.stdout
    assert run().returncode == 2


def test_unknown_benchmark_lists_the_available_ones():
    result = run("bench", "no_such_benchmark")
    assert result.returncode == 1
    assert "no benchmark 'no_such_benchmark' (expected benchmarks/no_such_benchmark.py)" in result.stderr
    available = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_"))
    assert re.search(r"available: (.*)", result.stderr).group(1).split() == available


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(), reason="runs only inside the environment ./run made"
)
def test_second_run_installs_nothing():
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    result = subprocess.run([str(RUN), "env"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            stdin=subprocess.DEVNULL, env=environment)
    assert result.returncode == 0, result.stderr
    assert "ros_dofkit setup:" not in result.stderr, "the set-up ran again although nothing changed"
    assert "tf2_msgs" in result.stdout


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["./run demo", "./run test"]
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == "exec ./run test"


def write_fake_python(path: Path, version: str | None) -> Path:
    """A stand-in interpreter answering ``run``'s probe with VERSION; None makes one that fails like a pyenv shim of
    a version that is not selected."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if version is None:
        path.write_text("#!/bin/sh\necho \"pyenv: $0: command not found\" >&2\nexit 127\n")
    else:
        path.write_text(f'#!/bin/sh\necho "{version} $0"\n')
    path.chmod(0o755)
    return path


def choose_python(checkout: Path, path_dir: Path, dofkit_python: str | None = None) -> subprocess.CompletedProcess:
    """Runs ``wheel_python`` of a copy of ``run`` placed in CHECKOUT (its .venv is CHECKOUT/.venv) with PATH set to
    PATH_DIR only, so no interpreter of this machine can be picked up."""
    script = checkout / "run"
    script.write_text(RUN.read_text())
    environment = {key: value for key, value in os.environ.items() if key != "DOFKIT_PYTHON"}
    if dofkit_python is not None:
        environment["DOFKIT_PYTHON"] = dofkit_python
    return subprocess.run(["bash", "-c", 'source "$1"; PATH="$2"; wheel_python', "choose", str(script), str(path_dir)],
                          capture_output=True, text=True, timeout=30, env=environment, stdin=subprocess.DEVNULL)


def chosen(result: subprocess.CompletedProcess) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    version, interpreter = result.stdout.split()
    return version, Path(interpreter).name


def test_python3_is_taken_when_supported(tmp_path):
    bin_dir = tmp_path / "bin"
    write_fake_python(bin_dir / "python3", "3.12")
    write_fake_python(bin_dir / "python3.13", "3.13")
    assert chosen(choose_python(tmp_path, bin_dir)) == ("3.12", "python3")


@pytest.mark.parametrize("python3_version", ["3.10", "3.14", None])
def test_newest_supported_python3_x_when_python3_is_not_usable(tmp_path, python3_version):
    bin_dir = tmp_path / "bin"
    write_fake_python(bin_dir / "python3", python3_version)
    write_fake_python(bin_dir / "python3.11", "3.11")
    write_fake_python(bin_dir / "python3.12", "3.12")
    assert chosen(choose_python(tmp_path, bin_dir)) == ("3.12", "python3.12")
    write_fake_python(bin_dir / "python3.13", "3.13")
    assert chosen(choose_python(tmp_path, bin_dir)) == ("3.13", "python3.13")
    write_fake_python(bin_dir / "python3.13", None)  # a shim that does not run is skipped, not chosen
    assert chosen(choose_python(tmp_path, bin_dir)) == ("3.12", "python3.12")


def test_dofkit_python_wins_and_must_be_supported(tmp_path):
    bin_dir = tmp_path / "bin"
    write_fake_python(bin_dir / "python3", "3.11")
    write_fake_python(tmp_path / ".venv" / "bin" / "python", "3.12")
    override = write_fake_python(tmp_path / "elsewhere" / "python-override", "3.13")
    assert chosen(choose_python(tmp_path, bin_dir, str(override))) == ("3.13", "python-override")

    old = write_fake_python(tmp_path / "elsewhere" / "python-old", "3.10")
    result = choose_python(tmp_path, bin_dir, str(old))
    assert result.returncode != 0
    assert f"DOFKIT_PYTHON={old} is Python 3.10; expected one of: 3.11 3.12 3.13" in result.stderr

    result = choose_python(tmp_path, bin_dir, str(tmp_path / "missing"))
    assert result.returncode != 0
    assert "does not run as a Python interpreter" in result.stderr


def test_existing_venv_keeps_its_python_over_python3(tmp_path):
    bin_dir = tmp_path / "bin"
    write_fake_python(bin_dir / "python3", "3.11")
    write_fake_python(tmp_path / ".venv" / "bin" / "python", "3.13")
    assert chosen(choose_python(tmp_path, bin_dir)) == ("3.13", "python")


def test_no_supported_python_says_what_to_do(tmp_path):
    bin_dir = tmp_path / "bin"
    write_fake_python(bin_dir / "python3", "3.9")
    write_fake_python(bin_dir / "python3.10", "3.10")
    result = choose_python(tmp_path, bin_dir)
    assert result.returncode != 0
    assert "no Python 3.11 3.12 3.13 found" in result.stderr
    assert "DOFKIT_PYTHON" in result.stderr


def test_setup_stamp_depends_on_the_python_version():
    def stamp(mode: str, version: str) -> str:
        result = subprocess.run(["bash", "-c", 'source "$1"; setup_hash "$2" "$3"', "stamp", str(RUN), mode, version],
                                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        assert re.fullmatch(r"[0-9a-f]{64}\n", result.stdout)
        return result.stdout

    assert stamp("wheels", "3.12") == stamp("wheels", "3.12")
    stamps = {stamp("wheels", "3.11"), stamp("wheels", "3.12"), stamp("wheels", "3.13"), stamp("system", "3.12")}
    assert len(stamps) == 4


FAKE_PYTHON = """#!/bin/sh
# Stand-in venv interpreter: answers run's version probe, logs pip and pytest calls, succeeds at everything else.
case "$*" in
  "-S -c "*) echo "3.11 $0" ;;
  *"-m pip "*|*"-m pytest"*|*"-m ros_dofkit.precompile"*) echo "python $*" >>"$FAKE_LOG" ;;
esac
exit 0
"""


@pytest.fixture
def fake_checkout(tmp_path):
    """A copy of the set-up's inputs with a venv of stand-ins: its python logs pip calls instead of installing,
    tools/build_tf2_msgs.sh and tools/launch_stack.sh log instead of building, cmake/c++/make are stubs.
    Returns (checkout, env, log)."""
    checkout = tmp_path / "checkout"
    for name in ("run", "setup.py", "setup.cfg", "package.xml"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text((ROOT / name).read_text())
    (checkout / "run").chmod(0o755)
    (checkout / "requirements").mkdir()
    for path in (ROOT / "requirements").glob("*.txt"):
        (checkout / "requirements" / path.name).write_text(path.read_text())
    for relative in ("tools/tf2_msgs/package.xml", "tools/tf2_msgs/CMakeLists.txt", "tools/tf2_msgs/msg/TFMessage.msg",
                     "ros_dofkit/core/spatial.py", "ros_dofkit/core/dof_mask.py"):
        (checkout / relative).parent.mkdir(parents=True, exist_ok=True)
        (checkout / relative).write_text((ROOT / relative).read_text())
    log = tmp_path / "calls.log"
    stubs = {
        checkout / ".venv" / "bin" / "python": FAKE_PYTHON,
        checkout / ".venv" / "bin" / "dofkit": '#!/bin/sh\necho "dofkit $*" >>"$FAKE_LOG"\n',
        checkout / ".venv" / "bin" / "estimator": '#!/bin/sh\necho "estimator $*" >>"$FAKE_LOG"\n',
        checkout / ".venv" / "bin" / "ruff": '#!/bin/sh\necho "ruff $*" >>"$FAKE_LOG"\n',
        checkout / "tools" / "build_tf2_msgs.sh": '#!/bin/sh\necho "build_tf2_msgs" >>"$FAKE_LOG"\n',
        checkout / "tools" / "launch_stack.sh": '#!/bin/sh\necho "launch_stack" >>"$FAKE_LOG"\n',
        **{tmp_path / "stubs" / tool: "#!/bin/sh\nexit 0\n" for tool in ("cmake", "c++", "make")},
    }
    for path, text in stubs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    (checkout / ".venv" / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    environment = {key: value for key, value in os.environ.items() if key not in ("ROS_DISTRO", "VIRTUAL_ENV")}
    environment.update(FAKE_LOG=str(log), DOFKIT_PYTHON=str(checkout / ".venv" / "bin" / "python"),
                       PATH=f"{tmp_path / 'stubs'}:{environment['PATH']}")
    return checkout, environment, log


def calls(checkout: Path, environment: dict, log: Path, *args: str) -> list[str]:
    """Runs ./run ARGS in the fake checkout; returns the logged calls it made (the log is emptied)."""
    log.write_text("")
    result = subprocess.run([str(checkout / "run"), *args], capture_output=True, text=True, timeout=60,
                            env=environment, stdin=subprocess.DEVNULL, cwd=checkout)
    assert result.returncode == 0, result.stderr
    return [line.replace(str(checkout), "ROOT") for line in log.read_text().splitlines()]


def precompiled(logged: list[str]) -> list[list[str]]:
    """The kernel groups of each ``python -m ros_dofkit.precompile`` call logged."""
    call = "-m ros_dofkit.precompile"
    return [line.split(call, 1)[1].split() for line in logged if call in line]


def pip_requirements(logged: list[str]) -> list[str]:
    return [word.removeprefix("ROOT/requirements/") for line in logged if " -m pip " in line
            for word in line.split() if word.startswith("ROOT/requirements/")]


def test_runtime_commands_never_install_the_test_stack_and_test_adds_it_in_place(fake_checkout):
    checkout, environment, log = fake_checkout
    first = calls(checkout, environment, log, "demo", "--quiet")
    assert pip_requirements(first) == ["runtime.txt", "ros.txt"]
    assert "build_tf2_msgs" in first and first[-1] == "dofkit demo --quiet"
    assert calls(checkout, environment, log, "env") == ["dofkit env"]  # set up: nothing installed
    assert calls(checkout, environment, log, "estimator", "--ros-args", "-p", "a:=1") == [
        "python -m ros_dofkit.precompile estimator", "estimator --ros-args -p a:=1"]  # a node executable runs directly

    upgraded = calls(checkout, environment, log, "test", "-q")
    assert pip_requirements(upgraded) == ["test.txt"]  # the runtime venv is upgraded in place
    assert upgraded[-2:] == ["ruff check .", "python -m pytest -q"]
    assert pip_requirements(calls(checkout, environment, log, "test")) == []
    assert pip_requirements(calls(checkout, environment, log, "env")) == []

    with (checkout / "requirements" / "test.txt").open("a") as handle:
        handle.write("# a changed test pin\n")
    assert pip_requirements(calls(checkout, environment, log, "env")) == []  # runtime commands ignore test.txt
    assert pip_requirements(calls(checkout, environment, log, "test")) == ["test.txt"]

    with (checkout / "requirements" / "runtime.txt").open("a") as handle:
        handle.write("# a changed runtime pin\n")
    assert pip_requirements(calls(checkout, environment, log, "env")) == ["runtime.txt", "ros.txt"]
    assert pip_requirements(calls(checkout, environment, log, "test")) == ["test.txt"]  # re-layered


def test_every_node_executable_of_setup_py_runs_through_run():
    scripts = {entry.split("=")[0].strip() for entry in setup_py_console_scripts()}
    result = subprocess.run(["bash", "-c", 'source "$1"; echo "$node_executables"', "nodes", str(RUN)],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert set(result.stdout.split()) == scripts - {"dofkit"}


def test_system_ros_mode_installs_runtime_pins_without_numpy_and_no_ros_wheel(fake_checkout):
    """With a sourced ROS 2 (ROS_DISTRO set, a python3 that imports rclpy), the venv uses the system's ROS and NumPy
    (--system-site-packages): no ROS wheel, no tf2_msgs build, the runtime pins minus numpy; the test stack still
    comes only with ./run test."""
    checkout, environment, log = fake_checkout
    stubs = Path(environment["PATH"].split(":")[0])
    (stubs / "python3").write_text(FAKE_PYTHON)  # answers `import rclpy` with success, like a sourced Jazzy
    (stubs / "python3").chmod(0o755)
    (checkout / ".venv" / "pyvenv.cfg").write_text("include-system-site-packages = true\n")
    environment = {**environment, "ROS_DISTRO": "jazzy"}
    first = calls(checkout, environment, log, "env")
    assert pip_requirements(first) == [] and "build_tf2_msgs" not in first
    (filtered,) = [word for line in first if " -m pip " in line for word in line.split()
                   if word.endswith(".runtime-without-numpy.txt")]
    pins = (Path(filtered.replace("ROOT", str(checkout)))).read_text().splitlines()
    runtime = (checkout / "requirements" / "runtime.txt").read_text().splitlines()
    assert pins == [line for line in runtime if not line.startswith("numpy==")] and len(pins) == len(runtime) - 1
    assert pip_requirements(calls(checkout, environment, log, "test")) == ["test.txt"]


def test_each_command_compiles_its_kernel_groups_once_before_it_starts(fake_checkout):
    """A command's kernel groups (ros_dofkit/precompile.py) are compiled at its set-up, once: a stamp per group is
    keyed on the set-up and on the stat of the sources holding kernels (what numba keys its cache on)."""
    checkout, environment, log = fake_checkout
    first = calls(checkout, environment, log, "demo", "--quiet")
    assert precompiled(first) == [["demo", "simulator"]] and first[-1] == "dofkit demo --quiet"
    assert precompiled(calls(checkout, environment, log, "demo")) == []
    assert precompiled(calls(checkout, environment, log, "estimator")) == [["estimator"]]  # every robot
    assert precompiled(calls(checkout, environment, log, "estimator")) == []
    assert precompiled(calls(checkout, environment, log, "env")) == []  # runs no kernel
    assert precompiled(calls(checkout, environment, log, "replay", "bag")) == [["replay"]]
    assert precompiled(calls(checkout, environment, log, "test")) == []  # every group is compiled by now

    def touch(relative: str) -> None:
        path = checkout / relative
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 10))

    touch("ros_dofkit/core/dof_mask.py")  # holds no kernel
    assert precompiled(calls(checkout, environment, log, "demo")) == []
    touch("ros_dofkit/core/spatial.py")  # holds a kernel: numba's cache of it is cold again
    assert precompiled(calls(checkout, environment, log, "test")) == [["demo", "estimator", "replay", "simulator"]]

    with (checkout / "requirements" / "runtime.txt").open("a") as handle:
        handle.write("# a changed runtime pin\n")
    redone = calls(checkout, environment, log, "record", "bag")
    assert pip_requirements(redone) == ["runtime.txt", "ros.txt"] and precompiled(redone) == [["simulator"]]


def kernel_groups_of(command: str) -> list[str]:
    result = subprocess.run(["bash", "-c", 'source "$1"; command_kernel_groups "$2"', "groups", str(RUN), command],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.split())


def test_the_kernel_groups_of_each_command_are_precompiles():
    from ros_dofkit.precompile import GROUPS

    programs = {program for group in GROUPS.values() for program in group.programs}
    for command in programs | {"env", "play", "export", "dofkit_relay", "joint_state_filter"}:
        assert kernel_groups_of(command) == sorted(name for name, group in GROUPS.items() if command in group.programs)
    assert kernel_groups_of("test") == kernel_groups_of("bench") == sorted(GROUPS)
