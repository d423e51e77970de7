"""One bench row of AWS ParallelCluster's resume: the same N, jobs and pool shape as ours, on the same emulated EC2.

Our pools (tests/aws/plugin_env.py) become ParallelCluster compute resources of one queue `q`: `cf` (CreateFleet: the
same 3 instance types x 3 subnets as our `cpu-c7i`) and `ri` (RunInstances: `g5.xlarge` in one subnet, as our
`gpu-g5`). Each gets the launch template ParallelCluster looks up by name (`<cluster>-<queue>-<compute resource>`,
the same image as ours), the cluster's DynamoDB hostname table, and the resume file Slurm would write (one job per
`job_nodes` nodes, node names `q-dy-<cr>-<i>`). Its resume settings are ParallelCluster 3.11's defaults
(`slurm_plugin/resume.py` DEFAULTS: job-level scaling, all-or-nothing, launch and assign batches of 500).
The row's instances are terminated after it (untimed), as ours are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.parallelcluster.source import VERSION, source_dir
from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.hostlists import compress
from tests.aws.plugin_env import HOME, HOME_AZS, TYPES, Network, public_image

RUNNER = Path(__file__).resolve().parent / "runner.py"
QUEUE = "q"
RESOURCES = {"CreateFleet": "cf", "RunInstances": "ri"}  # our launch API -> its compute resource
RESUME_DEFAULTS = {  # aws-parallelcluster-node 3.11 slurm_plugin/resume.py SlurmResumeConfig.DEFAULTS
    "launch_batch_size": 500,
    "assign_node_batch_size": 500,
    "terminate_batch_size": 1000,
    "scaling_strategy": "all-or-nothing",
}


class ParallelClusterSide:
    """ParallelCluster's view of the bench network: fleet config, launch templates and table, made once."""

    def __init__(self, aws: EmulatedAws, network: Network, cache: Path, workdir: Path) -> None:
        self.aws, self.workdir = aws, workdir
        self.source = source_dir(cache)
        self.cluster = f"pcb{uuid.uuid4().hex[:6]}"
        self.table = f"parallelcluster-slurm-{self.cluster}"
        ec2 = aws.client("ec2", HOME)
        image = public_image(ec2)
        one_az = network.subnets[HOME_AZS[0]]
        self.fleet_config: dict[str, Any] = {
            QUEUE: {
                "cf": {
                    "Api": "create-fleet", "CapacityType": "on-demand", "AllocationStrategy": "lowest-price",
                    "Instances": [{"InstanceType": t} for t in TYPES],
                    "Networking": {"SubnetIds": [network.subnets[az] for az in HOME_AZS]},
                },
                "ri": {
                    "Api": "run-instances", "CapacityType": "on-demand",
                    "Instances": [{"InstanceType": "g5.xlarge"}], "Networking": {"SubnetIds": [one_az]},
                },
            }
        }  # fmt: skip
        templates = {
            "cf": {"ImageId": image, "InstanceType": TYPES[0]},
            "ri": {
                "ImageId": image, "InstanceType": "g5.xlarge",
                "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": one_az}],
            },
        }  # fmt: skip
        for resource, data in templates.items():
            ec2.create_launch_template(LaunchTemplateName=f"{self.cluster}-{QUEUE}-{resource}", LaunchTemplateData=data)
        aws.client("dynamodb", HOME).create_table(
            TableName=self.table,
            KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def resume_row(self, n: int, job_nodes: int, api: str) -> dict[str, Any]:
        """Resume n nodes in jobs of `job_nodes` through ParallelCluster's code; the row in bench/run.py's shape."""
        resource = RESOURCES[api]
        nodes = [f"{QUEUE}-dy-{resource}-{i}" for i in range(1, n + 1)]
        jobs = [
            {"job_id": index + 1, "nodes_alloc": compress(group), "nodes_resume": compress(group),
             "oversubscribe": "NO", "partition": QUEUE}
            for index, group in enumerate(nodes[i : i + job_nodes] for i in range(0, n, job_nodes))
        ]  # fmt: skip
        config = {
            "region": HOME, "cluster_name": self.cluster, "table_name": self.table, "fleet_config": self.fleet_config,
            "node_list": nodes, "slurm_resume": {"all_nodes_resume": compress(nodes), "jobs": jobs},
            **RESUME_DEFAULTS,
        }  # fmt: skip
        config_path = self.workdir / f"pc-{api}-{n}-{job_nodes}.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        before = self._live_instances()
        self.aws.reset_call_counts()
        env = {**os.environ, "AWS_ENDPOINT_URL": self.aws.url, "AWS_DEFAULT_REGION": HOME}
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(RUNNER), str(self.source), str(config_path)],
            env=env, capture_output=True, text=True, check=False, cwd=self.workdir,
        )  # fmt: skip
        outside = time.perf_counter() - start
        calls = {k: v for k, v in sorted(self.aws.call_counts().items())}
        launched = sorted(self._live_instances() - before)
        self._terminate(launched)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"ParallelCluster's resume failed (exit {done.returncode}): {tail}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        case = "one big job" if job_nodes >= n else f"jobs of {job_nodes}"
        return {
            "case": f"{case} ({api}) ParallelCluster {VERSION}", "n": n,
            "ec2_calls": {k.removeprefix("ec2:"): v for k, v in calls.items()},
            "wall_s": result["wall_s"], "cpu_s": result["cpu_s"], "process_wall_s": round(outside, 3),
            "nodeaddr": _times(result["marks"], n), "emulator_cpu_s": None,
            "launched": len(launched), "failed": result["failed"], "failed_codes": result["failed_codes"],
            "nodeaddr_updates": len(result["marks"]), "side": "parallelcluster",
        }  # fmt: skip

    def _live_instances(self) -> set[str]:
        ec2 = self.aws.client("ec2", HOME)
        states = ["pending", "running"]
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": states}]
        )
        return {i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]}

    def _terminate(self, ids: list[str]) -> None:
        ec2 = self.aws.client("ec2", HOME)
        for start in range(0, len(ids), 1000):
            ec2.terminate_instances(InstanceIds=ids[start : start + 1000])


def _times(marks: list[list[float]], n: int) -> dict[str, float | None]:
    """Seconds from the resume's start until the first node, half of the n nodes and all n had their NodeAddr."""
    from bench.run import _nodeaddr_times  # the same arithmetic as our rows

    return _nodeaddr_times([(at, int(count)) for at, count in marks], 0.0, n)
