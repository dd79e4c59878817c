"""Tests of the OrientationSensors and Markers setup API (SPEC 3.1) and of the goal on hand-computed cases
(SPEC 3.3, 9.4, 9.6): names, weights, observation orders, NaN, ignored slots, world-body sensors, queries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros_dofkit.core import spatial
from ros_dofkit.core.assembly import (
    Assembler,
    AssemblyIndexError,
    AssemblyStateError,
    Markers,
    OrientationSensors,
)
from ros_dofkit.core.multibody import MultibodyPlant

# Two links turning about z, then about x; link lengths 1 m along x.
TWO_LINK_URDF = """<robot name="two_link">
  <link name="base"/>
  <link name="link1"/>
  <link name="link2"/>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="link1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="revolute">
    <parent link="link1"/><child link="link2"/><origin xyz="1 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/>
  </joint>
</robot>"""


@pytest.fixture
def plant():
    plant = MultibodyPlant()
    plant.add_urdf(TWO_LINK_URDF)
    plant.finalize()
    return plant


def adopted(plant, condition, backend="compiled"):
    assembler = Assembler(plant, backend=backend)
    assembler.adopt_assembly_goal(condition)
    return assembler


# -- setup API ------------------------------------------------------------------------------------------------------
def test_add_osensor_names_indices_and_unnamed_default():
    osensors = OrientationSensors()
    assert osensors.add_osensor("  imu_a ", "link1", np.eye(3)) == 0
    assert osensors.add_osensor(None, "link1", np.eye(3)) == 1
    assert osensors.add_osensor("", "link2", np.eye(3), weight=2.0) == 2
    assert osensors.add_osensor("   ", 2, np.eye(3)) == 3
    assert osensors.get_num_osensors() == 4
    assert [osensors.get_osensor_name(i) for i in range(4)] == ["imu_a", "_UNNAMED_1", "_UNNAMED_2", "_UNNAMED_3"]
    assert osensors.get_osensor_ix("imu_a") == 0
    assert osensors.get_osensor_ix(" imu_a") == 0
    assert osensors.get_osensor_ix("nope") is None
    assert osensors.get_osensor_weight(2) == 2.0
    assert osensors.get_osensor_body(3) == 2
    np.testing.assert_array_equal(osensors.get_osensor_station(0), np.eye(3))


def test_duplicate_name_reports_the_existing_index():
    osensors = OrientationSensors()
    osensors.add_osensor("a", 1, np.eye(3))
    osensors.add_osensor("b", 1, np.eye(3))
    with pytest.raises(ValueError, match=r"'b'.*already in use.*1"):
        osensors.add_osensor(" b ", 1, np.eye(3))


@pytest.mark.parametrize("weight", [-1.0, math.nan, math.inf, "1", None])
def test_illegal_weight(weight):
    osensors = OrientationSensors()
    with pytest.raises(ValueError, match="illegal orientation sensor weight"):
        osensors.add_osensor("a", 1, np.eye(3), weight=weight)
    osensors.add_osensor("a", 1, np.eye(3))
    with pytest.raises(ValueError, match="illegal orientation sensor weight"):
        osensors.change_osensor_weight(0, weight)
    markers = Markers()
    with pytest.raises(ValueError, match="illegal marker weight"):
        markers.add_marker("m", 1, [0, 0, 0], weight=weight)


@pytest.mark.parametrize(
    "R", [np.diag([1.0, 1.0, -1.0]), 1.01 * np.eye(3), np.ones((3, 3)), np.eye(4), np.full((3, 3), np.nan)]
)
def test_R_BS_must_be_a_rotation(R):
    with pytest.raises(ValueError, match="rotation"):
        OrientationSensors().add_osensor("a", 1, R)


def test_marker_station_validation():
    with pytest.raises(ValueError, match="3 finite numbers"):
        Markers().add_marker("m", 1, [0, np.nan, 0])
    with pytest.raises(ValueError, match="3 finite numbers"):
        Markers().add_marker("m", 1, [0, 0])


def test_adding_a_sensor_clears_order_and_observations_and_uninitializes(plant):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", np.eye(3))
    osensors.define_observation_order(["a"])
    osensors.move_all_observations(np.eye(3)[None])
    assembler = adopted(plant, osensors)
    assembler.calc_current_goal()
    assert assembler.is_initialized()
    count = assembler.get_num_initializations()
    osensors.add_osensor("b", "link2", np.eye(3))
    assert not assembler.is_initialized()
    assert osensors.get_num_observations() == 0
    assembler.calc_current_goal()
    assert assembler.get_num_initializations() == count + 1
    # identity order set up at initialization
    assert osensors.get_num_observations() == 2
    assert np.all(np.isnan(osensors.get_all_observations()))


def test_observation_order_by_names_and_indices_with_ignored_slots():
    osensors = OrientationSensors()
    for name in ["a", "b", "c"]:
        osensors.add_osensor(name, 1, np.eye(3))
    osensors.define_observation_order(["c", "unknown", "", "a"])
    assert osensors.get_num_observations() == 4
    assert [osensors.get_osensor_ix_for_observation(ox) for ox in range(4)] == [2, None, None, 0]
    assert [osensors.has_osensor(ox) for ox in range(4)] == [True, False, False, True]
    assert osensors.get_observation_ix_for_osensor(0) == 3
    assert osensors.get_observation_ix_for_osensor(1) is None
    assert osensors.has_observation(2) and not osensors.has_observation(1)
    osensors.define_observation_order([1, 7, -1, 0])
    assert [osensors.get_osensor_ix_for_observation(ox) for ox in range(4)] == [1, None, None, 0]
    osensors.define_observation_order([])
    assert [osensors.get_osensor_ix_for_observation(ox) for ox in range(3)] == [0, 1, 2]
    assert np.all(np.isnan(osensors.get_all_observations()))
    with pytest.raises(ValueError, match=r"'a'.*two observations"):
        osensors.define_observation_order(["a", "b", 0])
    with pytest.raises(ValueError, match="string"):
        osensors.define_observation_order("abc")
    with pytest.raises(IndexError):
        osensors.get_osensor_ix_for_observation(3)
    with pytest.raises(IndexError):
        osensors.get_observation_ix_for_osensor(3)


def test_move_observations_checks():
    osensors = OrientationSensors()
    osensors.add_osensor("a", 1, np.eye(3))
    osensors.add_osensor("b", 1, np.eye(3))
    with pytest.raises(AssemblyStateError, match="no observations"):
        osensors.move_one_observation(0, np.eye(3))
    osensors.define_observation_order(["b", "a", "x"])
    with pytest.raises(ValueError, match=r"expected 3 observations"):
        osensors.move_all_observations(np.tile(np.eye(3), (2, 1, 1)))
    R = spatial.rotation_z(0.3)
    osensors.move_one_observation(1, R)
    np.testing.assert_array_equal(osensors.get_observation(1), R)
    assert np.all(np.isnan(osensors.get_observation(0)))
    with pytest.raises(AssemblyIndexError):
        osensors.move_one_observation(3, R)
    with pytest.raises(ValueError):
        osensors.move_one_observation(1, np.eye(2))
    with pytest.raises(ValueError):
        osensors.move_one_observation(True, R)


def test_get_osensors_on_body_requires_adoption_and_lists_active_sensors(plant):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link2", np.eye(3))
    osensors.add_osensor("b", "link1", np.eye(3))
    osensors.add_osensor("c", "link2", np.eye(3), weight=0.0)
    osensors.add_osensor("d", "link2", np.eye(3))
    osensors.add_osensor("g", 0, np.eye(3))  # on the world: ignored (SPEC 9.6)
    osensors.define_observation_order(["a", "b", "c", "d", "g"])
    with pytest.raises(AssemblyStateError, match="not been adopted"):
        osensors.get_osensors_on_body("link2")
    assembler = adopted(plant, osensors)
    assert osensors.get_osensors_on_body("link2") == [0, 3]
    assert osensors.get_osensors_on_body(plant.get_body_by_name("link1")) == [1]
    assert osensors.get_osensors_on_body(0) == []
    assert assembler.is_initialized()


def test_body_by_name_resolution_needs_a_plant(plant):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link2", np.eye(3))
    with pytest.raises(AssemblyStateError, match="resolved once an Assembler"):
        osensors.get_osensor_body(0)
    adopted(plant, osensors)
    assert osensors.get_osensor_body(0) == plant.get_body_by_name("link2").index


def test_change_weight_to_or_from_zero_uninitializes(plant):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", np.eye(3))
    assembler = adopted(plant, osensors)
    assembler.calc_current_goal()
    osensors.change_osensor_weight(0, 3.0)
    assert assembler.is_initialized()
    osensors.change_osensor_weight(0, 0.0)
    assert not assembler.is_initialized()
    assembler.calc_current_goal()
    osensors.change_osensor_weight(0, 1.0)
    assert not assembler.is_initialized()


def test_condition_belongs_to_one_assembler(plant):
    osensors = OrientationSensors()
    adopted(plant, osensors)
    with pytest.raises(AssemblyStateError, match="another Assembler"):
        adopted(plant, osensors)


# -- the goal on hand-computed cases --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_one_sensor_ninety_degrees_gives_pi_squared_over_eight(plant, backend):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", np.eye(3))
    assembler = adopted(plant, osensors, backend)
    osensors.move_all_observations(spatial.rotation_x(np.pi / 2)[None])
    q = np.zeros(2)
    assert osensors.calc_goal(q) == pytest.approx(np.pi**2 / 8, rel=1e-14)
    assert assembler.calc_current_goal() == pytest.approx(np.pi**2 / 8, rel=1e-14)
    assert osensors.find_current_osensor_error(0) == pytest.approx(np.pi / 2, rel=1e-14)
    np.testing.assert_allclose(osensors.find_current_osensor_orientation(0), np.eye(3), atol=1e-15)
    # At q1 = 0.5 about z the sensor is rotated; the error angle is the angle of R_z(0.5)ᵀ R_x(π/2).
    assembler.set_positions([0.5, 0.0])
    expected = np.arccos((np.trace(spatial.rotation_z(0.5).T @ spatial.rotation_x(np.pi / 2)) - 1) / 2)
    assert osensors.find_current_osensor_error(0) == pytest.approx(expected, rel=1e-13)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_weighted_mean_nan_ignored_slots_and_world_sensor(plant, backend):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", np.eye(3), weight=1.0)
    osensors.add_osensor("b", "link2", np.eye(3), weight=3.0)
    osensors.add_osensor("c", "link2", np.eye(3), weight=5.0)
    osensors.add_osensor("world", 0, np.eye(3), weight=7.0)
    osensors.define_observation_order(["ignored", "b", "a", "c", "world"])
    assembler = adopted(plant, osensors, backend)
    nan = np.full((3, 3), np.nan)
    observations = np.array([
        spatial.rotation_y(1.0),          # ignored slot
        spatial.rotation_z(np.pi / 4),    # b: π/4
        spatial.rotation_x(np.pi / 2),    # a: π/2
        nan,                              # c: unobserved this frame
        spatial.rotation_x(2.0),          # world sensor: ignored
    ])
    osensors.move_all_observations(observations)
    expected = (1.0 * (np.pi / 2) ** 2 + 3.0 * (np.pi / 4) ** 2) / (2 * 4.0)
    assert expected == pytest.approx(7 * np.pi**2 / 128)
    assert assembler.calc_current_goal() == pytest.approx(expected, rel=1e-14)
    assert osensors.calc_goal(np.zeros(2)) == pytest.approx(expected, rel=1e-14)
    assert osensors.find_current_osensor_error(2) == 0.0  # NaN observation
    np.testing.assert_allclose(osensors.find_current_osensor_errors(), [np.pi / 2, np.pi / 4, 0.0, 2.0], atol=1e-14)
    assert osensors.get_osensors_on_body(0) == []
    # a NaN in one entry is enough to make an observation unobserved
    partly = spatial.rotation_x(0.1)
    partly[1, 2] = np.nan
    osensors.move_one_observation(2, partly)
    expected_b_only = (np.pi / 4) ** 2 / 2
    assert assembler.calc_current_goal() == pytest.approx(expected_b_only, rel=1e-14)
    # condition weight scales the objective, not the condition's goal
    assembler.set_assembly_condition_weight(osensors, 2.0)
    assert assembler.calc_current_goal() == pytest.approx(2 * expected_b_only, rel=1e-14)
    assert osensors.calc_goal(np.zeros(2)) == pytest.approx(expected_b_only, rel=1e-14)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_nothing_contributing_gives_zero_goal_and_zero_gradient(plant, backend):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", np.eye(3))
    osensors.add_osensor("b", "link2", np.eye(3), weight=0.0)
    assembler = adopted(plant, osensors, backend)
    q = np.array([0.3, -0.2])
    # Before any observation everything is NaN.
    assert osensors.calc_goal(q) == 0.0
    np.testing.assert_array_equal(osensors.calc_goal_gradient(q), np.zeros(2))
    assert assembler.calc_current_goal() == 0.0
    assert assembler.nothing_observed()
    assert assembler.assemble() == 0.0
    osensors.move_all_observations(np.array([np.full((3, 3), np.nan), np.eye(3)]))  # only the zero-weight one
    assert osensors.calc_goal(q) == 0.0
    assert assembler.track(0.1) == 0.0
    assert assembler.nothing_observed()
    np.testing.assert_array_equal(assembler.get_positions(), np.zeros(2))
    # no sensors at all
    empty = OrientationSensors("empty")
    adopted(plant, empty, backend)
    assert empty.calc_goal(q) == 0.0
    np.testing.assert_array_equal(empty.calc_goal_gradient(q, wrt="v"), np.zeros(2))
    assert empty.calc_errors(q).shape == (0,)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_markers_goal_errors_and_queries(plant, backend):
    markers = Markers()
    markers.add_marker("tip", "link2", [0.0, 1.0, 0.0], weight=1.0)
    markers.add_marker("elbow", "link1", [1.0, 0.0, 0.0], weight=3.0)
    assembler = adopted(plant, markers, backend)
    markers.move_all_observations(np.array([[1.0, 1.0, 0.5], [1.0, 0.0, 0.0]]))
    q = np.zeros(2)
    np.testing.assert_allclose(markers.find_current_marker_location(0), [1.0, 1.0, 0.0], atol=1e-15)
    assert markers.find_current_marker_error(0) == pytest.approx(0.5)
    assert markers.find_current_marker_error_squared(0) == pytest.approx(0.25)
    np.testing.assert_allclose(markers.find_current_marker_errors(), [0.5, 0.0], atol=1e-15)
    assert markers.calc_goal(q) == pytest.approx(1.0 * 0.25 / (2 * 4.0))
    assert assembler.calc_current_goal() == pytest.approx(0.25 / 8)
    # active order: grouped by body index (elbow on link1 first), then by marker index
    np.testing.assert_allclose(markers.calc_errors(q), [0, 0, 0, 0, 0, -0.5], atol=1e-15)
    assert markers.get_marker_ix("tip") == 0 and markers.get_marker_ix("x") is None
    assert markers.get_marker_name(1) == "elbow"
    assert markers.get_marker_weight(1) == 3.0
    np.testing.assert_array_equal(markers.get_marker_station(0), [0.0, 1.0, 0.0])
    assert markers.get_markers_on_body("link2") == [0]
    assert markers.get_observation_ix_for_marker(1) == 1 and markers.has_marker(0)
    markers.move_one_observation(0, [np.nan, 0, 0])
    assert markers.find_current_marker_error(0) == 0.0
    assert assembler.calc_current_goal() == pytest.approx(0.0)


def test_errors_are_weighted_rotation_vectors_in_ground(plant):
    osensors = OrientationSensors()
    osensors.add_osensor("a", "link1", spatial.rotation_y(0.2), weight=4.0)
    osensors.add_osensor("b", "link2", np.eye(3))
    adopted(plant, osensors)
    R_GO = spatial.rotation_z(0.7) @ spatial.rotation_y(0.2)
    osensors.move_all_observations(np.array([R_GO, np.full((3, 3), np.nan)]))
    q = np.array([0.2, 0.0])
    errors = osensors.calc_errors(q)
    # Sensor a sits at R_z(0.2) R_y(0.2); the observation is R_z(0.7) R_y(0.2): 0.5 rad about ground z.
    np.testing.assert_allclose(errors[:3], 2.0 * np.array([0.0, 0.0, 0.5]), atol=1e-14)
    np.testing.assert_array_equal(errors[3:], np.zeros(3))  # unobserved: zero rows
    assert osensors.num_errors() == 6


@settings(max_examples=60, deadline=None)
@given(
    rotvec=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    mount=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    q1=st.floats(-1.0, 1.0),
    q2=st.floats(-2.0, 2.0),
)
def test_goal_is_half_the_squared_angle_from_the_trace_formula(rotvec, mount, q1, q2):
    """Property: for one sensor, goal = a²/2 with a = arccos((tr(R_GSᵀ R_GO) − 1)/2), computed independently."""
    plant = _TWO_LINK_PLANT
    osensors = OrientationSensors()
    R_BS = spatial.rotvec_to_matrix(np.array(mount))
    osensors.add_osensor("s", "link2", R_BS)
    Assembler(plant).adopt_assembly_goal(osensors)
    R_GO = spatial.rotvec_to_matrix(np.array(rotvec))
    osensors.move_all_observations(R_GO[None])
    q = np.array([q1, q2])
    R_GS = plant.calc_body_poses(q)[plant.get_body_by_name("link2").index, :3, :3] @ R_BS
    a = np.arccos(np.clip((np.trace(R_GS.T @ R_GO) - 1) / 2, -1, 1))
    assert osensors.calc_goal(q) == pytest.approx(a**2 / 2, abs=1e-7)


_TWO_LINK_PLANT = MultibodyPlant()
_TWO_LINK_PLANT.add_urdf(TWO_LINK_URDF)
_TWO_LINK_PLANT.finalize()
