"""OpenSim in the tests without leaking its environment: the ``opensim`` fixture and the environment guard.

Where you are: test/, a helper module: test/conftest.py imports its fixture (so every test has it), tests that
use OpenSim import :func:`importorskip_opensim`.
``import opensim`` (4.6, Linux) sets LD_LIBRARY_PATH to PATH and prepends to PATH; every process started after
that in the same pytest run (a ROS node in a later test) then fails to load the ROS wheels' libraries
(``librcl_action.so`` not found). ``pytest.importorskip("opensim")`` did exactly that. So:

* :func:`importorskip_opensim` returns the module through ``benchmarks.opensim_peer.import_opensim``, which puts the
  environment back, and skips with the reason when the bench extra is not installed;
* :func:`opensim_leaves_environment_alone` (autouse fixture) fails the test after which any of the variables
  OpenSim changes differs from what it was before the test, naming the variable, so a bare ``import opensim`` in a
  new test is caught where it is written instead of breaking an unrelated ROS test later in the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import opensim_peer  # noqa: E402

#: The variables ``import opensim`` changes (opensim_peer puts them back).
ENVIRONMENT = opensim_peer._ENVIRONMENT_OPENSIM_CHANGES


def importorskip_opensim(why: str):
    """The ``opensim`` module imported with the environment put back (what ``pytest.importorskip("opensim")`` did
    not do); skips the test, saying ``why`` it needed OpenSim, when the bench extra is absent."""
    try:
        return opensim_peer.import_opensim()
    except opensim_peer.OpenSimUnavailableError as error:
        pytest.skip(f"opensim (the bench extra, requirements/bench.txt) is not installed, so {why}: {error}")


@pytest.fixture(autouse=True)
def opensim_leaves_environment_alone(request):
    """Fail a test after which LD_LIBRARY_PATH, PATH, ... differ from before it (a leaked ``import opensim``)."""
    before = {name: os.environ.get(name) for name in ENVIRONMENT}
    yield
    changed = {name: (value, os.environ.get(name)) for name, value in before.items() if os.environ.get(name) != value}
    if changed:
        for name, value in before.items():  # put it back, so that later tests are not broken too
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        pytest.fail(f"{request.node.nodeid} changed the environment of every later test: " + "; ".join(
            f"{name} {old!r} -> {new!r}" for name, (old, new) in changed.items())
            + " (import opensim through opensim_guard.importorskip_opensim, never directly)",
            pytrace=False)
