"""benchmarks/instant_grid.py: its trials are scored against the stamps each IMU sent (independent truth: the
trial's own record of what it offered), and the harness runs end to end. No timing is asserted."""

from __future__ import annotations

import numpy as np

from benchmarks import instant_grid
from ros_dofkit.core.estimator import rules


def test_exact_stamps_give_every_sample_to_its_instant():
    # No stamp error: each cycle takes exactly its instant's samples, with and without dropouts.
    assert instant_grid.trials(rules, "uniform", 0.0, 3, 0) == (3, 3, 120, 120)
    assert instant_grid.trials(rules, "uniform", 0.0, 3, 12) == (3, 3, 120, 120)


def test_a_trial_records_what_it_sent():
    inputs, sent = instant_grid.stamped_inputs(10, lambda rng: rng.uniform(-0.3, 0.3), 4, 3)
    assert np.isnan(sent).sum() == 3  # the dropouts
    assert sorted(inputs.imu_stamp[:-instant_grid.IMUS]) == sorted(sent[np.isfinite(sent)])  # the last set flushes
    assert np.nanmax(np.abs(sent - np.arange(10)[:, None] * instant_grid.PERIOD)) <= 0.3 * instant_grid.PERIOD + 1e-9
    inputs, sent = instant_grid.stamped_inputs(10, lambda rng: rng.uniform(-0.3, 0.3), 4, 0)
    got = instant_grid.taken(instant_grid.schedule(rules, inputs)[0], inputs.imu_stamp[-1] - 0.5)
    np.testing.assert_array_equal(got, sent)


def test_the_benchmark_prints_each_distribution(capsys):
    assert instant_grid.main(["--seeds", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"this tree, {distribution} stamp errors (periods), {dropouts} dropouts"
        for distribution in instant_grid.LEVELS for dropouts in (0, 12)]
