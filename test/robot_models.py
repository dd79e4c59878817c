"""test/robot_models.py: paths of real robot URDFs shipped by the pip package example-robot-data.

Tests import ``urdf_path("panda")`` etc., or ``all_urdf_files()`` for every URDF of the package. The data directory
is found from the installed distribution's file list
(importlib.metadata), falling back to ``<sys.prefix>/lib/pythonX.Y/site-packages/cmeel.prefix/...``; when neither
exists the tests that need it are skipped with a message saying which package to install.
"""

from __future__ import annotations

import importlib.metadata
import sys
from functools import cache
from pathlib import Path

import pytest

_DISTRIBUTION = "example-robot-data"
_ROBOTS_SUFFIX = Path("share") / "example-robot-data" / "robots"

#: short name -> path of the URDF inside the robots directory.
URDF_FILES = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "anymal": "anymal_c_simple_description/urdf/anymal.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
    "talos_full": "talos_data/robots/talos_full_v2.urdf",
    "romeo": "romeo_description/urdf/romeo.urdf",
    "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
    "double_pendulum": "double_pendulum_description/urdf/double_pendulum.urdf",
}

#: robots whose URDF describes a free-floating base (legged robots, humanoids)
FLOATING_BASE = {"anymal", "go1", "solo12", "talos", "talos_full", "romeo", "g1"}


@cache
def robots_dir() -> Path | None:
    """The example-robot-data ``robots`` directory, or None when the package is not installed."""
    try:
        files = importlib.metadata.files(_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        parts = Path(entry).parts
        if "robots" in parts and "example-robot-data" in parts:
            located = Path(entry.locate())
            index = len(located.parts) - (len(parts) - parts.index("robots")) + 1
            candidate = Path(*located.parts[:index])
            if candidate.is_dir():
                return candidate
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for prefix in (sys.prefix, sys.base_prefix):
        candidate = Path(prefix) / "lib" / version / "site-packages" / "cmeel.prefix" / _ROBOTS_SUFFIX
        if candidate.is_dir():
            return candidate
    return None


def all_urdf_files() -> list[str]:
    """Every ``*.urdf`` of example-robot-data, relative to its robots directory, sorted; empty when not installed."""
    base = robots_dir()
    return [] if base is None else sorted(str(path.relative_to(base)) for path in base.rglob("*.urdf"))


def urdf_path(short_name: str) -> Path:
    """Path of a URDF by short name (keys of URDF_FILES); skips the calling test if the data is missing."""
    if short_name not in URDF_FILES:
        raise KeyError(f"unknown robot {short_name!r}; known: {', '.join(sorted(URDF_FILES))}")
    base = robots_dir()
    if base is None:
        pytest.skip(f"the pip package {_DISTRIBUTION} is not installed")
    path = base / URDF_FILES[short_name]
    if not path.is_file():
        pytest.skip(f"{path} is not in this version of {_DISTRIBUTION}")
    return path
