"""Runs AWS ParallelCluster's own resume code (aws-parallelcluster-node's `InstanceManager.add_instances`, the call its
`slurm_resume` makes) against the emulated AWS, and prints what it measured as one JSON line.

Started by bench/parallelcluster/side.py as `python runner.py SOURCE_DIR CONFIG_JSON` in a process of its own:
ParallelCluster's `slurm_plugin` package has the same name as ours, so this file imports none of this project. The
one thing replaced is Slurm: `update_nodes` (scontrol update NodeAddr=...) is recorded instead of run, as our bench's
TimedSlurm records `set_addresses`. Everything else — batching, CreateFleet/RunInstances, DescribeInstances, the
DynamoDB hostname table, all-or-nothing per job — is ParallelCluster's code, unchanged.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any


def main(source: str, config_path: str) -> int:
    """Run one resume as `config_path` describes it; print {"marks": [[seconds, nodes], ...], ...} as JSON."""
    sys.path.insert(0, str(Path(source) / "src"))
    from botocore.config import Config
    from slurm_plugin.common import ScalingStrategy

    from slurm_plugin import instance_manager

    loaded = Path(instance_manager.__file__).resolve()
    if not loaded.is_relative_to(Path(source).resolve()):
        raise SystemExit(f"runner: imported {loaded}, not ParallelCluster's instance_manager")
    config: dict[str, Any] = json.loads(Path(config_path).read_text(encoding="utf-8"))
    marks: list[tuple[float, int]] = []

    def update_nodes(nodes: list[str], nodeaddrs: Any = None, **_: Any) -> None:
        marks.append((time.perf_counter(), len(nodes)))

    instance_manager.update_nodes = update_nodes  # type: ignore[attr-defined]  # Slurm is not here
    manager = instance_manager.InstanceManager(
        region=config["region"],
        cluster_name=config["cluster_name"],
        boto3_config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        table_name=config["table_name"],
        head_node_private_ip="127.0.0.1",
        head_node_hostname="head-node",
        fleet_config=config["fleet_config"],
        job_level_scaling=True,
    )
    start, cpu = time.perf_counter(), time.process_time()
    manager.add_instances(
        node_list=config["node_list"],
        launch_batch_size=config["launch_batch_size"],
        update_node_address=True,
        scaling_strategy=ScalingStrategy(config["scaling_strategy"]),
        slurm_resume=config["slurm_resume"],
        assign_node_batch_size=config["assign_node_batch_size"],
        terminate_batch_size=config["terminate_batch_size"],
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    failed = sorted(set().union(*manager.failed_nodes.values())) if manager.failed_nodes else []
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "marks": [(at - start, count) for at, count in marks],
                "failed": len(failed),
                "failed_codes": sorted(manager.failed_nodes),
                "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
