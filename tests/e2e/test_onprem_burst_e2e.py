"""An on-prem site bursts into a cloud cluster: its jobs run at home while it has room, in the cloud when it is full.

One module-scoped local cloud (configs/onprem-burst.yaml: cloud cluster `sky`, on-prem cluster `onprem` in
`onprem_clusters`, license `eda` shared 50/50) and one emulated site (localcloud/sites/onprem_site.py): its own munged,
slurmctld and two static slurmd nodes from a hand-written slurm.conf, plus the lines and the munge key
`elastic-slurm onprem-kit` gave it. The job user submits on the site with `sbatch -M onprem,sky`, as the kit tells
users to. Every test asserts what both Slurm clusters say (sacct from the one shared database, squeue, scontrol) and
what the emulated EC2 holds (the cloud's instances; none for the site's nodes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.image.slurm_root import JOB_USER
from localcloud.ops import LIVE
from localcloud.sites.onprem_site import NODES, OnpremSite
from tests.e2e.conftest import kept_on_failure, missing_prereqs, replaced_boots

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "onprem-burst.yaml"
SITE, CLOUD = "onprem", "sky"
BOTH = f"{SITE},{CLOUD}"
LICENSE = "eda@slurmdb"  # a static remote license: count 4, 50% each
JOB_TIMEOUT = 120.0


@dataclass
class Burst:
    cloud: LocalCloud
    site: OnpremSite

    def submit(self, *args: str) -> tuple[str, str]:
        """`sbatch -M onprem,sky` on the site as the job user; (job id, cluster Slurm chose)."""
        out = self.site.slurm(
            "sbatch", "--parsable", "-M", BOTH, "-t", "10", "-o", "/dev/null", *args, user=JOB_USER
        ).strip()
        job, _, cluster = out.partition(";")
        return job, cluster

    def records(self, job: str) -> set[tuple[str, str, str]]:
        """(cluster, state, nodes) of the job in the shared database, as the site sees it."""
        out = self.site.slurm("sacct", "-M", "all", "-X", "-n", "-P", "-j", job, "-o", "JobID,Cluster,State,NodeList")
        rows = (line.split("|") for line in out.splitlines())
        return {(c, s.split()[0], n) for j, c, s, n in rows if j == job}

    def state(self, cluster: str, job: str) -> str:
        out = self.site.slurm("squeue", "-M", cluster, "-h", "-j", job, "-o", "%T", check=False)
        return " ".join(line for line in out.splitlines() if not line.startswith("CLUSTER:"))

    def wait_state(self, cluster: str, job: str, state: str) -> None:
        self.cloud.wait_until(lambda: state in self.state(cluster, job), JOB_TIMEOUT, f"job {job} {state} on {cluster}")

    def node_of(self, cluster: str, job: str) -> str:
        """The node a running job holds, as squeue says."""
        out = self.site.slurm("squeue", "-M", cluster, "-h", "-j", job, "-o", "%N")
        return " ".join(line for line in out.splitlines() if not line.startswith("CLUSTER:")).strip()

    def node_of_record(self, cluster: str, job: str) -> str:
        """The node list of the job's final record in the shared database (once it ended)."""
        self.cloud.wait_until(
            lambda: any(c == cluster and s not in {"RUNNING", "PENDING"} for c, s, _ in self.records(job)),
            JOB_TIMEOUT,
            f"job {job} ended on {cluster}",
        )
        return next(n for c, s, n in self.records(job) if c == cluster and s not in {"RUNNING", "PENDING"})

    def wait_completed(self, cluster: str, job: str) -> str:
        """The node list of the job's COMPLETED record on `cluster`."""
        self.cloud.wait_until(
            lambda: any(c == cluster and s == "COMPLETED" for c, s, _ in self.records(job)),
            JOB_TIMEOUT,
            f"job {job} COMPLETED on {cluster}",
        )
        return next(n for c, s, n in self.records(job) if c == cluster and s == "COMPLETED")

    def licenses(self, cluster: str) -> dict[str, str]:
        """`scontrol show license eda@slurmdb` of one cluster, as key=value pairs (asked from the site)."""
        out = self.site.slurm("scontrol", "-M", cluster, "show", "license", LICENSE, "-o")
        return dict(item.split("=", 1) for item in out.split() if "=" in item)


@pytest.fixture(scope="module")
def burst(request: pytest.FixtureRequest) -> Iterator[Burst]:
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"on-prem burst e2e: {reason}")
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-onprem-e2e-", dir="/var/tmp"))
    with kept_on_failure(request, state_dir, "on-prem burst e2e"):  # logs: cloud/log and site/log
        cloud = LocalCloud(state_dir / "cloud")
        site = OnpremSite(state_dir / "site", cloud)
        try:
            cloud.up(CONFIG, boot_delay=1.0)
            site.up(CONFIG, SITE)
            yield Burst(cloud, site)
        finally:
            site.down()
            cloud.down()


def test_the_deployment_registered_the_site_its_users_and_its_license_share(burst: Burst) -> None:
    clusters = burst.site.slurm("sacctmgr", "-n", "-P", "show", "clusters", "format=cluster,controlport")
    ports = dict(line.split("|") for line in clusters.splitlines())
    assert set(ports) >= {SITE, CLOUD} and all(int(ports[c]) > 0 for c in (SITE, CLOUD))  # both slurmctld registered
    assocs = burst.site.slurm("sacctmgr", "-n", "-P", "show", "assoc", f"cluster={SITE}", "format=account,user")
    assert f"burst|{JOB_USER}" in assocs.splitlines()  # the config's accounts apply to the site too
    assert burst.licenses(SITE)["Total"] == "2" and burst.licenses(CLOUD)["Total"] == "2"  # 50% of 4 each
    assert burst.site.idle_nodes() == set(NODES)
    assert not burst.cloud.instances(LIVE)  # the site's nodes are not EC2 instances


def test_jobs_run_on_the_site_while_it_has_room_then_burst_to_the_cloud_with_the_license_shared(burst: Burst) -> None:
    assert not burst.cloud.instances()  # nothing launched yet: every instance below is this test's
    # the site's jobs run until cancelled: the site stays full however long the submissions below take
    first, where_first = burst.submit("-L", f"{LICENSE}:2", "--wrap", "sleep 600")
    assert where_first == SITE
    burst.wait_state(SITE, first, "RUNNING")
    second, where_second = burst.submit("--wrap", "sleep 600")
    assert where_second == SITE
    burst.wait_state(SITE, second, "RUNNING")
    site_nodes = {burst.node_of(SITE, job) for job in (first, second)}
    assert site_nodes == set(NODES)  # one job per site node
    # the site is full (two 1-CPU nodes busy until their time limit): the next job goes to the cloud, and takes the
    # cloud's own share of the license while the site's job holds the site's
    third, where_third = burst.submit("-L", f"{LICENSE}:2", "--wrap", "sleep 20")
    assert where_third == CLOUD
    assert burst.licenses(SITE)["Used"] == "2"
    # more than either share can never run anywhere: refused at submission, not left pending
    with pytest.raises(RuntimeError, match=r"Invalid license|Can't run on any|Requested license"):
        burst.submit("-L", f"{LICENSE}:3", "--wrap", "true")
    burst.wait_state(CLOUD, third, "RUNNING")
    running_on = burst.node_of(CLOUD, third)
    running_addr = burst.cloud.node_addr(running_on)  # while it runs: after, the idle power-down resets it
    cloud_node = burst.wait_completed(CLOUD, third)
    # one instance, launched by the plugin for the burst job (and one per boot past ResumeTimeout it replaced)
    replaced = replaced_boots(burst.cloud, burst.cloud.instances())
    launched = [i for i in burst.cloud.instances() if i.instance_id not in replaced]
    assert len(launched) == 1
    assert cloud_node == running_on and running_addr == launched[0].private_ip
    assert cloud_node not in NODES
    assert {burst.state(SITE, job) for job in (first, second)} == {"RUNNING"}  # the site's jobs never moved
    burst.site.slurm("scancel", first, second)
    for job, node in ((first, burst.node_of_record(SITE, first)), (second, burst.node_of_record(SITE, second))):
        assert node in site_nodes, (job, node)
    burst.cloud.wait_until(lambda: not burst.cloud.orphan_instances(), 60, "no orphan instances")
