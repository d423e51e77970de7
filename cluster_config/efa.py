"""Elastic Fabric Adapter facts and rules (pure): which pools get EFA, the network-card layout of their launch
template, and the combinations refused at `validate` (docs/efa.md).

Read by the validator (`efa_problems`), the launch templates (stacks/launch_templates.py) and the runtime manifest
(slurm_plugin/render/manifest.py), so the template's interfaces, the security group's self rules and the way the
plugin launches (CreateFleet only: RunInstances refuses an instance-level subnet next to a template's network
interfaces) all follow the same answer.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.model import Cluster, Pool

# Network cards of the instance types whose documented EFA layout spans several cards. Every other EFA-capable type
# gets one EFA (with ENA) as its primary interface, on network card 0 (correct on every EFA type; on a multi-card
# type it uses one card's bandwidth). p5.48xlarge and p5e.48xlarge have 32 network cards: "EFA configuration for P5
# and P5e instances", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html#efa-for-p5
EFA_NETWORK_CARDS = {"p5.48xlarge": 32, "p5e.48xlarge": 32}


def pool_uses_efa(pool: Pool) -> bool:
    """Whether `pool`'s nodes get EFA: its `efa` field, or (unset) on for a placement-group pool whose instance types
    all have a known multi-card EFA layout and which does not launch into a capacity reservation."""
    if pool.efa is not None:
        return pool.efa
    known = all(t in EFA_NETWORK_CARDS for t in pool.instance_types)
    return pool.placement_group and known and pool.capacity_reservation is None


def efa_layout_type(pool: Pool) -> str:
    """The instance type whose interface layout an EFA pool's template carries (all its types share one layout:
    `efa_problems` refuses others)."""
    return pool.instance_types[0]


def efa_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """(YAML path, message) for each EFA pool the launch template or the plugin could not serve."""
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            if not pool_uses_efa(pool):
                continue
            where = f"{path}.partitions[{pi}].pools[{qi}]"
            if pool.gpu is None:
                yield (
                    f"{where}.efa",
                    "EFA's software (driver, libfabric) is installed in the GPU image only (assets/imagebuilder/gpu.yaml): "
                    "an EFA pool needs `gpu`",
                )
            if len({EFA_NETWORK_CARDS.get(t, 1) for t in pool.instance_types}) > 1:
                yield (
                    f"{where}.instance_types",
                    "an EFA pool's instance types must share one network-card layout (the plugin overrides only "
                    f"the type, never the template's interfaces): {', '.join(pool.instance_types)}",
                )
            if pool.capacity_reservation is not None:
                yield (
                    f"{where}.efa",
                    "EFA with a capacity_reservation is not supported yet (a reservation launches with RunInstances, "
                    "which refuses a subnet next to the template's network interfaces): docs/efa.md",
                )
