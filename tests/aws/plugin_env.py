"""Shared setup for the power-save plugin tests against the emulated AWS: network, launch templates, manifests.

The network (VPCs, subnets, launch templates) is created once per session; every test gets its own cluster name
and state directory, so its instance set can be asserted alone (nothing leaked, nothing doubled).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import TAG_CLUSTER, Location, Manifest, PoolManifest
from slurm_plugin.powersave.ec2 import Ec2
from slurm_plugin.powersave.slurm import SlurmNode

HOME = "us-east-1"
REMOTE = "us-west-2"
HOME_AZS = ("us-east-1a", "us-east-1b", "us-east-1c")
TYPES = ("c7i.large", "c6i.large", "m7i.large")


@dataclass(frozen=True)
class Network:
    """Subnet and launch template ids in both regions."""

    subnets: dict[str, str]  # AZ -> subnet id
    templates: dict[str, str]  # region -> launch template id


def public_image(ec2: Any) -> str:
    """An Amazon Linux 2 image id of the emulated region, found by name: `describe_images(Owners=["amazon"])` alone
    answers ~1,300 images, whose serialisation costs the emulator seconds of CPU per call."""
    images = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*"]}])
    image_id: str = images["Images"][0]["ImageId"]
    return image_id


def build_network(aws: EmulatedAws) -> Network:
    """One VPC per region with loopback CIDRs, subnets per AZ, one launch template per region."""
    subnets: dict[str, str] = {}
    templates: dict[str, str] = {}
    layout = {HOME: ("127.16.0.0/16", HOME_AZS), REMOTE: ("127.17.0.0/16", ("us-west-2a",))}
    for region, (cidr, azs) in layout.items():
        ec2 = aws.client("ec2", region)
        vpc = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
        base = cidr.split(".")
        for index, az in enumerate(azs):
            block = f"{base[0]}.{base[1]}.{index * 64}.0/18"
            subnets[az] = ec2.create_subnet(VpcId=vpc, CidrBlock=block, AvailabilityZone=az)["Subnet"]["SubnetId"]
        ami = public_image(ec2)
        name = f"plugin-test-{uuid.uuid4().hex[:8]}"
        templates[region] = ec2.create_launch_template(
            LaunchTemplateName=name, LaunchTemplateData={"ImageId": ami, "InstanceType": TYPES[0]}
        )["LaunchTemplate"]["LaunchTemplateId"]
    return Network(subnets, templates)


def location(net: Network, az: str) -> Location:
    """The manifest location of an AZ."""
    region = az[:-1]
    return Location(
        region=region, availability_zone=az, subnet_id=net.subnets[az], launch_template_id=net.templates[region]
    )


def make_manifest(aws: EmulatedAws, net: Network, state: Path, cooldown: int = 600) -> Manifest:
    """A manifest with a unique cluster name and three pools: cpu-c7i (3 types x 3 AZs), gpu-g5 (1 type x 1 AZ),
    far-x (home AZ, then the remote region) and spot-s (spot_then_on_demand)."""
    pools = [
        PoolManifest(
            partition="cpu",
            pool="c7i",
            node_prefix="cpu-c7i-",
            min_nodes=0,
            max_nodes=2000,
            instance_types=list(TYPES),
            purchase_option="on_demand",
            locations=[location(net, az) for az in HOME_AZS],
        ),
        PoolManifest(
            partition="gpu",
            pool="g5",
            node_prefix="gpu-g5-",
            min_nodes=0,
            max_nodes=16,
            instance_types=["g5.xlarge"],
            purchase_option="on_demand",
            locations=[location(net, "us-east-1a")],
        ),
        PoolManifest(
            partition="far",
            pool="x",
            node_prefix="far-x-",
            min_nodes=0,
            max_nodes=64,
            instance_types=["c7i.large"],
            purchase_option="on_demand",
            locations=[location(net, "us-east-1a"), location(net, "us-west-2a")],
        ),
        PoolManifest(
            partition="spot",
            pool="s",
            node_prefix="spot-s-",
            min_nodes=0,
            max_nodes=64,
            instance_types=["c7i.large", "c6i.large"],
            purchase_option="spot_then_on_demand",
            locations=[location(net, "us-east-1a"), location(net, "us-east-1b")],
        ),
    ]
    state.mkdir(parents=True, exist_ok=True)
    return Manifest(
        cluster=f"t{uuid.uuid4().hex[:10]}",
        home_region=HOME,
        aws_endpoint_url=aws.url,
        instance_cache_path=str(state / "instance-cache.json"),
        state_dir=str(state / "state"),
        log_file=str(state / "plugin.log"),
        capacity_cooldown_seconds=cooldown,
        tags={"project": "plugin-tests"},
        pools=pools,
    )


def live_instances(aws: EmulatedAws, cluster: str, regions: Sequence[str] = (HOME, REMOTE)) -> list[dict[str, Any]]:
    """Every non-terminated instance of the cluster, in all test regions."""
    found = []
    for region in regions:
        pages = (
            aws.client("ec2", region)
            .get_paginator("describe_instances")
            .paginate(
                Filters=[
                    {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
                    {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
                ]
            )
        )
        for page in pages:
            for reservation in page["Reservations"]:
                found.extend(reservation["Instances"])
    return found


def ec2_for(aws: EmulatedAws) -> Ec2:
    """The plugin's EC2 adapter pointed at the emulated AWS."""
    return Ec2(aws.url)


@dataclass
class FakeSlurm:
    """Records what the plugin asks of Slurm (a fake of our adapter; real scontrol runs in the e2e tests)."""

    addresses: dict[str, str] = field(default_factory=dict)
    powered_down: dict[str, str] = field(default_factory=dict)
    down: dict[str, tuple[str, int]] = field(default_factory=dict)  # node -> (reason, ResumeAfter)
    resets: list[str] = field(default_factory=list)
    update_calls: int = 0
    known: tuple[str, ...] = ()  # further nodes Slurm has (idle~)
    states: dict[str, str] = field(default_factory=dict)  # node -> state, where not idle~ (until set DOWN)
    reasons: dict[str, str] = field(default_factory=dict)  # node -> its Reason=

    def set_addresses(self, addresses: Mapping[str, str]) -> None:
        self.update_calls += 1
        self.addresses.update(addresses)

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        self.update_calls += 1
        self.resets.extend(nodes)
        for node in nodes:
            self.addresses.pop(node, None)

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        self.update_calls += 1
        self.powered_down.update(dict.fromkeys(nodes, reason))

    def set_down(self, nodes: Sequence[str], reason: str, resume_after: int) -> None:
        self.update_calls += 1
        self.down.update(dict.fromkeys(nodes, (reason, resume_after)))

    def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
        names = [*self.known, *self.states, *self.addresses, *self.powered_down] if nodes is None else nodes
        return {
            n: SlurmNode(n, self.addresses.get(n, n), n, self._state(n), self.reasons.get(n, ""))
            for n in dict.fromkeys(names)
        }

    def _state(self, node: str) -> str:
        if node in self.down:
            return "DOWN+CLOUD+POWERED_DOWN"
        if node in self.states:
            return self.states[node]
        if node in self.powered_down or node not in self.addresses:
            return "IDLE+CLOUD+POWERED_DOWN"
        return "IDLE+CLOUD"


def rid(label: str) -> str:
    """A unique request id (ClientTokens derive from it and the emulated EC2 remembers tokens for the session)."""
    return f"{label}-{uuid.uuid4().hex[:8]}"
