"""Real slurmctld at 10,000 nodes (issue 17): `python -m bench.scale_10k [--config PATH] [--nodes N]`.

Starts a local cloud (real slurmctld, slurmdbd and MariaDB; emulated AWS) of bench/configs/scale-10k.yaml — or of
--config, e.g. a copy with exclusive partitions — then measures, in this order:

1. render: loading the config and rendering slurm.conf + manifest for every node (in this process);
2. slurmctld start: stop, then start with every node in its state (the systemctl stand-in returns at READY=1), RSS;
3. `scontrol --json show nodes` / `scontrol -o show nodes` and the manager's and the plugin's parsers on them;
4. one resume of every node through slurmctld (`scontrol update state=power_up`): ResumeProgram's return (a timed
   wrapper), EC2 calls, the launch answers (the event log), and when every node has its NodeAddr (polled once a
   second; and the worker's log lines);
5. one cluster-manager pass (`slurm-clustermgr --once` on the controller, inside bench.scale_probe) with every
   instance live: CPU, AWS calls, scontrol calls, cProfile;
6. the schedulers under a queue of jobs: sdiag's main and backfill cycle statistics, slurmctld RSS;
7. one suspend of every node (`state=power_down_force`): SuspendProgram's return, EC2 calls, all terminated;
8. one more manager pass after the suspend;
9. thousands of jobs starting at once (bench/scale_configuring.py): CONFIGURING on booting nodes, slurmctld's CPU,
   the RPC rate (sdiag deltas) and the prolog processes; with `slurm.early_start` off
   (bench/configs/scale-10k-no-early-start.yaml) the same without PrologSlurmctld.

`--phases` runs some of them only (e.g. `--phases configuring`, written to --out).

No node runs a slurmd: the bench stops the instance runner before the first launch (instances stay running in the
emulated EC2, nothing boots), and the metrics exporter and Prometheus (their scrapes would load slurmctld and the
emulator). Writes bench/results/scale-10k.json (--out) and the picture of where the time goes next to it
(bench/scale_plot.py). Needs root and the Slurm root, as the e2e tests; stops the cloud and removes its state dir.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench import scale_configuring as starting
from bench import scale_controller as controller
from bench import scale_phases as phases
from bench.scale_report import table, targets
from cluster_config import load
from cluster_config.loader import ConfigInvalid
from localcloud.cloud import DAEMONS, LocalCloud
from localcloud.image import slurm_root
from localcloud.services import procs
from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import load_manifest

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE / "configs" / "scale-10k.yaml"
RESULTS = HERE / "results" / "scale-10k.json"
STOPPED_FOR_THE_BENCH = ("instance-runner", "prometheus", "exporter")
PHASES = ("render", "slurmctld_start", "show_nodes", "resume_program_isolated", "resume", "manager_live", "scheduler",
          "suspend", "manager_after", "configuring")  # fmt: skip
NEEDED = ["mariadbd", "mariadb-install-db", "unshare", "chroot"]


def prerequisites() -> str | None:
    """Why the local cloud cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (mount namespaces, chroot), as the e2e tests"
    absent = [p for p in NEEDED if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if not slurm_root.is_built():
        absent.append(f"the Slurm {slurm_root.DEFAULT_SLURM} root (scripts/setup.sh builds it)")
    return f"missing: {', '.join(absent)}" if absent else None


def scaled_config(config: Path, nodes: int, into: Path) -> Path:
    """A copy of `config` whose pools share `nodes` between them (max_nodes), for a smaller or larger run."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    pools = [pool for part in data["clusters"][0]["partitions"] for pool in part.get("pools", [])]
    for index, pool in enumerate(pools):
        pool["max_nodes"] = nodes // len(pools) + (1 if index < nodes % len(pools) else 0)
    path = into / f"scaled-{nodes}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class BenchCloud(LocalCloud):
    """The local cloud with slurm.conf's node lines as production renders them (one `NodeName=prefix-[1-2500]`
    line per pool). The local cloud gives every node a `Port=` of its own, one line per node, for slurmds sharing
    the loopback; no slurmd runs in this bench, and 10,000 node lines cost every Slurm client (scontrol, sbatch,
    sinfo: the plugin's and the manager's calls too) ~0.3 s of CPU to parse, which production does not pay."""

    def _machine_values(self, *args: Any, **kwargs: Any) -> dict[str, str]:
        values: dict[str, str] = super()._machine_values(*args, **kwargs)
        path = Path(values["ES_RENDER_OVERRIDES"])
        overrides = json.loads(path.read_text(encoding="utf-8"))
        overrides["options"].pop("slurmd_port_base", None)
        path.write_text(json.dumps(overrides, indent=2), encoding="utf-8")
        return values


def render_timing(config_path: Path, cache_path: Path) -> dict[str, Any]:
    """CPU and wall of loading the config and rendering one cluster (slurm.conf fragments, manifest) into files, as
    production renders it, and as the local cloud does with a port per node (one node line each)."""
    from elastic_slurm.commands.render_cmd import write_rendered
    from slurm_plugin.instance_cache import load_cache
    from slurm_plugin.render.cluster import RenderOptions, render_cluster
    from slurm_plugin.render.manifest import placeholder_infra

    cache = load_cache(cache_path)
    row: dict[str, Any] = {}
    for form, options in (("production", RenderOptions()), ("port_per_node", RenderOptions(slurmd_port_base=20000))):
        wall, cpu = time.perf_counter(), time.process_time()
        config = load(config_path)
        cluster = config.clusters[0]
        rendered = render_cluster(config, cluster.name, placeholder_infra(cluster), cache, options)
        with tempfile.TemporaryDirectory(prefix="scale-render-") as out:
            write_rendered(rendered, Path(out))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        row[form] = {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "slurm_conf_lines": rendered.slurm_conf.count("\n"),
            "slurm_conf_bytes": len(rendered.slurm_conf),
        }
    row["nodes"] = sum(p.max_nodes for p in rendered.manifest.pools)
    row.update(row["production"])
    return row


def _stop_for_bench(cloud: LocalCloud) -> list[str]:
    markers = dict(DAEMONS)
    return [n for n in STOPPED_FOR_THE_BENCH if procs.stop_pid_file(cloud.layout.pid_file(n), markers[n], timeout=30)]


def _cache_of(cloud: LocalCloud) -> Path:
    """The instance cache the controller rendered with (its /etc/elastic-slurm)."""
    found = sorted(cloud.layout.machine_dir("controller").rglob("instance-cache.json"))
    if not found:
        raise phases.PhaseError(f"no instance-cache.json under {cloud.layout.machine_dir('controller')}")
    return found[0]


def run(args: argparse.Namespace, config: Path, state_dir: Path) -> dict[str, Any]:
    """Bring the cloud up, run every phase, always bring it down; the results."""
    cloud = BenchCloud(state_dir)
    results: dict[str, Any] = {"config": str(args.config), "phases": {}}
    measured = results["phases"]
    try:
        start = time.perf_counter()
        cloud.up(config, boot_delay=1.0)
        results["local_up_s"] = round(time.perf_counter() - start, 1)
        results["stopped_for_the_bench"] = _stop_for_bench(cloud)
        manifest = load_manifest(cloud.layout.manifest)
        nodes = [f"{p.node_prefix}{i}" for p in manifest.pools for i in range(1, p.max_nodes + 1)]
        results["nodes"] = len(nodes)
        results["pools"] = {p.key: p.max_nodes for p in manifest.pools}
        ctx = phases.Context(
            cloud=cloud,
            nodes=nodes,
            hostlist=compress(nodes),
            aws_pid=procs.read_pid(cloud.layout.pid_file("emulated-aws")) or 0,
            state_dir=Path(manifest.state_dir),
            timeout=args.timeout,
        )
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("render", lambda: render_timing(config, _cache_of(cloud))),
            ("slurmctld_start", lambda: controller.slurmctld_start(ctx)),
            ("show_nodes", lambda: phases.show_nodes(ctx)),
            ("resume_program_isolated", lambda: controller.resume_program_isolated(ctx)),
            ("resume", lambda: phases.resume_all(ctx)),
            ("manager_live", lambda: phases.manager_pass(ctx, "live")),
            ("scheduler", lambda: phases.scheduler_under_queue(ctx, args.jobs, args.job_nodes, args.settle)),
            ("suspend", lambda: phases.suspend_all(ctx)),
            ("manager_after", lambda: phases.manager_pass(ctx, "after")),
            ("configuring", lambda: starting.configuring(ctx, args.cf_jobs, args.cf_window, args.cf_partition)),
        ]
        results["early_start"] = load(config).clusters[0].slurm.early_start
        for name, step in steps:
            if name not in args.phases:
                continue
            print(f"[scale-10k] {time.strftime('%H:%M:%S')} {name} ...", flush=True)
            measured[name] = step()
            print(f"[scale-10k] {name}: {_brief(measured[name])}", flush=True)
    finally:
        results["stopped"] = cloud.down()
    return results


def _brief(row: dict[str, Any]) -> str:
    keep = {k: v for k, v in row.items() if not isinstance(v, list | dict) or k in ("cpu_s", "ec2_calls", "aws_calls")}
    return json.dumps(keep)[:400]


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale_10k", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=f"cluster YAML (default {DEFAULT_CONFIG})")
    parser.add_argument("--nodes", type=int, default=None, help="share N nodes among the config's pools instead")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs in the queue for the sdiag phase (default 2000)")
    parser.add_argument("--job-nodes", type=int, default=10, help="nodes per queued job (default 10)")
    parser.add_argument("--settle", type=float, default=120.0, help="seconds the schedulers run before sdiag")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a resume or suspend may take")
    parser.add_argument(
        "--phases", type=_phases, default=list(PHASES), help="comma-separated phases to run (default all)"
    )
    parser.add_argument("--cf-jobs", type=int, default=5000, help="jobs starting at once, `configuring` (default 5000)")
    parser.add_argument("--cf-window", type=float, default=60.0, help="seconds measured with them CONFIGURING")
    parser.add_argument("--cf-partition", default="cpu", help="the partition they start in (default cpu)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS})")
    parser.add_argument("--keep", action="store_true", help="keep the local cloud's state dir (logs) afterwards")
    return parser


def _phases(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PHASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown phase(s) {', '.join(unknown) or '(none)'}; known: {', '.join(PHASES)}"
        )
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the bench; 0 when every phase completed (targets missed are reported, not failed)."""
    args = build_parser().parse_args(argv)
    for name, value in (("--nodes", args.nodes), ("--jobs", args.jobs), ("--job-nodes", args.job_nodes),
                        ("--cf-jobs", args.cf_jobs)):  # fmt: skip
        if value is not None and value < 1:
            print(f"bench.scale_10k: error: {name}: must be >= 1 (got {value})", file=sys.stderr)
            return 2
    try:
        load(args.config)
    except (ConfigInvalid, OSError) as exc:
        print(f"bench.scale_10k: error: --config: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    reason = prerequisites()
    if reason:
        print(f"bench.scale_10k: error: {reason}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="elastic-slurm-scale-", dir="/var/tmp"))
    state_dir = work / "cloud"
    config = scaled_config(args.config, args.nodes, work) if args.nodes else args.config.resolve()
    try:
        results = run(args, config, state_dir)
    except (phases.PhaseError, RuntimeError) as exc:
        print(f"bench.scale_10k: error: {str(exc).splitlines()[0]} (logs: {state_dir / 'log'})", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["recorded"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["machine"] = _machine()
    results["targets"] = targets(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    print(f"written to {args.out}")
    if "resume" in args.phases:  # the picture is of the resume/suspend phases
        from bench.scale_plot import plot_results  # matplotlib: a dev dependency

        print(f"plot: {plot_results(args.out)}")
    return 0


def _machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        "?",
    )  # fmt: skip
    memory = next(
        (int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
         if line.startswith("MemTotal:")),
        0,
    )  # fmt: skip
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": memory,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
        "slurm": slurm_root.DEFAULT_SLURM,
    }


if __name__ == "__main__":
    sys.exit(main())
