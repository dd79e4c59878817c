"""Offline replay of a bag (``dofkit replay``): its inputs through the estimator core, its outputs to a new bag.

Where you are: ``ros_dofkit.replay``, the top of it: imports the role modules (``setup``, ``inputs``/``batch``
to read, ``outputs`` to write, ``calibration``, ``pipeline``) and the core's streaming and batched estimators;
nothing in ``replay`` imports this module. The output bag appears complete or not at all (``BagWriter`` writes
it aside and renames it when done; every error, KeyboardInterrupt and signal removes it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.offline import OfflineRun
from ros_dofkit.replay.batch import WINDOW_MESSAGES, iter_offline_inputs, read_offline_inputs
from ros_dofkit.replay.calibration import calibrate_from_inputs
from ros_dofkit.replay.hinge_calibration import hinge_calibrated
from ros_dofkit.replay.inputs import bag_inputs, check_input_topics, truth_from_blocks, truth_from_records
from ros_dofkit.replay.messages import MessageFactory
from ros_dofkit.replay.outputs import OutputWriter
from ros_dofkit.replay.overlap import InOrderCalls, Prefetch, usable_cores
from ros_dofkit.replay.pipeline import ReplayError, ReplayLoop, ReplayStatistics, Truth, tracking_report
from ros_dofkit.replay.setup import TRUTH_TOPIC, ReplaySetup
from ros_dofkit.ros.bag_io import BagError, BagWriter
from ros_dofkit.ros.output_files import remove_abandoned_partials


@dataclass(frozen=True)
class ReplayOutcome:
    """Offline replay of a bag: its results, statistics, output counts, truth and report (None without truth)."""

    results: list
    statistics: object
    output_counts: dict
    truth: Truth | None
    report: object | None
    estimated_names: tuple
    joint_names: tuple
    #: The calibration taken from the bag (``replay_bag(calibration=...)``), else None.
    calibration: object | None = None


class NoEstimateError(ReplayError):
    """The replay produced no estimate at all (the message says why); no output bag is left behind."""


def no_estimate_reason(config, imu_samples: int, joint_states: int, rejected: int, reject_counts: dict,
                       cycles: int) -> str:
    """Why a replay of ``config`` over such inputs gave no estimate (for :class:`NoEstimateError`)."""
    waiting = [imu.name for imu in config.imus if imu.needs_calibration]
    if waiting:
        return (f"no estimate: IMUs {waiting} wait for calibration (mounting 'calibrate'); pass --calibrate START END "
                "(replay_bag(calibration=(start, end))): the seconds of the bag in which the robot holds its "
                "calibration pose")
    if imu_samples + joint_states == 0:
        return "no estimate: the bag has no input message on the configured topics"
    if rejected:
        reasons = {reason: count for reason, count in reject_counts.items() if count}
        return (f"no estimate: {rejected} of {imu_samples + joint_states} inputs were rejected ({reasons}); none of "
                f"the {cycles} cycles had the IMU samples to estimate from")
    return (f"no estimate: {imu_samples} IMU samples and {joint_states} joint states gave {cycles} cycles, none with "
            "an initialized estimate")


def replay_bag(in_path, setup: ReplaySetup, out_path, storage: str = "sqlite3", progress=None,
               settle_s: float = 0.5, batch: bool = True, calibration: tuple[float, float] | None = None,
               calibration_max_spread_deg: float = 2.0, window: int | None = None,
               hinge_calibration: bool = False) -> ReplayOutcome:
    """Run the estimator core over the bag at ``in_path`` and write its outputs to a new bag at ``out_path``.

    The input bag is only read. ``out_path`` holds the complete output bag or nothing: the bag is written aside
    and renamed when complete (:class:`BagWriter`); on any error, KeyboardInterrupt included, it is removed and the
    error propagates: :class:`BagError` for an existing ``out_path``, unreadable, truncated or corrupt bags and
    wrong topic types, :class:`ReplayError` for inputs that give no estimate. The partial output of an earlier
    replay to ``out_path`` that was killed (SIGKILL) is removed first, with a one-line note on stderr.
    ``progress(fraction, text)`` is called about five times a second.

    ``batch`` (default): run the batched offline path (:mod:`ros_dofkit.replay.batch`: the same compiled cycle
    rules, the same bits, much faster); with ``batch=False``, feed the streaming entry points message by message
    (:class:`ReplayLoop`). The batched path reads, estimates and writes the bag in windows of at most ``window``
    messages (default ``batch.WINDOW_MESSAGES``): its memory does not grow with the bag's length beyond a few
    hundred bytes per cycle, and its outputs do not depend on the window.

    ``calibration`` = ``(start, end)``: first calibrate from the inputs stamped in [start, end) seconds after the
    bag's first input stamp (``ros_dofkit.replay.calibration``: mountings 'calibrate', heading reference), then
    replay the whole bag with the calibrated configuration; the outcome's ``calibration`` holds the result and
    the calibrated parameters. ``hinge_calibration`` (with ``calibration``): then turn the raw IMUs' headings from
    the hinges they share, over the bag from the window's start (``replay.hinge_calibration``). A replay that gives
    no estimate at all raises :class:`NoEstimateError` (why:
    e.g. IMUs waiting for calibration) and leaves no output bag.
    """
    in_path, out_path = Path(in_path), Path(out_path)
    if in_path.resolve() == out_path.resolve():
        raise BagError(f"the output bag must differ from the input bag {in_path}")
    if out_path.exists():
        raise BagError(f"refusing to overwrite {out_path}: it exists already; choose a new output path")
    remove_abandoned_partials(out_path)  # now, before any progress line: its note is one line of its own
    calibrated = None
    read = None
    if hinge_calibration and calibration is None:
        raise ReplayError("hinge_calibration refines a static calibration: it needs calibration=(start, end)")
    if calibration is not None:
        if progress is not None:
            progress(0.0, "reading for calibration")
        read = read_offline_inputs(in_path, setup, None, TRUTH_TOPIC, MessageFactory().typestore)
        start, end = calibration
        calibrated = calibrate_from_inputs(read[0], setup, start, end, calibration_max_spread_deg, str(in_path))
        if hinge_calibration:
            calibrated = hinge_calibrated(read[0], setup, calibrated, str(in_path))
        setup = calibrated.setup
    if batch:
        with collector_paused():
            outcome = _replay_bag_batch(in_path, setup, out_path, storage, progress, settle_s, read, window)
        return dataclasses.replace(outcome, calibration=calibrated)
    topics = check_input_topics(in_path, setup)
    total = sum(count for topic, (_, count) in topics.items()
                if topic in setup.imu_topics or topic == setup.joint_states_topic)
    factory = MessageFactory()
    estimator = Estimator(setup.plant, setup.config)
    truth_records: list = []
    # No journal: a replay that fails deletes its output anyway.
    writer = BagWriter(out_path, storage=storage, typestore=factory.typestore, journal=False)
    try:
        outputs = OutputWriter(writer, setup, estimator, factory)
        # Input stamp (s) -> its header stamp (ns), for the recent inputs: outputs carry the exact nanoseconds.
        stamps_ns: OrderedDict = OrderedDict()
        loop = ReplayLoop(estimator)

        def show(stats):
            if progress is not None:
                done = stats.imu_samples + stats.joint_states
                progress(done / total if total else 1.0,
                         f"{done}/{total} inputs, {stats.cycles} cycles, {stats.span_s:.1f} s of input")

        def inputs():
            for stamp_ns, item in bag_inputs(in_path, setup, factory.typestore, truth_records):
                stamps_ns[item.stamp] = stamp_ns
                if len(stamps_ns) > 4096:
                    stamps_ns.popitem(last=False)
                yield item

        def on_result(result):
            if not getattr(result, "initialized", True):
                return
            outputs.write(result, stamps_ns.get(result.stamp, int(round(result.stamp * 1e9))))

        loop.on_result = on_result
        loop.run(inputs(), progress=show)
        if not any(getattr(r, "initialized", True) for r in loop.results):
            stats = loop.statistics
            raise NoEstimateError(no_estimate_reason(setup.config, stats.imu_samples, stats.joint_states,
                                                     stats.rejected, estimator.reject_counts(), stats.cycles))
        outputs.flush()
        writer.close()
    except BaseException:
        writer.abort()  # nothing is left at out_path
        raise
    results = [r for r in loop.results if getattr(r, "initialized", True)]
    return _outcome(results, loop.statistics, writer.counts, truth_from_records(truth_records), estimator, setup,
                    topics, settle_s, calibrated)


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off inside the block, as it was after it. A batched replay allocates tens of
    thousands of row tuples and arrays per window, none of them in a reference cycle, and the collections they set
    off took ~2 % of its time; what a replay leaves to the collector does not grow with the windows (37 objects,
    its solver's ``Assembler`` and what it holds, after benchmarks/replay_speed.py's bag in 3 windows or in 82)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _outcome(results, statistics, output_counts: dict, truth: Truth | None, estimator, setup: ReplaySetup,
             topics: dict, settle_s: float, calibration=None) -> ReplayOutcome:
    """The :class:`ReplayOutcome` of a finished replay (either path): the joint names, estimated first, and the
    report against the bag's ``truth`` when it held one."""
    estimated_mask = np.asarray(list(estimator.estimated_mask), dtype=bool)
    names = tuple(estimator.joint_state_names)
    estimated_names = tuple(n for n, e in zip(names, estimated_mask, strict=True) if e)
    joint_names = estimated_names + tuple(n for n, e in zip(names, estimated_mask, strict=True) if not e)
    report = None
    if truth is not None and len(results):
        compared = tuple(n for n in joint_names if n in truth.names)
        counts = {f"imu {name}": 0 for name in setup.config.imu_names}
        for topic, name in setup.imu_topics.items():
            counts[f"imu {name}"] = topics.get(topic, (None, 0))[1]
        counts["joint_states"] = topics.get(setup.joint_states_topic, (None, 0))[1]
        report = tracking_report(results, truth, compared, estimated_names, counts, statistics.cycle_latency_s,
                                 settle_s=settle_s)
    return ReplayOutcome(results, statistics, output_counts, truth, report, estimated_names, joint_names,
                         calibration)


def _replay_bag_batch(in_path: Path, setup: ReplaySetup, out_path: Path, storage: str, progress,
                      settle_s: float, read=None, window: int | None = None) -> ReplayOutcome:
    """:func:`replay_bag` through the batched offline path (``ros_dofkit.replay.batch``), one window of at most
    ``window`` messages (default ``batch.WINDOW_MESSAGES``) at a time: read, estimated (the estimator carries its
    state from window to window, so the outputs do not depend on the window), written. Kept for the outcome: the
    per-cycle arrays without the poses (a few hundred bytes a cycle). ``read``: the ``read_offline_inputs`` of the
    bag when it was already read whole (calibration), else None."""
    started = time.perf_counter()
    factory = MessageFactory()
    topics: dict = {}
    # On more than one core, window k+1 is read and window k-1 written while window k is estimated (module overlap:
    # each stage one thread, in order, so the output is the same bytes).
    overlap = read is None and usable_cores() > 1
    if read is not None:
        topics.update(read[2])

    def windows_of_bag():
        return iter_offline_inputs(in_path, setup, topics, TRUTH_TOPIC, factory.typestore,
                                   window=window or WINDOW_MESSAGES)

    estimator = offline = Estimator(setup.plant, setup.config)
    runs, truth_blocks = [], []
    imu_samples = joint_states = rejected = read_messages = 0
    first_stamp = last_stamp = None
    if progress is not None:
        progress(0.0, "reading")
    # No journal: a replay that fails deletes its output anyway.
    writer = BagWriter(out_path, storage=storage, typestore=factory.typestore, journal=False)
    prefetch = writes = None
    try:
        outputs = OutputWriter(writer, setup, estimator, factory)
        if read is not None:
            windows = iter([read[:2]])
        elif overlap:
            prefetch, writes = Prefetch(windows_of_bag), InOrderCalls(outputs.write_run)
            windows = iter(prefetch)
        else:
            windows = windows_of_bag()
        for inputs, window_truth in windows:
            run = offline.feed(inputs)
            if writes is not None:
                writes.submit(run, np.flatnonzero(run.initialized))
            else:
                outputs.write_run(run, np.flatnonzero(run.initialized))
            # Written: keep a compact copy without the poses (the run's arrays are views of larger buffers).
            runs.append(OfflineRun.concatenate([run], keep_poses=False))
            truth_blocks += window_truth
            imu_samples += int(np.sum(inputs.kind == 0))
            joint_states += int(np.sum(inputs.kind == 1))
            rejected += int(run.rejected.sum())
            stamps = inputs.input_stamps()
            if stamps.size:
                low, high = float(stamps.min()), float(stamps.max())
                first_stamp = low if first_stamp is None else min(first_stamp, low)
                last_stamp = high if last_stamp is None else max(last_stamp, high)
            read_messages += len(inputs.kind) + sum(len(stamps) for stamps, _, _ in window_truth)
            if progress is not None:
                total = sum(topics[t][1] for t in (*setup.imu_topics, setup.joint_states_topic, TRUTH_TOPIC)
                            if t in topics) if read is None else read_messages
                progress(min(read_messages / total, 1.0) if total else 1.0,
                         f"{read_messages}/{total} messages, {run.statistics['cycles']} cycles")
        if writes is not None:
            writes.finish()
        run = OfflineRun.concatenate(runs, keep_poses=False) if runs else None
        if run is None or not run.initialized.any():
            raise NoEstimateError(no_estimate_reason(
                setup.config, imu_samples, joint_states, rejected,
                run.counts_by_reason if run is not None else {}, len(run) if run is not None else 0))
        writer.close()
    except BaseException:
        if writes is not None:
            writes.stop(cancel=True)  # the bag is no longer written before it is removed
        writer.abort()  # nothing is left at out_path
        raise
    finally:
        if prefetch is not None:
            prefetch.close()
    wall = time.perf_counter() - started
    cycles = len(run)
    statistics = ReplayStatistics(
        imu_samples=imu_samples, joint_states=joint_states, rejected=rejected, cycles=cycles,
        resets=run.statistics["resets"],
        # Offline, cycles are computed together: the per-cycle figure is the wall time shared out.
        cycle_latency_s=[wall / cycles] * cycles if cycles else [], wall_time_s=wall,
        first_stamp=first_stamp, last_stamp=last_stamp)
    if progress is not None:
        progress(1.0, f"{cycles} cycles, {statistics.span_s:.1f} s of input")
    return _outcome(run.results(run.initialized), statistics, writer.counts, truth_from_blocks(truth_blocks), estimator,
                    setup, topics, settle_s)
