"""The exporter's cluster-health values as CloudWatch custom metrics: namespace `ElasticSlurm`, one dimension
`ClusterName`, one PutMetricData call per publish (the exporter publishes once a minute; one entry per name,
far below the call's limit of 1,000).

The cluster stack's alarms and dashboard (stacks/cluster_alarms.py) read exactly these names, so they are the
contract between the two; the controller role may put metrics in this namespace only (stacks/node_policies.py).

    SlurmctldUp            Count    1 when slurmctld answers, else 0
    SlurmdbdUp             Count    1 when slurmdbd answers, else 0 (only on clusters with accounting)
    CapacityErrors         Count    capacity errors since the last publish (`CounterDeltas`)
    FailedBoots            Count    failed boots since the last publish (`CounterDeltas`)
    ProtectedPools         Count    pools in protected mode now
    LicenseSyncAgeSeconds  Seconds  since the last successful license sync (only on clusters with synced licenses)
    NodesUp, JobsPending, JobsRunning   Count   for the dashboard

A CloudWatch outage must not stop the exporter: a failed call is logged as one warning line and dropped.

Both controllers of a two-controller cluster run the exporter; only the one that reports for the cluster publishes
(`speaks`, slurm_plugin/primary.py: the acting controller, or the primary while no slurmctld answers), else the
counters' deltas would be added twice. The default gate asks `scontrol ping` (PATH, Slurm's default slurm.conf) at
most every 10 s; where scontrol lists no controller (not a Slurm host) it publishes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin import primary

NAMESPACE = "ElasticSlurm"
DIMENSION = "ClusterName"

SLURMCTLD_UP = "SlurmctldUp"
SLURMDBD_UP = "SlurmdbdUp"
CAPACITY_ERRORS = "CapacityErrors"
FAILED_BOOTS = "FailedBoots"
PROTECTED_POOLS = "ProtectedPools"
LICENSE_SYNC_AGE = "LicenseSyncAgeSeconds"
NODES_UP = "NodesUp"
JOBS_PENDING = "JobsPending"
JOBS_RUNNING = "JobsRunning"

COUNT = "Count"
SECONDS = "Seconds"
UNITS: Mapping[str, str] = {
    SLURMCTLD_UP: COUNT,
    SLURMDBD_UP: COUNT,
    CAPACITY_ERRORS: COUNT,
    FAILED_BOOTS: COUNT,
    PROTECTED_POOLS: COUNT,
    LICENSE_SYNC_AGE: SECONDS,
    NODES_UP: COUNT,
    JOBS_PENDING: COUNT,
    JOBS_RUNNING: COUNT,
}
# Published as the increase since the last publish of a cumulative total (CounterDeltas).
COUNTERS = (CAPACITY_ERRORS, FAILED_BOOTS)
# CloudWatch takes no infinity: +inf (the age of a license sync that never succeeded) is published as this, ~31 years,
# above every alarm threshold. NaN and -inf are left out.
INFINITY = 1e9

# A publish runs in the exporter's loop: few, short attempts (the next publish comes a minute later anyway).
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=10)

LOG = logging.getLogger(__name__)


def cloudwatch_client(region: str | None = None, endpoint_url: str | None = None) -> Any:
    """A CloudWatch client with the publisher's retry and timeout settings (the instance role's credentials)."""
    import boto3

    return boto3.client("cloudwatch", region_name=region, endpoint_url=endpoint_url, config=CLIENT_CONFIG)


@dataclass
class CounterDeltas:
    """Cumulative totals → increments since the previous call, per name.

    The first total seen for a name gives 0 (what happened before the exporter started was never published as a
    delta, and publishing the whole history at once would trip the rate alarms). A total lower than the previous one
    means its source restarted from zero: the new total is the increment.
    """

    last: dict[str, float] = field(default_factory=dict)

    def delta(self, name: str, total: float) -> float:
        """The increase of `name` since the last call (see the class docstring), remembering `total`."""
        previous = self.last.get(name)
        self.last[name] = total
        if previous is None:
            return 0.0
        return total if total < previous else total - previous

    def deltas(self, totals: Mapping[str, float]) -> dict[str, float]:
        """`delta` of every name in `totals`."""
        return {name: self.delta(name, total) for name, total in totals.items()}


class CloudWatchPublisher:
    """Puts one cluster's values into CloudWatch, one PutMetricData call per `publish`."""

    def __init__(self, client: Any, cluster: str, namespace: str = NAMESPACE, gate: primary.Gate | None = None) -> None:
        self.client = client
        self.cluster = cluster
        self.namespace = namespace
        self.gate = gate or primary.Gate()
        self.silent = False  # the last publish was skipped: this host stood by

    def publish(self, values: Mapping[str, float], now: datetime) -> None:
        """Put `values` (metric name → value) stamped `now` (naive = UTC). ValueError for a name not in `UNITS`;
        +inf is sent as `INFINITY`, NaN and -inf are left out (CloudWatch would refuse the whole call); a failed call
        is logged, never raised."""
        unknown = sorted(set(values) - set(UNITS))
        if unknown:
            raise ValueError(f"not CloudWatch metrics of {self.namespace}: {', '.join(unknown)}")
        stamp = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        capped = {name: INFINITY if value == math.inf else float(value) for name, value in values.items()}
        finite = {name: value for name, value in capped.items() if math.isfinite(value)}
        if len(finite) < len(values):
            skipped = sorted(set(values) - set(finite))
            LOG.warning("CloudWatch: left out non-finite values of %s", ", ".join(skipped))
        data = [self._datum(name, value, stamp) for name, value in sorted(finite.items())]
        if not data:
            return
        standing_by = not self.gate.speaks()
        if standing_by != self.silent:
            LOG.info("CloudWatch: %s", "standing by (another controller reports)" if standing_by else "publishing")
            self.silent = standing_by
        if standing_by:
            return
        try:
            self.client.put_metric_data(Namespace=self.namespace, MetricData=data)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            reason = f"{error.get('Code', 'ClientError')}: {error.get('Message', '')}"
            self._failed(len(data), reason)
        except BotoCoreError as exc:  # EndpointConnectionError, timeouts, missing credentials
            self._failed(len(data), f"{type(exc).__name__}: {exc}")

    def _datum(self, name: str, value: float, stamp: datetime) -> dict[str, Any]:
        return {
            "MetricName": name,
            "Dimensions": [{"Name": DIMENSION, "Value": self.cluster}],
            "Timestamp": stamp,
            "Value": value,
            "Unit": UNITS[name],
        }

    def _failed(self, count: int, reason: str) -> None:
        line = " ".join(reason.split())
        LOG.warning("CloudWatch: %d metrics of %s not published: %s", count, self.cluster, line)
