"""Packaging of ros_dofkit as an ament_python package (colcon) and a plain pip-installable one (./run)."""

import os
import re
import subprocess
import sys
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.install import install

PACKAGE_NAME = "ros_dofkit"
HERE = Path(__file__).resolve().parent


def package_xml_version() -> str:
    """The version in package.xml, the one place it is written."""
    text = (HERE / "package.xml").read_text(encoding="utf-8")
    match = re.search(r"<version>\s*([^<\s]+)\s*</version>", text)
    if match is None:
        raise RuntimeError("package.xml has no <version> element")
    return match.group(1)


class InstallAndPrecompile(install):
    """install (as colcon build does), then compile the installed copy's numba kernels, so that the first
    ``ros2 launch`` after a build starts in seconds (ros_dofkit/precompile.py). Not when installing into a staging
    root (building a wheel), nor with DOFKIT_PRECOMPILE=0."""

    def run(self):
        super().run()
        if self.root is None and os.environ.get("DOFKIT_PRECOMPILE", "1") != "0":
            configs = sorted(glob(str(HERE / "config" / "*.yaml")))
            path = os.pathsep.join(filter(None, [self.install_lib, os.environ.get("PYTHONPATH")]))
            # cwd: `python -m` puts it first on sys.path; the installed copy, not this source tree, is compiled
            subprocess.run([sys.executable, "-m", "ros_dofkit.precompile", *configs],
                           env={**os.environ, "PYTHONPATH": path}, cwd=self.install_lib, check=True)


setup(
    cmdclass={"install": InstallAndPrecompile},
    name=PACKAGE_NAME,
    version=package_xml_version(),
    packages=find_packages(include=[PACKAGE_NAME, PACKAGE_NAME + ".*"]),
    package_data={PACKAGE_NAME: ["models/*.urdf", "templates/*.csv"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        ("share/" + PACKAGE_NAME + "/launch", sorted(glob("launch/*.py"))),
        ("share/" + PACKAGE_NAME + "/config",
         sorted(glob("config/*.yaml") + glob("config/*.rviz") + glob("config/*.xml"))),
    ],
    install_requires=["setuptools"],
    # colcon test runs pytest (not unittest) for packages whose test extra names pytest
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="ros_dofkit developers",
    maintainer_email="ros_dofkit@example.com",
    description="Joint-configuration estimation from encoders and IMUs, published the ROS 2 way.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "dofkit = ros_dofkit.cli:main",
            "dofkit_relay = ros_dofkit.nodes.relay:main",
            "estimator = ros_dofkit.nodes.estimator:main",
            "joint_state_filter = ros_dofkit.nodes.joint_state_filter:main",
        ],
    },
)
