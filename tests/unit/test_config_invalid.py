"""A table of invalid configs: each is a valid base config with a few keys changed, and names the exact error(s).

A case's changes are written with the same YAML paths the errors use (`clusters[0].partitions[0].pools[0].max_nodes`),
and every case asserts the full list of problems (path and message), so a change in wording or a duplicated report
shows up here. `INVALID_CASES` and `broken` are reused by tests/unit/test_cli.py to run the table through the CLI.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse

Data = dict[str, Any]
DELETE = object()  # as a change's value: remove the key

POOL: Data = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 10}
PARTITION: Data = {"name": "cpu", "default": True, "pools": [POOL]}
CLUSTER: Data = {
    "name": "alpha",
    "region": "us-east-1",
    "network": {"mode": "create", "availability_zones": ["us-east-1a", "us-east-1b"]},
    "storage": {"efs": {}},
    "partitions": [PARTITION],
}


def base() -> Data:
    """A small valid config: one cluster, one partition, one pool, the default VPC CIDR, no accounting."""
    return copy.deepcopy({"clusters": [CLUSTER], "accounting": {"mode": "none"}})


def set_path(data: Any, path: str, value: Any) -> None:
    """Set (or with DELETE remove) the value at a YAML path; index == len(list) appends."""
    parts: list[str | int] = [int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\[\d+\]|[^.\[\]]+", path)]
    parent = data
    for part in parts[:-1]:
        parent = parent[part]
    last = parts[-1]
    if value is DELETE:
        del parent[last]
    elif isinstance(parent, list) and last == len(parent):
        parent.append(copy.deepcopy(value))
    else:
        parent[last] = copy.deepcopy(value)


@dataclass(frozen=True)
class Case:
    """A broken config (base + changes, applied in order) and the exact problems it must report, in order."""

    id: str
    changes: dict[str, Any]
    expected: list[tuple[str, str]] = field(default_factory=list)


def broken(case: Case) -> Data:
    """The base config with the case's changes applied."""
    data = base()
    for path, value in case.changes.items():
        set_path(data, path, value)
    return data


C0 = "clusters[0]"
P0 = "clusters[0].partitions[0].pools[0]"
ACCOUNTING = {"accounting": {"mode": "create"}}
FED = {"name": "fed", "clusters": ["alpha", "beta"]}
NAME_HINT = "a name of lowercase letters and digits, starting with a letter"


def remote(region: str, azs: list[str], cidr: str = "127.17.0.0/16") -> dict[str, Any]:
    """Changes giving cluster 0 a loopback-range home VPC and one remote region."""
    network = {"mode": "create", "vpc_cidr": cidr, "availability_zones": azs}
    return {f"{C0}.network.vpc_cidr": "127.16.0.0/16", f"{C0}.remote_regions": [{"region": region, "network": network}]}


def lic(**fields: Any) -> dict[str, Any]:
    """Changes adding accounting and one license."""
    return {**ACCOUNTING, "licenses": [{"name": "vcs", "count": 5, **fields}]}


INVALID_CASES = [
    # --- names
    Case("duplicate_cluster_name", {"clusters[1]": CLUSTER}, [("clusters[1].name", "duplicate cluster name 'alpha'")]),
    Case(
        "duplicate_partition_name",
        {f"{C0}.partitions[1]": {**PARTITION, "default": False}},
        [(f"{C0}.partitions[1].name", "duplicate partition name 'cpu'")],
    ),
    Case(
        "duplicate_pool_name",
        {f"{C0}.partitions[0].pools[1]": POOL},
        [(f"{C0}.partitions[0].pools[1].name", "duplicate pool name 'c7i' in partition 'cpu'")],
    ),
    Case(
        "duplicate_license_name",
        {**ACCOUNTING, "licenses": [{"name": "vcs", "count": 1}, {"name": "vcs", "count": 2}]},
        [("licenses[1].name", "duplicate license name 'vcs'")],
    ),
    Case(
        "node_name_too_long",
        {f"{C0}.partitions[0].name": "p" * 30, f"{P0}.name": "q" * 30},
        [(f"{P0}.name", f"node name '{'p' * 30}-{'q' * 30}-10' is longer than 63 characters")],
    ),
    Case(
        "partition_name_with_dash",
        {f"{C0}.partitions[0].name": "gpu-a"},
        [(f"{C0}.partitions[0].name", f"'gpu-a' is not {NAME_HINT}")],
    ),
    Case(
        "cluster_name_uppercase",
        {f"{C0}.name": "Alpha"},
        [(f"{C0}.name", "'Alpha' is not a cluster name of lowercase letters, digits and '-'")],
    ),
    # --- node counts and address space
    Case(
        "min_greater_than_max",
        {f"{P0}.min_nodes": 11},
        [(f"{P0}.min_nodes", "min_nodes (11) is greater than max_nodes (10)")],
    ),
    Case(
        "pool_larger_than_its_subnets",
        {f"{C0}.network.compute_subnet_prefix": 28, f"{P0}.max_nodes": 30},
        [(f"{P0}.max_nodes", "max_nodes (30) exceeds the 22 addresses of its subnets")],
    ),
    Case(
        "pools_together_larger_than_subnets",
        {
            f"{C0}.network.compute_subnet_prefix": 28,
            f"{P0}.max_nodes": 15,
            f"{C0}.partitions[0].pools[1]": {"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 15},
        },
        [(f"{C0}.partitions", "30 nodes in all do not fit the 22 addresses of the cluster's subnets")],
    ),
    Case(
        "subnets_larger_than_vpc",
        {f"{C0}.network.vpc_cidr": "127.16.0.0/24"},
        [(f"{C0}.network.compute_subnet_prefix", "2 subnets of /20 do not fit in 127.16.0.0/24")],
    ),
    Case(
        "max_nodes_zero",
        {f"{P0}.max_nodes": 0},
        [(f"{P0}.max_nodes", "Input should be greater than or equal to 1, got 0")],
    ),
    # --- regions and availability zones
    Case(
        "az_not_in_region",
        {f"{C0}.network.availability_zones": ["us-east-1a", "us-west-2b"]},
        [(f"{C0}.network.availability_zones", "availability zone 'us-west-2b' is not in region 'us-east-1'")],
    ),
    Case(
        "remote_az_not_in_its_region",
        remote("us-west-2", ["us-east-1c"]),
        [
            (
                f"{C0}.remote_regions[0].network.availability_zones",
                "availability zone 'us-east-1c' is not in region 'us-west-2'",
            )
        ],
    ),
    Case(
        "imported_subnet_in_other_region",
        {
            f"{C0}.network": {
                "mode": "import",
                "vpc_id": "vpc-0123abcd",
                "subnets": [
                    {"subnet_id": "subnet-0123abcd", "availability_zone": "us-west-2a", "cidr": "127.16.0.0/20"}
                ],
            }
        },
        [(f"{C0}.network.subnets", "availability zone 'us-west-2a' is not in region 'us-east-1'")],
    ),
    Case(
        "pool_az_without_subnet",
        {f"{P0}.availability_zones": ["us-east-1c"]},
        [(f"{P0}.availability_zones", "availability zone 'us-east-1c' has no subnet in the cluster's networks")],
    ),
    Case(
        "pool_with_empty_az_list",
        {f"{P0}.availability_zones": []},
        [(f"{P0}.availability_zones", "List should have at least 1 item after validation, not 0")],
    ),
    Case(
        "pool_az_listed_twice",
        {f"{P0}.availability_zones": ["us-east-1a", "us-east-1a"]},
        [(f"{P0}.availability_zones[1]", "availability zone 'us-east-1a' is listed twice")],
    ),
    Case(
        "bad_region_pattern",
        {f"{C0}.region": "us-east"},
        [(f"{C0}.region", "'us-east' is not a region name like us-east-1")],
    ),
    Case(
        "bad_az_pattern",
        {f"{C0}.network.availability_zones[1]": "use1-az1"},
        [(f"{C0}.network.availability_zones[1]", "'use1-az1' is not an availability zone name like us-east-1a")],
    ),
    Case(
        "remote_region_same_as_home",
        remote("us-east-1", ["us-east-1c"]),
        [(f"{C0}.remote_regions[0].region", "region 'us-east-1' is already the home or another remote region")],
    ),
    Case(
        "remote_vpc_overlaps_home",
        remote("us-west-2", ["us-west-2a"], cidr="127.16.128.0/17"),
        [
            (
                f"{C0}.remote_regions[0].network.vpc_cidr",
                "VPC CIDRs 127.16.0.0/16 and 127.16.128.0/17 overlap (peering needs disjoint ranges)",
            )
        ],
    ),
    Case(
        "placement_group_across_regions",
        {
            **remote("us-west-2", ["us-west-2a"]),
            f"{P0}.placement_group": True,
            f"{P0}.availability_zones": ["us-east-1a", "us-west-2a"],
        },
        [
            (
                f"{P0}.placement_group",
                "a cluster placement group is confined to one availability zone, but the pool may use 2 "
                "(us-east-1a, us-west-2a): give the pool a single availability zone",
            )
        ],
    ),
    # --- network values
    Case(
        "bad_cidr_host_bits",
        {f"{C0}.network.vpc_cidr": "127.16.0.1/16"},
        [(f"{C0}.network.vpc_cidr", "'127.16.0.1/16' is not an IPv4 CIDR: 127.16.0.1/16 has host bits set")],
    ),
    Case(
        "bad_cidr_text",
        {f"{C0}.network.vpc_cidr": "big"},
        [(f"{C0}.network.vpc_cidr", "'big' is not an IPv4 CIDR")],
    ),
    Case(
        "vpc_cidr_too_large_for_aws",
        {f"{C0}.network.vpc_cidr": "127.0.0.0/8"},
        [(f"{C0}.network.vpc_cidr", "'127.0.0.0/8': AWS allows prefix lengths /16 to /28")],
    ),
    Case(
        "unknown_network_mode",
        {f"{C0}.network.mode": "build"},
        [(f"{C0}.network", "Input tag 'build' found using 'mode' does not match any of the expected tags")],
    ),
    Case(
        "two_controllers_one_az",
        {f"{C0}.network.availability_zones": ["us-east-1a"], f"{C0}.controller": {"count": 2}},
        [(f"{C0}.controller.count", "2 controllers need a network with at least 2 availability zones")],
    ),
    Case(
        "three_controllers",
        {f"{C0}.controller": {"count": 3}},
        [(f"{C0}.controller.count", "Input should be 1 or 2, got 3")],
    ),
    # --- pools
    Case(
        "mixed_architectures",
        {f"{P0}.instance_types": ["c7i.large", "c7g.large"]},
        [(f"{P0}.instance_types", "instance types mix architectures (arm64, x86_64)")],
    ),
    Case(
        "instance_type_listed_twice",
        {f"{P0}.instance_types": ["c7i.large", "c7i.large"]},
        [(f"{P0}.instance_types[1]", "instance type 'c7i.large' is listed twice")],
    ),
    Case(
        "bad_instance_type",
        {f"{P0}.instance_types": ["c7i-large"]},
        [(f"{P0}.instance_types[0]", "'c7i-large' is not an instance type like c7i.large")],
    ),
    Case(
        "bad_purchase_option",
        {f"{P0}.purchase_option": "spot-then-on-demand"},
        [
            (
                f"{P0}.purchase_option",
                "Input should be 'on_demand', 'spot' or 'spot_then_on_demand', got 'spot-then-on-demand'",
            )
        ],
    ),
    Case(
        "max_nodes_not_a_number",
        {f"{P0}.max_nodes": "ten"},
        [(f"{P0}.max_nodes", "Input should be a valid integer, unable to parse string as an integer, got 'ten'")],
    ),
    Case("max_nodes_missing", {f"{P0}.max_nodes": DELETE}, [(f"{P0}.max_nodes", "required key is missing")]),
    Case(
        "unknown_pool_key_typo",
        {f"{P0}.min_node": 1},
        [(f"{P0}.min_node", "unknown key 'min_node' (did you mean 'min_nodes'?)")],
    ),
    Case(
        "unknown_top_level_key_typo",
        {"accounting": DELETE, "acounting": {"mode": "none"}},
        [("acounting", "unknown key 'acounting' (did you mean 'accounting'?)")],
    ),
    Case(
        "unknown_network_key",
        {f"{C0}.network.vpc_id": "vpc-0123abcd"},
        [(f"{C0}.network.vpc_id", "unknown key 'vpc_id' (did you mean 'vpc_cidr'?)")],
    ),
    Case(
        "unknown_key_far_from_any",
        {f"{C0}.zzz": 1},
        [(f"{C0}.zzz", "unknown key 'zzz' (see `elastic-slurm schema` for the allowed keys)")],
    ),
    Case(
        "partitions_not_a_list",
        {f"{C0}.partitions": "cpu"},
        [(f"{C0}.partitions", "Input should be a valid list, got 'cpu'")],
    ),
    Case(
        "two_default_partitions",
        {f"{C0}.partitions[1]": {**PARTITION, "name": "gpu"}},
        [(f"{C0}.partitions[1].default", "only one partition may be the default")],
    ),
    Case(
        "partition_without_pools_or_shared_nodes",
        {f"{C0}.partitions[0].pools": []},
        [(f"{C0}.partitions[0].pools", "a partition needs at least one pool, or share_nodes_of")],
    ),
    Case(
        "share_nodes_of_unknown_partition",
        {f"{C0}.partitions[0].share_nodes_of": ["gpu"]},
        [(f"{C0}.partitions[0].share_nodes_of[0]", "unknown partition 'gpu' in cluster 'alpha'")],
    ),
    Case(
        "share_nodes_of_itself",
        {f"{C0}.partitions[0].share_nodes_of": ["cpu"]},
        [(f"{C0}.partitions[0].share_nodes_of[0]", "partition 'cpu' cannot share its own nodes")],
    ),
    Case(
        "share_nodes_of_listed_twice",
        {f"{C0}.partitions[1]": {"name": "gpu", "share_nodes_of": ["cpu", "cpu"]}},
        [(f"{C0}.partitions[1].share_nodes_of[1]", "partition 'cpu' is listed twice")],
    ),
    Case(
        "share_nodes_of_a_partition_without_pools",
        {
            f"{C0}.partitions[1]": {"name": "gpu", "share_nodes_of": ["cpu"]},
            f"{C0}.partitions[2]": {"name": "debug", "share_nodes_of": ["gpu"]},
        },
        [(f"{C0}.partitions[2].share_nodes_of[0]", "partition 'gpu' has no pools of its own to share")],
    ),
    # --- storage
    Case(
        "no_shared_file_system",
        {f"{C0}.storage": {"extra_mounts": [{"source": "nfs.example.com:/tools", "mount_point": "/tools"}]}},
        [(f"{C0}.storage", "needs a shared file system (efs, fsx_lustre, fsx_ontap or fsx_openzfs)")],
    ),
    Case(
        "remote_regions_without_efs",
        {
            **remote("us-west-2", ["us-west-2a"]),
            f"{C0}.storage": {"fsx_openzfs": {"mount_point": "/data"}},
        },
        [(f"{C0}.storage.efs", "is needed with remote_regions: compute nodes there mount only the home EFS")],
    ),
    Case(
        "two_file_systems_on_one_mount_point",
        {f"{C0}.storage": {"efs": {"mount_point": "/data"}, "fsx_openzfs": {"mount_point": "/data"}}},
        [(f"{C0}.storage.fsx_openzfs.mount_point", "mount point '/data' is already used by another file system")],
    ),
    # --- accounting, licenses, federation
    Case(
        "existing_accounting_without_endpoint",
        {
            "accounting": {
                "mode": "existing",
                "secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:db-AbCdEf",
            }
        },
        [("accounting.endpoint", "mode 'existing' needs endpoint")],
    ),
    Case(
        "endpoint_without_existing_accounting",
        {"accounting": {"mode": "create", "endpoint": "db.example.com:3306"}},
        [("accounting.endpoint", "endpoint is only used with mode 'existing' (mode is 'create')")],
    ),
    Case(
        "accounting_host_unknown",
        {"accounting": {"mode": "create", "host_cluster": "gamma"}},
        [("accounting.host_cluster", "unknown cluster 'gamma'")],
    ),
    Case(
        "licenses_without_accounting",
        {"licenses": [{"name": "vcs", "count": 5}]},
        [("licenses", "remote licenses need accounting (mode 'create' or 'existing')")],
    ),
    Case(
        "license_sync_without_server",
        lic(sync_schedule="*:0/5"),
        [("licenses[0].sync_schedule", "a synced license needs a server and server_type flexlm or rlm")],
    ),
    Case(
        "flexlm_license_without_server",
        lic(server_type="flexlm", sync_schedule="*:0/5"),
        [("licenses[0].server", "server_type 'flexlm' needs a server (port@host)")],
    ),
    Case(
        "license_for_unknown_cluster",
        lic(clusters={"gamma": 50}),
        [("licenses[0].clusters.gamma", "unknown cluster 'gamma'")],
    ),
    Case(
        "license_share_negative",
        lic(clusters={"alpha": -5}),
        [("licenses[0].clusters.alpha", "percent must be 0..100, got -5")],
    ),
    Case(
        "license_shares_above_100",
        {
            **lic(clusters={"alpha": 60, "beta": 60}),
            f"{C0}.network.vpc_cidr": "127.16.0.0/16",
            "clusters[1]": {**CLUSTER, "name": "beta", "network": {**CLUSTER["network"], "vpc_cidr": "127.17.0.0/16"}},
            "federation": FED,  # two clusters sharing slurmdbd must share its munge key
        },
        [("licenses[0].clusters", "the clusters' percentages add up to 120 (at most 100)")],
    ),
    Case(
        "federation_with_unknown_cluster",
        {**ACCOUNTING, "federation": FED},
        [("federation.clusters[1]", "unknown cluster 'beta'")],
    ),
    Case(
        "federation_without_accounting",
        {"clusters[1]": {**CLUSTER, "name": "beta"}, "federation": FED},
        [
            ("federation", "a federation needs shared accounting (mode 'create' or 'existing')"),
            ("clusters[1].network", "overlaps the network of federation member 'alpha'"),
        ],
    ),
    Case(
        "federation_of_one",
        {**ACCOUNTING, "federation": {"name": "fed", "clusters": ["alpha"]}},
        [("federation.clusters", "List should have at least 2 items after validation, not 1")],
    ),
    # --- whole file
    Case("no_clusters", {"clusters": []}, [("clusters", "List should have at least 1 item after validation, not 0")]),
    Case(
        "two_problems_two_lines",
        {f"{P0}.min_nodes": 11, f"{C0}.network.availability_zones": ["us-east-1a"], f"{C0}.controller": {"count": 2}},
        [
            (f"{C0}.controller.count", "2 controllers need a network with at least 2 availability zones"),
            (f"{P0}.min_nodes", "min_nodes (11) is greater than max_nodes (10)"),
        ],
    ),
    # --- images
    Case(
        "unpinned_slurm_release_without_source",
        {f"{C0}.images": {"slurm_version": "24.11.5"}},
        [
            (
                f"{C0}.images.slurm_source",
                "Slurm 24.11.5 has no pinned source (the pinned release is 26.05.3): give its url and sha256",
            )
        ],
    ),
    Case(
        "slurm_source_checksum_not_sha256",
        {f"{C0}.images": {"slurm_version": "26.05.5", "slurm_source": {"url": "https://x/s.tar.bz2", "sha256": "abc"}}},
        [(f"{C0}.images.slurm_source.sha256", "String should match pattern '^[0-9a-f]{64}$'")],
    ),
    Case(
        "fsx_lustre_on_debian",
        {f"{C0}.storage.fsx_lustre": {}},
        [
            (
                f"{C0}.storage.fsx_lustre",
                "AWS publishes no FSx for Lustre client for base_os debian13: choose another images.base_os",
            )
        ],
    ),
]


def problems(data: Any) -> list[tuple[str, str]]:
    """The (path, message) pairs `parse` reports for `data` (empty when valid)."""
    try:
        parse(data)
    except ConfigInvalid as exc:
        return [(e.path, e.message) for e in exc.errors]
    return []


def test_base_config_is_valid() -> None:
    assert problems(base()) == []


def test_table_has_at_least_30_distinct_cases() -> None:
    assert len({c.id for c in INVALID_CASES}) == len(INVALID_CASES) >= 30


@pytest.mark.parametrize("case", INVALID_CASES, ids=lambda c: c.id)
def test_invalid_config_reports_exact_path_and_message(case: Case) -> None:
    found = problems(broken(case))
    assert [path for path, _ in found] == [path for path, _ in case.expected], found
    for (_, message), (_, want) in zip(found, case.expected, strict=True):
        assert message.startswith(want), message


def test_config_that_is_not_a_mapping_is_one_error() -> None:
    assert problems(["clusters"]) == [("(top level)", "the file must be a mapping with a 'clusters' key")]


def test_set_path_appends_replaces_and_deletes() -> None:
    data: Data = {"a": [{"b": 1}]}
    set_path(data, "a[1]", {"b": 2})
    set_path(data, "a[0].b", 3)
    set_path(data, "a[1].b", DELETE)
    assert data == {"a": [{"b": 3}, {}]}
