"""The cluster's monthly cost budget (clusters[].budget): an AWS Budgets budget on the cost allocation tag
`user:elastic-slurm:cluster` = the cluster's name, alerting its emails and the cluster's alerts topic at each
threshold.

The alerts topic is encrypted with the cluster's alerts key, so Budgets may publish to the topic and use the key
(both only for this account's budgets). NotificationsWithSubscribers and BudgetName are create-only properties: a
new alert list replaces the budget, and a fixed name would collide with the budget being replaced, so the name
carries a digest of the alerts. The tag filters nothing until an administrator activates `elastic-slurm:cluster` as
a cost allocation tag in the Billing console (docs/cost.md).
"""

from __future__ import annotations

import hashlib
import json

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from cluster_config.model import Budget
from stacks.naming import TAG_CLUSTER

BUDGETS = "budgets.amazonaws.com"


def cost_filter(cluster: str) -> dict[str, list[str]]:
    """The budget's filter: costs tagged `elastic-slurm:cluster` = `cluster` (a user-defined cost allocation tag)."""
    return {"TagKeyValue": [f"user:{TAG_CLUSTER}${cluster}"]}


def budget_name(cluster: str, budget: Budget) -> str:
    """`elastic-slurm-<cluster>-<digest of the alerts>` (no `:` or `\\`, which Budgets refuses in names)."""
    alerts = json.dumps([budget.alert_on, budget.alert_at_percent, budget.alert_emails])
    return f"elastic-slurm-{cluster}-{hashlib.sha256(alerts.encode()).hexdigest()[:8]}"


class ClusterBudget(Construct):
    """The budget, and the grants that let Budgets publish to the (encrypted) alerts topic."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: str, budget: Budget, topic: sns.ITopic, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        this_account = {"StringEquals": {"aws:SourceAccount": stack.account}}
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="BudgetsPublish",
                principals=[iam.ServicePrincipal(BUDGETS)],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    **this_account,
                    "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:budgets::{stack.account}:*"},
                },
            )
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="BudgetsEncryptAlerts",
                principals=[iam.ServicePrincipal(BUDGETS)],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],  # in a key policy: this key
                conditions=this_account,
            )
        )
        subscribers = [
            budgets.CfnBudget.SubscriberProperty(address=a, subscription_type="EMAIL") for a in budget.alert_emails
        ]
        subscribers.append(budgets.CfnBudget.SubscriberProperty(address=topic.topic_arn, subscription_type="SNS"))
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=budget_name(cluster, budget),
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=budget.monthly_limit_usd, unit="USD"),
                cost_filters=cost_filter(cluster),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=budget.alert_on.upper(),
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=subscribers,
                )
                for percent in budget.alert_at_percent
            ],
        )
        # Budgets checks at creation that it may publish: the topic policy and the key (its policy) come first (the
        # topic itself already, through the Ref in the subscribers)
        topic_policy = topic.node.try_find_child("Policy")
        self.budget.node.add_dependency(*(c for c in (topic_policy, key) if c is not None))
