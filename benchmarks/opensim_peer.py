"""benchmarks/opensim_peer.py: OpenSim's IMU inverse kinematics, run on a model converted from our plant.

This is the peer that the IK benchmark (benchmarks/ik.py) measures ros_dofkit's Assembler against. It has two
parts:

* :class:`OpenSimPeer` builds an ``opensim.Model`` that is kinematically identical to a finalized
  ``ros_dofkit`` ``MultibodyPlant`` plus a set of IMU mountings. Every plant body becomes one OpenSim body and
  every plant joint one OpenSim joint that reproduces ``X_WC = X_WP · X_PF · X_FM(q) · X_MC`` exactly:

  ===================== ===================================================================================
  plant joint           OpenSim joint
  ===================== ===================================================================================
  weld                  ``WeldJoint`` between offset frames X_PF (on P) and X_CM = X_MC⁻¹ (on C)
  revolute, axis â      ``PinJoint`` (rotates about z) between X_PF·R_â and X_CM·R_â, R_â maps z onto â
  prismatic, axis â     ``SliderJoint`` (translates along x) between X_PF·R_â and X_CM·R_â, R_â maps x onto â
  planar (x, y, θ)      ``PlanarJoint`` (coordinates θ, x, y) between X_PF and X_CM
  quaternion floating   ``FreeJoint``: three body-fixed X-Y-Z angles, then the translation p_FM_F
  mimic                 ``WeldJoint`` frozen at the value implied by the (locked) source coordinate
  ===================== ===================================================================================

  Each IMU becomes a ``PhysicalOffsetFrame`` named after the sensor, with rotation R_BS on its body, as
  OpenSense's IMUPlacer creates them. :meth:`OpenSimPeer.check_against_plant` compares OpenSim's forward
  kinematics of every IMU frame with the plant's at random configurations.

* :class:`OpenSimImuIk` drives ``opensim.InverseKinematicsSolver`` with an ``OrientationsReference`` as
  OpenSense's IMUInverseKinematicsTool does (SPEC §3.6, §8.2): accuracy 1e-4, column labels equal to the frame
  names, ``assemble`` at the first time, then ``track`` at every following time. How it holds the coordinates
  the IMUs do not observe is its ``lock_mode`` (:data:`LOCK_MODES`).

Why the lock mode matters. OpenSim locks a coordinate with a ``SimTK::Constraint::PrescribedMotion``
(opensim-core Coordinate.cpp, ``_lockedConstraintIndex``). Simbody's Assembler adopts the system's constraints
as an assembly *error* (weight Infinity), and with any error term its optimizer is InteriorPoint (IPOPT) instead
of LBFGS: "Optimizer will choose LBFGS for unconstrained (or just bounds-constrained) problems, InteriorPoint for
constrained problems" (simbody Simbody/src/Assembler.cpp, ``Assembler::reinitializeWithExtraQsLocked``). So
OpenSense's configuration (floating-base translations locked) runs every frame through IPOPT, several times slower and
less accurate than LBFGS on the same goal. OpenSim offers two ways to the LBFGS path with the same solution:

* ``"assembler"``: the same coordinates locked, each also given a ``CoordinateReference``. For a locked coordinate
  with a reference, OpenSim's ``AssemblySolver::setupGoals`` calls ``Assembler::lockQ`` (the q leaves the
  optimization) and unlocks the constraint in its working state (opensim-core AssemblySolver.cpp): the lock
  ros_dofkit uses, solved by LBFGS.
* ``"free"``: no coordinate locked. The orientation goal does not depend on a coordinate no IMU observes (its
  gradient is zero), so LBFGS leaves it at its starting value: the same solution, one more free q.
* ``"constraint"``: OpenSense's own configuration (locked coordinates as constraints: IPOPT), for reference.

``opensim`` is a benchmark extra (``pip install opensim``); importing this module does not need it, the
classes raise :class:`OpenSimUnavailableError` when it is missing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation as ScipyRotation

from ros_dofkit.core.spatial import (
    invert_transform,
    make_transform,
    matrix_to_quat,
    quat_to_matrix,
    rotation_angle,
)

#: The version the benchmark numbers in benchmarks/README.md were measured with.
OPENSIM_PIN = "opensim==4.6"

#: How :class:`OpenSimImuIk` holds the peer's locked coordinates (see the module docstring): "assembler"
#: (Assembler::lockQ, LBFGS) and "free" (no lock, LBFGS), of similar speed here, then "constraint" (OpenSense's
#: locks as constraints, IPOPT, several times slower).
LOCK_MODES = ("assembler", "free", "constraint")

# Plant joint type codes (doc/architecture.md, "Flat arrays").
_WELD, _REVOLUTE, _PRISMATIC, _PLANAR, _FLOATING = 0, 1, 2, 3, 4

# Inertia given to every OpenSim body: kinematics ignores it, but OpenSim refuses massless free bodies.
_BODY_MASS = 1.0
_BODY_INERTIA = 0.01


class OpenSimUnavailableError(RuntimeError):
    """The ``opensim`` Python package cannot be imported."""


class ModelConversionError(ValueError):
    """The plant holds something this converter cannot reproduce in OpenSim."""


class ModelMismatchError(RuntimeError):
    """OpenSim's forward kinematics of the converted model differs from the plant's."""


#: Environment variables ``import opensim`` sets (opensim/__init__.py, 4.6).
_ENVIRONMENT_OPENSIM_CHANGES = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "PATH", "SIMBODY_HOME")


def import_opensim():
    """Return the ``opensim`` module, or raise :class:`OpenSimUnavailableError` saying how to install it."""
    # On Linux `import opensim` overwrites LD_LIBRARY_PATH with PATH (and prepends to PATH): every process started
    # afterwards, e.g. a ROS node in the next test, would lose the ROS wheels' libraries. OpenSim's own libraries are
    # loaded by then, so the environment is put back as it was.
    saved = {name: os.environ.get(name) for name in _ENVIRONMENT_OPENSIM_CHANGES}
    try:
        import opensim
    except ImportError as error:
        raise OpenSimUnavailableError(
            f"expected the OpenSim Python package to be importable for the peer benchmark "
            f"(install it with `pip install {OPENSIM_PIN}`); import failed with: {error}"
        ) from error
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # OpenSim logs to ./opensim.log by default; a benchmark or test must not litter the working directory.
    opensim.Logger.removeFileSink()
    return opensim


def opensim_available() -> bool:
    """True when ``import opensim`` works."""
    try:
        import_opensim()
    except OpenSimUnavailableError:
        return False
    return True


@dataclass(frozen=True)
class ImuMount:
    """An orientation sensor S rigidly mounted on plant body B (Simbody: an osensor with orientationInB).

    Attributes:
        name: sensor name; also the OpenSim frame name and the OrientationsReference column label.
        body: plant body index of B.
        R_BS: (3, 3) orientation of the sensor frame S in the body frame B.
        weight: OpenSim orientation weight / Simbody osensor weight.
    """

    name: str
    body: int
    R_BS: np.ndarray = field(repr=False)
    weight: float = 1.0

    def __post_init__(self):
        R_BS = np.asarray(self.R_BS, dtype=float)
        if R_BS.shape != (3, 3):
            raise ModelConversionError(f"IMU {self.name!r}: expected R_BS of shape (3, 3), received {R_BS.shape}")
        deviation = np.abs(R_BS @ R_BS.T - np.eye(3)).max()
        if deviation > 1e-9 or np.linalg.det(R_BS) < 0:
            raise ModelConversionError(
                f"IMU {self.name!r}: expected a proper rotation for R_BS, received a matrix with "
                f"|R Rᵀ - I| = {deviation:.3g} and det = {np.linalg.det(R_BS):.6f}"
            )
        if not np.isfinite(self.weight) or self.weight < 0:
            raise ModelConversionError(f"IMU {self.name!r}: expected a finite weight >= 0, received {self.weight}")
        object.__setattr__(self, "R_BS", R_BS)


def _rotation_taking(unit_from: np.ndarray, unit_to: np.ndarray) -> np.ndarray:
    """A rotation R with R @ unit_from = unit_to (the minimal one; a half turn when they are opposite)."""
    cross = np.cross(unit_from, unit_to)
    cosine = float(np.dot(unit_from, unit_to))
    sine = float(np.linalg.norm(cross))
    if sine < 1e-12:
        if cosine > 0:
            return np.eye(3)
        # Opposite vectors: half turn about any axis perpendicular to unit_from.
        helper = np.eye(3)[int(np.argmin(np.abs(unit_from)))]
        perpendicular = np.cross(unit_from, helper)
        return ScipyRotation.from_rotvec(np.pi * perpendicular / np.linalg.norm(perpendicular)).as_matrix()
    return ScipyRotation.from_rotvec(cross / sine * np.arctan2(sine, cosine)).as_matrix()


def _quat_to_body_xyz(quat_wxyz: np.ndarray) -> np.ndarray:
    """Body-fixed X-Y-Z angles (Simbody's BodyRotationSequence XYZ, OpenSim FreeJoint) of a unit quaternion."""
    return ScipyRotation.from_matrix(quat_to_matrix(quat_wxyz)).as_euler("XYZ")


def _body_xyz_to_quat(angles: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_quat_to_body_xyz`, scalar-first with w >= 0."""
    quat = matrix_to_quat(ScipyRotation.from_euler("XYZ", angles).as_matrix())
    return quat if quat[0] >= 0 else -quat


@dataclass(frozen=True)
class _CoordinateSlot:
    """How one plant joint's q maps onto its OpenSim coordinates."""

    kind: int
    q_start: int
    coordinates: tuple  # opensim.Coordinate objects, in OpenSim's order for the joint


class OpenSimPeer:
    """An ``opensim.Model`` kinematically identical to a finalized plant plus IMU frames.

    Args:
        plant: a finalized ``ros_dofkit.core.multibody.MultibodyPlant``.
        imus: the sensors, each on a plant body.
        locked_positions: plant q indices held at their default values. Translational coordinates of floating
            joints are always locked too, as OpenSense's IMUInverseKinematicsTool does (orientation sensors
            cannot observe them). These are the model's default locks; :class:`OpenSimImuIk`'s ``lock_mode``
            decides how (or whether) a solve holds them. A mimic joint is only accepted when its source coordinate
            is locked (it is frozen as a weld at the source's default value).
        default_positions: (nq,) plant configuration used for the OpenSim coordinates' default values (the
            locked values and the starting point of ``assemble``); the plant's defaults when omitted.

    Attributes:
        model: the ``opensim.Model`` (already through ``initSystem``).
        state: its working ``SimTK::State``.
        imu_frames: the ``PhysicalOffsetFrame`` of each IMU, in the order of ``imus``.
        locked_coordinates: the ``opensim.Coordinate`` objects locked by default, in model order.
    """

    def __init__(self, plant, imus, locked_positions=(), default_positions=None):
        osim = import_opensim()
        self._osim = osim
        self.plant = plant
        self.imus = tuple(imus)
        tree = plant.tree
        self.nq = int(tree.nq)
        if default_positions is None:
            default_positions = plant.default_positions()
        self.default_positions = np.array(default_positions, dtype=float)
        if self.default_positions.shape != (self.nq,):
            raise ModelConversionError(
                f"expected default_positions of shape ({self.nq},), received {self.default_positions.shape}"
            )
        self.locked_positions = frozenset(int(i) for i in locked_positions)
        bad_locks = sorted(i for i in self.locked_positions if not 0 <= i < self.nq)
        if bad_locks:
            raise ModelConversionError(f"locked_positions must lie in [0, {self.nq}), received {bad_locks}")
        names = [imu.name for imu in self.imus]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ModelConversionError(f"IMU names must be unique, received duplicates {duplicates}")
        for imu in self.imus:
            if not 0 < imu.body < tree.num_bodies:
                raise ModelConversionError(
                    f"IMU {imu.name!r}: expected a non-world body index in [1, {tree.num_bodies}), "
                    f"received {imu.body}"
                )

        body_names, joint_names = self._names_by_body(plant)
        self.model = osim.Model()
        self.model.setName(f"{getattr(plant, 'name', 'plant')}_opensim_peer")
        self._bodies = [self.model.getGround()]
        self._slots: list[_CoordinateSlot] = []
        self.locked_coordinates = []
        for b in range(1, tree.num_bodies):
            self._add_body_and_joint(b, tree, body_names[b], joint_names[b])
        self.imu_frames = []
        for imu in self.imus:
            body = self._bodies[imu.body]
            frame = osim.PhysicalOffsetFrame(imu.name, body, self._transform(make_transform(imu.R_BS)))
            body.addComponent(frame)
            self.imu_frames.append(frame)
        self.state = self.model.initSystem()

    # ----------------------------------------------------------------------------------------------- building
    @staticmethod
    def _names_by_body(plant):
        """Body names and inboard joint names indexed by body (the flat arrays are indexed by body)."""
        num_bodies = plant.tree.num_bodies
        body_names = ["ground"] + [None] * (num_bodies - 1)
        joint_names = [None] * num_bodies
        for j in range(plant.num_joints()):
            joint = plant.get_joint(j)
            child = joint.child_body
            body_names[child.index] = child.name
            joint_names[child.index] = joint.name
        missing = [b for b in range(1, num_bodies) if body_names[b] is None]
        if missing:
            raise ModelConversionError(f"expected every non-world body to have an inboard joint; bodies {missing}")
        seen = {}
        for b, name in enumerate(body_names):
            if name in seen:
                raise ModelConversionError(
                    f"OpenSim needs unique body names; bodies {seen[name]} and {b} are both named {name!r}"
                )
            seen[name] = b
        return body_names, joint_names

    def _transform(self, X):
        osim = self._osim
        R = osim.Rotation(osim.Mat33(*[float(x) for x in X[:3, :3].ravel()]))
        return osim.Transform(R, osim.Vec3(*[float(x) for x in X[:3, 3]]))

    def _make_joint(self, joint_class, name, parent, X_P, child, X_C):
        """A joint of ``joint_class`` between offset frames X_P on ``parent`` and X_C on ``child``."""
        on_parent = self._osim.PhysicalOffsetFrame(f"{name}_on_parent", parent, self._transform(X_P))
        on_child = self._osim.PhysicalOffsetFrame(f"{name}_on_child", child, self._transform(X_C))
        joint = joint_class(name, on_parent, on_child)
        joint.addFrame(on_parent)
        joint.addFrame(on_child)
        # addFrame adopts the frames but the SWIG wrapper does not disown them (a double free otherwise).
        on_parent.thisown = False
        on_child.thisown = False
        self.model.addJoint(joint)
        return joint

    def _add_body_and_joint(self, b, tree, body_name, joint_name):
        osim = self._osim
        body = osim.Body(body_name, _BODY_MASS, osim.Vec3(0.0), osim.Inertia(_BODY_INERTIA))
        self.model.addBody(body)
        self._bodies.append(body)
        parent = self._bodies[int(tree.parent[b])]
        kind = int(tree.joint_type[b])
        X_PF = np.array(tree.X_PF[b])
        X_CM = invert_transform(np.array(tree.X_MC[b]))
        axis = np.array(tree.axis[b])
        q_start = int(tree.q_start[b])
        is_mimic = int(tree.mimic_q[b]) >= 0

        if kind in (_REVOLUTE, _PRISMATIC) and is_mimic:
            kind = self._freeze_mimic(b, tree, joint_name)
            X_PF = X_PF @ self._mimic_X_FM(b, tree)
        if kind == _WELD:
            self._make_joint(osim.WeldJoint, joint_name, parent, X_PF, body, X_CM)
            return
        if kind in (_REVOLUTE, _PRISMATIC):
            native_axis = np.array([0.0, 0.0, 1.0]) if kind == _REVOLUTE else np.array([1.0, 0.0, 0.0])
            X_align = make_transform(_rotation_taking(native_axis, axis / np.linalg.norm(axis)))
            joint_class = osim.PinJoint if kind == _REVOLUTE else osim.SliderJoint
            joint = self._make_joint(joint_class, joint_name, parent, X_PF @ X_align, body, X_CM @ X_align)
        elif kind == _PLANAR:
            joint = self._make_joint(osim.PlanarJoint, joint_name, parent, X_PF, body, X_CM)
        elif kind == _FLOATING:
            joint = self._make_joint(osim.FreeJoint, joint_name, parent, X_PF, body, X_CM)
        else:
            raise ModelConversionError(
                f"joint {joint_name!r}: expected a joint type code in 0..4 (weld, revolute, prismatic, planar, "
                f"quaternion floating), received {kind}"
            )
        coordinates = tuple(joint.upd_coordinates(i) for i in range(joint.numCoordinates()))
        slot = _CoordinateSlot(kind=kind, q_start=q_start, coordinates=coordinates)
        self._slots.append(slot)
        values = self._slot_values(slot, self.default_positions)
        lower, upper = self.plant.position_lower_limits(), self.plant.position_upper_limits()
        for k, coordinate in enumerate(coordinates):
            coordinate.setName(self._coordinate_name(joint_name, kind, k))
            coordinate.setDefaultValue(float(values[k]))
            coordinate.setDefaultClamped(False)
            q_index = self._slot_q_index(slot, k)
            if q_index is not None and np.isfinite(lower[q_index]) and np.isfinite(upper[q_index]):
                coordinate.setRangeMin(float(lower[q_index]))
                coordinate.setRangeMax(float(upper[q_index]))
            else:
                coordinate.setRangeMin(-1e6)
                coordinate.setRangeMax(1e6)
            translational = kind == _FLOATING and k >= 3
            locked = translational or (q_index is not None and q_index in self.locked_positions)
            coordinate.setDefaultLocked(bool(locked))
            if locked:
                self.locked_coordinates.append(coordinate)

    def _freeze_mimic(self, b, tree, joint_name):
        source = int(tree.mimic_q[b])
        if source not in self.locked_positions:
            raise ModelConversionError(
                f"mimic joint {joint_name!r} follows q[{source}], which is free: expected its source coordinate "
                f"among locked_positions ({sorted(self.locked_positions)}) so that it can be frozen as a weld"
            )
        return _WELD

    def _mimic_X_FM(self, b, tree):
        """X_FM of a mimic joint at the default value of its source coordinate."""
        value = tree.mimic_multiplier[b] * self.default_positions[int(tree.mimic_q[b])] + tree.mimic_offset[b]
        axis = np.array(tree.axis[b])
        if int(tree.joint_type[b]) == _REVOLUTE:
            return make_transform(ScipyRotation.from_rotvec(axis * value).as_matrix())
        return make_transform(p=axis * value)

    @staticmethod
    def _coordinate_name(joint_name, kind, k):
        if kind in (_REVOLUTE, _PRISMATIC):
            return joint_name
        suffixes = ("qz", "x", "y") if kind == _PLANAR else ("rx", "ry", "rz", "x", "y", "z")
        return f"{joint_name}_{suffixes[k]}"

    @staticmethod
    def _slot_q_index(slot, k):
        """The plant q index that OpenSim coordinate k of this slot equals, or None (floating rotations)."""
        if slot.kind in (_REVOLUTE, _PRISMATIC):
            return slot.q_start
        if slot.kind == _PLANAR:  # OpenSim order (θ, x, y), plant order (x, y, θ)
            return slot.q_start + (2, 0, 1)[k]
        return None if k < 3 else slot.q_start + 4 + (k - 3)

    def reset_state(self):
        """A fresh ``initSystem`` state at the default coordinate values; it replaces :attr:`state`.

        Simbody invalidates states made before a new ``initSystem``, so the peer keeps only the latest one.
        """
        self.state = self.model.initSystem()
        return self.state

    # ------------------------------------------------------------------------------------ coordinate mapping
    def _slot_values(self, slot, q):
        """OpenSim coordinate values of one joint from plant positions q."""
        s = slot.q_start
        if slot.kind in (_REVOLUTE, _PRISMATIC):
            return np.array([q[s]])
        if slot.kind == _PLANAR:
            return np.array([q[s + 2], q[s], q[s + 1]])
        return np.concatenate([_quat_to_body_xyz(q[s:s + 4] / np.linalg.norm(q[s:s + 4])), q[s + 4:s + 7]])

    def set_positions(self, q, state=None):
        """Set OpenSim's coordinates (of ``state``, the peer's own state by default) from plant positions q."""
        q = np.asarray(q, dtype=float)
        if q.shape != (self.nq,):
            raise ValueError(f"expected q of shape ({self.nq},), received {q.shape}")
        state = self.state if state is None else state
        for slot in self._slots:
            for coordinate, value in zip(slot.coordinates, self._slot_values(slot, q), strict=True):
                coordinate.setValue(state, float(value), False)
        self.model.realizePosition(state)

    def get_positions(self, state=None, out=None):
        """Plant positions q read back from OpenSim's coordinates; coordinates OpenSim lacks keep the defaults."""
        state = self.state if state is None else state
        if out is None:
            q = self.default_positions.copy()
        else:
            q = out
            q[:] = self.default_positions
        for slot in self._slots:
            values = [coordinate.getValue(state) for coordinate in slot.coordinates]
            s = slot.q_start
            if slot.kind in (_REVOLUTE, _PRISMATIC):
                q[s] = values[0]
            elif slot.kind == _PLANAR:
                q[s:s + 3] = values[1], values[2], values[0]
            else:
                q[s:s + 4] = _body_xyz_to_quat(np.array(values[:3]))
                q[s + 4:s + 7] = values[3:]
        return q

    def imu_rotations(self, state=None) -> np.ndarray:
        """(n_imus, 3, 3) R_GS of every IMU frame at ``state`` (OpenSim's forward kinematics)."""
        state = self.state if state is None else state
        self.model.realizePosition(state)
        out = np.empty((len(self.imus), 3, 3))
        for i, frame in enumerate(self.imu_frames):
            rotation = frame.getRotationInGround(state)  # keep alive: asMat33 would view a temporary
            out[i] = [[rotation.get(r, c) for c in range(3)] for r in range(3)]
        return out

    def imu_positions(self, state=None) -> np.ndarray:
        """(n_imus, 3) p_GS of every IMU frame origin at ``state`` (OpenSim's forward kinematics)."""
        state = self.state if state is None else state
        self.model.realizePosition(state)
        out = np.empty((len(self.imus), 3))
        for i, frame in enumerate(self.imu_frames):
            position = frame.getPositionInGround(state)
            out[i] = [position.get(k) for k in range(3)]
        return out

    def check_against_plant(self, num_samples=5, seed=0, tolerance=1e-9, scale=1.0) -> float:
        """Compare OpenSim's and the plant's pose X_GS of every IMU frame at random configurations.

        Configurations are the defaults plus uniform noise of half-width ``scale`` (rad or m) on every free q,
        random unit quaternions for floating joints; locked coordinates keep their defaults. Orientations are
        compared by the angle between them (rad), positions by distance (m), and plant -> OpenSim -> plant
        coordinates by their largest difference; each must stay within ``tolerance``, else
        :class:`ModelMismatchError`. Returns the largest orientation angle.
        """
        rng = np.random.default_rng(seed)
        worst = 0.0
        for _ in range(num_samples):
            q = self.default_positions + rng.uniform(-scale, scale, self.nq)
            for slot in self._slots:
                if slot.kind == _FLOATING:
                    quat = rng.normal(size=4)
                    q[slot.q_start:slot.q_start + 4] = quat / np.linalg.norm(quat)
                    # Locked translations stay at their defaults in OpenSim; keep them so in the plant too.
                    q[slot.q_start + 4:slot.q_start + 7] = self.default_positions[slot.q_start + 4:slot.q_start + 7]
            for i in self.locked_positions:
                q[i] = self.default_positions[i]
            X_WB = self.plant.calc_body_poses(q)
            R_GS_plant = np.stack([X_WB[imu.body, :3, :3] @ imu.R_BS for imu in self.imus])
            self.set_positions(q)
            R_GS_opensim = self.imu_rotations()
            angles = rotation_angle(np.swapaxes(R_GS_plant, -1, -2) @ R_GS_opensim)
            worst = max(worst, float(angles.max()))
            p_GS_plant = np.stack([X_WB[imu.body, :3, 3] for imu in self.imus])
            distance = float(np.linalg.norm(p_GS_plant - self.imu_positions(), axis=-1).max())
            if distance > tolerance:
                raise ModelMismatchError(
                    f"the OpenSim model converted from plant {getattr(self.plant, 'name', '')!r} puts IMU frame "
                    f"origins up to {distance:.3g} m away from the plant's at random q, expected <= {tolerance:.3g} m"
                )
            q_back = self.get_positions()
            worst_q = self._position_mismatch(q, q_back)
            if worst_q > tolerance:
                raise ModelMismatchError(
                    f"plant -> OpenSim -> plant coordinate round trip is off by {worst_q:.3g}, expected <= "
                    f"{tolerance:.3g}"
                )
        if worst > tolerance:
            raise ModelMismatchError(
                f"the OpenSim model converted from plant {getattr(self.plant, 'name', '')!r} does not reproduce its "
                f"kinematics: IMU frame orientations differ by up to {worst:.3g} rad at random q, expected <= "
                f"{tolerance:.3g} rad"
            )
        return worst

    def _position_mismatch(self, q_a, q_b):
        """Largest difference between two plant configurations (quaternions compared up to sign)."""
        difference = np.abs(q_a - q_b)
        for slot in self._slots:
            if slot.kind == _FLOATING:
                s = slot.q_start
                a, b = q_a[s:s + 4], q_b[s:s + 4]
                difference[s:s + 4] = np.minimum(np.abs(a - b), np.abs(a + b))
        return float(difference.max())


@dataclass
class OpenSimIkRun:
    """The result of :meth:`OpenSimImuIk.solve`.

    Attributes:
        q: (T, nq) plant positions, row k solved at times[k].
        assemble_seconds: wall time of the ``assemble`` at times[0].
        track_seconds: wall time of the ``track`` calls at times[1:], each followed by reading the coordinates.
    """

    q: np.ndarray
    assemble_seconds: float
    track_seconds: float

    @property
    def tracked_frames_per_second(self) -> float:
        return (self.q.shape[0] - 1) / self.track_seconds if self.track_seconds > 0 else float("inf")


class OpenSimImuIk:
    """OpenSim's InverseKinematicsSolver over an OrientationsReference, configured as OpenSense does.

    Args:
        peer: the converted model.
        accuracy: solver accuracy (IMUInverseKinematicsTool uses 1e-4).
        lock_mode: how the peer's locked coordinates are held, one of :data:`LOCK_MODES` (module docstring):
            "constraint" is OpenSense's configuration (IPOPT), "assembler" and "free" give the same solution
            through LBFGS.
        clock: what the solve is timed with (``time.perf_counter``: wall; ``time.thread_time``: this thread's CPU).
    """

    def __init__(self, peer: OpenSimPeer, accuracy: float = 1e-4, lock_mode: str = "constraint",
                 clock=time.perf_counter):
        if not 0 < accuracy < 1:
            raise ValueError(f"expected 0 < accuracy < 1, received {accuracy}")
        if lock_mode not in LOCK_MODES:
            raise ValueError(f"expected a lock_mode among {LOCK_MODES}, received {lock_mode!r}")
        self.peer = peer
        self.accuracy = float(accuracy)
        self.lock_mode = lock_mode
        self.clock = clock

    def _coordinate_references(self, state):
        """One CoordinateReference per locked coordinate at its locked value in "assembler" mode (AssemblySolver
        then calls Assembler::lockQ for it); none otherwise."""
        osim = self.peer._osim
        references = osim.SimTKArrayCoordinateReference()
        if self.lock_mode == "assembler":
            for coordinate in self.peer.locked_coordinates:
                references.push_back(osim.CoordinateReference(coordinate.getName(),
                                                              osim.Constant(coordinate.getValue(state))))
        return references

    def _table(self, times, R_GO):
        osim = self.peer._osim
        labels = [imu.name for imu in self.peer.imus]
        table = osim.TimeSeriesTableRotation()
        table.setColumnLabels(osim.StdVectorString(labels))
        quats = matrix_to_quat(R_GO)  # (T, n, 4) wxyz
        for k, t in enumerate(times):
            row = osim.RowVectorRotation(len(labels), osim.Rotation())
            for i in range(len(labels)):
                w, x, y, z = (float(c) for c in quats[k, i])
                row.updElt(0, i).setRotationFromQuaternion(osim.Quaternion(w, x, y, z))
            table.appendRow(float(t), row)
        return table

    def solve(self, times, R_GO) -> OpenSimIkRun:
        """Assemble at times[0] from the peer's default positions, then track every later frame.

        Args:
            times: (T,) increasing sample times (s).
            R_GO: (T, n_imus, 3, 3) observed sensor orientations in ground, columns in the order of peer.imus.
        """
        osim = self.peer._osim
        times = np.asarray(times, dtype=float)
        R_GO = np.asarray(R_GO, dtype=float)
        n_imus = len(self.peer.imus)
        if times.ndim != 1 or times.size < 1 or R_GO.shape != (times.size, n_imus, 3, 3):
            raise ValueError(
                f"expected times (T,) and R_GO (T, {n_imus}, 3, 3), received {times.shape} and {R_GO.shape}"
            )
        if np.any(np.diff(times) <= 0):
            raise ValueError("expected strictly increasing times")
        weights = osim.OrientationWeightSet()
        for imu in self.peer.imus:
            weights.cloneAndAppend(osim.OrientationWeight(imu.name, imu.weight))
        reference = osim.OrientationsReference(self._table(times, R_GO), weights)
        model = self.peer.model
        state = self.peer.reset_state()  # at the default coordinate values: q_start and the locked values
        if self.lock_mode == "free":
            for coordinate in self.peer.locked_coordinates:
                coordinate.setLocked(state, False)
        solver = osim.InverseKinematicsSolver(
            model, osim.MarkersReference(), reference, self._coordinate_references(state)
        )
        solver.setAccuracy(self.accuracy)
        q = np.empty((times.size, self.peer.nq))

        state.setTime(float(times[0]))
        start = self.clock()
        solver.assemble(state)
        self.peer.get_positions(state, out=q[0])
        assemble_seconds = self.clock() - start

        start = self.clock()
        for k in range(1, times.size):
            state.setTime(float(times[k]))
            solver.track(state)
            self.peer.get_positions(state, out=q[k])
        track_seconds = self.clock() - start
        return OpenSimIkRun(q=q, assemble_seconds=assemble_seconds, track_seconds=track_seconds)
