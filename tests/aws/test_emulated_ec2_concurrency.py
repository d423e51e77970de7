"""The emulated EC2 answers concurrent launches as EC2 does: the plugin launches several jobs at once
(slurm_plugin/powersave/launcher.py), and moto's EC2 backend, unsafe for concurrent requests (two launches into one
subnet collide in its address allocation and come back as an HTML 500), gets them one at a time from the fault layer
(localcloud/aws/fault_middleware.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from localcloud.aws.emulated_aws import EmulatedAws
from tests.aws.plugin_env import public_image

LAUNCHES = 8
PER_LAUNCH = 25


def test_concurrent_launches_into_one_subnet_all_succeed(aws: EmulatedAws) -> None:
    ec2 = aws.client("ec2", "us-east-1")
    vpc = ec2.create_vpc(CidrBlock="127.90.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.90.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]
    image = public_image(ec2)

    def launch(index: int) -> list[dict[str, Any]]:
        client = aws.client("ec2", "us-east-1")  # one client per thread, as the plugin's launch threads have
        answer = client.run_instances(
            ImageId=image,
            InstanceType="c7i.large",
            MinCount=PER_LAUNCH,
            MaxCount=PER_LAUNCH,
            SubnetId=subnet["SubnetId"],
            ClientToken=f"concurrency-{index}",
        )
        return list(answer["Instances"])

    try:
        with ThreadPoolExecutor(LAUNCHES) as pool:
            launched = [i for batch in pool.map(launch, range(LAUNCHES)) for i in batch]
        addresses = [i["PrivateIpAddress"] for i in launched]
        assert len(launched) == LAUNCHES * PER_LAUNCH
        assert len(set(addresses)) == len(addresses)  # no address handed out twice
    finally:
        ids = [
            i["InstanceId"]
            for r in ec2.describe_instances(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Reservations"]
            for i in r["Instances"]
        ]
        if ids:
            ec2.terminate_instances(InstanceIds=ids)
