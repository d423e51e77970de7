"""Cross-field checks of the Slurm settings a site adds to what elastic-slurm renders: `(path, message)` pairs, one per
problem (wired into `cluster_config.checks.check`).

- SlurmctldParameters (`clusters[].slurm_settings`) is merged with the product's own list
  (`slurm_settings.PRODUCT_SLURMCTLD_PARAMETERS`, slurm_plugin/render/parameter_lists.py): an entry naming a product
  parameter with another value, or one the plugin cannot work with (`REFUSED_SLURMCTLD_PARAMETERS`), is refused.
- PrologTimeout / PrologEpilogTimeout (`clusters[].slurm_settings`): slurmctld kills PrologSlurmctld after it
  (slurm.conf(5): "If the PrologSlurmctld times out, the job is requeued if possible"), and the product's
  PrologSlurmctld waits up to `clusters[].slurm.resume_timeout` for a job's nodes to boot: a shorter prolog timeout
  requeues every job whose nodes boot slower than it. PrologTimeout replaces PrologEpilogTimeout for prologs. Without
  early start (`clusters[].slurm.early_start: false`) there is no PrologSlurmctld, and no such limit.
- The node count: TreeWidth=65533 (the largest Slurm accepts, render/cluster.py) lets slurmctld reach every node
  directly (cloud nodes have no addresses slurmd could forward to through a tree); a cluster's nodes (the sum of its
  pools' max_nodes) must fit in it.
- `preemption.grace_time` with `type: qos`: Slurm reads the grace time of the preempted job's QOS, not the partition's.
  `slurm-accounting-apply` sets it (sacctmgr GraceTime) on every QOS another QOS may preempt, so the QOS (shared by
  every cluster of the file) need the same grace time on every cluster that preempts by QOS, a slurmdbd, and at least
  one QOS that others preempt.
- PrologFlags with `directory.pam_slurm_adopt`: the module adopts an SSH session only into a job's `extern` step, which
  exists with `PrologFlags=Contain` (rendered by the product); a site's own PrologFlags replaces that line, so it must
  keep `contain`.
- A pool's own node layout (Sockets, CoresPerSocket, ... in `pools[].slurm_settings`, cluster_config/node_layout.py):
  positive integers, not both Sockets and SocketsPerBoard; whether it makes the pool's CPUs needs the instance types'
  sizes, so `validate --cache` checks that (cluster_config/instance_checks.py; render writes the product's layout
  instead of one that misses them).
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.model import Cluster, ElasticSlurmConfig
from cluster_config.node_layout import layout_problems
from cluster_config.slurm_settings import (
    PRODUCT_SLURMCTLD_PARAMETERS,
    REFUSED_SLURMCTLD_PARAMETERS,
    SettingValue,
    render_value,
)

# slurm.conf(5) TreeWidth: "The value may not exceed 65533."
MAX_TREE_WIDTH = 65533
PROLOG_TIMEOUT_KEYS = ("PrologTimeout", "PrologEpilogTimeout")  # the first one set applies to prologs


def slurm_problems(config: ElasticSlurmConfig) -> Iterator[tuple[str, str]]:
    """Every problem of the Slurm settings of `config`'s clusters."""
    for index, cluster in enumerate(config.clusters):
        path = f"clusters[{index}]"
        yield from slurmctld_parameter_problems(cluster, path)
        yield from prolog_timeout_problems(cluster, path)
        yield from node_count_problems(cluster, path)
        yield from prolog_flags_problems(cluster, path)
        yield from node_layout_problems(cluster, path)
    yield from grace_time_problems(config)


def _setting(settings: dict[str, SettingValue], key: str) -> tuple[str, SettingValue] | None:
    """(the spelling the site used, value) of `key` in `settings` (Slurm reads keys case-insensitively), or None."""
    for name, value in settings.items():
        if name.lower() == key.lower():
            return name, value
    return None


def slurmctld_parameter_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """A site's SlurmctldParameters entries that conflict with the product's or that the plugin refuses."""
    found = _setting(cluster.slurm_settings, "SlurmctldParameters")
    if found is None:
        return
    name, value = found
    where = f"{path}.slurm_settings.{name}"
    product = {_param_name(p): p for p in PRODUCT_SLURMCTLD_PARAMETERS}
    for word in (w.strip() for w in render_value(value).split(",") if w.strip()):
        key = _param_name(word)
        if key in REFUSED_SLURMCTLD_PARAMETERS:
            yield where, f"'{word}' is not allowed: {REFUSED_SLURMCTLD_PARAMETERS[key]}"
        elif key in product and word.lower() != product[key].lower():
            yield where, f"'{word}' conflicts with elastic-slurm's '{product[key]}' (the power-save plugin needs it)"


def _param_name(word: str) -> str:
    return word.split("=", 1)[0].strip().lower()


def prolog_timeout_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """A prolog timeout that would kill the product's PrologSlurmctld before a node may have booted (no
    PrologSlurmctld with `clusters[].slurm.early_start: false`: nothing waits for a boot then)."""
    if not getattr(cluster.slurm, "early_start", True):
        return
    resume_timeout = cluster.slurm.resume_timeout
    for key in PROLOG_TIMEOUT_KEYS:
        found = _setting(cluster.slurm_settings, key)
        if found is None:
            continue
        name, value = found
        where = f"{path}.slurm_settings.{name}"
        text = render_value(value)
        if isinstance(value, bool) or not text.isdigit():
            yield where, f"'{text}' is not a number of seconds"
        elif int(text) <= resume_timeout:
            yield (
                where,
                f"{text} s must exceed clusters[].slurm.resume_timeout ({resume_timeout} s): slurmctld kills the "
                "prolog that waits for a job's nodes to boot after it and requeues the job",
            )
        return  # PrologTimeout, when set, replaces PrologEpilogTimeout for prologs (slurm.conf(5))


def node_count_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """A cluster with more nodes than slurmctld can reach with TreeWidth=65533."""
    total = sum(pool.max_nodes for part in cluster.partitions for pool in part.pools)
    if total > MAX_TREE_WIDTH:
        yield (
            f"{path}.partitions",
            f"{total} nodes (the pools' max_nodes added up) exceed {MAX_TREE_WIDTH}, the most slurmctld reaches "
            "directly (TreeWidth's limit): lower max_nodes or split the cluster",
        )


def node_layout_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """A pool's own node layout that Slurm would misread whatever the instance type (its CPUs unknown here)."""
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            for problem in layout_problems(pool.slurm_settings):
                yield f"{path}.partitions[{pi}].pools[{qi}].slurm_settings", problem


def grace_time_problems(config: ElasticSlurmConfig) -> Iterator[tuple[str, str]]:
    """`preemption.grace_time` with `type: qos` that the QOS could not carry."""
    first: tuple[int, int] | None = None  # (cluster index, grace time) of the first cluster preempting by QOS
    preempted = {name for qos in config.qos for name in qos.preempt}
    for index, cluster in enumerate(config.clusters):
        policy = cluster.preemption
        if policy.type != "qos":
            continue
        where = f"clusters[{index}].preemption.grace_time"
        if first is None:
            first = (index, policy.grace_time)
        elif policy.grace_time != first[1]:
            yield (
                where,
                f"{policy.grace_time} differs from clusters[{first[0]}]'s {first[1]}: with type qos the grace time "
                "is the preempted QOS's (sacctmgr GraceTime), and the QOS are shared by every cluster of the file",
            )
        if not policy.grace_time:
            continue
        if config.accounting.mode == "none":
            yield where, "with type qos the grace time is set on the QOS in slurmdbd: set accounting.mode"
        elif not preempted:
            yield where, "with type qos the grace time is set on the QOS others preempt, and no qos[] preempts another"


def grace_time_of_qos(config: ElasticSlurmConfig) -> int | None:
    """The GraceTime (seconds) the preempted QOS carry: the grace time of the clusters preempting by QOS (the same on
    each, `grace_time_problems`); None when no cluster preempts by QOS (the QOS's GraceTime is then left alone)."""
    for cluster in config.clusters:
        if cluster.preemption.type == "qos":
            return cluster.preemption.grace_time
    return None


def prolog_flags_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """A site's PrologFlags without `contain` while pam_slurm_adopt needs the job's extern step."""
    if cluster.directory is None or not cluster.directory.pam_slurm_adopt:
        return
    found = _setting(cluster.slurm_settings, "PrologFlags")
    if found is None:
        return
    name, value = found
    flags = {flag.strip().lower() for flag in render_value(value).split(",")}
    if "contain" not in flags:
        yield (
            f"{path}.slurm_settings.{name}",
            "must include Contain while directory.pam_slurm_adopt is on (the module adopts SSH sessions into the "
            "job's extern step, which only PrologFlags=Contain creates)",
        )
