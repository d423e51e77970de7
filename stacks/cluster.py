"""Cluster stack: controllers, compute launch templates and roles, munge key, events/monitoring, deconfigure.

Controllers (1, or 2 in different AZs for SlurmctldHost primary/backup, StateSaveLocation on their own file
system, stacks/storage.py) and compute nodes boot the Image Builder AMI resolved from SSM at launch. Compute nodes are launched by the
power-save plugin from the per-pool launch templates (IMDSv2 required, instance metadata tags on, encrypted EBS).
What the plugin needs (subnets, launch template ids, placement groups) is published as the `DeployedInfra` JSON in
SSM (`naming.deployed_infra_parameter`); the controller bootstrap reads it and runs `elastic-slurm render`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cluster_config.checks import architecture_of, pool_azs, region_of_az
from cluster_config.model import Cluster, NewNetwork, Partition, Pool
from slurm_plugin.exporter import EXPORTER_PORT
from slurm_plugin.render.sssd import section_json
from stacks.budget import ClusterBudget
from stacks.deconfigure import Deconfigure
from stacks.iam_policies import ArnScope, RegionTarget, fleet_statements, to_cdk
from stacks.launch_templates import (
    ROOT_VOLUME_GIB,
    add_managed_policies,
    extra_security_groups,
    pool_launch_template,
    root_volume,
    user_data,
)
from stacks.login_nodes import LoginNodes
from stacks.monitoring import ClusterMonitoring
from stacks.naming import (
    CONF_SERVER_PENDING,
    TAG_ROLE,
    ami_parameter,
    conf_server_parameter,
    config_url_parameter,
    deployed_infra_parameter,
    directory_parameter,
    image_flavor,
    launch_template_key,
    log_group_name,
    munge_secret_name,
)
from stacks.network import ClusterSecurityGroups
from stacks.node_policies import (
    LOG_FILES_BY_ROLE,
    ControllerResources,
    controller_statements,
    custom_action_objects,
    munge_secret_pattern,
    node_statements,
)
from stacks.region import RegionStack
from stacks.user_data import actions_values, directory_values, node_names_values

# How long stack creation waits for the controllers' healthy signal: the boot waits up to 10 min for a peer
# controller's instance, 10-15 min for slurmdbd, 5 min for slurmctld (stacks/user_data.py).
BOOT_TIMEOUT_S = 2400


# the kind of host each node role is for (LOG_FILES_BY_ROLE: the log streams it writes)
_ROLE_KIND = {"ControllerRole": "controller", "ComputeRole": "compute", "LoginRole": "login"}


class ClusterStack(cdk.Stack):
    """Everything that runs Slurm for one cluster."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: Cluster,
        config_path: Path,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        security_groups: ClusterSecurityGroups,
        mounts_parameter: ssm.IStringParameter,
        file_system_arns: list[str],
        controller_mounts_parameter: ssm.IStringParameter,
        controller_state_arn: str,
        mount_points: list[str],
        database_secret: secretsmanager.ISecret | None = None,
        database_endpoint: str | None = None,
        existing_database_secret_arn: str | None = None,
        remote_regions: list[RegionStack] | None = None,
        munge_owner: str | None = None,
        munge_replica_regions: tuple[str, ...] = (),
        accounting: bool = False,
        license_schedules: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if database_secret is None and existing_database_secret_arn:
            database_secret = secretsmanager.Secret.from_secret_complete_arn(
                self, "ExistingDbSecret", existing_database_secret_arn
            )
        self.cluster = cluster
        self.remote_regions = remote_regions or []
        self._subnets = {s.availability_zone: s for s in subnets}
        self._sg = security_groups
        self._vpc = vpc
        self.munge_key = self._munge_key(munge_owner, munge_replica_regions)
        self.log_group = logs.LogGroup(
            self,
            "SlurmLogs",
            log_group_name=log_group_name(cluster.name),
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self._env = env = {
            "ES_CLUSTER": cluster.name,
            "ES_REGION": self.region,
            "ES_MUNGE_SECRET": self._munge_secret_id,
            "ES_MOUNTS_PARAMETER": mounts_parameter.parameter_name,
            "ES_LOG_GROUP": self.log_group.log_group_name,
            "ES_CONF_SERVER_PARAMETER": conf_server_parameter(cluster.name),
            **directory_values(cluster),
            **node_names_values(cluster),
        }
        # the controllers write their addresses here (CloudFormation creates it, so a delete removes it)
        self.conf_server = ssm.StringParameter(
            self,
            "ConfServer",
            parameter_name=conf_server_parameter(cluster.name),
            description=f"slurmd --conf-server argument of {cluster.name} (written by its controllers)",
            string_value=CONF_SERVER_PENDING,
        )
        # The config reaches the controllers as data: the parameter names the (content-addressed) object, so an edit
        # changes the parameter's value and not the controllers' user data (no replacement); the controllers apply
        # it in place (assets/bootstrap/elastic-slurm-config-apply, slurm-config-sync.timer).
        self.config_asset = s3_assets.Asset(self, "Config", path=str(config_path))
        self.config_url = ssm.StringParameter(
            self,
            "ConfigUrl",
            parameter_name=config_url_parameter(cluster.name),
            description=f"S3 URL of the cluster config object of {cluster.name} (read by its controllers)",
            string_value=self.config_asset.s3_object_url,
        )
        if cluster.directory is not None:  # every node reads it at boot (assets/bootstrap/elastic-slurm-directory)
            ssm.StringParameter(
                self,
                "Directory",
                parameter_name=directory_parameter(cluster.name),
                description=f"LDAP directory section of {cluster.name} (JSON; the nodes' SSSD)",
                string_value=section_json(cluster.directory),
            )
        self.compute_role = self._node_role("ComputeRole", file_system_arns)
        add_managed_policies(self, self.compute_role, "Compute", cluster.iam_policies.compute)
        self.compute_profile = iam.InstanceProfile(self, "ComputeProfile", role=self.compute_role)
        self.launch_templates: dict[str, ec2.LaunchTemplate] = {}
        self.placement_groups: dict[str, ec2.PlacementGroup] = {}
        for partition in cluster.partitions:
            for pool in partition.pools:
                self._pool(partition, pool)
        # the controllers alone mount their own file system (Slurm's state: slurm_plugin/controller_state.py)
        self._controller_mounts = controller_mounts_parameter.parameter_name
        self.controller_role = self._node_role("ControllerRole", [*file_system_arns, controller_state_arn])
        add_managed_policies(self, self.controller_role, "Controller", cluster.iam_policies.controller)
        self.controller_profile = iam.InstanceProfile(self, "ControllerProfile", role=self.controller_role)
        # the controller may launch only the pools' instance types, from the cluster's images or a pool's ami_id
        pools = [p for part in cluster.partitions for p in part.pools]
        types = tuple(sorted({t for p in pools for t in p.instance_types}))
        home = RegionTarget(
            self.region,
            vpc.vpc_id,
            [lt.launch_template_id or "" for lt in self.launch_templates.values()],
            self.compute_role.role_arn,
            types,
            tuple(sorted({p.ami_id for p in pools if p.ami_id is not None})),
        )
        remote = [
            RegionTarget(
                r.region,
                r.vpc_id,
                [lt.launch_template_id or "" for lt in r.launch_templates.values()],
                r.compute_role.role_arn,
                types,
            )
            for r in self.remote_regions
        ]
        scope = ArnScope(self.partition, self.account, self.region)
        for statement in to_cdk(fleet_statements(scope, cluster.name, [home, *remote])):
            self.controller_role.add_to_policy(statement)
        infra = self._deployed_infra()  # read through ReadClusterParameters (node_statements)
        # the slurmdbd and license-sync alarms exist only where the exporter reports those (config-wide settings)
        self.monitoring = ClusterMonitoring(
            self, "Monitoring", cluster=cluster.name, accounting=accounting, license_schedules=license_schedules
        )
        if cluster.budget is not None:  # the monthly cost budget alerts on the same topic (stacks/budget.py)
            topic, key = self.monitoring.topic, self.monitoring.alerts_key
            ClusterBudget(self, "Budget", cluster=cluster.name, budget=cluster.budget, topic=topic, key=key)
        resources = ControllerResources(
            config_object_arn=f"{self.config_asset.bucket.bucket_arn}/{self.config_asset.s3_object_key}",
            database_secret_arn=database_secret.secret_arn if database_secret is not None else None,
            events_queue_arn=self.monitoring.queue.queue_arn,
            alerts_topic_arn=self.monitoring.topic.topic_arn,
            alerts_key_arn=self.monitoring.alerts_key.key_arn,
            conf_server_parameter_arn=self.conf_server.parameter_arn,
        )
        for statement in to_cdk(controller_statements(resources)):
            self.controller_role.add_to_policy(statement)
        # a new config object becomes readable (the policy names it) before the parameter points the controllers at it
        self.config_url.node.add_dependency(self.controller_role)
        # Creation waits until each controller reports healthy (slurmctld, slurmdbd when accounting is on, the
        # cluster manager) or fails with the reason its boot sends (the failing step and its last output lines).
        # One wait condition per controller: adding a backup controller later creates its own and leaves the
        # primary's user data (which names its handle) unchanged.
        self.controllers = []
        self.controllers_ready: list[cdk.CfnWaitCondition] = []
        for index in range(cluster.controller.count):
            handle = cdk.CfnWaitConditionHandle(self, f"Controller{index}ReadyHandle")
            controller = self._controller(index, env, infra, database_secret, database_endpoint, handle.ref)
            ready = cdk.CfnWaitCondition(
                self, f"Controller{index}Ready", count=1, handle=handle.ref, timeout=str(BOOT_TIMEOUT_S)
            )
            ready.add_dependency(controller)
            self.controllers.append(controller)
            self.controllers_ready.append(ready)
        self.monitoring.watch_controllers([c.ref for c in self.controllers], ready=self.controllers_ready)
        self.login_nodes = self._login_nodes(file_system_arns)
        regions = [self.region, *(r.region for r in self.remote_regions)]
        self.deconfigure = Deconfigure(
            self, "Deconfigure", cluster=cluster.name, mount_points=mount_points, regions=regions
        )
        self._peering_routes(subnets)
        # Delete order: controllers first (slurmctld and the cluster manager stop, so nothing relaunches a node),
        # then the deconfigure resource terminates the compute nodes, then everything they used.
        self.deconfigure.run_after_deleting(*self.controllers, *(login.group for login in self.login_nodes))
        self.deconfigure.run_before_deleting(
            *self.launch_templates.values(),
            *self.placement_groups.values(),
            self.compute_role,
            self.compute_profile,
            self.controller_role,
            self.controller_profile,
            self.log_group,
        )
        if isinstance(self.munge_key, secretsmanager.Secret):
            self.deconfigure.run_before_deleting(self.munge_key)
        cdk.CfnOutput(self, "EventsQueueUrl", value=self.monitoring.queue.queue_url)
        cdk.CfnOutput(self, "AlertsTopicArn", value=self.monitoring.topic.topic_arn)

    def _munge_key(self, owner: str | None, replica_regions: tuple[str, ...]) -> secretsmanager.ISecret:
        """This cluster's munge key, replicated to `replica_regions` (federation members elsewhere); or, with an
        `owner` (a federation member), the owner's key read by name: every member authenticates with one key."""
        if owner is not None:
            self._munge_secret_id = munge_secret_name(owner)  # the owner's secret, or its replica in this region
            scope = ArnScope(self.partition, self.account, self.region)
            self._munge_policy_arn = munge_secret_pattern(scope, owner)  # by name: the ARN's suffix is unknown here
            return secretsmanager.Secret.from_secret_name_v2(self, "MungeKey", self._munge_secret_id)
        key = secretsmanager.Secret(
            self,
            "MungeKey",
            secret_name=munge_secret_name(self.cluster.name),
            description=f"munge key of Slurm cluster {self.cluster.name}",
            generate_secret_string=secretsmanager.SecretStringGenerator(password_length=128, exclude_punctuation=True),
            replica_regions=[secretsmanager.ReplicaRegion(region=r) for r in replica_regions],
        )
        self._munge_secret_id = key.secret_arn
        self._munge_policy_arn = key.secret_arn
        return key

    def _node_role(self, construct_id: str, file_system_arns: list[str]) -> iam.Role:
        """Role of the controllers or of the compute and login nodes: the SSM agent, logs, munge key, shared file
        systems, parameters (stacks/node_policies.py; no AWS-managed policy)."""
        role = iam.Role(
            self,
            construct_id,
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        )
        scope = ArnScope(self.partition, self.account, self.region)
        regions = [self.region, *(r.region for r in self.cluster.remote_regions)]
        actions = custom_action_objects(scope, self.cluster)
        statements = node_statements(
            scope,
            self.cluster.name,
            regions,
            self._munge_policy_arn,
            file_system_arns,
            action_objects=actions,
            directory=self.cluster.directory,
            log_files=LOG_FILES_BY_ROLE[_ROLE_KIND[construct_id]],  # each role writes only its own log streams
        )
        for statement in to_cdk(statements):
            role.add_to_policy(statement)
        return role

    def _pool(self, partition: Partition, pool: Pool) -> None:
        key = f"{partition.name}-{pool.name}"
        placement_group = None
        if pool.placement_group:
            placement_group = ec2.PlacementGroup(self, f"Pg-{key}", strategy=ec2.PlacementGroupStrategy.CLUSTER)
            self.placement_groups[key] = placement_group
        if not any(region_of_az(az) == self.region for az in pool_azs(self.cluster, pool)):
            return  # every AZ of the pool is remote: its templates live in the region stacks
        self.launch_templates[launch_template_key(partition.name, pool.name, self.region)] = pool_launch_template(
            self,
            cluster=self.cluster.name,
            partition=partition.name,
            pool=pool,
            profile=self.compute_profile,
            security_group=self._sg.compute,
            boot_env=self._env,
            placement_group=placement_group,
            base_os=self.cluster.images.base_os,
            home_region=self.cluster.region,
        )

    def _controller(
        self,
        index: int,
        env: dict[str, str],
        infra: ssm.StringParameter,
        database_secret: secretsmanager.ISecret | None,
        database_endpoint: str | None,
        signal_url: str,
    ) -> ec2.CfnInstance:
        azs = list(self._subnets)
        subnet = self._subnets[azs[index % len(azs)]]  # the backup controller goes to the second AZ
        flavor = image_flavor(architecture_of(self.cluster.controller.instance_type), False)
        extra = {
            "ES_MOUNTS_PARAMETER": self._controller_mounts,  # the shared file systems and the controllers' own
            "ES_CONTROLLER_INDEX": str(index),
            "ES_DEPLOYED_INFRA": infra.parameter_name,
            "ES_CONFIG_PARAMETER": self.config_url.parameter_name,
            "ES_EVENTS_QUEUE": self.monitoring.queue.queue_url,
            "ES_ALERTS_TOPIC": self.monitoring.topic.topic_arn,
            # the metrics exporter (assets/systemd/slurm-exporter.service, docs/observability.md)
            "ES_EXPORTER_LISTEN": f"0.0.0.0:{EXPORTER_PORT}",  # admitted from the monitoring group only
            # series by user and account only when the config asks (slurm_plugin/exporter/main.py)
            "ES_EXPORTER_PER_USER_SERIES": "1" if self.cluster.controller.exporter_per_user_series else "0",
            "ES_CLOUDWATCH_INTERVAL": "60",
        }
        if database_secret is not None and database_endpoint is not None:
            extra |= {"ES_DB_SECRET": database_secret.secret_arn, "ES_DB_ENDPOINT": database_endpoint}
        extra |= actions_values(self.cluster.controller.custom_actions)
        template = ec2.LaunchTemplate(
            self,
            f"ControllerLt{index}",
            machine_image=ec2.MachineImage.resolve_ssm_parameter_at_launch(ami_parameter(self.cluster.name, flavor)),
            instance_type=ec2.InstanceType(self.cluster.controller.instance_type),
            instance_profile=self.controller_profile,
            security_group=self._sg.controllers,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,  # IMDSv2 only
            http_endpoint=True,
            http_put_response_hop_limit=1,
            instance_metadata_tags=True,
            detailed_monitoring=True,
            block_devices=[root_volume(ROOT_VOLUME_GIB["controller"], self.cluster.images.base_os)],
            user_data=user_data("controller", {**env, **extra}, signal_url),
        )
        template.connections.add_security_group(self._sg.ssh)
        extra_security_groups(self, template, f"Controller{index}", self.cluster.controller.security_groups)
        # L1 on purpose: ec2.Instance cannot launch from a launch template, and only a launch template may carry
        # `resolve:ssm:` as image id — so a new AMI never replaces a running controller.
        instance = ec2.CfnInstance(
            self,
            f"Controller{index}",
            launch_template=ec2.CfnInstance.LaunchTemplateSpecificationProperty(
                launch_template_id=template.launch_template_id, version=template.latest_version_number
            ),
            subnet_id=subnet.subnet_id,
            monitoring=True,
            tags=[cdk.CfnTag(key="Name", value=f"{self.cluster.name}-controller-{index}")],
        )
        cdk.Tags.of(instance).add(TAG_ROLE, "controller")
        cdk.Tags.of(template).add(TAG_ROLE, "controller")
        return instance

    def _login_nodes(self, file_system_arns: list[str]) -> list[LoginNodes]:
        """The login pools (stacks/login_nodes.py), with a role of their own holding the node statements, launched
        once the controllers reported healthy and rolled when a controller is replaced (their boot env names the
        controllers' instance ids: sackd keeps the controllers' address it started with)."""
        if not self.cluster.login_nodes:
            return []
        role = self._node_role("LoginRole", file_system_arns)
        add_managed_policies(self, role, "Login", self.cluster.iam_policies.login)
        profile = iam.InstanceProfile(self, "LoginProfile", role=role)
        return [
            LoginNodes(
                self,
                f"Login-{pool.name}",
                cluster=self.cluster.name,
                pool=pool,
                base_os=self.cluster.images.base_os,
                vpc=self._vpc,
                subnets=list(self._subnets.values()),
                profile=profile,
                security_groups=[self._sg.login, self._sg.ssh],
                boot_env={**self._env, "ES_CONTROLLER_INSTANCES": ",".join(c.ref for c in self.controllers)},
                after=self.controllers_ready,
            )
            for pool in self.cluster.login_nodes
        ]

    def _peering_routes(self, subnets: list[ec2.ISubnet]) -> None:
        """Home-side routes to every remote region's VPC through its peering connection."""
        if not isinstance(self.cluster.network, NewNetwork):
            return  # imported subnets: their route tables are the operator's (docs/deploy.md)
        for remote in self.remote_regions:
            for cidr_index, cidr in enumerate(remote.cidrs):
                for index, subnet in enumerate(subnets):
                    ec2.CfnRoute(
                        self,
                        f"To{remote.region.replace('-', '')}{cidr_index}x{index}",
                        route_table_id=subnet.route_table.route_table_id,
                        destination_cidr_block=cidr,
                        vpc_peering_connection_id=remote.peering.ref,
                    )

    def _deployed_infra(self) -> ssm.StringParameter:
        """`slurm_plugin.manifest.DeployedInfra` as JSON, with CloudFormation filling in the ids."""
        subnets = {az: subnet.subnet_id for az, subnet in self._subnets.items()}
        templates = {k: lt.launch_template_id for k, lt in self.launch_templates.items()}
        for remote in self.remote_regions:
            subnets |= remote.subnets
            templates |= {k: lt.launch_template_id for k, lt in remote.launch_templates.items()}
        data = {
            "subnets": subnets,
            "launch_templates": templates,
            "placement_groups": {k: pg.placement_group_name for k, pg in self.placement_groups.items()},
        }
        return ssm.StringParameter(
            self,
            "DeployedInfra",
            parameter_name=deployed_infra_parameter(self.cluster.name),
            description=f"Ids the controller of {self.cluster.name} renders its runtime manifest from (JSON)",
            string_value=self.to_json_string(data),
            tier=ssm.ParameterTier.INTELLIGENT_TIERING,
        )
