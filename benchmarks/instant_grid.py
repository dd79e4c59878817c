"""One instant, one cycle under stamp errors: how the free-running cycle rules group IMU samples (issue 16.7).

Where you are: ``benchmarks`` (run as ``.venv/bin/python -m benchmarks.instant_grid``). Imports the estimator
core's compiled rules (``core/estimator/rules.py``) and offline validation, nothing of ROS. Each trial offers the
batch rules 120 instants of 4 IMUs at 500 Hz whose stamps carry errors (normal with std, or uniform within
+-bound, in periods), arrivals spread over 1.5 periods in order per sender, optionally 12 dropouts, then a set a
second later (the bounded wait flushes the last instant; its own cycle is not counted). It counts the trials with
exactly one cycle per instant, and those in which every cycle took exactly its instant's samples. Streaming runs
the same rules (test_estimator_rules checks the bits), so this is the node's grouping too. ``--compare-rules
PATH`` runs another tree's ``rules.py`` (e.g. ``git show a65526f:ros_dofkit/core/estimator/rules.py``) beside
this one, and times ``rules.schedule`` on one long window in both, alternated (a ratio: the machine may be loaded).
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np

from ros_dofkit.core.estimator import rules
from ros_dofkit.core.estimator.offline import OfflineInputs, validate_window

PERIOD = 0.002
IMUS = 4
LEVELS = {"normal": (0.1, 0.15, 0.2, 0.25, 0.3), "uniform": (0.25, 0.3, 0.35, 0.4)}


def stamped_inputs(instants, error, seed, dropouts, spread=1.5):
    """(OfflineInputs, sent) for one trial: ``sent`` (instants, IMUs) the stamp each IMU sent for each instant (NaN:
    dropped); ``error(rng)`` one stamp error in periods."""
    rng = np.random.default_rng(seed)
    skip = set()
    if dropouts:
        pick = np.random.default_rng(1000 + seed)
        skip = {(int(k), int(pick.integers(IMUS))) for k in pick.choice(instants, dropouts, replace=False)}
    sent = np.full((instants, IMUS), np.nan)
    rows, last = [], np.full(IMUS, -np.inf)
    for k in range(instants):
        for i in range(IMUS):
            stamp = round((k + error(rng)) * PERIOD * 1e9) * 1e-9
            if (k, i) not in skip:
                last[i] = max(last[i], stamp + rng.uniform(0.0, spread * PERIOD))
                rows.append((last[i], i, stamp))
                sent[k, i] = stamp
    rows.sort()
    end = rows[-1][0] + 1.0
    rows += [(end, i, round(end * 1e9) * 1e-9) for i in range(IMUS)]
    m = len(rows)
    inputs = OfflineInputs(
        kind=np.zeros(m, np.int64), row=np.arange(m), imu_sensor=np.array([r[1] for r in rows], np.int64),
        imu_stamp=np.array([r[2] for r in rows]), imu_quaternion_wxyz=np.tile([1.0, 0.0, 0.0, 0.0], (m, 1)),
        imu_angular_velocity=np.zeros((m, 3)), imu_orientation_present=np.ones(m, bool),
        imu_angular_velocity_present=np.ones(m, bool), js_stamp=np.zeros(0), js_names=[], js_positions=[],
        js_velocities=[], stamp_ns=np.array([round(r[2] * 1e9) for r in rows], np.int64),
        now=np.array([r[0] for r in rows]))
    return inputs, sent


def schedule(module, inputs):
    """Cycles (module's ``Cycles``) of one window through ``module``'s rules from a fresh state, and the seconds
    ``schedule`` took."""
    settings = module.RulesSettings(stale_timeout=0.1, jump_reset=1.0, future_tolerance=0.05, sync_tolerance=0.0,
                                    sync_joint_states=False, measured_count=0, js_offset_ns=0, odometry_offset_ns=0)
    state = module.new_state(IMUS, settings, np.zeros(0))
    window = validate_window(inputs, {}, IMUS)
    m = len(window.kind)
    cycles = module.new_cycles(module.cycle_capacity(m, IMUS), IMUS, 0)
    start = time.perf_counter()
    module.schedule(state, settings, window, cycles, np.empty(m, np.int64))
    return cycles, time.perf_counter() - start


def taken(cycles, last_stamp):
    """(cycles before ``last_stamp``, IMUs) the stamp of the sample each cycle took (NaN: it holds an older one)."""
    stamps = cycles.sample["stamp"][:cycles.size[0]].copy()
    stamps[1:][stamps[1:] == stamps[:-1]] = np.nan  # an IMU's stamps increase: an equal one is held, not taken
    return stamps[cycles.cycle["stamp"][:cycles.size[0]] < last_stamp]


def trials(module, distribution, level, seeds, dropouts, instants=120):
    """(one cycle per instant, every sample in its instant, fewest cycles, most cycles) over ``seeds`` trials."""
    error = (lambda rng: rng.normal(0.0, level)) if distribution == "normal" else (
        lambda rng: rng.uniform(-level, level))
    one, exact, counts = 0, 0, []
    for seed in range(seeds):
        inputs, sent = stamped_inputs(instants, error, seed, dropouts)
        got = taken(schedule(module, inputs)[0], inputs.imu_stamp[-1] - 0.5)
        counts.append(len(got))
        one += len(got) == instants
        exact += len(got) == instants and np.array_equal(got, sent, equal_nan=True)
    return one, exact, min(counts), max(counts)


def load_rules(path):
    spec = importlib.util.spec_from_file_location("compared_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=40, help="trials per stamp-error level")
    parser.add_argument("--compare-rules", help="another tree's rules.py, run beside this one")
    parser.add_argument("--repeat", type=int, default=20, help="alternated timings of schedule per tree")
    args = parser.parse_args(argv)
    trees = {"this tree": rules}
    if args.compare_rules:
        trees["compared"] = load_rules(args.compare_rules)
    for name, module in trees.items():
        for distribution, levels in LEVELS.items():
            for dropouts in (0, 12):
                cells = []
                for level in levels:
                    one, exact, low, high = trials(module, distribution, level, args.seeds, dropouts)
                    cells.append(f"{level:g}: {one}/{args.seeds} one per instant, {exact} exact [{low}-{high}]")
                print(f"{name}, {distribution} stamp errors (periods), {dropouts} dropouts: " + " | ".join(cells))
    if args.compare_rules:
        inputs, _ = stamped_inputs(20000, lambda rng: rng.normal(0.0, 0.1), 1, 0)
        times = {name: [] for name in trees}
        for k in range(args.repeat):
            for name in (list(trees) if k % 2 == 0 else list(trees)[::-1]):
                times[name].append(schedule(trees[name], inputs)[1])
        median = {name: float(np.median(t)) for name, t in times.items()}
        print("rules.schedule, 20,000 instants (80,000 samples), median of", args.repeat, ":",
              ", ".join(f"{name} {1e3 * t:.1f} ms" for name, t in median.items()),
              f"; ratio this/compared {median['this tree'] / median['compared']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
