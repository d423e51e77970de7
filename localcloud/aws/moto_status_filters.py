"""DescribeInstanceStatus filters moto ignores, honoured as EC2 honours them (installed in the emulated AWS server).

moto answers DescribeInstanceStatus with every running instance whatever its `Filters`, except the instance state:
`instance-status.status`, `system-status.status` and `event.code` are silently dropped. EC2 returns only the
instances that match (filters of different names ANDed, values of one name ORed), and the cluster manager relies on
that: it asks for impaired instances and instances with scheduled events only, a constant number of calls however
many instances run (slurm_plugin/manager/observe.py). Here a filter on a check's status compares with what moto
reports for that check (`ok` while running, else `not-applicable`), and `event.code` matches nothing: moto's
instances have no scheduled events. Other filter names keep moto's behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_INSTALLED = "_elastic_slurm_status_filters"
# filter name -> the instance's value for it (None: the instance has none, so no value matches)
STATUS_VALUES: dict[str, Callable[[Any], str | None]] = {
    "instance-status.status": lambda instance: str(instance.instance_status["Status"]),
    "system-status.status": lambda instance: str(instance.system_status["Status"]),
    "event.code": lambda instance: None,
}


def matches_status_filters(instance: Any, filters: list[dict[str, Any]] | None) -> bool:
    """Whether `instance` passes the status filters among `filters` (moto's `{"name", "values"}` list)."""
    for item in filters or []:
        value_of = STATUS_VALUES.get(str(item.get("name")))
        if value_of is not None and value_of(instance) not in list(item.get("values") or []):
            return False
    return True


def install() -> None:
    """Make moto's Instance.applies (used by DescribeInstanceStatus only) honour the status filters (idempotent)."""
    from moto.ec2.models.instances import Instance

    if getattr(Instance, _INSTALLED, False):
        return
    moto_applies = Instance.applies

    def applies(instance: Any, filters: list[dict[str, Any]]) -> bool:
        return bool(moto_applies(instance, filters)) and matches_status_filters(instance, filters)

    Instance.applies = applies  # type: ignore[method-assign,assignment]
    setattr(Instance, _INSTALLED, True)
