"""Functional calibration of raw IMUs' headings from the joints between them: the knee's axis, seen by the thigh's
and the shank's orientation filters while the subject moves, fixes each sensor's turn about the vertical, which a
standing pose cannot.

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy, SciPy's least squares (when a pair is
fitted: ``scipy.optimize`` took ~0.16 s of every node's start-up, which imports this module through the estimator and
``~/calibrate_hinges`` but fits only when that service is called), ``core.spatial``, ``multibody.tree`` (joint codes)
and this package's errors. Used by
``replay.hinge_calibration`` (``dofkit replay --calibrate START END --hinge-calibration``) and
``estimator.hinge_recording`` (the live node's ``~/calibrate_hinges``), both through :func:`calibrate_filter_headings`,
so that one recording gives the same mountings offline and live.

Why. A raw IMU (gyro + accelerometer, no magnetometer) has a heading of its own: its filter's earth frame is turned
about the vertical from the model world G by an unknown angle. The static calibration (``calibrate_imus``) then
gives ``R_BS' = R_WB0ᵀ R_GS0``, where R_GS0 carries that heading: the mounting is off by a turn about the body's
vertical at the calibration pose, for a standing person each segment's long axis. Nothing static separates the
two. Turning IMU i by ψ_i (its stream ``R_GS <- Rz(ψ_i) R_GS`` and its mounting ``R_BS = R_WB0ᵀ Rz(ψ_i) R_WB0
R_BS'`` together, so that the calibration pose still fits) puts body B at
``R_WB(t) = Rz(ψ_i) ΔR_i(t) Rz(-ψ_i) R_WB0`` with ``ΔR_i(t) = R_GS,i(t) R_GS0,iᵀ`` (the sensor's rotation since the
calibration pose, in its own earth frame); a joint between two IMUs' bodies tells which ψ are right.

Constraints (a vector v fixed in a body, seen at time t in G: ``u_i(ψ_i, t) = Rz(ψ_i) ΔR_i(t) Rz(-ψ_i) v_G``, v_G
the vector in G at the calibration pose q_cal):

* a hinge (one revolute joint between the bodies of IMUs p and c): its axis a is fixed in both bodies, so
  ``e(t) = u_p(ψ_p, t) - u_c(ψ_c, t) = 0`` with v = a (Laidig, Schauer & Seel 2017, "Exploiting kinematic
  constraints to compensate magnetic disturbances when calculating joint angles of approximate hinge joints from
  orientation estimates of inertial sensors", IEEE ICORR 2017: the heading offset that makes both sensors
  see the same axis);
* two revolute joints in a row (a 2-dof ankle: a1 fixed in the parent, a2 in the child): the angle between the
  axes is constant, ``e(t) = u_p(ψ_p, t)·u_c(ψ_c, t) - a1·a2 = 0`` with v_p = a1, v_c = a2 (Laidig, Lehmann, Bégin
  & Seel 2019, "Magnetometer-free realtime inertial motion tracking by exploitation of kinematic constraints in
  2-DoF joints", IEEE EMBC 2019).

The headings minimise Σ_t |e(t)|²: first on a 5 deg grid of (ψ_p, ψ_c) (the cost is not convex), then by SciPy's
``least_squares`` from the best grid point. A hinge's cost does not change when both sensors turn by π (the same
motion seen from a subject facing the other way, the joint angle mirrored), and a 2-dof joint's hardly changes when
its free sensor does (the axes stay perpendicular): the refinement also starts from that mirror, and of the two
solutions whose costs are within a factor 1.5, the one whose joint angle (the rotation since q_cal about the first
axis, plus its value at q_cal) stays inside the joint's limits is taken. Pairs
are used in the order exact hinges, then 2-dof joints; each IMU's heading comes from the first pair that turns it
(the other side of a later pair is held). The window must start in the calibration pose's heading frame (the same
filter run) and move the joints out of the vertical (walking, knee bends).

:func:`pair_misfit` gives e(t) per sample for given turns (a hinge: the angle between the axes both sides see).
With the turns fitted, it tells a heading that moved after the fit's window began: at a still, straight knee
(ΔR_p = ΔR_c = I up to a common turn about the vertical) the axes coincide whatever the turns, so a misfit there is
a change of one sensor's heading relative to the other's since the calibration pose (a horizontal axis: misfit = that
change). ``benchmarks/ximu3_estimate.py`` uses it to compare magnetometer-based and raw-filter headings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ros_dofkit.core.assembly.errors import AssemblyValueError
from ros_dofkit.core.multibody.tree import JOINT_REVOLUTE, JOINT_WELD
from ros_dofkit.core.spatial import matrix_to_rotvec, rotation_z, rotvec_to_matrix

#: The joint's angle (rotation about its first axis since q_cal) must span at least this (rad) in the window.
MIN_MOTION_RAD = math.radians(10.0)
#: Fewest samples of a pair at which both IMUs have an orientation (the child's interpolated at the parent's stamps).
MIN_SAMPLES = 20
#: Grid step (rad) of the first search over each turn.
GRID_STEP_RAD = math.radians(5.0)
#: Samples of a pair the grid search uses at most (evenly picked); the refinement uses all.
GRID_SAMPLES = 1500
#: Of a hinge's two mirrored solutions, one with a cost above this factor of the best is not a candidate.
_MIRROR_COST_FACTOR = 1.5
#: Margin (rad) around the joint limits within which the joint's angle still counts as inside.
_LIMIT_MARGIN = math.radians(10.0)
#: R_WG must keep the vertical (up to its sign) for a turn about G's vertical to be a turn of a filter's output.
_VERTICAL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class JointPair:
    """Two IMUs whose bodies are joined by one revolute joint (``joints`` = (the joint's body,), a hinge) or two in
    a row (parent side first, a 2-dof joint); a joint is named by the body it moves (its inboard joint)."""

    parent_imu: str
    child_imu: str
    joints: tuple

    @property
    def hinge(self) -> bool:
        return len(self.joints) == 1


@dataclass(frozen=True)
class OrientationSeries:
    """One IMU's orientations in G as the static calibration saw them (a raw IMU: its filter's, own heading):
    ``stamps`` (K,) s increasing, ``R_GS`` (K, 3, 3)."""

    stamps: np.ndarray
    R_GS: np.ndarray


@dataclass(frozen=True)
class PairFit:
    """One pair's outcome: ``turns`` {IMU: ψ (rad)} of its free IMUs, ``rms`` of the constraint at the optimum (a
    hinge: the angle between the axes both sides see, rad; a 2-dof joint: of the axes' cosine), ``mirror_rms`` of
    the other (mirrored) solution, ``outside`` fraction of samples whose joint angle is
    outside the limits, ``samples`` used."""

    pair: JointPair
    turns: dict
    rms: float
    mirror_rms: float
    outside: float
    samples: int


@dataclass(frozen=True)
class PairMisfit:
    """:func:`pair_misfit`'s result: ``stamps`` (K,) s (the parent's, where both sides have an orientation) and
    ``misfit`` (K,): a hinge's angle between the axes both sides see (rad), a 2-dof joint's cosine error."""

    stamps: np.ndarray
    misfit: np.ndarray


@dataclass(frozen=True)
class HingeCalibration:
    """:func:`calibrate_hinge_headings`' result: ``turns`` {IMU: ψ (rad) about G's vertical, to add to its stream's
    heading}, ``R_BS`` {IMU: its mounting after the turn}, ``fits`` per pair used; from
    :func:`calibrate_filter_headings` also ``filter_turns`` {IMU: the same turn about its filter's own vertical, to
    add to the filter's heading offset}."""

    turns: dict = field(default_factory=dict)
    R_BS: dict = field(default_factory=dict)
    fits: tuple = ()
    filter_turns: dict = field(default_factory=dict)


def joint_pairs(plant, imu_bodies: dict) -> list:
    """The :class:`JointPair` of every IMU whose body's nearest IMU-carrying ancestor is reached through one or two
    revolute joints with coordinates (welds aside); hinges first. ``imu_bodies``: {IMU name: body index}."""
    tree = plant.tree
    carriers = {}
    for name, body in imu_bodies.items():
        carriers.setdefault(int(body), name)
    pairs = []
    for name, body in imu_bodies.items():
        path, b = [int(body)], int(body)
        while tree.parent[b] > 0 and int(tree.parent[b]) not in carriers:
            b = int(tree.parent[b])
            path.append(b)
        parent = int(tree.parent[b])
        if parent not in carriers or carriers[parent] == name:
            continue
        moving = [k for k in reversed(path) if tree.joint_type[k] != JOINT_WELD]
        if len(moving) in (1, 2) and all(tree.joint_type[k] == JOINT_REVOLUTE and tree.q_start[k] >= 0
                                         for k in moving):
            pairs.append(JointPair(carriers[parent], name, tuple(moving)))
    return sorted(pairs, key=lambda p: not p.hinge)


def _slerp_at(series: OrientationSeries, stamps, max_gap: float) -> np.ndarray:
    """``series`` interpolated (slerp) at ``stamps`` (K, 3, 3); NaN where the bracketing samples are more than
    ``max_gap`` apart or ``stamps`` lies outside the series."""
    t, R = series.stamps, series.R_GS
    right = np.clip(np.searchsorted(t, stamps), 1, len(t) - 1)
    left = right - 1
    span = t[right] - t[left]
    weight = np.where(span > 0, (stamps - t[left]) / np.where(span > 0, span, 1.0), 0.0)
    step = matrix_to_rotvec(np.einsum("kji,kjl->kil", R[left], R[right]))
    out = R[left] @ rotvec_to_matrix(weight[:, None] * step)
    out[(stamps < t[0]) | (stamps > t[-1]) | (span > max_gap)] = np.nan
    return out


def _seen(delta_R, psi, v_G) -> np.ndarray:
    """``u(ψ, t) = Rz(ψ) ΔR(t) Rz(-ψ) v_G`` for turns ``psi`` (m,) -> (m, K, 3)."""
    back = rotation_z(-np.asarray(psi)) @ v_G  # (m, 3)
    turned = np.einsum("kij,mj->mki", delta_R, back)
    return np.einsum("mij,mkj->mki", rotation_z(np.asarray(psi)), turned)


def _residual(pair: JointPair, delta_p, delta_c, v_p, v_c, cosine, psi_p, psi_c) -> np.ndarray:
    """The constraint e(t) of the module docstring, flattened."""
    u_p, u_c = _seen(delta_p, [psi_p], v_p)[0], _seen(delta_c, [psi_c], v_c)[0]
    return (u_p - u_c).ravel() if pair.hinge else np.einsum("ki,ki->k", u_p, u_c) - cosine


def _grid_best(pair: JointPair, delta_p, delta_c, v_p, v_c, cosine, held: tuple) -> tuple:
    """(ψ_p, ψ_c) of the smallest cost on the grid; a held side (``held`` = its turn, else None) keeps its turn."""
    grid = np.arange(0.0, 2.0 * math.pi, GRID_STEP_RAD)
    pick = np.unique(np.linspace(0, len(delta_p) - 1, min(len(delta_p), GRID_SAMPLES)).astype(int))
    psi_p, psi_c = (grid if h is None else np.array([h]) for h in held)
    dots = np.einsum("aki,bki->abk", _seen(delta_p[pick], psi_p, v_p), _seen(delta_c[pick], psi_c, v_c))
    cost = np.mean(2.0 - 2.0 * dots, axis=2) if pair.hinge else np.mean((dots - cosine) ** 2, axis=2)
    a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return float(psi_p[a]), float(psi_c[b])


def _refine(pair: JointPair, arrays, start: tuple, held: tuple) -> tuple:
    """(ψ_p, ψ_c, rms of e) by least squares from ``start`` over the turns that are not held."""
    free = [h is None for h in held]

    def unpack(x):
        values, k = list(start), 0
        for side in (0, 1):
            if free[side]:
                values[side] = float(x[k])
                k += 1
        return values

    from scipy.optimize import least_squares  # heavy (~0.16 s), needed only here: the module docstring

    x0 = [s for s, f in zip(start, free, strict=True) if f]
    solution = least_squares(lambda x: _residual(pair, *arrays, *unpack(x)), x0, method="lm")
    psi = unpack(solution.x)
    e = _residual(pair, *arrays, *psi)
    samples = len(arrays[0])
    rms = math.sqrt(float(e @ e) / samples)
    return psi[0], psi[1], (2.0 * math.asin(min(rms / 2.0, 1.0)) if pair.hinge else rms)


def _joint_angle(delta_p, delta_c, psi_p, psi_c, a_G, theta0) -> np.ndarray:
    """The pair's first joint's angle: its value at q_cal plus the rotation of the child relative to the parent
    since q_cal about the axis (exact for a hinge, the first angle's part for a 2-dof joint)."""
    R_p = rotation_z(psi_p) @ delta_p @ rotation_z(-psi_p)
    R_c = rotation_z(psi_c) @ delta_c @ rotation_z(-psi_c)
    return theta0 + matrix_to_rotvec(np.einsum("kji,kjl->kil", R_p, R_c)) @ a_G


def calibrate_hinge_headings(plant, q_cal, imu_bodies: dict, R_BS: dict, orientations: dict,
                             turnable) -> HingeCalibration:
    """Turn the headings of the IMUs in ``turnable`` from the joints they share (module docstring).

    Args:
        plant: finalized plant; q_cal: (nq,) the calibration pose ``R_BS`` was computed at.
        imu_bodies: {IMU name: body index}; R_BS: {IMU name: mounting from the static calibration}.
        orientations: {IMU name: :class:`OrientationSeries`} over the motion window, in the headings the static
            calibration saw.
        turnable: names whose heading is unknown (raw IMUs calibrated on a static pose); the others are held.

    Raises :class:`AssemblyValueError` for a pair whose joint moved too little, or whose axis is vertical at q_cal.
    """
    turnable = set(turnable)
    q_cal = np.asarray(q_cal, dtype=float)
    X_WB = plant.calc_body_poses(q_cal)
    turns, fits = {}, []
    for pair in joint_pairs(plant, imu_bodies):
        names = (pair.parent_imu, pair.child_imu)
        held = tuple(None if name in turnable and name not in turns else turns.get(name, 0.0) for name in names)
        if all(h is not None for h in held) or any(name not in orientations for name in names):
            continue
        R_GS0 = _orientations_at_calibration(X_WB, pair, imu_bodies, R_BS)
        fit = _fit_pair(plant, q_cal, X_WB, pair, orientations, R_GS0, held)
        turns.update(fit.turns)
        fits.append(fit)
    mountings = {}
    for name, turn in turns.items():
        R_W0 = X_WB[imu_bodies[name], :3, :3]
        mountings[name] = R_W0.T @ rotation_z(turn) @ R_W0 @ np.asarray(R_BS[name], dtype=float)
    return HingeCalibration(turns=turns, R_BS=mountings, fits=tuple(fits))


def calibrate_filter_headings(plant, q_cal, R_WG, imu_bodies: dict, R_BS: dict, filter_orientations: dict,
                              turnable) -> HingeCalibration:
    """:func:`calibrate_hinge_headings` on orientation filters' outputs ``filter_orientations`` {IMU:
    :class:`OrientationSeries` of R_FS in the filter's earth frame F, the one the static calibration saw} with the
    world alignment ``R_WG`` (G = R_WG F), and the turns also as ``filter_turns``: about F's vertical, ``sign(R_WG[2,
    2]) ψ``. The offline replay and the live node both call this (one recording, the same mountings).

    Raises :class:`AssemblyValueError` when ``R_WG`` does not keep the vertical (a turn about G's vertical is then no
    turn of a filter's output), when no IMU of ``turnable`` shares a hinge with another IMU, and as
    :func:`calibrate_hinge_headings` does (too little motion, vertical axis, no mounting, too few samples)."""
    R_WG = np.asarray(R_WG, dtype=float)
    up = float(R_WG[2, 2])
    if abs(abs(up) - 1.0) > _VERTICAL_TOLERANCE:
        raise AssemblyValueError(f"hinge calibration: the world alignment turns the vertical (R_WG[2, 2] = {up:.6g}); "
                                 "raw IMUs' headings are turns about the vertical of their filters, so it must keep it")
    orientations = {name: OrientationSeries(series.stamps, R_WG @ series.R_GS)
                    for name, series in filter_orientations.items()}
    hinge = calibrate_hinge_headings(plant, q_cal, imu_bodies, R_BS, orientations, turnable)
    if not hinge.turns:
        raise AssemblyValueError("no raw IMU calibrated on the static window shares a hinge (one or two revolute "
                                 f"joints) with another IMU (raw and calibrated: {sorted(turnable)})")
    filter_turns = {name: math.copysign(1.0, up) * turn for name, turn in hinge.turns.items()}
    return HingeCalibration(hinge.turns, hinge.R_BS, hinge.fits, filter_turns)


def _axes(plant, X_WB, pair: JointPair) -> tuple:
    """(v_p, v_c, cosine, a_G of the first joint, its q index) in G at q_cal."""
    tree = plant.tree
    axes = [X_WB[tree.parent[b], :3, :3] @ tree.X_PF[b, :3, :3] @ tree.axis[b] for b in pair.joints]
    return axes[0], axes[-1], float(axes[0] @ axes[-1]), axes[0], int(tree.q_start[pair.joints[0]])


def _rotations_since_calibration(pair: JointPair, orientations: dict, R_GS0: dict) -> tuple:
    """(stamps (K,), ΔR_p (K, 3, 3), ΔR_c) at the parent's stamps where both sides have an orientation (the child's
    slerped); ``R_GS0``: each side's orientation at q_cal. Raises when fewer than :data:`MIN_SAMPLES` remain."""
    parent, child = orientations[pair.parent_imu], orientations[pair.child_imu]
    period = float(np.median(np.diff(parent.stamps))) if len(parent.stamps) > 1 else 0.0
    R_c = _slerp_at(child, parent.stamps, max(4.0 * period, 1e-9))
    keep = np.isfinite(R_c).all(axis=(1, 2)) & np.isfinite(parent.R_GS).all(axis=(1, 2))
    if int(keep.sum()) < MIN_SAMPLES:
        raise AssemblyValueError(f"hinge calibration of {pair.parent_imu!r} and {pair.child_imu!r}: {int(keep.sum())} "
                                 f"samples where both have an orientation, at least {MIN_SAMPLES} needed")
    return (parent.stamps[keep], parent.R_GS[keep] @ R_GS0[pair.parent_imu].T,
            R_c[keep] @ R_GS0[pair.child_imu].T)


def _orientations_at_calibration(X_WB, pair: JointPair, imu_bodies: dict, R_BS: dict) -> dict:
    """{IMU: R_GS0 = R_WB(q_cal) R_BS} of both sides of ``pair``; a missing mounting is refused."""
    names = (pair.parent_imu, pair.child_imu)
    missing = [name for name in names if name not in R_BS or R_BS[name] is None]
    if missing:
        raise AssemblyValueError(f"hinge calibration: no mounting R_BS for IMU(s) {missing} (the static "
                                 f"calibration's, or the known one); got mountings for {sorted(R_BS)}")
    return {name: X_WB[imu_bodies[name], :3, :3] @ np.asarray(R_BS[name], dtype=float) for name in names}


def pair_misfit(plant, q_cal, imu_bodies: dict, R_BS: dict, orientations: dict, pair: JointPair,
                turns: dict) -> PairMisfit:
    """The constraint e(t) of ``pair`` per sample with the IMUs' headings turned by ``turns`` {IMU: ψ (rad)}, 0 for
    an IMU not named (module docstring; arguments as :func:`calibrate_hinge_headings`'). A hinge's misfit is the
    angle between the axes both sides see, ``2 asin(|e|/2)``; a 2-dof joint's the error of the axes' cosine.
    Raises :class:`AssemblyValueError` for a side without orientations or mounting, or too few common samples."""
    missing = [name for name in (pair.parent_imu, pair.child_imu) if name not in orientations]
    if missing:
        raise AssemblyValueError(f"hinge misfit: no orientations for IMU(s) {missing}; got orientations for "
                                 f"{sorted(orientations)}")
    q_cal = np.asarray(q_cal, dtype=float)
    X_WB = plant.calc_body_poses(q_cal)
    R_GS0 = _orientations_at_calibration(X_WB, pair, imu_bodies, R_BS)
    stamps, delta_p, delta_c = _rotations_since_calibration(pair, orientations, R_GS0)
    v_p, v_c, cosine, _, _ = _axes(plant, X_WB, pair)
    e = _residual(pair, delta_p, delta_c, v_p, v_c, cosine, float(turns.get(pair.parent_imu, 0.0)),
                  float(turns.get(pair.child_imu, 0.0)))
    misfit = 2.0 * np.arcsin(np.minimum(np.linalg.norm(e.reshape(-1, 3), axis=1) / 2.0, 1.0)) if pair.hinge else e
    return PairMisfit(stamps, misfit)


def _fit_pair(plant, q_cal, X_WB, pair: JointPair, orientations: dict, R_GS0: dict, held: tuple) -> PairFit:
    """One pair: common samples, grid, refinement, mirror and limits (module docstring). ``R_GS0``: each side's
    orientation at q_cal as the static calibration saw it; ``held``: a side's turn found before, None if free."""
    v_p, v_c, cosine, a_G, qi = _axes(plant, X_WB, pair)
    if math.hypot(a_G[0], a_G[1]) < 1e-3:
        raise AssemblyValueError(f"hinge calibration of {pair.parent_imu!r} and {pair.child_imu!r}: the joint's axis "
                                 f"{np.round(a_G, 4).tolist()} is vertical at the calibration pose, so it fixes no "
                                 "heading")
    _, delta_p, delta_c = _rotations_since_calibration(pair, orientations, R_GS0)
    arrays = (delta_p, delta_c, v_p, v_c, cosine)
    start = _grid_best(pair, *arrays, held)
    candidates = [_refine(pair, arrays, start, held)]
    mirrored = tuple(psi + (math.pi if h is None else 0.0) for psi, h in zip(start, held, strict=True))
    candidates.append(_refine(pair, arrays, mirrored, held))
    theta0, lower, upper = (float(q_cal[qi]), float(plant.position_lower_limits()[qi]),
                            float(plant.position_upper_limits()[qi]))
    scored = []
    for psi_p, psi_c, rms in candidates:
        theta = _joint_angle(delta_p, delta_c, psi_p, psi_c, a_G, theta0)
        if np.ptp(theta) < MIN_MOTION_RAD:
            raise AssemblyValueError(
                f"hinge calibration of {pair.parent_imu!r} and {pair.child_imu!r}: their joint turned "
                f"{math.degrees(np.ptp(theta)):.1f} deg in the window, at least {math.degrees(MIN_MOTION_RAD):g} "
                "needed; the window must move the joint between them")
        outside = float(np.mean((theta < lower - _LIMIT_MARGIN) | (theta > upper + _LIMIT_MARGIN)))
        scored.append((rms, outside, psi_p, psi_c))
    best_rms = min(s[0] for s in scored)
    chosen = min((s for s in scored if s[0] <= _MIRROR_COST_FACTOR * best_rms), key=lambda s: (s[1], s[0]))
    mirror = next(s[0] for s in scored if s is not chosen)
    turns = {name: math.remainder(psi, 2.0 * math.pi)
             for name, psi, h in zip((pair.parent_imu, pair.child_imu), chosen[2:], held, strict=True) if h is None}
    return PairFit(pair, turns, chosen[0], mirror, chosen[1], len(delta_p))
