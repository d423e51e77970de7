"""Events and monitoring of one cluster: EventBridge rules → SQS queue the cluster manager reads (spot interruption
warnings, rebalance recommendations, instance state changes to the states it acts on, scheduled events), an SNS topic for operator alerts,
CloudWatch alarms on the queue, the controllers and the exporter's metrics (stacks/cluster_alarms.py), and a dashboard.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from slurm_plugin.manager.model import GONE_INSTANCE_STATES
from stacks.cluster_alarms import ClusterHealthAlarms

EC2_EVENTS = {
    "SpotInterruption": ["EC2 Spot Instance Interruption Warning"],
    "Rebalance": ["EC2 Instance Rebalance Recommendation"],
    "StateChange": ["EC2 Instance State-change Notification"],
}
# What EventBridge can filter on: an EC2 event carries the instance id and, for a state change, the new state — no
# tags, no launch template, nothing naming the cluster
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instance-state-changes.html), and instance ids are
# not known when the rule is made. So no rule can select one cluster's instances: every cluster's queue receives the
# events of every instance of the account in its regions, and the cluster manager drops those of instances no node of
# its own runs on (slurm_plugin/manager/events.py). What a rule can drop is what no manager acts on: state changes to
# `pending` and `running` (half of every instance's state changes); the manager acts only on GONE_INSTANCE_STATES.
EC2_EVENT_DETAIL = {"StateChange": {"state": sorted(GONE_INSTANCE_STATES)}}


def ec2_event_patterns() -> dict[str, events.EventPattern]:
    """One pattern per EC2_EVENTS kind, narrowed to what the cluster manager acts on (EC2_EVENT_DETAIL)."""
    return {
        name: events.EventPattern(source=["aws.ec2"], detail_type=types, detail=EC2_EVENT_DETAIL.get(name))
        for name, types in EC2_EVENTS.items()
    }


# What CloudWatch needs of the alert topic's key to publish an alarm's notification to the encrypted topic
# (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
ALARMS_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey*"]


def alarms_use_key_statement(stack: cdk.Stack) -> iam.PolicyStatement:
    """The key policy statement letting CloudWatch use the alert key for this account's alarms of the stack's region
    only (`aws:SourceAccount`, `aws:SourceArn`): without them any account's alarm naming the topic could use the key
    (the confused-deputy problem, https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html)."""
    return iam.PolicyStatement(
        sid="CloudWatchAlarmsOfThisAccount",
        principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
        actions=ALARMS_KEY_ACTIONS,
        resources=["*"],  # in a key policy: this key
        conditions={
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"},
        },
    )


class ClusterMonitoring(Construct):
    """Queue, rules, topic, alarms and dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: str,
        accounting: bool = False,
        license_schedules: Sequence[str] = (),
    ) -> None:
        """`accounting`: the cluster has slurmdbd (its alarm); `license_schedules`: the `sync_schedule`s of the synced
        licenses (the license-sync alarm, stacks/cluster_alarms.py)."""
        super().__init__(scope, construct_id)
        dlq = sqs.Queue(
            self,
            "EventsDlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        self.queue = sqs.Queue(
            self,
            "Events",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.hours(6),  # stale EC2 events are useless to the manager
            dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5),
        )
        for name, pattern in ec2_event_patterns().items():
            events.Rule(
                self,
                name,
                description=f"{cluster}: {EC2_EVENTS[name][0]} to the cluster manager queue",
                event_pattern=pattern,
                targets=[targets.SqsQueue(self.queue)],
            )
        events.Rule(
            self,
            "ScheduledEvents",
            description=f"{cluster}: EC2 scheduled events (AWS Health) to the cluster manager queue",
            event_pattern=events.EventPattern(
                source=["aws.health"],
                detail_type=["AWS Health Event"],
                detail={"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
            ),
            targets=[targets.SqsQueue(self.queue)],
        )
        key = kms.Key(self, "AlertsKey", enable_key_rotation=True, description=f"{cluster}: operator alert topic")
        key.add_to_resource_policy(alarms_use_key_statement(cdk.Stack.of(self)))
        self.alerts_key = key
        self.topic = sns.Topic(self, "Alerts", display_name=f"Slurm cluster {cluster} alerts", master_key=key)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EnforceTls",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        alarms = [
            cloudwatch.Alarm(
                self,
                "EventsBacklog",
                alarm_description=f"{cluster}: the cluster manager is not draining its EC2 event queue",
                metric=self.queue.metric_approximate_age_of_oldest_message(period=cdk.Duration.minutes(5)),
                threshold=600,
                evaluation_periods=2,
            ),
            cloudwatch.Alarm(
                self,
                "EventsDeadLetters",
                alarm_description=f"{cluster}: EC2 events the cluster manager failed to process",
                metric=dlq.metric_approximate_number_of_messages_visible(period=cdk.Duration.minutes(5)),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
            ),
        ]
        for alarm in alarms:
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        # the exporter's metrics (slurm_plugin/exporter/cloudwatch.py): controller, slurmdbd, capacity, boots, licenses
        health = ClusterHealthAlarms(
            self,
            "Health",
            cluster=cluster,
            topic=self.topic,
            accounting=accounting,
            license_schedules=license_schedules,
        )
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"elastic-slurm-{cluster}")
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=[*alarms, *health.alarms], width=24),
            *health.widgets,
            cloudwatch.GraphWidget(
                title="EC2 events",
                left=[
                    self.queue.metric_number_of_messages_received(),
                    dlq.metric_approximate_number_of_messages_visible(),
                ],
                width=12,
            ),
        )
        self._cluster = cluster
        self._dashboard = dashboard
        self._health = health

    def watch_controllers(self, instance_ids: list[str], ready: Sequence[Construct] = ()) -> None:
        """Status-check alarms and a CPU graph for the controllers; the slurmctld/slurmdbd alarms wait for `ready` (the
        controllers' wait conditions)."""
        self._health.wait_for(ready)
        cluster = self._cluster
        alarms: list[cloudwatch.Alarm] = []
        for index, instance_id in enumerate(instance_ids):
            alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"Controller{index}StatusCheck",
                    alarm_description=f"{cluster}: controller {index} fails its EC2 status checks",
                    metric=cloudwatch.Metric(
                        namespace="AWS/EC2",
                        metric_name="StatusCheckFailed",
                        dimensions_map={"InstanceId": instance_id},
                        period=cdk.Duration.minutes(1),
                        statistic="Maximum",
                    ),
                    threshold=0,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=3,
                )
            )
        for alarm in alarms:
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self._dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Controller status", alarms=alarms, width=12),
            cloudwatch.GraphWidget(
                title="Controller CPU",
                left=[
                    cloudwatch.Metric(
                        namespace="AWS/EC2", metric_name="CPUUtilization", dimensions_map={"InstanceId": instance_id}
                    )
                    for instance_id in instance_ids
                ],
                width=12,
            ),
        )
