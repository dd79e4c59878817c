"""Offline estimation over recorded or simulated inputs: the demo robot, the replay loop, bags and summaries.

You are in ``ros_dofkit.replay``, used by the ``dofkit demo``, ``record``, ``replay`` and ``play`` subcommands.
The loop (:mod:`ros_dofkit.replay.pipeline`) drives the ROS-free estimator core exactly as the live node does
(inputs in stamp order, a cycle whenever the core says it is ready); ``setup``, ``inputs``/``batch``, ``outputs``
and ``bag_replay`` move its inputs and outputs through ROS 2 bags (rosbags, no DDS), ``record`` writes simulated
bags. Its modules import ``ros_dofkit.core`` and ``ros_dofkit.ros``; ``commands`` import them.
"""
