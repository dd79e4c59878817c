"""The TF tree of a plant: frame names, which frame each transform hangs from, which transforms are ours to publish,
and which of those move, without any message type.

Where you are: ``ros_dofkit.ros`` (the ROS edge), but importing nothing from ROS (only the parameter schema's plain
translation ``ros_dofkit.ros.parameters``): the live node's :class:`~ros_dofkit.ros.tf_builder.TfBuilder` and
offline replay's output writer (which must run without ROS message packages) name frames and split /tf from
/tf_static alike through :func:`tf_tree_from_parameters`, so that both follow one rule.

The rules (REP-105, as robot_state_publisher / robot_localization users expect):

* every body's frame is its link name with ``frame_prefix`` (a name used in several model instances is qualified
  as ``instance/link``); the plant's world body is ``world_frame`` (not prefixed: robots share it);
* a model instance whose root hangs from a frame that is not a frame of the model (``parent_frames``: ``map``,
  ``odom``, a ``base_link`` owned by odometry...) is attached to the plant's world, and its root transform names
  that external frame as its parent;
* the *root transforms* (each instance's root link from the world or its external frame) are published only with
  ``publish_root_tf``, the *joint transforms* (everything below a root) only with ``publish_joint_tf``; what another
  node owns (e.g. ``odom -> base_link`` from odometry) is left to it;
* a root whose frame has the name of the frame it hangs from (``world_frame`` set to the URDF root) gives no
  transform at all: tf2 rejects self-transforms;
* a world or external frame that names any other link of the model would give that link a second parent (or close
  a loop): refused with :class:`TfTreeError`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ros_dofkit.ros.parameters import model_specs_from_parameters

#: ``parent_frames`` entry meaning the plant's world body (published as ``world_frame``).
WORLD = "world"


class TfTreeError(ValueError):
    """The frames asked for do not make a tree: a frame would get a second parent or a loop."""


@dataclass(frozen=True)
class TfTree:
    """Frames and published transforms of one plant (indices are body indices; body 0 is the world).

    Attributes:
        frame_ids: TF frame of every body (``frame_ids[0]`` is ``world_frame``).
        parent_frame_ids: frame each body's transform hangs from (``""`` for the world body): the frame of its
            parent body, or for a root the world frame or its instance's external parent frame.
        parent_bodies: the plant parent of every body (-1 for the world); the transform published for body C is
            ``X_PC = inv(X_WP) X_WC`` with P this parent (an external parent coincides with the world in the plant).
        moving_bodies: bodies whose published transform changes with q (/tf); a mimic joint moves with its source.
        fixed_bodies: bodies whose published transform is a weld (/tf_static, once).
        external_parents: ``{instance name: frame}`` of the instances hanging from a frame outside the model.
        unpublished: ``{body: reason}`` of the transforms not published ("root transform not owned",
            "joint transforms not owned", "self-transform").
    """

    frame_ids: tuple
    parent_frame_ids: tuple
    parent_bodies: tuple
    moving_bodies: tuple
    fixed_bodies: tuple
    external_parents: dict
    unpublished: dict

    def parent_frame_of(self, body: int) -> str:
        """The frame ``body``'s transform hangs from (e.g. an Odometry's header frame for a floating base)."""
        return self.parent_frame_ids[body]


def frame_ids(plant, frame_prefix: str = "", world_frame: str = WORLD) -> tuple:
    """TF frame of every body index: ``world_frame`` for the world, then each body's name with ``frame_prefix``
    (a body name used in several model instances is qualified as ``instance/body``). The world frame is shared by
    every robot in a TF tree, so the prefix applies to the links only."""
    counts = Counter(plant.get_body(b).name for b in range(1, plant.num_bodies()))
    names = []
    for b in range(1, plant.num_bodies()):
        body = plant.get_body(b)
        names.append(body.name if counts[body.name] == 1 else
                     f"{plant.get_model_instance_name(body.model_instance)}/{body.name}")
    return (world_frame, *(frame_prefix + name for name in names))


def _moving_mask(plant, bodies: np.ndarray) -> np.ndarray:
    joint_type = np.asarray(plant.tree.joint_type)
    mimic = np.asarray(plant.tree.mimic_q)
    return (joint_type[bodies] != 0) | (mimic[bodies] >= 0)


def tf_tree(plant, frame_prefix: str = "", world_frame: str = WORLD, parent_frames=(), publish_root_tf: bool = True,
            publish_joint_tf: bool = True) -> TfTree:
    """The :class:`TfTree` of ``plant`` under the rules of the module docstring.

    ``parent_frames`` lists, per model instance in order (instances 1, 2, ...), the frame its root was asked to hang
    from (a ``ModelSpec.parent_frame``); entries missing or equal to ``"world"`` mean the world frame. Raises
    :class:`TfTreeError` naming the frame when the result would not be a tree.
    """
    if not isinstance(frame_prefix, str) or not isinstance(world_frame, str) or not world_frame:
        raise TfTreeError(f"frame_prefix must be a string and world_frame a non-empty string, got "
                          f"{frame_prefix!r}, {world_frame!r}")
    ids = frame_ids(plant, frame_prefix, world_frame)
    duplicated = sorted(name for name, count in Counter(ids[1:]).items() if count > 1)
    if duplicated:
        raise TfTreeError(f"frames {duplicated} name several links (frame_prefix {frame_prefix!r}); rename the "
                          "model instances or links")
    parent = np.asarray(plant.tree.parent)
    parent_frames = list(parent_frames or ())
    external = {}
    parent_ids = [""]
    unpublished = {}
    for b in range(1, plant.num_bodies()):
        if parent[b] != 0:
            parent_ids.append(ids[parent[b]])
            if not publish_joint_tf:
                unpublished[b] = "joint transforms not owned (publish_joint_tf false)"
            continue
        instance = plant.get_body(b).model_instance
        requested = parent_frames[instance - 1] if instance - 1 < len(parent_frames) else WORLD
        hangs_from = world_frame if requested == WORLD else requested
        if requested != WORLD:
            external[plant.get_model_instance_name(instance)] = requested
        parent_ids.append(hangs_from)
        if hangs_from == ids[b]:
            unpublished[b] = "self-transform"
        elif hangs_from in ids[1:]:
            owner = ids.index(hangs_from)
            raise TfTreeError(
                f"frame {hangs_from!r} ({'world_frame' if requested == WORLD else 'parent frame'} of the root "
                f"{ids[b]!r}) is a link of the model (body {plant.get_body(owner).name!r} of instance "
                f"{plant.get_model_instance_name(plant.get_body(owner).model_instance)!r}): it would get a second "
                "parent. Use a frame outside the model, the root's own name, or list the instance owning it first"
            )
        elif not publish_root_tf:
            unpublished[b] = "root transform not owned (publish_root_tf false)"
    published = np.array([b for b in range(1, plant.num_bodies()) if b not in unpublished], dtype=int)
    moving = _moving_mask(plant, published) if published.size else np.zeros(0, dtype=bool)
    return TfTree(
        frame_ids=ids,
        parent_frame_ids=tuple(parent_ids),
        parent_bodies=(-1, *(int(p) for p in parent[1:])),
        moving_bodies=tuple(int(b) for b in published[moving]),
        fixed_bodies=tuple(int(b) for b in published[~moving]),
        external_parents=external,
        unpublished=unpublished,
    )


def tf_tree_from_parameters(plant, values: dict) -> TfTree:
    """The :class:`TfTree` the estimator node's parameters ask for (``frame_prefix``, ``world_frame``,
    ``parent_frames``, ``publish_root_tf``, ``publish_joint_tf``; schema defaults when absent)."""
    return tf_tree(
        plant,
        frame_prefix=values.get("frame_prefix", ""),
        world_frame=values.get("world_frame", WORLD),
        parent_frames=[spec.parent_frame for spec in model_specs_from_parameters(values)],
        publish_root_tf=values.get("publish_root_tf", True),
        publish_joint_tf=values.get("publish_joint_tf", True),
    )
