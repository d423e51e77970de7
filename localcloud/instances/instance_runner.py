"""The instance runner daemon: "boots" each emulated EC2 instance of the cluster and stops it when EC2 ends it.

It lists the cluster's instances in every region (one filtered DescribeInstances per region) whenever EC2 changed —
the emulated AWS's change feed says so (localcloud/instances/ec2_changes.py) — and at least every 5 s. A new
instance is booted after the configured delay: its user data runs in a fresh time namespace (the machine's boot
clock, from `fresh-boot-exec`) and UTS namespace (its EC2 host name), with environment overrides instead of IMDS, and
runs the real compute-node bootstrap (assets/bootstrap/elastic-slurm-node-bootstrap), which finds its Slurm node and
starts Slurm's slurmd.service through the systemctl stand-in; every process of the machine, slurmd restarted by
Restart=on-failure included, shares that boot clock. An instance that EC2 reports shutting-down/terminated (by
SuspendProgram, ResumeFailProgram or an emulated spot interruption) has its whole process tree killed: every process
in its time namespace, in its session and in its units' cgroups. Boot failures (rate, or a requested count) leave an
instance running in EC2 with nothing booting on it, as a broken AMI would.

    python -m localcloud.instances.instance_runner --state-dir DIR
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3

from localcloud.aws import cloud_iam
from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS
from localcloud.image.slurm_root import BIN_IN_ROOT, BIND_SOURCE_SO
from localcloud.instances import enter, fake_sysfs, machines
from localcloud.instances.boot_data import BootData, write_user_data
from localcloud.instances.ec2_changes import IDLE_SECONDS, MIN_GAP_SECONDS, RETRY_SECONDS, ChangeFeed, Interrupted
from localcloud.instances.login_nodes import login_view
from localcloud.instances.runner_logic import Control, Decisions, Kind, Observed, Tracked, decide
from localcloud.layout import Layout
from localcloud.services import procs
from localcloud.services.daemons import CLOUD_MARKER
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL
from slurm_plugin.naming import TAG_LOGIN_POOL

LOG = logging.getLogger("instance-runner")
NAMESPACE_LOOK_SECONDS = 0.1  # between looks while a booting instance's time namespace is not known yet
# the boot's variables the systemctl stand-in passes on to the units it starts (ES_LOCAL_MACHINE_ENV): what stands in
# for the machine (its address, id) and for its IMDS (the instance profile's keys, the endpoint)
MACHINE_ENV = (
    "LD_PRELOAD,ELASTIC_SLURM_BIND_ADDR,ELASTIC_SLURM_INSTANCE_ID,"
    "AWS_ENDPOINT_URL,AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY,AWS_SESSION_TOKEN"
)


def ec2_client(endpoint_url: str, region: str, credentials: dict[str, str]) -> Any:
    """A boto3 EC2 client for the emulated AWS, signing with `credentials` (AWS_ACCESS_KEY_ID/..._SECRET_...)."""
    return boto3.client(
        "ec2",
        region_name=region,
        endpoint_url=endpoint_url,
        aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
    )


def read_control(path: Path) -> Control:
    """The knobs file; defaults when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Control()
    return Control(
        boot_delay=float(data.get("boot_delay", 2.0)),
        boot_failure_rate=float(data.get("boot_failure_rate", 0.0)),
        fail_boots=int(data.get("fail_boots", 0)),
    )


def observe(clients: dict[str, Any], cluster: str) -> list[Observed] | None:
    """The cluster's instances in every region; None when the emulated AWS did not answer."""
    found = []
    try:
        for region, ec2 in clients.items():
            pages = ec2.get_paginator("describe_instances").paginate(
                # compute and login instances (they carry their pool or login pool): `local up` boots the controllers
                Filters=[
                    {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
                    {"Name": "tag-key", "Values": [TAG_POOL, TAG_LOGIN_POOL]},
                ]
            )
            for page in pages:
                for reservation in page["Reservations"]:
                    for inst in reservation["Instances"]:
                        found.append(
                            Observed(
                                instance_id=inst["InstanceId"],
                                state=inst["State"]["Name"],
                                private_ip=inst.get("PrivateIpAddress", ""),
                                region=region,
                                availability_zone=inst.get("Placement", {}).get("AvailabilityZone", ""),
                                instance_type=inst.get("InstanceType", ""),
                                pool=_tag(inst, TAG_POOL),
                                login_pool=_tag(inst, TAG_LOGIN_POOL),
                            )
                        )
    except Exception as exc:  # the emulated AWS may be restarting or injecting faults: try again next loop
        LOG.warning("describe_instances failed: %s", exc)
        return None
    return found


def _tag(instance: dict[str, Any], key: str) -> str:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), "")


class Runner:
    """State and I/O of the daemon."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        cloud = json.loads(layout.cloud_json.read_text())
        self.cluster: str = cloud["cluster"]
        self.node_wait = int(cloud.get("resume_timeout", 300))
        self.root = Path(cloud["slurm_root"])
        self.user_data = BootData(values=dict(cloud["compute_user_data"]))
        # each pool's launch template adds its own values (ES_POOL, custom actions): stacks.user_data.pool_values
        self.pool_user_data: dict[str, dict[str, str]] = dict(cloud.get("pool_user_data", {}))
        self.login_user_data: dict[str, dict[str, str]] = dict(cloud.get("login_user_data", {}))
        self.aws_endpoint = str(cloud["aws_endpoint_url"])
        # the runner watches EC2 as the harness (admin); instances boot with the compute role's keys
        principals = cloud_iam.load(layout)
        self.harness_keys = principals.admin.env() if principals else DUMMY_CREDENTIALS
        self.instance_keys = principals.compute.env() if principals else DUMMY_CREDENTIALS
        self.login_keys = principals.login.env() if principals else DUMMY_CREDENTIALS
        self.clients = {
            region: ec2_client(cloud["aws_endpoint_url"], region, self.harness_keys) for region in cloud["regions"]
        }
        self.tracked: dict[str, Tracked] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.namespaces: dict[str, str] = {}
        self.failures_used = 0
        self.running = True
        (layout.log / "instances").mkdir(parents=True, exist_ok=True)

    def next_wake(self, now: float) -> float:
        """Seconds the next wait for an EC2 change may last: IDLE_SECONDS, or less when a tracked instance's boot
        delay ends before that (an EC2 instance boots when its boot time is over, not at the runner's next look), or
        while a booting instance's time namespace is not known yet (learnt while its first process runs: the user data
        ends within seconds, and stopping the instance needs the namespace)."""
        due = [t.boot_at - now for t in self.tracked.values() if not (t.booted or t.fail or t.stopped)]
        learning = [
            NAMESPACE_LOOK_SECONDS for i, p in self.procs.items() if i not in self.namespaces and p.poll() is None
        ]
        return max(0.02, min([IDLE_SECONDS, *due, *learning]))

    def loop_once(self) -> bool:
        """One look at EC2 and what follows from it; False when EC2 did not answer."""
        observed = observe(self.clients, self.cluster)
        for proc in self.procs.values():
            proc.poll()  # reap finished bootstraps
        self._learn_namespaces()
        if observed is None:
            return False
        now = time.time()
        draws = {o.instance_id: random.random() for o in observed if o.instance_id not in self.tracked}
        decisions: Decisions = decide(
            observed, self.tracked, read_control(self.layout.runner_control), self.failures_used, now, draws
        )
        self.failures_used += decisions.requested_failures_used
        by_id = {o.instance_id: o for o in observed}
        for action in decisions.actions:
            if action.kind is Kind.TRACK:
                self.tracked[action.instance_id] = Tracked(by_id[action.instance_id], now, action.boot_at, action.fail)
                LOG.info(
                    "new instance %s (%s, %s, %s)%s",
                    action.instance_id,
                    by_id[action.instance_id].private_ip,
                    by_id[action.instance_id].availability_zone,
                    by_id[action.instance_id].instance_type,
                    " — this boot will FAIL" if action.fail else "",
                )
            elif action.kind is Kind.BOOT:
                self._boot(self.tracked[action.instance_id])
            elif action.kind is Kind.STOP:
                self._stop(action.instance_id)
        self._write_status(observed)
        return True

    def _boot(self, item: Tracked) -> None:
        """Run the user data of the instance's launch template (stacks/user_data.py) on the instance's view of the
        root, as root, as cloud-init would: it installs the munge key from the emulated Secrets Manager, starts
        munged, mounts the shared file system from the SSM mounts parameter, reads the controllers' address from it
        and execs the image's node bootstrap (configless slurmd) — or, on a login node, starts sackd (configless
        clients). IMDS and the instance profile are stood in for by the environment (private IP, instance id, the
        emulated endpoint and credentials)."""
        inst = item.observed
        login = bool(inst.login_pool)
        env = enter.user_env(
            enter.user(self.root, "root"),
            {
                "ELASTIC_SLURM_PRIVATE_IP": inst.private_ip,
                "ELASTIC_SLURM_INSTANCE_ID": inst.instance_id,
                "ELASTIC_SLURM_NODE_WAIT": str(self.node_wait),
                "ELASTIC_SLURM_HOSTNAME": machines.ec2_hostname(inst.private_ip),
                "ELASTIC_SLURM_BIND_ADDR": inst.private_ip,
                # what the systemctl stand-in hands to the units it starts (slurmd): the machine's address and id
                "ES_LOCAL_MACHINE_ENV": MACHINE_ENV,
                "AWS_ENDPOINT_URL": self.aws_endpoint,
                "ES_LOCAL_UNITS_SKIP": ",".join(machines.UNITS_NOT_RUN),
                # elastic-slurm-smt-off (disable_hyperthreading) writes to a copy of the host's CPU tree, not the host's
                "ES_SYSFS_CPU": fake_sysfs.cpu_tree(self.layout.machine_dir(inst.instance_id)),
                **(self.login_keys if login else self.instance_keys),
                CLOUD_MARKER: str(self.layout.root),
            },
        )
        if login:
            view = login_view(self.layout, self.root, inst.instance_id, inst.private_ip)
            values = self.login_user_data.get(inst.login_pool, {})
        else:
            view = machines.instance_view(self.layout, self.root, inst.instance_id, inst.private_ip)
            values = self.pool_user_data.get(inst.pool, {})
        user_data = BootData(values={**self.user_data.values, **values}, role="login" if login else "compute")
        write_user_data(self.layout.machine_dir(inst.instance_id) / "run" / "user-data", user_data)
        log = self.layout.log / "instances" / f"{inst.instance_id}.log"
        # inside the root only: connections leave from the instance's own address, as on EC2 (native/bind_source.c);
        # the machine has just booted: its own boot clock and host name for everything it runs (fresh-boot-exec)
        run = [
            "/usr/bin/env",
            f"LD_PRELOAD={BIND_SOURCE_SO}",
            f"{BIN_IN_ROOT}/fresh-boot-exec",
            "/bin/bash",
            "/run/user-data",
        ]
        proc = procs.spawn(enter.argv(view, run), log, env=env, cwd=self.layout.root)
        self.procs[inst.instance_id] = proc
        item.booted = True
        self._record(inst.instance_id)
        LOG.info("booting %s (pid %d, ip %s)", inst.instance_id, proc.pid, inst.private_ip)

    def _learn_namespaces(self) -> None:
        for instance_id, proc in self.procs.items():
            if instance_id in self.namespaces or proc.returncode is not None:
                continue
            # fresh-boot-exec's unshare moves the process into the new time namespace at its next exec (the user data)
            ns = procs.time_namespace(proc.pid)
            if ns and ns != procs.HOST_TIME_NS:
                self.namespaces[instance_id] = ns
                self._record(instance_id)

    def _record(self, instance_id: str) -> None:
        proc = self.procs.get(instance_id)
        record = {
            "instance_id": instance_id,
            "pid": proc.pid if proc else None,
            "time_ns": self.namespaces.get(instance_id, ""),
        }
        (self.layout.instances_dir / f"{instance_id}.json").write_text(json.dumps(record) + "\n")

    def _stop(self, instance_id: str) -> None:
        item = self.tracked[instance_id]
        item.stopped = True
        proc = self.procs.pop(instance_id, None)
        ns = self.namespaces.pop(instance_id, "")
        if proc is not None:
            stop_instance_processes(
                proc.pid, ns, instance_markers(instance_id, self.layout.root), unit_dir(self.layout, instance_id)
            )
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                LOG.warning("instance %s: pid %d did not exit", instance_id, proc.pid)
            LOG.info("instance %s ended in EC2: stopped its processes", instance_id)
        (self.layout.instances_dir / f"{instance_id}.json").unlink(missing_ok=True)

    def stop_all(self) -> None:
        for instance_id in list(self.procs):
            self._stop(instance_id)

    def _write_status(self, observed: list[Observed]) -> None:
        rows = []
        for inst in observed:
            item = self.tracked.get(inst.instance_id)
            rows.append(
                {
                    "instance_id": inst.instance_id,
                    "state": inst.state,
                    "region": inst.region,
                    "availability_zone": inst.availability_zone,
                    "instance_type": inst.instance_type,
                    "private_ip": inst.private_ip,
                    "booted": bool(item and item.booted),
                    "boot_failed": bool(item and item.fail),
                }
            )
        tmp = self.layout.state / "instances.json.tmp"
        tmp.write_text(json.dumps(rows, indent=1) + "\n")
        tmp.replace(self.layout.state / "instances.json")


def instance_markers(instance_id: str, cloud_root: Path) -> list[bytes]:
    """What identifies a process as part of this cloud's instance: its instance id, or this cloud's marker variable.

    The runner gives every instance ELASTIC_SLURM_INSTANCE_ID and ELASTIC_SLURM_LOCAL_CLOUD (slurmd and slurmstepd
    inherit them; job processes carry the submitter's ELASTIC_SLURM_LOCAL_CLOUD from the cloud's client environment).
    A recycled time-namespace or session id of anyone else's process therefore never matches.
    """
    markers = [f"{CLOUD_MARKER}={cloud_root}".encode()]
    if instance_id:
        markers.insert(0, f"ELASTIC_SLURM_INSTANCE_ID={instance_id}".encode())
    return markers


def unit_dir(layout: Layout, instance_id: str) -> Path:
    """Where the systemctl stand-in keeps the PID files of the daemons it started on an instance (its own /run)."""
    return layout.machine_dir(instance_id) / "run" / "systemctl-shim"


def stop_instance_processes(
    session: int, namespace: str, markers: Sequence[bytes], units: Path | None = None, limit: int = 200
) -> None:
    """Stop an emulated instance: freeze and kill all of its processes (procs.vanish).

    Members: every process of the instance's time namespace once one of them carries one of `markers` (see
    `instance_markers`), the processes of its session that carry one, the daemons the systemctl stand-in
    started in sessions of their own (PID files in `units`: slurmd, a login node's sackd, their supervisors) that
    carry one, and every process in the cgroups the stand-in gave its units (what slurmd started, whatever session);
    never the host's namespace, never sessions 0/1, never more than `limit` processes. The units' emptied cgroups
    are removed.
    """
    if not markers:
        return

    def members() -> list[int]:
        # The instance's time namespace is proven ours by a marked process in it (its slurmd); then every process
        # in it belongs to the instance — slurmstepd, for one, does not keep slurmd's environment.
        in_namespace = set(procs.pids_in_time_namespace(namespace))
        found = in_namespace if any(procs.environ_has(p, markers) for p in in_namespace) else set()
        # the session outlives its leader (the user data's shell may have ended, leaving munged): a session id is not
        # reused while any process is in it, and each member must still carry a marker
        found |= {p for p in procs.pids_in_session(session) if procs.environ_has(p, markers)}
        unit_pids = [procs.read_pid(f) for f in sorted(units.glob("*.pid"))] if units and units.is_dir() else []
        for unit_pid in (p for p in unit_pids if p is not None and procs.environ_has(p, markers)):
            # the daemon and what it started in its session (sssd's responders and back end)
            found |= {unit_pid, *(p for p in procs.pids_in_session(unit_pid) if procs.environ_has(p, markers))}
        for cgroup in unit_cgroups(units):
            found |= {int(pid) for pid in _read(cgroup / "cgroup.procs").split()}
        found.discard(os.getpid())
        return sorted(found)[:limit]

    # EC2 ended the instance: everything on it stops at once, nothing gets to report (see procs.vanish)
    for _ in range(3):
        left = members()
        if not left:
            break
        procs.vanish(left)
        time.sleep(0.2)
    remove_unit_cgroups(units)


def remove_unit_cgroups(units: Path | None) -> None:
    """Remove the emptied cgroups of a machine's units (the unit's, then the machine's), e.g. once it is stopped."""
    for cgroup in unit_cgroups(units):
        for empty in (cgroup, cgroup.parent):
            with contextlib.suppress(OSError):  # not empty (yet), or gone
                empty.rmdir()


UNIT_CGROUPS = "elastic-slurm-units"  # the systemctl stand-in's cgroups: <cgroup2>/elastic-slurm-units/<machine>/<unit>


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):  # gone meanwhile
        return path.read_text()
    return ""


def unit_cgroups(units: Path | None) -> list[Path]:
    """The cgroups the systemctl stand-in gave a machine's units (`units`/<unit>.cgroup; /sys is the host's)."""
    paths = [Path(_read(named).strip()) for named in sorted(units.glob("*.cgroup"))] if units and units.is_dir() else []
    return [path for path in paths if path.parent.parent.name == UNIT_CGROUPS and path.is_dir()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localcloud.instances.instance_runner", description=__doc__.split("\n")[0])
    parser.add_argument("--state-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    runner = Runner(Layout(args.state_dir))
    feed = ChangeFeed(runner.aws_endpoint)

    def _term(signum: int, frame: object) -> None:
        runner.running = False
        feed.interrupt()  # ends a pending wait at once; never raises elsewhere

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    LOG.info("watching instances of cluster %s in %s", runner.cluster, ", ".join(runner.clients))
    generation = -1  # the first wait answers at once
    while runner.running:
        # the generation is read BEFORE the look at EC2: a change made meanwhile ends the next wait at once
        with contextlib.suppress(Interrupted):
            seen = feed.wait(generation, runner.next_wake(time.time()))
            generation = generation if seen is None else seen
        if not runner.running:
            break
        try:
            looked = runner.loop_once()
        except Exception:
            LOG.exception("runner loop failed; continuing")
            looked = False
        if not looked:  # the change that woke us is not seen yet: look again soon, whatever the feed says
            generation = -1
            time.sleep(RETRY_SECONDS)
        else:
            time.sleep(min(MIN_GAP_SECONDS, runner.next_wake(time.time())))
    runner.stop_all()
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
