"""Login nodes of a local cloud: what the stacks create for each login pool, and how to work on a login node.

`create_login_groups` makes, in the emulated AWS, what stacks/login_nodes.py makes: a launch template per login pool
(the compute image, tags role=login and the login pool) and an Auto Scaling group of `count` instances over the home
region's subnets (moto launches them). The instance runner boots each with the exact login user data of
stacks/user_data.py (munge, mounts, conf server, configless `sackd`); `login_view` is that instance's machine, so a
command run there (`LocalCloud.on_login`) sees what a user logged in to it sees: no slurm.conf on its disk, the config
sackd fetched into /run/slurm/conf.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster_config.checks import region_of_az
from cluster_config.model import Cluster
from localcloud.aws.aws_setup import compute_image
from localcloud.image.slurm_root import BIND_SOURCE_SO
from localcloud.instances import enter, machines
from localcloud.layout import Layout
from localcloud.ops import OpsError
from localcloud.services.daemons import CLOUD_MARKER
from slurm_plugin.manifest import TAG_CLUSTER, DeployedInfra
from slurm_plugin.naming import TAG_LOGIN_POOL, TAG_ROLE

if TYPE_CHECKING:
    from localcloud.cloud import LocalCloud

ClientFactory = Callable[[str, str], Any]


def group_name(cluster: str, pool: str) -> str:
    """The Auto Scaling group of a login pool (CloudFormation names it; here a readable name)."""
    return f"{cluster}-login-{pool}"


def create_login_groups(cluster: Cluster, client: ClientFactory, infra: DeployedInfra) -> list[str]:
    """A launch template and an Auto Scaling group per login pool of `cluster` (home region); the group names."""
    ec2, autoscaling = client("ec2", cluster.region), client("autoscaling", cluster.region)
    image_id = compute_image(ec2, cluster)
    subnets = [subnet for az, subnet in infra.subnets.items() if region_of_az(az) == cluster.region]
    names = []
    for pool in cluster.login_nodes:
        tags = {**cluster.tags, TAG_CLUSTER: cluster.name, TAG_ROLE: "login", TAG_LOGIN_POOL: pool.name}
        template = ec2.create_launch_template(
            LaunchTemplateName=f"{cluster.name}-login-{pool.name}",
            LaunchTemplateData={
                "ImageId": image_id,
                "InstanceType": pool.instance_type,
                "TagSpecifications": [
                    {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
                ],
            },
        )["LaunchTemplate"]
        name = group_name(cluster.name, pool.name)
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateId": template["LaunchTemplateId"], "Version": "$Latest"},
            MinSize=pool.count,
            MaxSize=pool.count,
            DesiredCapacity=pool.count,
            VPCZoneIdentifier=",".join(subnets),
            Tags=[{"Key": "Name", "Value": name, "PropagateAtLaunch": True}],
        )
        names.append(name)
    return names


def login_view(layout: Layout, root: Path, instance_id: str, private_ip: str) -> enter.View:
    """A login instance's machine: an instance's view with its EC2 host name (jobs record it as their submit host)."""
    view = machines.instance_view(layout, root, instance_id, private_ip)
    return enter.View(view.root, view.binds, machines.ec2_hostname(private_ip))


@dataclass(frozen=True)
class LoginNode:
    """One live login instance of a local cloud."""

    instance_id: str
    private_ip: str
    login_pool: str
    group: str  # the Auto Scaling group that launched it

    @property
    def hostname(self) -> str:
        return machines.ec2_hostname(self.private_ip)


def login_nodes(cloud: LocalCloud) -> list[LoginNode]:
    """The cluster's live login instances, as the emulated EC2 reports them (home region)."""
    info = cloud.info()
    ec2 = cloud.aws().client("ec2", info.regions[0])
    filters = [
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [info.cluster]},
        {"Name": "tag-key", "Values": [TAG_LOGIN_POOL]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    found = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                found.append(
                    LoginNode(
                        inst["InstanceId"],
                        inst.get("PrivateIpAddress", ""),
                        tags[TAG_LOGIN_POOL],
                        tags.get("aws:autoscaling:groupName", ""),
                    )
                )
    return sorted(found, key=lambda n: n.instance_id)


def on_login(
    cloud: LocalCloud,
    node: LoginNode,
    argv: list[str],
    user: str | enter.User = "root",
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` on a login node as `user` (a shell a user opened there: a name of the image's /etc/passwd, or an
    `enter.User` for one only the directory knows), in the cloud's jobs directory."""
    root = cloud.root()
    view = login_view(cloud.layout, root, node.instance_id, node.private_ip)
    account = user if isinstance(user, enter.User) else enter.user(root, user)
    env = enter.user_env(account, {CLOUD_MARKER: str(cloud.layout.root), "ELASTIC_SLURM_BIND_ADDR": node.private_ip})
    # inside the root only: connections leave from the login node's own address, as on EC2 (native/bind_source.c)
    command = ["/usr/bin/env", f"LD_PRELOAD={BIND_SOURCE_SO}", *argv]
    return subprocess.run(
        enter.argv(view, command, None if account.name == "root" else account, cwd=str(cloud.layout.jobs)),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_ready(cloud: LocalCloud, timeout: float = 120) -> LoginNode:
    """The first login node, once its boot has written the config sackd fetched; OpsError with its boot log's tail."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = login_nodes(cloud)
        if nodes and (cloud.layout.machine_dir(nodes[0].instance_id) / "run/slurm/conf/slurm.conf").exists():
            return nodes[0]
        if time.monotonic() > deadline:
            log = cloud.layout.log / "instances" / f"{nodes[0].instance_id}.log" if nodes else None
            tail = log.read_text()[-600:].strip().replace("\n", " | ") if log and log.exists() else "no login instance"
            raise OpsError(f"login node not ready after {timeout:.0f}s: {tail}")
        time.sleep(1)


def sbatch_on_login(cloud: LocalCloud, node: LoginNode, *args: str, wrap: str, user: str | enter.User) -> str:
    """Submit a batch job as `user` from a login node (output in the jobs directory); returns the job id."""
    submitted = on_login(cloud, node, ["sbatch", "--parsable", "-o", "%j.out", *args, "--wrap", wrap], user=user)
    if submitted.returncode != 0:
        raise OpsError(f"sbatch on {node.hostname}: {submitted.stderr.strip() or submitted.stdout.strip()}")
    return submitted.stdout.strip().split(";")[0]
