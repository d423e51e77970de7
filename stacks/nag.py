"""cdk-nag (AwsSolutions pack) acknowledgments: every finding we accept, each with the reason it is acceptable.

cdk-nag v3 runs as a CDK policy-validation plugin, so acknowledgments use CDK's `Validations.of(...).acknowledge`.
Ids are the exact finding ids (`AwsSolutions-IAM5[Resource::...]`), never a whole rule, so a new wildcard or
managed policy still fails the synth. `{account}`, `{region}`, `{partition}` and `{cluster}` are filled per stack.
"""

from __future__ import annotations

import aws_cdk as cdk

from stacks.node_policies import SHIPPED_LOG_FILES

SSM_CORE = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]"
EC2 = "arn:{partition}:ec2:{region}:{account}"
ASSET_READ = (
    "AwsSolutions-IAM5[Action::s3:GetBucket*]",
    "AwsSolutions-IAM5[Action::s3:GetObject*]",
    "AwsSolutions-IAM5[Action::s3:List*]",
    "AwsSolutions-IAM5[Resource::arn:{partition}:s3:::cdk-hnb659fds-assets-{account}-{region}/*]",
)

# what tests/security/test_host_iam_scoping.py proves with the IAM evaluator on the synthesized node policies
LOG_STREAMS = [
    (
        f"AwsSolutions-IAM5[Resource::arn:{{partition}}:logs:{{home}}:{{account}}:log-group:/elastic-slurm/{{cluster}}"
        f":log-stream:*/{name}]",
        f"Streams `<instance id>/{name}` of the cluster's own log group (the CloudWatch agent names them after the "
        "instance, unknown until launch); no other group, no other stream name (stacks/node_policies.py).",
    )
    for name in SHIPPED_LOG_FILES
]

ACKNOWLEDGED: dict[str, list[tuple[str, str]]] = {
    "storage": [
        (
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup]",
            "AWS Backup's own service-role policy, maintained by AWS for the backup selection role.",
        ),
    ],
    "images": [
        (
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/EC2InstanceProfileForImageBuilder]",
            "The policy AWS maintains for Image Builder build instances; it tracks the service's needs.",
        ),
        (SSM_CORE, "Image Builder drives build instances through SSM; AWS maintains this policy for that."),
        *[(rule, "CDK's Asset.grantRead: the build instance downloads the node assets zip.") for rule in ASSET_READ],
    ],
    "cluster": [
        (
            "AwsSolutions-SMG4",
            "The munge key is shared by every running node; rotating it would break authentication cluster-wide. "
            "Rotate by redeploying during a maintenance window (docs/deploy.md).",
        ),
        (
            "AwsSolutions-EC29",
            "Controllers are replaceable (state lives on their own EFS) and termination protection "
            "would block `cdk destroy` and the deconfigure order.",
        ),
        (
            "AwsSolutions-EC26",
            "The rule cannot evaluate the SSM-resolved image id; the root volume is encrypted "
            "(asserted by tests/cdk/test_templates.py).",
        ),
        (
            "AwsSolutions-AS3",
            "Login node groups: launches and replacements are in the group's activity history. The cluster's alert "
            "topic is encrypted with a customer key whose policy would have to name Auto Scaling's service-linked "
            "role, which an account does not have before its first Auto Scaling group.",
        ),
        (
            "AwsSolutions-IAM5[Resource::*]",
            "EC2 Describe*, pricing:GetProducts, SSM GetCommandInvocation, the SSM agent's actions (no "
            "GetParameter(s): stacks/node_policies.SSM_AGENT_ACTIONS) and CloudWatch PutMetricData do not "
            "support resource-level permissions; PutMetricData is limited to the ElasticSlurm namespace by a "
            "cloudwatch:namespace condition.",
        ),
        # each reason states what tests/security/test_iam_abuse.py and tests/aws/test_iam_conditions.py prove with
        # the IAM evaluator on the synthesized policy (docs/iam.md, "Launch rules")
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:instance/*]",
            "Instance ids are unknown until launch. RunInstances/CreateFleet require the cluster tag in the request "
            "and one of the pools' instance types (ec2:InstanceType); RunInstances also one of the cluster's launch "
            "templates (ec2:LaunchTemplate). Terminate/SendCommand require the cluster tag on the instance.",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:volume/*]",
            "Created by a launch; ids are unknown until then. RunInstances requires one of the cluster's launch "
            "templates (ec2:LaunchTemplate); CreateFleet has no such key, its instances need the cluster tag and a "
            "pool instance type (docs/iam.md).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:network-interface/*]",
            "Created by a launch; ids are unknown until then. RunInstances requires one of the cluster's launch "
            "templates (ec2:LaunchTemplate) (docs/iam.md).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:fleet/*]",
            "Created by CreateFleet (instant fleets); ids are unknown until launch. The fleet's instances need the "
            "cluster tag and a pool instance type, the resources of its template are authorized as RunInstances "
            "with ec2:LaunchTemplate (docs/iam.md).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:spot-instances-request/*]",
            "Created by spot RunInstances; ids are unknown until launch. The type has no ec2:LaunchTemplate key; the "
            "launch's instance needs a cluster template, the cluster tag and a pool instance type (docs/iam.md).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:subnet/*]",
            "Limited to the cluster's VPCs by an ec2:Vpc condition; RunInstances also to the cluster's launch "
            "templates (ec2:LaunchTemplate).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:security-group/*]",
            "Limited to the cluster's VPCs by an ec2:Vpc condition and to the cluster's launch templates "
            "(ec2:LaunchTemplate).",
        ),
        (
            f"AwsSolutions-IAM5[Resource::{EC2}:placement-group/*]",
            "Placement group names are generated by CloudFormation; RunInstances requires one of the cluster's "
            "launch templates (ec2:LaunchTemplate), CreateFleet a tagged instance of a pool type.",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:ec2:{region}:*:capacity-reservation/*]",
            "Pools may launch into the capacity reservation their config names (pools[].capacity_reservation), "
            "possibly shared from another account; RunInstances requires one of the cluster's launch templates "
            "(ec2:LaunchTemplate).",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:ec2:{region}::image/*]",
            "AMI ids change with every Image Builder run (resolved from SSM at launch): only images owned by this "
            "account (ec2:Owner) and tagged for the cluster (aws:ResourceTag), from one of its launch templates.",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:iam::{account}:role/aws-service-role/spot.amazonaws.com/*]",
            "Only the Spot service-linked role, conditioned on iam:AWSServiceName.",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:ssm:{region}:{account}:parameter/elastic-slurm/{cluster}/*]",
            "Read-only access to this cluster's own parameter path.",
        ),
        (
            "AwsSolutions-IAM5[Resource::<DeconfigureLogs80DFE4CE.Arn>:*]",
            "Log streams of the deconfigure Lambda's own log group.",
        ),
        *LOG_STREAMS,
    ],
    "region": [
        (
            "AwsSolutions-IAM5[Resource::*]",
            "The SSM agent's actions (Session Manager, Run Command; stacks/node_policies.SSM_AGENT_ACTIONS) have no "
            "resource-level permissions; GetParameter(s) is not among them.",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:secretsmanager:{home}:{account}:secret:elastic-slurm/{cluster}/munge-key-*]",
            "The munge key secret by name; Secrets Manager appends a random suffix to every secret ARN.",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:{partition}:ssm:{home}:{account}:parameter/elastic-slurm/{cluster}/*]",
            "Read-only access to this cluster's own parameter path.",
        ),
        *LOG_STREAMS,
    ],
    "accounting": [
        (
            "AwsSolutions-SMG4",
            "slurmdbd reads the password at start; rotation would need a coordinated slurmdbd restart. "
            "Rotate during a maintenance window (docs/deploy.md).",
        ),
        (
            "AwsSolutions-RDS3",
            "Accounting is not on the job path (slurmctld caches records while the DB is away); "
            "single-AZ is the documented cost trade-off of engine `mariadb_instance`.",
        ),
        (
            "AwsSolutions-RDS11",
            "slurmdbd's StoragePort default; the port is reachable only from the cluster members' security group.",
        ),
        ("AwsSolutions-RDS14", "Backtrack is not available for Aurora Serverless v2; point-in-time restore is on."),
    ],
}


def suppress_reviewed_findings(stack: cdk.Stack, kind: str, cluster: str, regions: list[str] | None = None) -> None:
    """Acknowledge the reviewed findings of a stack of `kind` (network, storage, images, cluster, accounting,
    region). Region-specific ids are acknowledged for every region of the cluster (`regions`)."""
    seen: set[str] = set()
    for region in regions or [stack.region]:
        values = {"account": stack.account, "region": region, "partition": "aws", "cluster": cluster}
        values["home"] = (regions or [stack.region])[0]
        for rule, reason in ACKNOWLEDGED.get(kind, []):
            rule_id = f"AwsSolutions::{rule.format(**values)}"
            if rule_id not in seen:
                seen.add(rule_id)
                cdk.Validations.of(stack).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
