"""The emulated AWS's EC2 change feed, which the instance runner waits on instead of polling DescribeInstances
(localcloud/instances/ec2_changes.py): a wait ends as soon as an EC2 call that may change an instance is served, reads
do not end it, a wait with nothing to report lasts its time, and a SIGTERM ends the runner's pending wait at once.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.instances.ec2_changes import ChangeFeed, Interrupted
from tests.aws.plugin_env import public_image


def test_a_wait_ends_when_an_instance_is_launched_and_not_when_ec2_is_only_read(aws: EmulatedAws) -> None:
    ec2 = aws.client("ec2", "us-east-1")
    feed = ChangeFeed(aws.url)
    start = feed.wait(-1, 0)
    assert start is not None  # answers at once: the current generation
    ami = public_image(ec2)
    before = feed.wait(-1, 0)
    assert before is not None and before >= start
    ec2.describe_instances()
    ec2.describe_images(ImageIds=[ami])
    assert feed.wait(-1, 0) == before  # reads change nothing

    answered: list[int | None] = []
    waiter = threading.Thread(target=lambda: answered.append(feed.wait(before, 30)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # nothing changed yet: still waiting
    instance = ec2.run_instances(ImageId=ami, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0]
    waiter.join(15)  # half the wait: it ended with the launch, not at its time
    assert not waiter.is_alive()
    assert answered == [before + 1]
    ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    assert feed.wait(before + 1, 5) == before + 2  # already past: at once


def test_a_wait_with_no_change_lasts_its_time_and_a_dead_feed_answers_none(aws: EmulatedAws) -> None:
    feed = ChangeFeed(aws.url)
    now = feed.wait(-1, 0)
    assert now is not None
    began = time.monotonic()
    assert feed.wait(now, 0.6) == now
    assert time.monotonic() - began >= 0.5
    # a generation the server never had (the caller saw an earlier server process) is answered at once
    began = time.monotonic()
    assert feed.wait(now + 1000, 20) == now
    assert time.monotonic() - began < 10
    assert ChangeFeed("http://127.0.0.1:9").wait(0, 0.1) is None  # nothing listens: the caller just looks again


def test_sigterm_ends_a_pending_wait_at_once(aws: EmulatedAws) -> None:
    feed = ChangeFeed(aws.url)
    now = feed.wait(-1, 0)
    assert now is not None
    previous = signal.signal(signal.SIGALRM, lambda *_: feed.interrupt())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        began = time.monotonic()
        with pytest.raises(Interrupted):
            feed.wait(now, 20)
        assert time.monotonic() - began < 10  # the wait was for 20 s
        assert not feed.waiting
        # a SIGTERM that comes between two waits: the next one does not begin
        late = ChangeFeed(aws.url)
        late.interrupt()  # outside a wait: raises nothing
        began = time.monotonic()
        with pytest.raises(Interrupted):
            late.wait(now, 20)
        assert time.monotonic() - began < 10
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_auto_scaling_launch_ends_a_wait_too(aws: EmulatedAws) -> None:
    """Login nodes are launched by Auto Scaling, not by an EC2 call."""
    ec2 = aws.client("ec2", "us-east-1")
    vpc = ec2.create_vpc(CidrBlock="127.18.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.18.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]
    template = ec2.create_launch_template(
        LaunchTemplateName="change-feed-login",
        LaunchTemplateData={"ImageId": public_image(ec2), "InstanceType": "t3.micro"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    feed = ChangeFeed(aws.url)
    before = feed.wait(-1, 0)
    assert before is not None
    autoscaling = aws.client("autoscaling", "us-east-1")
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="change-feed-login",
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=1,
        DesiredCapacity=1,
        VPCZoneIdentifier=subnet["SubnetId"],
    )
    assert (feed.wait(before, 20) or 0) > before
    autoscaling.delete_auto_scaling_group(AutoScalingGroupName="change-feed-login", ForceDelete=True)
