"""The systemd timer drop-in of the license sync: one OnCalendar= line per distinct schedule of the config."""

from __future__ import annotations

from cluster_config.model import ElasticSlurmConfig

DROPIN_PATH = "/etc/systemd/system/slurm-license-sync.timer.d/schedule.conf"


def schedules(config: ElasticSlurmConfig) -> list[str]:
    """Distinct `sync_schedule` values of licenses that have a server, in file order."""
    seen: list[str] = []
    for lic in config.licenses:
        if lic.sync_schedule and lic.server_type != "static" and lic.sync_schedule not in seen:
            seen.append(lic.sync_schedule)
    return seen


def timer_dropin(config: ElasticSlurmConfig) -> str | None:
    """The drop-in text, or None when no license is synced (then the timer should stay disabled)."""
    found = schedules(config)
    if not found:
        return None
    lines = ["# Written by elastic-slurm render from licenses[].sync_schedule.", "[Timer]", "OnCalendar="]
    lines += [f"OnCalendar={schedule}" for schedule in found]
    return "\n".join(lines) + "\n"
