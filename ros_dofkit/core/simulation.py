"""Robot motion and sensor simulator: smooth joint trajectories, simulated IMUs and encoders, all seeded.

You are in the ROS-free core (``ros_dofkit.core.simulation``). The demo, ``dofkit record`` and the tests use it
to produce inputs whose truth is known; the ROS layer turns its arrays into messages.

Motion. Every articulated coordinate (the plant's articulated view: revolute, prismatic, planar) follows a sum
of sines about a centre, ``q_i(t) = c_i + sum_k a_ik sin(2 pi f_ik t + phi_ik)``, with sum_k a_ik kept inside
the joint limits; velocities and accelerations are the analytic derivatives. A floating base (quaternion joint
from the world) turns as ``R_WB(t) = Rz(psi(t)) Ry(theta(t)) Rx(phi(t)) R_WB(0)`` and translates as
``p_WB(t) = p_0 + sines``; its velocity is Drake's ``[w_WB_W, v_WB_W]`` from the analytic angle rates.

Sensors. An IMU S is fixed on body B by ``R_BS`` and ``p_BS``; its world G relates to the model world W by
``R_WG`` (identity: the model world is ENU, REP-103). Noise-free readings (REP-145, OpenSense's IMU component):

* orientation ``R_GS = R_WG^T R_WB R_BS``;
* gyroscope ``w_S = R_WS^T J_w(q) v``: the angular velocity of S in W, expressed in S (analytic, through the
  plant's angular Jacobian);
* accelerometer ``f_S = R_WS^T (a_WSo_W - g_W)`` with ``g_W = (0, 0, -g)``: specific force in S, +g on the up
  axis at rest. ``a_WSo_W`` is the second central difference of the FK position of So with step
  :data:`ACCELERATION_STEP_S` (truncation error ~ h^2/12 |p''''|, far below any accelerometer noise).

Noise (:class:`SensorNoise`): white noise on orientation (a rotation vector of standard deviation sigma per
axis, applied in the sensor frame), gyro and accelerometer; a constant gyro bias per sensor; heading drift (the
orientation turns about G's vertical at a constant rate of random sign per sensor); dropouts (each sample
missing independently); stamp jitter (uniform, bounded to keep stamps increasing). Encoders measure a chosen
subset of coordinates, quantized and with white noise. One seed fixes everything.

Slow errors of long sessions, independent per IMU (what fusion on the kinematic chain must survive). The
orientation an IMU reports has a heading error psi(t) about G's vertical, ``R_meas = Rz(psi) R_GS``, with

    psi(t) = r t  +  sigma_psi W(t)  +  sum of steps,

r the constant drift above, W a standard Wiener process (increments ~ N(0, dt)), and steps of +-``heading_step_deg``
at Poisson times (rate ``heading_steps_per_min``): a magnetic disturbance that the IMU's own filter follows. The
gyro bias walks: ``b(t) = b_0 + sigma_b W_b(t)`` (three independent Wiener processes). Raw gyro and accelerometer
carry no heading error (heading is a property of the orientation filter, not of the raw sensors). These draws use
a random stream of their own (spawned from the seed), so turning them on leaves every other draw of a seed as it
was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ros_dofkit.core.spatial import matrix_to_quat, quat_to_matrix, rotation_x, rotation_y, rotation_z, rotvec_to_matrix

#: Standard gravity (m/s^2); the model world's z axis is up (REP-103).
STANDARD_GRAVITY = 9.80665

#: Time step (s) of the central second difference that gives sensor accelerations.
ACCELERATION_STEP_S = 1e-3

#: Samples whose sensor kinematics are computed at once in :meth:`SensorSimulator.run` (bounds its memory).
KINEMATICS_BLOCK_SAMPLES = 4096


class SimulationError(ValueError):
    """A simulation setting is malformed or inconsistent with the robot."""


def _check_nonnegative(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SimulationError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise SimulationError(f"{what}: expected a finite number >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class SensorNoise:
    """Imperfections of the simulated sensors; all zero means exact readings.

    Attributes:
        orientation_deg: standard deviation (deg, per axis) of the white rotation noise on orientations.
        gyro: standard deviation of gyro white noise (rad/s).
        accelerometer: standard deviation of accelerometer white noise (m/s^2).
        gyro_bias: magnitude of each sensor's constant gyro bias (rad/s); its direction is random per sensor.
        heading_drift_deg_per_s: rate (deg/s) at which each orientation turns about the IMU world's vertical;
            the sign is random per sensor.
        dropout: probability that an IMU sample is missing, in [0, 1).
        stamp_jitter_s: stamps move uniformly within +- this (bounded to 0.4 of the sample period).
        encoder_noise: standard deviation of encoder white noise (rad or m).
        encoder_resolution: encoder quantization step (rad or m); 0 = none.
        heading_random_walk_deg_per_sqrt_s: sigma_psi (deg/sqrt(s)) of each IMU's heading random walk; after T
            seconds the heading error has standard deviation sigma_psi sqrt(T) (0.39 gives 3 deg after a minute).
        heading_steps_per_min: rate of heading steps (magnetic disturbances), per IMU.
        heading_step_deg: size of each heading step (deg); its sign is random.
        gyro_bias_random_walk: sigma_b (rad/s/sqrt(s)) of the gyro bias random walk, per axis.
    """

    orientation_deg: float = 0.0
    gyro: float = 0.0
    accelerometer: float = 0.0
    gyro_bias: float = 0.0
    heading_drift_deg_per_s: float = 0.0
    dropout: float = 0.0
    stamp_jitter_s: float = 0.0
    encoder_noise: float = 0.0
    encoder_resolution: float = 0.0
    heading_random_walk_deg_per_sqrt_s: float = 0.0
    heading_steps_per_min: float = 0.0
    heading_step_deg: float = 0.0
    gyro_bias_random_walk: float = 0.0

    def __post_init__(self):
        for name in self.__dataclass_fields__:
            object.__setattr__(self, name, _check_nonnegative(getattr(self, name), f"SensorNoise.{name}"))
        if self.dropout >= 1.0:
            raise SimulationError(f"SensorNoise.dropout: expected a probability in [0, 1), got {self.dropout!r}")


#: Named noise levels (``dofkit demo --noise``). "default" is a good consumer IMU after its own fusion filter.
NOISE_PRESETS = {
    "none": SensorNoise(),
    "low": SensorNoise(orientation_deg=0.2, gyro=0.005, accelerometer=0.02, gyro_bias=0.002,
                       heading_drift_deg_per_s=0.005, dropout=0.002, stamp_jitter_s=0.0002,
                       encoder_noise=1e-4, encoder_resolution=2 * math.pi / 2**16),
    "default": SensorNoise(orientation_deg=0.5, gyro=0.01, accelerometer=0.05, gyro_bias=0.005,
                           heading_drift_deg_per_s=0.01, dropout=0.01, stamp_jitter_s=0.0005,
                           encoder_noise=2e-4, encoder_resolution=2 * math.pi / 2**14),
    "high": SensorNoise(orientation_deg=1.5, gyro=0.03, accelerometer=0.2, gyro_bias=0.02,
                        heading_drift_deg_per_s=0.05, dropout=0.05, stamp_jitter_s=0.001,
                        encoder_noise=1e-3, encoder_resolution=2 * math.pi / 2**12),
}


def noise_preset(name: str) -> SensorNoise:
    """The :data:`NOISE_PRESETS` entry ``name``; :class:`SimulationError` listing the presets otherwise."""
    if name not in NOISE_PRESETS:
        raise SimulationError(f"unknown noise preset {name!r}; expected one of {list(NOISE_PRESETS)}")
    return NOISE_PRESETS[name]


@dataclass(frozen=True)
class SimulatedImu:
    """An IMU to simulate: mounted on ``body`` with orientation ``R_BS`` and position ``p_BS`` (m) in B."""

    name: str
    body: str
    R_BS: np.ndarray = field(default_factory=lambda: np.eye(3))
    p_BS: np.ndarray = field(default_factory=lambda: np.zeros(3))
    model_instance: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SimulationError(f"SimulatedImu.name: expected a non-empty string, got {self.name!r}")
        R = np.array(self.R_BS, dtype=float)
        if R.shape != (3, 3) or not np.all(np.isfinite(R)) or np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or (
            abs(np.linalg.det(R) - 1.0) > 1e-6
        ):
            raise SimulationError(f"IMU {self.name!r} R_BS: expected a 3x3 proper rotation, got {R.tolist()}")
        p = np.array(self.p_BS, dtype=float)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise SimulationError(f"IMU {self.name!r} p_BS: expected 3 finite numbers, got {p.tolist()}")
        R.setflags(write=False)
        p.setflags(write=False)
        object.__setattr__(self, "R_BS", R)
        object.__setattr__(self, "p_BS", p)


class SineTrajectory:
    """Smooth, seeded motion of every coordinate of a finalized plant (see the module docstring).

    Args:
        plant: finalized MultibodyPlant.
        seed: seed of the random amplitudes split, frequencies and phases.
        centre: {articulated coordinate name: centre value}; others are centred between finite limits (or on
            their default when a limit is infinite).
        max_amplitude: largest motion amplitude of a revolute coordinate (rad) and of the floating base angles.
        max_translation: largest amplitude of prismatic/planar translations and the floating base position (m).
        frequency_range: (low, high) of the sine frequencies (Hz).
        limit_margin: fraction of each half-range kept free near the limits.
        components: number of sines per coordinate.
    """

    def __init__(self, plant, seed: int = 0, centre: dict | None = None, max_amplitude: float = 0.6,
                 max_translation: float = 0.2, frequency_range=(0.05, 0.35), limit_margin: float = 0.1,
                 components: int = 2):
        if not plant.is_finalized():
            raise SimulationError("SineTrajectory needs a finalized plant")
        low, high = (float(f) for f in frequency_range)
        if not (0.0 < low <= high and math.isfinite(high)):
            raise SimulationError(f"frequency_range: expected 0 < low <= high, got {frequency_range!r}")
        if isinstance(components, bool) or not isinstance(components, int) or components < 1:
            raise SimulationError(f"components: expected an integer >= 1, got {components!r}")
        max_amplitude = _check_nonnegative(max_amplitude, "max_amplitude")
        max_translation = _check_nonnegative(max_translation, "max_translation")
        limit_margin = _check_nonnegative(limit_margin, "limit_margin")
        rng = np.random.default_rng(seed)
        self.plant = plant
        view = plant.articulated_view()
        self._q_indices = np.asarray(view.q_indices, dtype=np.int64)
        self._v_indices = np.asarray(view.v_indices, dtype=np.int64)
        names = list(view.position_names())
        centre = dict(centre or {})
        unknown = sorted(set(centre) - set(names))
        if unknown:
            raise SimulationError(f"centre: unknown coordinates {unknown}; the articulated coordinates are {names}")
        lower = np.asarray(plant.position_lower_limits(), dtype=float)[self._q_indices]
        upper = np.asarray(plant.position_upper_limits(), dtype=float)[self._q_indices]
        default = np.asarray(plant.default_positions(), dtype=float)
        translational = self._translational_coordinates(plant, view)
        n = len(names)
        c = np.empty(n)
        amplitude = np.empty(n)
        for i, name in enumerate(names):
            cap = max_translation if translational[i] else max_amplitude
            finite = math.isfinite(lower[i]) and math.isfinite(upper[i])
            if finite:
                margin = limit_margin * 0.5 * (upper[i] - lower[i])
                lo, hi = lower[i] + margin, upper[i] - margin
                c[i] = min(max(centre.get(name, 0.5 * (lower[i] + upper[i])), lo), hi)
                amplitude[i] = min(cap, c[i] - lo, hi - c[i])
            else:
                c[i] = centre.get(name, default[self._q_indices[i]])
                lo = lower[i] if math.isfinite(lower[i]) else -math.inf
                hi = upper[i] if math.isfinite(upper[i]) else math.inf
                amplitude[i] = min(cap, c[i] - lo, hi - c[i])
        self.centre = c
        self.amplitude = amplitude
        self.position_names = tuple(names)
        # Split each amplitude over the components (random positive weights summing to 1).
        weights = rng.uniform(0.3, 1.0, size=(n, components))
        weights /= weights.sum(axis=1, keepdims=True)
        self._a = amplitude[:, None] * weights
        self._omega = 2 * math.pi * rng.uniform(low, high, size=(n, components))
        self._phi = rng.uniform(0, 2 * math.pi, size=(n, components))

        self._floating = []
        for joint in plant.floating_base_joints():
            parent = joint.frame_on_parent
            if parent.body.index != 0 or np.max(np.abs(np.asarray(parent.X_BF) - np.eye(4))) > 1e-12:
                raise SimulationError(
                    f"floating joint {joint.name!r}: the simulator moves floating bases attached directly to the "
                    f"world frame only; its parent frame is {parent.name!r}"
                )
            q0 = default[joint.position_start:joint.position_start + 7]
            self._floating.append({
                "q_start": joint.position_start,
                "v_start": joint.velocity_start,
                "R0": quat_to_matrix(q0[:4] / np.linalg.norm(q0[:4])),
                "p0": q0[4:].copy(),
                "a": rng.uniform(0.3, 1.0, size=(6, components)) / components
                * np.array([max_amplitude] * 3 + [max_translation] * 3)[:, None],
                "omega": 2 * math.pi * rng.uniform(low, high, size=(6, components)),
                "phi": rng.uniform(0, 2 * math.pi, size=(6, components)),
            })

    @staticmethod
    def _translational_coordinates(plant, view) -> np.ndarray:
        """True for articulated coordinates measured in metres (prismatic, planar x and y)."""
        flags = np.zeros(view.num_positions(), dtype=bool)
        for instance in range(plant.num_model_instances()):
            for j in view.get_joint_indices(instance):
                joint = view.get_joint(j)
                if joint.position_start < 0:
                    continue
                if joint.type_name == "prismatic":
                    flags[joint.position_start] = True
                elif joint.type_name == "planar":
                    flags[joint.position_start:joint.position_start + 2] = True
        return flags

    @staticmethod
    def _sines(t, a, omega, phi):
        """Value, first and second derivative of sum_k a sin(omega t + phi); t (T,), a (n, K) -> (T, n) each."""
        arg = t[:, None, None] * omega[None] + phi[None]
        s, c = np.sin(arg), np.cos(arg)
        return (a * s).sum(-1), (a * omega * c).sum(-1), -(a * omega**2 * s).sum(-1)

    def _coordinates(self, t):
        """The articulated coordinates' offsets from their centres and rates at t (T,): (T, n) each."""
        value, rate, _ = self._sines(t, self._a, self._omega, self._phi)
        return value, rate

    def _base_motion(self, t, base):
        """A floating base's (yaw, pitch, roll) angles, their rates, translation offset and velocity: (T, 3) each."""
        angles, rates, _ = self._sines(t, base["a"][:3], base["omega"][:3], base["phi"][:3])
        offset, velocity, _ = self._sines(t, base["a"][3:], base["omega"][3:], base["phi"][3:])
        return angles, rates, offset, velocity

    def evaluate(self, times):
        """``(q, v)`` at ``times`` (T,): shapes (T, nq), (T, nv); plant (Drake) coordinates."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        if t.ndim != 1 or not np.all(np.isfinite(t)):
            raise SimulationError(f"times: expected a 1-D array of finite seconds, got shape {t.shape}")
        plant = self.plant
        T = t.shape[0]
        q = np.tile(np.asarray(plant.default_positions(), dtype=float), (T, 1))
        v = np.zeros((T, plant.num_velocities()))
        value, rate = self._coordinates(t)
        q[:, self._q_indices] = self.centre + value
        v[:, self._v_indices] = rate
        for base in self._floating:
            angles, rates, offset, velocity = self._base_motion(t, base)
            yaw, pitch, roll = angles[:, 0], angles[:, 1], angles[:, 2]
            Rz, Ry, Rx = rotation_z(yaw), rotation_y(pitch), rotation_x(roll)
            R = Rz @ Ry @ Rx @ base["R0"]
            # w_WB_W of Rz(psi) Ry(theta) Rx(phi) R0: psi' z + theta' Rz y + phi' Rz Ry x.
            z_axis = np.array([0.0, 0.0, 1.0])
            y_axis = Rz[:, :, 1]
            x_axis = (Rz @ Ry)[:, :, 0]
            w = rates[:, :1] * z_axis + rates[:, 1:2] * y_axis + rates[:, 2:3] * x_axis
            qs, vs = base["q_start"], base["v_start"]
            q[:, qs:qs + 4] = matrix_to_quat(R)
            q[:, qs + 4:qs + 7] = base["p0"] + offset
            v[:, vs:vs + 3] = w
            v[:, vs + 3:vs + 6] = velocity
        return q, v


#: One stride of level walking at a self-selected speed, per coordinate of ros_dofkit/models/lower_body.urdf (the
#: left side; the right side is the same half a stride later): ``(mean, ((harmonic, amplitude, phase), ...))`` with
#: value(t) = mean + sum amplitude sin(2 pi harmonic f t + phase), phase 0 at the left heel strike; angles in degrees,
#: the pelvis' translation in metres. Joint angles: two or three harmonics fitted (least squares) to the normative
#: sagittal curves of Perry & Burnfield, Gait Analysis: Normal and Pathological Function, 2nd ed. (2010), ch. 4-7
#: (hip +30 deg flexed at heel strike to -10 deg at terminal stance; knee 5 deg at heel strike, ~18 deg in loading
#: response, ~60 deg in swing; ankle 10 deg dorsiflexion in terminal stance, ~15 deg plantarflexion after toe-off) and
#: Kadaba, Ramakrishnan & Wootten, J. Orthop. Res. 8 (1990) 383-392 (hip adduction and rotation, ankle inversion
#: ranges of ~10 deg or less). Pelvis: rotation and obliquity +-4 deg once a stride, tilt +-1.5 deg twice (Perry &
#: Burnfield); the centre of mass rises and falls +-2.3 cm twice a stride (lowest at double support) and sways +-2 cm
#: once (Saunders, Inman & Eberhart, J. Bone Joint Surg. 35-A (1953) 543-558); its forward speed varies by
#: +-0.13 m/s (10 % of 1.3 m/s, fastest at double support) twice a stride: +-1.2 cm about the mean forward motion,
#: +-1.5 m/s^2, the order of the trunk accelerations measured in walking (Zijlstra & Hof, Gait & Posture 18 (2003)
#: 1-10). The walk is on a treadmill (no mean forward velocity: a constant velocity changes no sensor reading).
LOWER_BODY_GAIT = {
    "hip_flexion": (9.5, ((1, 20.8, 1.84), (2, 6.6, 3.07))),
    "hip_adduction": (0.0, ((1, 5.0, 0.63),)),
    "hip_rotation": (0.0, ((1, 4.0, -0.31),)),
    "knee_flexion": (23.9, ((1, 20.6, -2.95), (2, 15.4, -1.09), (3, 1.8, -0.86))),
    "ankle_dorsiflexion": (-1.7, ((1, 4.8, -0.18), (2, 9.2, 2.86))),
    "ankle_inversion": (0.0, ((1, 3.0, 0.63),)),
    "base_yaw": (0.0, ((1, 4.0, 0.0),)),
    "base_pitch": (0.0, ((2, 1.5, 0.0),)),
    "base_roll": (0.0, ((1, 4.0, 1.57),)),
    "base_x": (0.0, ((2, 0.0115, 0.0),)),
    "base_y": (0.0, ((1, 0.02, 0.0),)),
    "base_z": (0.0, ((2, 0.023, -1.57),)),
}

#: Self-selected cadence of adults, ~108 steps per minute (Perry & Burnfield: 113 on average): 0.9 strides per s.
GAIT_STRIDE_FREQUENCY_HZ = 0.9

#: A session starts standing still in the neutral pose (the pose an IMU suit is calibrated in) for this long (s) ...
GAIT_STANDING_S = 5.0

#: ... then starts walking smoothly over this long (s).
GAIT_START_S = 2.0

#: The floating base's series in :data:`LOWER_BODY_GAIT`, in the order of ``SineTrajectory``'s base arrays.
_BASE_SERIES = ("base_yaw", "base_pitch", "base_roll", "base_x", "base_y", "base_z")


class GaitTrajectory(SineTrajectory):
    """Walking on a treadmill: every coordinate named in ``gait`` (default :data:`LOWER_BODY_GAIT`, sides
    ``left_`` and ``right_``, the right half a stride later) follows its stride's Fourier series at
    ``stride_frequency_hz``; the floating base's angles and translation follow the ``base_*`` series. Each series'
    amplitudes are scaled by one seeded factor in [1 - variability, 1 + variability] (subjects differ); coordinates
    the table does not name stay at their centre. The session starts standing in the neutral pose (every gait
    coordinate and the base's motion 0) for ``standing_s``, then the gait fades in over ``start_s``: q = r(t) q_gait
    with a smooth r from 0 to 1, v = r' q_gait + r v_gait (analytic, as in :class:`SineTrajectory`).

    The slow :class:`SineTrajectory` moves the lower body's hip centres by a few 0.1 m/s^2; walking moves them by
    1-2 m/s^2 (the pelvis' accelerations above), which is what a lower-body IMU suit records.
    """

    def __init__(self, plant, seed: int = 0, stride_frequency_hz: float = GAIT_STRIDE_FREQUENCY_HZ,
                 gait: dict | None = None, variability: float = 0.1, standing_s: float = GAIT_STANDING_S,
                 start_s: float = GAIT_START_S):
        super().__init__(plant, seed=seed, max_amplitude=0.0, max_translation=0.0, components=1)
        self.standing_s = _check_nonnegative(standing_s, "standing_s")
        self.start_s = _check_nonnegative(start_s, "start_s")
        gait = LOWER_BODY_GAIT if gait is None else gait
        frequency = _check_nonnegative(stride_frequency_hz, "stride_frequency_hz")
        if frequency == 0.0:
            raise SimulationError("stride_frequency_hz: expected a frequency > 0, got 0")
        variability = _check_nonnegative(variability, "variability")
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        K = max(len(series) for _, series in gait.values())
        names = list(self.position_names)
        series = {f"{side}_{name}": (mean, terms, shift) for name, (mean, terms) in gait.items()
                  if not name.startswith("base_") for side, shift in (("left", 0.0), ("right", math.pi))}
        unknown = sorted(set(series) - set(names))
        if unknown:
            raise SimulationError(f"gait: coordinates {unknown} are not in the plant; its coordinates are {names}")
        a, omega, phi = np.zeros((len(names), K)), np.ones((len(names), K)), np.zeros((len(names), K))
        for name, (mean, terms, shift) in series.items():
            i = names.index(name)
            self.centre[i] = math.radians(mean)
            a[i], omega[i], phi[i] = _gait_terms(terms, K, frequency, shift, math.radians(1.0), rng, variability)
        self._a, self._omega, self._phi = a, omega, phi
        for base in self._floating:
            base["a"], base["omega"], base["phi"] = np.zeros((6, K)), np.ones((6, K)), np.zeros((6, K))
            for row, name in enumerate(_BASE_SERIES):
                mean, terms = gait.get(name, (0.0, ()))
                if mean:
                    raise SimulationError(f"gait: {name} must have mean 0 (the base moves about its default pose)")
                unit = math.radians(1.0) if row < 3 else 1.0
                base["a"][row], base["omega"][row], base["phi"][row] = _gait_terms(terms, K, frequency, 0.0, unit, rng,
                                                                                 variability)
        self.amplitude = np.abs(a).sum(axis=1)
        self.stride_frequency_hz = frequency
        self._walking = np.isin(np.arange(len(names)), [names.index(name) for name in series])

    def _ramp(self, t):
        """The gait's share r(t) and its rate: 0 while standing, 6x^5 - 15x^4 + 10x^3 over the start
        (x = (t - standing_s) / start_s; continuous acceleration), then 1 (always 1 without standing and start:
        the accelerometer's differences then see no step at t = 0)."""
        if self.start_s == 0.0:
            step = np.ones_like(t) if self.standing_s == 0.0 else (t >= self.standing_s).astype(float)
            return step, np.zeros_like(t)
        x = np.clip((t - self.standing_s) / self.start_s, 0.0, 1.0)
        return x ** 3 * (10.0 - 15.0 * x + 6.0 * x * x), 30.0 * x * x * (1.0 - x) ** 2 / self.start_s

    def _coordinates(self, t):
        """The gait's coordinates times the ramp: the neutral pose (0) while standing, the stride after the start."""
        value, rate = super()._coordinates(t)
        r, dr = self._ramp(t)
        full = self.centre + value
        walking = self._walking
        value[:, walking] = r[:, None] * full[:, walking] - self.centre[walking]
        rate[:, walking] = dr[:, None] * full[:, walking] + r[:, None] * rate[:, walking]
        return value, rate

    def _base_motion(self, t, base):
        angles, rates, offset, velocity = super()._base_motion(t, base)
        r, dr = (values[:, None] for values in self._ramp(t))
        return r * angles, dr * angles + r * rates, r * offset, dr * offset + r * velocity


def _gait_terms(terms, K: int, frequency: float, shift: float, unit: float, rng, variability: float):
    """(a, omega, phi) (K,) each of one gait series (module constant :data:`LOWER_BODY_GAIT`), unused terms of
    amplitude 0; ``shift`` the phase of a stride (pi: half a stride later, times the harmonic)."""
    a, omega, phi = np.zeros(K), np.ones(K), np.zeros(K)
    scale = rng.uniform(1.0 - variability, 1.0 + variability)
    for k, (harmonic, amplitude, phase) in enumerate(terms):
        a[k] = scale * amplitude * unit
        omega[k] = 2.0 * math.pi * harmonic * frequency
        phi[k] = phase + harmonic * shift
    return a, omega, phi


@dataclass(frozen=True)
class ImuReadings:
    """One IMU's simulated stream. Arrays have one row per *delivered* sample (dropouts removed).

    Attributes:
        name: IMU name.
        stamps: (K,) sample stamps (s), jitter included, increasing.
        quaternion_wxyz: (K, 4) measured R_GS.
        angular_velocity: (K, 3) measured w_S (rad/s).
        linear_acceleration: (K, 3) measured specific force in S (m/s^2).
        sample_index: (K,) index of each sample into the simulation's time grid.
        true_quaternion_wxyz, true_angular_velocity, true_linear_acceleration: the noise-free readings at the
            same samples.
        gyro_bias: (3,) the initial bias added to this sensor's gyro (constant unless it walks).
        heading_drift_rate: signed drift rate (rad/s) about G's vertical.
        heading_error: (K,) the heading error psi (rad) of each measured orientation: R_meas = Rz(psi) R_GS
            before white noise (drift, random walk and steps together).
        gyro_bias_walk: (K, 3) the part of the gyro bias that walked since the start (rad/s); the bias of a
            sample is ``gyro_bias + gyro_bias_walk[k]``.
    """

    name: str
    stamps: np.ndarray
    quaternion_wxyz: np.ndarray
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray
    sample_index: np.ndarray
    true_quaternion_wxyz: np.ndarray
    true_angular_velocity: np.ndarray
    true_linear_acceleration: np.ndarray
    gyro_bias: np.ndarray
    heading_drift_rate: float
    heading_error: np.ndarray
    gyro_bias_walk: np.ndarray


@dataclass(frozen=True)
class EncoderReadings:
    """Encoder JointState samples: ``names`` (k,), ``stamps`` (M,), ``positions`` / ``velocities`` (M, k)."""

    names: tuple
    stamps: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray


@dataclass(frozen=True)
class SimulationRun:
    """The output of :meth:`SensorSimulator.run`: truth on the time grid plus the sensor streams.

    ``times`` (T,) is the IMU time grid; ``q`` (T, nq) and ``v`` (T, nv) the true plant coordinates there;
    ``truth_names`` / ``truth_positions`` (T, n) the true articulated coordinates (JointState names).
    """

    times: np.ndarray
    q: np.ndarray
    v: np.ndarray
    position_names: tuple
    truth_names: tuple
    truth_positions: np.ndarray
    truth_velocities: np.ndarray
    imus: tuple
    encoders: EncoderReadings | None

    def imu(self, name: str) -> ImuReadings:
        for readings in self.imus:
            if readings.name == name:
                return readings
        raise SimulationError(f"unknown IMU {name!r}; simulated IMUs are {[r.name for r in self.imus]}")

    def events(self):
        """Every sample as ``(stamp, kind, name, index)`` in stamp order; kind is "imu" or "joint_state" (name
        None, index into the encoder arrays). Ties keep encoders before IMUs, IMUs in configuration order."""
        entries = []
        if self.encoders is not None:
            for k, stamp in enumerate(self.encoders.stamps):
                entries.append((float(stamp), 0, 0, "joint_state", None, k))
        for order, readings in enumerate(self.imus):
            for k, stamp in enumerate(readings.stamps):
                entries.append((float(stamp), 1, order, "imu", readings.name, k))
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        return [(stamp, kind, name, index) for stamp, _, _, kind, name, index in entries]


class SensorSimulator:
    """Simulated IMUs and encoders on a plant moving along a :class:`SineTrajectory`.

    Args:
        plant: finalized MultibodyPlant.
        imus: :class:`SimulatedImu` list (bodies looked up by name; unknown names raise listing the bodies).
        encoder_joints: articulated coordinate names measured by encoders (JointState names).
        trajectory: the motion (default: ``SineTrajectory(plant, seed)``).
        noise: :class:`SensorNoise` (default: exact sensors).
        R_WG: rotation of the IMU world G in the model world W (3x3).
        imu_rate_hz, encoder_rate_hz: sample rates.
        gravity: magnitude of gravity (m/s^2), along -z of the model world.
        seed: seed of every random draw of the sensors.
    """

    def __init__(self, plant, imus, encoder_joints=(), trajectory: SineTrajectory | None = None,
                 noise: SensorNoise | None = None, R_WG=None, imu_rate_hz: float = 100.0,
                 encoder_rate_hz: float = 100.0, gravity: float = STANDARD_GRAVITY, seed: int = 0):
        if not plant.is_finalized():
            raise SimulationError("SensorSimulator needs a finalized plant")
        self.plant = plant
        self.imus = tuple(imus)
        for imu in self.imus:
            if not isinstance(imu, SimulatedImu):
                raise SimulationError(f"imus: expected SimulatedImu entries, got {type(imu).__name__}")
        names = [imu.name for imu in self.imus]
        if len(set(names)) != len(names):
            raise SimulationError(f"imus: names must be unique, got {names}")
        self._bodies = []
        for imu in self.imus:
            try:
                instance = None if imu.model_instance is None else plant.get_model_instance_by_name(imu.model_instance)
                body = plant.get_body_by_name(imu.body, instance) if instance is not None else (
                    plant.get_body_by_name(imu.body)
                )
            except ValueError as error:
                raise SimulationError(f"IMU {imu.name!r}: {error}") from error
            self._bodies.append(body)
        view = plant.articulated_view()
        art_names = list(view.position_names())
        self.encoder_joints = tuple(encoder_joints)
        unknown = [n for n in self.encoder_joints if n not in art_names]
        if unknown:
            raise SimulationError(f"encoder_joints: unknown coordinates {unknown}; valid names are {art_names}")
        self._art_q = np.asarray(view.q_indices, dtype=np.int64)
        self._art_v = np.asarray(view.v_indices, dtype=np.int64)
        self._art_names = tuple(art_names)
        self._encoder_q = np.array([self._art_q[art_names.index(n)] for n in self.encoder_joints], dtype=np.int64)
        self._encoder_v = np.array([self._art_v[art_names.index(n)] for n in self.encoder_joints], dtype=np.int64)
        self.trajectory = trajectory if trajectory is not None else SineTrajectory(plant, seed=seed)
        if self.trajectory.plant is not plant:
            raise SimulationError("trajectory: it was built on a different plant than the simulator's")
        self.noise = noise if noise is not None else SensorNoise()
        if not isinstance(self.noise, SensorNoise):
            raise SimulationError(f"noise: expected SensorNoise, got {type(self.noise).__name__}")
        R_WG = np.eye(3) if R_WG is None else np.asarray(R_WG, dtype=float)
        if R_WG.shape != (3, 3) or np.max(np.abs(R_WG.T @ R_WG - np.eye(3))) > 1e-6 or (
            abs(np.linalg.det(R_WG) - 1) > 1e-6
        ):
            raise SimulationError(f"R_WG: expected a 3x3 proper rotation, got {R_WG.tolist()}")
        self.R_WG = R_WG
        for name, rate in (("imu_rate_hz", imu_rate_hz), ("encoder_rate_hz", encoder_rate_hz)):
            if _check_nonnegative(rate, name) == 0.0:
                raise SimulationError(f"{name}: expected a rate > 0, got {rate!r}")
        self.imu_rate_hz = float(imu_rate_hz)
        self.encoder_rate_hz = float(encoder_rate_hz)
        self.gravity = _check_nonnegative(gravity, "gravity")
        self.seed = seed

    # ------------------------------------------------------------------ noise-free kinematics
    def sensor_kinematics(self, times):
        """Noise-free ``(R_WS, w_S, f_S)`` of every IMU at ``times``: shapes (n_imu, T, 3, 3), (n_imu, T, 3) x 2.

        Gyro from the angular Jacobian (analytic); specific force from a central second difference of the
        sensor origin's FK position (step :data:`ACCELERATION_STEP_S`).
        """
        plant = self.plant
        t = np.asarray(times, dtype=float)
        q, v = self.trajectory.evaluate(t)
        h = ACCELERATION_STEP_S
        q_minus = self.trajectory.evaluate(t - h)[0]
        q_plus = self.trajectory.evaluate(t + h)[0]
        bodies = [body.index for body in self._bodies]
        X = plant.calc_body_poses(q)[:, bodies]
        X_minus = plant.calc_body_poses(q_minus)[:, bodies]
        X_plus = plant.calc_body_poses(q_plus)[:, bodies]
        g_W = np.array([0.0, 0.0, -self.gravity])
        R_WS_all, w_all, f_all = [], [], []
        for k, (imu, body) in enumerate(zip(self.imus, self._bodies, strict=True)):
            R_WB = X[:, k, :3, :3]
            R_WS = R_WB @ imu.R_BS
            p_WSo = [X_t[:, k, :3, 3] + X_t[:, k, :3, :3] @ imu.p_BS for X_t in (X_minus, X, X_plus)]
            a_W = (p_WSo[2] - 2.0 * p_WSo[1] + p_WSo[0]) / (h * h)
            J_w = plant.calc_angular_jacobian(q, body)  # (T, 3, nv)
            w_W = np.einsum("tij,tj->ti", J_w, v)
            R_SW = np.swapaxes(R_WS, -1, -2)
            R_WS_all.append(R_WS)
            w_all.append(np.einsum("tij,tj->ti", R_SW, w_W))
            f_all.append(np.einsum("tij,tj->ti", R_SW, a_W - g_W))
        return np.stack(R_WS_all), np.stack(w_all), np.stack(f_all)

    def _sensor_kinematics_in_blocks(self, times):
        """:meth:`sensor_kinematics` over blocks of :data:`KINEMATICS_BLOCK_SAMPLES` samples: the same values (every
        sample is computed on its own), with the forward kinematics of all bodies at three instants held for one
        block at a time, not for the whole session (a 10-minute lower-body session at 100 Hz held ~0.6 GB)."""
        parts = [self.sensor_kinematics(times[k:k + KINEMATICS_BLOCK_SAMPLES])
                 for k in range(0, len(times), KINEMATICS_BLOCK_SAMPLES)]
        return tuple(np.concatenate([part[i] for part in parts], axis=1) for i in range(3))

    # ------------------------------------------------------------------ the run
    def run(self, duration_s: float, start_s: float = 0.0) -> SimulationRun:
        """Simulate ``duration_s`` seconds from ``start_s``: truth on the IMU grid and every sensor stream."""
        duration_s = _check_nonnegative(duration_s, "duration_s")
        start_s = _check_nonnegative(start_s, "start_s")
        if duration_s == 0.0:
            raise SimulationError("duration_s: expected a duration > 0")
        noise = self.noise
        rng = np.random.default_rng(self.seed)
        period = 1.0 / self.imu_rate_hz
        count = int(math.floor(duration_s * self.imu_rate_hz + 1e-9)) + 1
        times = start_s + period * np.arange(count)
        q, v = self.trajectory.evaluate(times)
        R_WS, w_S, f_S = self._sensor_kinematics_in_blocks(times)
        R_GW = self.R_WG.T
        jitter_bound = min(noise.stamp_jitter_s, 0.4 * period)
        slow_rng = np.random.default_rng(np.random.SeedSequence(self.seed).spawn(1)[0])
        readings = []
        for k, imu in enumerate(self.imus):
            R_GS = R_GW @ R_WS[k]
            true_quat = matrix_to_quat(R_GS)
            drift_rate = math.radians(noise.heading_drift_deg_per_s) * (1.0 if rng.random() < 0.5 else -1.0)
            heading_error = drift_rate * (times - start_s) + _slow_heading_error(noise, slow_rng, count, period)
            R_meas = rotation_z(heading_error) @ R_GS
            if noise.orientation_deg > 0.0:
                R_meas = R_meas @ rotvec_to_matrix(rng.normal(0.0, math.radians(noise.orientation_deg), (count, 3)))
            direction = rng.normal(size=3)
            bias = noise.gyro_bias * direction / np.linalg.norm(direction)
            bias_walk = _wiener(slow_rng, noise.gyro_bias_random_walk, count, period, 3)
            gyro = w_S[k] + bias + bias_walk + rng.normal(0.0, noise.gyro, (count, 3))
            accel = f_S[k] + rng.normal(0.0, noise.accelerometer, (count, 3))
            stamps = times + rng.uniform(-jitter_bound, jitter_bound, count)
            keep = rng.random(count) >= noise.dropout
            readings.append(ImuReadings(
                name=imu.name,
                stamps=_readonly(stamps[keep]),
                quaternion_wxyz=_readonly(matrix_to_quat(R_meas)[keep]),
                angular_velocity=_readonly(gyro[keep]),
                linear_acceleration=_readonly(accel[keep]),
                sample_index=_readonly(np.flatnonzero(keep)),
                true_quaternion_wxyz=_readonly(true_quat[keep]),
                true_angular_velocity=_readonly(w_S[k][keep]),
                true_linear_acceleration=_readonly(f_S[k][keep]),
                gyro_bias=_readonly(bias),
                heading_drift_rate=drift_rate,
                heading_error=_readonly(heading_error[keep]),
                gyro_bias_walk=_readonly(bias_walk[keep]),
            ))
        encoders = None
        if self.encoder_joints:
            encoder_count = int(math.floor(duration_s * self.encoder_rate_hz + 1e-9)) + 1
            encoder_times = start_s + np.arange(encoder_count) / self.encoder_rate_hz
            q_enc, v_enc = self.trajectory.evaluate(encoder_times)
            positions = q_enc[:, self._encoder_q] + rng.normal(0.0, noise.encoder_noise,
                                                               (encoder_count, len(self.encoder_joints)))
            if noise.encoder_resolution > 0.0:
                positions = np.round(positions / noise.encoder_resolution) * noise.encoder_resolution
            encoders = EncoderReadings(
                names=self.encoder_joints,
                stamps=_readonly(encoder_times),
                positions=_readonly(positions),
                velocities=_readonly(v_enc[:, self._encoder_v]),
            )
        return SimulationRun(
            times=_readonly(times),
            q=_readonly(q),
            v=_readonly(v),
            position_names=tuple(self.plant.position_names()),
            truth_names=self._art_names,
            truth_positions=_readonly(q[:, self._art_q]),
            truth_velocities=_readonly(v[:, self._art_v]),
            imus=tuple(readings),
            encoders=encoders,
        )


def _wiener(rng, sigma: float, count: int, period: float, axes: int = 1) -> np.ndarray:
    """``sigma W(t)`` on a grid of ``count`` samples ``period`` apart, starting at 0: shape (count,) or (count, axes).
    No draw when ``sigma`` is 0 (the stream then stays where it was)."""
    shape = (count,) if axes == 1 else (count, axes)
    if sigma == 0.0:
        return np.zeros(shape)
    steps = rng.normal(0.0, sigma * math.sqrt(period), shape)
    steps[0] = 0.0
    return np.cumsum(steps, axis=0)


def _slow_heading_error(noise: SensorNoise, rng, count: int, period: float) -> np.ndarray:
    """The random walk and the disturbance steps of one IMU's heading error (rad), on the time grid."""
    walk = _wiener(rng, math.radians(noise.heading_random_walk_deg_per_sqrt_s), count, period)
    if noise.heading_steps_per_min == 0.0 or noise.heading_step_deg == 0.0:
        return walk
    events = rng.poisson(noise.heading_steps_per_min / 60.0 * period, count)
    events[0] = 0
    signs = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return walk + np.cumsum(events * signs) * math.radians(noise.heading_step_deg)


def _readonly(array) -> np.ndarray:
    array = np.array(array, dtype=float if np.asarray(array).dtype.kind == "f" else None, copy=True)
    array.setflags(write=False)
    return array
