"""ros_dofkit.core.estimator.offline's joint states by layout: a window that hands its joint-state messages grouped
by layout (``OfflineInputs.js_layouts``, as the replay's decoder holds them) validates to the same compiled-rule
inputs, bit for bit, as the same messages as per-message lists (the reference: each message read on its own), for
accepted, partly unknown, mis-sized and non-finite messages; layouts that do not hold every message once are
refused with a typed error. ``EstimatorResult.of_cycle`` (a cycle's row arrays -> its result, set field by field
at once) gives the object the dataclass's own constructor builds from the same fields, written out by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ros_dofkit.core.estimator.offline import (
    EstimatorResult,
    JointStateLayoutRows,
    OfflineInputError,
    OfflineInputs,
    validate_window,
)

NAME_TO_INDEX = {"j1": 0, "j2": 1, "j3": 2}


def joint_state_window(messages) -> OfflineInputs:
    """A window of joint-state messages only, ``messages`` [(names, positions, velocities or None)], 10 ms apart."""
    n = len(messages)
    return OfflineInputs(
        kind=np.ones(n, dtype=np.int64), row=np.arange(n), imu_sensor=np.zeros(0, dtype=np.int64),
        imu_stamp=np.zeros(0), imu_quaternion_wxyz=np.zeros((0, 4)), imu_angular_velocity=np.zeros((0, 3)),
        imu_orientation_present=np.zeros(0, dtype=bool), imu_angular_velocity_present=np.zeros(0, dtype=bool),
        js_stamp=0.01 * np.arange(1, n + 1), js_names=[names for names, _, _ in messages],
        js_positions=[np.asarray(p, dtype=float) for _, p, _ in messages],
        js_velocities=[None if v is None else np.asarray(v, dtype=float) for _, _, v in messages])


def layouts_of(inputs: OfflineInputs) -> list:
    """The window's messages grouped by (names, position count, velocity count) in first-seen order, each group's
    rows stacked, as a decoder that reads messages by layout holds them."""
    groups: dict = {}
    for k, (names, p, v) in enumerate(zip(inputs.js_names, inputs.js_positions, inputs.js_velocities, strict=True)):
        groups.setdefault((names, p.size, 0 if v is None else v.size), []).append(k)
    layouts = []
    for (_, p_count, v_count), members in groups.items():
        P = np.array([inputs.js_positions[k] for k in members]).reshape(len(members), p_count)
        V = np.array([np.zeros(0) if inputs.js_velocities[k] is None else inputs.js_velocities[k]
                      for k in members]).reshape(len(members), v_count)
        layouts.append(JointStateLayoutRows(np.array(members), inputs.js_names[members[0]], P, V))
    return layouts


MESSAGES = [
    (("j1", "j2"), [0.1, 0.2], [1.0, 2.0]),
    (("j3", "j1", "j2"), [0.3, 0.4, 0.5], None),  # another layout, no velocities
    (("j1", "j2"), [0.6, np.nan], [1.5, 2.5]),  # non-finite: refused
    (("j1", "j2"), [0.7, 0.8], [np.inf, 2.5]),
    (("j1", "jx"), [0.9, 1.0], []),  # a name the model lacks: the known one kept; an empty velocity is none
    (("j1", "j2"), [1.1], None),  # fewer positions than names: refused
    (("j3", "j1", "j2"), [1.2, 1.3, 1.4], None),
    (("j1", "j2"), [1.5, 1.6], [3.0, 4.0]),
]


def test_layouts_validate_as_the_per_message_lists():
    inputs = joint_state_window(MESSAGES)
    reference = validate_window(inputs, NAME_TO_INDEX, 0)
    layouts = layouts_of(inputs)
    assert len(layouts) == 4
    assert len(set(reference.js_code.tolist())) >= 3  # accepted, kept with unknown names, refused
    # One layout in two blocks too (a decoder also splits messages by frame_id): the same result.
    first = layouts[0]
    split = [first._replace(members=first.members[:2], positions=first.positions[:2], velocities=first.velocities[:2]),
             first._replace(members=first.members[2:], positions=first.positions[2:], velocities=first.velocities[2:]),
             *layouts[1:]]
    for given in (layouts, split):
        by_layout = validate_window(dataclasses.replace(inputs, js_layouts=given), NAME_TO_INDEX, 0)
        for name in ("js_code", "js_offsets", "js_index", "js_position", "js_velocity", "js_stamp", "stamp_ns"):
            expected, got = getattr(reference, name), getattr(by_layout, name)
            assert expected.dtype == got.dtype and expected.tobytes() == got.tobytes(), name


def test_layouts_must_hold_every_message_once():
    inputs = joint_state_window(MESSAGES)
    layouts = layouts_of(inputs)
    first = layouts[0]
    with pytest.raises(OfflineInputError, match="each of the 8 joint-state messages"):
        dataclasses.replace(inputs, js_layouts=layouts[1:])  # a layout's messages missing
    with pytest.raises(OfflineInputError, match="each of the 8 joint-state messages"):
        dataclasses.replace(inputs, js_layouts=[*layouts, first])  # twice
    with pytest.raises(OfflineInputError, match="expected positions"):
        dataclasses.replace(inputs, js_layouts=[first._replace(positions=first.positions[1:]), *layouts[1:]])


def test_a_cycle_result_is_the_one_the_dataclass_builds_from_the_same_fields():
    rng = np.random.default_rng(7)
    q, v, X_WB = rng.normal(size=5), rng.normal(size=4), rng.normal(size=(3, 4, 4))
    from_gyro = np.array([True, False, True, False])
    rows = {"q": q.copy(), "v": v.copy(), "X_WB": X_WB.copy(), "velocity_from_gyro": from_gyro.copy()}
    result = EstimatorResult.of_cycle(
        sensor_names=("a", "b", "c"), articulated_names=("j1", "j2"), position_names=("p",) * 5,
        velocity_names=("w",) * 4, stamp=np.float64(2.5), q=rows["q"], v=rows["v"],
        velocity_from_gyro=rows["velocity_from_gyro"], X_WB=rows["X_WB"], goal=np.float64(1e-9), solved=np.True_,
        failure="", errors_deg=np.array([0.5, np.nan, 1.5]), observed=np.array([True, False, True]),
        stale=np.array([False, True, False]), uncalibrated=np.array([False, False, True]),
        missing=np.array([False, True]), weights=np.array([1.0, 2.0, 0.25]), solve_time_s=np.float64(3e-5),
        tracking_reset=np.False_, cycle=np.int64(7), initialized=np.True_)
    expected = EstimatorResult(
        stamp=2.5, q=q, v=v, position_names=("p",) * 5, velocity_names=("w",) * 4, velocity_from_gyro=from_gyro,
        X_WB=X_WB, goal=1e-9, solved=True, failure="", sensor_errors_deg={"a": 0.5, "b": math.nan, "c": 1.5},
        observed_sensors=("a", "c"), stale_sensors=("b",), uncalibrated_sensors=("c",), missing_encoders=("j2",),
        solve_time_s=3e-5, tracking_reset=False, cycle=7, initialized=True, sensor_weights={"a": 1.0, "c": 0.25})
    assert type(result) is EstimatorResult
    for item in dataclasses.fields(EstimatorResult):
        got, want = getattr(result, item.name), getattr(expected, item.name)
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype and not got.flags.writeable
        elif item.name == "sensor_errors_deg":
            assert list(got) == list(want) and np.array_equal(list(got.values()), list(want.values()), equal_nan=True)
        else:
            assert got == want and type(got) is type(want), item.name
    for name, row in rows.items():  # the arrays are the result's own: the rows may be overwritten by the next cycle
        row[...] = 0
        assert not np.shares_memory(getattr(result, name), row)
    np.testing.assert_array_equal(result.q, q)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stamp = 1.0
    assert repr(result) == repr(expected)
