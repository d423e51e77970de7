"""Cross-field rules of `images.base_os`: what the base OS's images can build (cluster_config/os_support.py).

The image build steps read the same table, so a config these rules accept is one whose image steps have what they
need: NVIDIA's CUDA repository for every GPU pool's architecture, the EFA installer for GPU images, an FSx for Lustre
client when the cluster mounts FSx for Lustre.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from cluster_config.model import Cluster
from cluster_config.os_support import OS_SUPPORT, OsSupport


def os_problems(
    cluster: Cluster, path: str, architecture_of: Callable[[str], str], table: Mapping[str, OsSupport] = OS_SUPPORT
) -> Iterator[tuple[str, str]]:
    """(YAML path, message) per combination the cluster's base OS cannot build. `architecture_of` maps an instance
    type to x86_64/arm64 (cluster_config.checks); `table` is the per-OS table (a variant in the contract tests)."""
    base_os = cluster.images.base_os
    entry = table[base_os]
    if cluster.storage.fsx_lustre is not None and entry.lustre_client == "none":
        yield (
            f"{path}.storage.fsx_lustre",
            f"AWS publishes no FSx for Lustre client for base_os {base_os}: choose another images.base_os",
        )
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            if pool.gpu is None:
                continue
            where = f"{path}.partitions[{pi}].pools[{qi}].gpu"
            arch = architecture_of(pool.instance_types[0])
            if arch not in entry.cuda_repo:
                supported = sorted(name for name, row in table.items() if arch in row.cuda_repo)
                yield (
                    where,
                    f"NVIDIA publishes no CUDA repository for base_os {base_os} on {arch}: a GPU image cannot be built"
                    f" (images.base_os with one: {', '.join(supported) or 'none'})",
                )
            if not entry.efa:
                yield where, f"the EFA installer does not support base_os {base_os}: a GPU image cannot be built"
