"""Smoke test of the start-up benchmark (benchmarks/cold_start.py): fresh `dofkit replay` interpreters and fresh
estimator nodes over real DDS, end to end on a short recording, in a process of its own. No timing is asserted: the
test checks that every phase is printed as a finite, non-negative time, that the phases of a replay add up to its
time to the first estimate, that a node's subscriptions match no earlier than its graph lists the publisher, that
each discovery setting puts the profile in the processes it names, and that each budget line carries a verdict."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_cold_start_benchmark_runs_end_to_end():
    finished = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "cold_start.py"), "--repeat", "1", "--duration", "1"],
        capture_output=True, text=True, timeout=400, cwd=REPO)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    out = finished.stdout
    replay = re.search(r"dofkit replay \(1 s of input\): startup ([0-9.]+), imports ([0-9.]+), kernels "
                       r"(-?[0-9.]+), estimate ([0-9.]+), to_first ([0-9.]+) s", out)
    assert replay, out
    startup, imports, kernels, estimate, to_first = (float(x) for x in replay.groups())
    assert min(startup, imports, estimate) >= 0 and to_first > 0
    # to_first = start-up + imports + the first replay (= kernel-cache load + a replay), up to rounding
    assert abs(startup + imports + kernels + estimate - to_first) < 0.01, out
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import LABELS, WHERE

    for setting, label in LABELS.items():
        node = re.search(rf"estimator node \(arm, 4 IMUs at 500 Hz; {label}\): startup ([0-9.]+), imports ([0-9.]+), "
                         r"construction (-?[0-9.]+), kernels ([0-9.]+), ready ([0-9.]+), discovery ([0-9.]+), "
                         r"latency ([0-9.]+), to_first ([0-9.]+) s", out)
        assert node, out
        startup, imports, construction, kernels, ready, discovery, latency, to_first = (float(x) for x in node.groups())
        assert min(startup, imports, construction, kernels, discovery, latency) >= 0 and imports > 0, out
        # ready = the node's own phases; the first estimate = ready + the wait for discovery + the first cycle
        assert abs(startup + imports + construction + kernels - ready) < 0.01, out
        assert abs(ready + discovery + latency - to_first) < 0.01, out
        # when the node's graph first listed the publisher, and its subscriptions matched it: one time per run, after
        # its participant's creation; a subscription matches once it exists, so never before the publisher is known
        block = out[node.end():]
        seen = re.search(r"the publisher in the node's graph, after the node's participant was created \(([0-9.]+) s "
                         r"after the spawn\): ([0-9.]+) s", block)
        matched = re.search(r"its IMU subscriptions matched, after the node's participant was created \(([0-9.]+) s "
                            r"after the spawn\): ([0-9.]+) s", block)
        announced = re.search(r"the publisher's next announcement \(Fast DDS's schedule\), after the node's "
                              r"participant was created \([0-9.]+ s after the spawn\): ([0-9.]+) s", block)
        assert seen and matched and announced, block
        assert float(seen.group(1)) == float(matched.group(1)) <= ready, block
        assert float(matched.group(2)) >= float(seen.group(2)) - 0.01, block
        assert re.search(rf"(PASS|MISS)  fresh estimator node \({WHERE[setting]}\) to its first "
                         r"estimate: [0-9.]+ s", out), out
        assert re.search(rf"(PASS|MISS)  fresh estimator node \({label}\), its own part to its first estimate "
                         r"without the wait for discovery: [0-9.]+ s", out), out
    assert re.search(r"(PASS|MISS)  fresh dofkit replay to its first estimate: [0-9.]+ s", out), out
    for running in ("on Fast DDS defaults", "with the profile"):
        assert re.search(rf"(PASS|MISS)  fresh estimator node beside running processes {running}, any node setting "
                         r"to its first estimate: [0-9.]+ s .*worst of 2: ", out), out


def test_the_fast_discovery_profile_is_read_by_this_fast_dds(tmp_path):
    # Fast DDS reads its default profile from FASTRTPS_DEFAULT_PROFILES_FILE (2.x) or FASTDDS_DEFAULT_PROFILES_FILE
    # (3), silently ignoring the other: a broken profile named the benchmark's way must be reported by the middleware
    # (so the variable is read), and the shipped profile must load without a complaint.
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import FAST_DISCOVERY_PROFILE, discovery_environment

    child = "import rclpy; rclpy.init(); rclpy.create_node('profile_check').destroy_node(); rclpy.shutdown()"
    environment = discovery_environment("fast")
    shipped = subprocess.run([sys.executable, "-c", child], env=environment, capture_output=True, text=True,
                             timeout=60)
    # (Fast DDS logs to stdout when it is not a terminal, else to stderr)
    assert shipped.returncode == 0 and "XMLPARSER" not in shipped.stdout + shipped.stderr, shipped.stdout
    broken = tmp_path / "broken.xml"
    broken.write_text(FAST_DISCOVERY_PROFILE.read_text()[:200])
    environment.update({variable: str(broken) for variable in environment if variable.endswith("_PROFILES_FILE")})
    complaint = subprocess.run([sys.executable, "-c", child], env=environment, capture_output=True, text=True,
                               timeout=60)
    said = complaint.stdout + complaint.stderr
    assert "XMLPARSER" in said and str(broken) in said, said
    variables = {"FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE"}
    assert not variables & set(discovery_environment("default"))


def test_each_discovery_setting_profiles_the_processes_it_names():
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import DISCOVERY, FAST_DISCOVERY_PROFILE, WHERE, discovery_environment

    variables = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
    for setting in DISCOVERY:
        for role in ("node", "publisher"):
            environment = discovery_environment(setting, role)
            profiled = all(environment.get(v) == str(FAST_DISCOVERY_PROFILE) for v in variables)
            assert profiled or not any(v in environment for v in variables), (setting, role)
            # the budget line says what each process had: "... profile in the node only, Fast DDS defaults in the
            # publisher", "... profile in publisher and node", "Fast DDS defaults in publisher and node"
            said = WHERE[setting]
            kind = "fast-discovery profile" if profiled else "Fast DDS defaults"
            assert f"{kind} in the {role}" in said or f"{kind} in publisher and node" in said, (setting, role, said)


def test_budget_line_takes_the_worst_process():
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import budget_line

    line = budget_line("dofkit replay", [{"to_first": 1.2}, {"to_first": 2.5}, {"to_first": 0.9}])
    assert line.startswith("MISS") and "2.50 s = 1.25x the budget" in line and "worst of 3: 1.20 2.50 0.90 s" in line
    assert budget_line("estimator node", [{"to_first": 2.0}]).startswith("PASS")


def test_verdicts_group_the_runs_by_what_the_running_processes_had():
    sys.path.insert(0, str(REPO))
    from benchmarks.cold_start import verdict_lines

    runs = {"default": [{"to_first": 3.3}], "node": [{"to_first": 1.1}], "publisher": [{"to_first": 1.2}],
            "fast": [{"to_first": 1.4}, {"to_first": 1.0}]}
    defaults, profiled = verdict_lines(runs)
    assert defaults.startswith("MISS") and "running processes on Fast DDS defaults" in defaults
    assert "worst of 2: 3.30 1.10 s" in defaults
    assert profiled.startswith("PASS") and "running processes with the profile" in profiled
    assert "worst of 3: 1.20 1.40 1.00 s" in profiled
    (only,) = verdict_lines({"publisher": [{"to_first": 2.5}]})  # a setting not measured gives no line
    assert only.startswith("MISS") and "with the profile" in only and "worst of 1: 2.50 s" in only
