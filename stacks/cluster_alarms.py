"""Alarms and dashboard widgets on the cluster's own metrics: what the exporter on the controllers publishes once a
minute (namespace `ElasticSlurm`, dimension `ClusterName`, slurm_plugin/exporter/cloudwatch.py). Every alarm notifies
the cluster's alert topic; docs/observability.md says what an operator does when each fires.

With two controllers both exporters publish under the same dimension: the daemon alarms take the Maximum, so the
cluster counts as up while any controller sees its slurmctld (slurmdbd) answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from slurm_plugin.exporter.cloudwatch import (
    CAPACITY_ERRORS,
    DIMENSION,
    FAILED_BOOTS,
    JOBS_PENDING,
    JOBS_RUNNING,
    LICENSE_SYNC_AGE,
    NAMESPACE,
    NODES_UP,
    PROTECTED_POOLS,
    SLURMCTLD_UP,
    SLURMDBD_UP,
)
from slurm_plugin.licenses.interval import longest_gap_seconds

MINUTE = cdk.Duration.minutes(1)
# slurmctld / slurmdbd: down (or no report at all) for 3 consecutive minutes; a restart takes well under one.
DAEMON_DOWN_MINUTES = 3
# Capacity errors in 5 minutes: a few are normal (the plugin moves to the next AZ or type, spot pools see them
# often); 10 means a pool keeps failing over and nodes are probably waiting.
CAPACITY_ERRORS_PERIOD = cdk.Duration.minutes(5)
CAPACITY_ERRORS_THRESHOLD = 10
# Failed boots in 15 minutes: 3 is a pattern (a broken image, custom action or file system), and comes well before a
# pool stops launching at `boot_failure_limit` (default 10 consecutive, protected mode).
FAILED_BOOTS_PERIOD = cdk.Duration.minutes(15)
FAILED_BOOTS_THRESHOLD = 3
# The license sync is stale after missing this many runs of its timer (the longest gap between runs of the config's
# `sync_schedule`s), and never sooner than the floor: the timer's random delay, the sync's own time (30 s per
# server) and the once-a-minute sampling would make a 1-minute schedule alarm on noise.
LICENSE_SYNC_STALE_RUNS = 3
LICENSE_SYNC_FLOOR_S = 600
# When no schedule is understood (slurm_plugin/licenses/interval.py): assume a daily sync, so the alarm is late rather
# than false.
LICENSE_SYNC_UNKNOWN_GAP_S = 86_400


def license_sync_threshold_s(schedules: Sequence[str]) -> int:
    """Seconds since the last successful license sync after which the sync counts as stale."""
    gap = longest_gap_seconds(schedules) or LICENSE_SYNC_UNKNOWN_GAP_S
    return max(LICENSE_SYNC_STALE_RUNS * gap, LICENSE_SYNC_FLOOR_S)


class ClusterHealthAlarms(Construct):
    """The alarms on the exporter's metrics (`alarms`) and the dashboard widgets of those metrics (`widgets`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: str,
        topic: sns.ITopic,
        accounting: bool = False,
        license_schedules: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self._cluster = cluster
        # missing data counts as down for these: `wait_for` the controllers' first healthy boot before creating them
        self.daemon_alarms = [self._daemon_down("SlurmctldDown", SLURMCTLD_UP, "slurmctld")]
        if accounting:
            self.daemon_alarms.append(self._daemon_down("SlurmdbdDown", SLURMDBD_UP, "slurmdbd"))
        self.alarms: list[cloudwatch.Alarm] = [
            *self.daemon_alarms,
            self._alarm(
                "CapacityErrors",
                f"{CAPACITY_ERRORS_THRESHOLD} or more capacity errors in 5 minutes (pools failing over AZs/types)",
                self.metric(CAPACITY_ERRORS, "Sum", CAPACITY_ERRORS_PERIOD),
                CAPACITY_ERRORS_THRESHOLD,
            ),
            self._alarm(
                "FailedBoots",
                f"{FAILED_BOOTS_THRESHOLD} or more compute nodes failed to boot in 15 minutes",
                self.metric(FAILED_BOOTS, "Sum", FAILED_BOOTS_PERIOD),
                FAILED_BOOTS_THRESHOLD,
            ),
            self._alarm(
                "ProtectedPool",
                "a pool is in protected mode and launches nothing (slurm-pool-protection --clear POOL)",
                self.metric(PROTECTED_POOLS, "Maximum", MINUTE),
                1,
            ),
        ]
        if license_schedules:
            threshold = license_sync_threshold_s(license_schedules)
            self.alarms.append(
                self._alarm(
                    "LicenseSyncStale",
                    f"no successful license sync for more than {threshold} s",
                    self.metric(LICENSE_SYNC_AGE, "Maximum", MINUTE),
                    threshold,
                    cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                )
            )
        for alarm in self.alarms:
            alarm.add_alarm_action(cw_actions.SnsAction(topic))
        self.widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="Nodes and jobs",
                left=[self.metric(name, "Maximum", MINUTE) for name in (NODES_UP, JOBS_RUNNING, JOBS_PENDING)],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Capacity errors and failed boots (per 5 minutes)",
                left=[self.metric(name, "Sum", CAPACITY_ERRORS_PERIOD) for name in (CAPACITY_ERRORS, FAILED_BOOTS)],
                width=12,
            ),
        ]

    def wait_for(self, ready: Sequence[Construct]) -> None:
        """Create the daemon alarms after `ready` (the controllers' wait conditions): a stack being created would
        otherwise alarm on the minutes before the first controller and its exporter run."""
        if ready:
            for alarm in self.daemon_alarms:
                alarm.node.add_dependency(*ready)

    def metric(self, name: str, statistic: str, period: cdk.Duration) -> cloudwatch.Metric:
        """One of the exporter's metrics of this cluster."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=name,
            dimensions_map={DIMENSION: self._cluster},
            statistic=statistic,
            period=period,
        )

    def _daemon_down(self, construct_id: str, metric: str, daemon: str) -> cloudwatch.Alarm:
        """Down, or nothing reported (the controller or its exporter is gone), for DAEMON_DOWN_MINUTES in a row."""
        return self._alarm(
            construct_id,
            f"{daemon} did not answer (or nothing was reported) for {DAEMON_DOWN_MINUTES} minutes",
            self.metric(metric, "Maximum", MINUTE),
            1,
            cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            periods=DAEMON_DOWN_MINUTES,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )

    def _alarm(
        self,
        construct_id: str,
        what: str,
        metric: cloudwatch.Metric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        periods: int = 1,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=f"{self._cluster}: {what} (docs/observability.md)",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
        )
