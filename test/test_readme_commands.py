"""Every command in README.md's shell blocks runs as written from a fresh clone (issue 15.3).

The blocks fenced as ``bash``/``sh``/``shell`` are split into commands (backslash continuations joined, comments
dropped, ``&&``/``||``/``;``/``|`` separating commands, leading ``VAR=value`` and ``sudo`` skipped), and each command
must resolve:

- ``./run SUBCOMMAND ...``: a subcommand of ``run`` (demo, test, bench NAME with benchmarks/NAME.py, help), a node
  executable it runs (its ``node_executables``: the console scripts of setup.py besides dofkit) or a ``dofkit``
  subcommand, whose arguments the CLI's own parser accepts;
- ``ros2 launch ros_dofkit FILE``: an existing launch/FILE; ``ros2 run ros_dofkit NAME``: a console script;
- a console script written bare (``dofkit ...``, ``estimator ...``) only after an activation line in the same block
  (``source .venv/bin/activate``, ``source install/setup.bash``, ...): a fresh clone has them on no PATH;
- a path (``./x``, ``tools/x.sh``) that exists in the checkout; ``.venv/...`` is refused (a fresh clone has none);
- otherwise one of EXTERNAL_TOOLS (git, rosdep, colcon, ...): system tools the README expects to be installed.

Arguments naming a file of the checkout (``config/arm_4imu.yaml``, ``benchmarks/x.py``) must exist. A new README
command passes when it is in such a block and follows these rules; a new system tool is added to EXTERNAL_TOOLS.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ros_dofkit import cli
from test_package_metadata import setup_py_console_scripts

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.S | re.M)
#: Tools of the system or of a ROS 2 installation that README commands may call.
EXTERNAL_TOOLS = {"cd", "mkdir", "git", "touch", "ln", "export", "rosdep", "colcon", "python3", "apt-get",
                  "rm", "ls", "cat", "echo", "ros2"}
#: The ``run`` subcommands of its own (everything else goes to a node executable or to ``dofkit``).
RUN_SUBCOMMANDS = {"demo", "test", "bench", "help", "--help"}
#: Top-level entries of the checkout: an argument starting with one names a file that must exist.
CHECKOUT_DIRECTORIES = ("config/", "launch/", "benchmarks/", "ros_dofkit/", "test/", "tools/", "doc/",
                        "requirements/")
ACTIVATION = re.compile(r"(^|/)(bin/activate|setup\.(bash|sh|zsh))$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_commands(text: str) -> list[list[list[str]]]:
    """The README's shell blocks, each a list of commands, each a list of words."""
    blocks = []
    for block in SHELL_BLOCK.findall(text):
        commands: list[list[str]] = []
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            current: list[str] = []
            for token in [*lexer, ";"]:
                if token in (";", "&&", "||", "|", "&"):
                    if current:
                        commands.append(current)
                    current = []
                else:
                    current.append(token)
        blocks.append(commands)
    return blocks


def node_executables() -> set[str]:
    result = subprocess.run(["bash", "-c", 'source "$1"; echo "$node_executables"', "nodes", str(ROOT / "run")],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=True)
    return set(result.stdout.split())


def dofkit_parse_error(arguments: list[str]) -> str | None:
    """None if ``dofkit ARGUMENTS`` parses with the CLI's parser, else its error text."""
    parser = cli.build_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(arguments)
    except SystemExit as exit_info:
        return None if exit_info.code == 0 else stderr.getvalue().strip().splitlines()[-1]
    except argparse.ArgumentError as error:
        return str(error)
    return None


class Checker:
    """Resolves commands against this checkout; ``problems`` collects what does not resolve."""

    def __init__(self):
        self.scripts = {entry.split("=")[0].strip() for entry in setup_py_console_scripts()}
        self.nodes = node_executables()
        self.problems: list[str] = []

    def check_block(self, commands: list[list[str]]) -> None:
        activated = False
        for words in commands:
            while words and (ASSIGNMENT.match(words[0]) or words[0] == "sudo"):
                words = words[1:]
            if not words:
                continue
            if words[0] in ("source", ".") and len(words) > 1:
                activated = activated or bool(ACTIVATION.search(words[1]))
                continue
            self.check_command(words, activated)

    def fail(self, words: list[str], why: str) -> None:
        self.problems.append(f"`{shlex.join(words)}`: {why}")

    def check_command(self, words: list[str], activated: bool) -> None:
        command, arguments = words[0], words[1:]
        for argument in arguments:
            if argument.startswith(CHECKOUT_DIRECTORIES) and not (ROOT / argument).exists():
                self.fail(words, f"{argument} does not exist in the checkout")
        if command == "./run":
            self.check_run(words, arguments)
        elif command == "ros2":
            self.check_ros2(words, arguments)
        elif command in self.scripts:
            if not activated:
                through_run = shlex.join(["./run", *(arguments if command == "dofkit" else words)])
                self.fail(words, f"{command} is on no PATH in a fresh clone: write {through_run}, or activate "
                                 "first (source .venv/bin/activate) in the same block")
            elif command == "dofkit" and (error := dofkit_parse_error(arguments)):
                self.fail(words, error)
        elif command.startswith(".venv/"):
            self.fail(words, "a fresh clone has no .venv: use ./run (./run bench NAME runs benchmarks/NAME.py)")
        elif "/" in command:
            if not (ROOT / command).exists():
                self.fail(words, f"{command} does not exist in the checkout")
        elif command not in EXTERNAL_TOOLS:
            self.fail(words, f"unknown command {command!r}: not ./run, a console script, a path of the checkout, "
                             "or one of EXTERNAL_TOOLS")

    def check_run(self, words: list[str], arguments: list[str]) -> None:
        if not arguments:
            return self.fail(words, "./run needs a subcommand")
        subcommand = arguments[0]
        if subcommand == "bench":
            if len(arguments) < 2 or not (ROOT / "benchmarks" / f"{arguments[1]}.py").is_file():
                self.fail(words, "./run bench NAME needs an existing benchmarks/NAME.py")
        elif subcommand in RUN_SUBCOMMANDS - {"demo"} or subcommand in self.nodes:
            return None
        elif error := dofkit_parse_error(arguments):
            self.fail(words, f"not a ./run subcommand, node executable or dofkit subcommand: {error}")
        return None

    def check_ros2(self, words: list[str], arguments: list[str]) -> None:
        if arguments[:2] == ["launch", "ros_dofkit"]:
            if len(arguments) < 3 or not (ROOT / "launch" / arguments[2]).is_file():
                self.fail(words, f"no launch file launch/{arguments[2] if len(arguments) > 2 else ''}")
        elif arguments[:2] == ["run", "ros_dofkit"]:
            if len(arguments) < 3 or arguments[2] not in self.scripts:
                self.fail(words, f"ros_dofkit has no executable {arguments[2:3]}")


def test_every_readme_shell_command_resolves():
    blocks = shell_commands(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3 and sum(map(len, blocks)) >= 10  # the extraction sees the README's commands
    checker = Checker()
    for commands in blocks:
        checker.check_block(commands)
    assert not checker.problems, "README commands that do not run as written:\n" + "\n".join(checker.problems)


BAD = """
```bash
dofkit record x --duration 2          # not activated
./run replay                          # missing the bag argument
./run bench no_such_benchmark
./run frobnicate
ros2 launch ros_dofkit missing.launch.py
ros2 run ros_dofkit no_such_node
estimator --ros-args --params-file config/missing.yaml
.venv/bin/python benchmarks/ik.py
tools/no_such_tool.sh && frob
```

```bash
source .venv/bin/activate
dofkit record x --duration 2 && estimator --ros-args -p a:=1 | ./run demo --quiet
```
"""


@pytest.fixture(scope="module")
def bad_readme_problems() -> list[str]:
    checker = Checker()
    for commands in shell_commands(BAD):
        checker.check_block(commands)
    return checker.problems


def test_each_kind_of_broken_command_is_named_with_the_fix(bad_readme_problems):
    text = "\n".join(bad_readme_problems)
    for expected in (
        "`dofkit record x --duration 2`: dofkit is on no PATH in a fresh clone: write ./run record x --duration 2,",
        "`./run replay`: not a ./run subcommand, node executable or dofkit subcommand: ",
        "`./run bench no_such_benchmark`: ./run bench NAME needs an existing benchmarks/NAME.py",
        "`./run frobnicate`: not a ./run subcommand",
        "`ros2 launch ros_dofkit missing.launch.py`: no launch file launch/missing.launch.py",
        "`ros2 run ros_dofkit no_such_node`: ros_dofkit has no executable ['no_such_node']",
        "config/missing.yaml does not exist in the checkout",
        "`.venv/bin/python benchmarks/ik.py`: a fresh clone has no .venv",
        "`tools/no_such_tool.sh`: tools/no_such_tool.sh does not exist in the checkout",
        "`frob`: unknown command 'frob'",
    ):
        assert expected in text, f"{expected!r} not in:\n{text}"
    assert len(bad_readme_problems) == 11  # estimator: not activated + missing file; the activated block is clean
