"""Fault soak of the power-save plugin (issue 14): many overlapping resumes and suspends, some workers killed, while
the emulated EC2 throws capacity errors, throttles and loses answers. Bounded (ROUNDS), seeded (reproducible plan;
process timing still varies), counters printed.

Slurm is played as slurmctld behaves: after each round's SuspendTimeout, every node it asked to suspend is powered
down with its NodeAddr reset, whatever the (maybe killed) suspend worker did. What Slurm would do afterwards is then
done once: ResumeTimeout runs resume-fail for every node still powering up that nobody addressed, and one
cluster-manager pass (orphan grace 0) terminates what no node claims. Then, with no fault left:
0 orphan instances, 0 double launches (every live instance behind exactly one node, no node behind two), 0 wrong
terminations (every addressed node's instance is alive), every node either up and bound or powered down; and the
manager only had to clean up after killed workers (each orphan's launch-request tag names a killed resume worker,
or it is the instance of a node whose suspend worker was killed).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import CapacityFault, Faults
from slurm_plugin.manager import model
from slurm_plugin.manager.reconcile import reconcile
from slurm_plugin.manifest import TAG_LAUNCH_REQUEST, TAG_POOL, Manifest, write_manifest
from slurm_plugin.powersave import state
from tests.aws.plugin_env import HOME_AZS, TYPES, ec2_for, live_instances
from tests.aws.soak_post_mortem import node_history
from tests.aws.soak_worker import FileSlurm

ROUNDS = 24
NODES = [f"cpu-c7i-{i}" for i in range(1, 31)] + [f"spot-s-{i}" for i in range(1, 9)]
SEED = 14
SUMMARY_KEY = "elastic-slurm/fault-soak"  # tests/conftest.py prints it in the run's summary


def _faults(rng: random.Random) -> Faults:
    capacity = []
    if rng.random() < 0.5:
        capacity.append(CapacityFault(availability_zone=rng.choice(HOME_AZS)))
    if rng.random() < 0.3:
        capacity.append(CapacityFault(instance_type=rng.choice(TYPES)))
    lost = {a: rng.randint(1, 2) for a in ("CreateFleet", "RunInstances", "DescribeInstances") if rng.random() < 0.3}
    if rng.random() < 0.2:
        lost["TerminateInstances"] = 1
    return Faults(capacity=tuple(capacity), throttle_every=rng.choice([0, 0, 5, 9]), lose_responses=lost)


def _start(kind: str, manifest_file: Path, slurm_file: Path, request: str, nodes: list[str]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.aws.soak_worker", kind, str(manifest_file), str(slurm_file), request, *nodes]
    with open(manifest_file.parent / f"{request}.err", "wb") as errors:  # kept for a failing run's post-mortem
        return subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[2], stdout=errors, stderr=errors)


def _manager_pass(manifest: Manifest, slurm: FileSlurm, aws: EmulatedAws) -> dict[str, str]:
    """One cluster-manager reconcile with orphan grace 0; executes its orphan terminations; instance id -> the
    request that launched it."""
    table = slurm.snapshot()
    nodes = []
    for name in NODES:
        addr = table.get(name, {}).get("addr")
        flags = frozenset({"CLOUD"} if addr else {"CLOUD", "POWERED_DOWN"})
        nodes.append(model.Node(name, "IDLE", flags, addr))
    ec2 = ec2_for(aws)
    found = [
        i
        for region in ("us-east-1", "us-west-2")
        for i in ec2.cluster_instances(region, manifest.cluster, [p.key for p in manifest.pools])
    ]
    now = datetime.now(UTC)
    instances = [
        model.Instance(
            i.instance_id, i.region, "running", i.private_ip, now, manifest.cluster, i.tags.get(TAG_POOL, "")
        )
        for i in found
    ]
    settings = model.Settings(cluster=manifest.cluster, pools=tuple(manifest.pools), orphan_grace=timedelta(0))
    orphans = [a for a in reconcile(nodes, instances, datetime.now(UTC), settings) if a.counter == "orphans_terminated"]
    for action in orphans:
        ec2.terminate(action.region or "us-east-1", [action.target])
    launched_by = {i.instance_id: i.tags.get(TAG_LAUNCH_REQUEST, "").rsplit("-p", 1)[0] for i in found}
    return {a.target: launched_by.get(a.target, "") for a in orphans}


def test_fault_soak_leaves_no_orphan_no_double_launch_and_no_wrong_termination(
    aws: EmulatedAws, manifest: Manifest, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    rng = random.Random(SEED)
    manifest = manifest.model_copy(update={"capacity_cooldown_seconds": 2, "boot_failure_limit": 0})
    manifest_file, slurm_file = tmp_path / "manifest.json", tmp_path / "slurm.json"
    write_manifest(manifest, manifest_file)
    slurm = FileSlurm(slurm_file)
    counters = {"resumes": 0, "suspends": 0, "killed": 0, "resume_fails": 0}
    killed: set[str] = set()
    killed_suspend: set[str] = set()  # nodes whose last request was a suspend whose worker was killed
    for round_no in range(ROUNDS):
        aws.set_faults(_faults(rng))
        table = slurm.snapshot()
        bound = [n for n in NODES if table.get(n, {}).get("addr")]
        workers: dict[str, subprocess.Popen[bytes]] = {}
        requests: dict[str, tuple[str, list[str]]] = {}
        resuming: set[str] = set()
        suspending: set[str] = set()
        for op in range(3):
            request = f"soak{round_no}-{op}"
            idle = [n for n in bound if n not in resuming | suspending]  # Slurm: never resume and suspend at once
            if idle and rng.random() < 0.4:
                nodes = rng.sample(idle, min(len(idle), rng.randint(1, 6)))
                kind = "suspend"
                suspending.update(nodes)
            else:
                nodes = rng.sample([n for n in NODES if n not in suspending], rng.randint(1, 10))  # some already up
                kind = "resume"
                resuming.update(nodes)
            requests[request] = (kind, nodes)
            if kind == "resume":
                slurm.power_up(nodes)
            workers[request] = _start(kind, manifest_file, slurm_file, request, nodes)
            counters[f"{kind}s"] += 1
        if rng.random() < 0.5:  # a worker dies mid-flight (OOM killer, controller reboot)
            time.sleep(rng.uniform(0.2, 2.0))
            request = rng.choice(sorted(workers))
            if workers[request].poll() is None:
                workers[request].send_signal(signal.SIGKILL)
                killed.add(request)
        for worker in workers.values():
            worker.wait(timeout=180)
        for request, (kind, nodes) in requests.items():
            if kind == "suspend" and request in killed:
                killed_suspend.update(nodes)
            else:
                killed_suspend.difference_update(nodes)
        slurm.suspend_timeout(suspending)
    counters["killed"] = len(killed)
    aws.clear_faults()
    # Slurm's ResumeTimeout: every node still powering up that nobody addressed gets resume-fail (not those the plugin
    # powered down itself: no capacity)
    table = slurm.snapshot()
    unaddressed = [n for n, e in table.items() if e.get("power") == "powering_up" and not e.get("addr")]
    if unaddressed:
        _start("resume-fail", manifest_file, slurm_file, "soak-timeout", unaddressed).wait(timeout=180)
        counters["resume_fails"] = len(unaddressed)
    mapped = {e["instance_id"]: n for n, e in state.node_map(manifest.state_dir).items()}
    fixed = _manager_pass(manifest, slurm, aws)
    counters["orphans_fixed_by_manager"] = len(fixed)

    def history(marks: dict[str, str]) -> str:  # node -> an address or instance id of it
        state_dir, log_file = Path(manifest.state_dir), Path(manifest.log_file)
        return "\n".join(node_history(n, slurm_file, state_dir, log_file, [m]) for n, m in marks.items())

    table = slurm.snapshot()
    live = {i["PrivateIpAddress"]: i["InstanceId"] for i in live_instances(aws, manifest.cluster)}
    addressed = {n: e["addr"] for n, e in table.items() if e.get("addr")}
    counters.update(live_instances=len(live), nodes_up=len(addressed))
    line = "fault soak: " + " ".join(f"{k}={v}" for k, v in counters.items())
    print(line)
    assert pytestconfig.cache is not None
    pytestconfig.cache.set(SUMMARY_KEY, {"line": line, "at": time.time()})  # printed at the end of the run
    assert counters["resumes"] > 0 and counters["suspends"] > 0 and counters["killed"] > 0
    # the only instances left for the manager are those of resume workers killed between launch and binding, and
    # those of nodes whose suspend worker was killed before it terminated them (Slurm powered the nodes down anyway)
    unexplained = {i: r for i, r in fixed.items() if r not in killed and mapped.get(i) not in killed_suspend}
    assert unexplained == {}, f"orphans of live workers: {unexplained}\n" + history(
        {mapped.get(i, "(no node)"): i for i in unexplained}
    )
    wrong = [n for n, ip in addressed.items() if ip not in live]  # a node whose instance someone else terminated
    assert wrong == [], f"wrong terminations: {wrong}\n" + history({n: addressed[n] for n in wrong})
    assert len(set(addressed.values())) == len(addressed), "two nodes behind one instance"
    orphans = sorted(set(live) - set(addressed.values()))
    assert orphans == [], f"orphan or doubly launched instances: {orphans}"
    for node in NODES:  # every node either up and bound, or powered down (with a reason when a launch failed)
        entry = table.get(node, {"addr": None})
        assert entry.get("addr") in live or entry.get("addr") is None
