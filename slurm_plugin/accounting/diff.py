"""Pure core of the sacctmgr adapter: the accounting state as plain data, the desired state from the config, the diff.

`diff(current, desired, version)` returns the sacctmgr commands that turn `current` into `desired`, in a safe order
(clusters, QOS and their preemption grace times, accounts, users, licenses with shrinking shares first, federation
last). Applying them and diffing
again yields no commands: that is the idempotency contract, tested against a real slurmdbd.

Nothing is ever deleted except what we mark as ours: remote licenses whose description is `MANAGED_MARK`. Clusters,
accounts, users, QOS and federations missing from the config are left alone (removing them loses history).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from cluster_config.model import ElasticSlurmConfig, License
from cluster_config.slurm_checks import grace_time_of_qos

MANAGED_MARK = "elastic-slurm"
STATIC_SERVER = "slurmdb"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class SlurmVersion:
    """What the installed Slurm supports, from `sacctmgr --version`."""

    major: int
    minor: int

    @property
    def has_lastconsumed(self) -> bool:
        """Slurm >= 23.02 tracks licenses used outside Slurm (LastConsumed)."""
        return (self.major, self.minor) >= (23, 2)

    @property
    def allowed_keyword(self) -> bool:
        """Slurm >= 23.02 names a cluster's share `allowed=` (22.05: `percentallowed=`). It stays a percentage unless
        the resource has Flags=Absolute, which we do not set (measured on 26.05: allowed=50 of 50 licenses gives
        slurmctld 25)."""
        return (self.major, self.minor) >= (23, 2)


class Resource(_Frozen):
    """A remote license (sacctmgr resource).

    `allowed` is cluster → percent of `count`, in a desired state and as sacctmgr shows it (every supported release).
    """

    name: str
    server: str
    server_type: str = ""
    count: int
    description: str = MANAGED_MARK
    allowed: dict[str, int] = Field(default_factory=dict)
    dynamic_count: bool = Field(default=False, description="The license sync owns the count once the license exists.")

    @property
    def key(self) -> str:
        """`name@server`, the license name jobs request."""
        return f"{self.name}@{self.server}"


class Qos(_Frozen):
    """A QOS as sacctmgr shows it."""

    name: str
    description: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    preempt_mode: str = "cluster"


class Account(_Frozen):
    """An account as sacctmgr shows it."""

    name: str
    description: str
    organization: str
    parent: str = "root"


class AccountingState(_Frozen):
    """The objects we manage, as slurmdbd holds them (current) or the config wants them (desired).

    In a desired state, `cluster_features[c] is None` means "do not manage features of c".
    """

    clusters: list[str] = Field(default_factory=list)
    cluster_features: dict[str, list[str] | None] = Field(default_factory=dict)
    federations: dict[str, list[str]] = Field(default_factory=dict)
    qos: dict[str, Qos] = Field(default_factory=dict)
    qos_grace: dict[str, int] = Field(
        default_factory=dict,
        description="QOS → GraceTime in seconds (current: every QOS; desired: the QOS others preempt, when a cluster "
        "preempts by QOS — Slurm reads the preempted job's QOS then, clusters[].preemption.grace_time)",
    )
    accounts: dict[str, Account] = Field(default_factory=dict)
    users: dict[str, str] = Field(default_factory=dict, description="user → default account")
    associations: list[tuple[str, str, str]] = Field(default_factory=list, description="(cluster, account, user)")
    account_qos: dict[str, list[str]] = Field(
        default_factory=dict, description="'cluster/account' → QOS its account association may use (desired: at least)"
    )
    resources: dict[str, Resource] = Field(default_factory=dict, description="keyed by name@server")


@dataclass(frozen=True)
class Change:
    """One sacctmgr command (arguments after `sacctmgr -i`) and a one-line summary for the log."""

    argv: tuple[str, ...]
    summary: str


def license_server(lic: License) -> str:
    """The sacctmgr `server` of a license: the host of `port@host`, or `slurmdb` for static licenses."""
    if lic.server_type == "static" or lic.server is None:
        return STATIC_SERVER
    return lic.server.split("@", 1)[1]


def license_shares(lic: License, cluster_names: list[str]) -> dict[str, int]:
    """Percent per cluster: as configured, else 100 split evenly (Slurm refuses shares adding up to over 100)."""
    if lic.clusters:
        return dict(lic.clusters)
    share = 100 // len(cluster_names)
    return {name: share for name in cluster_names}


def desired_state(config: ElasticSlurmConfig) -> AccountingState:
    """What the config asks slurmdbd to hold: on-prem clusters too (their associations and license shares)."""
    names = config.slurm_cluster_names()
    fed = config.federation
    features: dict[str, list[str] | None] = {
        name: (sorted(fed.cluster_features.get(name, [])) if fed and name in fed.clusters else None) for name in names
    }
    qos = {
        q.name: Qos(
            name=q.name,
            description=q.description or q.name,
            priority=q.priority,
            preempt=tuple(sorted(q.preempt)),
            preempt_mode=q.preempt_mode,
        )
        for q in config.qos
    }
    grace = grace_time_of_qos(config)
    preempted = sorted({name for q in config.qos for name in q.preempt})
    qos_grace = {name: grace for name in preempted} if grace is not None else {}
    accounts = {
        a.name: Account(
            name=a.name, description=a.description or a.name, organization=a.organization or a.name, parent=a.parent
        )
        for a in config.accounts
    }
    users: dict[str, str] = {}
    assocs: set[tuple[str, str, str]] = set()
    for account in config.accounts:
        for cluster in names:
            assocs.add((cluster, account.name, ""))
            for user in account.users:
                assocs.add((cluster, account.name, user))
        for user in account.users:
            users.setdefault(user, account.name)
    # With AccountingStorageEnforce=qos (render_base), a job may use only the QOS its association lists: every
    # account of the config may use every QOS the config defines (its users inherit the list)
    allowed = sorted({"normal", *qos}) if qos else []
    account_qos = {f"{c}/{a}": allowed for (c, a, u) in assocs if not u} if allowed else {}
    resources = {}
    for lic in config.licenses:
        shares = license_shares(lic, names)
        resource = Resource(
            name=lic.name,
            server=license_server(lic),
            server_type="" if lic.server_type == "static" else lic.server_type,
            count=lic.count,
            allowed=shares,
            dynamic_count=lic.server_type != "static",
        )
        resources[resource.key] = resource
    return AccountingState(
        clusters=names,
        cluster_features=features,
        federations={fed.name: sorted(fed.clusters)} if fed else {},
        qos=qos,
        qos_grace=qos_grace,
        accounts=accounts,
        users=users,
        associations=sorted(assocs),
        account_qos=account_qos,
        resources=resources,
    )


def diff(current: AccountingState, desired: AccountingState, version: SlurmVersion) -> list[Change]:
    """The sacctmgr commands that bring `current` to `desired` (empty when nothing differs)."""
    return [
        *_clusters(current, desired),
        *_qos(current, desired),
        *_qos_grace(current, desired),
        *_accounts(current, desired),
        *_users(current, desired),
        *_account_qos(current, desired),
        *_resources(current, desired, version),
        *_federations(current, desired),
    ]


def _same_text(a: str, b: str) -> bool:
    """sacctmgr lower-cases descriptions and organizations: compare like it does."""
    return a.strip().lower() == b.strip().lower()


def _clusters(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    for name in desired.clusters:
        if name not in current.clusters:
            yield Change(("add", "cluster", name), f"add cluster {name}")
    for name, features in desired.cluster_features.items():
        if features is None:
            continue
        if sorted(current.cluster_features.get(name) or []) != sorted(features):
            value = ",".join(features)
            yield Change(
                ("modify", "cluster", "where", f"name={name}", "set", f"features={value}"),
                f"cluster {name} features={value or '(none)'}",
            )


def _qos(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    for name, want in desired.qos.items():
        settings = {
            "description": want.description,
            "priority": str(want.priority),
            "preempt": ",".join(want.preempt),
            "preemptmode": want.preempt_mode,
        }
        have = current.qos.get(name)
        if have is None:
            args = [f"{k}={v}" for k, v in settings.items() if v != ""]
            yield Change(("add", "qos", name, *args), f"add qos {name}")
            continue
        changed = []
        if not _same_text(have.description, want.description):
            changed.append(f"description={want.description}")
        if have.priority != want.priority:
            changed.append(f"priority={want.priority}")
        if tuple(sorted(have.preempt)) != want.preempt:
            changed.append(f"preempt={settings['preempt']}")
        if have.preempt_mode.lower() != want.preempt_mode:
            changed.append(f"preemptmode={want.preempt_mode}")
        if changed:
            yield Change(
                ("modify", "qos", "where", f"name={name}", "set", *changed), f"qos {name}: {' '.join(changed)}"
            )


def _qos_grace(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    """GraceTime of the preempted QOS (after `_qos` added the new ones); a QOS neither slurmdbd nor the config has
    (e.g. a misspelt preempt entry) is skipped: sacctmgr would modify nothing."""
    for name, seconds in sorted(desired.qos_grace.items()):
        exists = name in current.qos or name in desired.qos
        if exists and current.qos_grace.get(name, 0) != seconds:
            yield Change(
                ("modify", "qos", "where", f"name={name}", "set", f"gracetime={seconds}"),
                f"qos {name}: gracetime={seconds}",
            )


def _accounts(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    have_assoc = set(current.associations)
    for name, want in desired.accounts.items():
        clusters = [c for (c, a, u) in desired.associations if a == name and u == "" and (c, a, u) not in have_assoc]
        have = current.accounts.get(name)
        if have is None or clusters:
            args = [f"description={want.description}", f"organization={want.organization}", f"parent={want.parent}"]
            if clusters:
                args.append(f"cluster={','.join(clusters)}")
            verb = "add account" if have is None else "add account associations"
            yield Change(("add", "account", name, *args), f"{verb} {name} on {','.join(clusters) or 'every cluster'}")
            if have is None:
                continue
        changed = []
        if not _same_text(have.description, want.description):
            changed.append(f"description={want.description}")
        if not _same_text(have.organization, want.organization):
            changed.append(f"organization={want.organization}")
        if changed:
            yield Change(
                ("modify", "account", "where", f"name={name}", "set", *changed), f"account {name}: {' '.join(changed)}"
            )


def _users(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    have_assoc = set(current.associations)
    missing: dict[tuple[str, str], list[str]] = {}
    for cluster, account, user in desired.associations:
        if user and (cluster, account, user) not in have_assoc:
            missing.setdefault((user, account), []).append(cluster)
    for (user, account), clusters in sorted(missing.items()):
        default = desired.users[user]
        yield Change(
            ("add", "user", user, f"account={account}", f"cluster={','.join(clusters)}", f"defaultaccount={default}"),
            f"add user {user} to account {account} on {','.join(clusters)}",
        )
    for user, default in desired.users.items():
        have = current.users.get(user)
        if have is not None and have != default:
            yield Change(
                ("modify", "user", "where", f"name={user}", "set", f"defaultaccount={default}"),
                f"user {user}: defaultaccount={default}",
            )


def _account_qos(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    """Grant each account association the QOS it lacks (never takes one away: an admin may have granted more)."""
    for key, want in sorted(desired.account_qos.items()):
        missing = sorted(set(want) - set(current.account_qos.get(key, [])))
        if missing:
            cluster, account = key.split("/", 1)
            yield Change(
                (
                    "modify",
                    "account",
                    "where",
                    f"name={account}",
                    f"cluster={cluster}",
                    "set",
                    f"qos+={','.join(missing)}",
                ),
                f"account {account} on {cluster}: may use qos {','.join(missing)}",
            )


def _share_arg(version: SlurmVersion) -> str:
    return "allowed" if version.allowed_keyword else "percentallowed"


def _resources(current: AccountingState, desired: AccountingState, version: SlurmVersion) -> Iterator[Change]:
    arg = _share_arg(version)
    grow: list[Change] = []
    for key, old in current.resources.items():
        if old.description == MANAGED_MARK and key not in desired.resources:
            yield Change(("delete", "resource", "where", f"name={old.name}", f"server={old.server}"), f"remove {key}")
    for key, want in desired.resources.items():
        where = (f"name={want.name}", f"server={want.server}")
        have = current.resources.get(key)
        if have is None:
            yield from _add_resource(want, arg)
            continue
        if have.count != want.count and not want.dynamic_count:
            # A count grows before and shrinks after the shares change (>= 23.02 shares are counts <= count).
            change = Change(("modify", "resource", "where", *where, "set", f"count={want.count}"), f"{key} count")
            if want.count > have.count:
                yield change
            else:
                grow.append(change)
        if have.server_type != want.server_type and want.server_type:
            yield Change(
                ("modify", "resource", "where", *where, "set", f"servertype={want.server_type}"), f"{key} type"
            )
        for cluster, value in have.allowed.items():
            if cluster not in want.allowed:
                yield Change(("delete", "resource", "where", *where, f"cluster={cluster}"), f"{key}: drop {cluster}")
            elif want.allowed[cluster] < value:
                yield Change(
                    (
                        "modify",
                        "resource",
                        "where",
                        *where,
                        f"cluster={cluster}",
                        "set",
                        f"{arg}={want.allowed[cluster]}",
                    ),
                    f"{key}: {cluster} {arg}={want.allowed[cluster]}",
                )
        for cluster, value in want.allowed.items():
            if cluster not in have.allowed:
                grow.append(
                    Change(("add", "resource", *where, f"cluster={cluster}", f"{arg}={value}"), f"{key}: add {cluster}")
                )
            elif value > have.allowed[cluster]:
                grow.append(
                    Change(
                        ("modify", "resource", "where", *where, f"cluster={cluster}", "set", f"{arg}={value}"),
                        f"{key}: {cluster} {arg}={value}",
                    )
                )
    yield from grow


def _add_resource(want: Resource, arg: str) -> Iterator[Change]:
    base = ["add", "resource", f"name={want.name}", f"server={want.server}", "type=license", f"count={want.count}"]
    base.append(f"description={want.description}")
    if want.server_type:
        base.append(f"servertype={want.server_type}")
    by_value: dict[int, list[str]] = {}
    for cluster, value in want.allowed.items():
        by_value.setdefault(value, []).append(cluster)
    groups = sorted(by_value.items())
    if not groups:
        yield Change(tuple(base), f"add license {want.key}")
        return
    first_value, first_clusters = groups[0]
    yield Change((*base, f"cluster={','.join(first_clusters)}", f"{arg}={first_value}"), f"add license {want.key}")
    for value, clusters in groups[1:]:
        yield Change(
            (
                "add",
                "resource",
                f"name={want.name}",
                f"server={want.server}",
                f"cluster={','.join(clusters)}",
                f"{arg}={value}",
            ),
            f"{want.key}: add {','.join(clusters)}",
        )


def _federations(current: AccountingState, desired: AccountingState) -> Iterator[Change]:
    for name, members in desired.federations.items():
        have = current.federations.get(name)
        value = ",".join(members)
        if have is None:
            yield Change(("add", "federation", name, f"clusters={value}"), f"add federation {name} ({value})")
        elif sorted(have) != sorted(members):
            yield Change(
                ("modify", "federation", "where", f"name={name}", "set", f"clusters={value}"),
                f"federation {name} members={value}",
            )
