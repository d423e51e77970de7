"""The systemd timer drop-in of the license sync: one OnCalendar= line per distinct schedule of the config.

A schedule is written into a unit file that root's systemd reads: it must be one calendar expression and nothing else
(no newline that starts another setting or section, no `%` specifier). The config's pattern (safe_types.SystemdCalendar)
refuses anything else at validate; this module checks again before writing (defence in depth).
"""

from __future__ import annotations

import re

from cluster_config.model import ElasticSlurmConfig
from cluster_config.safe_types import SYSTEMD_CALENDAR_PATTERN

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
    for schedule in found:
        if not re.fullmatch(SYSTEMD_CALENDAR_PATTERN, schedule):
            raise ValueError(f"licenses[].sync_schedule {schedule!r} is not a plain systemd calendar expression")
    lines = ["# Written by elastic-slurm render from licenses[].sync_schedule.", "[Timer]", "OnCalendar="]
    lines += [f"OnCalendar={schedule}" for schedule in found]
    return "\n".join(lines) + "\n"
