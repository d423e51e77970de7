"""`onprem_clusters` (docs/onprem-burst.md): the checks, what the accounting database gets, the security-group rules,
the kit's text and the `onprem-kit` command's one-line errors. The end-to-end burst is tests/e2e/test_onprem_burst_e2e.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import parse
from elastic_slurm import onprem_kit
from elastic_slurm.cli import main
from slurm_plugin.accounting.diff import desired_state
from slurm_plugin.licenses.sync import sync_config_from
from stacks.onprem import OnpremIngress, onprem_ingress
from tests.unit.test_config_invalid import CLUSTER, Case, problems

SITE: dict[str, Any] = {"name": "campus", "burst_to": ["alpha"], "controller_cidrs": ["127.20.0.5/32"]}
BETA: dict[str, Any] = {**CLUSTER, "name": "beta", "network": {**CLUSTER["network"], "vpc_cidr": "127.30.0.0/16"}}


def config(**top: Any) -> dict[str, Any]:
    """Cluster alpha (and beta with `two=True`, both in federation `fed`: they share slurmdbd, so its munge key),
    accounting on, and the given top-level keys (`federation=None`: none)."""
    two = top.pop("two", False)
    clusters = [CLUSTER, BETA] if two else [CLUSTER]
    data = {"clusters": clusters, "accounting": {"mode": "create"}, "onprem_clusters": [SITE]}
    if two:
        data["federation"] = {"name": "fed", "clusters": ["alpha", "beta"]}
    data.update(top)
    return {key: value for key, value in data.items() if value is not None}


INVALID = [
    Case(
        "no_accounting",
        {**config(), "accounting": {"mode": "none"}},
        [("onprem_clusters", "an on-prem cluster joins through the shared accounting (mode 'create' or 'existing')")],
    ),
    Case(
        "name_of_a_cloud_cluster",
        config(onprem_clusters=[{**SITE, "name": "alpha"}]),
        [("onprem_clusters[0].name", "'alpha' is also a cluster of this file")],
    ),
    Case(
        "listed_twice",
        config(onprem_clusters=[SITE, SITE]),
        [("onprem_clusters[1].name", "on-prem cluster 'campus' is listed twice")],
    ),
    Case(
        "unknown_target",
        config(onprem_clusters=[{**SITE, "burst_to": ["gamma"]}]),
        [("onprem_clusters[0].burst_to[0]", "unknown cluster 'gamma'")],
    ),
    Case(
        "site_as_federation_member",
        config(two=True, federation={"name": "fed", "clusters": ["alpha", "beta", "campus"]}),
        [("federation.clusters[2]", "'campus' is on-prem: it bursts with `sbatch -M` (burst_to)")],
    ),
    Case(
        "whole_internet",
        config(onprem_clusters=[{**SITE, "submit_cidrs": ["0.0.0.0/0"]}]),
        [
            (
                "onprem_clusters[0].submit_cidrs",
                "'0.0.0.0/0' opens slurmdbd and slurmctld to /0; name the site's hosts (/8 or longer)",
            )
        ],
    ),
    Case(
        "license_share_of_an_unknown_cluster",
        config(licenses=[{"name": "vcs", "count": 4, "clusters": {"campus": 50, "nowhere": 50}}]),
        [("licenses[0].clusters.nowhere", "unknown cluster 'nowhere'")],
    ),
]


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_onprem_configs_name_the_field(case: Case) -> None:
    assert problems(case.changes) == case.expected


def test_a_site_bursting_to_a_cluster_whose_key_slurmdbd_does_not_use_is_refused() -> None:
    # without the federation, beta has its own munge key while alpha runs slurmdbd with alpha's: the accounting
    # check refuses the clusters, the site's check the site (a site holding beta's key could not reach slurmdbd)
    only_beta = {**SITE, "burst_to": ["beta"]}
    assert problems(config(two=True, federation=None, onprem_clusters=[only_beta])) == [
        (
            "accounting",
            "cluster(s) alpha, beta would share slurmdbd (on 'alpha') without its munge key or a network route to it: "
            "list every cluster in `federation.clusters`, or give each its own file",
        ),
        (
            "onprem_clusters[0].burst_to",
            "the site uses one munge key for slurmdbd (on cluster 'alpha') and every cluster it bursts to: "
            "burst to 'alpha', or to federation members with 'alpha' a member",
        ),
    ]
    # in the federation every member uses alpha's key: bursting to beta is fine
    assert problems(config(two=True, onprem_clusters=[only_beta])) == []


def test_a_site_bursting_to_two_federation_members_is_valid() -> None:
    fed = {"name": "fed", "clusters": ["alpha", "beta"]}
    assert problems(config(two=True, federation=fed, onprem_clusters=[{**SITE, "burst_to": ["alpha", "beta"]}])) == []


def test_the_accounting_database_gets_the_site_its_associations_and_license_shares() -> None:
    parsed = parse(
        config(
            accounts=[{"name": "eda", "users": ["alice"]}],
            licenses=[
                {"name": "vcs", "count": 4, "clusters": {"alpha": 50, "campus": 50}},
                {"name": "xcel", "count": 9, "server_type": "flexlm", "server": "27000@lic1"},
            ],
        )
    )
    state = desired_state(parsed)
    assert state.clusters == ["alpha", "campus"]
    assert ("campus", "eda", "alice") in state.associations
    assert state.cluster_features["campus"] is None  # not a federation member
    shares = {r.name: r.allowed for r in state.resources.values()}
    assert shares == {"vcs": {"alpha": 50, "campus": 50}, "xcel": {"alpha": 50, "campus": 50}}  # default: even split
    assert sync_config_from(parsed, "alpha").licenses[0].clusters == ["alpha", "campus"]


def test_security_groups_open_slurmctld_to_the_targets_and_slurmdbd_on_the_accounting_host_only() -> None:
    site = {**SITE, "burst_to": ["beta"], "submit_cidrs": ["127.21.0.0/24"]}
    parsed = parse(config(two=True, onprem_clusters=[site], federation={"name": "fed", "clusters": ["alpha", "beta"]}))
    assert onprem_ingress(parsed, "alpha", "alpha") == (
        OnpremIngress("127.20.0.5/32", 6819, "slurmdbd from on-prem campus 127.20.0.5/32"),
        OnpremIngress("127.21.0.0/24", 6819, "slurmdbd from on-prem campus 127.21.0.0/24"),
    )
    assert [(r.cidr, r.port) for r in onprem_ingress(parsed, "beta", "alpha")] == [
        ("127.20.0.5/32", 6817),
        ("127.21.0.0/24", 6817),
    ]


def test_the_kit_names_the_accounting_lines_the_munge_secret_and_the_submit_clusters() -> None:
    parsed = parse(config(two=True, federation={"name": "fed", "clusters": ["beta", "alpha"]}))
    site = onprem_kit.site(parsed, "campus")
    text = onprem_kit.slurm_conf_lines(parsed, site, "ip-127-16-0-4", 16819)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=ip-127-16-0-4",
        "AccountingStoragePort=16819",
    ]
    # alpha is the accounting host and a member: every member (and so the site) uses its key
    assert onprem_kit.munge_source(parsed) == onprem_kit.MungeSource("elastic-slurm/alpha/munge-key", "us-east-1")
    assert "sbatch -M campus,alpha" in text


def test_onprem_kit_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config()))
    assert main(["onprem-kit", str(path), "--site", "hq", "--slurmdbd-host", "h"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"elastic-slurm onprem-kit: --site: no on-prem cluster 'hq' in {path} (onprem_clusters: campus)"
    assert main(["onprem-kit", str(path), "--site", "campus", "--slurmdbd-host", "h", "--slurmdbd-port", "0"]) == 2
    assert capsys.readouterr().err.strip() == "elastic-slurm onprem-kit: --slurmdbd-port: 0 is not a TCP port"
    assert main(["onprem-kit", str(path), "--site", "campus", "--slurmdbd-host", "h"]) == 0
    assert "AccountingStorageHost=h\n" in capsys.readouterr().out
