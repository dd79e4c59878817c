"""Tests of ros_dofkit.core.state.joint_state_translator: plant <-> JointStateArrays and the floating base.

Plant: a floating Solo-12 and a fixed Panda (example-robot-data) plus a small planar-base "cart" URDF whose
<transmission> order (wrist, lift, shoulder) differs from its joint (q) order (lift, shoulder, wrist).
"""

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_models import urdf_path
from ros_dofkit.core.multibody import MultibodyPlant, QuaternionFloatingJoint
from ros_dofkit.core.spatial import make_transform, quat_to_matrix, rpy_to_matrix
from ros_dofkit.core.state import (
    BasePoseTwist,
    JointStateArrays,
    JointStateMessageError,
    JointStateTranslator,
    PlantNotFinalizedError,
    StateDimensionError,
    UnsupportedModelError,
)


def _transmission(joint: str, actuator: str) -> str:
    return (
        f'<transmission name="{joint}_trans"><type>transmission_interface/SimpleTransmission</type>'
        f'<joint name="{joint}"><hardwareInterface>hardware_interface/EffortJointInterface</hardwareInterface>'
        f'</joint><actuator name="{actuator}"><mechanicalReduction>1</mechanicalReduction></actuator></transmission>'
    )


CART_URDF = f"""<robot name="cart">
  <link name="chassis"/><link name="lift"/><link name="arm"/><link name="wrist"/><link name="finger"/>
  <link name="finger_twin"/>
  <joint name="lift_joint" type="prismatic"><parent link="chassis"/><child link="lift"/>
    <axis xyz="0 0 1"/><limit lower="0" upper="1" effort="200" velocity="0.5"/></joint>
  <joint name="shoulder" type="revolute"><parent link="lift"/><child link="arm"/>
    <origin xyz="0 0 0.2" rpy="0 0 0"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="2"/></joint>
  <joint name="wrist_joint" type="continuous"><parent link="arm"/><child link="wrist"/>
    <origin xyz="0.3 0 0" rpy="0 0 0"/><axis xyz="1 0 0"/></joint>
  <joint name="finger_joint" type="revolute"><parent link="wrist"/><child link="finger"/>
    <axis xyz="0 0 1"/><limit lower="0" upper="1" effort="5" velocity="1"/></joint>
  <joint name="finger_twin_joint" type="revolute"><parent link="wrist"/><child link="finger_twin"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="0" effort="5" velocity="1"/>
    <mimic joint="finger_joint" multiplier="-1" offset="0"/></joint>
  {_transmission("wrist_joint", "wrist_motor")}
  {_transmission("lift_joint", "lift_motor")}
  {_transmission("shoulder", "shoulder_motor")}
</robot>"""

CART_NAMES = ["chassis_x", "chassis_y", "chassis_qz", "lift_joint", "shoulder", "wrist_joint", "finger_joint"]


@cache
def _module_plant_and_translator():
    plant = MultibodyPlant()
    plant.add_urdf(str(urdf_path("solo12")), base_joint="floating")
    plant.add_urdf(str(urdf_path("panda")), base_joint="fixed")
    plant.add_urdf(CART_URDF, base_joint="planar")
    plant.finalize()
    return plant, JointStateTranslator(plant)


@pytest.fixture(scope="module")
def plant():
    return _module_plant_and_translator()[0]


@pytest.fixture(scope="module")
def translator():
    return _module_plant_and_translator()[1]


def random_q_v(plant, rng):
    q = plant.default_positions() + rng.normal(scale=0.4, size=plant.num_positions())
    for joint in plant.floating_base_joints():
        s = joint.position_start
        q[s : s + 4] /= np.linalg.norm(q[s : s + 4])
    return q, rng.normal(size=plant.num_velocities())


def non_floating_q_indices(plant):
    floating = set()
    for joint in plant.floating_base_joints():
        floating.update(range(joint.position_start, joint.position_start + 7))
    return [i for i in range(plant.num_positions()) if i not in floating]


def test_initialize_message_lists_articulated_coordinates_in_q_order(plant, translator):
    message = translator.initialize_message()
    expected_q = non_floating_q_indices(plant)
    assert list(translator.q_indices) == expected_q
    assert list(message.name) == [plant.position_names()[i] for i in expected_q]
    assert list(message.name[-7:]) == CART_NAMES  # planar coordinate names; the mimic joint is not listed
    assert "finger_twin_joint" not in message.name
    assert not any(name.startswith("base_link") for name in message.name)  # the floating base is not in JointState
    assert len(message) == 12 + 8 + 7
    for field in (message.position, message.velocity, message.effort):
        np.testing.assert_array_equal(field, np.zeros(27))
    # planar velocities line up with their positions: chassis_qz <-> chassis_wz
    planar = plant.get_joint_by_name("chassis")
    slot = message.name.index("chassis_qz")
    assert translator.q_indices[slot] == planar.position_start + 2
    assert translator.v_indices[slot] == planar.velocity_start + 2
    assert plant.velocity_names()[translator.v_indices[slot]] == "chassis_wz"


def test_full_round_trip(plant, translator):
    rng = np.random.default_rng(0)
    q, v = random_q_v(plant, rng)
    message = translator.encode_kinematics(q, v)
    np.testing.assert_array_equal(message.position, q[translator.q_indices])
    np.testing.assert_array_equal(message.velocity, v[translator.v_indices])
    q0, v0 = random_q_v(plant, rng)
    q_dec, v_dec = translator.decode_kinematics(message, q0, v0)
    idx_q, idx_v = translator.q_indices, translator.v_indices
    np.testing.assert_array_equal(q_dec[idx_q], q[idx_q])
    np.testing.assert_array_equal(v_dec[idx_v], v[idx_v])
    # floating-base coordinates are not in the message: they keep the values passed in
    np.testing.assert_array_equal(q_dec[:7], q0[:7])
    np.testing.assert_array_equal(v_dec[:6], v0[:6])
    # decoding does not modify its inputs
    assert not np.array_equal(q0[idx_q], q[idx_q])


def test_partial_message_leaves_missing_joints_unchanged(plant, translator):
    q0, v0 = random_q_v(plant, np.random.default_rng(1))
    message = JointStateArrays(["shoulder", "FL_KFE"], [0.25, -1.5], [2.0, 3.0])
    q, v = translator.decode_kinematics(message, q0, v0)
    shoulder = plant.get_joint_by_name("shoulder")
    knee = plant.get_joint_by_name("FL_KFE")
    assert q[shoulder.position_start] == 0.25 and v[shoulder.velocity_start] == 2.0
    assert q[knee.position_start] == -1.5 and v[knee.velocity_start] == 3.0
    changed_q = np.flatnonzero(q != q0)
    assert set(changed_q) == {shoulder.position_start, knee.position_start}
    assert set(np.flatnonzero(v != v0)) == {shoulder.velocity_start, knee.velocity_start}


def test_reordered_message_decodes_like_the_ordered_one(plant, translator):
    rng = np.random.default_rng(2)
    q, v = random_q_v(plant, rng)
    ordered = translator.encode_kinematics(q, v)
    permutation = rng.permutation(len(ordered))
    shuffled = JointStateArrays(
        [ordered.name[i] for i in permutation], ordered.position[permutation], ordered.velocity[permutation]
    )
    q0, v0 = np.zeros_like(q), np.zeros_like(v)
    for a, b in zip(
        translator.decode_kinematics(ordered, q0, v0), translator.decode_kinematics(shuffled, q0, v0), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    # encoding into the shuffled message writes each name's own value
    re_encoded = translator.encode_kinematics(q, v, shuffled.replace(position=np.zeros(len(shuffled))))
    np.testing.assert_array_equal(re_encoded.position, shuffled.position)


def test_over_complete_message_unknown_names_ignored_and_untouched(plant, translator):
    q0, v0 = random_q_v(plant, np.random.default_rng(3))
    message = JointStateArrays(["not_a_joint", "wrist_joint", "gripper_left"], [9.0, 0.5, 7.0], [8.0, -0.5, 6.0])
    q, v = translator.decode_kinematics(message, q0, v0)
    wrist = plant.get_joint_by_name("wrist_joint")
    assert set(np.flatnonzero(q != q0)) == {wrist.position_start}
    assert q[wrist.position_start] == 0.5 and v[wrist.velocity_start] == -0.5
    # encode: unknown entries keep their values (Drake's translator test), known ones are overwritten
    encoded = translator.encode_kinematics(q0, v0, message)
    np.testing.assert_array_equal(encoded.position, [9.0, q0[wrist.position_start], 7.0])
    np.testing.assert_array_equal(encoded.velocity, [8.0, v0[wrist.velocity_start], 6.0])
    np.testing.assert_array_equal(message.position, [9.0, 0.5, 7.0])  # the input message is not modified


def test_empty_arrays_mean_not_given_and_nan_means_no_value(plant, translator):
    q0, v0 = random_q_v(plant, np.random.default_rng(4))
    lift = plant.get_joint_by_name("lift_joint")
    shoulder = plant.get_joint_by_name("shoulder")
    # positions only: velocities untouched
    q, v = translator.decode_kinematics(JointStateArrays(["lift_joint"], [0.4]), q0, v0)
    assert q[lift.position_start] == 0.4
    np.testing.assert_array_equal(v, v0)
    # velocities only (empty position): positions untouched
    q, v = translator.decode_kinematics(JointStateArrays(["lift_joint"], [], [0.1]), q0, v0)
    np.testing.assert_array_equal(q, q0)
    assert v[lift.velocity_start] == 0.1
    # NaN = no value for that joint (ros2_control's convention for a missing interface)
    message = JointStateArrays(["lift_joint", "shoulder"], [np.nan, 0.3], [0.2, np.nan])
    q, v = translator.decode_kinematics(message, q0, v0)
    assert q[lift.position_start] == q0[lift.position_start] and q[shoulder.position_start] == 0.3
    assert v[lift.velocity_start] == 0.2 and v[shoulder.velocity_start] == v0[shoulder.velocity_start]
    # an empty message is valid and changes nothing
    for a, b in zip(translator.decode_kinematics(JointStateArrays([]), q0, v0), (q0, v0), strict=True):
        np.testing.assert_array_equal(a, b)
    # encoding positions only into a message with empty arrays fills position, leaves velocity empty
    encoded = translator.encode_kinematics(q0, None, JointStateArrays(["shoulder", "unknown"]))
    np.testing.assert_array_equal(encoded.position[:1], q0[shoulder.position_start])
    assert np.isnan(encoded.position[1])
    assert encoded.velocity.size == 0


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        ({"name": ["a", "b"], "position": [1.0]}, "position has 1 entries but name has 2"),
        (
            {"name": ["a", "b"], "position": [1.0, 2.0], "velocity": [1.0, 2.0, 3.0]},
            "velocity has 3 entries but name has 2",
        ),
        (
            {"name": ["a"], "position": [1.0], "velocity": [1.0], "effort": [1.0, 2.0]},
            "effort has 2 entries but name has 1",
        ),
        ({"name": [], "position": [1.0]}, "position has 1 entries but name has 0"),
        ({"name": ["a", "b", "a"], "position": [1.0, 2.0, 3.0]}, r"duplicated entries \['a'\]"),
        ({"name": ["a", 3], "position": [1.0, 2.0]}, r"name\[1\]: expected a str, got int"),
        ({"name": "shoulder", "position": [1.0]}, "expected a sequence of strings"),
        ({"name": ["a"], "position": [np.inf]}, r"position\[0\] is inf"),
        ({"name": ["a"], "velocity": [[1.0]]}, "expected a 1-D array"),
        ({"name": ["a"], "effort": ["x"]}, "effort: expected numbers"),
    ],
)
def test_rejected_message_shapes(fields, pattern):
    with pytest.raises(JointStateMessageError, match=pattern):
        JointStateArrays(**fields)


def test_a_rejected_replacement_leaves_the_message_alone(translator):
    message = translator.initialize_message()
    with pytest.raises(JointStateMessageError, match="velocity has 2 entries"):
        message.replace(velocity=[1.0, 2.0])
    with pytest.raises(AttributeError):
        message.position = np.ones(len(message))
    with pytest.raises(ValueError):
        message.position[0] = 1.0  # read-only array
    assert message == translator.initialize_message()


def test_effort_in_actuator_order_differs_from_q_order(plant, translator):
    actuated_joints = [plant.get_joint_actuator(i).joint.name for i in range(plant.num_actuators())]
    assert actuated_joints == ["wrist_joint", "lift_joint", "shoulder"]  # transmission order, not q order
    assert translator.actuated_names() == ("wrist_joint", "lift_joint", "shoulder")
    tau = np.array([1.0, 2.0, 3.0])
    message = translator.encode_effort(tau)
    effort = dict(zip(message.name, message.effort, strict=True))
    assert (effort["lift_joint"], effort["shoulder"], effort["wrist_joint"]) == (2.0, 3.0, 1.0)
    assert effort["finger_joint"] == 0.0 and effort["FL_HAA"] == 0.0  # unactuated: untouched
    np.testing.assert_array_equal(translator.decode_effort(message, np.zeros(3)), tau)
    partial = JointStateArrays(["shoulder", "finger_joint", "nobody"], effort=[-4.0, 99.0, 98.0])
    np.testing.assert_array_equal(translator.decode_effort(partial, tau), [1.0, 2.0, -4.0])
    no_effort = JointStateArrays(["shoulder"], [0.1])
    np.testing.assert_array_equal(translator.decode_effort(no_effort, tau), tau)
    encoded = translator.encode_effort(tau, JointStateArrays(["finger_joint", "lift_joint"], [0.0, 0.0]))
    assert np.isnan(encoded.effort[0]) and encoded.effort[1] == 2.0
    with pytest.raises(StateDimensionError, match=r"tau \(actuator order\): expected shape \(3,\)"):
        translator.encode_effort(np.zeros(7))


def test_plant_vector_sizes_are_checked(plant, translator):
    nq, nv = plant.num_positions(), plant.num_velocities()
    with pytest.raises(StateDimensionError, match=f"expected shape \\({nq},\\)"):
        translator.encode_kinematics(np.zeros(nq - 1))
    with pytest.raises(StateDimensionError, match=f"v: expected shape \\({nv},\\)"):
        translator.decode_kinematics(translator.initialize_message(), np.zeros(nq), np.zeros(nq))
    with pytest.raises(TypeError, match="JointStateArrays"):
        translator.decode_kinematics({"name": []}, np.zeros(nq), np.zeros(nv))


def base_truth(plant, q, v, body):
    X_WB = plant.calc_body_poses(q)[..., body.index, :, :]
    J = plant.calc_jacobian(q, body)  # rows [w_WB_W; v_WBo_W]
    V = np.einsum("...ij,...j->...i", J, v)
    return X_WB, V[..., :3], V[..., 3:]


def test_floating_base_pose_and_twist_match_plant_kinematics(plant, translator):
    rng = np.random.default_rng(5)
    base = plant.floating_base_joints()[0].child_body
    q, v = random_q_v(plant, rng)
    pose = translator.encode_base(q, v)  # the only floating instance is chosen by default
    X_WB, w_W, v_W = base_truth(plant, q, v, base)
    np.testing.assert_allclose(pose.X_WB, X_WB, atol=1e-12)
    np.testing.assert_allclose(pose.w_WB_W, w_W, atol=1e-12)
    np.testing.assert_allclose(pose.v_WBo_W, v_W, atol=1e-12)
    q_back, v_back = translator.decode_base(pose, np.zeros_like(q), np.zeros_like(v))
    np.testing.assert_allclose(quat_to_matrix(q_back[:4]), quat_to_matrix(q[:4]), atol=1e-12)
    np.testing.assert_allclose(q_back[4:7], q[4:7], atol=1e-12)
    np.testing.assert_allclose(v_back[:6], v[:6], atol=1e-12)
    np.testing.assert_array_equal(q_back[7:], 0.0)


def offset_floating_plant():
    """A free body whose floating joint frames are not the world / body frames (X_PF and X_CM not identity)."""
    plant = MultibodyPlant()
    instance = plant.add_model_instance("drone")
    body = plant.add_body("drone_base", instance)
    F = plant.add_frame("launch_pad", plant.get_body(0), make_transform(rpy_to_matrix([0.2, -0.1, 0.9]), [1, 2, 0.5]))
    M = plant.add_frame("gps_mount", body, make_transform(rpy_to_matrix([0.0, 0.4, -0.3]), [0.1, -0.05, 0.2]))
    plant.add_joint(QuaternionFloatingJoint("drone_free", F, M))
    plant.finalize()
    return plant, body


def test_floating_base_with_offset_joint_frames_batched():
    plant, body = offset_floating_plant()
    translator = JointStateTranslator(plant)
    assert translator.initialize_message().name == ()
    rng = np.random.default_rng(6)
    q = rng.normal(size=(5, 7))
    q[:, :4] /= np.linalg.norm(q[:, :4], axis=-1, keepdims=True)
    v = rng.normal(size=(5, 6))
    pose = translator.encode_base(q, v, "drone")
    X_WB, w_W, v_W = base_truth(plant, q, v, body)
    np.testing.assert_allclose(pose.X_WB, X_WB, atol=1e-12)
    np.testing.assert_allclose(pose.w_WB_W, w_W, atol=1e-12)
    np.testing.assert_allclose(pose.v_WBo_W, v_W, atol=1e-12)
    q_back, v_back = translator.decode_base(pose, np.zeros(7), np.zeros(6), "drone")
    assert q_back.shape == (5, 7)
    np.testing.assert_allclose(quat_to_matrix(q_back[:, :4]), quat_to_matrix(q[:, :4]), atol=1e-12)
    np.testing.assert_allclose(q_back[:, 4:], q[:, 4:], atol=1e-12)
    np.testing.assert_allclose(v_back, v, atol=1e-12)
    # through the ROS views: Odometry twist in the child frame and back
    position, quat_xyzw = pose.ros_pose()
    linear_B, angular_B = pose.child_twist()
    again = BasePoseTwist.from_ros(position, quat_xyzw, linear_B, angular_B, twist_frame="child")
    np.testing.assert_allclose(again.base_velocities, pose.base_velocities, atol=1e-12)
    R_WB = X_WB[:, :3, :3]
    np.testing.assert_allclose(linear_B, np.einsum("bji,bj->bi", R_WB, v_W), atol=1e-12)


def test_base_requests_are_checked(plant, translator):
    q, v = plant.default_positions(), np.zeros(plant.num_velocities())
    with pytest.raises(UnsupportedModelError, match="'cart' has no floating base"):
        translator.encode_base(q, v, "cart")
    cart_only = JointStateTranslator(plant, "cart")
    assert list(cart_only.names) == CART_NAMES
    with pytest.raises(UnsupportedModelError, match="found \\[\\]"):
        cart_only.encode_base(q, v)
    with pytest.raises(UnsupportedModelError, match="not translated here"):
        cart_only.encode_base(q, v, "solo")
    pose = translator.encode_base(q)  # default zero velocity
    np.testing.assert_array_equal(pose.base_velocities, np.zeros(6))


def test_constructor_checks():
    unfinished = MultibodyPlant()
    unfinished.add_urdf(CART_URDF)
    with pytest.raises(PlantNotFinalizedError):
        JointStateTranslator(unfinished)

    empty = MultibodyPlant()
    empty.add_model_instance("nothing")
    empty.finalize()
    with pytest.raises(UnsupportedModelError, match="own no body other than the world"):
        JointStateTranslator(empty)

    twins = MultibodyPlant()
    twins.add_urdf(CART_URDF, model_name="left")
    twins.add_urdf(CART_URDF, model_name="right")
    twins.finalize()
    with pytest.raises(UnsupportedModelError, match="one translator per model instance"):
        JointStateTranslator(twins)
    assert list(JointStateTranslator(twins, ["right"]).names) == CART_NAMES[3:]  # welded: no planar base
    with pytest.raises(UnsupportedModelError, match="distinct"):
        JointStateTranslator(twins, ["left", 1])

    doubled = MultibodyPlant()
    doubled.add_urdf(CART_URDF)
    doubled.add_joint_actuator("second_wrist_motor", "wrist_joint")
    doubled.finalize()
    with pytest.raises(UnsupportedModelError, match="'wrist_joint' has two actuators"):
        JointStateTranslator(doubled)

    chain = MultibodyPlant()
    instance = chain.add_model_instance("chain")
    a = chain.add_body("a", instance)
    b = chain.add_body("b", instance)
    chain.add_joint(QuaternionFloatingJoint("free_a", chain.get_body(0).body_frame, a.body_frame))
    chain.add_joint(QuaternionFloatingJoint("free_b", a.body_frame, b.body_frame))
    chain.finalize()
    with pytest.raises(UnsupportedModelError, match="2 quaternion floating joints"):
        JointStateTranslator(chain)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_decode_matches_a_dictionary_model_of_the_rules(data):
    """Random partial, shuffled, over-complete messages with NaN entries, against a per-name dictionary model."""
    plant, translator = _module_plant_and_translator()
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    names = list(translator.names)
    chosen = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    unknown = data.draw(st.lists(st.sampled_from(["ghost", "tail", "FL_HAA_x", "panda"]), unique=True))
    message_names = chosen + unknown
    order = rng.permutation(len(message_names))
    message_names = [message_names[i] for i in order]
    n = len(message_names)
    position = rng.normal(size=n) if data.draw(st.booleans()) else np.zeros(0)
    velocity = rng.normal(size=n) if data.draw(st.booleans()) else np.zeros(0)
    for array in (position, velocity):
        if array.size:
            array[rng.random(n) < 0.2] = np.nan
    message = JointStateArrays(message_names, position, velocity)
    q0, v0 = random_q_v(plant, rng)

    expected_q, expected_v = q0.copy(), v0.copy()
    q_of = dict(zip(translator.names, translator.q_indices, strict=True))
    v_of = dict(zip(translator.names, translator.v_indices, strict=True))
    for i, name in enumerate(message_names):
        if name not in q_of:
            continue
        if position.size and not np.isnan(position[i]):
            expected_q[q_of[name]] = position[i]
        if velocity.size and not np.isnan(velocity[i]):
            expected_v[v_of[name]] = velocity[i]
    q, v = translator.decode_kinematics(message, q0, v0)
    np.testing.assert_array_equal(q, expected_q)
    np.testing.assert_array_equal(v, expected_v)
    # encoding the decoded state back into the same message reproduces every known, given entry
    encoded = translator.encode_kinematics(q, v, message)
    for i, name in enumerate(message_names):
        if name in q_of:
            assert encoded.position[i] == q[q_of[name]] and encoded.velocity[i] == v[v_of[name]]
        else:  # unknown names keep their values; an empty (not given) array was filled with NaN
            for encoded_array, original in ((encoded.position, position), (encoded.velocity, velocity)):
                expected = original[i] if original.size else np.nan
                assert np.array_equal(encoded_array[i], expected, equal_nan=True)


def test_encode_base_returns_the_w_nonnegative_quaternion(plant, translator):
    """doc/architecture.md, Drake conventions 3: q keeps the sign it was given; encode_base / decode_base give
    w >= 0."""
    joint = plant.floating_base_joints()[0]
    s = joint.position_start
    q, _ = random_q_v(plant, np.random.default_rng(9))
    quat = np.array([-0.5, 0.5, -0.5, 0.5])  # w < 0; its negative is the same rotation
    q[s : s + 4] = quat
    pose = translator.encode_base(q)
    np.testing.assert_allclose(pose.quat_WB, -quat, atol=1e-15)  # the base body is the joint's M frame here
    q_back, _ = translator.decode_base(pose, q, np.zeros(plant.num_velocities()))
    np.testing.assert_allclose(q_back[s : s + 4], -quat, atol=1e-15)
    np.testing.assert_allclose(plant.calc_body_poses(q_back), plant.calc_body_poses(q), atol=1e-14)
    quat_drake = q[s : s + 4]  # what a Drake plant holds for the same state: the recipe flips back to its hemisphere
    mapped = pose.quat_WB if pose.quat_WB @ quat_drake >= 0 else -pose.quat_WB
    np.testing.assert_allclose(mapped, quat_drake, atol=1e-15)
