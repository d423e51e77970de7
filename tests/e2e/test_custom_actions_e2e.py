"""Custom boot actions with real Slurm (docs/custom-actions.md): the controller's user data runs its action before
it signals SUCCESS; a compute node downloads its pool's script from (emulated) S3 with the compute role's keys — the
IAM statement the stacks attach — runs it before slurmd starts and then runs jobs; a node whose action fails never
registers, its boot log names the action, and the plugin terminates its instance."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from tests.e2e.conftest import assert_no_orphans, module_cloud, replaced_boots

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "custom-actions.yaml"
BUCKET = "es-actions-e2e"


@pytest.fixture(scope="module")
def cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """A local cloud of its own for the custom-actions config, with the S3 script the `good` pool's nodes run."""
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-e2e-actions-", dir="/var/tmp"))
    with module_cloud(request, CONFIG, state_dir, "custom actions e2e") as local:
        s3 = local.aws().client("s3", "us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        body = '#!/bin/bash\necho "hello $1 from $(hostname)"\n'
        s3.put_object(Bucket=BUCKET, Key="hello.sh", Body=body.encode())
        yield local


def test_the_controller_ran_its_action_before_it_signalled_success(cloud: LocalCloud) -> None:
    log = (cloud.layout.log / "controller-boot.log").read_text(errors="replace")
    lines = log.splitlines()
    ran = lines.index("controller-action-ran")
    assert "elastic-slurm: custom action 1/1 of on_node_configured (/bin/echo): done" in lines[ran:]
    assert any("controller" in line and "is up" in line for line in lines[ran:])


def test_a_node_runs_its_pools_s3_action_then_its_job(cloud: LocalCloud) -> None:
    job = cloud.sbatch("-p", "good", wrap="echo job-ran")
    (record,) = cloud.wait_jobs_done([job], timeout=150)
    assert record.state == "COMPLETED"
    launched = [i for i in cloud.instances() if i.pool == "good-s3"]
    replaced = replaced_boots(cloud, launched)  # a boot past ResumeTimeout on a busy machine: its job ran on the next
    (instance,) = [i for i in launched if i.instance_id not in replaced]
    log = (cloud.layout.log / "instances" / f"{instance.instance_id}.log").read_text(errors="replace")
    assert "hello from-s3 from " in log
    assert "elastic-slurm: custom action 1/1 of on_node_start (s3://es-actions-e2e/hello.sh): done" in log
    assert log.index("hello from-s3") < log.index("slurmd")  # before slurmd started
    # disable_hyperthreading: one thread per core before slurmd started (in the instance's copy of the host's CPU tree,
    # localcloud/instances/fake_sysfs.py), and Slurm counts c7i.large's one core as the node's CPUs
    assert "elastic-slurm-smt-off: " in log and log.index("elastic-slurm-smt-off: ") < log.index("slurmd")
    tree = cloud.layout.machine_dir(instance.instance_id) / "run" / "elastic-slurm-sysfs-cpu"
    for siblings in tree.glob("cpu*/topology/thread_siblings_list"):
        core = _cpus(siblings.read_text())
        assert sum(_online(tree / f"cpu{cpu}") for cpu in core) == 1, core
    assert "CPUTot=1 " in cloud.slurm("scontrol", "show", "node", record.nodes)


def _cpus(text: str) -> list[int]:
    """A sysfs CPU list (0-1,4) as numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


def _online(cpu: Path) -> bool:
    return not (cpu / "online").exists() or (cpu / "online").read_text().strip() == "1"


def test_a_failing_action_fails_the_boot_and_the_instance_is_terminated(cloud: LocalCloud) -> None:
    job = cloud.sbatch("-p", "bad", wrap="true")
    cloud.wait_until(lambda: any(i.pool == "bad-fail" for i in cloud.instances()), 60, "a bad-fail instance")
    (instance,) = [i for i in cloud.instances() if i.pool == "bad-fail"]
    log_path = cloud.layout.log / "instances" / f"{instance.instance_id}.log"
    failed = "elastic-slurm: custom action 1/1 of on_node_configured (/bin/false) failed with exit 1"
    cloud.wait_until(lambda: log_path.exists() and failed in log_path.read_text(errors="replace"), 60, failed)
    # the boot's ERR trap writes its line just after the action's (a moment later on a busy machine)
    boot_failed = "elastic-slurm boot: FAILED"
    cloud.wait_until(lambda: boot_failed in log_path.read_text(errors="replace"), 30, boot_failed)
    # it never registers: past ResumeTimeout the node is down and the plugin terminates the instance
    cloud.wait_until(
        lambda: instance.instance_id not in {i.instance_id for i in cloud.instances(LIVE)}, 150, "instance terminated"
    )
    assert cloud.queue().get(job) in {"PENDING", "CONFIGURING"}  # the job is not lost: it waits for a node
    cloud.slurm("scancel", job)
    assert_no_orphans(cloud)
