"""EFA pools launch through CreateFleet: their launch template has network interfaces, next to which RunInstances
refuses an instance-level SubnetId, while CreateFleet's overrides carry the subnet (slurm_plugin/powersave/ec2.py).
Against the emulated AWS, with a launch template shaped like stacks/launch_templates.py's EFA templates."""

from __future__ import annotations

import uuid

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.powersave.ec2 import Ec2, LaunchRequest
from slurm_plugin.powersave.planner import Override
from tests.aws.plugin_env import Network, public_image

REGION = "us-east-1"


def _efa_template(aws: EmulatedAws) -> str:
    ec2 = aws.client("ec2", REGION)
    ami = public_image(ec2)
    interface = {"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa", "DeleteOnTermination": True}
    data = {"ImageId": ami, "InstanceType": "c5n.18xlarge", "NetworkInterfaces": [interface]}
    name = f"efa-test-{uuid.uuid4().hex[:8]}"
    template = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)
    return str(template["LaunchTemplate"]["LaunchTemplateId"])


def _request(template: str, subnet: str, efa: bool) -> LaunchRequest:
    return LaunchRequest(
        region=REGION,
        launch_template_id=template,
        market="on-demand",
        overrides=(Override("c5n.18xlarge", subnet, "us-east-1b", 0),),
        count=2,
        token=f"efa-{uuid.uuid4().hex[:12]}",
        tags={"elastic-slurm:cluster": f"efa{uuid.uuid4().hex[:6]}"},
        efa=efa,
    )


def test_an_efa_pool_with_one_override_launches_with_create_fleet_into_the_override_subnet(
    aws: EmulatedAws, network: Network
) -> None:
    subnet = network.subnets["us-east-1b"]
    result = Ec2(aws.url).launch(_request(_efa_template(aws), subnet, efa=True))
    assert result.api == "CreateFleet"
    assert result.errors == ()
    assert len(result.instances) == 2
    assert {i.availability_zone for i in result.instances} == {"us-east-1b"}


def test_a_pool_without_efa_and_one_override_still_uses_run_instances(aws: EmulatedAws, network: Network) -> None:
    subnet = network.subnets["us-east-1b"]
    result = Ec2(aws.url).launch(_request(network.templates[REGION], subnet, efa=False))
    assert result.api == "RunInstances"
    assert len(result.instances) == 2
