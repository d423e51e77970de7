"""The controller's boot in the local cloud: the controller user data of the stacks, run on the controller machine.

On EC2 the cluster stack creates, before the controllers boot: the config object in S3 and the parameter naming it,
the `DeployedInfra` SSM parameter, the wait condition whose pre-signed S3 URL the controllers signal, the munge key and database secrets, the mounts parameter, and the controller instances (Name tag
`<cluster>-controller-<index>`, from a launch template whose user data is `boot_commands("controller", values)`).
`publish` makes the same objects in the emulated AWS — a controller instance there gives the machine its private IP
and EC2 host name, which the user data finds by its Name tag as on EC2 — and `boot` runs that exact user data as root
on the controller's view of the Slurm root, in its own UTS namespace named like the instance. The user data then does
everything itself: munge key, mounts, config, instance cache, render, slurmdbd.conf, waiting for slurmdbd, accounting,
slurmctld, the manager and the timers (through the root's systemctl stand-in, localcloud/native/systemctl), then
signals the wait condition. `deploy_config` is what a `cdk deploy` of an edited config does (new object, parameter).

What differs (docs/local-cloud.md): the env file also carries the emulated endpoint and credentials (the instance
profile on EC2), `ES_RENDER_OVERRIDES` (ports, paths under the state dir, no cgroup plugins, short Slurm timers:
slurm_plugin/render/overrides.py) and where the systemctl stand-in keeps its PID files.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_config.model import Cluster
from localcloud.aws.fault_middleware import WAIT_CONDITION_PATH
from localcloud.instances import enter, machines
from localcloud.layout import Layout
from slurm_plugin.manifest import TAG_CLUSTER, DeployedInfra
from stacks.naming import TAG_ROLE, config_url_parameter, controller_mounts_parameter, deployed_infra_parameter
from stacks.user_data import actions_values, boot_commands

BOOT_TIMEOUT = 240.0
LOCAL_AMI = "ami-12c6146b"
# one of moto's built-in images: the instance exists only for its address and tags


class BootError(RuntimeError):
    """The controller's user data failed (one line, then the tail of the boot log)."""


@dataclass(frozen=True)
class ControllerHost:
    """One controller instance of the emulated EC2."""

    instance_id: str
    private_ip: str

    @property
    def hostname(self) -> str:
        return machines.ec2_hostname(self.private_ip)


def launch_controllers(ec2: Any, cluster: Cluster, infra: DeployedInfra) -> list[ControllerHost]:
    """The cluster's controller instances, as the cluster stack launches them (tags included; no user data runs)."""
    home = [subnet for az, subnet in sorted(infra.subnets.items()) if az.startswith(cluster.region)]
    subnets = home or sorted(infra.subnets.values())
    hosts = []
    for index in range(cluster.controller.count):
        tags = [
            {"Key": "Name", "Value": f"{cluster.name}-controller-{index}"},
            {"Key": TAG_CLUSTER, "Value": cluster.name},
            {"Key": TAG_ROLE, "Value": "controller"},
        ]
        answer = ec2.run_instances(
            ImageId=LOCAL_AMI,
            InstanceType=cluster.controller.instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=subnets[index % len(subnets)],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        raw = answer["Instances"][0]
        hosts.append(ControllerHost(raw["InstanceId"], raw["PrivateIpAddress"]))
    return hosts


def publish(
    client: Any, cluster: Cluster, config_path: Path, infra: DeployedInfra, db_secret: dict[str, Any] | None
) -> dict[str, str]:
    """The config object and its URL parameter, the DeployedInfra parameter and (on the accounting host) the database
    secret in the emulated AWS; returns the controller user-data values that name them (beside the compute values,
    see boot_data)."""
    region = cluster.region
    s3 = client("s3", region)
    if region == "us-east-1":
        s3.create_bucket(Bucket=assets_bucket(cluster.name))
    else:
        s3.create_bucket(Bucket=assets_bucket(cluster.name), CreateBucketConfiguration={"LocationConstraint": region})
    deploy_config(client, cluster, config_path)
    parameter = deployed_infra_parameter(cluster.name)
    client("ssm", region).put_parameter(Name=parameter, Value=infra.model_dump_json(), Type="String", Overwrite=True)
    values = {
        "ES_MOUNTS_PARAMETER": controller_mounts_parameter(cluster.name),  # with the controllers' own file system
        "ES_CONTROLLER_INDEX": "0",
        "ES_DEPLOYED_INFRA": parameter,
        "ES_CONFIG_PARAMETER": config_url_parameter(cluster.name),
        "ES_EVENTS_QUEUE": "",
    }
    if db_secret is not None:
        name = f"elastic-slurm/{cluster.name}/database"
        client("secretsmanager", region).create_secret(Name=name, SecretString=json.dumps(db_secret))
        values |= {"ES_DB_SECRET": name, "ES_DB_ENDPOINT": f"{db_secret['host']}:{db_secret['port']}"}
    return values | actions_values(cluster.controller.custom_actions)


def assets_bucket(cluster: str) -> str:
    """The bucket standing in for CDK's asset bucket."""
    return f"elastic-slurm-{cluster}-assets"


def deploy_config(client: Any, cluster: Cluster, config_path: Path) -> str:
    """What `cdk deploy` does with the config: upload it as a content-addressed object (CDK's asset key is the
    content's sha256) and point the config URL parameter at it; returns the object's URL. The controllers apply it at
    boot, and later through slurm-config-sync.timer (assets/bootstrap/elastic-slurm-config-apply)."""
    body = config_path.read_bytes()
    key = hashlib.sha256(body).hexdigest() + ".yaml"
    client("s3", cluster.region).put_object(Bucket=assets_bucket(cluster.name), Key=key, Body=body)
    url = f"s3://{assets_bucket(cluster.name)}/{key}"
    client("ssm", cluster.region).put_parameter(
        Name=config_url_parameter(cluster.name), Value=url, Type="String", Overwrite=True
    )
    return url


def user_data(values: dict[str, str], signal_url: str | None = None) -> str:
    """The exact controller user data the stacks put in the controller launch template, for these values."""
    return "#!/bin/bash\n" + "\n".join(boot_commands("controller", values, signal_url)) + "\n"


def wait_condition_url(aws_url: str) -> str:
    """A new wait condition's URL on the emulated AWS (its random token is the capability, as the pre-signed S3 URL of
    CloudFormation's wait condition handle is; moto's IAM gate verifies no query-string signatures)."""
    return f"{aws_url}{WAIT_CONDITION_PATH}{secrets.token_hex(16)}"


def signals(url: str) -> list[dict[str, Any]]:
    """The signals the wait condition at `url` received, in order."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        received: list[dict[str, Any]] = json.loads(answer.read())
    return received


def boot(
    layout: Layout, view: enter.View, values: dict[str, str], env: dict[str, str], signal_url: str, index: int = 0
) -> None:
    """Run the controller user data on `view` (controller `index`'s machine, named like its instance) as root, as
    cloud-init would, and wait for it (bounded). As CloudFormation's wait condition does, the boot succeeded only when
    the controller signalled SUCCESS; BootError with the signal's reason (the failing step and the boot log's last
    lines), or with the tail of the boot log (log/controller-boot.log, log/controller-1-boot.log) when no signal
    came."""
    machine = machines.controller_machine(index)
    script = layout.machine_dir(machine) / "run" / "user-data"
    script.write_text(user_data(values, signal_url))
    script.chmod(0o700)
    log = layout.log_file(f"{machine}-boot")
    argv = enter.argv(view, ["/bin/bash", "/run/user-data"])
    full_env = enter.user_env(enter.user(view.root, "root"), env)
    with log.open("ab") as out:
        try:
            result = subprocess.run(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT, timeout=BOOT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BootError(f"{machine} boot did not finish within {BOOT_TIMEOUT:.0f} s:\n{_tail(log)}") from None
    received = signals(signal_url)
    failures = [s for s in received if s.get("Status") == "FAILURE"]
    if failures:  # CloudFormation reports the first failure it receives
        raise BootError(f"{machine} boot failed (signal): {failures[0].get('Reason', '')}\n{_tail(log)}")
    if not any(s.get("Status") == "SUCCESS" for s in received):
        raise BootError(f"{machine} boot sent no SUCCESS signal (exit {result.returncode}):\n{_tail(log)}")
    if result.returncode != 0:
        raise BootError(f"{machine} boot signalled SUCCESS but exited {result.returncode}:\n{_tail(log)}")


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
