"""ros.magnetometer_frames: a MagneticField's frame_id against its IMU's newest Imu frame_id, message by message (the
node, streaming replay) and a window of a bag at a time (batched replay), the state carried across windows."""

from __future__ import annotations

import numpy as np
import pytest

from ros_dofkit.ros.magnetometer_frames import field_frame_problem, window_fields_match


@pytest.mark.parametrize(("field_frame", "imu_frame"), [
    ("hand_imu", "hand_imu"), ("/hand_imu", "hand_imu"), ("hand_imu", "/hand_imu"),  # tf2 ignores a leading "/"
    ("", "hand_imu"), ("hand_imu", ""), ("", ""), ("hand_imu", None),  # unknown on one side: not checked (as Imu)
])
def test_the_same_frame_or_an_unknown_one_is_no_problem(field_frame, imu_frame):
    assert field_frame_problem("hand", field_frame, imu_frame) == ""


def test_another_frame_names_the_imu_and_both_frames():
    problem = field_frame_problem("hand", "upper_arm_imu", "hand_imu")
    assert "'hand'" in problem and "'upper_arm_imu'" in problem and "'hand_imu'" in problem


def message_by_message(messages) -> list:
    """The node's and streaming replay's reading: each field against its IMU's newest Imu frame so far."""
    newest, verdicts = {}, []
    for kind, sensor, frame in messages:
        if kind == "imu":
            newest[sensor] = frame
        else:
            verdicts.append(not field_frame_problem(str(sensor), frame, newest.get(sensor)))
    return verdicts


def in_windows(messages, cuts, sensors) -> list:
    """:func:`window_fields_match` over the windows ``messages[cuts[k]:cuts[k + 1]]``."""
    newest, verdicts = {}, []
    for start, stop in zip(cuts[:-1], cuts[1:], strict=True):
        window = messages[start:stop]
        imu = [k for k, m in enumerate(window) if m[0] == "imu"]
        field = [k for k, m in enumerate(window) if m[0] == "field"]
        verdicts += window_fields_match(
            newest, sensors, [window[k][1] for k in field], [window[k][2] for k in field], field,
            np.array([window[k][1] for k in imu], dtype=np.int64), [window[k][2] for k in imu], imu).tolist()
    return verdicts


def test_windows_carry_the_newest_frame_and_equal_message_by_message():
    """IMU 0 changes frame mid-stream; a field comes first in a window whose IMU messages were all in the window
    before; IMU 1's first field precedes its first Imu (not checked); IMU 2 has no magnetometer."""
    messages = [("imu", 0, "a"), ("imu", 2, "z"), ("field", 1, "q"), ("imu", 1, "b"), ("imu", 0, "a"),
                ("field", 0, "a"), ("field", 0, "b"),  # kept; another frame
                ("imu", 2, "z"),
                ("field", 0, "b"), ("field", 1, "b"), ("field", 1, "/b"),  # in the next window: IMU 0 was in "a"
                ("imu", 0, "b"), ("field", 0, "b"), ("field", 0, "a"), ("field", 0, "")]
    expected = [True, True, False, False, True, True, True, False, True]
    assert message_by_message(messages) == expected
    for cuts in ([0, len(messages)], [0, 8, len(messages)], [0, 3, 8, 9, 12, len(messages)],
                 list(range(len(messages) + 1))):
        assert in_windows(messages, cuts, [0, 1]) == expected, cuts
