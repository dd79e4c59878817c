"""Launch the ros_dofkit estimator with config/lower_body.yaml (human lower body, seven x-IMU3 IMUs).

Arguments: config, robot_description, urdf, namespace, use_sim_time (see ros_dofkit/ros/launch_support.py).
Example: ros2 launch ros_dofkit lower_body.launch.py use_sim_time:=true
then, with the subject standing in the neutral pose: ros2 service call /estimator/calibrate std_srvs/srv/Trigger
"""

from ros_dofkit.ros.launch_support import estimator_launch_description


def generate_launch_description():
    return estimator_launch_description("lower_body.yaml")
