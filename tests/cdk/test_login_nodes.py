"""Login nodes in the synthesized templates of tests/cdk/configs/site-customized.yaml (synthesized, cfn-lint-ed and
cdk-nag-ed by the session's synth): one Auto Scaling group per login pool, kept at `count`, replaced one node at a
time, deleted before the deconfigure resource runs; a launch template with the login user data (configless sackd, no
slurmd), the cluster's node and SSH security groups plus the pool's own; a role holding the node statements only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk

CONFIG = "site-customized"


def _resources(assemblies: dict[str, Assembly], kind: str) -> dict[str, dict[str, Any]]:
    resources = assemblies[CONFIG].template_json("es-site-cluster")["Resources"]
    return {lid: r for lid, r in resources.items() if r["Type"] == kind}


def _login_template(assemblies: dict[str, Assembly]) -> dict[str, Any]:
    (data,) = [
        r["Properties"]["LaunchTemplateData"]
        for lid, r in _resources(assemblies, "AWS::EC2::LaunchTemplate").items()
        if lid.startswith("Loginusers")
    ]
    return data


def test_one_group_per_login_pool_kept_at_count_and_rolled_one_at_a_time(assemblies: dict[str, Assembly]) -> None:
    (group,) = _resources(assemblies, "AWS::AutoScaling::AutoScalingGroup").values()
    props = group["Properties"]
    assert props["MinSize"] == props["MaxSize"] == "2"
    assert len(props["VPCZoneIdentifier"]) == 2  # the cluster's subnets, both AZs
    assert {"Key": "Name", "PropagateAtLaunch": True, "Value": "site-login-users"} in props["Tags"]
    rolling = group["UpdatePolicy"]["AutoScalingRollingUpdate"]
    assert rolling["MaxBatchSize"] == 1 and rolling["MinInstancesInService"] == 0
    # deleted (its instances terminated) before the deconfigure resource runs, which would otherwise terminate
    # login nodes the group then relaunches
    (deconfigure,) = _resources(assemblies, "Custom::ElasticSlurmDeconfigure")
    assert deconfigure in group["DependsOn"]
    # launched once the controllers reported healthy (a login node's boot waits only so long for their address)
    (ready,) = _resources(assemblies, "AWS::CloudFormation::WaitCondition")
    assert ready in group["DependsOn"]


def test_the_login_template_boots_sackd_configless_and_no_slurmd(assemblies: dict[str, Assembly]) -> None:
    data = _login_template(assemblies)
    text = json.dumps(data["UserData"])
    assert "systemctl enable --now sackd" in text and "--conf-server $ELASTIC_SLURM_CONF_SERVER" in text
    assert "ES_LOGIN_POOL='users'" in text and "ES_ROLE='login'" in text
    # the controllers' instance ids: a replaced controller is a new launch template version, which rolls the login
    # nodes onto its address (sackd keeps the address it started with)
    (controller,) = _resources(assemblies, "AWS::EC2::Instance")
    assert "ES_CONTROLLER_INSTANCES=" in text and {"Ref": controller} in data["UserData"]["Fn::Base64"]["Fn::Join"][1]
    assert "elastic-slurm-node-bootstrap" not in text  # what starts slurmd on a compute node
    assert "enable --now slurmctld" not in text and "enable --now slurmdbd" not in text
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["ImageId"] == "resolve:ssm:/elastic-slurm/site/ami/x86_64"
    groups = data["SecurityGroupIds"]
    assert "sg-0ccccccccccccccc3" in groups and len(groups) == 3  # nodes, SSH, the pool's own
    (instance_tags,) = [t["Tags"] for t in data["TagSpecifications"] if t["ResourceType"] == "instance"]
    tags = {t["Key"]: t["Value"] for t in instance_tags}
    assert tags["elastic-slurm:role"] == "login" and tags["elastic-slurm:login-pool"] == "users"
    assert "elastic-slurm:pool" not in tags  # not a Slurm node: the plugin and the cluster manager leave it alone


def test_the_login_role_holds_the_node_statements_and_nothing_of_ec2(assemblies: dict[str, Assembly]) -> None:
    policies = _resources(assemblies, "AWS::IAM::Policy")

    def statements(prefix: str) -> list[dict[str, Any]]:
        (policy,) = [p for lid, p in policies.items() if lid.startswith(prefix)]
        return list(policy["Properties"]["PolicyDocument"]["Statement"])

    login, compute = statements("LoginRole"), statements("ComputeRole")
    # the same node statements, but the log streams: a login node ships no log file (LOG_FILES_BY_ROLE)
    logs = {"CreateClusterLogStreams", "WriteClusterLogs"}
    assert not logs & {s["Sid"] for s in login}
    assert sorted(s["Sid"] for s in login) == sorted(s["Sid"] for s in compute if s["Sid"] not in logs)
    actions = [a for s in login for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    assert not [a for a in actions if a.startswith("ec2:")]
    (profile,) = [
        p for lid, p in _resources(assemblies, "AWS::IAM::InstanceProfile").items() if lid.startswith("Login")
    ]
    assert profile["Properties"]["Roles"][0]["Ref"].startswith("LoginRole")
