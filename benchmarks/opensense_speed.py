"""benchmarks/opensense_speed.py: ros_dofkit against OpenSim on an OpenSense user's data, in one run.

Where you are: ``benchmarks/`` -- a script that prints numbers, not a test. Run ``./run bench opensense_speed
[--repeat 3]`` (installs the bench extra, ``opensim``).

The data an OpenSense user would have: the x-IMU3 lower-body recording (../shared/data/ximu3_lower_body) as an
OpenSense orientation table (every device slerp-resampled onto one 50 Hz grid, 929 frames, 7 IMUs), imported with
``dofkit import opensense`` and calibrated on its first 0.5 s with the calibration ``dofkit replay --calibrate 0
0.5`` uses (OpenSense's IMUPlacer: mountings R_BS and the heading R_WG). Then both solvers get the identical problem
-- the plant of config/lower_body.yaml (floating pelvis, translation locked, 12 leg joints), the calibrated
mountings, the world-aligned orientations R_WG R_WS, the same start (the model's neutral pose) and accuracy 1e-4:

* ros_dofkit's ``Assembler`` (``track()`` per frame as the node does; ``track_sequence()`` as ``dofkit replay``);
* OpenSim's ``InverseKinematicsSolver`` with an ``OrientationsReference`` on the model converted from the same plant
  (benchmarks/opensim_peer.py, checked against our forward kinematics), driven as OpenSense's
  IMUInverseKinematicsTool does, in each lock mode of ``opensim_peer.LOCK_MODES``; the fastest is the peer
  (OpenSense's own locks make Simbody's Assembler use IPOPT, several times slower than its LBFGS);

both on one core (benchmarks/single_core.py), best of ``--repeat``, numba kernels warmed up first. Printed:
frames/s of the tracked frames, the ratio, and the largest difference between the two solutions (deg).
"""


if __name__ == "__main__":  # only when run as the benchmark: importing this module must not change the environment
    import single_core  # this script's folder is first on sys.path

    single_core.limit_threads()

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import numpy as np  # noqa: E402

from benchmarks import ik, opensim_peer  # noqa: E402
from benchmarks.scenarios import Scenario  # noqa: E402
from benchmarks.single_core import pin_to_one_cpu  # noqa: E402
from benchmarks.ximu3_estimate import DEFAULT_RECORDING, calibration_of, dofkit  # noqa: E402
from ros_dofkit.core.recordings import opensim_files as osf  # noqa: E402
from ros_dofkit.core.recordings import read_recording  # noqa: E402
from ros_dofkit.core.recordings.imu_series import common_grid_orientations  # noqa: E402
from ros_dofkit.core.spatial import quat_to_matrix  # noqa: E402
from ros_dofkit.replay.setup import ReplaySetup  # noqa: E402
from ros_dofkit.ros.parameters import load_parameter_file  # noqa: E402

CONFIG = _REPO / "config" / "lower_body.yaml"
RATE_HZ = 50.0
CALIBRATION_SECONDS = 0.5


def opensense_scenario(recording_folder: Path, work: Path) -> Scenario:
    """The recording as an OpenSense table, imported and calibrated; the IK problem both solvers get."""
    recording = list(read_recording(recording_folder))
    times, q_WS = common_grid_orientations(recording, RATE_HZ)
    table = work / "lower_body_orientations.sto"
    table.write_text(osf.format_quaternion_table(times, [f"{d.name}_imu" for d in recording], q_WS))
    bag = work / "bag"
    dofkit("import", "opensense", table, "--out", bag)  # default rotations: the table is z-up data
    values = load_parameter_file(CONFIG)
    calibration = calibration_of(bag, values, CALIBRATION_SECONDS)
    setup = ReplaySetup.from_parameters(values)
    plant = setup.plant
    column = {d.name: j for j, d in enumerate(recording)}
    # OpenSim finds a reference column's frame by component name: "pelvis" is a body and "pelvis_imu" a link of the
    # URDF (both converted), so the sensor frames get names of their own.
    imus = tuple(opensim_peer.ImuMount(f"{imu.name}_sensor", plant.get_body_by_name(imu.body).index,
                                       calibration.R_BS[imu.name])
                 for imu in setup.config.imus)
    R_GO = calibration.R_WG @ quat_to_matrix(q_WS[:, [column[imu.name] for imu in setup.config.imus]])
    floating = plant.floating_base_joints()[0]
    locked = tuple(range(floating.position_start + 4, floating.position_start + 7))  # p_WB: not observed
    scored = np.array([i for i in range(plant.num_positions()) if not
                       floating.position_start <= i < floating.position_start + 7])
    q_start = plant.default_positions()
    return Scenario("OpenSense lower body (x-IMU3 recording)", plant, imus, times,
                    np.full((times.size, plant.num_positions()), np.nan), R_GO, q_start, locked, scored,
                    floating.position_start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings (default 3)")
    arguments = parser.parse_args(argv)
    if not opensim_peer.opensim_available():
        print(f"OpenSim is not importable (`pip install {opensim_peer.OPENSIM_PIN}`): nothing to compare against",
              file=sys.stderr)
        return 1
    pin_to_one_cpu()
    opensim_peer.import_opensim().Logger.setLevelString("Warn")
    with tempfile.TemporaryDirectory() as work:
        scenario = opensense_scenario(arguments.recording, Path(work))
    print(scenario.description())
    print(f"machine: {ik.machine_description()}; threads 1; versions: {ik.versions()}")
    ik.run_dofkit_track(scenario.truncated(5))  # compile the kernels before timing
    ik.run_dofkit_track_sequence(scenario.truncated(5))
    ours = [ik.fastest_of(arguments.repeat, ik.run_dofkit_track, scenario),
            ik.fastest_of(arguments.repeat, ik.run_dofkit_track_sequence, scenario)]
    peer = ik.make_opensim_peer(scenario)
    # OpenSim in every lock mode (benchmarks/README.md, "The OpenSim peer"); the fastest is the peer.
    modes = [ik.fastest_of(arguments.repeat, ik.run_opensim, scenario, peer, ik.ACCURACY, mode)
             for mode in opensim_peer.LOCK_MODES]
    theirs = max(modes, key=lambda result: result.frames_per_second)
    print(f"timing: frames/s over frames 1..{scenario.num_frames - 1} after the assemble at t0, best of "
          f"{arguments.repeat}; the OpenSim peer is its fastest configuration, {theirs.solver}")
    for row in (*ours, *modes):
        print(f"  {row.solver:32s} {row.frames_per_second:12,.0f} frames/s")
    scored = scenario.scored_positions
    for row in ours:
        difference = np.degrees(np.abs(row.q[:, scored] - theirs.q[:, scored]))
        print(f"  ratio {row.solver} / {theirs.solver}: {row.frames_per_second / theirs.frames_per_second:.1f}x; "
              f"largest joint difference to its solution {difference.max():.3f} deg (median "
              f"{np.median(difference):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
