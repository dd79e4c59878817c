"""Tests of ``dofkit export`` (ros_dofkit.commands.export): an estimate bag to OpenSim .mot / .sto and CSV.

The estimate is a bag of /estimated/joint_states written here with analytic joint angles for the robot of
config/lower_body.yaml (the replay's output topic and names), so every exported number has a known value. The
files are parsed by the documented format rules (test_opensim_files.parse_storage) and, where the bench extra is
installed, loaded with OpenSim's own readers (TimeSeriesTable and Storage).
"""

from pathlib import Path

import numpy as np
import pytest

from opensim_guard import importorskip_opensim
from ros_dofkit import cli
from ros_dofkit.ros.bag_io import BagWriter
from test_opensim_files import parse_storage

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "lower_body.yaml"
JOINTS = [f"{side}_{angle}" for side in ("left", "right") for angle in
          ("hip_flexion", "hip_adduction", "hip_rotation", "knee_flexion", "ankle_dorsiflexion", "ankle_inversion")]
START_NS = 917_428_272_000


def analytic_positions(n: int) -> np.ndarray:
    """(n, 12) joint angles in rad: joint j follows 0.1 (j + 1) sin(2 pi 0.5 t + j)."""
    t = np.arange(n) * 0.02
    return np.stack([0.1 * (j + 1) * np.sin(np.pi * t + j) for j in range(len(JOINTS))], axis=1)


def write_estimate(path: Path, positions: np.ndarray, stamps_ns=None, names=JOINTS) -> np.ndarray:
    stamps_ns = START_NS + 20_000_000 * np.arange(len(positions)) if stamps_ns is None else np.asarray(stamps_ns)
    with BagWriter(path) as bag:
        types = bag.typestore.types
        for stamp, row in zip(stamps_ns.tolist(), positions, strict=True):
            header = types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id="")
            message = types["sensor_msgs/msg/JointState"](header=header, name=list(names), position=row,
                                                          velocity=np.zeros(len(row)), effort=np.zeros(0))
            bag.write("/estimated/joint_states", stamp, message)
    return stamps_ns


@pytest.fixture(scope="module")
def estimate(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "estimated"
    positions = analytic_positions(50)
    stamps = write_estimate(path, positions)
    return path, stamps / 1e9, positions


def export(*arguments) -> int:
    return cli.main(["export", *map(str, arguments)])


def test_mot_holds_every_joint_in_degrees_on_the_bag_timeline(estimate, tmp_path, capsys):
    bag, time, positions = estimate
    out = tmp_path / "walk.mot"
    assert export(bag, "--config", CONFIG, "--out", out) == 0
    assert "50 rows x 12 coordinates, angles in degrees" in capsys.readouterr().out
    header, keys, labels, rows = parse_storage(out.read_text())
    assert keys == {"version": "1", "nRows": "50", "nColumns": "13", "inDegrees": "yes"}
    assert labels == ["time"] + JOINTS  # URDF joint names
    np.testing.assert_allclose(rows[:, 0], time, rtol=0, atol=1e-9)
    assert np.all(np.diff(rows[:, 0]) > 0)
    np.testing.assert_allclose(rows[:, 1:], np.degrees(positions), rtol=1e-10, atol=1e-10)


def test_sto_in_radians_csv_in_degrees_and_zero_time(estimate, tmp_path):
    bag, time, positions = estimate
    assert export(bag, "--config", CONFIG, "--out", tmp_path / "walk.sto", "--zero-time") == 0
    _, keys, _, rows = parse_storage((tmp_path / "walk.sto").read_text())
    assert keys["inDegrees"] == "no"
    np.testing.assert_allclose(rows[:, 1:], positions, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rows[:, 0], time - time[0], atol=1e-9)
    assert export(bag, "--config", CONFIG, "--out", tmp_path / "walk.csv") == 0
    lines = (tmp_path / "walk.csv").read_text().splitlines()
    assert lines[0].split(",")[:2] == ["time (s)", "left_hip_flexion (deg)"] and len(lines) == 51
    table = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    np.testing.assert_allclose(table[:, 1:], np.degrees(positions), rtol=1e-10, atol=1e-10)


def test_name_map_renames_to_opensim_coordinates(estimate, tmp_path):
    bag, _, positions = estimate
    name_map = tmp_path / "rajagopal.yaml"
    name_map.write_text("left_knee_flexion: knee_angle_l\n"
                        "right_knee_flexion: {coordinate: knee_angle_r, scale: -1}\n"
                        "left_hip_rotation: null\n")
    out = tmp_path / "mapped.mot"
    assert export(bag, "--config", CONFIG, "--out", out, "--name-map", name_map, "--only-mapped") == 0
    _, keys, labels, rows = parse_storage(out.read_text())
    assert labels == ["time", "knee_angle_l", "knee_angle_r"] and keys["nColumns"] == "3"
    np.testing.assert_allclose(rows[:, 1], np.degrees(positions[:, JOINTS.index("left_knee_flexion")]), rtol=1e-10)
    np.testing.assert_allclose(rows[:, 2], -np.degrees(positions[:, JOINTS.index("right_knee_flexion")]),
                               rtol=1e-10)


def test_bad_inputs_stop_with_one_line_and_write_nothing(estimate, tmp_path, capsys):
    bag, _, positions = estimate
    out = tmp_path / "bad.mot"
    typo = tmp_path / "typo.yaml"
    typo.write_text("left_kne_flexion: knee_angle_l\n")
    assert export(bag, "--config", CONFIG, "--out", out, "--name-map", typo) == 1
    assert "'left_kne_flexion' is not a joint of the estimate; did you mean ['left_knee_flexion'," in \
        capsys.readouterr().err
    nan = positions.copy()
    nan[7, 3] = np.nan
    write_estimate(tmp_path / "nan_bag", nan)
    assert export(tmp_path / "nan_bag", "--config", CONFIG, "--out", out) == 1
    assert "row 8 (time 917.568272 s): left_knee_flexion is nan, expected a finite number" in capsys.readouterr().err
    stamps = START_NS + 20_000_000 * np.arange(len(positions))
    stamps[10] = stamps[9]  # the header stamps repeat: a time that does not increase
    write_estimate(tmp_path / "repeat_bag", positions, stamps)
    assert export(tmp_path / "repeat_bag", "--config", CONFIG, "--out", out) == 1
    assert "row 11: time 917.608272 s does not increase (row 10: 917.608272 s)" in capsys.readouterr().err
    write_estimate(tmp_path / "other_robot", positions[:, :2], names=["arm_joint1", "arm_joint2"])
    assert export(tmp_path / "other_robot", "--config", CONFIG, "--out", out) == 1
    assert "joints ['arm_joint1', 'arm_joint2'] are not coordinates of the robot" in capsys.readouterr().err
    write_estimate(tmp_path / "short_bag", np.zeros((3, 11)))  # 11 positions for 12 names
    assert export(tmp_path / "short_bag", "--config", CONFIG, "--out", out) == 1
    assert "row 1: 11 positions for 12 joint names" in capsys.readouterr().err
    assert export(bag, "--config", CONFIG, "--out", out, "--topic", "/nope") == 1
    assert "has no topic /nope (its JointState topics: ['/estimated/joint_states'])" in capsys.readouterr().err
    assert export(bag, "--config", CONFIG, "--out", tmp_path / "walk.txt") == 1
    assert "cannot tell the format" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    out.write_text("keep me\n")
    assert export(bag, "--config", CONFIG, "--out", out) == 1
    assert "refusing to overwrite" in capsys.readouterr().err and out.read_text() == "keep me\n"
    assert export(bag, "--config", CONFIG, "--out", out, "--force") == 0


def test_opensim_reads_the_exported_motion(estimate, tmp_path, monkeypatch):
    """OpenSim's own readers (the bench extra) load the .mot: same labels, times and degrees."""
    opensim = importorskip_opensim("OpenSim's readers cannot be run here")
    monkeypatch.chdir(tmp_path)  # OpenSim writes opensim.log into the working directory
    bag, time, positions = estimate
    out = tmp_path / "walk.mot"
    assert export(bag, "--config", CONFIG, "--out", out) == 0
    table = opensim.TimeSeriesTable(str(out))
    assert list(table.getColumnLabels()) == JOINTS
    assert table.getTableMetaDataAsString("inDegrees") == "yes"
    assert int(table.getTableMetaDataAsString("nRows")) == table.getNumRows() == len(time)
    np.testing.assert_allclose(np.array(table.getIndependentColumn()), time, atol=1e-9)
    for j, name in enumerate(JOINTS):
        np.testing.assert_allclose(table.getDependentColumn(name).to_numpy(), np.degrees(positions[:, j]),
                                   rtol=1e-10, atol=1e-10)
    storage = opensim.Storage(str(out))
    assert storage.isInDegrees() and storage.getSize() == len(time)
    assert storage.getColumnLabels().getSize() == len(JOINTS) + 1
    assert storage.getFirstTime() == pytest.approx(time[0], abs=1e-9)
    assert storage.getLastTime() == pytest.approx(time[-1], abs=1e-9)
