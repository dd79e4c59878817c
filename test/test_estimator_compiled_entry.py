"""ros_dofkit.core.estimator.compiled_entry: a kernel's machine code called without numba's per-call typing, and the
Estimator's offer path that uses it (bound to the rules' state and settings, rebound when they are replaced)."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest
from numba import njit

from ros_dofkit.core.estimator import EstimatorConfig, ImuConfig
from ros_dofkit.core.estimator.compiled_entry import compiled_entry
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.inputs import RejectReason
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant

Pair = namedtuple("Pair", ["values", "counts"])


@njit
def _accumulate(pair, scale, index, flag):
    """values[index] += scale (flag) or -= scale; counts[index] += 1; returns the new value."""
    if not 0 <= index < pair.values.shape[0]:
        raise ValueError("index out of range")
    pair.values[index] += scale if flag else -scale
    pair.counts[index] += 1
    return pair.values[index]


def test_the_entry_runs_the_dispatchers_own_machine_code_with_the_same_effects():
    by_dispatcher = Pair(np.zeros(3), np.zeros(3, dtype=np.int64))
    by_entry = Pair(np.zeros(3), np.zeros(3, dtype=np.int64))
    _accumulate(by_dispatcher, 0.5, 1, True)  # compiled for these types by an ordinary call
    overloads = len(_accumulate.overloads)
    entry = compiled_entry(_accumulate, (by_entry, 0.0, 0, False))
    assert len(_accumulate.overloads) == overloads  # the same overload, not a second compilation
    _accumulate(by_dispatcher, 0.25, 2, False)
    assert entry(by_entry, 0.5, 1, True) == 0.5
    assert entry(by_entry, 0.25, 2, False) == -0.25
    np.testing.assert_array_equal(by_entry.values, by_dispatcher.values)
    np.testing.assert_array_equal(by_entry.counts, by_dispatcher.counts)
    # the kernel's own exceptions, as through the dispatcher
    with pytest.raises(ValueError, match="index out of range"):
        entry(by_entry, 1.0, 7, True)


def test_offers_follow_settings_and_state_replaced_after_the_entry_was_bound():
    plant = build_plant([ModelSpec("arm7.urdf", "arm")])
    config = EstimatorConfig(imus=(ImuConfig("hand", "arm_link7"),), future_tolerance_s=0.05)
    estimator = Estimator(plant, config)
    rest, still = [1.0, 0.0, 0.0, 0.0], np.zeros(3)
    # 0.2 s ahead of the receive clock: beyond the 0.05 s tolerance
    assert estimator.process_imu("hand", 1.2, rest, still, now=1.0)[0].reason is RejectReason.FUTURE_STAMP
    estimator.update_settings(dataclasses.replace(config, future_tolerance_s=0.5))  # new settings object
    status, _ = estimator.process_imu("hand", 1.2, rest, still, now=1.0)
    assert status.accepted and status.reason is None
    assert estimator.reject_counts()[RejectReason.FUTURE_STAMP.value] == 1
    estimator.reset()  # a new state: counts from zero, the same stamp accepted again
    assert estimator.process_imu("hand", 1.2, rest, still, now=1.0)[0].accepted
    assert estimator.reject_counts()[RejectReason.FUTURE_STAMP.value] == 0
