"""clusters[].budget: an AWS::Budgets::Budget on the cluster's cost allocation tag, alerting the emails and the
cluster's (encrypted) alerts topic, which Budgets may publish to. The construct is checked in a stack of its own; the
wiring in the synthesized site-customized config (which the session's synth also cfn-lints and cdk-nags)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template
from pydantic import ValidationError

from cluster_config.model import Budget
from stacks.budget import ClusterBudget, budget_name
from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk

ACCOUNT = "111122223333"
BUDGET = Budget(
    monthly_limit_usd=2500,
    alert_emails=["hpc-admins@site.example", "finance@site.example"],
    alert_at_percent=[50, 80, 100],
    alert_on="forecasted",
)


def _template(budget: Budget = BUDGET) -> Template:
    app = cdk.App()
    stack = cdk.Stack(app, "Budgeted", env=cdk.Environment(account=ACCOUNT, region="us-east-1"))
    key = kms.Key(stack, "AlertsKey", enable_key_rotation=True)
    topic = sns.Topic(stack, "Alerts", master_key=key)
    ClusterBudget(stack, "Budget", cluster="demo", budget=budget, topic=topic, key=key)
    return Template.from_stack(stack)


def _notification(percent: int, kind: str, emails: list[str]) -> dict[str, Any]:
    topic = {"SubscriptionType": "SNS", "Address": {"Ref": Match.string_like_regexp("^Alerts")}}
    return {
        "Notification": {
            "NotificationType": kind,
            "ComparisonOperator": "GREATER_THAN",
            "Threshold": percent,
            "ThresholdType": "PERCENTAGE",
        },
        "Subscribers": [*({"SubscriptionType": "EMAIL", "Address": e} for e in emails), topic],
    }


def test_a_monthly_cost_budget_filters_on_the_clusters_cost_allocation_tag() -> None:
    template = _template()
    template.resource_count_is("AWS::Budgets::Budget", 1)
    template.has_resource_properties(
        "AWS::Budgets::Budget",
        {
            "Budget": {
                "BudgetName": budget_name("demo", BUDGET),
                "BudgetType": "COST",
                "TimeUnit": "MONTHLY",
                "BudgetLimit": {"Amount": 2500, "Unit": "USD"},
                "CostFilters": {"TagKeyValue": ["user:elastic-slurm:cluster$demo"]},
            }
        },
    )


def test_each_threshold_alerts_the_emails_and_the_alerts_topic() -> None:
    emails = ["hpc-admins@site.example", "finance@site.example"]
    _template().has_resource_properties(
        "AWS::Budgets::Budget",
        {
            "NotificationsWithSubscribers": Match.array_equals(
                [_notification(p, "FORECASTED", emails) for p in (50, 80, 100)]
            )
        },
    )


def test_without_emails_the_default_thresholds_alert_the_topic_on_actual_cost() -> None:
    _template(Budget(monthly_limit_usd=100)).has_resource_properties(
        "AWS::Budgets::Budget",
        {"NotificationsWithSubscribers": Match.array_equals([_notification(p, "ACTUAL", []) for p in (80, 100)])},
    )


def test_budgets_may_publish_to_the_topic_for_this_account_only() -> None:
    _template().has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Sid": "BudgetsPublish",
                            "Effect": "Allow",
                            "Principal": {"Service": "budgets.amazonaws.com"},
                            "Action": "sns:Publish",
                            "Resource": {"Ref": Match.string_like_regexp("^Alerts")},
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": ACCOUNT},
                                "ArnLike": {
                                    "aws:SourceArn": {
                                        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":budgets::{ACCOUNT}:*"]]
                                    }
                                },
                            },
                        }
                    ]
                )
            }
        },
    )


def test_budgets_may_use_the_alerts_key_to_publish_encrypted() -> None:
    _template().has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        {
                            "Sid": "BudgetsEncryptAlerts",
                            "Effect": "Allow",
                            "Principal": {"Service": "budgets.amazonaws.com"},
                            "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
                            "Resource": "*",
                            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
                        }
                    ]
                )
            }
        },
    )


def test_the_budget_is_created_after_the_policies_that_let_it_publish() -> None:
    # the topic itself needs no DependsOn: the subscribers' Ref orders it (cfn-lint W3005)
    depends_on = [Match.string_like_regexp("^AlertsPolicy"), Match.string_like_regexp("^AlertsKey")]
    _template().has_resource("AWS::Budgets::Budget", {"DependsOn": Match.array_equals(depends_on)})


def test_new_alerts_get_a_new_budget_name_a_new_limit_keeps_it() -> None:
    # NotificationsWithSubscribers and BudgetName are create-only: a replacement needs a name not in use
    name = budget_name("demo", BUDGET)
    assert name.startswith("elastic-slurm-demo-") and ":" not in name
    assert budget_name("demo", BUDGET.model_copy(update={"monthly_limit_usd": 9000})) == name
    assert budget_name("demo", BUDGET.model_copy(update={"alert_at_percent": [90]})) != name
    assert budget_name("demo", BUDGET.model_copy(update={"alert_emails": []})) != name
    assert budget_name("demo", BUDGET.model_copy(update={"alert_on": "actual"})) != name


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"monthly_limit_usd": 0}, "greater than 0"),
        ({"monthly_limit_usd": 10, "alert_emails": ["not-an-address"]}, "should match pattern"),
        ({"monthly_limit_usd": 10, "alert_at_percent": [80, 80]}, "80 is listed twice"),
        ({"monthly_limit_usd": 10, "alert_at_percent": []}, "at least 1 item"),
        ({"monthly_limit_usd": 10, "alert_at_percent": list(range(1, 12))}, "at most 10 items"),
        ({"monthly_limit_usd": 10, "alert_on": "sometimes"}, "'actual' or 'forecasted'"),
    ],
)
def test_bad_budget_settings_are_refused(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        Budget.model_validate(fields)


def test_the_site_config_deploys_its_budget_in_the_cluster_stack(assemblies: dict[str, Assembly]) -> None:
    site = Template.from_json(assemblies["site-customized"].template_json("es-site-cluster"))
    site.resource_count_is("AWS::Budgets::Budget", 1)
    site.has_resource_properties(
        "AWS::Budgets::Budget",
        {
            "Budget": Match.object_like(
                {
                    "BudgetLimit": {"Amount": 2500, "Unit": "USD"},
                    "CostFilters": {"TagKeyValue": ["user:elastic-slurm:cluster$site"]},
                }
            ),
            "NotificationsWithSubscribers": Match.array_with(
                [Match.object_like({"Notification": Match.object_like({"Threshold": 50})})]
            ),
        },
    )
    demo = Template.from_json(assemblies["local-demo"].template_json("es-local-cluster"))
    demo.resource_count_is("AWS::Budgets::Budget", 0)  # no budget section, no budget
