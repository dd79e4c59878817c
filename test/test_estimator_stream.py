"""Tests of the node's compiled cycle (ros_dofkit.core.estimator.stream): it streams only a start the batch path
would solve from bit for bit (Assembler.set_positions keeps it as given), and leaves every other one to the batch
path; what it streams equals the batch path (the streaming == batch tests of test_estimator_estimator and
test_estimator_rules run it on every ordinary cycle)."""

import numpy as np
import pytest

from ros_dofkit.core.estimator import EstimatorConfig, ImuConfig, rules, stream
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.inputs import RejectReason
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.spatial import matrix_to_quat, rotvec_to_matrix

EPS = np.finfo(float).eps


@pytest.fixture(scope="module")
def arm_plant():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


@pytest.fixture(scope="module")
def quadruped():
    return build_plant([ModelSpec("quadruped.urdf", "quadruped", "floating")])


def streamed_estimator(plant):
    """An Estimator of the quadruped's trunk IMU after three cycles (the first assembles, the others stream)."""
    estimator = Estimator(plant, EstimatorConfig(imus=(ImuConfig("trunk", "trunk_imu_link"),)))
    for k in range(3):
        R = rotvec_to_matrix([0.1 * k, -0.05 * k, 0.2])
        status, results = estimator.process_imu("trunk", 1.0 + 0.01 * k, matrix_to_quat(R), [0.1, 0.0, 0.2])
        assert status.ok and len(results) == 1
    return estimator


def test_the_compiled_cycle_streams_only_starts_set_positions_keeps(quadruped):
    """From the last cycle's message, starts whose base quaternion is scaled by 1 + k eps (and one with a NaN): the
    compiled cycle streams only those Assembler.set_positions keeps bit for bit (the batch path's start), declines
    (NOT_SET) every start set_positions normalizes or refuses, and streams the solved q itself."""
    estimator = streamed_estimator(quadruped)
    assembler = estimator._assembler
    frames = assembler.frame_tracking()
    buffers = estimator._stream
    solved = estimator._q_current.copy()
    qs = int(frames.floating_q[0])

    def outcome(q):
        return stream.stream_cycle(frames.tracker, estimator._message, buffers, estimator._stream_problem,
                                   estimator._tree, frames.held_q, frames.floating_q, q, solved, True,
                                   buffers.R_GS[0], estimator._R_WG,
                                   float(estimator.config.velocity_regularization))

    assert outcome(solved.copy()) == stream.STREAMED
    outcomes = {}
    for k in (0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 1e3, 1e9):
        q = solved.copy()
        q[qs:qs + 4] *= 1.0 + k * EPS
        assembler.set_positions(q)
        kept = np.array_equal(assembler.get_positions(), q)
        outcomes[k] = outcome(q)
        assert outcomes[k] in (stream.STREAMED, stream.NOT_SET)
        if outcomes[k] == stream.STREAMED:
            assert kept, f"streamed a start set_positions changes (scale 1 + {k} eps)"
        if not kept:
            assert outcomes[k] == stream.NOT_SET
    assert outcomes[1e3] == outcomes[1e9] == stream.NOT_SET
    q = solved.copy()
    q[qs + 4] = np.nan
    assert outcome(q) == stream.NOT_SET


def reading_of(quaternion_wxyz, gyro, orientation_present=True, gyro_present=True):
    """An Imu message's 37 values (rules.READING) as the node reads them: read-only."""
    reading = np.zeros(rules.READING_SIZE)
    reading[rules.READING["orientation_xyzw"]] = np.roll(quaternion_wxyz, -1)
    reading[rules.READING["angular_velocity"]] = gyro
    reading[4] = 0.0 if orientation_present else -1.0
    reading[16] = 0.0 if gyro_present else -1.0
    reading[28] = -1.0  # no accelerometer
    reading.flags.writeable = False
    return reading


def test_an_imu_reading_is_offered_as_process_imu_offers_its_fields(arm_plant):
    """Estimator.process_imu_reading (one compiled call) gives process_imu's status and cycles, bit for bit, for
    good samples, samples marked partly absent, a non-unit and a zero quaternion, a NaN gyro, a repeated and a stale
    stamp, an unknown IMU, and a writable reading (copied), on the same message sequence; the counters agree."""
    imus = (ImuConfig("upper_arm", "arm_link3"), ImuConfig("hand", "arm_link7"))
    config = EstimatorConfig(imus=imus, stale_timeout_s=0.05)
    by_fields, by_reading = Estimator(arm_plant, config), Estimator(arm_plant, config)
    rng = np.random.default_rng(4)
    messages = []
    for k in range(30):
        t = 2.0 + 0.002 * k
        for name in ("upper_arm", "hand"):
            quaternion, gyro = matrix_to_quat(rotvec_to_matrix(rng.normal(size=3))), rng.normal(size=3)
            messages.append((name, t, quaternion, gyro, True, True, t + 1e-4))
    messages[7] = (*messages[7][:4], False, True, messages[7][6])  # orientation absent, gyro kept
    messages[12] = (*messages[12][:4], True, False, messages[12][6])  # gyro absent
    messages[15] = (messages[15][0], messages[15][1], 1.1 * messages[15][2], *messages[15][3:])  # not unit
    messages[18] = (messages[18][0], messages[18][1], np.zeros(4), *messages[18][3:])
    messages[21] = (*messages[21][:3], np.array([np.nan, 0.0, 0.0]), *messages[21][4:])
    messages.insert(25, messages[24])  # a repeated stamp
    messages.append(("hand", 1.0, *messages[0][2:6], 2.1))  # stale
    messages.append(("elbow", 2.1, *messages[0][2:]))  # unknown
    cycles = 0
    for name, t, quaternion, gyro, has_orientation, has_gyro, now in messages:
        expected = by_fields.process_imu(name, t, quaternion, gyro, has_orientation, has_gyro, now=now)
        reading = reading_of(quaternion, gyro, has_orientation, has_gyro)
        got = by_reading.process_imu_reading(name, t, reading if name != "hand" else np.array(reading), now)
        assert (got[0].accepted, got[0].reason, got[0].detail) == (expected[0].accepted, expected[0].reason,
                                                                   expected[0].detail)
        assert len(got[1]) == len(expected[1])
        cycles += len(got[1])
        for a, b in zip(got[1], expected[1], strict=True):
            assert (a.stamp, a.observed_sensors, a.stale_sensors) == (b.stamp, b.observed_sensors, b.stale_sensors)
            np.testing.assert_array_equal(a.q, b.q)
            np.testing.assert_array_equal(a.v, b.v)
    assert cycles >= 25
    status, results = by_reading.process_imu_reading("hand", 3.0, np.zeros(36), 3.0)  # not a reading
    assert (status.accepted, status.reason, results) == (False, RejectReason.MISMATCHED_ARRAYS, ())
    assert by_reading.statistics() == by_fields.statistics()
    assert by_reading.reject_counts_by_source() == {**by_fields.reject_counts_by_source(),
                                                    ("hand", "mismatched_arrays"): 1}
    assert {reason for (_, reason) in by_fields.reject_counts_by_source()} >= {
        "orientation_absent", "non_unit_quaternion", "zero_quaternion", "non_finite", "repeated_stamp", "stale_stamp",
        "unknown_sensor"}
