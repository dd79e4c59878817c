"""``dofkit demo`` end to end (shortened), in-process path: accuracy promise, outputs, verdict and exit status."""

from __future__ import annotations

import numpy as np
import pytest

from ros_dofkit import cli
from ros_dofkit.replay.demo import DemoOptions, run_demo_in_process


def test_demo_in_process_meets_its_accuracy_and_writes_plot_and_summary(tmp_path, capsys):
    status = cli.main(["demo", "--no-dds", "--duration", "4", "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "PASS" in out
    for name in ("arm_joint3", "arm_joint7", "upper_arm", "hand", "latency", "output rate"):
        assert name in out
    png = (tmp_path / "demo.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert "PASS" in (tmp_path / "summary.txt").read_text()


def test_demo_fails_when_the_accuracy_is_not_met(tmp_path, capsys):
    # The same run judged against an impossible threshold: the verdict and the exit status say so.
    status = cli.main(["demo", "--no-dds", "--duration", "2", "--out", str(tmp_path), "--quiet", "--max-rms",
                       "0.001"])
    assert status == 1
    assert "FAIL" in capsys.readouterr().out


def test_demo_without_noise_tracks_the_truth_closely():
    # Exact sensors and encoders sampled with the IMUs: the estimate reproduces the truth to solver precision.
    outcome = run_demo_in_process(DemoOptions(duration_s=3.0, noise="none", seed=3, encoder_rate_hz=100.0))
    report = outcome.report
    assert outcome.passed
    assert np.all(report.rms_deg < 1e-6)
    assert all(error < 1e-6 for error in report.sensor_error_deg.values())
    assert report.output_rate_hz == pytest.approx(100.0, rel=0.02)


def test_demo_noise_levels_order_the_errors():
    low = run_demo_in_process(DemoOptions(duration_s=3.0, noise="low", seed=1)).report
    high = run_demo_in_process(DemoOptions(duration_s=3.0, noise="high", seed=1)).report
    assert np.mean(high.rms_deg[high.estimated]) > 2 * np.mean(low.rms_deg[low.estimated])


def test_demo_rejects_bad_options(capsys):
    assert cli.main(["demo", "--no-dds", "--duration", "-1", "--quiet"]) == 2
    assert "duration_s" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["demo", "--noise", "loud"])


def test_help_lists_the_subcommands_and_states_the_accuracy_promise(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("demo", "record", "replay", "play"):
        assert command in text
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = capsys.readouterr().out
    assert "below 2 degrees" in text and "--no-dds" in text and "exit status is 0 only" in text
