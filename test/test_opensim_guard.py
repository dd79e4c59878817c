"""Tests of test/opensim_guard.py: an ``import opensim`` that leaks into the environment fails the test that did it,
and the later tests of the run see the environment as it was (the ROS process tests after test_export and
test_import_opensense lost ``librcl_action.so`` when they used ``pytest.importorskip("opensim")``).

Each case is a real pytest run in a subprocess, with the guard loaded as a plugin (``-p opensim_guard``), on a
generated test file whose first test changes the environment and whose second test checks what it sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from opensim_guard import importorskip_opensim

TEST_DIR = Path(__file__).resolve().parent

LATER_TEST = '''
def test_later(pytestconfig):
    import os
    assert os.environ.get("LD_LIBRARY_PATH") == {expected!r}
'''


def _run_pytest(tmp_path, first_test: str) -> subprocess.CompletedProcess:
    """pytest on a file of ``first_test`` + a later test that checks LD_LIBRARY_PATH is the one given here."""
    marker = str(tmp_path / "ros_libraries")
    (tmp_path / "test_probe.py").write_text(first_test + LATER_TEST.format(expected=marker))
    env = dict(os.environ, LD_LIBRARY_PATH=marker, PYTHONPATH=os.pathsep.join(
        [str(TEST_DIR), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "opensim_guard", "-p", "no:cacheprovider",
                           "-p", "no:launch_testing", "-p", "no:launch_ros", "-p", "no:launch_pytest",
                           "--rootdir", str(tmp_path), "-q", str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_test_that_changes_the_library_path_fails_and_later_tests_see_it_restored(tmp_path):
    result = _run_pytest(tmp_path, '''
def test_leaks():
    import os
    os.environ["LD_LIBRARY_PATH"] = "/usr/bin"  # what `import opensim` 4.6 does (LD_LIBRARY_PATH = PATH)
''')
    out = result.stdout
    assert result.returncode == 1, out
    assert "2 passed, 1 error" in out, out  # the later test passes: the guard put the variable back
    assert "test_probe.py::test_leaks changed the environment of every later test: LD_LIBRARY_PATH" in out, out


def test_a_bare_import_of_opensim_is_caught(tmp_path):
    importorskip_opensim("a bare import of it cannot be shown to leak")
    result = _run_pytest(tmp_path, '''
def test_bare_import():
    import opensim  # noqa: F401
''')
    assert result.returncode == 1 and "test_bare_import changed the environment" in result.stdout, result.stdout
    assert "2 passed, 1 error" in result.stdout, result.stdout


def test_importorskip_opensim_leaves_the_environment_to_later_tests(tmp_path):
    importorskip_opensim("its import cannot be checked")
    result = _run_pytest(tmp_path, '''
from opensim_guard import importorskip_opensim

def test_uses_opensim():
    assert importorskip_opensim("needed").Storage is not None
''')
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout
