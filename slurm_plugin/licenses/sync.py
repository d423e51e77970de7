"""License sync: what the license servers say, minus what Slurm jobs hold, becomes Slurm's remote-license numbers.

Pure core plus orchestration over two small Protocols (license servers, Slurm), so tests use fakes and the e2e test
uses the real sacctmgr/scontrol with a fake `lmutil` on PATH.

Per license, with the server's `issued` and `in_use` for its feature and `held` = licenses Slurm jobs hold now:
- Slurm >= 23.02: `count = issued`, `lastconsumed = in_use`; slurmctld itself subtracts its own jobs' share.
- Slurm 22.05 (no LastConsumed): `count = issued - max(0, in_use - held)`, i.e. the licenses used outside Slurm are
  taken away from what Slurm may hand out.
A server that fails, prints garbage, or lacks the feature leaves the license untouched (Slurm keeps the last good
numbers, which are also kept in the state file), and the failure is logged and counted. Nothing is ever zeroed
because of a failure; only a server that answers with 0 issued licenses can bring a count to 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cluster_config.model import ElasticSlurmConfig
from slurm_plugin.accounting.diff import SlurmVersion, license_server
from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError

LOG = logging.getLogger(__name__)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyncedLicense(_Frozen):
    """One license kept in sync with a license server."""

    name: str = Field(description="Slurm license (sacctmgr resource) name.")
    server: str = Field(description="sacctmgr server; jobs request name@server.")
    server_type: Literal["flexlm", "rlm"]
    address: str = Field(description="port@host given to lmutil/rlmutil -c.")
    feature: str = Field(description="Feature name on the license server.")
    clusters: list[str] = Field(description="Clusters whose jobs may hold this license.")

    @property
    def key(self) -> str:
        return f"{self.name}@{self.server}"


class SyncConfig(_Frozen):
    """The sync's own config file (JSON), rendered from the cluster config."""

    local_cluster: str = Field(description="Cluster this sync runs on (scontrol without -M).")
    licenses: list[SyncedLicense]
    lmutil: str = "lmutil"
    rlmutil: str = "rlmutil"
    timeout_seconds: float = 30.0


class ServerHealth(_Frozen):
    """Failure counters of one license server (or of `slurm` itself)."""

    failures_total: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    last_success: float | None = None


class LastGood(_Frozen):
    """The last numbers a license was synced from."""

    issued: int
    in_use: int
    held_by_slurm: int
    count: int
    last_consumed: int | None = None
    at: float


class SyncState(_Frozen):
    """Persisted between runs (JSON in the state dir)."""

    servers: dict[str, ServerHealth] = Field(default_factory=dict)
    licenses: dict[str, LastGood] = Field(default_factory=dict)


@dataclass(frozen=True)
class CurrentLicense:
    """What slurmdbd holds for a license now."""

    count: int
    last_consumed: int | None = None


@dataclass(frozen=True)
class Update:
    """New numbers for one license."""

    name: str
    server: str
    count: int
    last_consumed: int | None
    reason: str


class LicenseServers(Protocol):
    """Queries license servers."""

    def query(self, server_type: str, address: str) -> dict[str, FeatureUsage]:
        """Usage per feature; raises LicenseServerError when the server fails or its output is unusable."""


class SlurmLicenses(Protocol):
    """Slurm's side: version, current numbers, licenses held by jobs, and updates."""

    def version(self) -> SlurmVersion:
        """Slurm version (decides count vs lastconsumed)."""

    def current(self) -> dict[str, CurrentLicense]:
        """Current numbers keyed name@server."""

    def held(self, cluster: str) -> dict[str, int]:
        """Licenses held by jobs of `cluster`, keyed name@server; raises LicenseServerError if unknown."""

    def update(self, update: Update) -> None:
        """Write new numbers (sacctmgr modify resource)."""


def sync_config_from(config: ElasticSlurmConfig, local_cluster: str) -> SyncConfig:
    """The sync config of every license with a server (flexlm or rlm); on-prem clusters share it too."""
    names = config.slurm_cluster_names()
    synced = [
        SyncedLicense(
            name=lic.name,
            server=license_server(lic),
            server_type=lic.server_type,
            address=lic.server,
            feature=lic.feature or lic.name,
            clusters=sorted(lic.clusters) if lic.clusters else names,
        )
        for lic in config.licenses
        if lic.server_type in ("flexlm", "rlm") and lic.server is not None
    ]
    return SyncConfig(local_cluster=local_cluster, licenses=synced)


def decide(
    lic: SyncedLicense, usage: FeatureUsage, held: int, current: CurrentLicense | None, version: SlurmVersion
) -> Update | None:
    """New numbers for one license, or None when Slurm already has them."""
    if version.has_lastconsumed:
        count, last = usage.issued, usage.in_use
        reason = f"issued={usage.issued} in_use={usage.in_use}"
        if current is not None and current.count == count and current.last_consumed == last:
            return None
        return Update(lic.name, lic.server, count, last, reason)
    outside = max(0, usage.in_use - held)
    count = max(0, usage.issued - outside)
    if current is not None and current.count == count:
        return None
    reason = f"issued={usage.issued} in_use={usage.in_use} held_by_slurm={held} -> used outside Slurm={outside}"
    return Update(lic.name, lic.server, count, None, reason)


def record_failure(state: SyncState, source: str, error: str) -> SyncState:
    """The state with one more failure of `source` (a server address, or `slurm`)."""
    old = state.servers.get(source, ServerHealth())
    health = old.model_copy(
        update={
            "failures_total": old.failures_total + 1,
            "consecutive_failures": old.consecutive_failures + 1,
            "last_error": error,
        }
    )
    return state.model_copy(update={"servers": {**state.servers, source: health}})


def record_success(state: SyncState, source: str, now: float) -> SyncState:
    """The state with `source` healthy again (total failures kept)."""
    old = state.servers.get(source, ServerHealth())
    health = old.model_copy(update={"consecutive_failures": 0, "last_success": now})
    return state.model_copy(update={"servers": {**state.servers, source: health}})


@dataclass(frozen=True)
class SyncResult:
    """What one run did."""

    updates: list[Update]
    failures: list[str]
    state: SyncState


def run_sync(
    config: SyncConfig,
    servers: LicenseServers,
    slurm: SlurmLicenses,
    state: SyncState,
    now: float,
    dry_run: bool = False,
) -> SyncResult:
    """Query every server once, decide every license, apply the updates; never raises for a server failure."""
    version = slurm.version()
    current = slurm.current()
    usages: dict[str, dict[str, FeatureUsage] | None] = {}
    failures: list[str] = []
    for lic in config.licenses:
        if lic.address in usages:
            continue
        try:
            usages[lic.address] = servers.query(lic.server_type, lic.address)
            state = record_success(state, lic.address, now)
        except LicenseServerError as exc:
            usages[lic.address] = None
            state = record_failure(state, lic.address, str(exc))
            failures.append(f"{lic.address}: {exc}")
            LOG.warning("license server %s failed (keeping the last good numbers): %s", lic.address, exc)
    held: dict[str, dict[str, int] | None] = {}
    if not version.has_lastconsumed:
        held, state, errors = _held_by_slurm(config, slurm, state, now)
        failures += errors
    updates: list[Update] = []
    licenses = dict(state.licenses)
    for lic in config.licenses:
        features = usages.get(lic.address)
        if features is None:
            continue
        usage = features.get(lic.feature)
        slurm_held = _sum_held(lic, held, version)
        problem = _unusable(lic, usage, slurm_held)
        if problem or usage is None or slurm_held is None:
            failures.append(f"{lic.key}: {problem}")
            LOG.warning("%s: %s; keeping the last good numbers", lic.key, problem)
            continue
        update = decide(lic, usage, slurm_held, current.get(lic.key), version)
        if update is not None:
            LOG.info(
                "%s: count=%d%s (%s)%s",
                lic.key,
                update.count,
                "" if update.last_consumed is None else f" lastconsumed={update.last_consumed}",
                update.reason,
                " (dry run)" if dry_run else "",
            )
            if not dry_run:
                slurm.update(update)
            updates.append(update)
        now_in_slurm = current.get(lic.key) or CurrentLicense(count=usage.issued)
        licenses[lic.key] = LastGood(
            issued=usage.issued,
            in_use=usage.in_use,
            held_by_slurm=slurm_held,
            count=update.count if update else now_in_slurm.count,
            last_consumed=update.last_consumed if update else now_in_slurm.last_consumed,
            at=now,
        )
    state = state.model_copy(update={"licenses": licenses})
    return SyncResult(updates=updates, failures=failures, state=state)


def _sum_held(lic: SyncedLicense, held: dict[str, dict[str, int] | None], version: SlurmVersion) -> int | None:
    """Licenses Slurm jobs hold over every cluster of the license; None if a cluster did not answer."""
    if version.has_lastconsumed:
        return 0  # slurmctld accounts for its own jobs itself
    total = 0
    for cluster in lic.clusters:
        per_cluster = held.get(cluster)
        if per_cluster is None:
            return None
        total += per_cluster.get(lic.key, 0)
    return total


def _unusable(lic: SyncedLicense, usage: FeatureUsage | None, held: int | None) -> str | None:
    if held is None:
        return "licenses held by Slurm jobs are unknown (a cluster's slurmctld did not answer)"
    if usage is None:
        return f"feature {lic.feature} is not in the {lic.server_type} output of {lic.address}"
    if usage.uncounted:
        return f"feature {lic.feature} is uncounted (node-locked): nothing to sync"
    return None


def _held_by_slurm(
    config: SyncConfig, slurm: SlurmLicenses, state: SyncState, now: float
) -> tuple[dict[str, dict[str, int] | None], SyncState, list[str]]:
    """Licenses held by jobs per cluster (None for a cluster that did not answer), the new state, the errors."""
    held: dict[str, dict[str, int] | None] = {}
    errors: list[str] = []
    for cluster in sorted({c for lic in config.licenses for c in lic.clusters}):
        source = f"slurm:{cluster}"
        try:
            held[cluster] = slurm.held(cluster)
            state = record_success(state, source, now)
        except LicenseServerError as exc:
            LOG.warning("cannot read the licenses Slurm jobs hold on %s: %s", cluster, exc)
            held[cluster] = None
            state = record_failure(state, source, str(exc))
            errors.append(f"{source}: {exc}")
    return held, state, errors
