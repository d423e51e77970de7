"""The mishandled inputs of issue 34, each refused by `parse` with one error naming its YAML path (and the same kind of
input in general: every AZ letter past f, every reserved name, every FSx kind's range, ...).

Cases reuse the base config and path-setting of tests/unit/test_config_invalid.py; each asserts the exact list of
(path, message prefix) — so a rule that reports twice, or at the wrong place, fails here.
"""

from __future__ import annotations

import pytest

from cluster_config.loader import MAX_MESSAGE
from tests.unit.test_config_invalid import ACCOUNTING, C0, POOL, Case, broken, problems

P0 = f"{C0}.partitions[0].pools[0]"
IMPORTED = {
    "mode": "import",
    "vpc_id": "vpc-0123456789abcdef0",
    "subnets": [
        {"subnet_id": "subnet-0123456789abcdef0", "availability_zone": "us-east-1a", "cidr": "198.51.100.0/24"},
        {"subnet_id": "subnet-0123456789abcdef1", "availability_zone": "us-east-1b", "cidr": "203.0.113.0/24"},
    ],
}
GPU_POOL = {"name": "g5", "instance_types": ["g5.xlarge"], "max_nodes": 2, "gpu": {}}

CASES = [
    # --- availability zones: the letter, and the region
    Case(
        "az_letter_z",
        {f"{C0}.network.availability_zones": ["us-east-1a", "us-east-1z"]},
        [(f"{C0}.network.availability_zones[1]", "availability zone 'us-east-1z' does not exist")],
    ),
    Case(
        "az_letter_g_in_a_pool",
        {f"{P0}.availability_zones": ["us-east-1g"]},
        [
            (f"{P0}.availability_zones", "availability zone 'us-east-1g' has no subnet"),
            (f"{P0}.availability_zones[0]", "availability zone 'us-east-1g' does not exist"),
        ],
    ),
    Case(
        "az_of_another_region",
        {f"{C0}.network.availability_zones": ["us-east-1a", "eu-west-1a"]},
        [(f"{C0}.network.availability_zones", "availability zone 'eu-west-1a' is not in region 'us-east-1'")],
    ),
    Case(
        "az_listed_twice_in_the_network",
        {f"{C0}.network.availability_zones": ["us-east-1a", "us-east-1a"]},
        [(f"{C0}.network.availability_zones[1]", "availability zone 'us-east-1a' is listed twice")],
    ),
    # --- FSx capacities (AWS's range per kind)
    Case(
        "ontap_capacity_10_to_the_9",
        {f"{C0}.storage.fsx_ontap": {"storage_capacity_gib": 10**9}},
        [(f"{C0}.storage.fsx_ontap.storage_capacity_gib", "1000000000 GiB: AWS takes 1024 to 196608 GiB")],
    ),
    Case(
        "ontap_capacity_below_the_minimum",
        {f"{C0}.storage.fsx_ontap": {"storage_capacity_gib": 512}},
        [(f"{C0}.storage.fsx_ontap.storage_capacity_gib", "Input should be greater than or equal to 1024")],
    ),
    Case(
        "openzfs_capacity_above_the_maximum",
        {f"{C0}.storage.fsx_openzfs": {"storage_capacity_gib": 524_289}},
        [(f"{C0}.storage.fsx_openzfs.storage_capacity_gib", "524289 GiB: AWS takes 64 to 524288 GiB")],
    ),
    Case(
        "lustre_capacity_off_step",
        {f"{C0}.images": {"base_os": "rocky9"}, f"{C0}.storage.fsx_lustre": {"storage_capacity_gib": 3000}},
        [(f"{C0}.storage.fsx_lustre.storage_capacity_gib", "FSx for Lustre takes 1200 GiB or a multiple of 2400")],
    ),
    Case(
        "capacity_beyond_32_bits",
        {f"{C0}.storage.fsx_openzfs": {"storage_capacity_gib": 10**12}},
        [(f"{C0}.storage.fsx_openzfs", "storage_capacity_gib: a number of 13 digits (at most 2147483647)")],
    ),
    # --- strict numbers and booleans
    Case(
        "max_nodes_true",
        {f"{P0}.max_nodes": True},
        [(f"{P0}.max_nodes", "Input should be a valid integer, got the boolean true")],
    ),
    Case(
        "max_nodes_quoted",
        {f"{P0}.max_nodes": "4"},
        [(f"{P0}.max_nodes", "Input should be a valid integer, got the string '4' (write numbers")],
    ),
    Case(
        "max_nodes_fraction",
        {f"{P0}.max_nodes": 2.0},
        [(f"{P0}.max_nodes", "Input should be a valid integer, got the fraction 2.0")],
    ),
    Case(
        "controller_count_true",
        {f"{C0}.controller": {"count": True}},
        [(f"{C0}.controller", "count: a number, not the boolean true")],
    ),
    Case(
        "boolean_given_a_number",
        {f"{C0}.storage.efs": {"backup": 1}},
        [(f"{C0}.storage.efs.backup", "Input should be a valid boolean, got")],
    ),
    Case(
        "boolean_given_yes",
        {f"{C0}.partitions[0].default": "yes"},
        [
            (
                f"{C0}.partitions[0].default",
                "Input should be a valid boolean, unable to parse string as a boolean, got 'yes'",
            )
        ],
    ),
    Case(
        "license_percent_true",
        {**ACCOUNTING, "licenses": [{"name": "vcs", "count": 5, "clusters": {"alpha": True}}]},
        [("licenses[0].clusters.alpha", "Input should be a valid integer, got the boolean true")],
    ),
    # --- names Slurm reserves
    Case(
        "partition_named_default",
        {f"{C0}.partitions[0].name": "default"},
        [(f"{C0}.partitions[0].name", "'default' is reserved: Slurm reads `PartitionName=DEFAULT`")],
    ),
    Case(
        "account_named_root",
        {**ACCOUNTING, "accounts": [{"name": "root"}]},
        [("accounts[0].name", "'root' is reserved")],
    ),
    # --- GPUs: the family (no cache here) decides
    Case(
        "gpu_type_without_gpu",
        {f"{C0}.partitions[0].pools[1]": {**GPU_POOL, "gpu": None}},
        [(f"{C0}.partitions[0].pools[1].gpu", "'g5.xlarge' has NVIDIA GPUs (its family says): add `gpu: {}`")],
    ),
    Case(
        "p5_without_gpu",
        {f"{C0}.partitions[0].pools[1]": {**GPU_POOL, "instance_types": ["p5.48xlarge"], "gpu": None}},
        [(f"{C0}.partitions[0].pools[1].gpu", "'p5.48xlarge' has NVIDIA GPUs")],
    ),
    Case(
        "gpu_on_a_cpu_type",
        {f"{P0}.gpu": {}},
        [(f"{P0}.gpu", "'c7i.large' has no NVIDIA GPU (its family says)")],
    ),
    Case(
        "gpu_on_an_amd_gpu_type",
        {f"{C0}.partitions[0].pools[1]": {**GPU_POOL, "instance_types": ["g4ad.xlarge"]}},
        [(f"{C0}.partitions[0].pools[1].gpu", "'g4ad.xlarge' has no NVIDIA GPU")],
    ),
    Case(
        "gpu_pool_with_a_cpu_type",
        {f"{C0}.partitions[0].pools[1]": {**GPU_POOL, "instance_types": ["g5.xlarge", "c7i.xlarge"]}},
        [(f"{C0}.partitions[0].pools[1].gpu", "'c7i.xlarge' has no NVIDIA GPU")],
    ),
    # --- slurm_settings keys of the wrong line
    Case(
        "resume_program_on_a_partition",
        {f"{C0}.partitions[0].slurm_settings": {"ResumeProgram": "/bin/true"}},
        [(f"{C0}.partitions[0].slurm_settings.ResumeProgram", "'ResumeProgram' is not a partition parameter")],
    ),
    Case(
        "node_key_on_a_partition",
        {f"{C0}.partitions[0].slurm_settings": {"RealMemory": 1000, "MaxNodes": 4}},
        [(f"{C0}.partitions[0].slurm_settings.RealMemory", "'RealMemory' is not a partition parameter")],
    ),
    Case(
        "partition_key_on_a_pool",
        {f"{P0}.slurm_settings": {"maxtime": 60}},
        [(f"{P0}.slurm_settings.maxtime", "'maxtime' is not a node parameter")],
    ),
    # --- duplicates
    Case(
        "duplicate_qos",
        {**ACCOUNTING, "qos": [{"name": "high"}, {"name": "high"}]},
        [("qos[1].name", "duplicate QOS name 'high'")],
    ),
    Case(
        "duplicate_account",
        {**ACCOUNTING, "accounts": [{"name": "physics"}, {"name": "physics"}]},
        [("accounts[1].name", "duplicate account name 'physics'")],
    ),
    Case(
        "duplicate_user_in_an_account",
        {**ACCOUNTING, "accounts": [{"name": "physics", "users": ["ada", "ada"]}]},
        [("accounts[0].users[1]", "user 'ada' is listed twice")],
    ),
    Case(
        "duplicate_subnet",
        {
            f"{C0}.network": {
                **IMPORTED,
                "subnets": [IMPORTED["subnets"][0], {**IMPORTED["subnets"][0], "availability_zone": "us-east-1b"}],
            }
        },
        [(f"{C0}.network.subnets[1].subnet_id", "subnet 'subnet-0123456789abcdef0' is already")],
    ),
    Case(
        "overlapping_subnets",
        {
            f"{C0}.network": {
                **IMPORTED,
                "subnets": [IMPORTED["subnets"][0], {**IMPORTED["subnets"][1], "cidr": "198.51.100.0/25"}],
            }
        },
        [(f"{C0}.network.subnets[1].cidr", "198.51.100.0/25 overlaps clusters[0].network.subnets[0]'s CIDR")],
    ),
    # --- tags
    Case(
        "tag_key_too_long",
        {f"{C0}.tags": {"k" * 129: "v"}},
        [(f"{C0}.tags.{'k' * 129}", "String should have at most 128 characters")],
    ),
    Case(
        "tag_value_too_long",
        {"tags": {"owner": "v" * 257}},
        [("tags.owner", "String should have at most 256 characters")],
    ),
    Case(
        "tag_with_a_newline",
        {"tags": {"owner": "a\nb"}},
        [("(top level)", "tags: character U+000A")],
    ),
    Case(
        "tag_with_the_aws_prefix",
        {f"{C0}.tags": {"AWS:team": "x"}},
        [(f"{C0}.tags.AWS:team", "tag key 'AWS:team': the aws: prefix is reserved")],
    ),
    Case(
        "tag_of_the_product",
        {f"{C0}.tags": {"elastic-slurm:cluster": "other"}},
        [(f"{C0}.tags.elastic-slurm:cluster", "tag keys starting with 'elastic-slurm:' are the product's own")],
    ),
    Case(
        "too_many_tags",
        {"tags": {f"a{i}": "x" for i in range(30)}, f"{C0}.tags": {f"b{i}": "y" for i in range(11)}},
        [(f"{C0}.tags", "41 tags with the file-level ones: at most 40")],
    ),
    # --- extra mounts and mount points
    Case(
        "mount_source_with_a_space",
        {f"{C0}.storage.extra_mounts": [{"source": "nfs.example.com:/a b", "mount_point": "/tools"}]},
        [(f"{C0}.storage.extra_mounts[0].source", "String should match pattern")],
    ),
    Case(
        "mount_options_with_a_newline",
        {f"{C0}.storage.extra_mounts": [{"source": "h:/x", "mount_point": "/tools", "options": "ro\nx"}]},
        [(f"{C0}.storage.extra_mounts[0]", "options: character U+000A")],
    ),
    Case(
        "fs_type_with_a_space",
        {f"{C0}.storage.extra_mounts": [{"source": "h:/x", "mount_point": "/tools", "fs_type": "nfs4 ro"}]},
        [(f"{C0}.storage.extra_mounts[0].fs_type", "String should match pattern")],
    ),
    *[
        Case(
            f"mount_point_{name}",
            {f"{C0}.storage.extra_mounts": [{"source": "h:/x", "mount_point": point}]},
            [(f"{C0}.storage.extra_mounts[0].mount_point", message)],
        )
        for name, point, message in [
            ("root", "/", "'/' is not a mount point"),
            ("etc", "/etc", "'/etc' would hide a system or elastic-slurm directory"),
            ("product", "/opt/elastic-slurm", "'/opt/elastic-slurm' would hide"),
            ("dotdot", "/shared/../etc", "'/shared/../etc': a mount point has no '.' or '..' segment"),
            ("with_blank", "/my tools", "'/my tools' is not a mount point"),
        ]
    ],
    # --- SSH CIDRs: IPv6 accepted (an IPv6 rule, Peer.ipv6), public space only with ssh_allow_public_cidrs
    Case(
        "ssh_public_ipv6_cidr",
        {f"{C0}.ssh_allowed_cidrs": ["198.51.100.0/24", "2600:1f18::/32"]},
        [(f"{C0}.ssh_allowed_cidrs[1]", "'2600:1f18::/32' is public address space")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_mishandled_input_is_one_error_at_its_path(case: Case) -> None:
    found = problems(broken(case))
    assert [path for path, _ in found] == [path for path, _ in case.expected], found
    for (_, message), (_, want) in zip(found, case.expected, strict=True):
        assert message.startswith(want), message


def test_the_table_covers_every_kind_of_the_issue() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 40


def test_an_address_without_a_mask_is_its_one_address() -> None:
    data = broken(Case("cidr", {f"{C0}.ssh_allowed_cidrs": ["198.51.100.7", "203.0.113.0/24"]}))
    from cluster_config import parse

    assert parse(data).clusters[0].ssh_allowed_cidrs == ["198.51.100.7/32", "203.0.113.0/24"]


def test_the_rest_api_takes_ipv6_normalised() -> None:
    from cluster_config import parse

    data = broken(
        Case(
            "rest",
            {
                f"{C0}.rest_api": {"enabled": True, "allowed_cidrs": ["FD00:0:0::1", "100.64.0.1"]},
                "accounting": {"mode": "create"},
            },
        )
    )
    assert parse(data).clusters[0].rest_api.allowed_cidrs == ["fd00::1/128", "100.64.0.1/32"]


def test_a_gpu_pool_with_gpu_is_valid() -> None:
    assert problems(broken(Case("ok", {f"{C0}.partitions[0].pools[1]": GPU_POOL}))) == []


def test_every_partition_and_node_key_a_test_config_uses_is_allowed() -> None:
    allowed = {
        f"{C0}.partitions[0].slurm_settings": {"MaxNodes": 64, "DefMemPerNode": 4096, "OverSubscribe": "FORCE"},
        f"{P0}.slurm_settings": {"MemSpecLimit": 1024, "TmpDisk": 100},
    }
    assert problems(broken(Case("ok", allowed))) == []


def test_a_huge_value_is_never_echoed_whole() -> None:
    found = problems(broken(Case("huge", {f"{P0}.name": "x" * 4000, f"{P0}.instance_types": ["y" * 4000]})))
    assert found
    assert all(len(path) + len(message) <= 2 * MAX_MESSAGE for path, message in found), found


def test_pool_dict_is_untouched_by_the_cases() -> None:
    assert POOL == {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 10}
