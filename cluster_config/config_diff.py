"""Diff two configs (the deployed one and an edit) into changed leaves, each with its update policy.

Sections are compared field by field; lists of named sections (clusters, partitions, pools, licenses, accounts, QOS,
and remote regions, imported subnets, extra mounts by their region, id and mount point) are matched by that key, so
inserting a pool reports one added pool, not every later pool as changed (their order is not compared); other lists
are compared index by index (`instance_types[0]`), mappings key by key. An optional section set or unset, or a
union switching member (network `create` ↔ `import`), is one change. `accounting.host_cluster` is compared as the
cluster it resolves to (default: the first one), so reordering clusters moves the accounting host visibly. A tag edit
re-creates the placement groups (their tags are create-only), reported as one extra change per such pool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel

from cluster_config.config_paths import Key, Path, format_path
from cluster_config.model import ElasticSlurmConfig
from cluster_config.update_policy import Policy, rule_for

ITEM_KEYS = ("name", "region", "subnet_id", "mount_point")
_PLAIN = re.compile(r"^[A-Za-z0-9/_.:@*-][A-Za-z0-9/_.:@*, ()+=-]*$")  # shown without quotes


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Missing()


@dataclass(frozen=True)
class Change:
    """One changed leaf (or added/removed item, or set/unset section), with its policy and why."""

    path: Path
    old: Any
    new: Any
    policy: Policy
    reason: str
    note: str = ""  # set for a consequence of another change (then old == new)

    def text(self) -> str:
        """`clusters[0].partitions[0].pools[0].max_nodes: 10 -> 20  (reconfigure)`."""
        if self.note:
            what = self.note
        elif self.old is ABSENT:
            what = f"added {_item(self.new)}" if isinstance(self.new, BaseModel) else f"(absent) -> {show(self.new)}"
        elif self.new is ABSENT:
            what = f"removed {_item(self.old)}" if isinstance(self.old, BaseModel) else f"{show(self.old)} -> (absent)"
        else:
            what = f"{show(self.old)} -> {show(self.new)}"
        return f"{format_path(self.path)}: {what}  ({self.policy.label})"


def show(value: Any) -> str:
    """A value as it would read in the YAML (flow style for sections and lists)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, Enum):
        value = value.value
    plain = isinstance(value, str) and _PLAIN.match(value) and value == value.strip()
    if plain and value not in ("null", "true", "false"):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


_KINDS = {"SlurmQos": "qos", "SlurmAccount": "account", "ExistingSubnet": "subnet", "RemoteRegion": "remote region"}
_KINDS |= {"ExtraMount": "mount"}


def _item(model: BaseModel) -> str:
    kind = _KINDS.get(type(model).__name__, type(model).__name__.lower())
    key = _key_field(type(model))
    return f"{kind} {getattr(model, key)!r}" if key else kind


def _key_field(model: type[BaseModel]) -> str | None:
    return next((k for k in ITEM_KEYS if k in model.model_fields), None)


def _change(path: Path, old: Any, new: Any) -> Change:
    rule = rule_for(path)
    policy, reason = rule.policy, rule.reason
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (old, new))
    if rule.grows_only and numbers and new < old:
        policy, reason = Policy.NOT_ALLOWED, f"cannot shrink: {rule.reason}"
    return Change(path, old, new, policy, reason)


def _diff(old: Any, new: Any, path: Path) -> Iterator[Change]:
    if isinstance(old, BaseModel) and isinstance(new, BaseModel) and type(old) is type(new):
        for name in type(new).model_fields:
            yield from _diff(getattr(old, name), getattr(new, name), (*path, name))
    elif _both(old, new, list):
        yield from _diff_list(_empty(old, []), _empty(new, []), path)
    elif _both(old, new, dict):
        old_map, new_map = _empty(old, {}), _empty(new, {})
        for key in list(old_map) + [k for k in new_map if k not in old_map]:
            yield from _diff(old_map.get(key, ABSENT), new_map.get(key, ABSENT), (*path, Key(key)))
    elif old is ABSENT or new is ABSENT or old != new:
        yield _change(path, old, new)


def _both(old: Any, new: Any, kind: type) -> bool:
    """Both sides are `kind`, or one is and the other is null / absent (compared as empty)."""
    sides = (old, new)
    return any(isinstance(s, kind) for s in sides) and all(
        isinstance(s, kind) or s is None or s is ABSENT for s in sides
    )


def _empty(value: Any, empty: Any) -> Any:
    return empty if value is None or value is ABSENT else value


def _keys(items: list[Any]) -> list[Any] | None:
    """The items' keys when every item is a section with a key field and the keys are unique; else None."""
    if not items or not all(isinstance(i, BaseModel) for i in items):
        return None
    field = _key_field(type(items[0]))
    if field is None:
        return None
    keys = [getattr(i, field) for i in items]
    return keys if len(set(keys)) == len(keys) else None


def _diff_list(old: list[Any], new: list[Any], path: Path) -> Iterator[Change]:
    old_keys, new_keys = _keys(old), _keys(new)
    keyed = (old_keys is not None or not old) and (new_keys is not None or not new)
    if keyed and (old or new):
        old_at = {k: i for i, k in enumerate(old_keys or [])}
        new_at = {k: i for i, k in enumerate(new_keys or [])}
        for key, index in old_at.items():
            if key not in new_at:
                yield _change((*path, index), old[index], ABSENT)
        for key, index in new_at.items():
            if key in old_at:
                yield from _diff(old[old_at[key]], new[index], (*path, index))
            else:
                yield _change((*path, index), ABSENT, new[index])
        return
    for index in range(max(len(old), len(new))):
        before = old[index] if index < len(old) else ABSENT
        after = new[index] if index < len(new) else ABSENT
        if before is ABSENT or after is ABSENT:
            yield _change((*path, index), before, after)
        else:
            yield from _diff(before, after, (*path, index))


def _effective(config: ElasticSlurmConfig) -> ElasticSlurmConfig:
    """The config with `accounting.host_cluster` resolved (stacks/app_builder.py host_cluster)."""
    host = config.accounting_host
    return config.model_copy(update={"accounting": config.accounting.model_copy(update={"host_cluster": host})})


def _placement_groups_retagged(old: ElasticSlurmConfig, new: ElasticSlurmConfig) -> Iterator[Change]:
    """AWS::EC2::PlacementGroup's Tags are create-only: a tag edit re-creates every placement group of the cluster and
    so changes its pool's launch template."""
    for ci, cluster in enumerate(new.clusters):
        try:
            before = old.cluster(cluster.name)
        except KeyError:
            continue
        if {**old.tags, **before.tags} == {**new.tags, **cluster.tags}:
            continue
        for pi, partition in enumerate(cluster.partitions):
            for qi, pool in enumerate(partition.pools):
                if pool.placement_group:
                    yield Change(
                        ("clusters", ci, "partitions", pi, "pools", qi, "placement_group"),
                        True,
                        True,
                        Policy.DRAIN_AND_REPLACE,
                        "placement group tags are create-only: CloudFormation re-creates the group, and the pool's "
                        "launch template names it",
                        note="placement group re-created (tags changed)",
                    )


def diff(old: ElasticSlurmConfig, new: ElasticSlurmConfig) -> list[Change]:
    """Every change from `old` to `new`, in the new file's order (removed items where they were)."""
    changes = list(_diff(_effective(old), _effective(new), ()))
    return changes + list(_placement_groups_retagged(old, new))


def worst(changes: list[Change]) -> Policy | None:
    """The most disruptive policy among the changes (None when there are none)."""
    return max((c.policy for c in changes), default=None)
