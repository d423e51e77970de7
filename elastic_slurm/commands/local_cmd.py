"""`elastic-slurm local up|down|status|env|interrupt|report|cost`: the local cloud (real Slurm daemons + emulated AWS on this machine).

See docs/local-cloud.md. Everything lives under one state directory (default /var/tmp/elastic-slurm-local);
`down` stops exactly the processes recorded there.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from elastic_slurm.commands.cost_cmd import add_cost_arguments, run_on_cloud
from elastic_slurm.errors import UserError

DEFAULT_STATE_DIR = "/var/tmp/elastic-slurm-local"


def register(sub: Any) -> None:
    """Add the `local` command group."""
    local = sub.add_parser("local", help="run the cluster locally: real Slurm daemons + emulated AWS")
    actions = local.add_subparsers(dest="local_command", required=True, parser_class=type(local))

    up = actions.add_parser("up", help="start a local cloud for a cluster config")
    up.add_argument("config", metavar="CONFIG", help="cluster YAML (e.g. cluster_config/examples/local-demo.yaml)")
    up.add_argument("--cluster", help="cluster of the file to run (default: the first)")
    up.add_argument("--boot-delay", type=float, default=2.0, help="seconds an emulated instance takes to boot")
    up.add_argument("--boot-failure-rate", type=float, default=0.0, help="fraction of boots that fail (0..1)")
    up.add_argument(
        "--all-clusters",
        action="store_true",
        help="start every cluster of the file (one slurmdbd, munged and emulated AWS; the config's federation)",
    )
    up.set_defaults(func=run_up)

    down = actions.add_parser("down", help="stop every process of the local cloud")
    down.set_defaults(func=run_down)

    status = actions.add_parser("status", help="daemons, Slurm nodes and emulated instances")
    status.set_defaults(func=run_status)

    env = actions.add_parser(
        "env", help='print the shell environment to use the cloud: eval "$(elastic-slurm local env)"'
    )
    env.set_defaults(func=run_env)

    interrupt = actions.add_parser("interrupt", help="emulate a spot interruption: AWS terminates an instance")
    interrupt.add_argument("target", metavar="NODE_OR_INSTANCE", help="a Slurm node name or an instance id (i-...)")
    interrupt.set_defaults(func=run_interrupt)

    report = actions.add_parser("report", help="draw the cloud's timeline (nodes, instances, jobs) from its Prometheus")
    report.add_argument("--out", metavar="PATH", help="PNG to write (default: timeline.png in the state directory)")
    report.add_argument(
        "--since", type=float, metavar="SECONDS", help="only the last SECONDS (default: since the cloud started)"
    )
    report.set_defaults(func=run_report)

    cost = actions.add_parser("cost", help="what each job cost: `elastic-slurm cost` on the local cloud's controller")
    add_cost_arguments(cost)
    cost.set_defaults(func=run_cost)

    for parser in (up, down, status, env, interrupt, report, cost):
        parser.add_argument(
            "--state-dir",
            default=os.environ.get("ELASTIC_SLURM_LOCAL_DIR", DEFAULT_STATE_DIR),
            help=f"state directory (default: $ELASTIC_SLURM_LOCAL_DIR or {DEFAULT_STATE_DIR})",
        )


def _cloud(args: argparse.Namespace) -> Any:
    from localcloud.cloud import LocalCloud

    return LocalCloud(args.state_dir)


def run_up(args: argparse.Namespace) -> int:
    """Start the local cloud."""
    from localcloud.cloud import LocalCloudError

    if not Path(args.config).is_file():
        raise UserError(f"CONFIG: no such file: {args.config}")
    if not 0 <= args.boot_failure_rate <= 1:
        raise UserError(f"--boot-failure-rate: must be between 0 and 1, got {args.boot_failure_rate}")
    if args.boot_delay < 0:
        raise UserError(f"--boot-delay: must not be negative, got {args.boot_delay}")
    if os.geteuid() != 0:
        raise UserError("local up: must run as root (the local cloud's machines are mount namespaces over a chroot)")
    if args.all_clusters:
        return _up_all_clusters(args)
    cloud = _cloud(args)
    try:
        info = cloud.up(args.config, args.cluster, args.boot_delay, args.boot_failure_rate)
    except LocalCloudError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    print(f"local cloud '{info.cluster}' is up (Slurm {info.slurm_version}); state dir {cloud.layout.root}")
    print(f'  eval "$(elastic-slurm local env --state-dir {shlex.quote(str(cloud.layout.root))})"   # Slurm, AWS CLI')
    print(f"  Slurm clients: {cloud.layout.hostbin}  emulated AWS: {info.aws_endpoint_url} ({', '.join(info.regions)})")
    print("  try: sbatch --wrap hostname; squeue; sinfo; elastic-slurm local status; elastic-slurm local down")
    return 0


def _federation(args: argparse.Namespace) -> Any:
    """The local federation in --state-dir (started with `up --all-clusters`), or None."""
    from localcloud.sites.federation import FEDERATION_JSON, LocalFederation

    return LocalFederation(args.state_dir) if (Path(args.state_dir) / FEDERATION_JSON).exists() else None


def _up_all_clusters(args: argparse.Namespace) -> int:
    """`up --all-clusters`: every cluster of the file, one sub-directory of --state-dir each."""
    from localcloud.cloud import LocalCloudError
    from localcloud.sites.federation import LocalFederation

    if args.cluster:
        raise UserError("--all-clusters: cannot be combined with --cluster")
    federation = LocalFederation(args.state_dir)
    try:
        federation.up(args.config, args.boot_delay, args.boot_failure_rate)
    except LocalCloudError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    for name, cloud in federation.clouds().items():
        print(f"local cloud '{name}' is up:  export PATH={cloud.layout.hostbin}:$PATH")
    print("  try: sbatch -M <cluster> --wrap hostname; squeue --sibling; sacct -M all; elastic-slurm local down")
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop the local cloud's processes."""
    federation = _federation(args)
    stopped = federation.down() if federation is not None else _cloud(args).down()
    print(f"stopped {len(stopped)} process(es)" + (f": {', '.join(stopped)}" if stopped else " (nothing was running)"))
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print daemons, nodes and instances; exit 1 when the local cloud is not (fully) running."""
    from localcloud.cloud import LocalCloudError
    from localcloud.ops import OpsError

    federation = _federation(args)
    if federation is not None:  # one section per cluster; the others use the first cluster's shared daemons
        clouds = list(federation.clouds().values())
        codes = [run_status(argparse.Namespace(**{**vars(args), "state_dir": c.layout.root})) for c in clouds]
        own = ("slurmctld", "instance-runner")
        return 0 if codes[:1] == [0] and all(c.running_daemons()[d] for c in clouds[1:] for d in own) else 1
    cloud = _cloud(args)
    try:
        cloud.info()  # a one-line error when this state dir has no local cloud
        status = cloud.status()
    except (LocalCloudError, OpsError) as exc:
        raise UserError(str(exc)) from None
    print(f"state dir {status.state_dir}")
    env = operator_env(cloud)
    print(f'use it: eval "$(elastic-slurm local env --state-dir {shlex.quote(str(cloud.layout.root))})"')
    print(f"  Slurm clients: {env['PATH']}  emulated AWS: {env['AWS_ENDPOINT_URL']} ({env['AWS_DEFAULT_REGION']})")
    required = cloud.required_daemons()
    for name, pid in status.daemons.items():
        print(
            f"  {name:18} {'pid ' + str(pid) if pid else 'not running' + ('' if name in required else ' (optional)')}"
        )
    if status.controllers:  # scontrol ping: which controller acts (two with controller.count: 2)
        print("controllers: " + ", ".join(f"{host} {role}" for host, role in status.controllers.items()))
    states = Counter(status.nodes.values())
    print(f"nodes: {len(status.nodes)} ({', '.join(f'{n} {s}' for s, n in sorted(states.items())) or 'none'})")
    for node, state in sorted(status.nodes.items()):
        if not state.endswith("~"):
            print(f"  {node:24} {state}")
    per_az = Counter((i.region, i.availability_zone) for i in status.instances)
    print(f"instances (pending/running): {len(status.instances)}")
    for (region, az), count in sorted(per_az.items()):
        print(f"  {region:12} {az:14} {count}")
    return 0 if all(status.daemons[name] for name in required) else 1


def operator_env(cloud: Any) -> dict[str, str]:
    """What a shell needs to use `cloud`: its Slurm client wrappers first on PATH (the value is the directory to put
    first), the emulated AWS endpoint and home region, and the emulated admin's keys (made up by `up`)."""
    from localcloud.aws import cloud_iam

    info = cloud.info()
    env = {"PATH": str(cloud.layout.hostbin), "AWS_ENDPOINT_URL": info.aws_endpoint_url}
    env["AWS_DEFAULT_REGION"] = info.regions[0] if info.regions else "us-east-1"
    principals = cloud_iam.load(cloud.layout)
    if principals is not None:
        env.update(principals.admin.env())
    return env


def export_lines(env: dict[str, str]) -> list[str]:
    """`export` lines for a POSIX shell; PATH is prepended to the caller's."""
    lines = [f'export PATH={shlex.quote(env["PATH"])}:"$PATH"']
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items() if key != "PATH"]
    return lines


def _running_cloud(args: argparse.Namespace) -> Any:
    """The cloud of --state-dir (one line naming --state-dir when there is none)."""
    from localcloud.cloud import LocalCloudError
    from localcloud.ops import OpsError

    federation = _federation(args)
    cloud = next(iter(federation.clouds().values())) if federation is not None else _cloud(args)
    try:
        cloud.info()
    except (LocalCloudError, OpsError) as exc:
        raise UserError(f"--state-dir: {exc}") from None
    return cloud


def run_env(args: argparse.Namespace) -> int:
    """Print `export` lines: Slurm clients on PATH, the emulated AWS endpoint, region and keys."""
    for line in export_lines(operator_env(_running_cloud(args))):
        print(line)
    return 0


def run_interrupt(args: argparse.Namespace) -> int:
    """Terminate an instance as a spot interruption would."""
    from localcloud.cloud import LocalCloudError
    from localcloud.ops import OpsError

    cloud = _cloud(args)
    try:
        cloud.info()
        target = args.target
        instance_id = target if target.startswith("i-") else cloud.instance_of_node(target).instance_id
        cloud.interrupt(instance_id)
    except (LocalCloudError, OpsError) as exc:
        raise UserError(str(exc)) from None
    print(f"interrupted {instance_id}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    """Fetch the timeline from the cloud's Prometheus (from its start or the last --since seconds) and draw it."""
    import time

    from elastic_slurm.report import PrometheusError, ReportError
    from elastic_slurm.report.local_cloud import write_timeline

    if args.since is not None and not args.since > 0:
        raise UserError(f"--since: must be a positive number of seconds, got {args.since}")
    cloud = _running_cloud(args)
    # from the cloud's start (cloud.json is written by `up`) or the last --since seconds
    start = time.time() - args.since if args.since is not None else cloud.layout.cloud_json.stat().st_mtime
    try:
        path = write_timeline(cloud, start, Path(args.out) if args.out else None)
    except (PrometheusError, ReportError, OSError) as exc:
        raise UserError(" ".join(str(exc).split())) from None
    print(f"timeline: {path}")
    return 0


def run_cost(args: argparse.Namespace) -> int:
    """The cost report of the running local cloud (docs/cost.md)."""
    return run_on_cloud(_running_cloud(args), args)
