"""DescribeInstanceTopology answers shaped like the EC2 API reference's example: `nn-` ids, three network nodes per
instance top first (four on p6-b200), placement group names, and no network nodes for an instance that is not running
or whose type EC2 gives no topology for. Shared by the topology unit tests."""

from __future__ import annotations

import re
from typing import Any

from slurm_plugin.hostlists import expand

# (instance id, type, placement group, network nodes top first, AZ, zone id)
RECORDED: list[tuple[str, str, str, list[str], str, str]] = [
    ("i-1111111111example", "p4d.24xlarge", "my-ml-cpg",
     ["nn-1111111111example", "nn-2222222222example", "nn-3333333333example"], "us-west-2a", "usw2-az2"),
    ("i-2222222222example", "p4d.24xlarge", "my-ml-cpg",
     ["nn-1111111111example", "nn-2222222222example", "nn-3333333333example"], "us-west-2a", "usw2-az2"),
    ("i-3333333333example", "trn1.32xlarge", "my-ml-cpg",
     ["nn-1212121212example", "nn-1211122211example", "nn-1311133311example"], "us-west-2a", "usw2-az2"),
    ("i-444444444example", "trn1.2xlarge", "",
     ["nn-1111111111example", "nn-5434334334example", "nn-1235301234example"], "us-west-2a", "usw2-az2"),
    ("i-555555555example", "trn1.32xlarge", "",
     ["nn-1111111111example", "nn-2222222222example", "nn-3333333333example"], "us-west-2a", "usw2-az2"),
    ("i-666666666example", "p6-b200.48xlarge", "",
     ["nn-1111111111example", "nn-6161616161example", "nn-6262626262example", "nn-6363636363example"],
     "us-west-2a", "usw2-az2"),
    ("i-777777777example", "c7i.large", "", [], "us-west-2a", "usw2-az2"),  # a type with no topology
]  # fmt: skip


def instance_item(instance_id: str) -> dict[str, Any]:
    """One `Instances[]` element of the answer, as boto3 returns it."""
    for iid, itype, group, nodes, az, zone in RECORDED:
        if iid == instance_id:
            item: dict[str, Any] = {"InstanceId": iid, "InstanceType": itype, "NetworkNodes": list(nodes)}
            item |= {"AvailabilityZone": az, "ZoneId": zone} | ({"GroupName": group} if group else {})
            return item
    raise KeyError(instance_id)


def nodes_of(instance_id: str) -> tuple[str, ...]:
    """The recorded network nodes of an instance."""
    return tuple(instance_item(instance_id)["NetworkNodes"])


def switches(text: str) -> dict[str, tuple[str, list[str]]]:
    """SwitchName -> ("Nodes" or "Switches", its members), as Slurm reads the file (hostlists expanded)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = re.fullmatch(r"SwitchName=(\S+) (Nodes|Switches)=(\S+)", line)
        assert match, f"not a topology.conf line: {line!r}"
        assert match[1] not in found, f"switch {match[1]} defined twice"
        members = expand(match[3]) if match[2] == "Nodes" else match[3].split(",")
        found[match[1]] = (match[2], members)
    return found
