"""Smoke tests of the node latency benchmark (benchmarks/node_latency.py): it keeps `./run bench node_latency` from
rotting. The readings it publishes are checked against the plant's forward kinematics (orientations) and angular
Jacobian times the motion's derivative (gyro), the budget lines against hand-made rounds, and both --model loads run
end to end (two rounds of one second each, floor peer and estimator over real DDS) in a process of their own. No
timing is asserted.
"""

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import node_latency, profiling  # noqa: E402
from ros_dofkit.core.spatial import quat_to_matrix  # noqa: E402


@pytest.mark.parametrize("model", ["arm", "humanoid"])
def test_published_readings_are_the_motion_seen_by_each_imu(model):
    load = node_latency.load_by_name(model)
    rate = 200.0
    table = node_latency.imu_table(load, rate, period_s=0.5)
    assert len(table) == 100 and [name for name, _, _ in table[0]] == list(load.imus)
    plant = node_latency.load_plant(load)
    times = np.arange(len(table)) / rate
    Q = node_latency.periodic_motion(plant, load, times)
    k = 37
    X_WB = plant.calc_body_poses(Q[k])
    for name, quaternion, gyro in table[k]:
        body = plant.get_body_by_name(load.imus[name])
        np.testing.assert_allclose(quat_to_matrix(quaternion), X_WB[body.index, :3, :3], atol=1e-12)
        if model == "arm":  # fixed base: the gyro is R_WS^T J_w(q) v, with v the motion's derivative
            v = (Q[k + 1] - Q[k]) * rate  # the table's gyro is the rotation over one sample, so compare alike
            q_mid = 0.5 * (Q[k] + Q[k + 1])
            R_WS = plant.calc_body_poses(q_mid)[body.index, :3, :3]
            expected = R_WS.T @ (plant.calc_angular_jacobian(q_mid, body) @ v)
            np.testing.assert_allclose(gyro, expected, atol=1e-3 * max(1.0, np.abs(expected).max()))
    # Every revolute joint moves, inside its limits.
    lower, upper = plant.position_lower_limits(), plant.position_upper_limits()
    assert np.all(Q >= lower - 1e-12) and np.all(Q <= upper + 1e-12)


def _result(p99, dropped=0):
    return {"p99": p99, "p50": p99 / 2, "dropped": dropped}


def test_budget_lines_take_the_worst_round():
    arm = node_latency.load_by_name("arm")
    rounds = [{"floor": _result(0.8), "estimator": _result(1.1)}, {"floor": _result(0.7), "estimator": _result(1.9)}]
    p99, ratio, dropped = node_latency.budget_lines(arm, rounds, 60.0)
    assert p99.startswith("PASS") and "1.900 ms" in p99 and "1.100 1.900" in p99
    assert ratio.startswith("MISS") and "2.71x" in ratio  # 1.9 / 0.7 in round 2; round 1 was 1.38x
    assert dropped.startswith("PASS") and "says 60 s" not in dropped
    rounds[0]["estimator"]["dropped"] = 3
    assert node_latency.budget_lines(arm, rounds, 5.0)[2].startswith("MISS  0 dropped sets: 3")
    humanoid = node_latency.load_by_name("humanoid")
    lines = node_latency.budget_lines(humanoid, [{"estimator": _result(3.0)}], 60.0)
    assert lines[0].startswith("NOT MEASURED") and "2x the floor" in lines[0] and len(lines) == 2


def test_profile_summary_counts_self_and_inclusive_samples(tmp_path):
    profile = tmp_path / "estimator_1.txt"
    profile.write_text("main;spin;take 6\nmain;spin;solve;kernel 3\nmain;publish 1\n")
    lines = profiling.summarize_profile(profile, top=3)
    assert lines[0].strip() == "10 busy samples; self time:"
    assert lines[1].split() == ["60.0%", "take"] and lines[2].split() == ["30.0%", "kernel"]
    inclusive = lines[lines.index("    inclusive time:") + 1:]
    assert inclusive[0].split() == ["100.0%", "main"] and inclusive[1].split() == ["90.0%", "spin"]
    (tmp_path / "empty.txt").write_text("")
    assert "no samples" in profiling.summarize_profile(tmp_path / "empty.txt")[0]


def _py_spy_available() -> bool:
    try:
        profiling.py_spy()
    except SystemExit:
        return False
    return True


@pytest.mark.parametrize("model", ["arm", "humanoid"])
def test_benchmark_runs_end_to_end(model, tmp_path):
    # The humanoid run also profiles when py-spy (a tool, not a dependency) is installed next to this interpreter.
    profile = ["--profile", str(tmp_path / "profile")] if model == "humanoid" and _py_spy_available() else []
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "node_latency.py"), "--model", model, "--duration", "1",
         "--warmup", "1", "--repeat", "2", *profile],
        capture_output=True, text=True, timeout=400, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    out = finished.stdout
    assert out.count("floor peer (the estimator's I/O") == 2 and out.count("  estimator: input") == 2, out
    for line in re.findall(r"latency p50 .*", out):
        assert all(float(x) > 0 for x in re.findall(r"p\d\d ([0-9.]+) ms", line)), line
    verdicts = re.findall(r"^  (PASS|MISS)  (.*)$", out, flags=re.MULTILINE)
    assert len(verdicts) == (3 if model == "arm" else 2), out
    assert all("worst" in text for _, text in verdicts), out
    if profile:
        assert out.count("busy samples; self time:") == 4, out  # floor and estimator, two rounds
        assert sorted(p.name for p in (tmp_path / "profile").iterdir()) == [
            "estimator_1.txt", "estimator_2.txt", "floor_1.txt", "floor_2.txt"]


@pytest.mark.skipif(_py_spy_available(), reason="checks the message given when py-spy is missing; it is installed")
def test_profile_without_py_spy_says_how_to_install_it():
    with pytest.raises(SystemExit, match="pip install py-spy"):
        profiling.py_spy()


def test_in_process_mode_measures_each_tree_it_is_given(tmp_path):
    """--in-process runs the node's per-set path of this tree and of --estimator-pythonpath's (here a copy of the
    package under another path): each child imports the package of its own tree, and every set gives one estimate."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "ros_dofkit").symlink_to(REPO / "ros_dofkit")
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "node_latency.py"), "--in-process", "--sets", "120",
         "--estimator-pythonpath", str(other)], capture_output=True, text=True, timeout=400, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    lines = re.findall(r"^  (.+?): CPU ([0-9.]+) us per set; .* ([0-9.]+) outputs per set; a round [0-9.]+ s \((.*)\)$",
                       finished.stdout, flags=re.MULTILINE)
    assert [label for label, *_ in lines] == ["this tree", str(other)], finished.stdout
    assert all(float(cpu) > 0 and outputs == "1.000" for _, cpu, outputs, _ in lines), finished.stdout
    assert lines[0][3].startswith(str(REPO / "ros_dofkit")) and lines[1][3].startswith(str(other)), finished.stdout
    assert "best CPU per set: this tree" in finished.stdout


def test_paced_in_process_mode_offers_one_set_per_tick_of_the_rate():
    """--paced: the sets arrive at --rate (a round of N sets spans at least N / rate seconds, asleep in between, as
    over DDS) and each still gives one estimate."""
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "node_latency.py"), "--in-process", "--paced", "--rate", "200",
         "--sets", "120"], capture_output=True, text=True, timeout=400, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert "120 sets per round paced at 200 Hz" in finished.stdout, finished.stdout
    lines = re.findall(r"^  this tree: CPU ([0-9.]+) us per set; .* ([0-9.]+) outputs per set; a round ([0-9.]+) s",
                       finished.stdout, flags=re.MULTILINE)
    assert len(lines) == 1, finished.stdout
    cpu, outputs, round_s = lines[0]
    assert float(cpu) > 0 and outputs == "1.000" and float(round_s) >= 120 / 200, finished.stdout


def test_the_publisher_sends_its_first_set_once_the_subscribed_node_answered_it(ros_node):
    """Issue 18: the first send of a Fast DDS writer to a reader's shared-memory port can hold it 333 ms (the port's
    health check), and a set stamped before it reached the node stale. The benchmark's publisher therefore has each
    node subscribed to its topics answer one request (get_parameters) before its first set. Here that node is in
    this process, its get_parameters service noting each request: the first Imu message comes after one."""
    from rcl_interfaces.srv import GetParameters
    from sensor_msgs.msg import Imu

    from ros_dofkit.ros.qos import sensor_input_qos

    load = node_latency.load_by_name("arm")
    events = []
    subscriber = ros_node.create_node("latency_bench_subscriber", start_parameter_services=False)

    def answer(request, response):
        events.append(("request", list(request.names)))
        return response

    subscriber.create_service(GetParameters, "~/get_parameters", answer)
    for name in load.imus:
        subscriber.create_subscription(Imu, f"{node_latency.NAMESPACE}/imu/{name}",
                                       lambda message: events.append(("imu", None)), sensor_input_qos())
    publisher = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "node_latency.py"), "--role", "publisher", "--model", "arm",
         "--duration", "5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        start_new_session=True)
    try:
        ros_node.spin_until(lambda: ("imu", None) in events, "the publisher's first Imu message", timeout=60.0)
    finally:
        node_latency.stop_process(publisher)
        output = publisher.communicate()[0]
    first_imu = events.index(("imu", None))
    assert ("request", ["use_sim_time"]) in events[:first_imu], (events[:5], output[-2000:])


def test_the_probe_starts_the_traffic_once_the_estimator_wrote_to_it(ros_node, ros_processes, tmp_path):
    """Issue 18: the node under test's first message to the probe opens the probe's shared-memory port, which can
    hold it 333 ms; in its first output the sets queued meanwhile went stale. The benchmark's wait before the traffic
    ends only once the probe has the estimator's output publisher and a /diagnostics message from it."""
    from diagnostic_msgs.msg import DiagnosticArray

    params = tmp_path / "params.yaml"
    params.write_text(node_latency.parameters_yaml(node_latency.load_by_name("arm")))
    node = ros_processes.start("estimator", "--ros-args", "--params-file", str(params))
    diagnostics = []
    ros_node.node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10, raw=True)
    output_topic = f"{node_latency.NAMESPACE}/estimated/joint_states"
    seen = {}

    def wait() -> None:
        node_latency.wait_for_node_under_test(ros_node.node, output_topic, lambda: bool(diagnostics), node.is_running,
                                              time.monotonic() + 120.0)
        seen["diagnostics"] = len(diagnostics)
        seen["publishers"] = ros_node.node.count_publishers(output_topic)

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    ros_node.spin_until(lambda: not waiting.is_alive(), "the wait for the node under test", timeout=150.0)
    assert node.is_running(), node.output()
    assert seen["publishers"] >= 1 and seen["diagnostics"] >= 1, seen
