"""The EC2 limits simulation (bench/ec2_sim): token buckets, EC2's answers through a real botocore client, the floor,
the virtual clock, and small end-to-end scale-outs of the real plugin. Counts and outcomes only, never timing."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from bench.ec2_sim import floor
from bench.ec2_sim.__main__ import main as sim_main
from bench.ec2_sim.buckets import DOCUMENTED, BucketSpec, Limits, TokenBucket
from bench.ec2_sim.clock import SimulationOver, VirtualClock, patched_time
from bench.ec2_sim.driver import Scenario, simulate
from bench.ec2_sim.ec2_model import ApiError, Ec2Model, ModelParams, Subnet
from bench.ec2_sim.wire import SimEc2, install, parse_query

AZS = ("us-east-1a", "us-east-1b")
SUBNETS = [Subnet(f"subnet-{az}", "us-east-1", az) for az in AZS]
START = 1_800_000_000.0


def _limits(launch: BucketSpec) -> Limits:
    return Limits(request=DOCUMENTED.request, resource={**DOCUMENTED.resource, "RunInstances": launch})


@pytest.fixture
def clock() -> Iterator[VirtualClock]:
    virtual = VirtualClock(START)
    with patched_time(virtual):
        yield virtual
    virtual.close()


def _model(clock: VirtualClock, **params: Any) -> Ec2Model:
    return Ec2Model(ModelParams(**params), SUBNETS, clock.now)


def _client(model: Ec2Model, plugin_policy: bool = False) -> Any:
    """The plugin's client (its retry policy), or a bare botocore client that never retries."""
    if plugin_policy:
        return SimEc2(model).client("us-east-1")
    session = boto3.session.Session(aws_access_key_id="sim", aws_secret_access_key="sim")
    bare = session.client("ec2", region_name="us-east-1", endpoint_url=SimEc2.ENDPOINT,
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}))  # fmt: skip
    install(bare, model)
    return bare


def _fleet(client: Any, count: int, types: tuple[str, ...] = ("c7i.large",), token: str = "t1") -> dict[str, Any]:
    overrides = [
        {"InstanceType": t, "SubnetId": s.subnet_id, "Priority": float(i)}
        for i, (t, s) in enumerate((t, s) for t in types for s in SUBNETS)
    ]
    answer: dict[str, Any] = client.create_fleet(
        Type="instant",
        ClientToken=token,
        TargetCapacitySpecification={"TotalTargetCapacity": count, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1"}, "Overrides": overrides}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "elastic-slurm:cluster", "Value": "c"}]}],
    )
    return answer


# ---------------------------------------------------------------------------------------------- token buckets
def test_a_bucket_starts_full_and_an_empty_bucket_refuses() -> None:
    bucket = TokenBucket(BucketSpec(5, 2), START)
    assert [bucket.take(1, START) for _ in range(6)] == [True] * 5 + [False]


def test_a_bucket_refills_at_whole_seconds_up_to_its_capacity() -> None:
    bucket = TokenBucket(BucketSpec(10, 2), START)
    assert bucket.take_up_to(100, START) == 10
    assert bucket.level(START + 0.9) == 0
    assert bucket.level(START + 1.0) == 2
    assert bucket.level(START + 3.5) == 6
    assert bucket.level(START + 100) == 10  # never above the capacity
    assert bucket.seconds_until(4, START + 100) == 0
    bucket.take_up_to(10, START + 100)
    assert bucket.seconds_until(4, START + 100.25) == pytest.approx(1.75)
    assert bucket.seconds_until(11, START + 100.25) == math.inf


def test_the_documented_numbers_are_the_ones_modelled() -> None:
    assert DOCUMENTED.resource["RunInstances"] == BucketSpec(1000, 2)
    assert DOCUMENTED.resource["TerminateInstances"] == BucketSpec(1000, 20)
    assert DOCUMENTED.request["RunInstances"] == BucketSpec(5, 2)
    assert DOCUMENTED.request["CreateFleet"] == BucketSpec(50, 5)
    assert DOCUMENTED.request["DescribeInstances"] == BucketSpec(100, 20)
    assert DOCUMENTED.resource_of["CreateFleet"] == "RunInstances"
    assert DOCUMENTED.with_launch_refill(10).resource["RunInstances"] == BucketSpec(1000, 10)


# ---------------------------------------------------------------------------------------------- EC2's answers
def test_an_empty_request_bucket_answers_503_request_limit_exceeded(clock: VirtualClock) -> None:
    model = _model(clock, limits=Limits(request={**DOCUMENTED.request, "CreateFleet": BucketSpec(2, 0.5)},
                                        resource=DOCUMENTED.resource))  # fmt: skip
    client = _client(model)
    _fleet(client, 1, token="a")
    _fleet(client, 1, token="b")
    with pytest.raises(ClientError) as raised:
        _fleet(client, 1, token="c")
    assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert model.throttled["CreateFleet"] == 1
    assert len(model.instances) == 2


def test_the_plugins_retry_policy_retries_a_throttled_call_in_virtual_time(clock: VirtualClock) -> None:
    random.seed(3)  # botocore's backoff jitter
    model = _model(clock, limits=Limits(request={**DOCUMENTED.request, "CreateFleet": BucketSpec(1, 1)},
                                        resource=DOCUMENTED.resource))  # fmt: skip
    client = _client(model, plugin_policy=True)
    _fleet(client, 1, token="a")
    answer = _fleet(client, 1, token="b")  # waits (botocore's backoff) until the bucket has refilled
    assert answer["ResponseMetadata"]["RetryAttempts"] >= 1
    assert model.calls["CreateFleet"] == 2 + answer["ResponseMetadata"]["RetryAttempts"]
    assert clock.monotonic() > 0


def test_a_short_launch_bucket_launches_what_it_allows_and_lists_request_limit_exceeded_per_override(
    clock: VirtualClock,
) -> None:
    model = _model(clock, ice_rate=0.0, limits=_limits(BucketSpec(100, 2)))
    answer = _fleet(_client(model), 150, types=("c7i.large", "c6i.large"))
    launched = [i for group in answer["Instances"] for i in group["InstanceIds"]]
    assert len(launched) == 100
    codes = [e["ErrorCode"] for e in answer["Errors"]]
    assert codes == ["RequestLimitExceeded"] * 3  # the three overrides after the first, which took all 100 tokens
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    again = _fleet(_client(model), 10, types=("c7i.large", "c6i.large"), token="t2")
    assert again["Instances"] == [] and len(again["Errors"]) == 4


def test_a_launch_bucket_with_no_token_answers_503_in_the_throttle_variant(clock: VirtualClock) -> None:
    model = _model(clock, ice_rate=0.0, limits=_limits(BucketSpec(3, 1)), empty_bucket_answer="throttle")
    client = _client(model)
    _fleet(client, 3, token="a")
    with pytest.raises(ClientError) as raised:
        _fleet(client, 1, token="b")
    assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert model.throttled == {"CreateFleet (resource)": 1}


def test_run_instances_launches_what_the_launch_bucket_allows_above_min_count_else_503(clock: VirtualClock) -> None:
    model = _model(clock, ice_rate=0.0, limits=_limits(BucketSpec(5, 1)))
    client = _client(model)
    run = {"LaunchTemplate": {"LaunchTemplateId": "lt-1"}, "InstanceType": "c7i.large", "SubnetId": "subnet-us-east-1a"}
    assert len(client.run_instances(**run, MinCount=1, MaxCount=8)["Instances"]) == 5
    with pytest.raises(ClientError) as raised:
        client.run_instances(**run, MinCount=1, MaxCount=1)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert model.throttled == {"RunInstances (resource)": 1}
    terminate = _model(clock, ice_rate=0.0, limits=Limits(request=DOCUMENTED.request, resource={
        **DOCUMENTED.resource, "TerminateInstances": BucketSpec(2, 1)}))  # fmt: skip
    ids = [i for g in _fleet(_client(terminate), 3)["Instances"] for i in g["InstanceIds"]]
    with pytest.raises(ClientError):
        _client(terminate).terminate_instances(InstanceIds=ids)  # 3 instances, 2 tokens: nothing terminated
    assert len(terminate.live(clock.now())) == 3 and terminate.throttled == {"TerminateInstances (resource)": 1}


def test_capacity_errors_fail_over_to_the_next_pool_and_run_instances_answers_500(clock: VirtualClock) -> None:
    model = _model(clock, ice_rate=0.0, capacity={("us-east-1a", "c7i.large"): 4})
    answer = _fleet(_client(model), 10)
    placed = {g["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"]: len(g["InstanceIds"])
              for g in answer["Instances"]}  # fmt: skip
    assert placed == {"subnet-us-east-1a": 4, "subnet-us-east-1b": 6}
    assert model.capacity[("us-east-1a", "c7i.large")] == 0
    client = _client(model)
    with pytest.raises(ClientError) as raised:
        client.run_instances(
            LaunchTemplate={"LaunchTemplateId": "lt-1"}, InstanceType="c7i.large", SubnetId="subnet-us-east-1a",
            MinCount=1, MaxCount=2,
        )  # fmt: skip
    assert raised.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    always = _model(clock, ice_rate=1.0)
    failed = _fleet(_client(always), 5)
    assert failed["Instances"] == []
    assert [e["ErrorCode"] for e in failed["Errors"]] == ["InsufficientInstanceCapacity"] * 2


def test_an_all_or_nothing_fleet_launches_nothing_when_one_az_cannot_hold_it(clock: VirtualClock) -> None:
    model = _model(clock, ice_rate=0.0, capacity={("us-east-1a", "c7i.large"): 3})
    subnet = "subnet-us-east-1a"
    answer = _client(model).create_fleet(
        Type="instant", ClientToken="job",
        TargetCapacitySpecification={"TotalTargetCapacity": 4, "DefaultTargetCapacityType": "on-demand"},
        OnDemandOptions={"SingleAvailabilityZone": True, "MinTargetCapacity": 4},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1"},
                                "Overrides": [{"InstanceType": "c7i.large", "SubnetId": subnet}]}],
    )  # fmt: skip
    assert answer["Instances"] == [] and model.instances == {}
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"]


def test_describe_filters_and_terminate_give_capacity_back(clock: VirtualClock) -> None:
    model = _model(clock, ice_rate=0.0, capacity={("us-east-1a", "c7i.large"): 3})
    client = _client(model)
    ids = [i for g in _fleet(client, 3)["Instances"] for i in g["InstanceIds"]]
    pages = client.describe_instances(
        Filters=[{"Name": "tag:elastic-slurm:cluster", "Values": ["c"]},
                 {"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )  # fmt: skip
    described = [i for r in pages["Reservations"] for i in r["Instances"]]
    assert sorted(i["InstanceId"] for i in described) == sorted(ids)
    assert all(i["PrivateIpAddress"].startswith("127.") for i in described)
    client.terminate_instances(InstanceIds=ids[:2])
    assert model.capacity[("us-east-1a", "c7i.large")] == 2
    live = client.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running", "pending"]}])
    assert [i["InstanceId"] for r in live["Reservations"] for i in r["Instances"]] == ids[2:]
    with pytest.raises(ApiError):
        model.handle("us-east-1", "DescribeInstances", {"Filter": [{"Name": "bogus", "Value": ["x"]}]})


def test_parse_query_nests_numbered_parameters() -> None:
    action, params = parse_query("Action=RunInstances&Version=1&MinCount=1&TagSpecification.1.Tag.2.Key=b"
                                 "&TagSpecification.1.Tag.1.Key=a")  # fmt: skip
    assert action == "RunInstances"
    assert params == {"MinCount": "1", "TagSpecification": [{"Tag": [{"Key": "a"}, {"Key": "b"}]}]}


def test_nothing_is_sent_on_the_network(clock: VirtualClock) -> None:
    model = _model(clock)
    ec2 = SimEc2(model)
    assert ec2.endpoint_url is not None and ec2.endpoint_url.startswith("http://127.0.0.1")
    client = ec2.client("us-east-1")
    install(client, model)  # a second hook changes nothing: the first answer wins
    assert client.describe_instances(Filters=[{"Name": "instance-id", "Values": ["i-x"]}])["Reservations"] == []


# ---------------------------------------------------------------------------------------------- the floor
def test_the_launch_schedule_follows_the_bucket() -> None:
    bucket = BucketSpec(1000, 2)
    assert floor.launch_schedule(1000, bucket) == [(0.0, 1000)]
    assert floor.launch_schedule(1005, bucket) == [(0.0, 1000), (1.0, 2), (2.0, 2), (3.0, 1)]
    assert floor.launch_floor(4000, bucket) == 1500
    assert floor.launch_floor(10_000, bucket) == 4500
    assert floor.launch_floor(1000, BucketSpec(1000, 10)) == 0
    with pytest.raises(ValueError, match="never refills"):
        floor.launch_schedule(5, BucketSpec(2, 0))


def test_the_running_floor_is_the_launch_floor_plus_the_last_boot() -> None:
    bucket = BucketSpec(1000, 2)
    sharp = floor.BootTime(60, 1e-6)
    assert floor.all_running_floor(4000, bucket, sharp) == pytest.approx(1560, abs=0.01)
    spread = floor.BootTime(75, 0.25)
    floors = [floor.all_running_floor(n, bucket, spread) for n in (1, 1000, 4000)]
    assert floors[0] == pytest.approx(75, rel=0.01)  # the median of one boot
    assert floors == sorted(floors) and floors[2] > 1500 + 75
    assert floor.expected_running([0.0, 10_000.0], 4000, bucket, spread) == [0.0, pytest.approx(4000)]


# ---------------------------------------------------------------------------------------------- virtual clock
def test_processes_interleave_in_virtual_time_and_a_closed_clock_stops_sleepers() -> None:
    clock = VirtualClock(START)
    seen: list[tuple[str, float]] = []

    def process(name: str, pause: float) -> None:
        for _ in range(2):
            clock.sleep(pause)
            seen.append((name, clock.monotonic()))

    clock.spawn(lambda: process("a", 3), "a")
    clock.spawn(lambda: process("b", 2), "b")
    clock.sleep(10)
    assert seen == [("b", 2), ("a", 3), ("b", 4), ("a", 6)]
    stopped: list[bool] = []

    def sleeper() -> None:
        try:
            clock.sleep(1000)
        except SimulationOver:
            stopped.append(True)
            raise

    clock.spawn(sleeper, "sleeper")
    clock.sleep(1)
    clock.close()
    assert stopped == [True] and clock.errors == []


# ---------------------------------------------------------------------------------------------- end to end
def test_two_hundred_nodes_take_one_create_fleet_and_one_describe_and_all_run() -> None:
    row = simulate(Scenario("small", 200, model=ModelParams(ice_rate=0.0)))
    assert row["nodes_running"] == 200 and row["time_to_all_running_s"] is not None
    assert row["aws_calls"] == {"CreateFleet": 1, "DescribeInstances": 1}
    assert row["instances_launched"] == 200 and row["instances_leaked"] == 0
    assert row["resume_calls"] == 1 and row["resume_timeouts"] == 0 and row["powered_down_by_plugin"] == {}


def test_a_scale_out_past_the_launch_bucket_gets_every_node_running_without_a_leak_or_a_double_launch() -> None:
    model = ModelParams(limits=_limits(BucketSpec(100, 2)), ice_rate=0.05)
    row = simulate(Scenario("throttled", 300, model=model))
    assert row["nodes_running"] == 300
    assert row["instances_leaked"] == 0
    assert row["instances_launched"] - row["instances_terminated"] == 300
    assert row["powered_down_by_plugin"].get("RequestLimitExceeded", 0) > 0  # shortfall given back to Slurm
    assert row["resume_calls"] > 1
    # each ResumeProgram call: the launch calls the capacity fail-over needs, each with its one describe
    assert row["aws_calls"]["DescribeInstances"] == row["aws_calls"]["CreateFleet"]
    assert row["aws_calls"]["CreateFleet"] <= row["resume_calls"] * 10


def test_the_what_if_adapter_waits_for_tokens_instead_of_requeueing() -> None:
    model = ModelParams(limits=_limits(BucketSpec(100, 2)), ice_rate=0.0)
    row = simulate(Scenario("paced", 300, model=model, pace_budget_s=300, pace_poll_s=10))
    assert row["nodes_running"] == 300 and row["instances_leaked"] == 0
    assert row["resume_calls"] == 1 and row["powered_down_by_plugin"] == {}


def test_the_entry_point_refuses_an_out_path_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    assert sim_main(["--out", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--out" in err
