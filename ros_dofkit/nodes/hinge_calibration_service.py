"""``~/calibrate_hinges`` (std_srvs/Trigger) of the estimator node: after a ``~/calibrate`` stand, record the motion,
fit the raw IMUs' headings from the joints between them, and adopt them in the running estimator.

Where you are: the thin node layer (``ros_dofkit.nodes``); imports rclpy, std_srvs and diagnostic_msgs, and the
ROS-free ``core.estimator.hinge_recording`` that holds all the logic (the same fit as ``dofkit replay --calibrate START
END --hinge-calibration``). Used by ``nodes.estimator`` (two hook lines: the service's construction and its entry on
/diagnostics).

Why a service of its own rather than a parameter of ``~/calibrate``: the two steps need different things from the
user (hold still, then move the knees and ankles for ``hinge_calibration.duration`` seconds), fail for different
reasons, and the stand's answer (its mountings, its refusal when the subject moved) is wanted at once, before the
motion; a second Trigger can also be called again to refine the headings without standing again. Trigger has no
request fields, so the motion's length is the parameter ``hinge_calibration.duration`` (read at each call; memory
bounded by ``hinge_calibration.max_samples`` per IMU).

How the call waits without stopping the inputs: the callback is a coroutine (rclpy runs it as a task of the node's
executor, which ``InputLoop`` serves between inputs), in a reentrant callback group of its own, so that the node's
timers and other services keep being served while it waits. It starts the recording and awaits a future that a
0.1 s timer completes when the recorded orientation stamps span the duration (data time: a bag played at any rate
gives the same motion), when the estimator dropped recorded samples (refused: a clock jump back of a looping bag, a
reset or a ``~/calibrate`` meanwhile; ``HingeRecording.interrupted``) or when no new orientation arrived for
:data:`QUIET_TIMEOUT_S` of wall time (refused: the inputs stopped). Meanwhile every input is estimated as usual.
The recording then stops and the fit runs in a worker thread (it reads the plant and the recorded arrays only; 0.6 s
of CPU for seven IMUs over 18 s in process) while the node keeps estimating with the stand's mountings; back on the
executor's thread the estimator adopts the result. The response says what was turned, or, with ``success=false``,
the typed error's text (no ``~/calibrate`` first, no raw IMU on a hinge, too little motion, ...), the estimator
unchanged. Each start and end is one log line; /diagnostics carries the state (idle, recording, fitting, applied,
refused), the progress, the last turns and the refusals.
"""

from __future__ import annotations

import math
import threading
import time

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from std_srvs.srv import Trigger

from ros_dofkit.core.estimator.hinge_recording import HingeCalibrationError, HingeRecording, HingeRecordingSettings

#: Seconds between two looks at the recording's progress.
PROGRESS_PERIOD_S = 0.1
#: Wall-clock seconds without a new orientation after which a recording is given up (the inputs stopped).
QUIET_TIMEOUT_S = 2.0


class HingeCalibrationService:
    """``~/calibrate_hinges`` on ``node`` for its ``estimator`` (see the module docstring)."""

    def __init__(self, node, estimator):
        self._node, self._estimator = node, estimator
        self._recording = None
        self._state, self._message = "idle", "~/calibrate_hinges not called"
        self._turns, self._fit_rms, self._refused, self._applied = {}, {}, 0, 0
        # Reentrant: the coroutine holds its callback group until it answers; in the node's default (mutually
        # exclusive) group it would block the progress timer, the diagnostics timer and the other services.
        self._group = ReentrantCallbackGroup()
        node.create_service(Trigger, "~/calibrate_hinges", self._on_call, callback_group=self._group)

    def _settings(self) -> HingeRecordingSettings:
        get = self._node.get_parameter
        return HingeRecordingSettings(duration_s=float(get("hinge_calibration.duration").value),
                                      max_samples=int(get("hinge_calibration.max_samples").value))

    async def _on_call(self, request, response):
        if self._recording is not None:
            return self._refuse(response, "a hinge calibration is already recording; wait for its answer")
        try:
            recording = HingeRecording(self._estimator, self._settings())
        except HingeCalibrationError as error:
            return self._refuse(response, str(error))
        self._recording = recording
        duration = recording.settings.duration_s
        self._state, self._message = "recording", f"recording {duration:g} s of motion"
        self._node.get_logger().info(f"hinge calibration: recording {duration:g} s of motion from now: move the "
                                     "joints between the IMUs (bend the knees, flex the ankles, walk)")
        try:
            stopped = await self._recorded(recording)
        finally:
            self._recording = None
        if recording.interrupted:
            recording.cancel()
            return self._refuse(response, f"the recorded motion was dropped after {recording.covered_s:.1f} of "
                                          f"{duration:g} s: the clock jumped back (a looping bag, a restarted clock), "
                                          "the estimator was reset or ~/calibrate ran meanwhile; nothing changed; "
                                          "call ~/calibrate_hinges again")
        if stopped:
            recording.cancel()
            return self._refuse(response, f"the inputs stopped: no new orientation for {QUIET_TIMEOUT_S:g} s after "
                                          f"{recording.covered_s:.1f} of {duration:g} s recorded; nothing changed")
        covered = recording.covered_s
        self._state, self._message = "fitting", f"fitting the headings over {covered:.1f} s of motion"
        self._node.get_logger().info(f"hinge calibration: recorded {covered:.1f} s; fitting the headings (the node "
                                     "keeps estimating with the stand's mountings meanwhile)")
        outcome = await self._fitted(recording)
        if isinstance(outcome, HingeCalibrationError):
            return self._refuse(response, str(outcome))
        if isinstance(outcome, Exception):
            raise outcome  # a fault, not a refusal: rclpy reports the callback's exception
        recording.adopt(outcome)
        self._applied += 1
        self._turns = {name: math.degrees(turn) for name, turn in outcome.turns.items()}
        self._fit_rms = {f"{fit.pair.parent_imu}-{fit.pair.child_imu}": fit.rms for fit in outcome.fits}
        turns = ", ".join(f"{name} {turn:.2f}" for name, turn in self._turns.items())
        response.success = True
        response.message = (f"hinge calibration over {covered:.1f} s: headings turned (deg) {turns}; mountings and "
                            "filter headings adopted, tracking restarted")
        self._state, self._message = "applied", response.message
        self._node.get_logger().info(response.message)
        return response

    async def _recorded(self, recording) -> bool:
        """Wait until ``recording`` is done; True when it ended first: interrupted (``recording.interrupted``) or
        the inputs stopped (no new orientation for :data:`QUIET_TIMEOUT_S`)."""
        last = [recording.covered_s, time.monotonic()]

        def finished():
            covered = recording.covered_s
            if covered != last[0]:
                last[:] = [covered, time.monotonic()]
            self._message = f"recording: {covered:.1f} of {recording.settings.duration_s:g} s of motion"
            return recording.done or recording.interrupted or time.monotonic() - last[1] > QUIET_TIMEOUT_S

        await self._until(finished)
        return not recording.done

    async def _fitted(self, recording):
        """The fit of ``recording`` (stopped here, on the executor's thread) computed in a worker thread, so that
        inputs keep being estimated meanwhile: a HingeCalibration, or the exception it raised."""
        record, outcome = recording.stop(), []

        def work() -> None:
            try:
                outcome.append(recording.fit(record))
            except Exception as error:  # handed to the coroutine: a refusal or a fault it re-raises
                outcome.append(error)

        worker = threading.Thread(target=work, name="hinge_calibration_fit", daemon=True)
        worker.start()
        await self._until(lambda: bool(outcome))
        worker.join()
        return outcome[0]

    async def _until(self, condition) -> None:
        """Wait, as a task of the executor, until ``condition()`` holds (looked at every :data:`PROGRESS_PERIOD_S`
        by a timer of this service's callback group)."""
        finished = Future()

        def look() -> None:
            if not finished.done() and condition():
                finished.set_result(True)

        timer = self._node.create_timer(PROGRESS_PERIOD_S, look, callback_group=self._group)
        try:
            await finished
        finally:
            self._node.destroy_timer(timer)

    def _refuse(self, response, reason: str):
        self._refused += 1
        response.success, response.message = False, f"hinge calibration refused: {reason}"
        self._state, self._message = "refused", response.message
        self._node.get_logger().warning(response.message)
        return response

    def diagnostic_status(self) -> DiagnosticStatus:
        """The service's entry on /diagnostics: WARN after a refusal (until a call succeeds), else OK; its state
        (idle, recording, fitting, applied, refused), the last message, how many calls were applied and refused (an
        earlier applied calibration stays in use after a refusal), the last turns (deg) and each joint pair's fit
        RMS (a hinge: rad between the axes both IMUs see; a 2-dof joint: of the axes' cosine)."""
        values = [KeyValue(key="state", value=self._state), KeyValue(key="applied", value=str(self._applied)),
                  KeyValue(key="refused", value=str(self._refused)),
                  *[KeyValue(key=f"turn_deg.{name}", value=f"{turn:.3f}") for name, turn in self._turns.items()],
                  *[KeyValue(key=f"fit_rms.{pair}", value=f"{rms:.4g}") for pair, rms in self._fit_rms.items()]]
        level = DiagnosticStatus.WARN if self._state == "refused" else DiagnosticStatus.OK
        return DiagnosticStatus(level=level, name=f"{self._node.get_name()}: hinge calibration",
                                message=self._message, values=values)
