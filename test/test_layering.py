"""ros_dofkit/core stays free of ROS: no module under it imports rclpy, rosidl or any message/service package.

Parsed with ``ast`` (imports inside functions, ``try`` blocks and ``if TYPE_CHECKING`` count too); the failure
names the file, line and import. The checker itself is tested on snippets so that it cannot pass vacuously.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "ros_dofkit" / "core"
ROS_SUFFIXES = ("_msgs", "_srvs", "_interfaces")


def is_ros_module(module: str) -> bool:
    top = module.split(".")[0]
    return top == "rclpy" or top.startswith("rosidl") or top.endswith(ROS_SUFFIXES)


def ros_imports(source: str, filename: str = "<snippet>") -> list[tuple[int, str]]:
    """(line, imported module) for every import of a ROS module in ``source``; relative imports are ROS-free."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if is_ros_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and is_ros_module(node.module):
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and is_ros_module(node.args[0].value)
        ):
            found.append((node.lineno, node.args[0].value))
    return sorted(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import rclpy", [(1, "rclpy")]),
        ("import numpy as np\nfrom rclpy.node import Node", [(2, "rclpy.node")]),
        ("def f():\n    import sensor_msgs.msg", [(2, "sensor_msgs.msg")]),
        ("try:\n    from std_srvs.srv import Trigger\nexcept ImportError:\n    pass", [(2, "std_srvs.srv")]),
        ("from rosidl_runtime_py import message_to_ordereddict", [(1, "rosidl_runtime_py")]),
        ("import rcl_interfaces.msg", [(1, "rcl_interfaces.msg")]),
        ("import importlib\nimportlib.import_module('tf2_msgs.msg')", [(2, "tf2_msgs.msg")]),
        ("__import__('rclpy')", [(1, "rclpy")]),
        ("import numpy\nfrom scipy.spatial.transform import Rotation\nfrom . import spatial", []),
        ("from .msgs_helpers import x\nimport my_msgsx\nimport rclpyx_tools", []),
    ],
)
def test_checker_finds_ros_imports(source, expected):
    assert ros_imports(source) == expected


def test_core_modules_exist():
    assert (CORE / "spatial.py").is_file(), f"expected ros_dofkit/core at {CORE}"


def test_core_imports_no_ros():
    offenders = [
        f"{path.relative_to(CORE.parent.parent)}:{line}: imports {module}"
        for path in sorted(CORE.rglob("*.py"))
        for line, module in ros_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not offenders, "ros_dofkit/core must not import ROS (DESIGN.md layers):\n" + "\n".join(offenders)


def test_offline_replay_loads_no_ros_package():
    """Offline replay (bags, batch, the `dofkit replay` command) runs without ROS: importing it loads neither rclpy
    nor a message package, so it works where only the pip-installed core is."""
    import subprocess
    import sys

    probe = ("import sys\n"
             "import ros_dofkit.commands.replay, ros_dofkit.replay.bags, ros_dofkit.replay.batch\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy' or m.split('.')[0].endswith('_msgs')))")
    finished = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).resolve().parents[1])
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "[]"
