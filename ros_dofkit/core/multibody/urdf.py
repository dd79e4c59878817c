"""ros_dofkit.core.multibody.urdf: URDF parsing (xml.etree) and loading a URDF into a MultibodyPlant.

Where you are: ``ros_dofkit.core.multibody`` (ROS-free core); imports NumPy, ``xml.etree``, ``core.spatial`` and
``multibody.bodies`` / ``errors`` / ``joints``.

``parse_urdf`` turns a document into a validated :class:`URDFModel` (links, joints, transmissions) or raises
:class:`~ros_dofkit.core.multibody.errors.URDFError` naming the offending element; ``add_urdf_to_plant`` builds
bodies, frames, joints and actuators from it (``MultibodyPlant.add_urdf`` calls it).

Mapping (URDF -> plant): link -> Body; ``fixed`` -> WeldJoint; ``revolute``/``continuous`` -> RevoluteJoint
(continuous: infinite position limits); ``prismatic`` -> PrismaticJoint; ``planar`` -> PlanarJoint whose F and M
frames are rotated so their z axis is the URDF axis (the plane normal); ``floating`` -> QuaternionFloatingJoint.
``<origin>`` is X_PF (frame F registered on the parent as "<joint>_frame_on_parent" unless it is the identity);
``<limit>`` lower/upper/velocity/effort give position, velocity and effort limits (effort also the actuator's);
``<dynamics damping>`` the damping; ``<mimic>`` makes a coordinate-free mimic joint. A ``<transmission>`` with
type ``SimpleTransmission`` (one ``<joint>``) adds one actuator named after its ``<actuator>`` (else the
transmission); like Drake's parser, other transmission types (differentials, reducers sharing one motor among
several joints) have no single-joint actuator equivalent and add none.

Strictness: what kinematics needs (the tree, origins, axes, limits, well-formed numbers) is an error; what it does
not use or cannot honour is a :class:`URDFWarning` naming the elements, and the document still loads, as it does in
urdfdom and Pinocchio: transmissions that add no actuator (unknown, fixed or mimic joints, non-simple types), a
``<mimic>`` that cannot be honoured (unknown or unsuitable source joint, on a fixed, planar or floating joint: the
joint keeps its own coordinate, or stays fixed), and elements outside the URDF specification (``<contact>`` in a
link, ...). The same notes are kept in ``URDFModel.ignored``. Every URDF of example-robot-data 6.0.0 that Pinocchio
loads loads here with the same body poses (test/test_multibody_pinocchio.py).
"""

from __future__ import annotations

import difflib
import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import spatial
from .bodies import Frame, as_transform
from .errors import MultibodyValueError, URDFError
from .joints import Mimic, PlanarJoint, PrismaticJoint, QuaternionFloatingJoint, RevoluteJoint, WeldJoint

URDF_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
#: The joint types with one coordinate: the only ones a mimic can copy or follow, or a SimpleTransmission actuate.
ONE_DOF_TYPES = ("revolute", "continuous", "prismatic")
BASE_JOINT_CHOICES = ("fixed", "planar", "floating", None)
#: The URDF link that stands for the parent frame (robot_state_publisher / Gazebo convention).
WORLD_LINK = "world"
#: Children each element may have, by the URDF specification (wiki.ros.org/urdf/XML) and the ROS tools that add to it
#: (gazebo, ros2_control); any other child is ignored with a URDFWarning.
KNOWN_CHILDREN = {
    "robot": {"link", "joint", "transmission", "material", "gazebo", "sensor", "ros2_control"},
    "link": {"inertial", "visual", "collision"},
    "joint": {"origin", "parent", "child", "axis", "calibration", "dynamics", "limit", "mimic", "safety_controller"},
}


class URDFWarning(UserWarning):
    """Part of a URDF that kinematics does not use or cannot honour was ignored; the message names the elements."""


@dataclass
class URDFMimic:
    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass
class URDFJoint:
    """A validated ``<joint>``: X_PF is its ``<origin>``; axis is unit; limits are floats (inf when absent)."""

    name: str
    type: str
    parent: str
    child: str
    X_PF: np.ndarray
    axis: np.ndarray
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    effort: float = math.inf
    damping: float = 0.0
    mimic: URDFMimic | None = None


@dataclass
class URDFTransmission:
    name: str
    joints: list[str]
    actuator: str | None
    type: str = ""

    def is_simple(self) -> bool:
        """One joint driven by one actuator (transmission_interface/SimpleTransmission, ROS 1 and ROS 2)."""
        return self.type.endswith("SimpleTransmission") and len(self.joints) == 1


@dataclass
class URDFModel:
    """A parsed URDF: robot name, link names in document order, joints in document order, the root link, and the
    notes on what was ignored (each also issued as a URDFWarning)."""

    name: str
    links: list[str]
    joints: list[URDFJoint]
    root: str
    transmissions: list[URDFTransmission] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def joint(self, name: str) -> URDFJoint:
        return next(j for j in self.joints if j.name == name)


class _Notes:
    """What a parse ignores, grouped by reason: each reason becomes one note naming its first elements."""

    SHOWN = 5

    def __init__(self):
        self._names: dict[str, list[str]] = {}

    def note(self, reason: str, name: str) -> None:
        self._names.setdefault(reason, []).append(name)

    def unknown_children(self, element: ET.Element, kind: str, name: str) -> None:
        for child in element:
            if isinstance(child.tag, str) and child.tag not in KNOWN_CHILDREN[kind]:
                self.note(f"<{child.tag}> in <{kind}> (not a URDF element kinematics uses)", name)

    def texts(self) -> list[str]:
        texts = []
        for reason, names in self._names.items():
            shown = ", ".join(repr(n) for n in names[:self.SHOWN])
            more = f" and {len(names) - self.SHOWN} more" if len(names) > self.SHOWN else ""
            texts.append(f"ignored {reason}: {shown}{more}")
        return texts


class _UrdfSource(NamedTuple):
    """A URDF's XML text and how messages name it (its path, or "URDF string")."""

    text: str
    description: str


def _read_source(source) -> _UrdfSource:
    """Read ``source``: a path is read from disk, a string starting with ``<`` is the XML itself."""
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("<"):
        path = Path(source)
        try:
            return _UrdfSource(path.read_text(encoding="utf-8"), str(path))
        except OSError as error:
            raise URDFError(f"cannot read URDF file {str(path)!r}: {error.strerror or error}") from error
    if not isinstance(source, str):
        raise TypeError(f"expected a URDF path or XML string, got {type(source).__name__}")
    return _UrdfSource(source, "URDF string")


def _numbers(element: ET.Element, attribute: str, count: int, default, where: str) -> np.ndarray:
    text = element.get(attribute)
    if text is None:
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise URDFError(f"{where}: attribute {attribute}={text!r} is not a list of numbers") from None
    if values.shape != (count,):
        raise URDFError(f"{where}: attribute {attribute}={text!r} must have {count} numbers, got {len(parts)}")
    if not np.all(np.isfinite(values)):
        raise URDFError(f"{where}: attribute {attribute}={text!r} must be finite")
    return values


def _number(element: ET.Element, attribute: str, default: float, where: str, required: bool = False) -> float:
    text = element.get(attribute)
    if text is None:
        if required:
            raise URDFError(f"{where}: missing attribute {attribute!r}")
        return default
    try:
        value = float(text)
    except ValueError:
        raise URDFError(f"{where}: attribute {attribute}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise URDFError(f"{where}: attribute {attribute}={text!r} must be finite")
    return value


def _origin(element: ET.Element, where: str) -> np.ndarray:
    origin = element.find("origin")
    if origin is None:
        return np.eye(4)
    where = f"{where} <origin>"
    xyz = _numbers(origin, "xyz", 3, [0.0, 0.0, 0.0], where)
    rpy = _numbers(origin, "rpy", 3, [0.0, 0.0, 0.0], where)
    return spatial.make_transform(spatial.rpy_to_matrix(rpy), xyz)


def _parse_joint(element: ET.Element, links: set[str], notes: _Notes) -> URDFJoint:
    name = element.get("name")
    if not name:
        raise URDFError("<joint> element without a name attribute")
    where = f"<joint name={name!r}>"
    kind = element.get("type")
    if kind not in URDF_JOINT_TYPES:
        raise URDFError(f"{where}: unknown joint type {kind!r}; expected one of {', '.join(URDF_JOINT_TYPES)}")
    ends = {}
    for tag in ("parent", "child"):
        node = element.find(tag)
        if node is None or not node.get("link"):
            raise URDFError(f"{where}: missing <{tag} link=...> element")
        link = node.get("link")
        if link not in links:
            raise URDFError(f"{where}: <{tag} link={link!r}> refers to an unknown link" + _near(link, links))
        ends[tag] = link
    if ends["parent"] == ends["child"]:
        raise URDFError(f"{where}: parent and child are the same link {ends['parent']!r}")
    axis = np.array([1.0, 0.0, 0.0])
    axis_node = element.find("axis")
    if axis_node is not None and kind not in ("fixed", "floating"):  # urdfdom ignores <axis> on these
        axis = _numbers(axis_node, "xyz", 3, axis, f"{where} <axis>")
        norm = float(np.linalg.norm(axis))
        if norm < 1e-12:
            raise URDFError(f"{where} <axis>: xyz={axis_node.get('xyz')!r} is the zero vector")
        axis = axis / norm
    joint = URDFJoint(name, kind, ends["parent"], ends["child"], _origin(element, where), axis)
    limit = element.find("limit")
    if kind in ("revolute", "prismatic") and limit is None:
        raise URDFError(f"{where}: a {kind} joint needs a <limit> element")
    if limit is not None and kind in ("revolute", "prismatic", "continuous"):
        lwhere = f"{where} <limit>"
        if kind != "continuous":
            joint.lower = _number(limit, "lower", 0.0, lwhere)
            joint.upper = _number(limit, "upper", 0.0, lwhere)
            if joint.lower > joint.upper:
                raise URDFError(f"{lwhere}: lower={joint.lower} exceeds upper={joint.upper}")
        joint.velocity = _number(limit, "velocity", math.inf, lwhere)
        joint.effort = _number(limit, "effort", math.inf, lwhere)
        if joint.velocity < 0.0 or joint.effort < 0.0:
            raise URDFError(f"{lwhere}: velocity and effort must be >= 0, got {joint.velocity}, {joint.effort}")
    dynamics = element.find("dynamics")
    if dynamics is not None:
        joint.damping = _number(dynamics, "damping", 0.0, f"{where} <dynamics>")
        if joint.damping < 0.0:
            raise URDFError(f"{where} <dynamics>: damping must be >= 0, got {joint.damping}")
    mimic = element.find("mimic")
    if mimic is not None:
        if not mimic.get("joint"):
            raise URDFError(f"{where} <mimic>: missing attribute 'joint'")
        mwhere = f"{where} <mimic>"
        copy = URDFMimic(mimic.get("joint"), _number(mimic, "multiplier", 1.0, mwhere),
                         _number(mimic, "offset", 0.0, mwhere))
        if kind in ONE_DOF_TYPES:
            joint.mimic = copy
        else:  # a fixed joint has no motion to copy; a planar or floating one has no single coordinate
            notes.note(f"<mimic> on a {kind} joint (it stays {kind})", name)
    return joint


@dataclass(frozen=True)
class _RobotElement:
    """The document's ``<robot>`` element, its name, and how messages name the source (file path or "URDF
    string")."""

    element: ET.Element
    name: str
    description: str


def parse_urdf(source) -> URDFModel:
    """Parse and validate a URDF from a file path or an XML string (one starting with "<").

    Raises URDFError naming the element for: malformed XML, a root element other than <robot>, nameless or
    duplicate links and joints, unknown joint types, missing or unknown parent/child links, a link with two
    parents, two roots, cycles, bad numbers (non-finite, wrong count, zero axis, lower > upper, negative
    velocity/effort/damping), a missing <limit> on revolute/prismatic joints, a <mimic> without a joint, and
    mimic cycles. What kinematics does not use or cannot honour is a URDFWarning instead (module docstring), also
    listed in ``URDFModel.ignored``.
    """
    robot = _read_robot(source)
    # One _Notes for the whole parse, filled in document order by each step, so that each reason's note lists
    # its elements in the order they appear.
    notes = _Notes()
    notes.unknown_children(robot.element, "robot", robot.name)
    links = _parse_links(robot, notes)
    joints = _parse_joints(robot.element, set(links), notes)
    root = _tree_root(robot.name, links, joints)
    by_name = {j.name: j for j in joints}
    _drop_unhonoured_mimics(joints, by_name, notes)
    _refuse_mimic_cycles(joints, by_name)
    transmissions = _parse_transmissions(robot.element, by_name, notes)
    model = URDFModel(robot.name, links, joints, root, transmissions, notes.texts())
    for text in model.ignored:  # here, not in a step: stacklevel=2 names parse_urdf's caller
        warnings.warn(f"URDF {robot.name!r} ({robot.description}): {text}", URDFWarning, stacklevel=2)
    return model


def _read_robot(source) -> _RobotElement:
    """Read ``source`` (path or XML string) and return its ``<robot>`` element; URDFError if the XML is malformed,
    the root element is not ``<robot>`` or it has no name."""
    urdf = _read_source(source)
    description = urdf.description
    try:
        root = ET.fromstring(urdf.text)
    except ET.ParseError as error:
        raise URDFError(f"{description}: malformed XML: {error}") from None
    if root.tag != "robot":
        raise URDFError(f"{description}: the root element must be <robot>, got <{root.tag}>")
    robot_name = root.get("name")
    if not robot_name:
        raise URDFError(f"{description}: <robot> element without a name attribute")
    return _RobotElement(root, robot_name, description)


def _parse_links(robot: _RobotElement, notes: _Notes) -> list[str]:
    """The link names in document order; URDFError for a nameless or repeated link or a robot without links.
    Children of ``<link>`` that kinematics does not use go to ``notes``."""
    links: list[str] = []
    for element in robot.element.findall("link"):
        name = element.get("name")
        if not name:
            raise URDFError("<link> element without a name attribute")
        if name in links:
            raise URDFError(f"<link name={name!r}> appears twice")
        notes.unknown_children(element, "link", name)
        links.append(name)
    if not links:
        raise URDFError(f"{robot.description}: robot {robot.name!r} has no <link>")
    return links


def _parse_joints(root: ET.Element, links: set[str], notes: _Notes) -> list[URDFJoint]:
    """The validated joints in document order (see :func:`_parse_joint`); URDFError for a repeated joint name or a
    link that would get a second parent joint."""
    joints: list[URDFJoint] = []
    parent_joint: dict[str, URDFJoint] = {}
    for element in root.findall("joint"):
        joint = _parse_joint(element, links, notes)
        notes.unknown_children(element, "joint", joint.name)
        if any(j.name == joint.name for j in joints):
            raise URDFError(f"<joint name={joint.name!r}> appears twice")
        if joint.child in parent_joint:
            raise URDFError(
                f"<joint name={joint.name!r}>: link {joint.child!r} already has the parent joint "
                f"{parent_joint[joint.child].name!r}; a link has one parent"
            )
        parent_joint[joint.child] = joint
        joints.append(joint)
    return joints


def _tree_root(robot_name: str, links: list[str], joints: list[URDFJoint]) -> str:
    """The one link without a parent joint, from which every link must be reached; URDFError otherwise (no root:
    the joints form a cycle; several roots; links unreached from the root: they form a cycle of their own)."""
    children_of_joints = {joint.child for joint in joints}
    roots = [link for link in links if link not in children_of_joints]
    if not roots:
        raise URDFError(f"robot {robot_name!r}: the joints form a cycle (every link has a parent)")
    if len(roots) > 1:
        raise URDFError(
            f"robot {robot_name!r}: expected one root link, found {len(roots)}: {', '.join(map(repr, roots))}"
        )
    children: dict[str, list[str]] = {}
    for joint in joints:
        children.setdefault(joint.parent, []).append(joint.child)
    reached, stack = {roots[0]}, [roots[0]]
    while stack:
        for child in children.get(stack.pop(), []):
            reached.add(child)
            stack.append(child)
    cyclic = [link for link in links if link not in reached]
    if cyclic:
        raise URDFError(f"robot {robot_name!r}: links {', '.join(map(repr, cyclic))} form a cycle")
    return roots[0]


def _drop_unhonoured_mimics(joints: list[URDFJoint], by_name: dict[str, URDFJoint], notes: _Notes) -> None:
    """Clear the ``<mimic>`` of every joint whose source joint is unknown or has no single coordinate, noting why:
    the joint then keeps its own coordinate, as urdfdom does."""
    for joint in joints:
        if joint.mimic is None:
            continue
        source = by_name.get(joint.mimic.joint)
        if source is None:
            notes.note("<mimic> of an unknown joint (the joint keeps its own coordinate)",
                       f"{joint.name} -> {joint.mimic.joint}")
            joint.mimic = None
        elif source.type not in ONE_DOF_TYPES:
            notes.note(f"<mimic> of a {source.type} joint (the joint keeps its own coordinate)",
                       f"{joint.name} -> {source.name}")
            joint.mimic = None


def _refuse_mimic_cycles(joints: list[URDFJoint], by_name: dict[str, URDFJoint]) -> None:
    """URDFError if following the mimic sources from some joint comes back to a joint already visited (every
    remaining mimic names a known joint: :func:`_drop_unhonoured_mimics` ran first)."""
    for joint in joints:
        if joint.mimic is None:
            continue
        source = by_name[joint.mimic.joint]
        where = f"<joint name={joint.name!r}> <mimic joint={joint.mimic.joint!r}>"
        seen = {joint.name}
        while source.mimic is not None:
            if source.name in seen:
                raise URDFError(f"{where}: mimic joints form a cycle")
            seen.add(source.name)
            source = by_name[source.mimic.joint]


def _parse_transmissions(root: ET.Element, by_name: dict[str, URDFJoint], notes: _Notes) -> list[URDFTransmission]:
    """The ``<transmission>`` elements over known joints, in document order. One of an unknown joint is dropped;
    one that will add no actuator (not a SimpleTransmission of one joint, or of a joint without a coordinate of its
    own) is kept but noted, so the notes say why the plant has no actuator for it."""
    transmissions = []
    for element in root.findall("transmission"):
        tname = element.get("name") or "<unnamed>"
        joint_names = [j.get("name") for j in element.findall("joint")]
        unknown = [jname for jname in joint_names if jname not in by_name]
        if unknown:
            notes.note("<transmission> of an unknown joint (no actuator)", f"{tname} -> {unknown[0]}")
            continue
        actuator = element.find("actuator")
        type_node = element.find("type")
        kind = (type_node.text or "").strip() if type_node is not None else element.get("type", "")
        transmission = URDFTransmission(tname, joint_names, None if actuator is None else actuator.get("name"), kind)
        if not transmission.is_simple():
            notes.note(f"<transmission> of type {kind or '(none)'} (no actuator: only a SimpleTransmission of one "
                       "joint maps to one)", tname)
        elif _actuated_joint(transmission, by_name) is None:
            source = by_name[joint_names[0]]
            reason = "a mimic joint" if source.mimic is not None else f"a {source.type} joint"
            notes.note(f"<transmission> of {reason} (no actuator: no coordinate of its own)", tname)
        transmissions.append(transmission)
    return transmissions


def _actuated_joint(transmission: URDFTransmission, joints: dict[str, URDFJoint]) -> URDFJoint | None:
    """The joint a transmission adds an actuator to: a SimpleTransmission's one joint if it has a coordinate of its
    own (1-dof, not a mimic); None otherwise."""
    if not transmission.is_simple():
        return None
    joint = joints[transmission.joints[0]]
    if joint.type not in ONE_DOF_TYPES or joint.mimic is not None:
        return None
    return joint


def _near(name, valid) -> str:
    close = difflib.get_close_matches(str(name), sorted(valid), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(map(repr, close))}?" if close else ""


def _rotation_z_to(normal: np.ndarray) -> np.ndarray:
    """A rotation R with R @ e_z = normal (the smallest one; a half turn about x for -e_z)."""
    z = np.array([0.0, 0.0, 1.0])
    cross = np.cross(z, normal)
    sine, cosine = float(np.linalg.norm(cross)), float(normal @ z)
    if sine < 1e-12:
        return np.eye(3) if cosine > 0 else spatial.rotation_x(math.pi)
    return spatial.rotvec_to_matrix(cross / sine * math.atan2(sine, cosine))


def _parse_order(model: URDFModel) -> list[URDFJoint]:
    """Joints in URDF order, each deferred until its parent link is placed (so parents come first)."""
    placed, order, pending = {model.root}, [], list(model.joints)
    while pending:
        remaining = []
        for joint in pending:
            if joint.parent in placed:
                order.append(joint)
                placed.add(joint.child)
            else:
                remaining.append(joint)
        pending = remaining
    return order


def _without_world_joint(model: URDFModel, base_joint: str) -> tuple[URDFModel, np.ndarray]:
    """The model without its ``world`` link and the one joint from it, and that joint's origin X_WR (world to the
    new root link R), for ``base_joint`` to replace that joint: as if the user had deleted both from the XML, the
    requested joint's frame on the parent being the deleted joint's origin (so the default configuration is the
    pose the URDF gives)."""
    from_world = [j for j in model.joints if j.parent == WORLD_LINK]
    if len(from_world) != 1:
        names = ", ".join(repr(j.name) for j in from_world)
        raise MultibodyValueError(
            f"URDF {model.name!r}: base_joint={base_joint!r} replaces the one joint from its {WORLD_LINK!r} link, "
            f"but that link has {len(from_world)} ({names}); load it with base_joint='fixed' or None to keep the "
            "URDF's world joints"
        )
    (replaced,) = from_world
    mimics = [j.name for j in model.joints if j.mimic is not None and j.mimic.joint == replaced.name]
    if mimics:
        raise MultibodyValueError(
            f"URDF {model.name!r}: base_joint={base_joint!r} would replace the world joint {replaced.name!r}, which "
            f"the joints {', '.join(map(repr, mimics))} mimic; load it with base_joint='fixed' or None"
        )
    stripped = URDFModel(
        model.name,
        [link for link in model.links if link != WORLD_LINK],
        [j for j in model.joints if j is not replaced],
        replaced.child,
        [t for t in model.transmissions if replaced.name not in t.joints],
        list(model.ignored),
    )
    return stripped, replaced.X_PF


def add_urdf_to_plant(plant, urdf, model_name=None, base_joint="fixed", parent_frame="world", X_PF=None) -> int:
    """Load a URDF (path, XML string or URDFModel) as a new model instance of ``plant``; see MultibodyPlant.add_urdf.

    A URDF whose root is a ``world`` link keeps its world joints with ``base_joint`` "fixed" or None; "planar" or
    "floating" replace its one world joint (the robot's root is then that joint's child, the new joint's frame on
    ``parent_frame`` is ``X_PF`` composed with the replaced joint's origin). Everything is validated before the plant
    is touched, so a failing call leaves the plant unchanged.
    """
    plant._check_building("add_urdf")
    if base_joint not in BASE_JOINT_CHOICES:
        raise MultibodyValueError(f"base_joint must be one of {BASE_JOINT_CHOICES}, got {base_joint!r}")
    model = urdf if isinstance(urdf, URDFModel) else parse_urdf(urdf)
    name = model.name if model_name is None else model_name
    if plant.has_model_instance_named(name):
        raise MultibodyValueError(
            f"plant {plant.name!r} already has a model instance named {name!r}; pass model_name= to load it again"
        )
    if X_PF is not None:
        X_PF = as_transform(X_PF, f"X_PF of model {name!r}")
    if model.root == WORLD_LINK and base_joint in ("planar", "floating"):
        model, X_world_root = _without_world_joint(model, base_joint)
        if not np.allclose(X_world_root, np.eye(4), rtol=0.0, atol=1e-15):
            X_PF = X_world_root if X_PF is None else X_PF @ X_world_root
    has_world_link = model.root == WORLD_LINK
    attach = plant.get_body(0).body_frame if parent_frame == "world" else plant._as_frame(parent_frame)
    if X_PF is not None:
        attach = plant.add_frame(f"{name}_attachment", attach.body, attach.X_BF @ X_PF)
    instance = plant.add_model_instance(name)

    order = _parse_order(model)
    bodies = {}
    if has_world_link:
        bodies[WORLD_LINK] = attach.body
    else:
        bodies[model.root] = plant.add_body(model.root, instance)
    for joint in order:
        bodies[joint.child] = plant.add_body(joint.child, instance)

    def frame_on(link: str, X: np.ndarray, frame_name: str):
        body = bodies[link]
        if link == WORLD_LINK and has_world_link:
            # the frame lives on a body of another model instance: keep its name unique there
            X, frame_name = attach.X_BF @ X, f"{name}_{frame_name}"
        if np.allclose(X, np.eye(4), rtol=0.0, atol=1e-15):
            return body.body_frame
        return Frame(frame_name, body, X)

    if not has_world_link:
        root = bodies[model.root]
        base_name = model.root if not any(j.name == model.root for j in model.joints) else f"{model.root}_base"
        if base_joint in ("fixed", None):
            plant.add_joint(WeldJoint(f"{attach.name}_welds_to_{model.root}", attach, root))
        elif base_joint == "planar":
            plant.add_joint(PlanarJoint(base_name, attach, root))
        else:
            plant.add_joint(QuaternionFloatingJoint(base_name, attach, root))

    created = {}

    def make(joint: URDFJoint):
        if joint.name in created:
            return created[joint.name]
        F = frame_on(joint.parent, joint.X_PF, f"{joint.name}_frame_on_parent")
        child = bodies[joint.child]
        mimic = None
        if joint.mimic is not None:
            mimic = Mimic(make(model.joint(joint.mimic.joint)), joint.mimic.multiplier, joint.mimic.offset)
        if joint.type == "fixed":
            result = WeldJoint(joint.name, F, child)
        elif joint.type in ("revolute", "continuous"):
            result = RevoluteJoint(joint.name, F, child, joint.axis, joint.lower, joint.upper, joint.damping, mimic)
        elif joint.type == "prismatic":
            result = PrismaticJoint(joint.name, F, child, joint.axis, joint.lower, joint.upper, joint.damping, mimic)
        elif joint.type == "planar":
            R_FnF = spatial.make_transform(_rotation_z_to(joint.axis))
            F = frame_on(joint.parent, joint.X_PF @ R_FnF, f"{joint.name}_frame_on_parent")
            M = frame_on(joint.child, R_FnF, f"{joint.name}_frame_on_child")
            result = PlanarJoint(joint.name, F, M, [joint.damping] * 3)
        else:
            result = QuaternionFloatingJoint(joint.name, F, child, joint.damping, joint.damping)
        if result.num_velocities == 1 and math.isfinite(joint.velocity):
            result.set_velocity_limits([-joint.velocity], [joint.velocity])
        if result.num_velocities == 1 and 0.0 < joint.effort < math.inf:
            result.set_effort_limits([joint.effort])
        created[joint.name] = result
        return result

    for joint in order:
        make(joint)
    for joint in order:  # add in tree order (mimic sources may have been created earlier)
        plant.add_joint(created[joint.name])

    by_name = {j.name: j for j in model.joints}
    for transmission in model.transmissions:
        source = _actuated_joint(transmission, by_name)
        if source is None or source.name not in created:  # (parse_urdf noted why)
            continue
        joint = created[source.name]
        effort = source.effort
        plant.add_joint_actuator(transmission.actuator or transmission.name, joint,
                                 effort if effort > 0.0 else math.inf)
    return instance
