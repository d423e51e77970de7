"""Two federated clusters in one local cloud: federation routing, licenses pending on a license server, preemption.

One module-scoped LocalFederation (configs/federation-local.yaml: clusters fed-a and fed-b, ONE emulated AWS, munged,
MariaDB and slurmdbd; federation `fedx` with cluster features onprem/aws; a FlexLM remote license `vcs` for fed-a;
QOS preemption on fed-b). Every test asserts what Slurm says (squeue --sibling, sacct -M all, scontrol) and that no
instance is left without a node; no squeue row may ever show reason FedJobLock. The tests run in file order and
only lean on it for speed (a warm or cold fed-b node); each sets up and waits for the state it needs, so each passes
alone and under -k.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster_config import ElasticSlurmConfig, load
from elastic_slurm.dashboards import grafana
from localcloud.aws.faults import CapacityFault, Faults
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from localcloud.services import prometheus
from localcloud.sites.federation import LocalFederation
from tests.e2e.conftest import kept_on_failure, missing_prereqs
from tests.e2e.license_helpers import LMSTAT_FIXTURES, fake_lmutil, lmstat_with_usage, run_license_sync

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "federation-local.yaml"
LICENSE = "vcs@flexsrv1"
# a job requeued on fed-b waits out the requeue hold, then the next full scheduling pass (sched_interval: 60 s by
# default) and its node's boot: up to ~2 minutes on a busy machine
JOB_TIMEOUT = 240.0


@dataclass(frozen=True)
class Row:
    """One squeue --sibling row: a job as one cluster of the federation holds it."""

    job_id: str
    cluster: str
    state: str
    reason: str
    nodes: str


class Fed:
    """The running federation plus every squeue row seen so far (to assert that none was stuck in FedJobLock)."""

    def __init__(self, federation: LocalFederation, config: ElasticSlurmConfig) -> None:
        self.federation = federation
        self.config = config
        self.a = federation.cloud("fed-a")
        self.b = federation.cloud("fed-b")
        self.reasons: set[str] = set()

    def rows(self, job_id: str) -> list[Row]:
        """The job on every cluster (origin and siblings), as seen from fed-a."""
        out = self.a.slurm(
            "squeue",
            "--sibling",
            "-h",
            "-j",
            job_id,
            "-O",
            "JobID:|,Cluster:|,State:|,Reason:|,NodeList:|",
            check=False,
        )
        rows = [Row(*line.split("|")[:5]) for line in out.splitlines() if line.count("|") >= 5]
        self.reasons |= {row.reason for row in rows}
        return rows

    def state_on(self, job_id: str, cluster: str) -> str:
        return next((row.state for row in self.rows(job_id) if row.cluster == cluster), "")

    def wait_state(self, job_id: str, cluster: str, states: set[str], what: str) -> None:
        self.a.wait_until(lambda: self.state_on(job_id, cluster) in states, JOB_TIMEOUT, f"job {job_id} {what}")

    def wait_gone(self, job_id: str) -> None:
        self.a.wait_until(lambda: not self.rows(job_id), JOB_TIMEOUT, f"job {job_id} to leave every queue")

    def accounted(self, job_id: str) -> set[tuple[str, str]]:
        """(cluster, state) of each record of the job in `sacct -M all` (every run, -D)."""
        out = self.a.slurm("sacct", "-M", "all", "-X", "-D", "-P", "-n", "-j", job_id, "-o", "JobID,Cluster,State")
        return {(c, s.split()[0]) for j, c, s in (line.split("|") for line in out.splitlines()) if j == job_id}

    def wait_accounted(self, job_id: str, record: tuple[str, str]) -> None:
        self.a.wait_until(lambda: record in self.accounted(job_id), 30, f"sacct record {record} of job {job_id}")


@pytest.fixture(scope="module")
def fed(request: pytest.FixtureRequest) -> Iterator[Fed]:
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"federation e2e: {reason}")
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-fed-e2e-", dir="/var/tmp"))
    with kept_on_failure(request, state_dir, "federation e2e"):  # logs: <cluster>/log
        federation = LocalFederation(state_dir)
        try:
            federation.up(CONFIG, boot_delay=1.0)
            yield Fed(federation, load(CONFIG))
        finally:
            federation.down()


def _assert_no_orphans(cloud: LocalCloud) -> None:
    cloud.wait_until(lambda: not cloud.orphan_instances(), 60, f"no orphan instances in {cloud.info().cluster}")


def test_both_clusters_see_each_other_as_synced_siblings(fed: Fed) -> None:
    for cloud, sibling in ((fed.a, "fed-b"), (fed.b, "fed-a")):
        text = cloud.slurm("scontrol", "show", "federation")
        assert "Federation: fedx" in text
        line = next(line for line in text.splitlines() if line.strip().startswith(f"Sibling:    {sibling}:"))
        assert "PersistConnSend/Recv:Yes/Yes" in line and "Synced:Yes" in line


def _requeued_on_b(fed: Fed, job: str) -> bool:
    return bool({("fed-b", "REQUEUED"), ("fed-b", "NODE_FAIL")} & fed.accounted(job))


def test_job_routed_to_b_whose_launch_hits_a_capacity_error_is_requeued_and_runs_once_capacity_is_back(
    fed: Fed,
) -> None:
    # the case of aws-parallelcluster#3722 (a sibling whose cloud node fails to launch kept the job in FedJobLock)
    fed.b.wait_until(lambda: not fed.b.instances(LIVE), 90, "fed-b without instances")  # its node must launch
    fed.b.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1b"),)))  # fed-b's only AZ
    try:
        job = fed.a.sbatch("--cluster-constraint=aws", wrap="true")
        # (scontrol on fed-b shows the origin's record for this job, so the requeue is read from sacct)
        fed.a.wait_until(lambda: _requeued_on_b(fed, job), 90, f"job {job} requeued on fed-b after the capacity error")
        assert fed.state_on(job, "fed-b") in {"PENDING", "CONFIGURING"}
        assert not fed.b.instances(LIVE)
    finally:
        fed.b.clear_faults()
    fed.wait_gone(job)
    fed.wait_accounted(job, ("fed-b", "COMPLETED"))
    assert "FedJobLock" not in fed.reasons


def test_job_whose_cluster_constraint_only_b_satisfies_runs_on_b_and_its_sibling_on_a_is_revoked(fed: Fed) -> None:
    job = fed.a.sbatch("--cluster-constraint=aws", wrap="hostname; sleep 2")
    fed.wait_state(job, "fed-b", {"RUNNING", "COMPLETING", "COMPLETED"}, "running on fed-b")
    assert fed.state_on(job, "fed-a") in {"REVOKED", ""}  # the origin keeps only a revoked tracking record
    fed.wait_gone(job)
    fed.wait_accounted(job, ("fed-b", "COMPLETED"))
    assert ("fed-a", "COMPLETED") not in fed.accounted(job)
    assert f"{job}|fed-b" in fed.a.slurm("sacct", "--federation", "-X", "-n", "-P", "-j", job, "-o", "JobID,Cluster")
    assert "FedJobLock" not in fed.reasons


def test_job_submitted_from_a_with_clusters_b_runs_on_b_and_is_requeued_and_cancelled_from_a(fed: Fed) -> None:
    job = fed.a.sbatch("--clusters=fed-b", wrap="sleep 300")
    fed.wait_state(job, "fed-b", {"RUNNING"}, "running on fed-b")
    assert {row.cluster for row in fed.rows(job)} == {"fed-b"}  # -M: fed-b is the origin, no sibling on fed-a
    fed.a.slurm("scontrol", "requeue", job)  # fed-a routes it to the origin
    fed.wait_state(job, "fed-b", {"PENDING"}, "requeued on fed-b")
    fed.a.slurm("scancel", job)
    fed.wait_gone(job)
    fed.wait_accounted(job, ("fed-b", "CANCELLED"))
    assert ("fed-b", "REQUEUED") in fed.accounted(job)
    assert "FedJobLock" not in fed.reasons


def test_interactive_qos_job_preempts_a_batch_job_which_is_requeued_and_later_completes(fed: Fed) -> None:
    # fed-b has one 2-CPU node (still up after the previous test): the batch job takes it whole
    # its first run outlasts the preemption however slow the machine (a run that ends first is never requeued); the
    # requeued run (Slurm sets SLURM_RESTART_COUNT) ends at once
    batch = fed.a.sbatch("--clusters=fed-b", "-c", "2", wrap='[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] || sleep 600')
    fed.wait_state(batch, "fed-b", {"RUNNING"}, "batch job running on fed-b")
    interactive = fed.a.sbatch("--clusters=fed-b", "-c", "2", "--qos=interactive", wrap="sleep 2")
    fed.a.wait_until(lambda: fed.b.job_restarts(batch) >= 1, 60, "the batch job requeued by preemption")
    fed.wait_gone(interactive)
    fed.wait_accounted(interactive, ("fed-b", "COMPLETED"))
    fed.wait_gone(batch)
    fed.wait_accounted(batch, ("fed-b", "COMPLETED"))
    assert ("fed-b", "PREEMPTED") in fed.accounted(batch) or ("fed-b", "REQUEUED") in fed.accounted(batch)
    assert "FedJobLock" not in fed.reasons


def test_plain_job_with_sbatch_clusters_set_to_the_local_cluster_never_leaves_it(fed: Fed) -> None:
    # Without it a plain sbatch on fed-a gets siblings on both clusters and either may win the race (seen: 3 of 6
    # plain jobs ran on the other cluster while both had idle nodes), so the login environment pins it.
    result = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 1"],
        env={**fed.a.env(), "SBATCH_CLUSTERS": "fed-a"},
        capture_output=True,
        text=True,
        timeout=30,
        cwd=fed.a.layout.jobs,
    )
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip().split(";")[0]
    assert {row.cluster for row in fed.rows(job)} <= {"fed-a"}
    fed.wait_gone(job)
    fed.wait_accounted(job, ("fed-a", "COMPLETED"))
    assert {cluster for cluster, _ in fed.accounted(job)} == {"fed-a"}  # no sibling was ever created on fed-b
    assert "FedJobLock" not in fed.reasons


def _sync(fed: Fed, output: Path, exit_code: int) -> str:
    env = fake_lmutil(fed.a.layout.bin, output, exit_code, fed.a.env())
    result = run_license_sync(fed.config, "fed-a", fed.a.layout, env, fed.a.controller())
    assert result.returncode == 0, result.stderr
    return result.stderr


def _license(cloud: LocalCloud, field: str) -> str:
    """A field (Total, LastConsumed, ...) of the vcs license as slurmctld has it."""
    for line in cloud.slurm("scontrol", "show", "licenses", "-o").splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("LicenseName") == LICENSE:
            return fields.get(field, "")
    return ""


def _reason(cloud: LocalCloud, job: str) -> str:
    return cloud.slurm("squeue", "-h", "-j", job, "-o", "%r", check=False).strip()


def test_jobs_wanting_more_licenses_than_free_pend_until_the_license_server_frees_them(fed: Fed) -> None:
    # Slurm 23.02+: the sync keeps count = issued and sets LastConsumed = what the server says is in use (Slurm's
    # own jobs included); slurmctld hands out count - max(its own use, LastConsumed).
    scratch = fed.a.layout.state

    def consumed(value: int) -> None:
        fed.a.wait_until(lambda: _license(fed.a, "LastConsumed") == str(value), 30, f"LastConsumed={value}")
        assert _license(fed.a, "Total") == "50"

    # 50 issued, 12 checked out by users outside Slurm: Slurm may hand out 38
    _sync(fed, LMSTAT_FIXTURES / "v11_16_eda.txt", 0)
    consumed(12)
    holder = fed.a.sbatch("--clusters=fed-a", "-L", f"{LICENSE}:30", wrap="sleep 300")
    fed.wait_state(holder, "fed-a", {"RUNNING"}, "holding 30 licenses")
    # the server now counts our 30 as well: 42 in use, 8 free
    _sync(fed, lmstat_with_usage("v11_16_eda.txt", "VCSRuntime_Net", 42, scratch / "lmstat-42.txt"), 0)
    consumed(42)
    waiter = fed.a.sbatch("--clusters=fed-a", "-L", f"{LICENSE}:10", wrap="sleep 1")
    fed.a.wait_until(lambda: _reason(fed.a, waiter) == "Licenses", 30, "the second job pending on Licenses")
    assert fed.state_on(waiter, "fed-a") == "PENDING"

    # the outside users give their 12 back: the server now counts only the 30 our running job holds
    _sync(fed, lmstat_with_usage("v11_16_eda.txt", "VCSRuntime_Net", 30, scratch / "lmstat-30.txt"), 0)
    consumed(30)
    fed.wait_gone(waiter)
    fed.wait_accounted(waiter, ("fed-a", "COMPLETED"))
    assert fed.state_on(holder, "fed-a") == "RUNNING"

    # the license server goes down: the last good values stay
    stderr = _sync(fed, LMSTAT_FIXTURES / "server_down.txt", 1)
    assert "Cannot connect to license server" in stderr
    assert _license(fed.a, "LastConsumed") == "30"
    assert "vcs|50" in fed.a.slurm("sacctmgr", "-n", "-P", "show", "resource", "format=name,count").split()
    fed.a.slurm("scancel", holder)
    fed.wait_gone(holder)
    assert "FedJobLock" not in fed.reasons


def test_license_dashboard_queries_return_data_from_the_clusters_prometheus(fed: Fed) -> None:
    # self-contained (alone, under -k, or after the test above): one good sync (50 issued), then the server down
    _sync(fed, LMSTAT_FIXTURES / "v11_16_eda.txt", 0)
    assert "Cannot connect to license server" in _sync(fed, LMSTAT_FIXTURES / "server_down.txt", 1)
    url = fed.a.info().prometheus_url
    queries = grafana.file_expressions("licenses")  # the license row of the dashboard files
    assert len(queries) >= 4

    def empty() -> list[str]:
        out = []
        for _where, expr in queries:
            promql = expr.replace("$instance", ".+")
            if not any(s["values"] for s in prometheus.query_range(url, promql, time.time() - 600, time.time(), 5)):
                out.append(promql)
        return out

    fed.a.wait_until(lambda: not empty(), 60, "every license panel's query with data in Prometheus")

    def total() -> list[float]:
        return [float(r["value"][1]) for r in prometheus.query(url, f'slurm_license_total{{license=~"{LICENSE}.*"}}')]

    fed.a.wait_until(lambda: total() == [50.0], 60, "the synced license total (50) in Prometheus")

    def failures() -> float:  # the server went down last: its consecutive failures, once scraped
        return sum(float(r["value"][1]) for r in prometheus.query(url, "max(elastic_slurm_license_sync_failures)"))

    fed.a.wait_until(lambda: failures() >= 1, 60, "the failed license sync in Prometheus")


def test_no_instance_is_left_without_a_node_in_either_cluster(fed: Fed) -> None:
    for cloud in (fed.a, fed.b):
        _assert_no_orphans(cloud)
    assert not fed.a.slurm("squeue", "--sibling", "-h", "-o", "%i %T")
    assert "FedJobLock" not in fed.reasons
