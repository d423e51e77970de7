"""The site customizations of issue 15 in the synthesized templates of tests/cdk/configs/site-customized.yaml (which
the session's synth also runs through cfn-lint and cdk-nag): a pool's own AMI and security groups, the controller's
extra security group, the operator's managed policies on each role, read access to exactly the custom actions' S3
scripts, and the actions in the nodes' user data."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk

CONFIG = "site-customized"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SCRIPTS = [
    "arn:aws:s3:::site-bucket/compute/agent.sh",
    "arn:aws:s3:::site-bucket/controller/register.sh",
    "arn:aws:s3:::site-bucket/login/motd.sh",
]


def _resources(assemblies: dict[str, Assembly], kind: str) -> dict[str, dict[str, Any]]:
    resources = assemblies[CONFIG].template_json("es-site-cluster")["Resources"]
    return {lid: r for lid, r in resources.items() if r["Type"] == kind}


def _launch_template(assemblies: dict[str, Assembly], prefix: str) -> dict[str, Any]:
    (data,) = [
        r["Properties"]["LaunchTemplateData"]
        for lid, r in _resources(assemblies, "AWS::EC2::LaunchTemplate").items()
        if lid.startswith(prefix)
    ]
    return data


def _user_data_actions(data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(data["UserData"])
    (encoded,) = re.findall(r"ES_ACTIONS='([A-Za-z0-9+/=]+)'", text)
    return json.loads(base64.b64decode(encoded))


def test_a_pool_launches_its_own_ami_with_its_extra_security_group(assemblies: dict[str, Assembly]) -> None:
    c7i = _launch_template(assemblies, "Ltcpuc7i")
    assert c7i["ImageId"] == "ami-0123456789abcdef0"
    assert "sg-0bbbbbbbbbbbbbbb2" in c7i["SecurityGroupIds"] and len(c7i["SecurityGroupIds"]) == 2
    p5 = _launch_template(assemblies, "Ltmlp5")
    assert p5["ImageId"].startswith("resolve:ssm:/elastic-slurm/site/ami/")
    assert len(p5["SecurityGroupIds"]) == 1


def test_the_controller_gets_its_extra_security_group(assemblies: dict[str, Assembly]) -> None:
    controller = _launch_template(assemblies, "ControllerLt")
    assert "sg-0aaaaaaaaaaaaaaa1" in controller["SecurityGroupIds"] and len(controller["SecurityGroupIds"]) == 3


def test_each_role_gets_the_operators_managed_policies(assemblies: dict[str, Assembly]) -> None:
    roles = _resources(assemblies, "AWS::IAM::Role")
    managed = {lid.split("Role")[0]: r["Properties"].get("ManagedPolicyArns", []) for lid, r in roles.items()}
    assert "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy" in managed["Controller"]
    assert "arn:aws:iam::111122223333:policy/site-read-datasets" in managed["Compute"]
    assert "arn:aws:iam::111122223333:policy/site-read-datasets" not in managed["Controller"]
    assert "arn:aws:iam::111122223333:policy/site-login-tools" in managed["Login"]
    assert "arn:aws:iam::111122223333:policy/site-login-tools" not in managed["Compute"]


def test_nodes_may_read_exactly_the_custom_action_scripts(assemblies: dict[str, Assembly]) -> None:
    policies = _resources(assemblies, "AWS::IAM::Policy")
    reads = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "ReadCustomActionScripts"
    ]
    assert len(reads) == 3  # the controller's, the compute and the login role
    assert all(s["Action"] == "s3:GetObject" and sorted(s["Resource"]) == SCRIPTS for s in reads)


def test_the_actions_reach_each_nodes_user_data(assemblies: dict[str, Assembly]) -> None:
    c7i = _user_data_actions(_launch_template(assemblies, "Ltcpuc7i"))
    assert c7i["on_node_start"] == [{"script": "s3://site-bucket/compute/agent.sh", "args": []}]
    assert c7i["on_node_configured"] == [{"script": "/usr/local/sbin/site-check", "args": ["--quick"]}]
    controller = _user_data_actions(_launch_template(assemblies, "ControllerLt"))
    assert controller["on_node_configured"] == [{"script": "s3://site-bucket/controller/register.sh", "args": ["site"]}]
    assert "ES_ACTIONS=" not in json.dumps(_launch_template(assemblies, "Ltmlp5")["UserData"])


def test_only_the_pool_without_hyperthreading_turns_its_threads_off_at_boot(assemblies: dict[str, Assembly]) -> None:
    # ES_SMT_OFF=1 in the env file: the compute user data then runs elastic-slurm-smt-off before slurmd
    assert "ES_SMT_OFF='1'" in json.dumps(_launch_template(assemblies, "Ltcpuc7i")["UserData"])
    for other in ("Ltmlp5", "ControllerLt"):
        assert "ES_SMT_OFF='1'" not in json.dumps(_launch_template(assemblies, other)["UserData"]), other


def test_every_node_role_reads_exactly_the_directorys_bind_secret_and_its_parameter(
    assemblies: dict[str, Assembly],
) -> None:
    policies = _resources(assemblies, "AWS::IAM::Policy")
    reads = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "ReadDirectoryBindPassword"
    ]
    assert len(reads) == 3  # the controllers', the compute and the login role
    secret = "arn:aws:secretsmanager:us-east-1:111122223333:secret:site/ldap-reader-AbCdEf"
    # the ARN as given and with the six characters Secrets Manager appends (a partial ARN names no secret to IAM)
    assert all(
        s["Action"] == "secretsmanager:GetSecretValue" and s["Resource"] == [secret, f"{secret}-??????"] for s in reads
    )
    decrypts = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "DecryptDirectoryBindPassword"
    ]
    assert len(decrypts) == 3 and all(s["Resource"] == KMS_KEY and s["Action"] == "kms:Decrypt" for s in decrypts)
    for prefix in ("ControllerLt", "Ltcpuc7i", "Ltmlp5", "Loginusers"):
        text = json.dumps(_launch_template(assemblies, prefix)["UserData"])
        assert "ES_DIRECTORY_PARAMETER='/elastic-slurm/site/directory'" in text, prefix
    (parameter,) = [
        p["Properties"]
        for p in _resources(assemblies, "AWS::SSM::Parameter").values()
        if p["Properties"].get("Name") == "/elastic-slurm/site/directory"
    ]
    section = json.loads(parameter["Value"])
    assert section["ldap_uri"] == ["ldaps://ldap.site.example"] and section["bind_password_secret_arn"] == secret
