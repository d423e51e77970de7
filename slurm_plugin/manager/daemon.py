"""`slurm-clustermgr`: the cluster manager daemon (systemd on the controllers; only the active controller acts).

Each cycle: `scontrol ping` (standby controllers stop here: slurm_plugin/primary.py) → observe Slurm nodes (one scontrol call) and the cluster's
instances (one filtered DescribeInstances per region, plus status checks) → reconcile (pure) + SQS events → apply in
batches → topology.conf for pools with network_topology (manager/topology.py) → counters in state_dir. Stateless:
every cycle starts from EC2 tags and Slurm state (topology.json only saves asking EC2 again), so a restart or a
failover to the backup controller loses nothing.

    slurm-clustermgr --manifest /etc/elastic-slurm/manifest.json            # loop every --interval seconds
    slurm-clustermgr --manifest M --once                                     # one cycle; exit 1 if anything failed
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin import logs, primary
from slurm_plugin.manager import events, fleet, metrics, readiness, topology
from slurm_plugin.manager.apply import Outcome, Terminator, apply
from slurm_plugin.manager.model import Action, Instance, Kind, Settings
from slurm_plugin.manager.observe import ObserveError, describe_cluster
from slurm_plugin.manager.reconcile import REASON_GONE, reconcile
from slurm_plugin.manager.slurm_port import ManagerSlurm, ScontrolManager
from slurm_plugin.manifest import Manifest, ManifestError, load_manifest
from slurm_plugin.powersave import node_names, protection
from slurm_plugin.powersave.slurm import SlurmError
from slurm_plugin.telemetry import events as event_log

NAME = "slurm-clustermgr"
INTERVAL = 45.0  # seconds between cycles, by default (each reads the whole node table once)
LOG = logging.getLogger(NAME)


class Ec2Port(Terminator, Protocol):
    """What a cycle needs from EC2 (slurm_plugin.powersave.ec2.Ec2 satisfies it): regional clients and batched terminate."""

    def client(self, region: str) -> Any:
        """The EC2 client of a region (with the adapter's retry config)."""


@dataclass
class Manager:
    """One cluster's manager: what it talks to and how it decides."""

    manifest: Manifest
    settings: Settings
    slurm: ManagerSlurm
    ec2: Ec2Port
    host: str
    sqs: Any = None
    queue_url: str | None = None
    ssm: Any = None  # reads the fleet parameter (None: no fleet stop/start)
    dry_run: bool = False
    ignored: set[str] = field(default_factory=set)
    acting_before: bool | None = None  # the last cycle's answer: a change of role is logged once

    def regions(self) -> list[str]:
        """Every region the cluster's pools launch into, and its home region."""
        found = {self.manifest.home_region}
        found.update(loc.region for pool in self.manifest.pools for loc in pool.locations)
        return sorted(found)

    def active(self) -> bool:
        """This host runs the slurmctld in charge (primary, or the backup after a takeover): slurm_plugin/primary.py."""
        return primary.acting(self.slurm.ping(), self.host)

    def observe(self) -> list[Instance]:
        """The cluster's instances in every region."""
        found: list[Instance] = []
        for region in self.regions():
            found.extend(describe_cluster(self.ec2.client(region), region, self.manifest.cluster))
        return found

    def cycle(self, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Outcome | None:
        """One observe → decide → apply round; None when this host is not the active controller."""
        acting = self.active()
        if acting != self.acting_before:
            role = "the acting controller: acting" if acting else "not the acting controller: standing by"
            LOG.info("%s: %s", self.host, role)
            self.acting_before = acting
        if not acting:
            return None
        settings = self.settings
        if self.ssm is not None:  # the operator's fleet stop/start (manager/fleet.py)
            wish = fleet.wanted(self.ssm, self.manifest.cluster, self.manifest.state_dir)
            if not self.dry_run:
                fleet.apply_partitions(self.slurm, wish, self.manifest.state_dir)
            settings = replace(settings, fleet_stopped=wish == fleet.STOPPED)
        settings = replace(
            settings, protected_pools=frozenset(protection.protected(self.manifest.state_dir, self.manifest.pools))
        )
        nodes = self.slurm.nodes()  # Slurm first: an address it shows belongs to an instance EC2 already lists
        instances = self.observe()
        actions = []
        messages: list[events.Message] = []
        actions_of: dict[str, list[Action]] = {}
        if self.sqs is not None and self.queue_url:
            messages = events.receive(self.sqs, self.queue_url)
            for message in messages:
                actions_of[message.handle] = events.event_actions(message.events, nodes, instances)
                actions.extend(actions_of[message.handle])
        at = now()
        actions.extend(self._not_suspended_meanwhile(reconcile(nodes, instances, at, settings)))
        self._log_ignored(actions)
        outcome = apply(actions, self.ec2, self.slurm, self.dry_run)
        if messages and not self.dry_run:  # a message whose action failed comes back after its visibility timeout
            events.delete(self.sqs, self.queue_url or "", events.handled(messages, actions_of, outcome.done))
        # pools with network_topology: topology.conf follows the instances (only what changed costs calls)
        placed = topology.sync(self.manifest, nodes, instances, self.ec2, self.slurm, at, self.dry_run)
        outcome.failures.extend(placed.failures)
        done = len(outcome.done)
        if not self.dry_run:
            metrics.update(self.manifest.state_dir, [*outcome.counters, *placed.counters], at, done)
            self._sweep_node_names(instances, at)
            event_log.record(self.manifest.state_dir, terminated_records(outcome.done, instances))
        LOG.log(logging.INFO if done or outcome.failures else logging.DEBUG,
                "cycle: %d node(s), %d instance(s), %d action(s) done, %d failure(s)",
                len(nodes), len(instances), done, len(outcome.failures))  # fmt: skip
        return outcome

    def _not_suspended_meanwhile(self, actions: list[Action]) -> list[Action]:
        """`actions` less the power-downs for a lost instance of nodes Slurm has begun to power down since it was read.

        Slurm is read before EC2 (an address it shows belongs to an instance EC2 already lists), so a suspend can
        fall in between: slurmctld marks the node POWERING_DOWN, then SuspendProgram terminates its instance, and
        EC2 shows that instance gone while the node read says up. A power-down then would only write a false reason
        (`(Manager:InstanceGone)`) on a node Slurm already powers down, and count a loss; so the nodes of those
        actions are read again (one scontrol call, only in a cycle that has such an action)."""
        lost = {a.target for a in actions if a.kind is Kind.POWER_DOWN and a.reason == REASON_GONE}
        if not lost:
            return actions
        suspended = {n.name for n in self.slurm.nodes() if n.name in lost and (n.powering_down or n.powered_down)}
        for name in sorted(suspended):
            LOG.info(
                "%s: powered down by Slurm since it was read (SuspendProgram ended its instance): left alone", name
            )
        return [a for a in actions if not (a.target in suspended and a.reason == REASON_GONE)]

    def _sweep_node_names(self, instances: Sequence[Instance], at: datetime) -> None:
        """Remove the node-name files (slurm_plugin/powersave/node_names.py) of instances EC2 no longer lists as
        alive; a file younger than the orphan grace may belong to an instance launched after the observation."""
        directory = self.manifest.node_names_dir
        if not directory:
            return
        live = [i.instance_id for i in instances if i.state not in ("terminated", "shutting-down")]
        older_than = (at - self.settings.orphan_grace).timestamp()
        try:
            removed = node_names.sweep(directory, live, older_than)
        except OSError as exc:
            LOG.warning("node names in %s not swept: %s", directory, exc)
            return
        if removed:
            LOG.info("removed the node-name files of %d ended instances", len(removed))

    def _log_ignored(self, actions: Sequence[Action]) -> None:
        """Log what is never touched once (INFO when it first shows up, not every cycle)."""
        now = {f"{a.target}: {a.why}" for a in actions if a.kind is Kind.IGNORE}
        for line in sorted(now - self.ignored):
            LOG.info("ignore %s", line)
        self.ignored = now


def settings_of(manifest: Manifest, args: argparse.Namespace) -> Settings:
    """Settings from the manifest plus the command-line timers."""
    return Settings(
        cluster=manifest.cluster,
        pools=tuple(manifest.pools),
        resume_timeout=timedelta(seconds=args.resume_timeout) if args.resume_timeout else None,
        orphan_grace=timedelta(seconds=args.orphan_grace),
        capacity_cooldown=timedelta(seconds=manifest.capacity_cooldown_seconds),
        impaired_threshold=timedelta(seconds=args.impaired_threshold or manifest.impaired_threshold_seconds),
        drain_mode=args.drain_mode,
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {value}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{NAME}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = _Parser(prog=NAME, description="Keep EC2 and Slurm in agreement (orphans, failed boots, capacity "
                     "cool-down, spot events, health, always-on nodes). Acts only on the active controller.")  # fmt: skip
    parser.add_argument("--manifest", required=True, help="runtime manifest (JSON) written by `elastic-slurm render`")
    parser.add_argument("--once", action="store_true", help="run one cycle and exit (1 if any action failed)")
    parser.add_argument(
        "--interval", type=_positive, default=INTERVAL, help=f"seconds between cycles (default {INTERVAL:g})"
    )
    parser.add_argument("--resume-timeout", type=_positive, default=None,
                        help="override every pool's ResumeTimeout (default: each pool's, from the manifest)")  # fmt: skip
    parser.add_argument("--orphan-grace", type=_positive, default=300,
                        help="seconds an unclaimed instance may live before it is an orphan (default 300)")  # fmt: skip
    parser.add_argument("--impaired-threshold", type=_positive, default=None,
                        help="override the seconds an EC2 status check may stay impaired before the node is drained "
                        "(default: health_checks.impaired_threshold, from the manifest)")  # fmt: skip
    parser.add_argument("--drain-mode", choices=["finish", "requeue"], default="finish",
                        help="drained nodes: let jobs finish, or requeue them at once (default finish)")  # fmt: skip
    parser.add_argument("--events-queue-url", default=None, help="SQS queue fed by EventBridge (optional)")
    parser.add_argument("--host", default=socket.gethostname(), help="this controller's Slurm name (default: hostname)")
    parser.add_argument("--dry-run", action="store_true", help="log the actions, do nothing")
    parser.add_argument("--log-file", default=None, help="default: clustermgr.log next to the manifest's log_file")
    return parser


def build(manifest: Manifest, args: argparse.Namespace) -> Manager:
    """The real manager: scontrol + the EC2 adapter (retry config from slurm_plugin.powersave.ec2) + SQS when configured."""
    import boto3

    from slurm_plugin.powersave.ec2 import RETRY_CONFIG, Ec2

    ssm = boto3.client("ssm", region_name=manifest.home_region, endpoint_url=manifest.aws_endpoint_url,
                       config=RETRY_CONFIG)  # fmt: skip
    sqs = None
    if args.events_queue_url:
        sqs = boto3.client("sqs", region_name=manifest.home_region, endpoint_url=manifest.aws_endpoint_url,
                           config=RETRY_CONFIG)  # fmt: skip
    return Manager(
        manifest=manifest,
        settings=settings_of(manifest, args),
        slurm=ScontrolManager(manifest.slurm_bin_dir, manifest.slurm_conf),
        ec2=Ec2(manifest.aws_endpoint_url, state_dir=manifest.state_dir),
        host=args.host,
        sqs=sqs,
        queue_url=args.events_queue_url,
        ssm=ssm,
        dry_run=args.dry_run,
    )


def terminated_records(done: Sequence[Action], instances: Sequence[Instance]) -> list[dict[str, Any]]:
    """The event log's `terminated` lines for the instances this cycle terminated (reason: the action's counter)."""
    by_id = {i.instance_id: i for i in instances}
    return [
        {"event": "terminated", "node": "", "pool": by_id[a.target].pool if a.target in by_id else "",
         "instance_id": a.target, "region": a.region, "reason": a.counter or "manager"}
        for a in done
        if a.kind is Kind.TERMINATE
    ]  # fmt: skip


def run(
    manager: Manager, once: bool, interval: float, stop: threading.Event, ready: Callable[[], object] = lambda: None
) -> int:
    """Cycle until `stop` is set (or once); exit code. `ready` is called once, after the first cycle (whatever its
    outcome: a cycle that failed is logged and retried, the manager runs)."""
    first = True
    while True:
        code = 0
        try:
            outcome = manager.cycle()
            code = 1 if outcome is not None and outcome.failures else 0
        except (SlurmError, ObserveError, ClientError, BotoCoreError, OSError) as exc:
            LOG.error("cycle failed: %s", " ".join(str(exc).split()))
            code = 1
        except Exception:  # a bug must not stop the manager: log it whole, try again next cycle
            LOG.exception("cycle failed unexpectedly")
            code = 1
        if once:
            return code
        if first:
            ready()
            first = False
        if stop.wait(interval):
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console script `slurm-clustermgr`."""
    args = build_parser().parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
    except ManifestError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 2
    log_file = args.log_file or str(Path(manifest.log_file).with_name("clustermgr.log"))
    logs.setup(log_file, NAME)
    stop = threading.Event()
    if not args.once:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    manager = build(manifest, args)
    LOG.info("started (host %s, %s, interval %d s)", args.host, "once" if args.once else "loop", args.interval)
    return run(manager, args.once, args.interval, stop, ready=readiness.notify_ready)


if __name__ == "__main__":
    sys.exit(main())
