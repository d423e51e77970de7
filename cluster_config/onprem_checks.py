"""Cross-field checks of `onprem_clusters` (docs/onprem-burst.md): `(path, message)` pairs, one per problem."""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.model import ElasticSlurmConfig


def onprem_problems(config: ElasticSlurmConfig) -> Iterator[tuple[str, str]]:
    """Every problem of the on-prem clusters of `config`."""
    if not config.onprem_clusters:
        return
    if config.accounting.mode == "none":
        yield "onprem_clusters", "an on-prem cluster joins through the shared accounting (mode 'create' or 'existing')"
    cloud = {c.name for c in config.clusters}
    members = set(config.federation.clusters) if config.federation else set()
    seen: set[str] = set()
    for index, site in enumerate(config.onprem_clusters):
        path = f"onprem_clusters[{index}]"
        if site.name in cloud:
            yield f"{path}.name", f"'{site.name}' is also a cluster of this file"
        elif site.name in seen:
            yield f"{path}.name", f"on-prem cluster '{site.name}' is listed twice"
        seen.add(site.name)
        for bi, target in enumerate(site.burst_to):
            if target not in cloud:
                yield f"{path}.burst_to[{bi}]", f"unknown cluster '{target}'"
            elif target in site.burst_to[:bi]:
                yield f"{path}.burst_to[{bi}]", f"cluster '{target}' is listed twice"
        targets = [t for t in dict.fromkeys(site.burst_to) if t in cloud]
        host = config.accounting_host
        shared = targets == [host] or (host in members and all(t in members for t in targets))
        if targets and not shared:
            yield (
                f"{path}.burst_to",
                f"the site uses one munge key for slurmdbd (on cluster '{host}') and every cluster it bursts to: "
                f"burst to '{host}', or to federation members with '{host}' a member",
            )
