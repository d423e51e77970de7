"""The config model's cost budget (clusters[].budget): a monthly AWS Budgets budget on the cluster's cost allocation
tag, alerting by email and on the cluster's alerts topic (stacks/budget.py, docs/cost.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from cluster_config.model_base import StrictModel

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
MAX_NOTIFICATIONS = 10  # AWS Budgets: notifications per budget
MAX_EMAILS = 10  # AWS Budgets: email subscribers per notification (plus the one SNS topic)


class Budget(StrictModel):
    """A monthly cost budget of this cluster: AWS Budgets alerts when the month's cost tagged with the cluster
    (`elastic-slurm:cluster`, activated as a cost allocation tag in the Billing console) crosses each threshold."""

    monthly_limit_usd: float = Field(gt=0, description="The monthly budget in USD.")
    alert_emails: list[Annotated[str, Field(pattern=EMAIL_PATTERN)]] = Field(
        default_factory=list,
        max_length=MAX_EMAILS,
        description="Email addresses alerted at each threshold (besides the cluster's alerts topic, always alerted).",
    )
    alert_at_percent: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default=[80, 100],
        min_length=1,
        max_length=MAX_NOTIFICATIONS,
        description="Alert when the cost passes each of these percentages of the limit.",
    )
    alert_on: Literal["actual", "forecasted"] = Field(
        default="actual",
        description="`actual`: the month's cost so far passed the threshold; `forecasted`: AWS forecasts it will by "
        "the end of the month.",
    )

    @field_validator("alert_emails", "alert_at_percent")
    @classmethod
    def _no_repeats(cls, values: list[str] | list[int]) -> list[str] | list[int]:
        seen = [v for i, v in enumerate(values) if v in values[:i]]
        if seen:
            raise ValueError(f"{seen[0]} is listed twice")
        return values
