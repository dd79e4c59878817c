"""The replay loop: inputs in stamp order into the estimator core's streaming entry points.

You are in ``ros_dofkit.replay``. This is what the live node does with each message (offer it to
:class:`~ros_dofkit.core.estimator.estimator.Estimator` through ``process_imu`` / ``process_joint_state``, which run the
cycles that are due and return their results), applied to inputs that come from a bag or from the simulator
instead of DDS. Nothing here imports ROS: inputs are plain
:class:`ImuInput` / :class:`JointStateInput` records and results are the core's ``EstimatorResult``.

Truth comparison (:func:`tracking_report`): the estimate of a cycle stamped t is compared with the true
coordinates at t, linearly interpolated from the truth samples (the truth is a smooth motion sampled at the IMU
rate, so the interpolation error is far below a hundredth of a degree).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ros_dofkit.ros.output_files import write_file


class ReplayError(ValueError):
    """Inputs or truth given to the replay loop are inconsistent (e.g. no estimate, unknown truth names)."""


@dataclass(frozen=True)
class ImuInput:
    """One IMU sample: R_GS as (w, x, y, z), gyro w_S (rad/s), accelerometer f_S (m/s^2, for raw IMUs' filters);
    absent fields are False / NaN / None."""

    name: str
    stamp: float
    quaternion_wxyz: np.ndarray
    angular_velocity: np.ndarray | None = None
    orientation_present: bool = True
    angular_velocity_present: bool = True
    linear_acceleration: np.ndarray | None = None
    orientation_covariance: np.ndarray | None = None  # (9,) the message's (REP-145; imu_covariance_weighting)


@dataclass(frozen=True)
class MagneticFieldInput:
    """One magnetometer sample of raw IMU ``name``: the field in tesla, sensor frame (NaN when absent);
    ``frames_match`` False when its frame_id is not its IMU's (``ros.magnetometer_frames``: dropped, counted)."""

    name: str
    stamp: float
    field_T: np.ndarray
    frames_match: bool = True


@dataclass(frozen=True)
class JointStateInput:
    """One (possibly partial) encoder message: names, positions and velocities (empty = none)."""

    stamp: float
    names: tuple
    positions: np.ndarray
    velocities: np.ndarray | None = None


@dataclass(frozen=True)
class OdometryInput:
    """One base pose from the robot's odometry: position (3,) and quaternion (w, x, y, z) of the base link, and
    whether the message's frames were the configured ones (``ros.imu_input.odometry_frames_problem``)."""

    stamp: float
    position: np.ndarray
    quaternion_wxyz: np.ndarray
    frames_match: bool = True


@dataclass(frozen=True)
class ClockInput:
    """The receive clock (``/clock`` under ``use_sim_time``); going back resets tracking (looping playback)."""

    stamp: float


def simulation_inputs(run) -> Iterator[ImuInput | JointStateInput]:
    """The inputs of a :class:`~ros_dofkit.core.simulation.SimulationRun`, in stamp order."""
    for stamp, kind, name, k in run.events():
        if kind == "imu":
            readings = run.imu(name)
            yield ImuInput(name, stamp, readings.quaternion_wxyz[k], readings.angular_velocity[k])
        else:
            encoders = run.encoders
            yield JointStateInput(stamp, encoders.names, encoders.positions[k], encoders.velocities[k])


@dataclass
class ReplayStatistics:
    """Counters of one replay: inputs by kind, cycles, and per-cycle wall times (input to result, seconds)."""

    imu_samples: int = 0
    joint_states: int = 0
    clock_messages: int = 0
    rejected: int = 0
    cycles: int = 0
    resets: int = 0  # tracking resets (clock jumps), from the estimator at the end of run()
    cycle_latency_s: list = field(default_factory=list)
    wall_time_s: float = 0.0
    first_stamp: float | None = None
    last_stamp: float | None = None

    @property
    def span_s(self) -> float:
        """Input time covered (last minus first input stamp)."""
        if self.first_stamp is None:
            return 0.0
        return self.last_stamp - self.first_stamp


class ReplayLoop:
    """Feeds inputs to an :class:`~ros_dofkit.core.estimator.estimator.Estimator` and collects its results.

    ``on_result(result)`` is called after every cycle (e.g. to write output messages). Inputs must come in
    stamp order; out-of-order ones are the estimator's business (rejected and counted there, as live).
    """

    def __init__(self, estimator, on_result: Callable | None = None):
        self.estimator = estimator
        self.on_result = on_result
        self.results: list = []
        self.statistics = ReplayStatistics()

    def feed(self, item) -> tuple:
        """Offer one input through the core's streaming entry points (``process_imu`` / ``process_joint_state``,
        as the node does); return the results of the cycles it completed (0 to 2)."""
        started = time.perf_counter()
        stats = self.statistics
        estimator = self.estimator
        if isinstance(item, ImuInput):
            stats.imu_samples += 1
            status, results = estimator.process_imu(item.name, item.stamp, item.quaternion_wxyz,
                                                    item.angular_velocity, item.orientation_present,
                                                    item.angular_velocity_present,
                                                    linear_acceleration=item.linear_acceleration,
                                                    orientation_covariance=item.orientation_covariance)
        elif isinstance(item, JointStateInput):
            stats.joint_states += 1
            status, results = estimator.process_joint_state(item.names, item.positions, item.velocities,
                                                            stamp=item.stamp)
        elif isinstance(item, OdometryInput):
            status, results = estimator.process_odometry(item.stamp, item.position, item.quaternion_wxyz,
                                                         frames_match=item.frames_match)
        elif isinstance(item, MagneticFieldInput):  # raw IMUs' filters keep it; no cycle
            stats.rejected += not estimator.process_magnetic_field(item.name, item.stamp, item.field_T,
                                                                   item.frames_match).accepted
            return ()
        elif isinstance(item, ClockInput):
            stats.clock_messages += 1
            estimator.observe_clock(item.stamp)
            return ()
        else:
            raise TypeError(f"expected ImuInput, JointStateInput, OdometryInput or ClockInput, got "
                            f"{type(item).__name__}")
        if not status.accepted:
            stats.rejected += 1
        stats.first_stamp = item.stamp if stats.first_stamp is None else min(stats.first_stamp, item.stamp)
        stats.last_stamp = item.stamp if stats.last_stamp is None else max(stats.last_stamp, item.stamp)
        for result in results:
            stats.cycles += 1
            if self.on_result is not None:
                self.on_result(result)
            self.results.append(result)
            stats.cycle_latency_s.append(time.perf_counter() - started)
        return results

    def run(self, inputs: Iterable, progress: Callable | None = None) -> list:
        """Feed every input; ``progress(stats)`` is called about every 0.2 s of wall time. Returns the results."""
        started = time.perf_counter()
        next_report = started + 0.2
        for item in inputs:
            self.feed(item)
            if progress is not None and time.perf_counter() >= next_report:
                self.statistics.wall_time_s = time.perf_counter() - started
                progress(self.statistics)
                next_report = time.perf_counter() + 0.2
        self.statistics.wall_time_s = time.perf_counter() - started
        self.statistics.resets = self.estimator.statistics()["resets"]
        if progress is not None:
            progress(self.statistics)
        return self.results


@dataclass(frozen=True)
class Truth:
    """True articulated coordinates: ``stamps`` (T,) increasing, ``names`` (n,), ``positions`` (T, n)."""

    stamps: np.ndarray
    names: tuple
    positions: np.ndarray

    def __post_init__(self):
        stamps = np.asarray(self.stamps, dtype=float)
        positions = np.asarray(self.positions, dtype=float)
        if stamps.ndim != 1 or positions.shape != (stamps.size, len(self.names)):
            raise ReplayError(f"truth: expected stamps (T,) and positions (T, {len(self.names)}), got "
                              f"{stamps.shape} and {positions.shape}")
        if stamps.size < 2 or np.any(np.diff(stamps) <= 0):
            raise ReplayError("truth: expected at least two samples with increasing stamps")

    def at(self, stamps, names) -> np.ndarray:
        """Truth of ``names`` at ``stamps`` (linear interpolation; NaN outside the truth's time span)."""
        index = {name: i for i, name in enumerate(self.names)}
        missing = [n for n in names if n not in index]
        if missing:
            raise ReplayError(f"truth has no coordinates {missing}; it has {list(self.names)}")
        stamps = np.asarray(stamps, dtype=float)
        out = np.empty((stamps.size, len(names)))
        for j, name in enumerate(names):
            out[:, j] = np.interp(stamps, self.stamps, self.positions[:, index[name]], left=np.nan, right=np.nan)
        return out


def truth_from_simulation(run) -> Truth:
    """The true articulated coordinates of a :class:`~ros_dofkit.core.simulation.SimulationRun`."""
    return Truth(np.asarray(run.times), tuple(run.truth_names), np.asarray(run.truth_positions))


@dataclass(frozen=True)
class TrackingReport:
    """How well a replay tracked the truth, and how fast it ran.

    Attributes:
        joint_names: coordinates compared (the estimated ones first, then the measured ones).
        estimated: (n,) bool, True for estimated coordinates.
        rms_deg / max_deg: (n,) per-coordinate RMS and maximum |error| in degrees, after ``settle_s``.
        sensor_error_deg: {IMU: mean angle between its estimated and observed orientation (deg)}.
        input_rates_hz: {"imu <name>" / "joint_states": samples per second of input time}.
        output_rate_hz: cycles per second of input time.
        latency_p50_ms / latency_p99_ms: input-to-output latency percentiles (ms).
        cycles: number of cycles compared; duration_s: input time covered.
    """

    joint_names: tuple
    estimated: np.ndarray
    rms_deg: np.ndarray
    max_deg: np.ndarray
    sensor_error_deg: dict
    input_rates_hz: dict
    output_rate_hz: float
    latency_p50_ms: float
    latency_p99_ms: float
    cycles: int
    duration_s: float

    def worst_estimated_rms_deg(self) -> float:
        values = self.rms_deg[self.estimated]
        return float(np.max(values)) if values.size else math.nan

    def meets(self, threshold_deg: float) -> bool:
        """True when every estimated coordinate's RMS error is below ``threshold_deg``."""
        values = self.rms_deg[self.estimated]
        return bool(values.size) and bool(np.all(values < threshold_deg))

    def table(self) -> str:
        """The summary as aligned text (what ``dofkit demo`` and ``dofkit replay`` print)."""
        lines = [f"{'joint':<14} {'kind':<10} {'RMS [deg]':>10} {'max [deg]':>10}"]
        for name, flag, rms, worst in zip(self.joint_names, self.estimated, self.rms_deg, self.max_deg,
                                          strict=True):
            lines.append(f"{name:<14} {'estimated' if flag else 'measured':<10} {rms:>10.3f} {worst:>10.3f}")
        lines.append("")
        lines.append(f"{'sensor':<14} {'mean orientation error [deg]':>30}")
        for name, value in self.sensor_error_deg.items():
            lines.append(f"{name:<14} {value:>30.3f}")
        lines.append("")
        rates = ", ".join(f"{name} {rate:.1f} Hz" for name, rate in self.input_rates_hz.items())
        lines.append(f"input rates: {rates}")
        lines.append(f"output rate: {self.output_rate_hz:.1f} Hz over {self.duration_s:.1f} s "
                     f"({self.cycles} cycles)")
        lines.append(f"latency input->output: p50 {self.latency_p50_ms:.2f} ms, p99 {self.latency_p99_ms:.2f} ms")
        return "\n".join(lines)


def result_columns(results) -> tuple:
    """``(stamps (C,), q (C, nq), sensor names, sensor errors (C, n) deg)`` of a list of EstimatorResult, or
    straight from the arrays of an offline run's lazy result sequence
    (``ros_dofkit.core.estimator.offline.ResultSequence``)."""
    run = getattr(results, "run", None)
    if run is not None:
        rows = results.indices
        return run.stamp[rows], run.q[rows], list(run.sensor_names), run.sensor_errors_deg[rows]
    sensor_names = list(results[0].sensor_errors_deg)
    return (np.array([r.stamp for r in results]), np.array([np.asarray(r.q) for r in results]), sensor_names,
            np.array([[r.sensor_errors_deg[name] for name in sensor_names] for r in results]).reshape(
                len(results), len(sensor_names)))


def tracking_report(results, truth: Truth, joint_names, estimated_names, input_counts: dict,
                    latencies_s=(), settle_s: float = 0.5) -> TrackingReport:
    """Compare ``results`` (EstimatorResult list) with ``truth`` over ``joint_names``.

    The first ``settle_s`` seconds after the first result are left out (tracking starts from the default pose).
    ``input_counts`` maps an input label to its sample count (rates are counts over the covered input time).
    """
    if not results:
        raise ReplayError("no estimate was produced: the inputs never made a cycle ready (no IMU or joint state?)")
    joint_names = tuple(joint_names)
    position_names = list(results[0].position_names)
    unknown = [n for n in joint_names if n not in position_names]
    if unknown:
        raise ReplayError(f"unknown coordinates {unknown}; the estimate has {position_names}")
    columns = [position_names.index(n) for n in joint_names]
    stamps, q_all, sensor_names, errors_all = result_columns(results)
    estimate = q_all[:, columns]
    keep = stamps >= stamps[0] + settle_s
    true = truth.at(stamps[keep], joint_names)
    error = np.degrees(estimate[keep] - true)
    valid = np.all(np.isfinite(error), axis=1)
    error = error[valid]
    if error.shape[0] == 0:
        raise ReplayError("no estimate falls inside the truth's time span (after the settling time)")
    sensor_error = {}
    for i, name in enumerate(sensor_names):
        values = errors_all[:, i]
        values = values[np.isfinite(values)]
        sensor_error[name] = float(np.mean(values)) if values.size else math.nan
    duration = float(stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0

    def rate(count):
        return count / duration if duration > 0 else math.nan

    latencies = np.asarray(list(latencies_s), dtype=float) * 1e3
    estimated_names = set(estimated_names)
    return TrackingReport(
        joint_names=joint_names,
        estimated=np.array([n in estimated_names for n in joint_names]),
        rms_deg=np.sqrt(np.mean(error**2, axis=0)),
        max_deg=np.max(np.abs(error), axis=0),
        sensor_error_deg=sensor_error,
        input_rates_hz={label: rate(count) for label, count in input_counts.items()},
        output_rate_hz=rate(len(results) - 1),
        latency_p50_ms=float(np.percentile(latencies, 50)) if latencies.size else math.nan,
        latency_p99_ms=float(np.percentile(latencies, 99)) if latencies.size else math.nan,
        cycles=int(error.shape[0]),
        duration_s=duration,
    )


def plot_tracking(results, truth: Truth | None, joint_names, path, title: str = "estimated vs true joint angles"):
    """Write a PNG with one panel per coordinate: estimate (and truth, when given) in degrees over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    joint_names = list(joint_names)
    position_names = list(results[0].position_names)
    stamps, q_all, _, _ = result_columns(results)
    t0 = stamps[0]
    estimate = np.degrees(q_all[:, [position_names.index(n) for n in joint_names]])
    rows = len(joint_names)
    figure, axes = plt.subplots(rows, 1, figsize=(9, 1.6 * rows + 0.8), sharex=True, squeeze=False)
    true = None if truth is None else np.degrees(truth.at(stamps, joint_names))
    for j, name in enumerate(joint_names):
        axis = axes[j, 0]
        if true is not None:
            axis.plot(stamps - t0, true[:, j], color="0.2", linewidth=2.2, label="true")
        axis.plot(stamps - t0, estimate[:, j], color="tab:orange", linewidth=1.0, label="estimated")
        axis.set_ylabel(f"{name}\n[deg]", fontsize=8)
        axis.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("time [s]")
    figure.tight_layout()
    # Written aside and renamed: the path holds a whole image or none. The format follows the final name's suffix.
    image_format = Path(path).suffix.lstrip(".").lower() or "png"
    try:
        write_file(path, lambda partial: figure.savefig(partial, dpi=90, format=image_format))
    finally:
        plt.close(figure)
