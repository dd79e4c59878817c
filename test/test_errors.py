"""Tests of ros_dofkit.core.errors: one class per error name across the core. An unknown name raised by the plant,
the state conventions, the estimator's configuration or the Estimator is caught by
``ros_dofkit.core.multibody.UnknownNameError`` and keeps the bases its callers catch it by."""

from __future__ import annotations

import pytest

import ros_dofkit.core.estimator as estimator_package
import ros_dofkit.core.estimator.config as config_module
import ros_dofkit.core.multibody as multibody
import ros_dofkit.core.state as state
import ros_dofkit.core.state.errors as state_errors
from ros_dofkit.core import errors
from ros_dofkit.core.estimator import EstimatorConfig, EstimatorConfigError, ImuConfig
from ros_dofkit.core.estimator.estimator import Estimator
from ros_dofkit.core.estimator.robot import ModelSpec, build_plant
from ros_dofkit.core.state.plant_state import require_finalized, resolve_model_instance


def test_each_name_is_one_class():
    for module in (multibody, state, state_errors, estimator_package, config_module):
        assert module.UnknownNameError is errors.UnknownNameError, module.__name__
    for module in (multibody, state, state_errors):
        assert module.PlantNotFinalizedError is errors.PlantNotFinalizedError, module.__name__
    assert estimator_package.EstimatorConfigError is config_module.EstimatorConfigError is errors.EstimatorConfigError
    assert multibody.MultibodyValueError is errors.MultibodyValueError


@pytest.fixture(scope="module")
def plant():
    return build_plant([ModelSpec("arm7.urdf", "arm")])


def raised(call):
    with pytest.raises(multibody.UnknownNameError) as info:  # the plant's class catches every one
        call()
    return info.value


def test_unknown_names_from_every_core_package_are_caught_as_the_plants(plant):
    from_plant = raised(lambda: plant.get_body_by_name("arm_lnk3"))
    from_state = raised(lambda: resolve_model_instance(plant, "armm"))
    from_config = raised(lambda: EstimatorConfig(imus=(ImuConfig("a", "arm_link3"),), heading_reference="b"))
    from_estimator = raised(lambda: Estimator(plant, EstimatorConfig(imus=(ImuConfig("a", "arm_lnk3"),))))
    for error in (from_plant, from_state, from_config, from_estimator):
        # The bases callers catch: the node and replay catch EstimatorConfigError ("cannot start"), plant users
        # MultibodyValueError or ValueError.
        for base in (EstimatorConfigError, multibody.MultibodyValueError, ValueError):
            assert isinstance(error, base), (error, base)
    assert from_plant.near_matches[0] == "arm_link3" and "did you mean 'arm_link3'" in str(from_plant)
    assert "'arm'" in str(from_state)
    assert "'a'" in str(from_config)
    assert "arm_link3" in str(from_estimator)


def test_plant_not_finalized_is_one_class():
    unfinished = multibody.MultibodyPlant()
    with pytest.raises(state.PlantNotFinalizedError, match="finalize"):
        unfinished.num_positions()
    with pytest.raises(multibody.PlantNotFinalizedError, match="finalize"):
        require_finalized(unfinished)
