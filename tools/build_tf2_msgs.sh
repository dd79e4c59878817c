#!/usr/bin/env bash
# Builds tools/tf2_msgs into a virtual environment that holds the ROS 2 pip wheels (requirements/ros.txt).
# Usage: tools/build_tf2_msgs.sh VENV_DIR BUILD_DIR
# The result installs into the venv prefix (lib/, share/, site-packages), where the wheels' bootstrap already puts
# <venv>/lib on LD_LIBRARY_PATH, so `from tf2_msgs.msg import TFMessage` works with no extra environment.
set -euo pipefail
venv=$(cd "$1" && pwd)
build=$2
source_dir=$(cd "$(dirname "$0")/tf2_msgs" && pwd)
python="$venv/bin/python"

for tool in cmake make c++; do
  command -v "$tool" >/dev/null || { echo "build_tf2_msgs: '$tool' not found; it is needed to build tf2_msgs" >&2; exit 1; }
done

rm -rf "$build"
mkdir -p "$build"
# The ROS wheels' .pth hook re-executes Python once with LD_LIBRARY_PATH set; mark it done so the generators
# (run by CMake through this interpreter) start directly, and give them the library path ourselves.
site_libs=$(find "$venv/lib" -maxdepth 3 -type d -name 'ros_*.libs' | tr '\n' ':')
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
export LD_LIBRARY_PATH="$venv/lib:${site_libs}${LD_LIBRARY_PATH:-}"
export AMENT_PREFIX_PATH="$venv"
export PATH="$venv/bin:$PATH"

cmake -S "$source_dir" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$venv" \
  -DCMAKE_INSTALL_PREFIX="$venv" \
  -DPython3_EXECUTABLE="$python" \
  -DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 \
  || { tail -n 40 "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1 || { tail -n 40 "$build/build.log" >&2; exit 1; }
cmake --install "$build" >"$build/install.log" 2>&1 || { tail -n 40 "$build/install.log" >&2; exit 1; }

"$python" -c "from tf2_msgs.msg import TFMessage; TFMessage()" \
  || { echo "build_tf2_msgs: tf2_msgs was built but does not import" >&2; exit 1; }
