"""The information bound of the heading offsets on a simulated session: how well any estimator could know them.

Where you are: benchmarks/ -- imported by drift.py, which prints the bound beside the heading filter's result;
test/test_bench_heading_bound.py checks it against closed forms. It imports NumPy, the estimator's setup and its
heading filter (``core.estimator.heading``: the bound reads the filter's own chain model through
``HeadingFilter.chain_information``, so it sees exactly the constraints the filter is given); it reads the
simulator's records (a ``core.simulation.SimulationRun``: the truth and the sensors' noise levels).

Why. A leg's heading behind a 3-dof hip is observed only by the hip centre's horizontal acceleration, seen from the
pelvis and the thigh (``core.estimator.heading``, "Joint-centre acceleration"). Whether a miss of the 2 deg goal is
the filter's fault or the data's is a number: the posterior Cramer-Rao bound of the offsets given the information
the simulated sensors actually carry. For a linear Gaussian model it is the covariance of the correctly specified
Kalman filter (causal) and of its Rauch-Tung-Striebel smoother (the best any offline method can do).

Model. The state is the filter's estimated offsets d (m of them; with a reference IMU, each relative to it), a
random walk: d(t + dt) = d(t) + w, w ~ N(0, Q dt), Q = s^2 (I + 1 1^T) with a reference (the reference's own walk
moves every relative offset at once) and s^2 I without; s^2 = (drift per minute)^2 / 60 s; d(0) = 0 exactly (the
simulated walks start at 0). Each sample k brings information I_k = S_k / sigma_o^2 + H_k^T R_k^-1 H_k:

* S_k the orientations' information at the true configuration (``ChainInformation.S``), sigma_o the simulated
  orientation noise (white, per axis);
* per joint pair (child c, parent p, centre J) the measurement y = n . (u_c - u_p) = |v| (d_c - d_p) + e, with
  u_i = R_WO,i (f + w x (w x r_i) + alpha x r_i) each side's joint-centre acceleration as the filter forms it, v the
  true horizontal joint-centre acceleration and n = z x v / |v|. To first order its error is, per IMU i and noise
  source with sensor-frame coefficient c (s_i = R_WS,i^T n):
  orientation noise eps (sigma_o): c = b_i x s_i, b_i = f + w x (w x r_i) + alpha x r_i (the tilt error turns g into
  a horizontal error; the heading part turns v); accelerometer noise (sigma_a): c = s_i; gyro noise at the sample
  (sigma_g, through the centripetal term): c = (w x r_i) x s_i + r_i x (s_i x w); the angular acceleration's noise
  (the gyro's central difference over 2 dt: sigma_g / (sqrt(2) dt) per axis): c = r_i x s_i. R_k is the pairs'
  covariance, the parent's sources shared (the pelvis sits on both hips). The angular acceleration's error is a
  difference of gyro noise two samples apart: its sum over a few samples telescopes, so it carries (almost) no error
  at the frequencies where the headings move. The bound leaves it out (``alpha_noise=False``, a true lower bound:
  less noise); with it (``alpha_noise=True``) it is the bound of an estimator that takes the samples as independent.

Joints. An offset error dd moves the solve's free velocities by dq = (dq/dd) dd (``ChainInformation.dq_dd``); the
orientations' white noise adds sigma_o^2 N^-1 on the diagonal. A joint's expected squared error at sample k is
x_k^T P_k x_k + sigma_o^2 (N_k^-1)_jj (x_k its row of dq/dd, P_k the bound's covariance). Its worst minute: the
largest one-minute mean of that (``expected``), and a Monte Carlo over walks and noise of the correctly specified
filter's and smoother's error (``monte_carlo``: the one-minute RMS of x^T e + the noise part, its worst minute per
walk; median and 90th percentile over the walks).

The information is summed over blocks of ``BLOCK`` samples (0.1 s at 100 Hz; the walk moves by 0.12 deg in one at
3 deg/min, far below the bound) and the Kalman and RTS recursions run block by block.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ros_dofkit.core.estimator import setup as problem
from ros_dofkit.core.estimator.heading import HeadingFilter

#: Samples whose information is summed into one step of the recursions.
BLOCK = 10

#: Walks of the Monte Carlo estimate of the worst minute, and how many run at once (memory).
MONTE_CARLO_WALKS = 200
MONTE_CARLO_CHUNK = 50


@dataclasses.dataclass(frozen=True)
class BoundSeries:
    """The recursions' covariances per step, each (K, m, m): ``predicted`` P_k^- (before step k's information),
    ``filtered`` P_k (the causal bound) and ``smoothed`` P_k^s (the two-sided bound)."""

    predicted: np.ndarray
    filtered: np.ndarray
    smoothed: np.ndarray


def random_walk_bounds(information, dt, process, initial) -> BoundSeries:
    """Kalman and RTS covariances of a random walk d_k = d_(k-1) + w_k, w_k ~ N(0, process dt_k), observed at step k
    with information ``information[k]`` (K, m, m) (H^T R^-1 H of the step's measurements), from a prior covariance
    ``initial`` (m, m) before step 0 (0: known exactly). ``dt``: seconds before each step, a scalar or (K,).

    Predict P^- = P + Q dt, update P = P^- (I + I_k P^-)^-1 (= (P^-^-1 + I_k)^-1, defined for a singular P^-);
    smooth backwards P^s_k = P_k + G_k (P^s_(k+1) - P^-_(k+1)) G_k^T, G_k = P_k (P^-_(k+1))^-1."""
    information = np.asarray(information, dtype=float)
    K, m = information.shape[0], information.shape[1]
    dt = np.broadcast_to(np.asarray(dt, dtype=float), (K,))
    predicted, filtered = np.empty((K, m, m)), np.empty((K, m, m))
    P, identity = np.asarray(initial, dtype=float), np.eye(m)
    for k in range(K):
        before = P + process * dt[k]
        P = np.linalg.solve((identity + information[k] @ before).T, before.T).T
        P = 0.5 * (P + P.T)
        predicted[k], filtered[k] = before, P
    smoothed = filtered.copy()
    for k in range(K - 2, -1, -1):
        G = np.linalg.solve(predicted[k + 1].T, filtered[k].T).T
        S = filtered[k] + G @ (smoothed[k + 1] - predicted[k + 1]) @ G.T
        smoothed[k] = 0.5 * (S + S.T)
    return BoundSeries(predicted, filtered, smoothed)


def process_covariance(m: int, drift_deg_per_min: float, reference: bool) -> np.ndarray:
    """Q (m, m) per second of m offsets walking at ``drift_deg_per_min`` each; with a ``reference`` IMU (itself
    walking) the offsets are relative to it: Q = s^2 (I + 1 1^T)."""
    rate2 = math.radians(drift_deg_per_min) ** 2 / 60.0
    return rate2 * (np.eye(m) + (np.ones((m, m)) if reference else 0.0))


def pair_information(ends, noise, period: float, alpha_noise: bool):
    """(T, m, m) information of the joint-centre accelerations per sample (module docstring). ``ends``: per pair a
    tuple (h (m,), child end, parent end), each end a dict of the IMU index ``imu`` and (T, 3) arrays ``R_WS`` (T, 3,
    3), ``f``, ``w``, ``alpha``, ``r`` (sensor frame, true values); ``noise``: the simulator's ``SensorNoise``."""
    P = len(ends)
    T = ends[0][1]["f"].shape[0]
    u = [[np.einsum("tij,tj->ti", end["R_WS"], _bracket(end)) for end in pair[1:]] for pair in ends]
    v = np.stack([0.5 * (uc + up) for uc, up in u])  # (P, T, 3)
    v[..., 2] = 0.0
    size = np.linalg.norm(v, axis=2)  # (P, T)
    n = np.stack([-v[..., 1], v[..., 0], np.zeros_like(size)], axis=2) / np.where(size > 0, size, 1.0)[..., None]
    sigma_o, sigma_g = math.radians(noise.orientation_deg), noise.gyro
    sigma_alpha = sigma_g / (math.sqrt(2.0) * period) if alpha_noise else 0.0
    covariance = np.zeros((T, P, P))
    imus = sorted({end["imu"] for pair in ends for end in pair[1:]})
    for i in imus:
        rows = {}  # noise source -> (T, P, 3) coefficients of IMU i's sources in each pair's measurement
        for k, pair in enumerate(ends):
            for end, sign in ((pair[1], 1.0), (pair[2], -1.0)):
                if end["imu"] != i:
                    continue
                s = np.einsum("tji,tj->ti", end["R_WS"], n[k])  # R_WS^T n
                w, r = end["w"], end["r"]
                for name, c, sigma in (("orientation", np.cross(_bracket(end), s), sigma_o),
                                       ("accelerometer", s, noise.accelerometer),
                                       ("gyro", np.cross(np.cross(w, r), s) + np.cross(r, np.cross(s, w)), sigma_g),
                                       ("alpha", np.cross(r, s), sigma_alpha)):
                    rows.setdefault(name, [np.zeros((T, P, 3)), sigma])[0][:, k] += sign * c
        for A, sigma in rows.values():
            covariance += sigma * sigma * np.einsum("tpa,tqa->tpq", A, A)
    for k in range(P):  # no horizontal acceleration, no direction n: the pair measures nothing (H's row is 0)
        covariance[:, k, k] += size[k] == 0.0
    H = np.stack([size[k][:, None] * pair[0][None, :] for k, pair in enumerate(ends)], axis=1)  # (T, P, m)
    return np.einsum("tpa,tpq,tqb->tab", H, np.linalg.inv(covariance), H), size


def _bracket(end):
    """b = f + w x (w x r) + alpha x r (sensor frame): the joint centre's specific force seen by one IMU."""
    w, r = end["w"], end["r"]
    return end["f"] + np.cross(w, np.cross(w, r)) + np.cross(end["alpha"], r)


@dataclasses.dataclass(frozen=True)
class SessionInformation:
    """Per block of :data:`BLOCK` samples: ``information`` (K, m, m), and per estimated joint ``names`` (J,) the mean
    ``outer`` (K, J, m, m) of x x^T (x its row of dq/dd) and ``noise`` (K, J) sigma_o^2 (N^-1)_jj; ``minute`` (K,)
    each block's minute; ``columns`` {IMU name: offset index}; ``reference`` the IMU the offsets are relative to
    (None: none); ``acceleration_rms`` (P,) the pairs' horizontal joint-centre acceleration RMS (m/s^2);
    ``walk`` (K, m) the simulated offsets (relative to the reference's) averaged over each block."""

    information: np.ndarray
    names: tuple
    outer: np.ndarray
    noise: np.ndarray
    minute: np.ndarray
    columns: dict
    reference: str | None
    acceleration_rms: np.ndarray
    walk: np.ndarray


def session_information(plant, config, run, noise, alpha_noise: bool = False) -> SessionInformation:
    """The information of a simulated session ``run`` (``core.simulation.SimulationRun``, sensors ``noise``) about
    the offsets of the heading filter of ``config`` (heading estimation on), at the true configurations."""
    setup = problem.build(plant, config)
    heading = HeadingFilter(setup, config.heading_estimation, config.stale_timeout_s,
                            [imu.position for imu in config.imus])
    names = list(config.imu_names)
    R_BS = np.stack([np.asarray(imu.mounting, dtype=float) for imu in config.imus])
    m, T = heading.delta.shape[0], len(run.times)
    free = np.flatnonzero(setup.free_v)
    estimated = np.flatnonzero(setup.estimated)
    joints = np.searchsorted(free, setup.art_v[estimated])
    S, X, noise_var = np.empty((T, m, m)), np.empty((T, len(joints), m)), np.empty((T, len(joints)))
    R_WS, p_WS = np.empty((T, len(names), 3, 3)), np.empty((T, len(names), 3))
    p_WJ = np.empty((T, len(heading.pairs.child), 3))
    sigma_o2 = math.radians(noise.orientation_deg) ** 2
    for k in range(T):
        chain = heading.chain_information(run.q[k], R_BS)
        S[k], X[k] = chain.S, chain.dq_dd[joints]
        inverse = np.linalg.pinv(chain.N)
        noise_var[k] = sigma_o2 * np.diag(inverse)[joints]
        R_WS[k], p_WS[k], p_WJ[k] = chain.R_WS, chain.p_WS, chain.p_WJ
    information = S / sigma_o2
    column = {name: int(c) for name, c in zip(names, heading.columns, strict=True)}
    rms = np.zeros(len(heading.pairs.child))
    if len(heading.pairs.child):
        ends = []
        for k, (c, p) in enumerate(zip(heading.pairs.child, heading.pairs.parent, strict=True)):
            h = np.zeros(m)
            for i, sign in ((c, 1.0), (p, -1.0)):
                if column[names[i]] >= 0:
                    h[column[names[i]]] += sign
            ends.append((h, *(_end(run, names, i, R_WS, p_WS, p_WJ[:, k]) for i in (c, p))))
        acceleration, size = pair_information(ends, noise, 1.0 / _rate(run), alpha_noise)
        information = information + acceleration
        rms = np.sqrt(np.mean(size ** 2, axis=1))
    K = T // BLOCK
    blocks = slice(0, K * BLOCK)
    walk = np.zeros((T, m))
    reference = np.asarray(run.imu(heading.reference).heading_error) if heading.reference is not None else 0.0
    for name, c in column.items():
        if c >= 0:
            walk[:, c] = np.asarray(run.imu(name).heading_error) - reference
    outer = np.einsum("tja,tjb->tjab", X[blocks], X[blocks]).reshape(K, BLOCK, len(joints), m, m).mean(axis=1)
    return SessionInformation(
        information=information[blocks].reshape(K, BLOCK, m, m).sum(axis=1),
        names=tuple(setup.art_names[j] for j in estimated), outer=outer,
        noise=noise_var[blocks].reshape(K, BLOCK, len(joints)).mean(axis=1),
        minute=((run.times[blocks][::BLOCK] - run.times[0]) // 60.0).astype(int), columns=column,
        reference=heading.reference, acceleration_rms=rms,
        walk=walk[blocks].reshape(K, BLOCK, m).mean(axis=1))


def _rate(run) -> float:
    return (len(run.times) - 1) / (run.times[-1] - run.times[0])


def _end(run, names, i, R_WS, p_WS, p_WJ) -> dict:
    """One side of a joint pair: IMU i's true readings and its lever arm r = R_WS^T (p_WJ - p_WS)."""
    readings = run.imu(names[i])
    w = np.asarray(readings.true_angular_velocity)
    return {"imu": i, "R_WS": R_WS[:, i], "f": np.asarray(readings.true_linear_acceleration), "w": w,
            "alpha": np.gradient(w, run.times, axis=0),
            "r": np.einsum("tji,tj->ti", R_WS[:, i], p_WJ - p_WS[:, i])}


@dataclasses.dataclass(frozen=True)
class JointBounds:
    """The bound of one session: per estimated joint ``names`` (J,) the worst minute of the expected RMS (deg),
    ``causal`` and ``smoothed`` (J,); over the joints ``judged``, the worst joint's worst minute, Monte Carlo
    median and 90th percentile (deg): ``walks`` {"causal" | "smoothed": (2,)} over draws of the walks and of the
    noise, ``session`` the same on the session's own simulated walk (noise drawn only); per offset (IMU name) its
    standard deviation (deg) averaged over the session (RMS), ``heading`` {"causal" | "smoothed": {name: deg}}."""

    names: tuple
    causal: np.ndarray
    smoothed: np.ndarray
    judged: tuple
    walks: dict
    session: dict
    heading: dict


def joint_bounds(info: SessionInformation, drift_deg_per_min: float, period: float, judged=None,
                 walks: int = MONTE_CARLO_WALKS, seed: int = 0) -> JointBounds:
    """The bound of ``info`` (module docstring) at ``drift_deg_per_min``; ``period`` the samples' period (s);
    ``judged``: the joint names whose worst minute the Monte Carlo reports (None: all)."""
    m = info.information.shape[1]
    process = process_covariance(m, drift_deg_per_min, info.reference is not None)
    series = random_walk_bounds(info.information, BLOCK * period, process, np.zeros((m, m)))
    minutes = int(info.minute.max()) + 1
    judged = info.names if judged is None else tuple(judged)
    pick = np.array([info.names.index(name) for name in judged], dtype=np.int64)

    def worst(variance):  # (K, J) -> (J,) deg: the worst one-minute RMS
        means = np.array([variance[info.minute == t].mean(axis=0) for t in range(minutes)])
        return np.degrees(np.sqrt(means.max(axis=0)))

    expected = {label: worst(np.einsum("kjab,kba->kj", info.outer, P) + info.noise)
                for label, P in (("causal", series.filtered), ("smoothed", series.smoothed))}
    step = process * BLOCK * period
    increments = np.diff(info.walk, axis=0, prepend=0.0)
    heading = {label: {name: math.degrees(math.sqrt(np.mean(P[:, c, c]))) for name, c in info.columns.items()
                       if c >= 0} for label, P in (("causal", series.filtered), ("smoothed", series.smoothed))}
    return JointBounds(info.names, expected["causal"], expected["smoothed"], judged,
                       monte_carlo(info, series, step, pick, walks, seed),
                       monte_carlo(info, series, increments, pick, walks, seed), heading)


def monte_carlo(info: SessionInformation, series: BoundSeries, walk, pick, walks: int, seed: int) -> dict:
    """{"causal" | "smoothed": (median, 90th percentile) deg} of the worst one-minute RMS of the ``pick`` joints
    over ``walks`` draws of the measurements' noise (N(0, I_k) in information form) and, when ``walk`` is a
    covariance (m, m), of the walk's increments (N(0, ``walk``)); ``walk`` (K, m): the increments of every draw.
    Through the correctly specified filter and its RTS smoother: e_k = (I - P_k I_k) e_k^- + P_k n_k with
    e_k^- = e_(k-1) - w_k; e^s_k = e_k + G_k (e^s_(k+1) - e^-_(k+1))."""
    K, m = info.information.shape[:2]
    rng = np.random.default_rng(seed)
    values, vectors = np.linalg.eigh(info.information)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))[:, None, :]  # root root^T = I_k
    gain = np.eye(m) - series.filtered @ info.information
    noise_gain = series.filtered @ root
    smoother = np.array([np.linalg.solve(series.predicted[k + 1].T, series.filtered[k].T).T for k in range(K - 1)])
    drawn = walk.shape == (m, m)
    walk_root = np.linalg.cholesky(walk + 1e-30 * np.eye(m)) if drawn else None
    outer, noise = info.outer[:, pick], info.noise[:, pick]
    minutes = int(info.minute.max()) + 1
    worst = {"causal": [], "smoothed": []}
    for start in range(0, walks, MONTE_CARLO_CHUNK):
        n = min(MONTE_CARLO_CHUNK, walks - start)
        filtered, before = np.empty((K, m, n)), np.empty((K, m, n))
        e = np.zeros((m, n))
        for k in range(K):
            before[k] = e - (walk_root @ rng.standard_normal((m, n)) if drawn else walk[k][:, None])
            e = gain[k] @ before[k] + noise_gain[k] @ rng.standard_normal((m, n))
            filtered[k] = e
        smoothed = filtered.copy()
        for k in range(K - 2, -1, -1):
            smoothed[k] = filtered[k] + smoother[k] @ (smoothed[k + 1] - before[k + 1])
        for label, errors in (("causal", filtered), ("smoothed", smoothed)):
            squared = np.einsum("kjab,kan,kbn->kjn", outer, errors, errors) + noise[:, :, None]
            means = np.array([squared[info.minute == t].mean(axis=0) for t in range(minutes)])  # (minutes, J, n)
            worst[label].append(np.degrees(np.sqrt(means.max(axis=(0, 1)))))
    return {label: np.percentile(np.concatenate(values), [50.0, 90.0]) for label, values in worst.items()}
