"""The manager's topology step (slurm_plugin/manager/topology.py) over recorded-shaped DescribeInstanceTopology answers:
EC2 is asked only about new running instances of topology pools (100 ids a call, capped a cycle), topology.conf is
rewritten and slurmctld reconfigured once only when the tree changed, and never otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from slurm_plugin.manager import topology
from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manifest import Location, Manifest, PoolManifest
from slurm_plugin.powersave.slurm import SlurmError
from slurm_plugin.render.topology import PoolNodeNames, render_topology
from tests.unit.topology_answers import RECORDED, instance_item

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
LOC = [Location(region="us-west-2", availability_zone="us-west-2a", subnet_id="s", launch_template_id="l")]


def pool(name: str, size: int, network_topology: bool = True) -> PoolManifest:
    return PoolManifest(
        partition="gpu", pool=name, node_prefix=f"gpu-{name}-", min_nodes=0, max_nodes=size,
        instance_types=["p4d.24xlarge"], purchase_option="on_demand", locations=LOC, network_topology=network_topology,
    )  # fmt: skip


def manifest(tmp_path: Path, *pools: PoolManifest) -> Manifest:
    (tmp_path / "etc").mkdir(exist_ok=True)
    return Manifest(
        cluster="alpha", home_region="us-west-2", instance_cache_path="c", state_dir=str(tmp_path / "state"),
        log_file=str(tmp_path / "plugin.log"), slurm_conf=str(tmp_path / "etc" / "slurm.conf"), pools=list(pools),
    )  # fmt: skip


@dataclass
class FakeClient:
    """describe_instance_topology answering from RECORDED (or `answers`), `page` items a call."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    page: int = 100
    calls: list[dict[str, Any]] = field(default_factory=list)

    def describe_instance_topology(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        ids = request["InstanceIds"]
        assert len(ids) <= 100 and "MaxResults" not in request  # EC2 refuses more ids, or MaxResults with ids
        start = int(request.get("NextToken", "0"))
        items = []
        for iid in ids[start : start + self.page]:
            if iid in self.answers:
                items.append({"InstanceId": iid, "NetworkNodes": self.answers[iid]})
            elif any(r[0] == iid for r in RECORDED):
                items.append(instance_item(iid))
        reply: dict[str, Any] = {"Instances": items}
        if start + self.page < len(ids):
            reply["NextToken"] = str(start + self.page)
        return reply


@dataclass
class FakeEc2:
    client_of: dict[str, FakeClient] = field(default_factory=dict)

    def client(self, region: str) -> FakeClient:
        return self.client_of.setdefault(region, FakeClient())

    @property
    def calls(self) -> int:
        return sum(len(c.calls) for c in self.client_of.values())


@dataclass
class FakeSlurm:
    fail: bool = False
    reconfigures: int = 0

    def reconfigure(self) -> None:
        if self.fail:
            raise SlurmError("scontrol reconfigure: exit 1: Unable to contact slurm controller")
        self.reconfigures += 1


def up(name: str, addr: str) -> Node:
    return Node(name, *parse_state("IDLE+CLOUD"), addr)


def running(iid: str, ip: str, key: str = "gpu-p4d", launched: datetime = NOW - timedelta(hours=1)) -> Instance:
    return Instance(iid, "us-west-2", "running", ip, launched, "alpha", key, "p4d.24xlarge", "us-west-2a")


def fleet(count: int, key: str = "gpu-p4d") -> tuple[list[Node], list[Instance]]:
    prefix = f"gpu-{key.split('-', 1)[1]}-"
    nodes = [up(f"{prefix}{i}", f"127.0.{i // 250}.{i % 250 + 1}") for i in range(1, count + 1)]
    instances = [running(f"i-{key}-{i:04d}", n.addr or "", key) for i, n in enumerate(nodes, start=1)]
    return nodes, instances


def conf(m: Manifest) -> str:
    return topology.topology_path(m).read_text()


def test_new_instances_are_asked_about_once_and_the_tree_is_reconfigured_once(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 6))
    nodes = [up("gpu-p4d-1", "127.0.0.1"), up("gpu-p4d-2", "127.0.0.2"), up("gpu-p4d-5", "127.0.0.5")]
    instances = [running("i-1111111111example", "127.0.0.1"), running("i-2222222222example", "127.0.0.2"),
                 running("i-3333333333example", "127.0.0.5")]  # fmt: skip
    ec2, slurm = FakeEc2(), FakeSlurm()
    result = topology.sync(m, nodes, instances, ec2, slurm, NOW)
    assert (result.calls, result.asked, result.placed, result.reconfigured) == (1, 3, 3, True)
    assert ec2.client_of["us-west-2"].calls == [{"InstanceIds": sorted(i.instance_id for i in instances)}]
    assert slurm.reconfigures == 1 and result.counters == ["topology_updates"]
    text = conf(m)
    assert "SwitchName=nn-3333333333example Nodes=gpu-p4d-[1-2]\n" in text
    assert "SwitchName=nn-1311133311example Nodes=gpu-p4d-5\n" in text
    assert "SwitchName=gpu-p4d Nodes=gpu-p4d-[3-4,6]\n" in text
    # the next cycle, nothing changed: no AWS call, no write, no reconfigure
    again = topology.sync(m, nodes, instances, ec2, slurm, NOW + timedelta(seconds=45))
    assert (again.calls, again.changed, again.reconfigured) == (0, False, False)
    assert ec2.calls == 1 and slurm.reconfigures == 1 and conf(m) == text


def test_an_instance_that_goes_moves_its_node_back_under_its_pool_without_asking_ec2(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 4))
    nodes = [up("gpu-p4d-1", "127.0.0.1"), up("gpu-p4d-2", "127.0.0.2")]
    instances = [running("i-1111111111example", "127.0.0.1"), running("i-2222222222example", "127.0.0.2")]
    ec2, slurm = FakeEc2(), FakeSlurm()
    topology.sync(m, nodes, instances, ec2, slurm, NOW)
    # node 2 powered down, its instance terminated (EC2 no longer lists it)
    nodes[1] = Node("gpu-p4d-2", *parse_state("IDLE+CLOUD+POWERED_DOWN"))
    later = NOW + topology.RECONFIGURE_GAP  # a reconfigure-only Slurm (before 25.05): one reconfigure per gap
    result = topology.sync(m, nodes, instances[:1], ec2, slurm, later)
    assert (result.calls, result.reconfigured) == (0, True) and ec2.calls == 1 and slurm.reconfigures == 2
    assert "SwitchName=nn-3333333333example Nodes=gpu-p4d-1\n" in conf(m)
    assert "SwitchName=gpu-p4d Nodes=gpu-p4d-[2-4]\n" in conf(m)
    assert list(topology.load_known(m.state_dir)) == ["i-1111111111example"]  # the gone instance is forgotten


def test_booting_powering_down_and_unmatched_nodes_are_not_placed(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 4))
    nodes = [
        Node("gpu-p4d-1", *parse_state("IDLE+CLOUD+POWERING_UP"), "127.0.0.1"),
        Node("gpu-p4d-2", *parse_state("IDLE+CLOUD+POWERING_DOWN"), "127.0.0.2"),
        up("gpu-p4d-3", "127.0.0.9"),  # no running instance has its address
        up("gpu-p4d-4", "127.0.0.4"),
    ]
    instances = [running("i-1111111111example", "127.0.0.1"), running("i-2222222222example", "127.0.0.2"),
                 running("i-3333333333example", "127.0.0.4", key="gpu-other")]  # fmt: skip
    result = topology.sync(m, nodes, instances, FakeEc2(), FakeSlurm(), NOW)
    assert result.placed == 0 and "SwitchName=gpu-p4d Nodes=gpu-p4d-[1-4]\n" in conf(m)


def test_the_first_cycle_with_nothing_placed_finds_render_s_file_unchanged(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 3), pool("c7i", 2, network_topology=False))
    pools = [PoolNodeNames("gpu-p4d", ("gpu-p4d-1", "gpu-p4d-2", "gpu-p4d-3")),
             PoolNodeNames("gpu-c7i", ("gpu-c7i-1", "gpu-c7i-2"))]  # fmt: skip
    topology.topology_path(m).write_text(render_topology("alpha", pools, {}))
    ec2, slurm = FakeEc2(), FakeSlurm()
    result = topology.sync(m, [], [], ec2, slurm, NOW)
    assert (result.calls, result.changed, slurm.reconfigures) == (0, False, 0)


def test_a_pool_without_network_topology_is_never_asked_about(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 2, network_topology=False))
    nodes, instances = fleet(2)
    ec2, slurm = FakeEc2(), FakeSlurm()
    result = topology.sync(m, nodes, instances, ec2, slurm, NOW)
    assert (ec2.calls, result.changed, slurm.reconfigures) == (0, False, 0)
    assert not topology.topology_path(m).exists()  # no topology pool: the manager leaves the file alone


def test_hundreds_of_new_instances_cost_one_call_per_100_up_to_the_cap_and_the_rest_wait(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 700))
    nodes, instances = fleet(700)
    ec2 = FakeEc2({"us-west-2": FakeClient(answers={i.instance_id: ["nn-top", "nn-mid", "nn-low"] for i in instances})})
    slurm = FakeSlurm()
    first = topology.sync(m, nodes, instances, ec2, slurm, NOW)
    assert (first.calls, first.asked, first.placed) == (topology.MAX_CALLS, 500, 500) == (5, 500, 500)
    second = topology.sync(m, nodes, instances, ec2, slurm, NOW + topology.RECONFIGURE_GAP)
    assert (second.calls, second.asked, second.placed) == (2, 200, 700)
    third = topology.sync(m, nodes, instances, ec2, slurm, NOW + 2 * topology.RECONFIGURE_GAP)
    assert (third.calls, third.reconfigured) == (0, False) and slurm.reconfigures == 2
    assert "SwitchName=nn-low Nodes=gpu-p4d-[1-700]\n" in conf(m)


def test_pages_of_an_answer_are_followed(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 50))
    nodes, instances = fleet(50)
    client = FakeClient(answers={i.instance_id: ["nn-top", "nn-mid", "nn-low"] for i in instances}, page=20)
    result = topology.sync(m, nodes, instances, FakeEc2({"us-west-2": client}), FakeSlurm(), NOW)
    assert (result.calls, result.placed) == (3, 50)
    assert [c.get("NextToken") for c in client.calls] == [None, "20", "40"]


def test_an_instance_ec2_gives_no_topology_is_asked_again_only_while_young(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 2))
    nodes = [up("gpu-p4d-1", "127.0.0.1")]
    young = [running("i-777777777example", "127.0.0.1", launched=NOW - timedelta(minutes=2))]  # c7i: no topology
    topology.topology_path(m).write_text(topology.tree_text(m, {}))  # as render wrote it
    ec2, slurm = FakeEc2(), FakeSlurm()
    assert topology.sync(m, nodes, young, ec2, slurm, NOW).calls == 1
    assert topology.sync(m, nodes, young, ec2, slurm, NOW + timedelta(minutes=1)).calls == 1
    assert topology.sync(m, nodes, young, ec2, slurm, NOW + timedelta(minutes=9)).calls == 0  # launched 11 min ago
    assert slurm.reconfigures == 0  # never placed: the tree never changed


def test_a_failed_reconfigure_puts_the_old_file_back_so_the_next_cycle_tries_again(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 2))
    topology.topology_path(m).write_text("old\n")
    nodes, instances = [up("gpu-p4d-1", "127.0.0.1")], [running("i-1111111111example", "127.0.0.1")]
    ec2 = FakeEc2()
    failed = topology.sync(m, nodes, instances, ec2, FakeSlurm(fail=True), NOW)
    assert failed.failures == [
        "topology: scontrol reconfigure failed: scontrol reconfigure: exit 1: Unable to contact slurm controller"
    ]
    assert conf(m) == "old\n" and not failed.reconfigured and failed.counters == []
    slurm = FakeSlurm()
    retried = topology.sync(m, nodes, instances, ec2, slurm, NOW + timedelta(seconds=45))
    assert (retried.calls, retried.reconfigured, slurm.reconfigures) == (0, True, 1)  # the answer was remembered


def test_an_unwritable_file_is_one_failure_naming_the_owner_it_needs(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 2))
    topology.topology_path(m).mkdir()  # open() for writing fails (EISDIR), as EACCES would for a root-owned file
    nodes, instances = [up("gpu-p4d-1", "127.0.0.1")], [running("i-1111111111example", "127.0.0.1")]
    slurm = FakeSlurm()
    result = topology.sync(m, nodes, instances, FakeEc2(), slurm, NOW)
    assert len(result.failures) == 1 and "it must belong to SlurmUser" in result.failures[0]
    assert slurm.reconfigures == 0


def test_dry_run_asks_but_writes_and_reconfigures_nothing(tmp_path: Path) -> None:
    m = manifest(tmp_path, pool("p4d", 2))
    nodes, instances = [up("gpu-p4d-1", "127.0.0.1")], [running("i-1111111111example", "127.0.0.1")]
    slurm = FakeSlurm()
    result = topology.sync(m, nodes, instances, FakeEc2(), slurm, NOW, dry_run=True)
    assert result.changed and not topology.topology_path(m).exists() and slurm.reconfigures == 0


def test_an_ec2_error_is_a_failure_and_asks_again_next_cycle(tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    class Denied(FakeClient):
        def describe_instance_topology(self, **request: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"}}, "x")

    m = manifest(tmp_path, pool("p4d", 2))
    nodes, instances = [up("gpu-p4d-1", "127.0.0.1")], [running("i-1111111111example", "127.0.0.1")]
    result = topology.sync(m, nodes, instances, FakeEc2({"us-west-2": Denied()}), FakeSlurm(), NOW)
    assert len(result.failures) == 1 and "UnauthorizedOperation" in result.failures[0]
    assert topology.to_ask(instances, {"gpu-p4d"}, topology.load_known(m.state_dir), NOW) == {
        "us-west-2": ["i-1111111111example"]
    }


@pytest.mark.parametrize("slurm_conf", [None, "/opt/slurm/etc/slurm.conf"])
def test_the_file_sits_beside_slurm_conf(tmp_path: Path, slurm_conf: str | None) -> None:
    m = manifest(tmp_path, pool("p4d", 1)).model_copy(update={"slurm_conf": slurm_conf})
    expected = Path(slurm_conf).parent if slurm_conf else Path("/etc/slurm")
    assert topology.topology_path(m) == expected / "topology.conf"
