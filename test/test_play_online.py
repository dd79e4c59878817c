"""Online replay: the estimator node under ``use_sim_time``, driven by ``dofkit play`` (bag messages + /clock over
DDS), gives the same estimate as offline ``dofkit replay`` of the same bag; playing the bag twice (the clock
jumps back) resets tracking, and the second pass again matches the offline estimate instead of being rejected
or mixed with the first.

Tolerance: offline replay offers inputs strictly in stamp order; over DDS the node's executor takes messages
of different topics that are pending together in its own order. With the "one instant, one cycle" rule (issue
16.7) the IMU samples of an instant make one cycle at that instant's stamp whatever their order, but the encoders
are sample-and-hold (``sync_joint_states`` off): a cycle holds the newest joint state received, so where the
instant's joint state arrives before the last IMU sample online and after it offline (or the reverse), the same
stamp is solved with another encoder message. Stated bounds: at least 80 % of the offline cycle stamps also
appear online (measured on a loaded machine: 96-98 %; 74-80 % idle before 16.7); at least 80 % of those held
the same encoder message (measured 87-92 %), and there the median difference over the estimated joints is below
1e-9 deg and the 95th percentile below 1e-3 deg (measured: 0 and <= 1.3e-6 deg); and
the whole online estimate's RMS error against the truth is within 20 % (+0.05 deg) of the offline one.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ros_dofkit import cli

pytest.importorskip("rclpy")
pytest.importorskip("ros_dofkit.nodes.estimator")

MEASURED = ["arm_joint1", "arm_joint2"]  # locked at the encoder values the cycle held
ESTIMATED = [f"arm_joint{i}" for i in range(3, 8)]
JOINTS = MEASURED + ESTIMATED


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def offline_estimates(bag, config, out):
    from ros_dofkit.replay.bag_replay import replay_bag
    from ros_dofkit.replay.setup import ReplaySetup
    from ros_dofkit.ros.bag_io import read_bag

    replay_bag(bag, ReplaySetup.from_parameter_file(config), out)
    estimates = {}
    for record in read_bag(out, topics=["/estimated/joint_states"]):
        names = list(record.message.name)
        estimates[record.stamp_ns] = np.degrees([record.message.position[names.index(n)] for n in JOINTS])
    return estimates


def rms_against_truth(estimates: dict, truth) -> np.ndarray:
    stamps = sorted(estimates)
    values = np.array([estimates[s] for s in stamps])[:, len(MEASURED):]
    true = np.degrees(truth.at(np.array(stamps) * 1e-9, ESTIMATED))
    # As the demo's report: the first 0.5 s are left out (a cycle right after a start or reset may be solved from
    # the first IMUs heard only).
    keep = np.all(np.isfinite(true), axis=1) & (np.array(stamps) >= stamps[0] + 500_000_000)
    return np.sqrt(np.mean((values[keep] - true[keep]) ** 2, axis=0))


def compare(online: dict, offline: dict) -> tuple[float, float, float, float]:
    """(share of the offline stamps online has, share of those where both held the same encoder message, median and
    95th percentile of the estimated joints' differences there)."""
    common = sorted(set(online) & set(offline))
    differences = np.abs(np.array([online[s] - offline[s] for s in common]))
    held = np.all(differences[:, :len(MEASURED)] == 0.0, axis=1)
    estimated = differences[held][:, len(MEASURED):]
    return (len(common) / len(offline), float(np.mean(held)), float(np.median(estimated)),
            float(np.percentile(estimated, 95)))


def test_online_replay_matches_offline_and_a_clock_jump_resets_tracking(tmp_path, ros_node, ros_processes):
    from sensor_msgs.msg import JointState

    from ros_dofkit.replay.inputs import truth_from_records
    from ros_dofkit.ros.bag_io import read_bag

    bag = tmp_path / "bag"
    assert cli.main(["record", str(bag), "--duration", "3", "--clock", "--encoder-rate", "100"]) == 0
    config = tmp_path / "bag.estimator.yaml"
    offline = offline_estimates(bag, config, tmp_path / "offline")
    truth = truth_from_records([(r.stamp_ns, tuple(r.message.name), np.asarray(r.message.position))
                                for r in read_bag(bag, topics=["/ground_truth/joint_states"])])

    params = tmp_path / "online.yaml"
    params.write_text(config.read_text().replace("ros__parameters:\n", "ros__parameters:\n    use_sim_time: true\n",
                                                 1))
    collector = ros_node.collect(JointState, "/estimated/joint_states", 5000)
    node = ros_processes.start(sys.executable, "-m", "ros_dofkit.nodes.estimator", "--ros-args", "--params-file",
                               str(params))
    node.wait_for_output("estimator ready", timeout=60.0)
    ros_node.wait_for_publishers(collector, timeout=30.0)
    topics = ["/joint_states", "/imu/upper_arm/data", "/imu/forearm/data", "/imu/wrist/data", "/imu/hand/data"]
    player = ros_processes.start("dofkit", "play", str(bag), "--topics", *topics, "--count", "2", "--quiet",
                                 "--wait-for-subscribers", *topics)
    ros_node.spin_until(lambda: not player.is_running(), "the two passes of dofkit play", timeout=60.0)
    assert player.wait_for_exit(timeout=5.0) == 0
    count = -1
    while count != len(collector):  # drain: stop when no estimate arrived for half a second
        count = len(collector)
        for _ in range(25):
            ros_node.executor.spin_once(timeout_sec=0.02)
    messages = collector.messages
    stamps = [stamp_ns(m.header.stamp) for m in messages]
    jumps = [k for k in range(1, len(stamps)) if stamps[k] < stamps[k - 1]]
    assert len(jumps) == 1, f"expected one jump back between the passes, got {len(jumps)}"

    def estimates(selected):
        out = {}
        for m in selected:
            names = list(m.name)
            out[stamp_ns(m.header.stamp)] = np.degrees([m.position[names.index(n)] for n in JOINTS])
        return out

    for label, selected in (("first pass", messages[:jumps[0]]), ("second pass", messages[jumps[0]:])):
        online = estimates(selected)
        coverage, held, median, p95 = compare(online, offline)
        assert coverage >= 0.8, f"{label}: only {coverage:.0%} of the offline cycles were published online"
        assert held >= 0.8, f"{label}: only {held:.0%} of the common cycles held the same encoder message"
        assert median < 1e-9, f"{label}: median difference {median:.3g} deg"
        assert p95 < 1e-3, f"{label}: 95th percentile difference {p95:.3g} deg"
        # The cycles only one side has are as good: the whole online estimate tracks the truth as offline does.
        online_rms, offline_rms = rms_against_truth(online, truth), rms_against_truth(offline, truth)
        assert np.all(online_rms < 1.2 * offline_rms + 0.05), (label, online_rms, offline_rms)
