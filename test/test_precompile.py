"""Tests of ros_dofkit.precompile: which modules hold kernels, and the cold-cache note of a first start.

The note is checked on a copy of the package in a temporary directory, where numba's cache and ros_dofkit's
stamps start empty, as on a fresh install: the note is given until the program marks its kernels warm, and again
once a kernel source changes (numba recompiles then too). Nothing is compiled here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ros_dofkit import precompile

ROOT = Path(__file__).resolve().parents[1]

NOTE = """
import sys
from ros_dofkit import precompile
assert precompile.__file__.startswith(sys.argv[1]), precompile.__file__
for action in sys.argv[2:]:
    if action == "mark":
        precompile.mark_warm("estimator")
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
    cold = f"compiling kernels (first start, about {precompile.COMPILE_SECONDS['estimator']} s)"
    assert note_in_copy(tmp_path, "estimator", "replay", "mark", "estimator", "replay") == [
        cold, f"compiling kernels (first start, about {precompile.COMPILE_SECONDS['replay']} s)", "None",
        f"compiling kernels (first start, about {precompile.COMPILE_SECONDS['replay']} s)"]
    kernels = tmp_path / "ros_dofkit" / "core" / "assembly" / "kernels.py"
    os.utime(kernels, (kernels.stat().st_atime, kernels.stat().st_mtime + 10))
    assert note_in_copy(tmp_path, "estimator") == [cold]
