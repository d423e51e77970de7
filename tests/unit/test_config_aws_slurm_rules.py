"""Values AWS or Slurm would refuse after deploy fail validation instead, each as one exact error line.

Slurm syntax (MaxTime, feature names), AWS names (regions, instance types, from botocore's data), FSx values, a
placement group over several AZs, and the RDS instance class with or without its `db.` prefix. Cases reuse the base
config and YAML-path changes of tests/unit/test_config_invalid.py; here each message is compared in full, and once
more through `elastic-slurm validate` as the `FILE: path: message` line a user sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster_config import aws_catalog, parse, slurm_syntax
from elastic_slurm.cli import main
from tests.unit.test_config_invalid import ACCOUNTING, C0, CLUSTER, P0, Case, broken, problems, remote

LUSTRE = f"{C0}.storage.fsx_lustre"
# FSx for Lustre needs a base OS with a Lustre client (the default debian13 has none).
WITH_LUSTRE = {f"{C0}.images": {"base_os": "al2023"}}
TIME_FORMS = (
    "INFINITE, UNLIMITED, minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or "
    "days-hours:minutes:seconds"
)
FEATURE_HINT = "a Slurm feature name: letters, digits, '_', '.' and '-' only"

CASES = [
    # --- Slurm syntax
    Case(
        "max_time_in_words",
        {f"{C0}.partitions[0].max_time": "2 days"},
        [(f"{C0}.partitions[0].max_time", f"'2 days' is not a Slurm time limit; use {TIME_FORMS}")],
    ),
    Case(
        "max_time_with_three_colons",
        {f"{C0}.partitions[0].max_time": "1:00:00:00"},
        [(f"{C0}.partitions[0].max_time", f"'1:00:00:00' is not a Slurm time limit; use {TIME_FORMS}")],
    ),
    Case(
        "feature_with_a_space",
        {f"{P0}.features": ["fast", "big mem"]},
        [(f"{P0}.features[1]", f"'big mem' is not {FEATURE_HINT}")],
    ),
    Case(
        "feature_with_a_comma",
        {f"{P0}.features": ["a,b"]},
        [(f"{P0}.features[0]", f"'a,b' is not {FEATURE_HINT}")],
    ),
    Case(
        "federation_cluster_feature_with_a_colon",
        {
            **ACCOUNTING,
            "clusters[1]": {**CLUSTER, "name": "beta"},
            f"{C0}.network.vpc_cidr": "127.16.0.0/16",
            "federation": {"name": "fed", "clusters": ["alpha", "beta"], "cluster_features": {"alpha": ["x:y"]}},
        },
        [("federation.cluster_features.alpha[0]", f"'x:y' is not {FEATURE_HINT}")],
    ),
    # --- AWS names
    Case(
        "instance_type_typo",
        {f"{P0}.instance_types": ["c7i.lrage"]},
        [(f"{P0}.instance_types[0]", "unknown instance type 'c7i.lrage' (did you mean 'c7i.large'?)")],
    ),
    Case(
        "controller_instance_type_typo",
        {f"{C0}.controller": {"instance_type": "m7i.xlrge"}},
        [(f"{C0}.controller.instance_type", "unknown instance type 'm7i.xlrge' (did you mean 'm7i.xlarge'?)")],
    ),
    Case(
        "instance_type_nothing_like_any",
        {f"{P0}.instance_types": ["zz9.mega"]},
        [
            (
                f"{P0}.instance_types[0]",
                "unknown instance type 'zz9.mega' (not in botocore's list; if it is newer than your botocore, upgrade "
                "botocore or add it to ELASTIC_SLURM_EXTRA_INSTANCE_TYPES)",
            )
        ],
    ),
    Case(
        "region_typo",
        {f"{C0}.region": "us-east-9", f"{C0}.network.availability_zones": ["us-east-9a", "us-east-9b"]},
        [(f"{C0}.region", "unknown region 'us-east-9' (did you mean 'us-east-2'?)")],
    ),
    Case(
        "remote_region_typo",
        remote("eu-wset-1", ["eu-wset-1a"]),
        [(f"{C0}.remote_regions[0].region", "unknown region 'eu-wset-1' (did you mean 'eu-west-1'?)")],
    ),
    # --- FSx values
    Case(
        "lustre_capacity_not_a_multiple_of_2400",
        {**WITH_LUSTRE, LUSTRE: {"storage_capacity_gib": 3600}},
        [(f"{LUSTRE}.storage_capacity_gib", "FSx for Lustre takes 1200 GiB or a multiple of 2400 GiB, got 3600")],
    ),
    Case(
        "lustre_throughput_not_offered",
        {**WITH_LUSTRE, LUSTRE: {"deployment_type": "PERSISTENT_2", "per_unit_storage_throughput": 200}},
        [
            (
                f"{LUSTRE}.per_unit_storage_throughput",
                "Input should be 125, 250, 500 or 1000, got 200",
            )
        ],
    ),
    Case(
        "lustre_throughput_on_scratch",
        {**WITH_LUSTRE, LUSTRE: {"per_unit_storage_throughput": 250}},
        [
            (
                f"{LUSTRE}.per_unit_storage_throughput",
                "only PERSISTENT_2 file systems take a per-unit storage throughput (SCRATCH_2 throughput is fixed): "
                "remove it or use deployment_type PERSISTENT_2",
            )
        ],
    ),
    Case(
        "ontap_throughput_not_offered",
        {f"{C0}.storage.fsx_ontap": {"throughput_mbps": 100}},
        [(f"{C0}.storage.fsx_ontap.throughput_mbps", "Input should be 128, 256, 512, 1024, 2048 or 4096, got 100")],
    ),
    Case(
        "openzfs_throughput_not_offered",
        {f"{C0}.storage.fsx_openzfs": {"throughput_mbps": 100}},
        [
            (
                f"{C0}.storage.fsx_openzfs.throughput_mbps",
                "Input should be 64, 128, 256, 512, 1024, 2048, 3072 or 4096, got 100",
            )
        ],
    ),
    # --- placement groups
    Case(
        "placement_group_over_the_home_networks_azs",
        {f"{P0}.placement_group": True},
        [
            (
                f"{P0}.placement_group",
                "a cluster placement group is confined to one availability zone, but the pool may use 2 "
                "(us-east-1a, us-east-1b): give the pool a single availability zone",
            )
        ],
    ),
    Case(
        "placement_group_in_a_remote_region",
        {
            **remote("us-west-2", ["us-west-2a"]),
            f"{P0}.placement_group": True,
            f"{P0}.availability_zones": ["us-west-2a"],
        },
        [
            (
                f"{P0}.placement_group",
                "the pool's placement group is created in the home region 'us-east-1', so its availability zone cannot "
                "be 'us-west-2a' of region 'us-west-2'",
            )
        ],
    ),
    # --- accounting
    Case(
        "rds_instance_class_not_a_class",
        {"accounting": {"mode": "create", "engine": "mariadb_instance", "instance_class": "db.large"}},
        [("accounting.instance_class", "'db.large' is not an RDS instance class like t4g.medium or db.t4g.medium")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rule_reports_the_exact_problem(case: Case) -> None:
    assert problems(broken(case)) == case.expected


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.id in {"max_time_in_words", "instance_type_typo", "region_typo"}],
    ids=lambda c: c.id,
)
def test_validate_prints_the_exact_line(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(yaml.safe_dump(broken(case), sort_keys=False), encoding="utf-8")
    assert main(["validate", str(path)]) == 3
    assert capsys.readouterr().err.splitlines() == [f"{path}: {where}: {message}" for where, message in case.expected]


@pytest.mark.parametrize(
    "changes",
    [
        {f"{C0}.partitions[0].max_time": value}
        for value in ["INFINITE", "unlimited", "0", "30", "30:15", "4:00:00", "2-0", "2-12:30", "2-12:30:00"]
    ]
    + [
        {f"{P0}.features": ["fast", "ib_hdr", "v1.2", "big-mem"]},
        {**WITH_LUSTRE, LUSTRE: {"storage_capacity_gib": 1200}},
        {**WITH_LUSTRE, LUSTRE: {"storage_capacity_gib": 4800, "deployment_type": "PERSISTENT_2"}},
        {**WITH_LUSTRE, LUSTRE: {"deployment_type": "PERSISTENT_2", "per_unit_storage_throughput": 1000}},
        {f"{P0}.placement_group": True, f"{P0}.availability_zones": ["us-east-1b"]},
        {f"{C0}.region": "us-gov-west-1", f"{C0}.network.availability_zones": ["us-gov-west-1a"]},
    ],
    ids=repr,
)
def test_values_slurm_and_aws_accept_are_valid(changes: dict[str, object]) -> None:
    assert problems(broken(Case("valid", changes))) == []


def test_slurm_time_limit_accepts_exactly_slurms_forms() -> None:
    for good in ["INFINITE", "Unlimited", "0", "90", "1:30", "1:00:00", "3-12", "3-12:30", "3-12:30:05"]:
        assert slurm_syntax.time_limit(good) == good
    for bad in ["", "2 days", "1h", "1-", "1:2:3:4", "1-2:3:4:5", "1.5", "5\n", "٣"]:
        with pytest.raises(ValueError, match="is not a Slurm time limit"):
            slurm_syntax.time_limit(bad)


@pytest.mark.parametrize("given", ["r6g.large", "db.r6g.large"])
def test_rds_instance_class_is_kept_without_its_db_prefix(given: str) -> None:
    data = broken(
        Case("rds", {"accounting": {"mode": "create", "engine": "mariadb_instance", "instance_class": given}})
    )
    assert parse(data).accounting.instance_class == "r6g.large"


def test_newer_names_are_accepted_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    changes = {f"{P0}.instance_types": ["c99x.large"], f"{C0}.region": "xx-new-1"}
    changes[f"{C0}.network.availability_zones"] = ["xx-new-1a", "xx-new-1b"]
    assert [path for path, _ in problems(broken(Case("newer", changes)))] == [f"{C0}.region", f"{P0}.instance_types[0]"]
    monkeypatch.setenv(aws_catalog.EXTRA_INSTANCE_TYPES_ENV, "c98x.large, c99x.large")
    monkeypatch.setenv(aws_catalog.EXTRA_REGIONS_ENV, "xx-new-1")
    assert problems(broken(Case("newer", changes))) == []


def test_catalogs_come_from_botocore_and_hold_the_common_names() -> None:
    assert {"c7i.large", "p5.48xlarge", "t4g.micro"} <= aws_catalog.instance_types()
    assert {"us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1"} <= aws_catalog.regions()
    assert aws_catalog.instance_types() is aws_catalog.instance_types()  # read once


def test_names_the_deploy_checked_are_trusted_on_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    changes = {f"{P0}.instance_types": ["c99x.large"], f"{C0}.region": "xx-new-1"}
    changes[f"{C0}.network.availability_zones"] = ["xx-new-1a", "xx-new-1b"]
    monkeypatch.setenv(aws_catalog.NAMES_CHECKED_ENV, "1")  # what elastic-slurm-config-apply sets
    assert problems(broken(Case("newer", changes))) == []
    config_apply = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-config-apply"
    assert f"export {aws_catalog.NAMES_CHECKED_ENV}=1" in config_apply.read_text(encoding="utf-8")


def test_every_region_botocore_knows_passes_the_region_pattern() -> None:
    import re

    from cluster_config.model_base import AZ_PATTERN, REGION_PATTERN

    assert [r for r in aws_catalog.regions() if not re.match(REGION_PATTERN, r)] == []
    assert [r for r in aws_catalog.regions() if not re.match(AZ_PATTERN, f"{r}a")] == []
