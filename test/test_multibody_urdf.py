"""URDF loading: every malformed case raises URDFError naming the element; what a valid URDF becomes (joint
types, limits, damping, mimic, transmissions, base joints, world links, several model instances)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from robot_models import urdf_path
from ros_dofkit.core import spatial
from ros_dofkit.core.multibody import (
    MultibodyPlant,
    MultibodyValueError,
    PlanarJoint,
    QuaternionFloatingJoint,
    UnknownNameError,
    URDFError,
    URDFWarning,
    parse_urdf,
)

FIXTURES = Path(__file__).parent / "fixtures" / "urdf"


def robot(body: str, name: str = "r") -> str:
    return f'<robot name="{name}">{body}</robot>'


LINKS = '<link name="a"/><link name="b"/><link name="c"/>'


def joint(name="j", kind="revolute", parent="a", child="b", extra='<limit lower="-1" upper="1"/>') -> str:
    parent_xml = "" if parent is None else f'<parent link="{parent}"/>'
    child_xml = "" if child is None else f'<child link="{child}"/>'
    return f'<joint name="{name}" type="{kind}">{parent_xml}{child_xml}{extra}</joint>'


CHAIN = LINKS + joint("j1", child="b") + joint("j2", parent="b", child="c")

MALFORMED = {
    "xml syntax": ("<robot name='r'><link name='a'></robot>", "malformed XML"),
    "root element": ("<model name='r'/>", "root element must be <robot>"),
    "robot name": ("<robot><link name='a'/></robot>", "<robot> element without a name"),
    "no links": (robot(""), "has no <link>"),
    "link name": (robot('<link/>'), "<link> element without a name"),
    "duplicate link": (robot('<link name="a"/><link name="a"/>'), "<link name='a'> appears twice"),
    "duplicate joint": (robot(LINKS + joint("j", child="b") + joint("j", parent="b", child="c")),
                        "<joint name='j'> appears twice"),
    "joint name": (robot(LINKS + '<joint type="fixed"><parent link="a"/><child link="b"/></joint>'),
                   "<joint> element without a name"),
    "unknown type": (robot(LINKS + joint(kind="ball")), "<joint name='j'>: unknown joint type 'ball'"),
    "missing type": (robot(LINKS + joint(kind="")), "unknown joint type"),
    "missing parent": (robot(LINKS + joint(parent=None)), "<joint name='j'>: missing <parent link=...>"),
    "missing child": (robot(LINKS + joint(child=None)), "<joint name='j'>: missing <child link=...>"),
    "unknown child link": (robot('<link name="base"/><link name="arm"/>' + joint(parent="base", child="amr")),
                           "<child link='amr'> refers to an unknown link; did you mean 'arm'"),
    "unknown parent link": (robot(LINKS + joint(parent="x", child="b")), "<parent link='x'> refers to an unknown"),
    "self joint": (robot(LINKS + joint(parent="a", child="a")), "parent and child are the same link 'a'"),
    "two parents": (robot(LINKS + joint("j1", child="b") + joint("j2", parent="c", child="b")),
                    "<joint name='j2'>: link 'b' already has the parent joint 'j1'"),
    "two roots": (robot(LINKS + joint("j1", child="b")), "expected one root link, found 2: 'a', 'c'"),
    "cycle everywhere": (robot('<link name="a"/><link name="b"/>' + joint("j1", "fixed", "a", "b", "")
                               + joint("j2", "fixed", "b", "a", "")), "form a cycle"),
    "cycle beside root": (robot('<link name="r"/>' + LINKS + joint("j0", "fixed", "r", "c", "")
                                + joint("j1", "fixed", "a", "b", "") + joint("j2", "fixed", "b", "a", "")),
                          "links 'a', 'b' form a cycle"),
    "xyz count": (robot(LINKS + joint(extra='<origin xyz="1 2"/><limit/>') + joint("k", "fixed", "a", "c", "")),
                  "<joint name='j'> <origin>: attribute xyz='1 2' must have 3 numbers, got 2"),
    "rpy count": (robot(CHAIN.replace('<limit lower="-1" upper="1"/>', '<origin rpy="0 0 0 1"/><limit/>', 1)),
                  "<joint name='j1'> <origin>: attribute rpy='0 0 0 1' must have 3 numbers, got 4"),
    "rpy not finite": (robot(CHAIN.replace('<limit lower="-1" upper="1"/>', '<origin rpy="0 nan 0"/><limit/>', 1)),
                       "<joint name='j1'> <origin>: attribute rpy='0 nan 0' must be finite"),
    "xyz not number": (robot(CHAIN.replace('<limit lower="-1" upper="1"/>', '<origin xyz="0 one 0"/><limit/>', 1)),
                       "attribute xyz='0 one 0' is not a list of numbers"),
    "zero axis": (robot(CHAIN.replace('<limit lower="-1" upper="1"/>', '<axis xyz="0 0 0"/><limit/>', 1)),
                  "<joint name='j1'> <axis>: xyz='0 0 0' is the zero vector"),
    "axis count": (robot(CHAIN.replace('<limit lower="-1" upper="1"/>', '<axis xyz="0 1"/><limit/>', 1)),
                   "<joint name='j1'> <axis>: attribute xyz='0 1' must have 3 numbers"),
    "lower above upper": (robot(CHAIN.replace('lower="-1" upper="1"', 'lower="1" upper="-1"', 1)),
                          "<joint name='j1'> <limit>: lower=1.0 exceeds upper=-1.0"),
    "limit infinite": (robot(CHAIN.replace('lower="-1"', 'lower="-inf"', 1)), "lower='-inf' must be finite"),
    "negative velocity": (robot(CHAIN.replace('upper="1"', 'upper="1" velocity="-2"', 1)),
                          "velocity and effort must be >= 0"),
    "missing limit": (robot(LINKS + joint(kind="prismatic", extra="") + joint("k", "fixed", "a", "c", "")),
                      "<joint name='j'>: a prismatic joint needs a <limit> element"),
    "negative damping": (robot(CHAIN.replace("<limit", '<dynamics damping="-1"/><limit', 1)),
                         "<joint name='j1'> <dynamics>: damping must be >= 0"),
    "mimic no joint": (robot(CHAIN.replace("<limit", '<mimic/><limit', 1)), "<mimic>: missing attribute 'joint'"),
    "mimic cycle": (robot(LINKS + joint("j1", extra='<limit/><mimic joint="j2"/>')
                          + joint("j2", parent="b", child="c", extra='<limit/><mimic joint="j1"/>')),
                    "mimic joints form a cycle"),
    "mimic multiplier": (robot(CHAIN.replace("<limit", '<mimic joint="j2" multiplier="x"/><limit', 1)),
                         "attribute multiplier='x' is not a number"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_urdf_raises_one_error_class_naming_the_element(case):
    text, message = MALFORMED[case]
    with pytest.raises(URDFError) as error:
        MultibodyPlant().add_urdf(text)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)


SIMPLE = "<type>transmission_interface/SimpleTransmission</type>"

#: What kinematics does not use or cannot honour: (document, the warning, the position names of the loaded plant).
#: urdfdom and Pinocchio load each of these; example-robot-data has every kind (PR2, Baxter, Kinova, Talos, Alex).
IGNORED = {
    "mimic of unknown joint": (robot(CHAIN.replace("<limit", '<mimic joint="j3"/><limit', 1)),
                               "ignored <mimic> of an unknown joint (the joint keeps its own coordinate): 'j1 -> j3'",
                               ["j1", "j2"]),
    "mimic on planar": (robot(LINKS + joint("p", "planar", "a", "b", '<mimic joint="k"/>')
                              + joint("k", "revolute", "a", "c")),
                        "ignored <mimic> on a planar joint (it stays planar): 'p'", ["p_x", "p_y", "p_qz", "k"]),
    "mimic on fixed": (robot(LINKS + joint("f", "fixed", "a", "b", '<mimic joint="k"/>')
                             + joint("k", "revolute", "a", "c")),
                       "ignored <mimic> on a fixed joint (it stays fixed): 'f'", ["k"]),
    "mimic of fixed": (robot(LINKS + joint("f", "fixed", "a", "b", "")
                             + joint("k", "revolute", "a", "c", '<limit/><mimic joint="f"/>')),
                       "ignored <mimic> of a fixed joint (the joint keeps its own coordinate): 'k -> f'", ["k"]),
    "transmission of unknown joint": (
        robot(CHAIN + f'<transmission name="t">{SIMPLE}<joint name="j4"/></transmission>'),
        "ignored <transmission> of an unknown joint (no actuator): 't -> j4'", ["j1", "j2"]),
    "transmission of fixed joint": (
        robot(LINKS + joint("f", "fixed", "a", "b", "") + joint("k", "revolute", "a", "c")
              + f"<transmission name='t'>{SIMPLE}<joint name='f'/><actuator name='m'/></transmission>"),
        "ignored <transmission> of a fixed joint (no actuator: no coordinate of its own): 't'", ["k"]),
    "transmission of mimic joint": (
        robot(CHAIN.replace("<limit", '<mimic joint="j2"/><limit', 1)
              + f"<transmission name='t'>{SIMPLE}<joint name='j1'/></transmission>"),
        "ignored <transmission> of a mimic joint (no actuator: no coordinate of its own): 't'", ["j2"]),
    "differential transmission": (
        robot(CHAIN + "<transmission name='w'><type>transmission_interface/DifferentialTransmission</type>"
              "<joint name='j1'/><joint name='j2'/></transmission>"),
        "ignored <transmission> of type transmission_interface/DifferentialTransmission (no actuator: only a "
        "SimpleTransmission of one joint maps to one): 'w'", ["j1", "j2"]),
    "unknown tags": (
        robot(LINKS.replace('<link name="b"/>', '<link name="b"><contact/></link>') + '<sensors/>'
              + joint("j1", child="b").replace("<limit", "<spring/><limit") + joint("j2", parent="b", child="c")),
        "ignored <contact> in <link> (not a URDF element kinematics uses): 'b'", ["j1", "j2"]),
}


@pytest.mark.parametrize("case", sorted(IGNORED))
def test_what_kinematics_does_not_use_is_a_warning_naming_the_element(case):
    text, message, positions = IGNORED[case]
    with pytest.warns(URDFWarning) as record:
        model = parse_urdf(text)
    assert message in model.ignored
    assert [str(w.message) for w in record] == [f"URDF 'r' (URDF string): {note}" for note in model.ignored]
    plant = MultibodyPlant()
    with pytest.warns(URDFWarning, match=re.escape(message)):
        plant.add_urdf(text)
    assert not any(plant.get_joint_actuator(i).joint.name in ("f", "j1") for i in range(plant.num_actuators()))
    plant.finalize()
    assert plant.position_names() == positions


def test_unknown_tags_are_named_where_they_are():
    text, _, _ = IGNORED["unknown tags"]
    with pytest.warns(URDFWarning):
        ignored = parse_urdf(text).ignored
    assert ignored == [
        "ignored <sensors> in <robot> (not a URDF element kinematics uses): 'r'",
        "ignored <contact> in <link> (not a URDF element kinematics uses): 'b'",
        "ignored <spring> in <joint> (not a URDF element kinematics uses): 'j1'",
    ]


def test_a_clean_urdf_warns_about_nothing(recwarn):
    assert parse_urdf(FIXTURES / "mobile_arm.urdf").ignored == []
    assert not [w for w in recwarn if issubclass(w.category, URDFWarning)]


def test_missing_file_is_a_urdf_error(tmp_path):
    with pytest.raises(URDFError, match="cannot read URDF file"):
        MultibodyPlant().add_urdf(tmp_path / "nope.urdf")


@pytest.fixture(scope="module")
def arm() -> MultibodyPlant:
    plant = MultibodyPlant()
    plant.add_urdf(FIXTURES / "mobile_arm.urdf", base_joint="floating")
    plant.finalize()
    return plant


def test_joint_types_and_coordinate_order_follow_the_urdf(arm):
    types = {arm.get_joint(i).name: arm.get_joint(i).type_name for i in arm.get_joint_indices("mobile_arm")}
    assert types == {
        "base": "quaternion_floating", "sled_plane": "planar", "turn": "revolute", "shoulder_pitch": "revolute",
        "elbow": "revolute", "wrist_fixed": "weld", "extend": "prismatic", "finger_left_joint": "prismatic",
        "finger_right_joint": "prismatic", "camera_mount": "weld",
    }
    assert arm.position_names() == [
        "base_qw", "base_qx", "base_qy", "base_qz", "base_x", "base_y", "base_z", "sled_plane_x", "sled_plane_y",
        "sled_plane_qz", "turn", "shoulder_pitch", "elbow", "extend", "finger_left_joint",
    ]
    assert arm.velocity_names()[:6] == ["base_wx", "base_wy", "base_wz", "base_vx", "base_vy", "base_vz"]
    for b in range(1, arm.num_bodies()):
        assert arm.get_inboard_joint(b).parent_body.index < b
    assert arm.num_positions() == 15 and arm.num_velocities() == 14


def test_limits_damping_and_actuators_come_from_the_urdf(arm):
    lower, upper = arm.position_lower_limits(), arm.position_upper_limits()
    names = arm.position_names()
    assert (lower[names.index("turn")], upper[names.index("turn")]) == (-math.inf, math.inf)  # continuous
    assert (lower[names.index("shoulder_pitch")], upper[names.index("shoulder_pitch")]) == (-1.5, 1.2)
    assert (lower[names.index("extend")], upper[names.index("extend")]) == (0.0, 0.25)
    vnames = arm.velocity_names()
    assert arm.velocity_upper_limits()[vnames.index("turn")] == 2.0
    assert arm.velocity_lower_limits()[vnames.index("elbow")] == -2.5
    assert np.all(np.isinf(arm.acceleration_upper_limits()))
    efforts = dict(zip(vnames, arm.effort_limits(), strict=True))
    assert (efforts["turn"], efforts["elbow"], efforts["extend"], efforts["base_wx"]) == (50.0, 30.0, 100.0, math.inf)
    assert arm.get_joint_by_name("shoulder_pitch").damping.tolist() == [0.2]
    np.testing.assert_array_equal(arm.get_joint_by_name("sled_plane").damping, [0.5, 0.5, 0.5])
    assert arm.num_actuators() == 2
    first, second = arm.get_joint_actuator(0), arm.get_joint_actuator(1)
    assert (first.name, first.joint.name, first.effort_limit) == ("turn_motor", "turn", 50.0)
    assert (second.name, second.joint.name, second.effort_limit) == ("elbow_motor", "elbow", 30.0)
    assert arm.get_joint_actuator_by_name("elbow_motor") is second


def test_mimic_joint_has_no_coordinate_and_follows_its_source(arm):
    mimic = arm.get_joint_by_name("finger_right_joint")
    assert mimic.num_positions == 0 and mimic.num_velocities == 0 and mimic.position_start == -1
    names = arm.position_names()
    q = arm.default_positions()
    q[names.index("finger_left_joint")] = 0.03
    X = arm.calc_body_poses(q)
    slider, finger = arm.get_body_by_name("slider").index, arm.get_body_by_name("finger_right").index
    expected_offset = np.array([0, -0.01, 0.05]) + (-1.5 * 0.03 + 0.002) * np.array([0, 1, 0])
    np.testing.assert_allclose(X[finger], X[slider] @ spatial.make_transform(None, expected_offset), atol=1e-14)
    tree = arm.tree
    assert tree.mimic_q[finger] == names.index("finger_left_joint")
    assert (tree.mimic_multiplier[finger], tree.mimic_offset[finger]) == (-1.5, 0.002)


def test_urdf_planar_joint_moves_in_the_plane_normal_to_its_axis(arm):
    joint = arm.get_joint_by_name("sled_plane")
    assert isinstance(joint, PlanarJoint)
    normal_in_parent = arm.get_joint_by_name("sled_plane").X_PF[:3, :3] @ [0, 0, 1]
    origin = spatial.rpy_to_matrix([0.2, -0.1, 0.4])
    np.testing.assert_allclose(normal_in_parent, origin @ (np.array([0, 1, 1]) / math.sqrt(2)), atol=1e-15)
    names = arm.position_names()
    q0 = arm.default_positions()
    base, sled = arm.get_body_by_name("base").index, arm.get_body_by_name("sled").index
    X0 = np.linalg.inv(arm.calc_body_poses(q0)[base]) @ arm.calc_body_poses(q0)[sled]
    np.testing.assert_allclose(X0[:3, 3], [0.1, -0.2, 0.3], atol=1e-15)  # zero q: the joint origin
    np.testing.assert_allclose(X0[:3, :3], origin, atol=1e-15)
    q = q0.copy()
    q[names.index("sled_plane_x"):names.index("sled_plane_qz") + 1] = [0.7, -0.4, 1.3]
    X = np.linalg.inv(arm.calc_body_poses(q)[base]) @ arm.calc_body_poses(q)[sled]
    n = origin @ (np.array([0, 1, 1]) / math.sqrt(2))
    assert abs((X[:3, 3] - X0[:3, 3]) @ n) < 1e-14  # stays in the plane
    np.testing.assert_allclose(np.linalg.norm(X[:3, 3] - X0[:3, 3]), math.hypot(0.7, -0.4), atol=1e-14)
    np.testing.assert_allclose(spatial.matrix_to_rotvec(X[:3, :3] @ X0[:3, :3].T), 1.3 * n, atol=1e-14)


def test_world_link_keeps_the_urdf_floating_joint():
    plant = MultibodyPlant()
    plant.add_urdf(FIXTURES / "floating_world.urdf")
    plant.finalize()
    free = plant.get_joint_by_name("free")
    assert isinstance(free, QuaternionFloatingJoint) and free.parent_body.index == 0
    assert not plant.has_body_named("world", "flyer")
    X = plant.calc_body_poses(plant.default_positions())[plant.get_body_by_name("body").index]
    np.testing.assert_allclose(X, spatial.make_transform(spatial.rotation_z(0.3), [0, 0, 1]), atol=1e-15)
    assert plant.position_names() == ["free_qw", "free_qx", "free_qy", "free_qz", "free_x", "free_y", "free_z",
                                      "spin"]


def test_planar_or_floating_base_joint_replaces_the_world_joint_at_its_origin():
    plant = MultibodyPlant()
    plant.add_urdf(FIXTURES / "floating_world.urdf", base_joint="planar")
    plant.finalize()
    assert not plant.has_joint_named("free")
    assert plant.position_names() == ["body_x", "body_y", "body_qz", "spin"]
    assert plant.get_joint_by_name("body").parent_body.index == 0
    X_WF = spatial.make_transform(spatial.rotation_z(0.3), [0, 0, 1])  # the replaced joint's origin
    q = np.array([0.4, -0.2, 0.7, 0.0])
    X = plant.calc_body_poses(q)[plant.get_body_by_name("body").index]
    np.testing.assert_allclose(X, X_WF @ spatial.make_transform(spatial.rotation_z(0.7), [0.4, -0.2, 0]), atol=1e-15)

    two = robot('<link name="world"/><link name="a"/><link name="b"/>' + joint("wa", "fixed", "world", "a", "")
                + joint("wb", "fixed", "world", "b", ""))
    plant = MultibodyPlant()
    with pytest.raises(MultibodyValueError, match="replaces the one joint from its 'world' link, but that link has 2 "
                                                  "\\('wa', 'wb'\\); load it with base_joint='fixed'"):
        plant.add_urdf(two, base_joint="floating")
    assert plant.num_model_instances() == 1 and plant.num_bodies() == 1  # no trace
    plant.add_urdf(two, base_joint="fixed")  # the URDF's world joints, as written


def without_world_link(path: Path) -> str:
    """The URDF as the user of issue 21 edited it: its world link and the joint from it deleted."""
    root = ET.parse(path).getroot()
    for element in list(root):
        if (element.tag == "link" and element.get("name") == "world") or (
                element.tag == "joint" and element.find("parent").get("link") == "world"):
            root.remove(element)
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("base_joint", ["planar", "floating"])
def test_ur5_with_a_world_link_takes_the_requested_base_joint(base_joint):
    """UR5's ur5_robot.urdf (example-robot-data) welds base_link to a world link: the requested base joint
    replaces that weld, giving the robot the user got by deleting the world link from the XML."""
    path = urdf_path("ur5")
    replaced, stripped = MultibodyPlant(), MultibodyPlant()
    replaced.add_urdf(path, base_joint=base_joint)
    stripped.add_urdf(without_world_link(path), base_joint=base_joint)
    for plant in (replaced, stripped):
        plant.finalize()
    base = replaced.get_joint_by_name("base_link")
    assert base.type_name == {"planar": "planar", "floating": "quaternion_floating"}[base_joint]
    assert base.parent_body.index == 0 and not replaced.has_joint_named("world_joint")
    assert replaced.position_names() == stripped.position_names()
    assert replaced.position_names()[:base.num_positions] == [n for n in replaced.position_names()
                                                               if n.startswith("base_link_")]
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = replaced.integrate_positions(replaced.default_positions(), rng.normal(size=replaced.num_velocities()))
        np.testing.assert_allclose(replaced.calc_body_poses(q), stripped.calc_body_poses(q), atol=1e-14)
    welded = MultibodyPlant()
    welded.add_urdf(path)  # "fixed": the URDF's world joint as written
    welded.finalize()
    assert welded.get_joint_by_name("world_joint").type_name == "weld"
    assert welded.num_positions() == replaced.num_positions() - base.num_positions


def test_base_joint_choices_and_string_source():
    text = (FIXTURES / "mobile_arm.urdf").read_text()
    plant = MultibodyPlant()
    welded = plant.add_urdf(text, model_name="welded")
    on_plane = plant.add_urdf(text, model_name="on_plane", base_joint="planar")
    free = plant.add_urdf(text, model_name="free", base_joint="floating")
    kept = plant.add_urdf(text, model_name="kept", base_joint=None)
    with pytest.raises(MultibodyValueError, match="base_joint must be one of"):
        plant.add_urdf(text, model_name="bad", base_joint="ball")
    with pytest.raises(MultibodyValueError, match="pass model_name="):
        plant.add_urdf(text, model_name="welded")
    plant.finalize()
    kinds = {i: plant.get_inboard_joint(plant.get_body_by_name("base", i)).type_name
             for i in (welded, on_plane, free, kept)}
    assert kinds == {welded: "weld", on_plane: "planar", free: "quaternion_floating", kept: "weld"}
    assert plant.num_positions(welded) == 8 and plant.num_positions(on_plane) == 11
    assert plant.num_positions(free) == 15 and plant.num_velocities(free) == 14
    assert plant.get_model_instance_name(free) == "free"


def test_attach_to_a_frame_of_another_instance_with_offset():
    arm_text = (FIXTURES / "mobile_arm.urdf").read_text()
    plant = MultibodyPlant()
    plant.add_urdf(FIXTURES / "floating_world.urdf")
    X_PF = spatial.make_transform(spatial.rotation_x(0.5), [0.0, 0.1, 0.2])
    plant.add_urdf(arm_text, parent_frame=plant.get_body_by_name("rotor"), X_PF=X_PF)
    plant.finalize()
    rng = np.random.default_rng(0)
    q = plant.integrate_positions(plant.default_positions(), rng.normal(size=plant.num_velocities()))
    X = plant.calc_body_poses(q)
    rotor, base = plant.get_body_by_name("rotor").index, plant.get_body_by_name("base").index
    np.testing.assert_allclose(X[base], X[rotor] @ X_PF, atol=1e-14)


def test_mimic_on_fixed_joint_is_ignored_and_non_simple_transmissions_add_no_actuator():
    text = robot(LINKS + joint("f", "fixed", "a", "b", '<mimic joint="k"/>') + joint("k", "revolute", "a", "c")
                 + "<transmission name='t'><type>transmission_interface/DifferentialTransmission</type>"
                 "<joint name='k'/><actuator name='m'/></transmission>"
                 "<transmission name='u'><type>transmission_interface/SimpleTransmission</type>"
                 "<joint name='k'/></transmission>")
    plant = MultibodyPlant()
    with pytest.warns(URDFWarning) as record:
        plant.add_urdf(text)
    assert [str(w.message).split(": ignored ")[1].split(" (")[0] for w in record] == [
        "<mimic> on a fixed joint", "<transmission> of type transmission_interface/DifferentialTransmission"]
    plant.finalize()
    assert plant.get_joint_by_name("f").type_name == "weld"
    assert [plant.get_joint_actuator(i).name for i in range(plant.num_actuators())] == ["u"]


def test_parse_urdf_returns_the_validated_model():
    model = parse_urdf(FIXTURES / "mobile_arm.urdf")
    assert model.name == "mobile_arm" and model.root == "base"
    assert len(model.links) == 10 and len(model.joints) == 9
    elbow = model.joint("elbow")
    np.testing.assert_allclose(elbow.axis, np.array([1, 1, 0]) / math.sqrt(2))
    assert model.joint("finger_right_joint").mimic.joint == "finger_left_joint"


def test_unknown_names_list_near_matches(arm):
    with pytest.raises(UnknownNameError, match="did you mean 'elbow'") as error:
        arm.get_joint_by_name("elbw")
    assert error.value.near_matches[0] == "elbow"
    with pytest.raises(UnknownNameError, match="'finger_left'"):
        arm.get_body_by_name("finger_lft")
    with pytest.raises(UnknownNameError, match="'mobile_arm'"):
        arm.get_model_instance_by_name("mobile-arm")
    with pytest.raises(UnknownNameError, match="valid names are"):
        arm.get_frame_by_name("zzzzzz", "mobile_arm")
