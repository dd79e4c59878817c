"""Smoke test of benchmarks/odometry_covariance.py: it runs on the shipped floating-base configurations and
reports one positive time per configuration with every IMU of the configuration observed."""

from __future__ import annotations

import re

from benchmarks import odometry_covariance


def test_the_benchmark_reports_each_configuration(capsys):
    assert odometry_covariance.main(["--number", "2", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == list(odometry_covariance.CONFIGS)
    assert "7 IMUs" in lines[1]  # lower_body.yaml: every IMU observed
    for line in lines:
        assert float(re.search(r"([0-9.]+) us per cycle", line).group(1)) > 0
