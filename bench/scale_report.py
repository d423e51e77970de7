"""The table and the target check of bench/scale_10k.py's results (pure: results dict in, text or dict out).

Targets (issue 17): a cluster-manager pass <= 2 s CPU (its process and the scontrol calls it waited for) and <= 12
AWS calls at 10,000 nodes; ResumeProgram returns in < 100 ms; every node has its NodeAddr within 30 s of the launch
answer (the last pool's: the worker binds each pool as soon as its launch call answers).
"""

from __future__ import annotations

from typing import Any

MANAGER_CPU_S = 2.0
MANAGER_AWS_CALLS = 12
RESUME_RETURN_S = 0.1
NODEADDR_AFTER_ANSWER_S = 30.0


def _get(results: dict[str, Any], *path: str) -> Any:
    value: Any = results
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def manager_cpu(row: dict[str, Any] | None) -> float | None:
    """The pass's CPU: the manager process plus the scontrol processes it ran."""
    if not row:
        return None
    return round(float(row["cpu_s"]["plugin"]) + float(row.get("children_cpu_s", 0.0)), 3)


def targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: its limit, the measured value, and whether it was met (None when not measured)."""
    live = _get(results, "phases", "manager_live")
    checks = {
        "manager_pass_cpu_s": (manager_cpu(live), MANAGER_CPU_S, "<="),
        "manager_pass_aws_calls": (_get(results, "phases", "manager_live", "aws_call_total"), MANAGER_AWS_CALLS, "<="),
        "resume_program_return_s": (_get(results, "phases", "resume", "resume_program_return_s"), RESUME_RETURN_S, "<"),
        "nodeaddr_after_launch_answer_s": (
            _get(results, "phases", "resume", "nodeaddr_after_last_answer_s"),
            NODEADDR_AFTER_ANSWER_S,
            "<=",
        ),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (value, limit, op) in checks.items():
        met = None if value is None else (value <= limit if op == "<=" else value < limit)
        out[name] = {"value": value, "limit": f"{op} {limit:g}", "met": met}
    return out


def _calls(calls: dict[str, int] | None) -> str:
    if not calls:
        return "-"
    return ", ".join(f"{k.split(':', 1)[-1]}={v}" for k, v in calls.items())


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _rows(p: dict[str, Any], results: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(measurement, value, notes) for the table, in run order."""

    def g(*path: str) -> Any:
        return _get(p, *path)

    def total(calls: dict[str, int] | None) -> int | None:
        return sum(calls.values()) if calls else None

    rows: list[tuple[str, Any, str]] = [
        ("local cloud up (wall s)", results.get("local_up_s"), ""),
        ("render: load config + render (CPU s)", g("render", "cpu_s"), f"{g('render', 'slurm_conf_lines')} slurm.conf lines"),
        ("  render with a port per node (CPU s)", g("render", "port_per_node", "cpu_s"),
         f"{g('render', 'port_per_node', 'slurm_conf_lines')} lines: the local cloud's usual form"),
        ("slurmctld stop, state saved (s)", g("slurmctld_start", "stop_s"), ""),
        ("slurmctld start: log start -> primary (s)", g("slurmctld_start", "log_primary_s"),
         f"nodes' state read at {_num(g('slurmctld_start', 'log_state_read_s'))} s"),
        ("slurmctld start: READY=1 / first ping UP (s)", g("slurmctld_start", "ready_s"),
         f"ping UP at {_num(g('slurmctld_start', 'answers_s'))} s, RSS {g('slurmctld_start', 'rss_mib')} MiB"),
        ("scontrol --json show nodes (wall s)", g("show_nodes", "json", "scontrol_wall_s"),
         f"{g('show_nodes', 'json', 'bytes')} bytes"),
        ("  manager parse_json (CPU s)", g("show_nodes", "json", "parse_cpu_s"), ""),
        ("scontrol -o show nodes (wall s)", g("show_nodes", "oneliner", "scontrol_wall_s"),
         f"{g('show_nodes', 'oneliner', 'bytes')} bytes"),
        ("  manager parse_oneliner (CPU s)", g("show_nodes", "oneliner", "parse_cpu_s"), ""),
        ("  plugin parse_show_nodes (CPU s)", g("show_nodes", "plugin_parse", "parse_cpu_s"), ""),
        ("ResumeProgram by hand, controller idle (median s)", g("resume_program_isolated", "median_s"),
         f"CPU s per run {[r['cpu_s'] for r in g('resume_program_isolated', 'runs') or []]}"),
        ("resume: ResumeProgram return under slurmctld (s)", g("resume", "resume_program_return_s"),
         f"{len(g('resume', 'resume_program_runs') or [])} run(s), CPU {_num(g('resume', 'resume_program_cpu_s'))} s"),
        ("resume: EC2 calls", total(g("resume", "ec2_calls")), _calls(g("resume", "ec2_calls"))),
        ("resume: first / last launch answer (s after power_up)", g("resume", "first_launch_answer_s"),
         f"last {_num(g('resume', 'last_launch_answer_s'))}"),
        ("resume: every NodeAddr set (s after power_up)", g("resume", "all_nodeaddr_logged_s"),
         f"seen by the 1 s poll at {_num(g('resume', 'all_nodeaddr_polled_s'))}"),
        ("resume: NodeAddr after the last launch answer (s)", g("resume", "nodeaddr_after_last_answer_s"),
         f"each pool after its answer: {g('resume', 'nodeaddr_after_answer_by_pool_s')}"),
        ("resume: CPU s of worker / moto / slurmctld", g("resume", "cpu_s", "plugin"),
         f"{_num(g('resume', 'cpu_s', 'emulated_aws'))} / {_num(g('resume', 'cpu_s', 'slurmctld'))}"),
    ]  # fmt: skip
    for key, label in (
        ("manager_live", "manager pass, all instances live"),
        ("manager_after", "manager pass, after suspend"),
    ):
        row = p.get(key)
        if row:
            rows += [
                (f"{label}: CPU s (process + scontrol)", manager_cpu(row),
                 f"process {_num(row['cpu_s']['plugin'])} + scontrol {_num(row.get('children_cpu_s'))}, wall {_num(row.get('wall_s'))}"),
                (f"{label}: AWS calls", row.get("aws_call_total"), _calls(row.get("aws_calls"))),
                (f"{label}: scontrol calls", row.get("scontrol_calls"), ""),
            ]  # fmt: skip
    for cycle in ("main", "backfill"):
        stats = g("scheduler", "sdiag", cycle) or {}
        mean = stats["mean_us"] / 1000 if "mean_us" in stats else None
        maximum = stats["max_us"] / 1000 if "max_us" in stats else None
        rows.append(
            (f"sdiag {cycle} cycle mean (ms)", mean, f"max {_num(maximum)} ms, {_num(stats.get('cycles'))} cycles")
        )
    rows += [
        ("queue (jobs by state, pending reason)", None, f"{g('scheduler', 'job_states')} {g('scheduler', 'pending_reasons')}"),
        ("slurmctld RSS with the queue (MiB)", g("scheduler", "slurmctld_rss_mib"), ""),
        ("suspend: SuspendProgram return (s)", g("suspend", "suspend_program_return_s"), ""),
        ("suspend: EC2 calls", total(g("suspend", "ec2_calls")), _calls(g("suspend", "ec2_calls"))),
        ("suspend: every instance terminated (s)", g("suspend", "all_terminated_s"),
         f"every node idle~ at {_num(g('suspend', 'all_powered_down_s'))} s (SuspendTimeout)"),
        ("suspend: CPU s of worker / moto / slurmctld", g("suspend", "cpu_s", "plugin"),
         f"{_num(g('suspend', 'cpu_s', 'emulated_aws'))} / {_num(g('suspend', 'cpu_s', 'slurmctld'))}"),
    ]  # fmt: skip
    if p.get("configuring"):
        rows += _starting_rows(p["configuring"], results.get("early_start"))
    return rows


def _starting_rows(row: dict[str, Any], early_start: Any) -> list[tuple[str, Any, str]]:
    """The rows of the starting-jobs phase (bench/scale_configuring.py)."""
    top = ", ".join(f"{k}={v}" for k, v in list(row.get("rpc_per_s", {}).items())[:5])
    share = row.get("cpu_share", {})
    return [
        ("starting: jobs CONFIGURING at once", row.get("configuring_at_window"),
         f"early_start {early_start}; {row.get('jobs')} submitted, all CONFIGURING after {_num(row.get('all_configuring_s'))} s"),
        ("starting: prolog processes (RSS MiB in notes)", row.get("prolog_processes"), f"{_num(row.get('prolog_rss_mib'))} MiB"),
        ("starting: slurmctld RPCs per second (sdiag)", row.get("rpc_per_s_total"), top),
        ("starting: CPU s/s slurmctld / slurmscriptd / boot watch", share.get("slurmctld"),
         f"{_num(share.get('slurmscriptd'))} / {_num(share.get('bootwatch'))}"),
        ("starting: prologs ended after scancel (s)", row.get("prologs_gone_after_scancel_s"), ""),
    ]  # fmt: skip


def table(results: dict[str, Any]) -> str:
    """The README table: one line per measurement, then the targets."""
    rows = _rows(results.get("phases", {}), results)
    width = max(len(r[0]) for r in rows)
    lines = [f"{'measurement':<{width}}  {'value':>9}  notes", "-" * (width + 40)]
    lines += [f"{what:<{width}}  {_num(value):>9}  {note}".rstrip() for what, value, note in rows]
    lines.append("")
    for name, check in results.get("targets", {}).items():
        verdict = {True: "met", False: "MISSED", None: "not measured"}[check["met"]]
        lines.append(f"target {name}: {_num(check['value'])} ({check['limit']}): {verdict}")
    return "\n".join(lines)
