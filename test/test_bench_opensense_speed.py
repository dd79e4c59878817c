"""Smoke test of benchmarks/opensense_speed.py (ros_dofkit vs OpenSim on the OpenSense table of the x-IMU3 recording):
it runs end to end in a process of its own, times OpenSim in every lock mode and names the fastest as the peer. No
timing is asserted; the two solutions must agree (both solve the same problem at accuracy 1e-4)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.opensim_peer import opensim_available  # noqa: E402
from benchmarks.ximu3_estimate import DEFAULT_RECORDING  # noqa: E402


@pytest.mark.skipif(not opensim_available(), reason="opensim is a benchmark extra (pip install opensim==4.6)")
@pytest.mark.skipif(not Path(DEFAULT_RECORDING).is_dir(), reason=f"the x-IMU3 recording is not at {DEFAULT_RECORDING}")
def test_opensense_speed_runs_every_lock_mode_and_compares_with_the_fastest():
    finished = subprocess.run([sys.executable, str(REPO / "benchmarks" / "opensense_speed.py"), "--repeat", "1"],
                              capture_output=True, text=True, timeout=600, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    out = finished.stdout
    for label in ("OpenSim lockQ (LBFGS)", "OpenSim no locks (LBFGS)", "OpenSim OpenSense locks (IPOPT)"):
        assert re.search(rf"{re.escape(label)}\s+[0-9,]+ frames/s", out), out
    peer = re.search(r"the OpenSim peer is its fastest configuration, (.*)$", out, flags=re.MULTILINE).group(1)
    ratios = re.findall(rf"ratio ros_dofkit \S+ / {re.escape(peer)}: ([0-9.]+)x; largest joint difference to its "
                        r"solution ([0-9.]+) deg", out)
    assert len(ratios) == 2, out
    assert all(float(ratio) > 0 and float(difference) < 0.5 for ratio, difference in ratios), out
