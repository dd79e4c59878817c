"""The compiled cycle rules (ros_dofkit.core.estimator.rules) through the Estimator's two entry points: invalid and
repeated stamps are dropped with their own reasons, and the streaming entry point (one message at a time) gives the
offline one's (a window at a time) results bit for bit, in free-running, synchronized and sync_joint_states modes
and with an IMU waiting for calibration, on jittered arrival orders; and free-running instants stay one cycle each
under stamp errors, dropouts and mixed IMU rates (issue 16.7)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ros_dofkit.core.estimator import CALIBRATE, EstimatorConfig, ImuConfig, rules
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.inputs import INVALID_STAMP, RejectReason, stamp_seconds
from ros_dofkit.core.estimator.offline import OfflineInputs, validate_window
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.estimator.setup import build as build_setup
from test_estimator_estimator import ARM_IMUS, DT, arm_trajectory, sensor_readings

NAMES = [imu.name for imu in ARM_IMUS]
ENCODERS = ["arm_joint1", "arm_joint2"]
ESTIMATED = {"arm": ("arm_joint3", "arm_joint4", "arm_joint5", "arm_joint6", "arm_joint7")}


@pytest.fixture(scope="module")
def arm_plant():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


def jittered_messages(plant, instants, jitter_periods, seed, imus=ARM_IMUS):
    """The 4 IMU samples and one joint state of each instant (500 Hz), each delivered after a delay uniform in
    [0, jitter_periods * DT), in order per sender (as DDS delivers one writer's samples): (arrival, kind, name,
    stamp, payload) in arrival order."""
    rng = np.random.default_rng(seed)
    messages = []
    last = {}
    for k in range(instants):
        t = k * DT
        q, v = arm_trajectory(t)
        sent = [(0, name, reading) for name, reading in sensor_readings(plant, imus, q, v).items()]
        for kind, name, payload in [*sent, (1, "joint_states", (q[:2], v[:2]))]:
            last[name] = max(last.get(name, 0.0), t + rng.uniform(0, jitter_periods * DT))
            messages.append((last[name], kind, name, t, payload))
    messages.sort(key=lambda message: message[0])
    return messages


def stream(estimator, messages, with_clock=True):
    results = []
    for arrival, kind, name, stamp, payload in messages:
        now = arrival if with_clock else None
        if kind == 0:
            _, out = estimator.process_imu(name, stamp, *payload, now=now)
        else:
            _, out = estimator.process_joint_state(ENCODERS, *payload, stamp=stamp, now=now)
        results += out
    return results


def as_inputs(messages, imus=ARM_IMUS, with_clock=True):
    """The messages as one offline window (the same values the streaming calls get)."""
    index = {imu.name: i for i, imu in enumerate(imus)}
    imu = [m for m in messages if m[1] == 0]
    js = [m for m in messages if m[1] == 1]
    kind = np.array([m[1] for m in messages], dtype=np.int64)
    row = np.empty(len(messages), dtype=np.int64)
    row[kind == 0] = np.arange(len(imu))
    row[kind == 1] = np.arange(len(js))
    return OfflineInputs(
        kind=kind, row=row, imu_sensor=np.array([index[m[2]] for m in imu], dtype=np.int64),
        imu_stamp=np.array([m[3] for m in imu]), imu_quaternion_wxyz=np.array([m[4][0] for m in imu]).reshape(-1, 4),
        imu_angular_velocity=np.array([m[4][1] for m in imu]).reshape(-1, 3),
        imu_orientation_present=np.ones(len(imu), bool), imu_angular_velocity_present=np.ones(len(imu), bool),
        js_stamp=np.array([m[3] for m in js]), js_names=[tuple(ENCODERS)] * len(js),
        js_positions=[m[4][0] for m in js], js_velocities=[m[4][1] for m in js],
        stamp_ns=np.array([round(m[3] * 1e9) for m in messages], dtype=np.int64),
        now=np.array([m[0] if with_clock else np.nan for m in messages]))


def test_invalid_stamps_are_rejected_with_their_own_reason(arm_plant):
    assert stamp_seconds(3, 999_999_999) == pytest.approx(3.999999999)
    assert stamp_seconds(3, 1_000_000_000) == INVALID_STAMP
    for now in (None, 5.0):  # without and with a receive clock (sim or wall time)
        estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, estimated_joints=ESTIMATED))
        q, v = arm_trajectory(0.0)
        reading = sensor_readings(arm_plant, ARM_IMUS, q, v)["hand"]
        status, results = estimator.process_imu("hand", stamp_seconds(5, 2_000_000_000), *reading, now=now)
        assert not status.accepted and status.reason is RejectReason.INVALID_STAMP and results == ()
        status, _ = estimator.process_joint_state(ENCODERS, q[:2], stamp=stamp_seconds(5, 1_500_000_000), now=now)
        assert status.reason is RejectReason.INVALID_STAMP
        assert estimator.reject_counts_by_source() == {("hand", "invalid_stamp"): 1,
                                                       ("joint_states", "invalid_stamp"): 1}
        assert estimator.process_imu("hand", 5.0, *reading, now=now)[0].ok  # a valid one after it is taken


def test_repeated_sets_give_one_output_per_stamp(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, estimated_joints=ESTIMATED))
    q, v = arm_trajectory(0.0)
    readings = sensor_readings(arm_plant, ARM_IMUS, q, v)
    results = []
    for _ in range(5):
        _, out = estimator.process_joint_state(ENCODERS, q[:2], v[:2], stamp=1.0)
        results += out
        for name in NAMES:
            results += estimator.process_imu(name, 1.0, *readings[name])[1]
    assert [result.stamp for result in results] == [1.0]
    assert estimator.reject_counts()["repeated_stamp"] == 4 * 5
    assert estimator.reject_counts_by_source()[("joint_states", "repeated_stamp")] == 4
    # A partial joint state of the same instant is no repeat: it adds other coordinates.
    q1, _ = arm_trajectory(DT)
    assert estimator.process_joint_state(ENCODERS[:1], q1[:1], stamp=1.0 + DT)[0].ok
    assert estimator.process_joint_state(ENCODERS[1:], q1[1:2], stamp=1.0 + DT)[0].ok


CONFIGURATIONS = {
    "free-running": {},
    "synchronized": {"sync_tolerance_s": 1e-4},
    "sync_joint_states": {"sync_joint_states": True},
    "synchronized + sync_joint_states": {"sync_tolerance_s": 1e-4, "sync_joint_states": True},
}


@pytest.mark.parametrize("mode", list(CONFIGURATIONS))
@pytest.mark.parametrize("with_clock", [True, False])
def test_streaming_equals_batch_bit_for_bit(arm_plant, mode, with_clock):
    imus = (*ARM_IMUS[:3], dataclasses.replace(ARM_IMUS[3], mounting=CALIBRATE))  # the hand waits for calibration
    config = EstimatorConfig(imus=imus, estimated_joints=ESTIMATED, stale_timeout_s=0.02, **CONFIGURATIONS[mode])
    messages = jittered_messages(arm_plant, 60, 1.5, 7, imus=ARM_IMUS)
    messages = [m for m in messages if not (m[2] == "wrist" and 20 * DT <= m[3] < 40 * DT)]  # the wrist goes stale
    streaming = stream(Estimator(arm_plant, config), messages, with_clock)
    batch_estimator = Estimator(arm_plant, config)
    half = len(messages) // 2  # two windows: the state carries from one to the next
    first = batch_estimator.run(as_inputs(messages[:half], with_clock=with_clock))
    second = batch_estimator.feed(as_inputs(messages[half:], with_clock=with_clock))
    batch = list(first.results()) + list(second.results())
    assert len(batch) == len(streaming) > 30
    for expected, got in zip(streaming, batch, strict=True):
        assert got.stamp == expected.stamp and got.cycle == expected.cycle
        np.testing.assert_array_equal(got.q, expected.q)
        np.testing.assert_array_equal(got.v, expected.v)
        np.testing.assert_array_equal(got.X_WB, expected.X_WB)
        assert got.sensor_errors_deg.keys() == expected.sensor_errors_deg.keys()
        np.testing.assert_array_equal(list(got.sensor_errors_deg.values()), list(expected.sensor_errors_deg.values()))
        assert (got.observed_sensors, got.stale_sensors, got.uncalibrated_sensors, got.missing_encoders,
                got.tracking_reset, got.solved, got.initialized) == (
            expected.observed_sensors, expected.stale_sensors, expected.uncalibrated_sensors,
            expected.missing_encoders, expected.tracking_reset, expected.solved, expected.initialized)
    assert any(result.uncalibrated_sensors == ("hand",) for result in batch)
    assert any("wrist" in result.stale_sensors for result in batch)


def test_unknown_imu_and_bad_shapes_are_counted(arm_plant):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=(ImuConfig("hand", "arm_link7"),)))
    assert estimator.process_imu("elbow", 0.0, [1.0, 0.0, 0.0, 0.0])[0].reason is RejectReason.UNKNOWN_SENSOR
    assert estimator.process_imu("hand", 0.0, [1.0, 0.0, 0.0])[0].reason is RejectReason.MISMATCHED_ARRAYS
    assert estimator.reject_counts_by_source() == {("elbow", "unknown_sensor"): 1, ("hand", "mismatched_arrays"): 1}


@pytest.mark.parametrize(
    "stamp, now, last, reason",
    [
        (10.0, 10.0, 9.99, None),
        (10.0, None, None, None),
        (10.2, 10.0, None, RejectReason.FUTURE_STAMP),
        (9.0, 10.0, None, RejectReason.STALE_STAMP),
        (9.5, None, 9.6, RejectReason.OUT_OF_ORDER),
        (10.0, 10.0, 10.0, RejectReason.REPEATED_STAMP),
        (float("nan"), None, None, RejectReason.NON_FINITE),
        (None, None, None, RejectReason.NON_FINITE),
        (INVALID_STAMP, 10.0, None, RejectReason.INVALID_STAMP),
    ],
)
def test_stamp_rules(arm_plant, stamp, now, last, reason):
    estimator = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS, future_tolerance_s=0.05, stale_timeout_s=0.1))
    if last is not None:
        assert estimator.add_imu("hand", last, [1.0, 0.0, 0.0, 0.0], now=now).ok
    status = estimator.add_imu("hand", stamp, [1.0, 0.0, 0.0, 0.0], now=now)
    assert status.reason is reason
    assert status.accepted == (reason is None)
    assert sum(estimator.reject_counts().values()) == (reason is not None)


def assert_same_results(got, expected):
    for a, b in zip(got, expected, strict=True):
        assert (a.stamp, a.cycle, a.observed_sensors, a.stale_sensors) == (
            b.stamp, b.cycle, b.observed_sensors, b.stale_sensors)
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.v, b.v)


@pytest.mark.parametrize("order", ["jittered", "reversed sets"])
def test_one_instant_one_cycle_whatever_the_arrival_order(arm_plant, order):
    """Issue 16.7: the samples of one instant make exactly one cycle, at that instant's stamp, with the same samples
    as when they arrive in stamp order, for delays up to 10 periods (under stale_timeout_s), also after dropouts (an
    IMU that missed an instant is left out of that instant only); streaming == batch bit for bit on the jittered
    arrivals."""
    instants = 80
    ordered = jittered_messages(arm_plant, instants, 0.0, 3)  # no delay: in stamp order
    if order == "jittered":
        arrived = jittered_messages(arm_plant, instants, 10.0, 11)
    else:  # each set in reverse order, joint state first, and one IMU's sample arriving after the next set
        arrived = []
        for k in range(instants):
            arrived += sorted((m for m in ordered if m[3] == k * DT),
                              key=lambda m: (m[1] == 0, -NAMES.index(m[2]) if m[1] == 0 else 0))
        for k in range(0, instants - 1, 3):
            late = next(m for m in arrived if m[3] == k * DT and m[2] == NAMES[1])
            arrived.remove(late)
            arrived.insert(arrived.index(next(m for m in arrived if m[3] == (k + 1) * DT)) + 2, late)
        clock = np.maximum.accumulate([m[3] for m in arrived])  # a receive clock that never runs back
        arrived = [(now, *m[1:]) for now, m in zip(clock, arrived, strict=True)]
    rng = np.random.default_rng(5)
    dropped = {(k * DT, NAMES[rng.integers(len(NAMES))]) for k in rng.choice(instants, 12, replace=False)}

    def received(messages, joint_states):
        return [m for m in messages if (m[3], m[2]) not in dropped and (joint_states or m[1] == 0)]

    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints=ESTIMATED)
    # With the encoders: one cycle per instant, at its stamp (with sample-and-hold encoders, a cycle locks the
    # newest joint state received, so the values are compared without them, below).
    for with_js in (True, False):
        streaming = stream(Estimator(arm_plant, config), received(arrived, with_js))
        assert [result.stamp for result in streaming] == [k * DT for k in range(instants)]
    reference = stream(Estimator(arm_plant, config), received(ordered, False))
    assert_same_results(streaming, reference)
    batch = Estimator(arm_plant, config).run(as_inputs(received(arrived, False)))
    assert_same_results(list(batch.results()), streaming)


def stamped_messages(plant, instants, stamp_error, seed, imus=ARM_IMUS, spread=1.5, skip=()):
    """The IMU samples of each instant k (500 Hz; readings of k DT, stamped k DT + stamp_error(rng) DT, except the
    (k, name) in ``skip``: dropouts), each arriving after a delay uniform in [0, spread DT) in order per sender (the
    DDS spread): (arrival, kind, name, stamp, payload) in arrival order. The stamps go through integer nanoseconds,
    as a message's do."""
    rng = np.random.default_rng(seed)
    messages, last = [], {}
    for k in range(instants):
        q, v = arm_trajectory(k * DT)
        for name, reading in sensor_readings(plant, imus, q, v).items():
            stamp = round((k + stamp_error(rng)) * DT * 1e9) * 1e-9
            if (k, name) not in skip:
                last[name] = max(last.get(name, -np.inf), stamp + rng.uniform(0.0, spread * DT))
                messages.append((last[name], 0, name, stamp, reading))
    messages.sort(key=lambda message: message[0])
    return messages


def taken_stamps(plant, config, messages):
    """(cycles, IMUs) the stamp of the sample each cycle took from each IMU (NaN: none, it holds an older one),
    from the compiled rules over the messages as one window (the batch path)."""
    problem = build_setup(plant, config)
    settings = problem.rules_settings()
    n_imu = len(config.imus)
    state = rules.new_state(n_imu, settings, problem.q_default[problem.art_q])
    window = validate_window(as_inputs(messages, imus=config.imus), problem.name_to_art, n_imu)
    cycles = rules.new_cycles(rules.cycle_capacity(len(window.kind), n_imu), n_imu, len(problem.art_names))
    rules.schedule(state, settings, window, cycles, np.empty(len(window.kind), dtype=np.int64))
    stamps = cycles.sample["stamp"][:cycles.size[0]].copy()
    stamps[1:][stamps[1:] == stamps[:-1]] = np.nan  # an IMU's stamps increase: an equal one is held, not taken
    return stamps


@pytest.mark.parametrize("std", [0.1, 0.15, 0.2, 0.25])
def test_one_instant_one_cycle_with_jittered_stamps(arm_plant, std):
    """Issue 16.7 with stamp jitter: each IMU stamps its sample of instant k at k DT plus its own clock's error
    (normal, std 0.1-0.25 DT: 0.25-0.6 ms at 400 Hz), arrivals spread over 1.5 DT, and the samples of one instant
    still make one cycle: the instants are points of a grid through the stamps, not windows opened at an instant's
    oldest stamp (a65526f's rules.py made 127, 165 and 185 cycles of these 120 instants at std 0.15, 0.2 and
    0.25 DT); streaming == batch bit for bit. A normal error passes DT / 2 now and then (4.6 % of the samples at
    std 0.25 DT): that sample joins the nearer instant, and the count holds here (in 32 of 40 seeds at std 0.25,
    benchmarks/instant_grid.py)."""
    instants = 120
    messages = stamped_messages(arm_plant, instants, lambda rng: rng.normal(0.0, std), 7)
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints=ESTIMATED)
    streaming = stream(Estimator(arm_plant, config), messages)
    assert len(streaming) == instants
    batch = Estimator(arm_plant, config).run(as_inputs(messages))
    assert_same_results(list(batch.results()), streaming)


@pytest.mark.parametrize("bound", [0.25, 0.35])
def test_bounded_stamp_errors_keep_every_sample_in_its_instant(arm_plant, bound):
    """Stamp errors uniform within +-``bound`` DT (the old one-sided window split instants from DT / 4 on), 12
    dropouts, arrivals spread over 1.5 DT: every cycle is one instant and takes exactly the samples sent for it (a
    dropout leaves its IMU out of that instant only), stamped with the newest of them; streaming == batch bit for
    bit."""
    instants = 120
    rng = np.random.default_rng(5)
    skip = {(int(k), NAMES[rng.integers(len(NAMES))]) for k in rng.choice(instants, 12, replace=False)}
    messages = stamped_messages(arm_plant, instants, lambda r: r.uniform(-bound, bound), 9, skip=skip)
    config = EstimatorConfig(imus=ARM_IMUS, estimated_joints=ESTIMATED)
    streaming = stream(Estimator(arm_plant, config), messages)
    sent = np.full((instants, len(NAMES)), np.nan)
    for _, _, name, stamp, _ in messages:
        sent[round(stamp / DT), NAMES.index(name)] = stamp
    np.testing.assert_array_equal(taken_stamps(arm_plant, config, messages), sent)
    assert [result.stamp for result in streaming] == list(np.nanmax(sent, axis=1))
    batch = Estimator(arm_plant, config).run(as_inputs(messages))
    assert_same_results(list(batch.results()), streaming)


@pytest.mark.parametrize("phase", [0.3, 0.7])
def test_a_slower_imu_pairs_with_the_nearest_instant(arm_plant, phase):
    """Two IMUs at 500 Hz and one at 100 Hz stamped ``phase`` DT after every fifth instant: one cycle per 500 Hz
    instant, and once the grid stands (its first 8 instants open windows from the instant's stamps) the 100 Hz
    sample is in the cycle of the 500 Hz instant nearest it; streaming == batch bit for bit."""
    imus = ARM_IMUS[:3]
    instants = 60
    messages = []
    for k in range(instants):
        q, v = arm_trajectory(k * DT)
        readings = sensor_readings(arm_plant, imus, q, v)
        for name in NAMES[:2]:
            messages.append((k * DT + 0.5 * DT, 0, name, k * DT, readings[name]))
        if k % 5 == 0:
            stamp = (k + phase) * DT
            q, v = arm_trajectory(stamp)
            messages.append((stamp + 0.5 * DT, 0, NAMES[2], stamp, sensor_readings(arm_plant, imus, q, v)[NAMES[2]]))
    messages.sort(key=lambda message: message[0])
    config = EstimatorConfig(imus=imus, estimated_joints=ESTIMATED)
    streaming = stream(Estimator(arm_plant, config), messages)
    assert len(streaming) == instants
    with_slow = np.flatnonzero(np.isfinite(taken_stamps(arm_plant, config, messages)[:, 2]))
    assert [k for k in with_slow if k >= 10] == [round(k + phase) for k in range(10, instants, 5)]
    batch = Estimator(arm_plant, config).run(as_inputs(messages, imus=imus))
    assert_same_results(list(batch.results()), streaming)


def test_joint_state_validation_is_one_rule_streaming_and_batch(arm_plant):
    """``inputs.parse_joint_state`` (streaming) and offline replay's per-layout validation decide with the same
    rules: every bad message is dropped for the same reason in both, a partly unknown one is kept in both."""
    q, v = arm_trajectory(0.0)
    cases = [  # (names, positions, velocities, expected reason)
        ((), (), None, RejectReason.EMPTY),
        (ENCODERS, q[:1], None, RejectReason.MISMATCHED_ARRAYS),
        (ENCODERS, q[:2], v[:1], RejectReason.MISMATCHED_ARRAYS),
        (ENCODERS[:1] * 2, q[:2], None, RejectReason.DUPLICATE_NAME),
        (ENCODERS, [q[0], np.nan], None, RejectReason.NON_FINITE),
        (ENCODERS, q[:2], [v[0], np.inf], RejectReason.NON_FINITE),
        (("elsewhere",), q[:1], None, RejectReason.UNKNOWN_NAME),
        ((*ENCODERS, "elsewhere"), q[:3], (), RejectReason.UNKNOWN_NAME),  # kept; the unknown name counted
        (ENCODERS, q[:2], v[:2], None),
    ]
    streaming = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    for k, (names, positions, velocities, reason) in enumerate(cases):
        status = streaming.add_joint_state(names, positions, velocities, stamp=k * DT)
        assert status.reason is reason and status.accepted == (k >= len(cases) - 2)
    batch = Estimator(arm_plant, EstimatorConfig(imus=ARM_IMUS))
    n = len(cases)
    batch.run(OfflineInputs(
        kind=np.ones(n, dtype=np.int64), row=np.arange(n), imu_sensor=np.zeros(0, dtype=np.int64),
        imu_stamp=np.zeros(0), imu_quaternion_wxyz=np.zeros((0, 4)), imu_angular_velocity=np.zeros((0, 3)),
        imu_orientation_present=np.zeros(0, bool), imu_angular_velocity_present=np.zeros(0, bool),
        js_stamp=np.arange(n) * DT, js_names=[tuple(c[0]) for c in cases], js_positions=[c[1] for c in cases],
        js_velocities=[c[2] for c in cases], stamp_ns=np.round(np.arange(n) * DT * 1e9).astype(np.int64),
        now=np.full(n, np.nan)))
    assert batch.reject_counts_by_source() == streaming.reject_counts_by_source() == {
        ("joint_states", "empty_message"): 1, ("joint_states", "mismatched_arrays"): 2,
        ("joint_states", "duplicate_name"): 1, ("joint_states", "non_finite"): 2, ("joint_states", "unknown_name"): 2}
