"""The robot the estimator runs on: one model instance per URDF, each with its base joint and parent frame.

You are in the ROS-free estimator core. The node takes the robot either from ``robot_description`` (one URDF
string, as robot_state_publisher) or from a list of URDF files (one model instance each, as dair_pll's
MultibodyPlantDiagram); offline replay uses the same :func:`build_plant`. Relative URDF paths are looked up in
the shipped models directory (``ros_dofkit/models``) when they do not exist relative to the working directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ros_dofkit.core.estimator.config import EstimatorConfigError
from ros_dofkit.core.multibody import MultibodyPlant

#: Base joints a model instance can be attached with (plant.add_urdf's ``base_joint``); "urdf" keeps the URDF's.
BASE_JOINTS = ("fixed", "planar", "floating", "urdf")

#: Directory of the URDF models shipped with the package.
MODELS_DIR = Path(__file__).resolve().parents[2] / "models"


def resolve_urdf_path(path: str) -> Path:
    """An existing URDF file for ``path``: as given, else inside :data:`MODELS_DIR`.

    Raises :class:`EstimatorConfigError` naming both places and the shipped models when neither exists.
    """
    candidate = Path(path).expanduser()
    if candidate.is_file():
        return candidate
    shipped = MODELS_DIR / path
    if not candidate.is_absolute() and shipped.is_file():
        return shipped
    available = sorted(p.name for p in MODELS_DIR.glob("*.urdf"))
    raise EstimatorConfigError(
        f"URDF file {path!r} not found (looked at {candidate} and {shipped}); shipped models are {available}"
    )


@dataclass(frozen=True)
class ModelSpec:
    """One model instance: ``urdf`` is a file path or an XML string (starting with "<").

    ``name`` defaults to the URDF robot name; ``base_joint`` is one of :data:`BASE_JOINTS`; ``parent_frame`` is
    the frame the root link attaches to: "world", a frame of an instance added before, or a frame outside the
    model (a TF frame such as ``odom`` or a ``base_link`` owned by odometry), which the plant's world stands for.
    """

    urdf: str
    name: str | None = None
    base_joint: str = "fixed"
    parent_frame: str = "world"

    def __post_init__(self):
        if not isinstance(self.urdf, str) or not self.urdf.strip():
            raise EstimatorConfigError(f"ModelSpec.urdf: expected a file path or URDF XML, got {self.urdf!r}")
        if self.base_joint not in BASE_JOINTS:
            raise EstimatorConfigError(f"base_joint: expected one of {BASE_JOINTS}, got {self.base_joint!r}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise EstimatorConfigError(f"model name: expected a non-empty string or None, got {self.name!r}")
        if not isinstance(self.parent_frame, str) or not self.parent_frame:
            raise EstimatorConfigError(f"parent_frame: expected a frame name, got {self.parent_frame!r}")

    @property
    def is_xml(self) -> bool:
        return self.urdf.lstrip().startswith("<")


def build_plant(specs, plant_name: str = "robot"):
    """A finalized MultibodyPlant with one model instance per :class:`ModelSpec`, in order.

    Malformed URDFs surface as the plant's typed errors (ValueError subclasses). A parent frame that is not a frame
    of the instances added before is external (``ros_dofkit.ros.tf_tree`` names it as the root's TF parent): the
    instance attaches to the world body, which stands for that frame.
    """
    specs = list(specs)
    if not specs:
        raise EstimatorConfigError("a robot needs at least one model (robot_description or urdf_files)")
    plant = MultibodyPlant(name=plant_name)
    for spec in specs:
        if not isinstance(spec, ModelSpec):
            raise TypeError(f"build_plant expects ModelSpec entries, got {type(spec).__name__}")
        source = spec.urdf if spec.is_xml else str(resolve_urdf_path(spec.urdf))
        base_joint = None if spec.base_joint == "urdf" else spec.base_joint
        parent = spec.parent_frame if plant.has_frame_named(spec.parent_frame) else "world"
        plant.add_urdf(source, model_name=spec.name, base_joint=base_joint, parent_frame=parent)
    plant.finalize()
    return plant
