"""IAM is enforced in the local cloud: the controller (its boot, render, the plugin run by slurmctld, the cluster
manager) and every instance call the emulated AWS as principals whose policies are the statements the stacks attach
to the controller and compute roles (localcloud/aws/cloud_iam.py). Every e2e test runs on such a cloud, so a permission
the code needs and the roles lack fails them; here: enforcement is really on, each machine signs as its own role,
and a controller role without one statement its boot needs fails `local up` at that step.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from localcloud.aws import cloud_iam
from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from localcloud.aws.iam import role_documents
from localcloud.cloud import LocalCloud, LocalCloudError
from localcloud.services.daemons import CLOUD_MARKER
from stacks.iam_policies import RegionTarget
from stacks.node_policies import ControllerResources
from stacks.user_data import read_env_file
from tests.e2e.conftest import CONFIG, missing_prereqs

pytestmark = pytest.mark.e2e


def _env_file(cloud: LocalCloud) -> dict[str, str]:
    text = (cloud.layout.machine_dir("controller") / "etc-elastic-slurm" / "env").read_text()
    return read_env_file(text)


def test_the_emulated_aws_refuses_unsigned_and_dummy_callers(cloud: LocalCloud) -> None:
    aws = cloud.aws()
    assert aws.iam_enforced()
    stranger = EmulatedAws(url=aws.url, pid=aws.pid)  # dummy credentials, as before IAM was enforced
    assert stranger.access_key[0] == DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"]
    with pytest.raises(ClientError) as refused:
        stranger.client("ec2", cloud.info().regions[0]).describe_instances()
    assert refused.value.response["Error"]["Code"] == "AuthFailure"


def test_controller_and_instances_sign_as_their_roles(cloud: LocalCloud) -> None:
    principals = cloud.principals()
    env = _env_file(cloud)
    assert env["AWS_ACCESS_KEY_ID"] == principals.controller.access_key_id
    assert "AWS_SESSION_TOKEN" not in env
    wrapper = (cloud.layout.bin / "slurm-resume").read_text()
    assert f"AWS_ACCESS_KEY_ID={principals.controller.access_key_id}" in wrapper
    iam = cloud.aws().client("iam")
    info = cloud.info()
    for role, key in (("controller", principals.controller), ("compute", principals.compute)):
        (user,) = [u["UserName"] for u in iam.list_users()["Users"] if u["UserName"] == f"{info.cluster}-{role}"]
        keys = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
        assert [k["AccessKeyId"] for k in keys] == [key.access_key_id]
        policy = iam.get_user_policy(UserName=user, PolicyName="synthesized")["PolicyDocument"]
        policy = json.loads(policy) if isinstance(policy, str) else policy
        statements = {s["Sid"] for s in policy["Statement"]}
        # as the cluster stack: config object, events queue, alert topic + key; with accounting, the database secret
        own = ControllerResources("object", "secret", "queue", "topic", "key", "parameter")
        targets = [RegionTarget(info.regions[0], "v", [], "r")]
        expected = role_documents(info.cluster, targets, controller=own)[role]["Statement"]
        assert statements == {s["Sid"] for s in expected}, role
    # an instance that boots runs its user data (and so slurmd) with the compute role's key, and is running in EC2:
    # read while its job runs (after the job, the idle power-down may be stopping slurmd or its instance)
    job = cloud.sbatch("-N1", wrap="sleep 300")
    try:
        cloud.wait_until(lambda: cloud.queue().get(job) == "RUNNING", 180, f"job {job} running")
        node = cloud.slurm("squeue", "-h", "-j", job, "-o", "%N").strip()
        instance = cloud.instance_of_node(node)  # its live instance in EC2
        keys = _instance_keys(cloud)  # every slurmd of this cloud (another test's node too) signs as compute
        assert keys.get(instance.instance_id) == principals.compute.access_key_id, (node, instance, keys)
        assert set(keys.values()) == {principals.compute.access_key_id}
    finally:
        cloud.slurm("scancel", job, check=False)


def _instance_keys(cloud: LocalCloud) -> dict[str, str]:
    """Instance id -> AWS_ACCESS_KEY_ID of the environment each of this cloud's slurmd runs with (its boot's)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if (
                not proc.name.isdigit()
                or Path((proc / "cmdline").read_bytes().split(b"\0")[0].decode()).name != "slurmd"
            ):
                continue
            pairs = (proc / "environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        if env.get(CLOUD_MARKER) == str(cloud.layout.root) and "ELASTIC_SLURM_INSTANCE_ID" in env:
            found[env["ELASTIC_SLURM_INSTANCE_ID"]] = env.get("AWS_ACCESS_KEY_ID", "")
    return found


@pytest.mark.parametrize(
    ("sid", "step"),
    [
        ("ReadClusterConfig", "slurm_plugin.config_fetch"),  # the config object: S3 GetObject
        ("ReadClusterParameters", "slurm_plugin.boot_fetch"),  # the munge key and the boot parameters, one process
    ],
)
def test_a_controller_role_without_a_statement_its_boot_needs_fails_the_boot_at_that_step(sid: str, step: str) -> None:
    # moto authorizes actions only: ReadMungeKey and ReadDatabaseSecret share secretsmanager:GetSecretValue, so
    # dropping one of them is caught only by resource evaluation (docs/iam.md); these two own their actions
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"IAM e2e: {reason}")
    state = Path(tempfile.mkdtemp(prefix="elastic-slurm-iam-", dir="/var/tmp"))
    cloud = LocalCloud(state)
    try:
        with pytest.raises(LocalCloudError) as failed:
            cloud.up(CONFIG, boot_delay=1.0, iam_without=(sid,))
        message = str(failed.value)
        assert "controller boot failed" in message and step in message, message
        boot_log = (state / "log" / "controller-boot.log").read_text()
        assert "AccessDenied" in boot_log or "(403)" in boot_log, boot_log[-2000:]
        assert cloud_iam.load(cloud.layout) is not None
    finally:
        cloud.down()
        shutil.rmtree(state, ignore_errors=True)
