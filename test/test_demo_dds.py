"""``dofkit demo`` over real DDS (the default path): the simulator publishes in real time to the estimator node
running in its own process; the shortened demo meets its accuracy and reports DDS rates and latency."""

from __future__ import annotations

import math

import pytest

from ros_dofkit import cli

pytest.importorskip("rclpy")
pytest.importorskip("ros_dofkit.nodes.estimator")


def test_demo_over_dds_meets_its_accuracy(tmp_path, capsys):
    status = cli.main(["demo", "--duration", "4", "--out", str(tmp_path), "--quiet"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    out = captured.out
    assert "over DDS" in out and "PASS" in out
    assert (tmp_path / "demo.png").read_bytes().startswith(b"\x89PNG")
    summary = (tmp_path / "summary.txt").read_text()
    rate_line = next(line for line in summary.splitlines() if line.startswith("output rate"))
    # One estimate per IMU sample instant (100 Hz) arrives over DDS: at least 90 % of them.
    assert float(rate_line.split()[2]) > 90.0
    latency_line = next(line for line in summary.splitlines() if line.startswith("latency"))
    p50 = float(latency_line.split("p50")[1].split("ms")[0])
    assert math.isfinite(p50) and p50 > 0.0


def test_demo_refuses_to_mix_with_another_estimator_in_the_domain(tmp_path, ros_processes, capsys, monkeypatch):
    import sys
    import tempfile

    from ros_dofkit.replay.demo_robot import demo_parameters, parameter_yaml

    params = tmp_path / "other.yaml"
    params.write_text(parameter_yaml(demo_parameters()))
    other = ros_processes.start(sys.executable, "-m", "ros_dofkit.nodes.estimator", "--ros-args", "--params-file",
                                str(params))
    other.wait_for_output("estimator ready", timeout=60.0)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    status = cli.main(["demo", "--duration", "4", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1
    assert "another estimator runs in this ROS domain" in err and "--no-dds" in err
    # The refused demo's node stopped and its folder (parameters, log) is gone.
    assert list(scratch.iterdir()) == []
