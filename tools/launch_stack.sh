#!/usr/bin/env bash
# The ROS 2 launch system and `ros2` command line for the tests (called by `./run test`; see README "Launch and
# ros2 CLI tests").
#
# Usage: tools/launch_stack.sh VENV_PYTHON
#
# launch, launch_ros, launch_testing and ros2cli have no pip wheels. In order:
#   1. a venv on a sourced ROS 2 (`--system-site-packages`) that already imports them: the system's are used;
#   2. ROS2_LAUNCH_DIR (default: ../shared/ros2_launch beside the checkout) holds install.sh: it installs them
#      into the venv (idempotent: ~1 s when up to date, ~70 s the first time);
#   3. neither: nothing is installed, and the launch and ros2 CLI tests skip, saying how to get them.
# Nothing is copied into the repository; the package itself never needs any of this at run time.
set -euo pipefail

python=${1:?usage: tools/launch_stack.sh VENV_PYTHON}
root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
source_dir=${ROS2_LAUNCH_DIR:-$root/../shared/ros2_launch}
say() { printf 'ros_dofkit launch stack: %s\n' "$*" >&2; }

system_site=$(sed -n 's/^include-system-site-packages *= *//p' "$(dirname "$python")/../pyvenv.cfg" 2>/dev/null || true)
if [ "$system_site" = true ] && "$python" -c 'import launch_ros, launch_testing, ros2cli' 2>/dev/null; then
  exit 0  # a sourced ROS 2 provides them
fi
if [ ! -x "$source_dir/install.sh" ]; then
  say "not installed: no ROS 2 launch system in this environment and no $source_dir/install.sh;" \
      "the launch and ros2 CLI tests will skip (see README)"
  exit 0
fi
mkdir -p "$root/.cache"
exec 8>"$root/.cache/launch_stack.lock"  # one installer at a time per checkout
flock 8
"$source_dir/install.sh" "$python"
