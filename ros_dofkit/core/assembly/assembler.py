"""The Assembler: finds the configuration q that best satisfies the adopted assembly conditions (Simbody's
``SimTK::Assembler``), frame after frame.

Where you are: ``ros_dofkit.core.assembly`` (ROS-free core); imports NumPy, ``core.spatial``, the assembly
conditions and ``kernels`` (numba).

Problem. With goal conditions c (weight 0 < W_c < ∞) and error conditions (weight ∞):

    minimize  F(q) = Σ_c W_c goal_c(q)     subject to  errors(q) = 0,   lo <= q_i <= hi_i (restricted q's),

over the *free* coordinates (not locked). Free coordinates live in velocity space: a step dv changes q by
``plant.integrate_positions(q, dv)``, so floating-base quaternions stay unit. Locking a quaternion component of a
floating joint locks the joint's whole rotation (its three angular velocities); its translation coordinates can
be locked one by one (OpenSense locks translations). Bounds apply to coordinates whose velocity is their time
derivative (revolute, prismatic, planar, floating translation).

Every goal of an OrientationSensors / Markers condition is ½·(weighted mean of squared errors), so F = ½|r|²
with one residual row triple per contributing sensor: the solver is a damped Gauss-Newton (Levenberg-Marquardt)
iteration on these residuals with their analytic Jacobians, the bounds handled by an active set (variables on a
bound whose gradient pushes outward are held) plus clipping, and hard errors by the null-space form of the
equality-constrained Gauss-Newton step. Details and the exact convergence tests: :func:`kernels.solve`.

Accuracy and tolerance (SPEC 3.6): ``set_accuracy(a)``, 0 <= a < 1, 0 = default 1e-3. The solve stops when the
error norm is within the tolerance and an accepted step had |dv|∞ <= a (radians / metres; with Gauss-Newton's
quadratic convergence the remaining error on a consistent problem is then about a²) or reduced the goal by at
most a² of its value. ``set_error_tolerance(t)``, t >= 0, 0 = a/10 if the accuracy was set explicitly, else 1e-4:
the largest acceptable error norm (max-abs, or RMS after ``set_use_rms_error_norm(True)``). assemble() and track()
skip the solve when the error norm <= t and the goal <= t² (Simbody's short-circuit).

Two back ends: ``"compiled"`` (default; numba kernels over ``plant.tree``, no Python per iteration) and
``"reference"`` (the same iteration in Python over the conditions' readable calc_errors / calc_error_jacobian
and the plant's public kinematics). They agree to the solver tolerance.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import kernels
from ros_dofkit.core.assembly.condition import AssemblyCondition, SensorSet
from ros_dofkit.core.assembly.errors import (
    AssembleFailed,
    AssemblyIndexError,
    AssemblyStateError,
    AssemblyValueError,
    TrackFailed,
    near_matches,
)
from ros_dofkit.core.assembly.observations import sequence_inputs
from ros_dofkit.core.assembly.orientation_sensors import OrientationSensors
from ros_dofkit.core.multibody.compiled import forward_kinematics

DEFAULT_ACCURACY = 1e-3
DEFAULT_ERROR_TOLERANCE = 1e-4
DEFAULT_MAX_ITERATIONS = 1000
# Initial λ of the damping μ = λ |gradient| (see kernels.compute_step).
_INITIAL_LAMBDA = 1e-2
# A quaternion norm this close to 1 is unit to rounding (set_positions keeps it as given).
_UNIT_TO_ROUNDING = 4.0 * np.finfo(float).eps

_STATUS_TEXT = {
    kernels.STATUS_CONVERGED: "converged",
    kernels.STATUS_MAX_ITERATIONS: "the iteration limit was reached",
    kernels.STATUS_STALLED: "no step improves the solution any more",
}


class FrameTracking(NamedTuple):
    """What ``kernels.track_frames`` takes of an Assembler's current problem (:meth:`Assembler.frame_tracking`).

    Attributes:
        tracker: the compiled per-frame state (``kernels.Tracker``: tree, sensors, settings, workspaces).
        held_q: (k,) int64 the locked coordinates (``track_frames``' ``locked_q``).
        floating_q: (f,) int64 the first q of each floating joint's quaternion.
        held_floating: a floating joint's quaternion is locked (``track_sequence`` normalizes its per-frame value).
    """

    tracker: object
    held_q: np.ndarray
    floating_q: np.ndarray
    held_floating: bool


class Assembler:
    """Solve for q from adopted conditions; Simbody's ``Assembler``. See the module docstring for the math.

    ``plant`` is a finalized ``MultibodyPlant``; the internal q starts at ``plant.default_positions()``.
    """

    def __init__(self, plant, backend: str = "compiled"):
        if not getattr(plant, "is_finalized", lambda: False)():
            raise AssemblyStateError("Assembler: expected a finalized MultibodyPlant (call plant.finalize() first)")
        if backend not in ("compiled", "reference"):
            raise AssemblyValueError(f"backend: expected 'compiled' or 'reference', got {backend!r}")
        self.plant = plant
        self._backend = backend
        self._nq = plant.num_positions()
        self._nv = plant.num_velocities()
        self._q = np.array(plant.default_positions(), dtype=float)
        self._conditions: list[AssemblyCondition] = []
        self._weights: list[float] = []
        self._locked_q: set[int] = set()
        self._restrictions: dict[int, tuple[float, float]] = {}
        self._accuracy = 0.0
        self._tolerance = 0.0
        self._use_rms = False
        self._max_iterations = DEFAULT_MAX_ITERATIONS
        self._time = 0.0
        self._initialized = False
        self._nothing_observed = False
        self._v_of_q, self._quaternion_q = self._coordinate_maps(plant)
        # First q of each floating joint's quaternion: fixed by the finalized plant, looked up once, not per frame.
        self._floating_q = tuple(joint.position_start for joint in plant.floating_base_joints())
        self._stats = np.zeros(3, dtype=np.int64)  # residual evals, Jacobian evals, iterations
        self._tracker = None  # the compiled per-frame state (kernels.Tracker), built at the first solve
        self._frame_tracking = None  # frame_tracking()'s record of the current tracker
        self._num_initializations = 0

    @staticmethod
    def _coordinate_maps(plant):
        """(q index -> list of v indices it moves, set of quaternion q indices)."""
        v_of_q: list[list[int]] = [[] for _ in range(plant.num_positions())]
        quaternion_q: set[int] = set()
        for j in plant.get_joint_indices():
            joint = plant.get_joint(j)
            qs, vs = joint.position_start, joint.velocity_start
            if joint.num_positions == 0:
                continue
            if joint.type_name == "quaternion_floating":
                for i in range(4):
                    v_of_q[qs + i] = [vs, vs + 1, vs + 2]
                    quaternion_q.add(qs + i)
                for i in range(3):
                    v_of_q[qs + 4 + i] = [vs + 3 + i]
            else:
                for i in range(joint.num_positions):
                    v_of_q[qs + i] = [vs + i]
        return v_of_q, quaternion_q

    # -- conditions ----------------------------------------------------------------------------------------------
    def adopt_assembly_goal(self, condition, weight: float = 1.0) -> int:
        """Adopt a condition with a weight: 0 ignores it, ∞ makes it hard errors, else a goal. ``adoptAssemblyGoal``.

        Returns the condition's index in this Assembler.
        """
        if not isinstance(condition, SensorSet):
            raise TypeError(
                "adopt_assembly_goal: expected an OrientationSensors or Markers condition, got "
                f"{type(condition).__name__}"
            )
        weight = self._check_condition_weight(weight)
        if any(c is condition for c in self._conditions):
            raise AssemblyValueError(f"assembly condition {condition.name!r} is already adopted by this Assembler")
        condition.attach(self)
        self._conditions.append(condition)
        self._weights.append(weight)
        self.uninitialize()
        return len(self._conditions) - 1

    def adopt_assembly_error(self, condition) -> int:
        """Adopt a condition as hard errors (weight ∞). Simbody: ``adoptAssemblyError``."""
        return self.adopt_assembly_goal(condition, math.inf)

    @staticmethod
    def _check_condition_weight(weight) -> float:
        if weight is None or isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise AssemblyValueError(f"assembly condition weight: expected a real number >= 0 (or inf), got {weight!r}")
        weight = float(weight)
        if math.isnan(weight) or weight < 0.0:
            raise AssemblyValueError(f"assembly condition weight: expected a real number >= 0 (or inf), got {weight}")
        return weight

    def _condition_index(self, condition) -> int:
        if isinstance(condition, numbers.Integral) and not isinstance(condition, bool):
            if not 0 <= int(condition) < len(self._conditions):
                raise AssemblyIndexError(
                    f"assembly condition index {condition} out of range [0, {len(self._conditions)})"
                )
            return int(condition)
        for i, c in enumerate(self._conditions):
            if c is condition:
                return i
        raise AssemblyValueError("assembly condition: not adopted by this Assembler")

    def set_assembly_condition_weight(self, condition, weight: float) -> None:
        """Change a condition's weight (condition object or index). Simbody: ``setAssemblyConditionWeight``."""
        ix = self._condition_index(condition)
        self._weights[ix] = self._check_condition_weight(weight)
        self.uninitialize()

    def get_assembly_condition_weight(self, condition) -> float:
        """Simbody: ``getAssemblyConditionWeight``."""
        return self._weights[self._condition_index(condition)]

    # -- locks and bounds ----------------------------------------------------------------------------------------
    def _check_q_index(self, q_index) -> int:
        if isinstance(q_index, bool) or not isinstance(q_index, numbers.Integral):
            raise AssemblyValueError(f"q index: expected an int, got {q_index!r}")
        if not 0 <= int(q_index) < self._nq:
            raise AssemblyIndexError(f"q index {q_index} out of range [0, {self._nq})")
        return int(q_index)

    def lock_positions(self, q_indices) -> None:
        """Hold these q's at their current values (Simbody: ``lockQ``). A quaternion component locks the rotation."""
        indices = [self._check_q_index(i) for i in np.atleast_1d(np.asarray(q_indices, dtype=object)).tolist()]
        self._locked_q.update(indices)
        self.uninitialize()

    def unlock_positions(self, q_indices) -> None:
        """Free these q's again. Simbody: ``unlockQ``."""
        indices = [self._check_q_index(i) for i in np.atleast_1d(np.asarray(q_indices, dtype=object)).tolist()]
        self._locked_q.difference_update(indices)
        self.uninitialize()

    def _joint(self, joint):
        if isinstance(joint, str):
            return self.plant.get_joint_by_name(joint)
        if isinstance(joint, numbers.Integral) and not isinstance(joint, bool):
            return self.plant.get_joint(int(joint))
        if hasattr(joint, "position_start") and hasattr(joint, "num_positions"):
            return joint
        raise AssemblyValueError(f"joint: expected a Joint, joint index or joint name, got {joint!r}")

    def lock_joint(self, joint) -> None:
        """Lock every q of a joint (Joint, index or name). Simbody: ``lockMobilizer``."""
        joint = self._joint(joint)
        self.lock_positions(list(range(joint.position_start, joint.position_start + joint.num_positions)))

    def unlock_joint(self, joint) -> None:
        """Unlock every q of a joint. Simbody: ``unlockMobilizer``."""
        joint = self._joint(joint)
        self.unlock_positions(list(range(joint.position_start, joint.position_start + joint.num_positions)))

    def _mask_to_q(self, mask, view) -> list[int]:
        size = mask.size()
        if size != view.num_positions():
            raise AssemblyValueError(
                f"DofMask of size {size} does not match the articulated view's {view.num_positions()} positions"
            )
        q_indices = np.asarray(view.q_indices, dtype=np.int64)
        return [int(q_indices[i]) for i in mask.selected_to_full_index()]

    def lock_dof_mask(self, mask, view) -> None:
        """Lock the dofs a DofMask selects over ``view = plant.articulated_view()``.

        To estimate exactly the dofs of a mask (and hold the rest of the articulated dofs), lock its complement.
        """
        self.lock_positions(self._mask_to_q(mask, view))

    def unlock_dof_mask(self, mask, view) -> None:
        """Unlock the dofs a DofMask selects over ``plant.articulated_view()``."""
        self.unlock_positions(self._mask_to_q(mask, view))

    def is_locked(self, q_index) -> bool:
        """True if q_index is locked (directly, or as part of a locked floating rotation)."""
        q_index = self._check_q_index(q_index)
        return any(v in self._locked_v() for v in self._v_of_q[q_index])

    def _locked_v(self) -> set[int]:
        locked: set[int] = set()
        for i in self._locked_q:
            locked.update(self._v_of_q[i])
        return locked

    def restrict_q(self, q_index, lo: float, hi: float) -> None:
        """Bound ``lo <= q <= hi`` (ignored while the q is locked). Simbody: ``restrictQ``.

        lo > hi or NaN raises; (−∞, ∞) removes the bound. Quaternion components cannot be bounded.
        """
        q_index = self._check_q_index(q_index)
        lo, hi = float(lo), float(hi)
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise AssemblyValueError(f"restrict_q({q_index}): expected lo <= hi, got lo={lo}, hi={hi}")
        if q_index in self._quaternion_q:
            raise AssemblyValueError(
                f"restrict_q({q_index}): q {q_index} is a quaternion component of a floating joint; only coordinates "
                "whose velocity is their time derivative can be bounded"
            )
        if lo == -math.inf and hi == math.inf:
            self._restrictions.pop(q_index, None)
        else:
            self._restrictions[q_index] = (lo, hi)
        self.uninitialize()

    def unrestrict_q(self, q_index) -> None:
        """Simbody: ``unrestrictQ``."""
        self.restrict_q(q_index, -math.inf, math.inf)

    def use_joint_limits(self) -> None:
        """Restrict every coordinate with finite plant position limits to them (quaternion components excepted)."""
        lower = np.asarray(self.plant.position_lower_limits(), dtype=float)
        upper = np.asarray(self.plant.position_upper_limits(), dtype=float)
        for i in range(self._nq):
            if i in self._quaternion_q:
                continue
            if np.isfinite(lower[i]) or np.isfinite(upper[i]):
                self.restrict_q(i, lower[i], upper[i])

    def get_q_bounds(self, q_index) -> tuple[float, float]:
        """(lo, hi) of a q; (−∞, ∞) when unrestricted. Simbody: ``getFreeQBounds`` by q index."""
        return self._restrictions.get(self._check_q_index(q_index), (-math.inf, math.inf))

    # -- accuracy --------------------------------------------------------------------------------------------------
    def set_accuracy(self, accuracy: float) -> None:
        """0 <= accuracy < 1; 0 = the default 1e-3. Simbody: ``setAccuracy``."""
        accuracy = float(accuracy)
        if not 0.0 <= accuracy < 1.0:
            raise AssemblyValueError(f"set_accuracy: expected 0 <= accuracy < 1, got {accuracy}")
        self._accuracy = accuracy
        self._tracker = None

    def set_error_tolerance(self, tolerance: float) -> None:
        """tolerance >= 0; 0 = accuracy/10 if the accuracy was set, else 1e-4. Simbody: ``setErrorTolerance``."""
        tolerance = float(tolerance)
        if not tolerance >= 0.0 or math.isinf(tolerance):
            raise AssemblyValueError(f"set_error_tolerance: expected a finite tolerance >= 0, got {tolerance}")
        self._tolerance = tolerance
        self._tracker = None

    def get_accuracy_in_use(self) -> float:
        """Simbody: ``getAccuracyInUse``."""
        return self._accuracy if self._accuracy > 0.0 else DEFAULT_ACCURACY

    def get_error_tolerance_in_use(self) -> float:
        """Simbody: ``getErrorToleranceInUse``."""
        if self._tolerance > 0.0:
            return self._tolerance
        return self._accuracy / 10.0 if self._accuracy > 0.0 else DEFAULT_ERROR_TOLERANCE

    def set_use_rms_error_norm(self, use_rms: bool) -> None:
        """Error norm: RMS sqrt(Σe²/n) instead of max-abs. Simbody: ``setUseRMSErrorNorm``."""
        self._use_rms = bool(use_rms)
        self._tracker = None

    def set_max_iterations(self, max_iterations: int) -> None:
        """Upper bound on solver iterations per assemble()/track() (default 1000)."""
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, numbers.Integral) or max_iterations < 1:
            raise AssemblyValueError(f"set_max_iterations: expected an int >= 1, got {max_iterations!r}")
        self._max_iterations = int(max_iterations)
        self._tracker = None

    # -- internal state --------------------------------------------------------------------------------------------
    def get_positions(self) -> np.ndarray:
        """Copy of the internal q (nq,). Simbody: ``getInternalState`` / ``updateFromInternalState``."""
        return self._q.copy()

    def set_positions(self, q) -> None:
        """Set the internal q (e.g. locked encoder values or a starting guess); quaternions are normalized, except
        one already unit to rounding (|‖q‖ - 1| <= 4 ε, as the solver's own steps leave it: they divide by the
        norm), which is kept bit for bit, so that a solution set back as the next frame's start is the start
        ``track_sequence`` carries from frame to frame (the node's cycle-by-cycle solves then equal replay's)."""
        q = np.array(q, dtype=float)  # a copy: the caller's array stays its own
        if q.shape != (self._nq,):
            raise AssemblyValueError(f"set_positions: expected shape ({self._nq},), got {q.shape}")
        if not np.isfinite(q).all():
            raise AssemblyValueError(f"set_positions: q has non-finite entries at {np.flatnonzero(~np.isfinite(q))}")
        for qs in self._floating_q:
            quat = q[qs:qs + 4]
            if not abs(math.sqrt(float(quat @ quat)) - 1.0) <= _UNIT_TO_ROUNDING:
                q[qs:qs + 4] = spatial.quat_normalize(quat)
        self._q = q

    def get_time(self) -> float:
        """Time of the last track(time) with time >= 0."""
        return self._time

    def nothing_observed(self) -> bool:
        """True when, at the last assemble()/track()/calc, no sensor contributed (all unobserved; SPEC 9.4)."""
        return self._nothing_observed

    # -- statistics ------------------------------------------------------------------------------------------------
    def reset_stats(self) -> None:
        """Simbody: ``resetStats`` (the initialization count is kept, as in Simbody)."""
        self._stats[:] = 0  # in place: the compiled Tracker holds this array

    def get_num_goal_evals(self) -> int:
        """Residual evaluations (each gives the goal and the errors). Simbody: ``getNumGoalEvals``."""
        return int(self._stats[0])

    def get_num_error_evals(self) -> int:
        """Simbody: ``getNumErrorEvals`` (same evaluations as the goal)."""
        return int(self._stats[0])

    def get_num_goal_gradient_evals(self) -> int:
        """Jacobian evaluations. Simbody: ``getNumGoalGradientEvals``."""
        return int(self._stats[1])

    def get_num_error_jacobian_evals(self) -> int:
        """Simbody: ``getNumErrorJacobianEvals`` (same evaluations as the gradient)."""
        return int(self._stats[1])

    def get_num_assembly_steps(self) -> int:
        """Solver iterations. Simbody: ``getNumAssemblySteps``."""
        return int(self._stats[2])

    def get_num_initializations(self) -> int:
        """Simbody: ``getNumInitializations``."""
        return self._num_initializations

    # -- initialization ----------------------------------------------------------------------------------------
    def uninitialize(self) -> None:
        """Forget the packed problem; the next solve or evaluation re-initializes. Simbody: ``uninitialize()``.

        Called by this Assembler's setters and by its conditions when a change needs re-initialization."""
        self._initialized = False
        self._tracker = None
        for condition in self._conditions:
            condition.uninitialize()

    def is_initialized(self) -> bool:
        return self._initialized

    def initialize(self) -> None:
        """Pack the adopted conditions, locks and bounds for the solver (nothing to do when already initialized).
        Simbody: ``initialize()``; every solve and evaluation calls it."""
        if self._initialized:
            return
        plant = self.plant
        rot = {k: [] for k in ("body", "R_BS", "row", "hard", "slot", "cond")}
        pos = {k: [] for k in ("body", "p_BS", "row", "hard", "slot", "cond")}
        self._rs_conditions, self._mk_conditions = [], []  # the conditions whose active sensors are packed
        m_goal = 0
        m_err = 0
        rot_offset = 0
        pos_offset = 0
        self._rot_slices = []  # (condition, first slot) for concatenating observations
        self._pos_slices = []
        for c_index, (condition, weight) in enumerate(zip(self._conditions, self._weights, strict=True)):
            condition.initialize_condition(plant)
            is_rot = isinstance(condition, OrientationSensors)
            target = rot if is_rot else pos
            offset = rot_offset if is_rot else pos_offset
            if is_rot:
                self._rot_slices.append((condition, rot_offset))
                rot_offset += condition.get_num_observations()
            else:
                self._pos_slices.append((condition, pos_offset))
                pos_offset += condition.get_num_observations()
            if weight == 0.0:
                continue
            hard = math.isinf(weight)
            (self._rs_conditions if is_rot else self._mk_conditions).append(condition)
            packed = condition.packed()
            for body, station, slot in zip(packed["body"], packed["station"], packed["obs_slot"], strict=True):
                target["body"].append(int(body))
                target["R_BS" if is_rot else "p_BS"].append(station)
                target["hard"].append(1 if hard else 0)
                target["slot"].append(offset + int(slot))
                target["cond"].append(c_index)
                if hard:
                    target["row"].append(m_err)
                    m_err += 3
                else:
                    target["row"].append(m_goal)
                    m_goal += 3
        self._n_rot_obs = rot_offset
        self._n_pos_obs = pos_offset
        self._m_goal = m_goal
        self._m_err = m_err
        self._rs = {
            "body": np.array(rot["body"], dtype=np.int64),
            "R_BS": np.array(rot["R_BS"], dtype=float).reshape(-1, 3, 3),
            "row": np.array(rot["row"], dtype=np.int64),
            "hard": np.array(rot["hard"], dtype=np.int64),
            "slot": np.array(rot["slot"], dtype=np.int64),
            "cond": np.array(rot["cond"], dtype=np.int64),
        }
        self._mk = {
            "body": np.array(pos["body"], dtype=np.int64),
            "p_BS": np.array(pos["p_BS"], dtype=float).reshape(-1, 3),
            "row": np.array(pos["row"], dtype=np.int64),
            "hard": np.array(pos["hard"], dtype=np.int64),
            "slot": np.array(pos["slot"], dtype=np.int64),
            "cond": np.array(pos["cond"], dtype=np.int64),
        }
        # Free velocities and their bounds.
        locked_v = self._locked_v()
        free_v = [v for v in range(self._nv) if v not in locked_v]
        q_of_v = {}
        for i in range(self._nq):
            if i not in self._quaternion_q:
                q_of_v[self._v_of_q[i][0]] = i
        bound_q, lo, hi = [], [], []
        for v in free_v:
            i = q_of_v.get(v, -1)
            if i >= 0 and i in self._restrictions:
                bound_q.append(i)
                lo.append(self._restrictions[i][0])
                hi.append(self._restrictions[i][1])
            else:
                bound_q.append(-1)
                lo.append(-math.inf)
                hi.append(math.inf)
        self._held_q = np.array(
            [i for i in range(self._nq) if self._v_of_q[i] and all(v in locked_v for v in self._v_of_q[i])],
            dtype=np.int64,
        )
        self._held_floating_q = tuple(qs for qs in self._floating_q if qs in self._held_q)  # locked rotations
        self._free_v = np.array(free_v, dtype=np.int64)
        self._bound_q = np.array(bound_q, dtype=np.int64)
        self._lo = np.array(lo, dtype=float)
        self._hi = np.array(hi, dtype=float)
        self._tree = plant.tree.kernel_arguments()
        self._problem = (self._m_goal, self._m_err, self._nv, self._free_v, self._bound_q, self._lo, self._hi)
        self._sensors_tuple = None
        # The solver's observation slots: a single condition's own live buffer (its observations are written in
        # place; replacing the buffer uninitializes this Assembler), else buffers copied into at every solve.
        self._obs_rot = self._observation_buffer(self._rot_slices, self._n_rot_obs, (3, 3))
        self._obs_pos = self._observation_buffer(self._pos_slices, self._n_pos_obs, (3,))
        self._obs_weight = np.ones(self._n_rot_obs)  # per rotation slot (set_observation_weights); the Tracker's
        self._tracker = None
        self._initialized = True
        self._num_initializations += 1

    # -- per-frame packing -------------------------------------------------------------------------------------------
    def weights_changed(self) -> None:
        """Called by an adopted condition whose sensor weights changed without changing its active set (a change to
        or from 0 uninitializes instead): the weights are re-read at the next solve, without re-initialization."""
        self._sensors_tuple = None
        self._tracker = None

    def set_observation_weights(self, weights, condition=None) -> None:
        """Weight factors of the current observations of an OrientationSensors condition (the only adopted one,
        or ``condition``): ``weights`` (n_obs,) in its observation order, finite and > 0. A sensor's weight in the
        solve is its ``add_osensor`` weight times the factor of its observation slot (the goal stays
        ½ Σ w f |φ|² / Σ w f over the observed sensors), until the next call, a ``track_sequence`` with
        ``observation_weights`` (which leaves its last frame's factors) or a re-initialization (factors back to 1).
        Unlike ``change_osensor_weight`` this is per frame: no re-initialization, no new compiled Tracker. Simbody
        has no such call; it is how a measurement's own confidence (an IMU message's orientation covariance)
        reaches the solve."""
        self.initialize()
        condition, offset = self._rotation_slice(condition, "set_observation_weights")
        n = condition.get_num_observations()
        self._obs_weight[offset:offset + n] = self._checked_weights(weights, (n,), "set_observation_weights",
                                                                    condition)

    def get_observation_weights(self, condition=None) -> np.ndarray:
        """The current factors of :meth:`set_observation_weights` (a copy, (n_obs,))."""
        self.initialize()
        condition, offset = self._rotation_slice(condition, "get_observation_weights")
        return self._obs_weight[offset:offset + condition.get_num_observations()].copy()

    def _rotation_slice(self, condition, what: str):
        """(condition, first rotation slot) of an adopted OrientationSensors condition (the only one when None)."""
        if condition is None:
            if len(self._rot_slices) != 1:
                raise AssemblyValueError(f"{what}: {len(self._rot_slices)} OrientationSensors conditions are "
                                         "adopted; name the condition")
            return self._rot_slices[0]
        for adopted, offset in self._rot_slices:
            if adopted is condition:
                return adopted, offset
        raise AssemblyValueError(f"{what}: expected an OrientationSensors condition this Assembler adopted, got "
                                 f"{type(condition).__name__}")

    @staticmethod
    def _checked_weights(weights, shape: tuple, what: str, condition) -> np.ndarray:
        weights = np.asarray(weights, dtype=float)
        if weights.shape != shape:
            raise AssemblyValueError(f"{what}: weights for {condition.name!r} must have shape {shape}, got "
                                     f"{weights.shape}")
        bad = ~(np.isfinite(weights) & (weights > 0.0))
        if bad.any():
            raise AssemblyValueError(f"{what}: weights must be finite and > 0, got {weights[bad][:4].tolist()} at "
                                     f"{[tuple(int(i) for i in index) for index in np.argwhere(bad)[:4]]}")
        return weights

    def _weights_sequence(self, observation_weights, T: int) -> np.ndarray:
        """(T, n_rot_obs) factors of :meth:`track_sequence`'s ``observation_weights``, or (0, n_rot_obs)."""
        if observation_weights is None:
            return np.zeros((0, self._n_rot_obs))
        if not isinstance(observation_weights, dict):
            observation_weights = {self._rotation_slice(None, "track_sequence")[0]: observation_weights}
        factors = np.repeat(self._obs_weight[None], T, axis=0)
        for condition, weights in observation_weights.items():
            condition, offset = self._rotation_slice(condition, "track_sequence")
            n = condition.get_num_observations()
            factors[:, offset:offset + n] = self._checked_weights(weights, (T, n), "track_sequence", condition)
        return factors

    def _sensors(self):
        """The kernels' ``sensors`` tuple with the current weights (rebuilt after :meth:`weights_changed`)."""
        if self._sensors_tuple is None:
            rs_w = np.concatenate([np.zeros(0)] + [c.active_weights() for c in self._rs_conditions])
            mk_w = np.concatenate([np.zeros(0)] + [c.active_weights() for c in self._mk_conditions])
            cond_w = np.array([w if math.isfinite(w) else 1.0 for w in self._weights], dtype=float)
            rs, mk = self._rs, self._mk
            self._sensors_tuple = (
                rs["body"], rs["R_BS"], rs["row"], rs["hard"], rs["slot"], rs_w, rs["cond"],
                mk["body"], mk["p_BS"], mk["row"], mk["hard"], mk["slot"], mk_w, mk["cond"], cond_w,
            )
        return self._sensors_tuple

    @staticmethod
    def _observation_buffer(slices, n_obs: int, shape: tuple) -> np.ndarray:
        if len(slices) == 1:
            return slices[0][0].observation_array()
        return np.full((n_obs,) + shape, np.nan)

    def _compiled_tracker(self):
        """The kernels' Tracker over the current weights and settings, with the observations of this frame."""
        tracker = self._tracker
        if tracker is None:
            tracker = self._tracker = kernels.make_tracker(self._tree, self._sensors(), self._problem,
                                                           self._settings(), self._stats, self._obs_rot,
                                                           self._obs_pos, self._obs_weight, self._nq)
        if len(self._rot_slices) > 1:
            np.concatenate([c.observation_array() for c, _ in self._rot_slices], out=self._obs_rot)
        if len(self._pos_slices) > 1:
            np.concatenate([c.observation_array() for c, _ in self._pos_slices], out=self._obs_pos)
        return tracker

    def frame_tracking(self) -> FrameTracking:
        """What ``kernels.track_frames`` takes of the current problem, for a caller that tracks frames inside its own
        compiled function (the estimator's streamed cycle, ``core.estimator.stream``), which then does per frame what
        :meth:`track_sequence` does with one frame: start from q as :meth:`set_positions` leaves it, the observation
        slots as one (1, n_obs, 3, 3) array, the locked values as ``positions``. The tracker is replaced when this
        Assembler re-initializes or its weights or settings change (ask again; the record then differs). Frames
        tracked that way leave this Assembler's q, time and observations as they were: :meth:`set_positions` and
        ``move_all_observations`` before a solve of its own. The compiled backend's (the reference backend solves its
        frames in Python: :class:`AssemblyStateError`)."""
        if self._backend != "compiled":
            raise AssemblyStateError("frame_tracking: the reference backend solves its frames in Python; build the "
                                     "Assembler with backend='compiled'")
        self.initialize()
        tracker = self._compiled_tracker()
        frames = self._frame_tracking
        if frames is None or frames.tracker is not tracker:
            frames = self._frame_tracking = FrameTracking(tracker, self._held_q,
                                                          np.array(self._floating_q, dtype=np.int64),
                                                          bool(self._held_floating_q))
        return frames

    def _settings(self):
        return (self.get_accuracy_in_use(), self.get_error_tolerance_in_use(), self._use_rms, self._max_iterations,
                _INITIAL_LAMBDA)

    # -- evaluation --------------------------------------------------------------------------------------------------
    def _residuals_compiled(self, q, need_jacobian: bool):
        tracker = self._compiled_tracker()  # its workspaces, with this frame's observations
        self._nothing_observed = kernels.gather_frame(tracker, self._obs_rot, self._obs_pos) == 0
        r_g = np.empty(self._m_goal)
        r_c = np.empty(self._m_err)
        J_g = np.zeros((self._m_goal, self._nv))
        J_c = np.zeros((self._m_err, self._nv))
        kernels.evaluate_residuals(tracker, np.ascontiguousarray(q, dtype=float), r_g, r_c)
        if need_jacobian:
            kernels.evaluate_jacobians(tracker, J_g, J_c)
        return r_g, J_g, r_c, J_c

    def _residuals_reference(self, q, need_jacobian: bool):
        """Goal and error residuals (and Jacobians w.r.t. v) from the conditions' readable methods."""
        r_g, J_g, r_c, J_c = [], [], [], []
        any_contributing = False
        for condition, weight in zip(self._conditions, self._weights, strict=True):
            if weight == 0.0 or condition.num_errors() == 0:
                continue
            errors = condition.calc_errors(q)
            jacobian = condition.calc_error_jacobian(q) if need_jacobian else np.zeros((len(errors), self._nv))
            _, _, _, weights, obs = condition.active_observations()
            observed = condition.is_observed(obs)
            if isinstance(condition, OrientationSensors):  # each slot's factor (set_observation_weights)
                offset = next(first for adopted, first in self._rot_slices if adopted is condition)
                factor = self._obs_weight[offset + condition.packed()["obs_slot"]]
                weights = weights * factor
                errors = errors * np.repeat(np.sqrt(factor), 3)
                jacobian = jacobian * np.repeat(np.sqrt(factor), 3)[:, None]
            any_contributing |= bool(np.any(observed))
            if math.isinf(weight):
                r_c.append(errors)
                J_c.append(jacobian)
            else:
                total = weights[observed].sum()
                scale = math.sqrt(weight / total) if total > 0.0 else 0.0
                r_g.append(scale * errors)
                J_g.append(scale * jacobian)
        self._nothing_observed = not any_contributing

        def stack(rows, cols):
            return (np.concatenate(rows) if rows else np.zeros(0),
                    np.vstack(cols) if cols else np.zeros((0, self._nv)))

        r_g, J_g = stack(r_g, J_g)
        r_c, J_c = stack(r_c, J_c)
        return r_g, J_g, r_c, J_c

    def _error_norm(self, r_c) -> float:
        return float(kernels.error_norm(np.ascontiguousarray(r_c, dtype=float), self._use_rms))

    def calc_residuals(self, q=None, need_jacobian: bool = True):
        """(r_goal, J_goal, r_errors, J_errors) at q (default: the internal q) with the current observations.

        ``½|r_goal|²`` is the objective Σ W_c goal_c; Jacobians are w.r.t. v (all nv columns). Computed by the
        selected back end; exposed so the two back ends can be compared.
        """
        self.initialize()
        q = self._q if q is None else np.asarray(q, dtype=float)
        if self._backend == "compiled":
            return self._residuals_compiled(q, need_jacobian)
        return self._residuals_reference(q, need_jacobian)

    def warm_body_poses(self) -> None:
        """Run once, at the current positions, the compiled kernel behind :meth:`track_sequence`'s ``body_poses``
        (``kernels.complete_kinematics`` over this Assembler's Tracker), so that a process compiles or loads it before
        its first frame (``precompile.warm_residuals`` compiles it beside the solve). No result changes: it only
        brings the Tracker's kinematics workspace to the current positions, as every frame's poses do again. The
        reference back end has no such kernel: nothing to do."""
        self.initialize()
        if self._backend == "compiled":
            kernels.complete_kinematics(self._compiled_tracker(), self.get_positions())

    def calc_current_goal(self) -> float:
        """Σ W_c goal_c at the internal q. Simbody: ``calcCurrentGoal``."""
        r_g, _, _, _ = self.calc_residuals(need_jacobian=False)
        return 0.5 * float(r_g @ r_g)

    def calc_current_error_norm(self) -> float:
        """Norm of the hard errors at the internal q (0 without errors). Simbody: ``calcCurrentErrorNorm``."""
        _, _, r_c, _ = self.calc_residuals(need_jacobian=False)
        return self._error_norm(r_c)

    # -- solving -----------------------------------------------------------------------------------------------------
    def _run(self, q):
        """Simbody's short-circuit test, then the solver from q (overwritten). Returns (status, F0, e0, F, e)."""
        if not self._initialized:
            self.initialize()
        if self._backend == "compiled":
            status, F0, e0, F, e, contributing = kernels.track_one(self._compiled_tracker(), q)
            self._nothing_observed = contributing == 0
            return status, F0, e0, F, e
        accuracy = self.get_accuracy_in_use()
        tolerance = self.get_error_tolerance_in_use()
        r_g, _, r_c, _ = self._residuals_reference(q, False)
        self._stats[0] += 1
        F0, e0 = 0.5 * float(r_g @ r_g), self._error_norm(r_c)
        if e0 <= tolerance and F0 <= tolerance * tolerance:
            return kernels.STATUS_CONVERGED, F0, e0, F0, e0
        status, F, e = self._solve_reference(q, accuracy, tolerance)
        return status, F0, e0, F, e

    def _solve_reference(self, q, accuracy, tolerance):
        """The iteration of kernels.solve, written in Python over the conditions' reference methods."""
        kernels.clip_to_bounds(q, self._bound_q, self._lo, self._hi)
        r_g, J_g, r_c, J_c = self._residuals_reference(q, True)
        self._stats[:2] += 1
        F, e = 0.5 * float(r_g @ r_g), self._error_norm(r_c)
        lam = _INITIAL_LAMBDA
        for _ in range(self._max_iterations):
            g_free = np.ascontiguousarray(J_g[:, self._free_v].T @ r_g)
            active = np.zeros(len(self._free_v), dtype=bool)
            kernels.select_active_bounds(q, g_free, self._bound_q, self._lo, self._hi, active)
            if (not np.any(g_free[~active])) and e <= tolerance:
                return kernels.STATUS_CONVERGED, F, e
            columns = self._free_v[~active]
            A = np.ascontiguousarray(J_g[:, columns])
            C = np.ascontiguousarray(J_c[:, columns])
            d = np.zeros(len(columns))
            self._stats[2] += 1
            if not kernels.compute_step(A, np.ascontiguousarray(r_g), C, np.ascontiguousarray(r_c), lam, d):
                lam *= 4.0
                if lam > kernels._LAMBDA_MAX:
                    return kernels.STATUS_STALLED, F, e
                continue
            dv = np.zeros(self._nv)
            dv[columns] = d
            q_trial = self.plant.integrate_positions(q, dv)
            kernels.clip_to_bounds(q_trial, self._bound_q, self._lo, self._hi)
            r_g2, _, r_c2, _ = self._residuals_reference(q_trial, False)
            self._stats[0] += 1
            F_new, e_new = 0.5 * float(r_g2 @ r_g2), self._error_norm(r_c2)
            step = float(np.max(np.abs(d))) if len(d) else 0.0
            if kernels.accept_step(F, F_new, e, e_new, tolerance, len(r_c) > 0):
                decrease, F_old = F - F_new, F
                q[:] = q_trial
                F, e = F_new, e_new
                lam = max(lam / 3.0, kernels._LAMBDA_MIN)
                r_g, J_g, r_c, J_c = self._residuals_reference(q, True)
                self._stats[1] += 1
                if e <= tolerance and (step <= accuracy or abs(decrease) <= accuracy * accuracy * F_old):
                    return kernels.STATUS_CONVERGED, F, e
            else:
                if step <= accuracy and e <= tolerance:
                    return kernels.STATUS_CONVERGED, F, e
                lam *= 4.0
                if lam > kernels._LAMBDA_MAX:
                    return kernels.STATUS_STALLED, F, e
        return kernels.STATUS_MAX_ITERATIONS, F, e

    def assemble(self) -> float:
        """Solve from the internal q; returns the goal Σ W_c goal_c achieved. Simbody: ``assemble()``.

        Short-circuits when the errors are within tolerance and the goal <= tolerance². If the start satisfied
        the errors but the goal got worse, the start is kept. Raises :class:`AssembleFailed` when the error norm
        stays above the tolerance.
        """
        q = self._q.copy()
        status, F0, e0, F, e = self._run(q)
        tolerance = self.get_error_tolerance_in_use()
        if e > tolerance:
            raise AssembleFailed(
                f"assemble(): {_STATUS_TEXT[status]}; achieved error norm {e:.3g} but the required tolerance is "
                f"{tolerance:.3g}"
            )
        if e0 <= tolerance and F > F0:
            return F0  # revert: the feasible start was better
        self._q = q
        return F

    def track(self, time: float = -1.0) -> float:
        """Solve warm-started from the previous solution (no revert); returns the goal. Simbody: ``track(t)``.

        ``time`` >= 0 is recorded as the frame time. Raises :class:`TrackFailed` when the error norm stays above
        the tolerance (the internal q is then left at the failed attempt's result, as Simbody leaves its state).
        """
        if time is not None and time >= 0:
            self._time = float(time)
        status, _, _, F, e = self._run(self._q)
        tolerance = self.get_error_tolerance_in_use()
        if e > tolerance:
            raise TrackFailed(
                f"track({time}): {_STATUS_TEXT[status]}; achieved error norm {e:.3g} but the required tolerance is "
                f"{tolerance:.3g}"
            )
        return F

    def track_sequence(self, times, observations, positions=None, return_info: bool = False, body_poses=None,
                       sensors=None, observation_weights=None):
        """Warm-started track() over T frames in one compiled loop; returns Q (T, nq).

        ``observations``: for a single adopted sensor condition, its frames as one array, (T, n_obs, 3, 3) rotations
        or (T, n_obs, 4) unit quaternions (w, x, y, z) for OrientationSensors, (T, n_obs, 3) for Markers; otherwise a
        dict {condition: array} (a condition left out of the dict is unobserved in every frame). Column k of a
        condition is its observation slot k: the order of its ``define_observation_order``, else the order its
        sensors were added. ``sensors`` names the columns instead: a list of sensor names (or indices), one per
        column, for the single condition, or a dict {condition: names}; named columns go to their sensors' slots and
        sensors not named are unobserved. Quaternions follow ``move_all_observations`` (normalized within
        ``spatial.QUAT_NORM_TOLERANCE``, four NaNs = unobserved, others raise naming sensor and frame).
        Each frame does what ``move_all_observations`` + ``track(times[t])`` does (locked q's keep their current
        values). Afterwards the internal q is the last frame's and the conditions hold the last frame's observations.
        With ``return_info`` also returns {"goal": (T,), "error_norm": (T,), "status": (T,)}. Raises
        :class:`TrackFailed` naming the first frame whose error norm exceeds the tolerance.

        ``observation_weights`` (T, n_obs), optional: per-frame weight factors of an OrientationSensors condition's
        observation slots (:meth:`set_observation_weights`, frame by frame; observation order, not ``sensors``'
        columns), an array for the single OrientationSensors condition or a dict {condition: array}; slots left out
        keep the current factors. Afterwards the last frame's factors are current.

        ``positions`` (T, nq), optional: per-frame values of the *locked* coordinates (e.g. joints measured by
        encoders while the IMUs estimate the rest); entries of free coordinates are ignored, NaN keeps the previous
        frame's value, and a locked floating-base quaternion is normalized.

        ``body_poses`` (T, num_bodies, 4, 4), optional: a float64 C-contiguous array that receives every body's pose
        X_WB at each frame's solution, the values of the compiled forward kinematics
        (``core.multibody.compiled.forward_kinematics``)
        at Q[t] (the solver's last kinematics, completed, instead of a second pass). When a frame fails, the rows
        after it are left as they were.
        """
        self.initialize()
        times = np.asarray(times, dtype=float)
        if times.ndim != 1:
            raise AssemblyValueError(f"track_sequence: times must be 1-D, got shape {times.shape}")
        T = len(times)
        sensor_conditions = [c for c in self._conditions]
        if not isinstance(observations, dict):
            if len(sensor_conditions) != 1:
                raise AssemblyValueError(
                    f"track_sequence: {len(sensor_conditions)} conditions are adopted; pass observations as a dict "
                    "{condition: (T, n_obs, ...) array}"
                )
            observations = {sensor_conditions[0]: observations}
        observations = sequence_inputs(observations, sensors)
        obs_rot = np.full((T, self._n_rot_obs, 3, 3), np.nan)
        obs_pos = np.full((T, self._n_pos_obs, 3), np.nan)
        for condition, offset in self._rot_slices + self._pos_slices:
            if condition not in observations:
                continue
            data = np.asarray(observations[condition], dtype=float)
            n = condition.get_num_observations()
            expected = (T, n) + condition.station_shape
            if data.shape != expected:
                raise AssemblyValueError(
                    f"track_sequence: observations for {condition.name!r} must have shape {expected}, got {data.shape}"
                )
            target = obs_rot if isinstance(condition, OrientationSensors) else obs_pos
            target[:, offset : offset + n] = data
        for condition in observations:
            if not any(condition is c for c in self._conditions):
                raise AssemblyValueError(
                    "track_sequence: observations given for a condition this Assembler did not adopt"
                )
        positions = self._locked_positions_sequence(positions, T)
        weights = self._weights_sequence(observation_weights, T)
        nb = self.plant.num_bodies()
        if body_poses is None:
            poses = np.empty((0, nb, 4, 4))
        else:
            poses = body_poses
            if not (isinstance(poses, np.ndarray) and poses.dtype == np.float64 and poses.shape == (T, nb, 4, 4)
                    and poses.flags.c_contiguous and poses.flags.writeable):
                raise AssemblyValueError(
                    f"track_sequence: body_poses must be a writeable C-contiguous float64 array of shape "
                    f"({T}, {nb}, 4, 4), got {type(poses).__name__} "
                    f"{getattr(poses, 'dtype', '')} {getattr(poses, 'shape', '')}"
                )
        Q = np.empty((T, self._nq))
        goal = np.empty(T)
        err = np.empty(T)
        status = np.empty(T, dtype=np.int64)
        q = self._q.copy()
        if self._backend == "compiled":
            failed = kernels.track_frames(self._compiled_tracker(), q, obs_rot, obs_pos, weights, self._held_q,
                                          positions, Q, goal, err, status, poses)
            last = T - 1 if failed < 0 else int(failed)
        else:
            failed, last = -1, T - 1
            R_WF, p_WM = np.empty((nb, 3, 3)), np.empty((nb, 3))
            for t in range(T):
                self._set_frame_observations(obs_rot[t], obs_pos[t])
                if len(weights):
                    self._obs_weight[:] = weights[t]
                if len(positions):
                    values = positions[t, self._held_q]
                    q[self._held_q] = np.where(np.isfinite(values), values, q[self._held_q])
                self._q = q
                try:
                    goal[t] = self.track(times[t])
                except TrackFailed:
                    failed, last = t, t
                    Q[t] = self._q
                    if len(poses):
                        forward_kinematics(self._tree, Q[t], poses[t], R_WF, p_WM)
                    break
                q = self._q
                Q[t] = q
                if len(poses):
                    forward_kinematics(self._tree, q, poses[t], R_WF, p_WM)
                status[t] = kernels.STATUS_CONVERGED
                err[t] = self.calc_current_error_norm()
        if T:
            self._set_frame_observations(obs_rot[last], obs_pos[last])
            self._q = Q[last].copy()
            if times[last] >= 0:
                self._time = float(times[last])
        if failed >= 0:
            raise TrackFailed(
                f"track_sequence: frame {failed} (time {times[failed]}) did not reach the error tolerance "
                f"{self.get_error_tolerance_in_use():.3g}"
            )
        if return_info:
            return Q, {"goal": goal, "error_norm": err, "status": status}
        return Q

    def _locked_positions_sequence(self, positions, T: int) -> np.ndarray:
        """Validated (T, nq) per-frame locked values, or an empty (0, nq) array when none are given."""
        if positions is None:
            return np.zeros((0, self._nq))
        positions = np.array(positions, dtype=float)
        if positions.shape != (T, self._nq):
            raise AssemblyValueError(
                f"track_sequence: positions must have shape ({T}, {self._nq}) (frames, nq), got {positions.shape}"
            )
        for qs in self._held_floating_q:
            quat = positions[:, qs:qs + 4]
            rows = np.all(np.isfinite(quat), axis=1)
            quat[rows] = spatial.quat_normalize(quat[rows])
        return positions

    def _set_frame_observations(self, obs_rot, obs_pos) -> None:
        for condition, offset in self._rot_slices:
            condition.restore_observations(obs_rot[offset : offset + condition.get_num_observations()])
        for condition, offset in self._pos_slices:
            condition.restore_observations(obs_pos[offset : offset + condition.get_num_observations()])

    def get_condition_names(self) -> list[str]:
        return [c.name for c in self._conditions]

    def get_condition(self, name: str):
        """The adopted condition with this name."""
        for c in self._conditions:
            if c.name == name:
                return c
        raise AssemblyValueError(
            f"no adopted assembly condition {name!r}; {near_matches(name, self.get_condition_names())}"
        )
