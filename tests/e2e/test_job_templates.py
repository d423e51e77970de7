"""The job templates of assets/job-templates/ run in the local cloud: every job, hetjob component, array task and
dependent job ends COMPLETED in sacct, prints what the template promises, and no instance is left without a node.

One local cloud of its own (not the session one), started from cold nodes; every template is submitted at once so
they share the launches.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import JobRecord
from tests.e2e.conftest import missing_prereqs

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "cluster_config" / "examples" / "local-demo.yaml"
TEMPLATES = ROOT / "assets" / "job-templates"
STATE_DIR = Path("/var/tmp/elastic-slurm-templates-e2e")
JOB_TIMEOUT = 150.0


@dataclass(frozen=True)
class Submitted:
    """Job ids of every template run (the pipeline and the regression submit themselves)."""

    ml: str
    mpi: str
    het: str
    het_cli: str
    shards: str
    merge: str
    eda: str

    def all(self) -> list[str]:
        return [self.ml, self.mpi, self.het, self.het_cli, self.shards, self.merge, self.eda]


@dataclass(frozen=True)
class Runs:
    """The submitted jobs and their settled sacct records."""

    cloud: LocalCloud
    jobs: Submitted
    records: list[JobRecord]

    def of(self, job_id: str) -> list[JobRecord]:
        """Records of one job: itself, or its array tasks (`id_n`) or hetjob components (`id+n`)."""
        return [r for r in self.records if re.fullmatch(rf"{job_id}([_+]\d+)?", r.job_id)]

    def output(self, name: str) -> str:
        path = self.cloud.layout.jobs / name
        return path.read_text() if path.exists() else f"(no {path})"


def _root(job_id: str) -> str:
    """The job id of an array task (`id_n`, `id_[1-3%2]`) or hetjob component (`id+n`)."""
    return re.split(r"[_+]", job_id)[0]


def _self_submit(cloud: LocalCloud, template: str, *sbatch_args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a self-submitting template (`bash template [sbatch options]`) from the jobs dir, as a user would."""
    return subprocess.run(
        ["bash", str(TEMPLATES / template), *sbatch_args],
        env={**cloud.env(), **env},
        cwd=cloud.layout.jobs,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ids(stdout: str, *keys: str) -> list[str]:
    found = [re.search(rf"\b{key}=(\d+)", stdout) for key in keys]
    assert all(found), stdout
    return [m.group(1) for m in found if m]


def _submit_all(cloud: LocalCloud) -> Submitted:
    # The single-CPU tasks stay on the small pool: the big nodes are for the two hetjobs, which only the backfill
    # scheduler starts (every 30 s), so they should not wait for array tasks to free big nodes.
    small = ("-C", "cpu-small")
    pipeline = _self_submit(cloud, "data-pipeline.sbatch", *small, SHARDS="4", MAX_PARALLEL="4")
    eda = _self_submit(cloud, "eda-regression.sbatch", *small, TESTS="6", MAX_PARALLEL="3")
    assert pipeline.returncode == 0 and eda.returncode == 0, (pipeline.stderr, eda.stderr)
    shards, merge = _ids(pipeline.stdout, "shards", "merge")
    (eda_id,) = _ids(eda.stdout, "array")
    het_cli = ["-n1", "-C", "cpu-small", ":", "-N2", "--ntasks-per-node=1", "-C", "cpu-big"]
    return Submitted(
        ml=cloud.sbatch(str(TEMPLATES / "ml-training-torchrun.sbatch")),
        mpi=cloud.sbatch(str(TEMPLATES / "mpi-simulation.sbatch")),
        het=cloud.sbatch(str(TEMPLATES / "heterogeneous.sbatch")),
        het_cli=cloud.sbatch(*het_cli, str(TEMPLATES / "heterogeneous.sbatch")),
        shards=shards,
        merge=merge,
        eda=eda_id,
    )


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    """A local cloud of this module with every template submitted at once and run to the end; always torn down."""
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"job templates e2e: {reason}")
    cloud = LocalCloud(STATE_DIR)
    try:
        cloud.up(CONFIG, boot_delay=1.0)
        jobs = _submit_all(cloud)
        # squeue names hetjob components `id+n`, which CloudOps.wait_jobs_done does not match: wait for them first.
        roots = set(jobs.all())
        cloud.wait_until(lambda: not roots & {_root(j) for j in cloud.queue()}, JOB_TIMEOUT, "every template job")
        records = cloud.wait_jobs_done(jobs.all(), JOB_TIMEOUT)
        yield Runs(cloud, jobs, records)
    finally:
        cloud.down()


def test_every_template_job_component_and_task_completes(runs: Runs) -> None:
    jobs = runs.jobs
    expected = {jobs.ml: 1, jobs.mpi: 1, jobs.het: 2, jobs.het_cli: 2, jobs.shards: 4, jobs.merge: 1, jobs.eda: 6}
    assert {job: len(runs.of(job)) for job in expected} == expected, runs.records
    assert {r.state for r in runs.records} == {"COMPLETED"}, runs.records


def test_ml_training_stand_in_runs_one_rank_per_node_with_the_first_node_as_master(runs: Runs) -> None:
    out = runs.output(f"{runs.jobs.ml}.out")
    ranks = re.findall(r"rank=(\d) world_size=2 node=(\S+) master=(\S+)", out)
    assert sorted(rank for rank, _, _ in ranks) == ["0", "1"], out
    assert len({node for _, node, _ in ranks}) == 2, out
    assert {master for _, _, master in ranks} == {dict((r, n) for r, n, _ in ranks)["0"]}, out
    assert "ml-training: done" in out


def test_mpi_simulation_reduces_the_partial_sums_of_every_rank(runs: Runs) -> None:
    out = runs.output(f"{runs.jobs.mpi}.out")
    assert len(re.findall(r"rank \d/4 on \S+ wrote its partial sum", out)) == 4, out
    assert "mpi-simulation: pi=3.141593 from 4 ranks" in out
    (record,) = runs.of(runs.jobs.mpi)
    assert "[" in record.nodes, record  # two nodes


def test_data_pipeline_merges_every_shard_after_the_array(runs: Runs) -> None:
    shards = runs.jobs.shards
    for task in range(4):
        assert f"shard {task} of array {shards} done" in runs.output(f"slurm-{shards}_{task}.out")
    # sum of 1..4000: only right when the merge ran after every shard wrote its part
    assert "data-pipeline: merged 4 shards, total=8002000" in runs.output(f"slurm-{runs.jobs.merge}.out")


@pytest.mark.parametrize("which", ["het", "het_cli"])
def test_heterogeneous_job_runs_each_component_on_its_own_pool(runs: Runs, which: str) -> None:
    job = getattr(runs.jobs, which)
    nodes = {r.job_id: r.nodes for r in runs.of(job)}
    assert nodes[f"{job}+0"].startswith("cpu-small-") and nodes[f"{job}+1"].startswith("cpu-big-"), nodes
    out = runs.output(f"{job}.out")
    assert "heterogeneous: components=2" in out
    assert len(re.findall(r"coordinator task 0 on cpu-small-\d+", out)) == 1, out
    assert len(re.findall(r"worker task \d of 2 on cpu-big-\d+", out)) == 2, out


def test_eda_regression_every_test_passes(runs: Runs) -> None:
    eda = runs.jobs.eda
    for task in range(1, 7):
        assert f"eda-regression: test {task} PASS" in runs.output(f"slurm-{eda}_{task}.out")


def test_eda_regression_requests_the_licenses_named_in_eda_licenses(runs: Runs) -> None:
    # The local cloud defines no license, so a request naming one is refused: proof that -L reached sbatch.
    result = _self_submit(runs.cloud, "eda-regression.sbatch", EDA_LICENSES="vcs@lic1:1")
    assert result.returncode != 0
    assert "Invalid license specification" in result.stderr


def test_no_instance_is_left_without_a_node(runs: Runs) -> None:
    runs.cloud.wait_until(lambda: not runs.cloud.orphan_instances(), 60, "no orphan instances")
