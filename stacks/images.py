"""Images stack: EC2 Image Builder components, one recipe per image flavor (architecture x GPU), pipelines on the
configured schedule, and an image built on deploy. Every build writes its AMI id to an SSM parameter
(`naming.ami_parameter`) which the launch templates resolve at launch, so a new image rolls out without a redeploy.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_imagebuilder as imagebuilder
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from cluster_config.checks import architecture_of
from cluster_config.model import Cluster
from cluster_config.os_support import OS_SUPPORT, ssm_agent_url
from stacks.image_source import ASSETS_NOT_SHIPPED
from stacks.naming import TAG_CLUSTER, ami_parameter, image_flavor, root_device
from stacks.project import ASSETS_DIR, stage_project_source

ASSETS = ASSETS_DIR / "imagebuilder"  # assets/ of the checkout, or of a pip-installed package (stacks/project.py)
BUILD_INSTANCE = {"x86_64": "c7i.2xlarge", "arm64": "c7g.2xlarge"}
# The recipe's working directory: Image Builder's clean-up script looks for `perform_cleanup` there.
WORKING_DIRECTORY = "/tmp"


def needed_flavors(cluster: Cluster) -> list[tuple[str, bool]]:
    """(architecture, gpu) pairs the controller, the pools and the login pools need, in a stable order."""
    flavors = {(architecture_of(cluster.controller.instance_type), False)}
    flavors |= {(architecture_of(login.instance_type), False) for login in cluster.login_nodes}
    for partition in cluster.partitions:
        for pool in partition.pools:
            flavors.add((architecture_of(pool.instance_types[0]), pool.gpu is not None))
    return sorted(flavors)


def ssm_user_data(base_os: str, arch: str, region: str) -> str | None:
    """The build instance's user data where neither the base image nor Image Builder brings the SSM agent
    (`ssm_agent: user-data` in cluster_config/os_support.py: Debian, Rocky Linux); None keeps Image Builder's own.

    Image Builder runs every component through the agent, so without it the build never starts. A user data override
    replaces Image Builder's user data, which also asks for its clean-up script before the snapshot: "include a command
    in your user data that creates an empty file named perform_cleanup" in the recipe's working directory
    (https://docs.aws.amazon.com/imagebuilder/latest/userguide/security-best-practices.html,
    https://docs.aws.amazon.com/imagebuilder/latest/APIReference/API_AdditionalInstanceConfiguration.html)."""
    entry = OS_SUPPORT[base_os]
    if entry.ssm_agent != "user-data":
        return None
    url = ssm_agent_url(base_os, arch, region)
    install = (
        ['curl -fsSLo "$work/amazon-ssm-agent.deb" "$url"', 'dpkg -i "$work/amazon-ssm-agent.deb"']
        if entry.package_manager == "apt"
        else ['dnf install -y "$url"']
    )
    return "\n".join(
        [
            "#!/bin/bash",
            "# elastic-slurm: replaces Image Builder's user data (stacks/images.py ssm_user_data)",
            "set -euo pipefail",
            f"touch {WORKING_DIRECTORY}/perform_cleanup",
            f"url={url}",
            "if ! command -v amazon-ssm-agent >/dev/null; then",
            "  work=$(mktemp -d)",
            *(f"  {command}" for command in install),
            '  rm -rf "$work"',
            "fi",
            "systemctl enable --now amazon-ssm-agent",
            "",
        ]
    )


def parent_image(base_os: str, arch: str) -> str:
    """Image Builder parent image of a base OS: a public SSM parameter, an AWS-managed image, or (Rocky, which
    publishes none) an SSM parameter the operator sets once, see docs/deploy.md."""
    short = {"x86_64": "x86", "arm64": "arm64"}[arch]
    deb = {"x86_64": "amd64", "arm64": "arm64"}[arch]
    return {
        "debian13": f"ssm:/aws/service/debian/release/13/latest/{deb}",
        "al2023": f"ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-{arch}",
        "ubuntu2204": f"ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/{deb}/hvm/ebs-gp2/ami-id",
        "ubuntu2404": f"ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/{deb}/hvm/ebs-gp3/ami-id",
        "rhel9": f"arn:aws:imagebuilder:{{region}}:aws:image/red-hat-enterprise-linux-9-{short}/x.x.x",
        "rocky9": f"ssm:/elastic-slurm/base-ami/rocky9-{arch}",
    }[base_os]


@functools.cache
def staged_project_source() -> Path:
    """The project source the image build pip-installs, staged once per process (removed at exit): the same files
    from a checkout and from a pip-installed package, hence the same asset hash."""
    staging = Path(tempfile.mkdtemp(prefix="elastic-slurm-source-"))
    atexit.register(shutil.rmtree, staging, ignore_errors=True)
    return stage_project_source(staging / "source")


# Bumped whenever the recipe's own settings below change (they are not among _version's inputs otherwise).
RECIPE_REVISION = "3: SSM agent from the user data where Image Builder does not install it; working directory /tmp"


def _version(*texts: str) -> str:
    """A semantic version that changes whenever the content does (Image Builder versions are immutable)."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    return f"1.0.{int(digest[:7], 16)}"


class ImagesStack(cdk.Stack):
    """Image Builder pipelines of one cluster."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: Cluster,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.parameter_names: dict[str, str] = {}
        slurm_data = (ASSETS / "slurm.yaml").read_text(encoding="utf-8")
        gpu_data = (ASSETS / "gpu.yaml").read_text(encoding="utf-8")
        platform = "Linux"
        self.slurm_component = imagebuilder.CfnComponent(
            self,
            "SlurmComponent",
            name=f"{cluster.name}-slurm",
            platform=platform,
            version=_version(slurm_data),
            data=slurm_data,
        )
        self.gpu_component = imagebuilder.CfnComponent(
            self,
            "GpuComponent",
            name=f"{cluster.name}-gpu",
            platform=platform,
            version=_version(gpu_data),
            data=gpu_data,
        )
        role = iam.Role(
            self,
            "BuilderRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("EC2InstanceProfileForImageBuilder"),
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore"),
            ],
        )
        # assets/ (the component's build steps in image-build/, bootstrap, health checks, prolog, units) travels to
        # the build instance as a CDK asset; the component YAMLs themselves stay out.
        self.node_assets = s3_assets.Asset(
            self, "NodeAssets", path=str(ASSETS.parent), exclude=list(ASSETS_NOT_SHIPPED)
        )
        self.node_assets.grant_read(role)
        # The elastic-slurm package itself: the component pip-installs this source tree (pyproject.toml,
        # requirements.txt and the node-side packages, stacks/project.py), staged from this installation.
        self.project_source = s3_assets.Asset(self, "ProjectSource", path=str(staged_project_source()))
        self.project_source.grant_read(role)
        profile = iam.CfnInstanceProfile(self, "BuilderProfile", roles=[role.role_name])
        builder_sg = ec2.SecurityGroup(
            self, "BuilderSg", vpc=vpc, description="Image Builder build instances (egress only)"
        )
        for arch, gpu in needed_flavors(cluster):
            self._flavor(cluster, arch, gpu, profile, builder_sg, subnets[0], slurm_data, gpu_data)

    def _flavor(
        self,
        cluster: Cluster,
        arch: str,
        gpu: bool,
        profile: iam.CfnInstanceProfile,
        builder_sg: ec2.ISecurityGroup,
        subnet: ec2.ISubnet,
        slurm_data: str,
        gpu_data: str,
    ) -> None:
        flavor = image_flavor(arch, gpu)
        cid = flavor.replace("_", "").replace("-", "").title()
        source = cluster.images.source()
        parameters = {
            "SlurmVersion": cluster.images.slurm_version,
            "SlurmSourceUrl": source.url,
            "SlurmSourceSha256": source.sha256,
            "AssetsS3Uri": self.node_assets.s3_object_url,
            "SourceS3Uri": self.project_source.s3_object_url,
        }
        components = [
            imagebuilder.CfnImageRecipe.ComponentConfigurationProperty(
                component_arn=self.slurm_component.attr_arn,
                parameters=[
                    imagebuilder.CfnImageRecipe.ComponentParameterProperty(name=name, value=[value])
                    for name, value in parameters.items()
                ],
            )
        ]
        if gpu:
            components.append(
                imagebuilder.CfnImageRecipe.ComponentConfigurationProperty(component_arn=self.gpu_component.attr_arn)
            )
        user_data = ssm_user_data(cluster.images.base_os, arch, self.region)
        recipe = imagebuilder.CfnImageRecipe(
            self,
            f"Recipe{cid}",
            name=f"{cluster.name}-{flavor}",
            version=_version(
                slurm_data,
                gpu_data if gpu else "",
                cluster.images.slurm_version,
                source.sha256,
                cluster.images.base_os,
                self.node_assets.asset_hash,
                self.project_source.asset_hash,
                RECIPE_REVISION,
            ),
            parent_image=parent_image(cluster.images.base_os, arch).replace("{region}", self.region),
            components=components,
            working_directory=WORKING_DIRECTORY,
            # Image Builder removes an SSM agent it installed for the build unless told not to; the nodes need it
            # (Session Manager: `elastic-slurm connect`, the AmazonSSMManagedInstanceCore policy they hold).
            additional_instance_configuration=imagebuilder.CfnImageRecipe.AdditionalInstanceConfigurationProperty(
                systems_manager_agent=imagebuilder.CfnImageRecipe.SystemsManagerAgentProperty(
                    uninstall_after_build=False
                ),
                user_data_override=cdk.Fn.base64(user_data) if user_data else None,
            ),
            block_device_mappings=[
                imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty(
                    device_name=root_device(cluster.images.base_os),
                    ebs=imagebuilder.CfnImageRecipe.EbsInstanceBlockDeviceSpecificationProperty(
                        volume_size=100 if gpu else 40, volume_type="gp3", encrypted=True, delete_on_termination=True
                    ),
                )
            ],
        )
        infra = imagebuilder.CfnInfrastructureConfiguration(
            self,
            f"Infra{cid}",
            name=f"{cluster.name}-{flavor}",
            instance_profile_name=profile.ref,
            instance_types=[BUILD_INSTANCE[arch]],
            subnet_id=subnet.subnet_id,
            security_group_ids=[builder_sg.security_group_id],
            terminate_instance_on_failure=True,
            instance_metadata_options=imagebuilder.CfnInfrastructureConfiguration.InstanceMetadataOptionsProperty(
                http_tokens="required", http_put_response_hop_limit=2
            ),
        )
        parameter = ami_parameter(cluster.name, flavor)
        self.parameter_names[flavor] = parameter
        distribution = imagebuilder.CfnDistributionConfiguration(
            self,
            f"Distribution{cid}",
            name=f"{cluster.name}-{flavor}",
            distributions=[
                imagebuilder.CfnDistributionConfiguration.DistributionProperty(
                    region=region,
                    ami_distribution_configuration={
                        "Name": f"elastic-slurm-{cluster.name}-{flavor}-{{{{ imagebuilder:buildDate }}}}",
                        # the controller may launch only the account's images with this tag (stacks/iam_policies.py)
                        "AmiTags": {TAG_CLUSTER: cluster.name, "elastic-slurm:flavor": flavor},
                    },
                    # Image Builder writes the new AMI id here; launch templates resolve it at launch time.
                    ssm_parameter_configurations=[
                        imagebuilder.CfnDistributionConfiguration.SsmParameterConfigurationProperty(
                            parameter_name=parameter, data_type="aws:ec2:image"
                        )
                    ],
                )
                for region in [self.region, *(r.region for r in cluster.remote_regions)]
            ],
        )
        tests = imagebuilder.CfnImagePipeline.ImageTestsConfigurationProperty(
            image_tests_enabled=True, timeout_minutes=60
        )
        schedule = None
        if cluster.images.rebuild_schedule:
            schedule = imagebuilder.CfnImagePipeline.ScheduleProperty(
                schedule_expression=cluster.images.rebuild_schedule,
                pipeline_execution_start_condition="EXPRESSION_MATCH_ONLY",
            )
        imagebuilder.CfnImagePipeline(
            self,
            f"Pipeline{cid}",
            name=f"{cluster.name}-{flavor}",
            image_recipe_arn=recipe.attr_arn,
            infrastructure_configuration_arn=infra.attr_arn,
            distribution_configuration_arn=distribution.attr_arn,
            image_tests_configuration=tests,
            schedule=schedule,
            status="ENABLED",
        )
        # One build during `cdk deploy`, so the AMI parameter exists before the cluster stack launches anything.
        imagebuilder.CfnImage(
            self,
            f"Image{cid}",
            image_recipe_arn=recipe.attr_arn,
            infrastructure_configuration_arn=infra.attr_arn,
            distribution_configuration_arn=distribution.attr_arn,
            image_tests_configuration=imagebuilder.CfnImage.ImageTestsConfigurationProperty(
                image_tests_enabled=True, timeout_minutes=60
            ),
        )
