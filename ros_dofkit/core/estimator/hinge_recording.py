"""The live hinge calibration: after a stand (``Estimator.calibrate``), record the estimator's orientations over a
motion, fit the raw IMUs' headings from the joints between them, and adopt the result in the running estimator.

Where you are: ``ros_dofkit.core.estimator`` (ROS-free); imports the estimator's public calibration API
(``Estimator.calibration``, ``record_orientations``, ``recorded_orientations``, ``adopt_hinge_calibration``) and
``core.assembly.hinge_calibration`` (the math and its papers). Used by ``nodes.hinge_calibration_service`` (the node's
``~/calibrate_hinges``); tests drive it with ``Estimator.process_imu`` as the node does.

Why. A raw IMU (gyro + accelerometer, no magnetometer) calibrated on a stand keeps its filter's own heading inside
its mounting; ``dofkit replay --calibrate START END --hinge-calibration`` fixes it offline from the motion after the
stand (``replay.hinge_calibration``). Live there is no bag to read again: the motion must be kept while it happens.
What is kept are the orientations the estimator's rules take (a raw IMU's from its running filter, the one the stand
saw, so the heading frame is the stand's): the calibration windows grow to ``max_samples`` per IMU (bounded memory,
their recent samples before the start included) until the newest orientation stamp is ``duration_s`` past the
start (data time: a bag played at any rate covers the same motion). Then ``calibrate_filter_headings``, the function
the offline path calls, fits the turns, and the estimator adopts the turned mountings and turns the filters' outputs
by the same angles, which is what the offline path's parameters (``mounting``, ``filter_heading`` += turn) do. On
the same recording, with the stand's samples in the recording, both give the same mountings
(``test_estimator_hinge_recording``).

Failures are :class:`HingeCalibrationError` (a :class:`CalibrationError`) and leave the estimator as it was: no
stand calibration yet, no raw IMU of the stand that shares a hinge with another IMU, too little motion, a vertical
axis, too few common samples (the fit's typed errors, their text kept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ros_dofkit.core.assembly.errors import AssemblyValueError
from ros_dofkit.core.assembly.hinge_calibration import HingeCalibration, calibrate_filter_headings, joint_pairs
from ros_dofkit.core.estimator.estimator import CalibrationError, Estimator


class HingeCalibrationError(CalibrationError):
    """The hinge calibration cannot start or its fit failed; the estimator is unchanged."""


@dataclass(frozen=True)
class HingeRecordingSettings:
    """``duration_s``: seconds of data (orientation stamps) to record, > 0; ``max_samples``: samples kept per IMU at
    most (memory: 80 bytes each), >= 20 (``hinge_calibration.MIN_SAMPLES``)."""

    duration_s: float = 20.0
    max_samples: int = 20000

    def __post_init__(self):
        duration = self.duration_s
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not (
                math.isfinite(duration) and duration > 0.0):
            raise HingeCalibrationError(f"duration_s: expected a finite number of seconds > 0, got {duration!r}")
        if isinstance(self.max_samples, bool) or not isinstance(self.max_samples, int) or self.max_samples < 20:
            raise HingeCalibrationError(f"max_samples: expected an integer >= 20, got {self.max_samples!r}")


@dataclass(frozen=True)
class MotionRecord:
    """What :meth:`HingeRecording.stop` hands to :meth:`HingeRecording.fit`: ``orientations`` {IMU:
    ``OrientationSeries`` of R_GS as the rules took them}, ``mountings`` {IMU: R_BS or None}, ``R_WG``, ``q_cal``."""

    orientations: dict
    mountings: dict
    R_WG: np.ndarray
    q_cal: np.ndarray


class HingeRecording:
    """One hinge calibration of ``estimator``: construction checks that it can run and starts recording;
    :attr:`covered_s` / :attr:`done` follow the motion; :meth:`finish` (= :meth:`stop`, :meth:`fit`, :meth:`adopt`)
    fits and adopts, :meth:`cancel` drops it."""

    def __init__(self, estimator: Estimator, settings: HingeRecordingSettings):
        calibration = estimator.calibration
        if calibration is None:
            raise HingeCalibrationError("no stand calibration yet: call ~/calibrate (Estimator.calibrate) with the "
                                        "subject in the calibration pose first; the hinge calibration refines it")
        self.estimator, self.settings = estimator, settings
        config = estimator.config
        self._bodies = dict(zip(config.imu_names, estimator.setup.body_index.tolist(), strict=True))
        self._turnable = [name for name in estimator.filtered_imus() if name in calibration.R_BS]
        pairs = joint_pairs(estimator.plant, self._bodies)
        if not any(name in self._turnable for pair in pairs for name in (pair.parent_imu, pair.child_imu)):
            raise HingeCalibrationError(
                f"no raw IMU calibrated on the stand shares a hinge (one or two revolute joints) with another IMU: "
                f"raw and calibrated {self._turnable}, IMU pairs across hinges "
                f"{[(p.parent_imu, p.child_imu) for p in pairs]}")
        estimator.record_orientations(settings.max_samples)
        self.start_stamp = estimator.newest_orientation_stamp()
        self._emptied_at_start = estimator.orientation_windows_emptied

    @property
    def covered_s(self) -> float:
        """Seconds of data recorded so far: the newest orientation stamp minus the one at the start (0 before)."""
        newest = self.estimator.newest_orientation_stamp()
        if math.isnan(self.start_stamp):
            self.start_stamp = newest  # nothing kept at the start: the first sample starts the motion
        return 0.0 if math.isnan(newest) else max(0.0, newest - self.start_stamp)

    @property
    def interrupted(self) -> bool:
        """True once the estimator dropped recorded samples (a clock jump back, a reset, a stand calibration that
        turned raw IMUs' headings): the motion is no longer whole, and the recording should be given up."""
        return self.estimator.orientation_windows_emptied != self._emptied_at_start

    @property
    def done(self) -> bool:
        return self.covered_s >= self.settings.duration_s

    def cancel(self) -> None:
        """Stop recording; nothing is adopted."""
        self.estimator.recorded_orientations()

    def stop(self) -> MotionRecord:
        """Stop recording: the recorded orientations and what the fit needs of the estimator now (its mountings,
        world alignment and calibration pose), as a :class:`MotionRecord` that :meth:`fit` reads without touching
        the estimator (so that a node can fit in a worker thread while it keeps estimating)."""
        estimator = self.estimator
        return MotionRecord(estimator.recorded_orientations(),
                            {name: estimator.mounting(name) for name in self._bodies}, estimator.R_WG,
                            estimator.calibration.q_cal)

    def fit(self, record: MotionRecord) -> HingeCalibration:
        """The turns from ``record`` (``calibrate_filter_headings``); :class:`HingeCalibrationError` with the fit's
        reason. Reads the plant and ``record`` only."""
        try:
            return calibrate_filter_headings(self.estimator.plant, record.q_cal, record.R_WG, self._bodies,
                                             record.mountings, record.orientations, self._turnable)
        except AssemblyValueError as error:
            raise HingeCalibrationError(str(error)) from None

    def adopt(self, hinge: HingeCalibration) -> None:
        """The estimator takes the turned mountings and turns its filters (``Estimator.adopt_hinge_calibration``)."""
        self.estimator.adopt_hinge_calibration(hinge.R_BS, hinge.filter_turns)

    def finish(self) -> HingeCalibration:
        """:meth:`stop`, :meth:`fit` and :meth:`adopt` in one call; on :class:`HingeCalibrationError` the estimator is
        unchanged."""
        hinge = self.fit(self.stop())
        self.adopt(hinge)
        return hinge
