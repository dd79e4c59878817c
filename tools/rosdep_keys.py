"""tools/rosdep_keys.py: write the rosdep keys that resolve on ROS 2 Jazzy + Ubuntu 24.04 (noble), the real-key list
that test/test_package_metadata.py checks package.xml against (test/fixtures/rosdep_keys_jazzy_noble.txt).

A key resolves when it is a package released into Jazzy (jazzy/distribution.yaml) or a rule of rosdep/base.yaml or
rosdep/python.yaml with an ``ubuntu`` definition for noble: a package list, a ``pip``/``apt`` installer entry, or a
version map whose ``noble`` (or ``*``) entry is not empty. Reads a checkout (or bare mirror) of ros/rosdistro;
stand-alone: PyYAML is its only dependency. Usage:
    python tools/rosdep_keys.py ROSDISTRO_GIT_DIR > test/fixtures/rosdep_keys_jazzy_noble.txt
"""

from __future__ import annotations

import subprocess
import sys

import yaml

UBUNTU_RELEASE = "noble"


def read(git_dir: str, path: str) -> dict:
    text = subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout
    return yaml.safe_load(text)


def resolves_on_noble(rule) -> bool:
    ubuntu = rule.get("ubuntu") if isinstance(rule, dict) else None
    if isinstance(ubuntu, list):
        return bool(ubuntu)
    if not isinstance(ubuntu, dict):
        return False
    if set(ubuntu) & {"apt", "pip", "source"}:
        return True
    for release in (UBUNTU_RELEASE, "*"):
        if release in ubuntu:
            return bool(ubuntu[release])
    return False


def main(git_dir: str) -> None:
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    keys: dict[str, str] = {}
    for path in ("rosdep/base.yaml", "rosdep/python.yaml"):
        for key, rule in read(git_dir, path).items():
            if resolves_on_noble(rule):
                keys.setdefault(key, path)
    for repository, info in read(git_dir, "jazzy/distribution.yaml")["repositories"].items():
        release = info.get("release")
        if release and release.get("version"):
            for package in release.get("packages", [repository]):
                keys.setdefault(package, "jazzy/distribution.yaml")
    print(f"# rosdep keys that resolve on ROS 2 Jazzy + Ubuntu 24.04 (noble): ros/rosdistro commit {commit}")
    print("# (rosdep/base.yaml, rosdep/python.yaml rules with a noble definition; packages released into Jazzy).")
    print("# Written by: python tools/rosdep_keys.py ROSDISTRO_GIT_DIR > test/fixtures/rosdep_keys_jazzy_noble.txt")
    for source in ("rosdep/base.yaml", "rosdep/python.yaml", "jazzy/distribution.yaml"):
        print(f"# {source}")
        print("\n".join(sorted(key for key, where in keys.items() if where == source)))


if __name__ == "__main__":
    main(sys.argv[1])
