"""What the Grafana dashboards show: rows of panels, each a title, a unit and PromQL over the exporter's metrics
(slurm_plugin/exporter; names in docs/observability.md). grafana.py turns these into assets/dashboards/*.json.

Every expression selects `instance=~"$instance"` (the dashboards' variable: one exporter = one cluster) and is run
against a real Prometheus scraping the exporter in `make test` (tests/e2e/test_observability_e2e.py), with `$instance`
replaced by `.+` and `$__rate_interval` by RATE_WINDOW; a row with `needs` runs where the cluster has that feature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

I = 'instance=~"$instance"'  # noqa: E741 (the selector every query carries)
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Panel:
    """One time-series (or stat) panel: queries as (legend, PromQL)."""

    title: str
    queries: tuple[tuple[str, str], ...]
    unit: str = "short"
    kind: str = "timeseries"  # timeseries | stat
    stacked: bool = False
    description: str = ""


@dataclass(frozen=True)
class Row:
    """A titled row of panels; `needs` names a cluster feature its queries depend on ("licenses")."""

    title: str
    panels: tuple[Panel, ...]
    needs: str = ""


@dataclass(frozen=True)
class Dashboard:
    """One dashboard file."""

    uid: str
    title: str
    description: str
    rows: tuple[Row, ...] = field(default_factory=tuple)


CLUSTER = Dashboard(
    uid="elastic-slurm-cluster",
    title="Elastic Slurm: cluster",
    description="Nodes, jobs and why they pend, EC2 launches and capacity errors per AZ, cool-downs, protected pools, "
    "the cluster manager, licenses.",
    rows=(
        Row("Health", (
            Panel("Daemons up", (("{{daemon}}", f"slurm_up{{{I}}}"),), kind="stat",
                  description="1 when slurmctld / slurmdbd answer the exporter"),
            Panel("Exporter sources answering", (("{{source}}", f"elastic_slurm_exporter_source_up{{{I}}}"),),
                  kind="stat"),
            Panel("Pools in protected mode", (("{{pool}}", f"elastic_slurm_pool_protected{{{I}}}"),), kind="stat",
                  description="1: the pool's boots keep failing and it launches nothing (slurm-pool-protection)"),
        )),
        Row("Nodes", (
            Panel("Nodes by state", (("{{state}}", f"sum by (state) (slurm_nodes{{{I}}})"),), stacked=True),
            Panel("Nodes up per pool", (
                ("{{pool}}", f'sum by (pool) (slurm_nodes{{{I}, state=~"idle|allocated|mixed|completing"}})'),
            )),
            Panel("Live instances per AZ and market", (
                ("{{az}} {{market}}", f"sum by (az, market) (elastic_slurm_instances{{{I}}})"),
            ), stacked=True),
        )),
        Row("Jobs", (
            Panel("Jobs by state", (("{{state}}", f"sum by (state) (slurm_jobs{{{I}}})"),), stacked=True),
            Panel("Pending jobs by reason", (
                ("{{reason}}", f'sum by (reason) (slurm_jobs{{{I}, state="pending"}})'),
            ), stacked=True, description="'' = no pending job; ReqNodeNotAvail / Nodes DOWN while a pool cools down"),
            Panel("Jobs per user (top 10)", (
                ("{{user}} {{state}}", f"topk(10, sum by (user, state) (slurm_user_jobs{{{I}}}))"),
            )),
            Panel("Jobs per account", (("{{account}} {{state}}", f"sum by (account, state) (slurm_account_jobs{{{I}}})"),)),
            Panel("Submit to running (p50, p95)", (
                ("p50", f"histogram_quantile(0.5, sum by (le) (rate(elastic_slurm_job_wait_seconds_bucket{{{I}}}[{RATE}])))"),
                ("p95", f"histogram_quantile(0.95, sum by (le) (rate(elastic_slurm_job_wait_seconds_bucket{{{I}}}[{RATE}])))"),
                ("jobs started (all time)", f"sum(elastic_slurm_job_wait_seconds_count{{{I}}})"),
            ), unit="s"),
        )),
        Row("EC2", (
            Panel("Instances launched per AZ", (
                ("{{az}}", f"sum by (az) (increase(elastic_slurm_instances_launched_total{{{I}}}[{RATE}]))"),
            )),
            Panel("Capacity errors per AZ and code", (
                ("{{az}} {{code}}", f"sum by (az, code) (increase(elastic_slurm_capacity_errors_total{{{I}}}[{RATE}]))"),
                ("all time {{pool}} {{az}}", f"sum by (pool, az) (elastic_slurm_capacity_errors_total{{{I}}})"),
            ), description="InsufficientInstanceCapacity and friends; the AZ then cools down (next panel)"),
            Panel("AZs in capacity cool-down per pool", (("{{pool}}", f"elastic_slurm_pool_cooling_azs{{{I}}}"),)),
            Panel("Instances terminated by reason", (
                ("{{reason}}", f"sum by (reason) (elastic_slurm_instances_terminated_total{{{I}}})"),
            )),
            Panel("Launch calls per pool and market", (
                ("{{pool}} {{market}}", f"sum by (pool, market) (elastic_slurm_launch_calls_total{{{I}}})"),
            )),
            Panel("Throttled AWS calls", (
                ("{{api}}", f"sum by (api) (increase(elastic_slurm_api_throttled_total{{{I}}}[{RATE}]))"),
            ), description="RequestLimitExceeded answers (each try); 0 while nothing was throttled"),
            Panel("Resume to node bound (p50, p95)", (
                ("p50", f"histogram_quantile(0.5, sum by (le) (rate(elastic_slurm_launch_seconds_bucket{{{I}}}[{RATE}])))"),
                ("p95", f"histogram_quantile(0.95, sum by (le) (rate(elastic_slurm_launch_seconds_bucket{{{I}}}[{RATE}])))"),
                ("launches bound (all time)", f"sum(elastic_slurm_launch_seconds_count{{{I}}})"),
            ), unit="s"),
            Panel("Failed boots per pool", (("{{pool}}", f"elastic_slurm_boot_failures_total{{{I}}}"),)),
        )),
        Row("Cluster manager", (
            Panel("Manager actions", (
                ("{{action}}", f'elastic_slurm_manager_actions_total{{{I}, action!="cycles"}}'),
            ), description="orphans terminated, nodes replaced, spot interruptions, health-check failures, ..."),
        )),
        Row("Licenses", (
            Panel("Licenses used and total", (
                ("{{license}} used", f"slurm_license_used{{{I}}}"),
                ("{{license}} total", f"slurm_license_total{{{I}}}"),
            )),
            Panel("Since the last license sync", (("age", f"elastic_slurm_license_sync_age_seconds{{{I}}}"),),
                  unit="s", description="the license sync timer runs every few minutes; hours mean it is stuck"),
            Panel("License server failures in a row", (
                ("{{server}}", f"elastic_slurm_license_sync_failures{{{I}}}"),
            )),
        ), needs="licenses"),
    ),
)  # fmt: skip

SCHEDULER = Dashboard(
    uid="elastic-slurm-scheduler",
    title="Elastic Slurm: slurmctld",
    description="sdiag: scheduler and backfill cycles, queues, threads, RPCs by type and by user.",
    rows=(
        Row("Scheduler", (
            Panel("Main scheduler cycle", (
                ("{{stat}}", f'slurm_scheduler_cycle_seconds{{{I}, scheduler="main"}}'),
            ), unit="s"),
            Panel("Backfill cycle", (
                ("{{stat}}", f'slurm_scheduler_cycle_seconds{{{I}, scheduler="backfill"}}'),
            ), unit="s"),
            Panel("Queues and threads", (
                ("scheduler queue", f"slurm_scheduler_queue_length{{{I}}}"),
                ("server threads", f"slurm_server_threads{{{I}}}"),
                ("agent queue", f"slurm_agent_queue_size{{{I}}}"),
                ("slurmdbd agent queue", f"slurm_dbd_agent_queue_size{{{I}}}"),
            )),
            Panel("Jobs submitted, started, completed (per interval)", (
                ("submitted", f"increase(slurm_jobs_submitted_total{{{I}}}[{RATE}])"),
                ("started", f"increase(slurm_jobs_started_total{{{I}}}[{RATE}])"),
                ("completed", f"increase(slurm_jobs_completed_total{{{I}}}[{RATE}])"),
            )),
        )),
        Row("RPCs", (
            Panel("RPCs per second by type (top 10)", (
                ("{{type}}", f"topk(10, sum by (type) (rate(slurm_rpc_calls_total{{{I}}}[{RATE}])))"),
            ), unit="reqps"),
            Panel("RPC time by type (top 10)", (
                ("{{type}}", f"topk(10, sum by (type) (rate(slurm_rpc_time_seconds_total{{{I}}}[{RATE}])))"),
            ), unit="s", description="seconds slurmctld spent per second on each RPC type"),
            Panel("RPCs per second by user", (
                ("{{user}}", f"sum by (user) (rate(slurm_rpc_user_calls_total{{{I}}}[{RATE}]))"),
            ), unit="reqps", description="a user (or a script) polling squeue shows up here"),
        )),
        Row("Exporter", (
            Panel("Time to read each source", (
                ("{{source}}", f"elastic_slurm_exporter_source_seconds{{{I}}}"),
            ), unit="s"),
        )),
    ),
)  # fmt: skip

DASHBOARDS = (CLUSTER, SCHEDULER)
