"""The TF tree of a plant: frame names and which transforms move, without any message type.

Where you are: ``ros_dofkit.ros`` (the ROS edge), but importing nothing from ROS: the live node's
:class:`~ros_dofkit.ros.tf_builder.TfBuilder` and offline replay's output writer (which must run without ROS message
packages) name frames and split /tf from /tf_static alike through these two functions.
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def frame_ids(plant, frame_prefix: str = "", world_frame: str = "world") -> tuple:
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


def moving_and_fixed_bodies(plant) -> tuple[tuple, tuple]:
    """(bodies whose transform to their parent changes with q: /tf; bodies welded to it: /tf_static), body indices.
    A mimic joint moves with its source even though it has no coordinate of its own."""
    joint_type = np.asarray(plant.tree.joint_type)
    mimic = np.asarray(plant.tree.mimic_q)
    bodies = np.arange(1, plant.num_bodies())
    moving = (joint_type[bodies] != 0) | (mimic[bodies] >= 0)
    return tuple(int(b) for b in bodies[moving]), tuple(int(b) for b in bodies[~moving])
