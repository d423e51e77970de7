"""Two controllers for real (issue 32): the primary crashes in the middle of a scale-out, the backup takes over, the
primary comes back and takes control back — with jobs queued and running, and the plugin's state kept.

One module-scoped local cloud of configs/failover.yaml (`controller.count: 2`): two controller machines booted from
the same controller user data (the backup with ES_CONTROLLER_INDEX=1), each with its own address, host name, munged,
slurmctld, boot watch, exporter; one StateSaveLocation and one plugin state directory on the shared file system. The
cluster managers are driven one cycle at a time (`slurm-clustermgr --once`) on the controller a step names, so the
test sees which one acts. Asserted on Slurm (scontrol ping, sinfo, sacct) and on the emulated EC2: every job
COMPLETED, no orphan, no node launched twice, no node bound to a dead instance, the fleet stop of one controller
undone by the other, the protected pool and the capacity cool-down the primary recorded honoured by the backup.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from elastic_slurm.cli import main
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from slurm_plugin.controller_state import controller_state_dir
from slurm_plugin.naming import fleet_parameter
from tests.e2e.conftest import module_cloud, plugin_events

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "failover.yaml"
STATE_DIR = Path("/var/tmp/elastic-slurm-failover-e2e")
PYTHON = "/opt/elastic-slurm/venv/bin/python"
COOLED_AZ = "us-east-1a"  # the primary records a capacity cool-down here: nothing of `small` may launch in it


@pytest.fixture(scope="module")
def fo(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """A local cloud with a primary and a backup controller, always torn down; logs kept only after a failure."""
    with module_cloud(request, CONFIG, STATE_DIR, "failover e2e") as cloud:
        yield cloud


def _hosts(cloud: LocalCloud) -> tuple[str, str]:
    first, second = cloud.info().controller_hosts
    return first, second


def _address(host: str) -> str:
    return host.removeprefix("ip-").replace("-", ".")


def _saved_at(state_file: Path) -> float:
    """When slurmctld last saved `state_file`, 0 while it has none. A save renames the file to `.old` before it renames
    `.new` into place (save_buf_to_state, state_save.c), so for a moment there is no file: that reads as not saved."""
    try:
        return state_file.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _manager_once(cloud: LocalCloud, index: int, orphan_grace: int = 300) -> CompletedProcess[str]:
    """One cluster-manager cycle on controller `index`, as its unit runs it (user slurm, the controller role)."""
    cmd = ["/opt/elastic-slurm/bin/slurm-clustermgr", "--once", "--manifest", str(cloud.layout.manifest),
           "--orphan-grace", str(orphan_grace)]  # fmt: skip
    env = {**cloud.principals().controller.env(), "AWS_DEFAULT_REGION": "us-east-1"}
    return cloud.on_controller(cmd, user="slurm", env=env, index=index)


def _plugin_python(cloud: LocalCloud, index: int, code: str) -> str:
    """Python with the plugin's modules on controller `index` as slurm (what its plugin programs run as)."""
    prelude = f"import time\nfrom slurm_plugin.manifest import load_manifest\nm = load_manifest({str(cloud.layout.manifest)!r})\n"
    done = cloud.on_controller([PYTHON, "-c", prelude + code], user="slurm", index=index)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _metric(url: str, name: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as answer:
        text = answer.read().decode()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def _partitions(cloud: LocalCloud) -> dict[str, str]:
    out = cloud.slurm("sinfo", "-h", "-o", "%R %a", check=False)
    return dict(line.split() for line in out.splitlines() if line.strip())


def _in_charge(cloud: LocalCloud) -> bool:
    """Some slurmctld is in control: a standby backup answers `scontrol ping` but refuses sinfo's RPC."""
    return cloud.slurm("scontrol", "show", "partition", check=False, timeout=60) != ""


def _job_fields(cloud: LocalCloud, job: str) -> dict[str, str]:
    out = cloud.slurm("scontrol", "show", "job", job, "--oneliner", check=False)
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


def test_two_controllers_boot_from_one_user_data_and_only_the_primary_acts(
    fo: LocalCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _hosts(fo)
    assert first != second and _address(first) != _address(second)
    assert fo.controller_roles() == {first: "acting", second: "standby"}
    alive = fo.running_daemons()
    for name in ("slurmctld", "munged", "bootwatch", "exporter"):
        assert alive[name] and alive[f"{name}@1"], name
    assert alive["slurmdbd"] and not alive["slurmdbd@1"]  # the primary hosts slurmdbd
    # `local status` lists both controllers' daemons and their roles
    assert main(["local", "status", "--state-dir", str(fo.layout.root)]) == 0
    printed = capsys.readouterr().out
    assert f"controllers: {first} acting, {second} standby" in printed and "slurmctld@1" in printed, printed
    # the backup's manager stands by; it says so once
    standby = _manager_once(fo, 1)
    assert standby.returncode == 0, standby.stderr
    assert f"{second}: not the acting controller: standing by" in (fo.layout.log / "clustermgr.log").read_text()
    # each exporter says which controller acts
    port = fo.info().ports["exporter"]
    gauge = "elastic_slurm_controller_acting"
    assert _metric(f"http://127.0.0.1:{port}/metrics", gauge) == f'{gauge}{{host="{first}"}} 1.0'
    assert _metric(f"http://{_address(second)}:{port}/metrics", gauge) == f'{gauge}{{host="{second}"}} 0.0'
    # the plugin's state directory is the one on the controllers' own file system, for both controllers; no
    # compute node sees that file system (its view has the shared one only)
    state = fo.layout.plugin_state
    assert state.is_symlink() and state.resolve().is_relative_to(fo.layout.controller_state.resolve())


def test_failover_in_a_scale_out_and_failback_lose_no_job_and_keep_the_plugin_state(fo: LocalCloud) -> None:
    first, second = _hosts(fo)
    assert fo.controller_roles()[first] == "acting"
    # state the primary records before it crashes: a capacity cool-down of `small` in one AZ, `spare` protected
    _plugin_python(
        fo,
        0,
        f"""
from slurm_plugin.powersave import capacity, protection
capacity.add_cooling(m.state_dir, [("cpu-small", {COOLED_AZ!r})], time.time(), 900)
pool = next(p for p in m.pools if p.key == "spare-node")
print(protection.record_failures(m.state_dir, [(pool, 1)], 1, time.time()))
""",
    )
    # Slurm's first full state save comes PERIODIC_CHECKPOINT (300 s) after slurmctld starts; until then a takeover
    # of a new cluster is fatal for the backup ("No Assoc usage file ... to recover"): the primary's boot (controller
    # user data) forced one save, as a running cluster has it
    state_save = fo.layout.on_controller_state(controller_state_dir("fo", "slurmctld"))
    fo.wait_until(lambda: _saved_at(state_save / "assoc_usage") > 0, 10, "the boot's state save")
    jobs = [fo.sbatch("-N1", "-p", "cpu", wrap="sleep 20") for _ in range(4)]
    spare_job = fo.sbatch("-N1", "-p", "spare", wrap="true")

    # ---- the scale-out starts; the operator stops the fleet meanwhile, applied by the primary's manager
    fo.wait_until(lambda: any(i.pool == "cpu-small" for i in fo.instances(LIVE)), 60, "the scale-out started")
    ssm = fo.aws().client("ssm", "us-east-1")
    ssm.put_parameter(Name=fleet_parameter("fo"), Value="STOPPED", Type="String", Overwrite=True)
    assert _manager_once(fo, 1).returncode == 0  # the backup stands by
    assert set(_partitions(fo).values()) == {"up"}
    assert _manager_once(fo, 0).returncode == 0
    partitions = _partitions(fo)
    assert set(partitions.values()) == {"down"}
    # the crash comes after slurmctld saved every partition down. Its state-save thread writes part_state at most
    # every 5 s (SAVE_MAX_WAIT, state_save.c), so a save during the cycle may hold only the first partitions' change
    # (seen under load: the backup then recovered one partition up). A save that ends 2 s after the cycle began after
    # it (a save writes a small file in milliseconds) and holds every change; a no-op update asks for one.
    after = time.time() + 2
    time.sleep(2)
    fo.slurm("scontrol", "update", f"PartitionName={sorted(partitions)[0]}", "State=DOWN")
    fo.wait_until(lambda: _saved_at(state_save / "part_state") >= after, 30, "partition state saved")

    # ---- the primary crashes in the middle of the scale-out: instances launched, not every node up yet
    killed = fo.crash_controller(0)
    crashed = time.monotonic()
    fo.wait_until(lambda: _in_charge(fo) and fo.controller_roles().get(second) == "acting", 90, f"{second} in charge")
    print(f"failover: the backup in charge {time.monotonic() - crashed:.1f} s after the crash (killed {killed})")
    assert fo.controller_roles()[first] == "down"
    assert set(_partitions(fo).values()) == {"down"}  # Slurm's own state: the takeover recovers partition states

    # ---- fleet start, applied by the backup from the fleet state the primary wrote; the primary's manager (its host
    # is still up) stands by
    ssm.put_parameter(Name=fleet_parameter("fo"), Value="RUNNING", Type="String", Overwrite=True)
    assert _manager_once(fo, 0).returncode == 0
    assert set(_partitions(fo).values()) == {"down"}
    assert _manager_once(fo, 1).returncode == 0
    assert set(_partitions(fo).values()) == {"up"}

    # ---- the primary comes back and takes control back (the backup saves the state and stands by)
    fo.start_unit(0, "slurmctld.service")
    back = time.monotonic()
    fo.wait_until(lambda: _in_charge(fo) and fo.controller_roles() == {first: "acting", second: "standby"}, 120,
                  f"{first} in charge again")  # fmt: skip
    print(f"failback: the primary in charge {time.monotonic() - back:.1f} s after its slurmctld started")
    assert _manager_once(fo, 1).returncode == 0 and _manager_once(fo, 0).returncode == 0

    # ---- the pool protected on the primary stayed protected: its node DOWN with the reason, nothing launched
    reason = fo.slurm("sinfo", "-h", "-N", "-n", "spare-node-1", "-o", "%t|%E", check=False).strip()
    fo.wait_until(
        lambda: "ProtectedMode" in fo.slurm("sinfo", "-h", "-N", "-n", "spare-node-1", "-o", "%E", check=False),
        60,
        "spare-node-1 DOWN in protected mode",
    )
    assert not [i for i in fo.instances() if i.pool == "spare-node"], reason
    cleared = fo.on_controller([str(fo.layout.bin / "slurm-pool-protection"), "--clear", "spare-node"], user="slurm")
    assert cleared.returncode == 0, cleared.stderr

    # ---- no job lost
    records = fo.wait_jobs_done([*jobs, spare_job], timeout=300)
    assert {r.job_id for r in records} == {*jobs, spare_job}  # every job is in the accounting
    # slurmctld's own final word (it keeps a finished job for MinJobAge, 300 s): every job ran to its end. (sacct may
    # still show a requeued job's last run as PENDING after the failback; docs/operations.md)
    finals = {job: _job_fields(fo, job) for job in [*jobs, spare_job]}
    assert all(f.get("JobState") == "COMPLETED" and f.get("ExitCode") == "0:0" for f in finals.values()), finals

    # ---- the cool-down the primary recorded held on the backup too
    small = [i for i in fo.instances() if i.pool == "cpu-small"]
    assert small and all(i.availability_zone != COOLED_AZ for i in small), small

    # ---- no node launched twice, no node bound to a dead instance
    launched: dict[str, str] = {}  # node -> its instance, from `node_launched` until that instance's `terminated`
    for event in plugin_events(fo):
        node, instance = str(event.get("node", "")), str(event.get("instance_id", ""))
        if event.get("event") == "node_launched":
            assert node not in launched or launched[node] == instance, f"{node}: {launched[node]} and {instance}"
            launched[node] = instance
        elif event.get("event") == "terminated":
            launched = {n: i for n, i in launched.items() if i != instance}

    def bound_to_dead() -> list[str]:
        """Nodes the node map or NodeAddr binds to no live instance. A node powering down passes through such a state
        for a moment (its instance is terminated first, its NodeAddr reset and its map entry removed after): the
        check waits for it to pass; a binding that stays fails."""
        live = {i.instance_id: i.private_ip for i in fo.instances(LIVE)}
        node_map = json.loads((fo.layout.plugin_state / "nodes.json").read_text() or "{}")
        dead = [
            f"{node} -> {entry['instance_id']}" for node, entry in node_map.items() if entry["instance_id"] not in live
        ]
        addresses = fo.node_addrs()
        return dead + [
            f"{node} at {addr}" for node, addr in addresses.items() if addr != node and addr not in live.values()
        ]

    fo.wait_until(lambda: not bound_to_dead(), 30, "every node bound to a live instance", bound_to_dead)

    # ---- no orphan: the manager ends what the crashed worker launched but never bound, then everything powers down
    fo.wait_until(lambda: _manager_once(fo, 0, orphan_grace=5).returncode == 0 and not fo.orphan_instances(), 90,
                  "no orphan instance")  # fmt: skip
    fo.wait_all_powered_down(timeout=120)
