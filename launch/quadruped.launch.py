"""Launch the ros_dofkit estimator with config/quadruped.yaml.

Arguments: config, robot_description, urdf, namespace, use_sim_time (see ros_dofkit/ros/launch_support.py).
Example: ros2 launch ros_dofkit quadruped.launch.py namespace:=robot1 use_sim_time:=true
"""

from ros_dofkit.ros.launch_support import estimator_launch_description


def generate_launch_description():
    return estimator_launch_description("quadruped.yaml")
