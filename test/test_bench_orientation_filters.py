"""benchmarks/orientation_filters.py (`./run bench orientation_filters`) runs end to end on a short simulation and
prints a row per filter and the choice; no timing is asserted. Needs imufusion, a benchmark extra."""

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import orientation_filters  # noqa: E402


@pytest.mark.skipif(importlib.util.find_spec("imufusion") is None,
                    reason="imufusion is a benchmark extra (requirements/bench.txt; ./run bench installs it)")
def test_the_benchmark_compares_every_filter_on_a_short_run(capsys):
    assert orientation_filters.main(["--duration", "8", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    for name, _ in orientation_filters.FILTERS:
        row = next(line for line in out.splitlines() if line.startswith(name))
        inclination = float(row[len(name):].split()[2])  # the worst IMU's inclination RMS
        assert 0.0 < inclination < 5.0, row
    assert "choice: vqf" in out
