"""The runtime manifest: everything the power-save plugin needs to know about the deployed cluster, as one JSON file.

`render` writes it from the cluster config plus the deployed infrastructure (`DeployedInfra`: subnet and launch
template ids, from CDK outputs on AWS or from `elastic-slurm local up` in the local cloud). ResumeProgram,
SuspendProgram and the cluster manager read only this file and the instance cache — never the YAML, never CDK.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slurm_plugin.powersave.background import MANIFEST_SCHEMA_VERSION  # the foreground checks it without pydantic
from slurm_plugin.tags import TAG_CLUSTER as TAG_CLUSTER  # re-exported: the plugin's modules import them from here
from slurm_plugin.tags import TAG_LAUNCH_REQUEST as TAG_LAUNCH_REQUEST
from slurm_plugin.tags import TAG_POOL as TAG_POOL

# Tag keys put on every instance the plugin launches.


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Location(_Frozen):
    """One place a pool may launch into: an AZ's subnet and the pool's launch template in that region."""

    region: str
    availability_zone: str
    subnet_id: str
    launch_template_id: str


class PoolManifest(_Frozen):
    """A pool as the plugin sees it. Nodes are `{node_prefix}{index}` for index 1..max_nodes."""

    partition: str
    pool: str
    node_prefix: str = Field(description="e.g. 'cpu-c7i-'")
    min_nodes: int
    max_nodes: int
    instance_types: list[str] = Field(description="Preference order.")
    purchase_option: str = Field(description="on_demand | spot | spot_then_on_demand")
    locations: list[Location] = Field(description="Priority order: AZs then regions.")
    placement_group: str | None = None
    spread_jobs_across_azs: bool = Field(False, description="A multi-node job's nodes may span AZs and regions.")
    resume_timeout: int = Field(600, description="Slurm's ResumeTimeout for this pool's nodes (seconds).")
    capacity_reservation_id: str | None = Field(None, description="Launch only into this capacity reservation.")
    capacity_block: bool = Field(False, description="The reservation is a Capacity Block (market capacity-block).")
    network_topology: bool = Field(
        False, description="The cluster manager places its nodes in topology.conf by EC2's network topology."
    )
    efa: bool = Field(
        False, description="The pool's launch template has EFA network interfaces: launched with CreateFleet only."
    )
    not_offered: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Instance type -> the pool's AZs where EC2 does not offer it (instance cache): never asked there.",
    )

    @property
    def key(self) -> str:
        """`partition-pool`, the value of the pool tag."""
        return f"{self.partition}-{self.pool}"


class Manifest(_Frozen):
    """The whole runtime manifest of one cluster."""

    schema_version: int = MANIFEST_SCHEMA_VERSION
    cluster: str
    home_region: str
    aws_endpoint_url: str | None = Field(None, description="Set only in the local cloud (moto server).")
    instance_cache_path: str
    state_dir: str = Field(description="Locks, copies of resume files, capacity cool-down state.")
    log_file: str
    node_names_dir: str | None = Field(
        None,
        description="Shared directory where resume writes one file per bound instance naming its node, for the node's"
        " bootstrap (slurm_plugin/powersave/node_names.py); None: not written.",
    )
    slurm_bin_dir: str = "/usr/bin"
    slurm_conf: str | None = None
    capacity_cooldown_seconds: int = 600
    boot_failure_limit: int = Field(10, description="Consecutive failed boots before a pool is protected; 0: never.")
    impaired_threshold_seconds: int = Field(300, description="An EC2 status check impaired this long drains the node.")
    tags: dict[str, str] = Field(default_factory=dict)
    pools: list[PoolManifest]

    def pool_of_node(self, node: str) -> PoolManifest | None:
        """The pool a node name belongs to, or None for a name this cluster does not have."""
        for pool in self.pools:
            rest = node[len(pool.node_prefix) :] if node.startswith(pool.node_prefix) else ""
            if rest.isdigit() and not rest.startswith("0") and 1 <= int(rest) <= pool.max_nodes:
                return pool
        return None


class ManifestError(Exception):
    """The manifest is missing, unreadable or of another schema version (one-line message)."""


def load_manifest(path: str | Path) -> Manifest:
    """Read a manifest; raises ManifestError with a one-line reason."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError(f"manifest {path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"manifest {path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or data.get("schema_version") != MANIFEST_SCHEMA_VERSION:
        raise ManifestError(f"manifest {path}: schema_version is not {MANIFEST_SCHEMA_VERSION}; re-run render")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"manifest {path}: {where}: {first['msg']}") from None


def write_manifest(manifest: Manifest, path: str | Path) -> None:
    """Write atomically (a reader never sees half a file)."""
    target = Path(path)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)


class DeployedInfra(_Frozen):
    """Ids of what the stacks (or `local up`) created, which render needs to write the manifest."""

    subnets: dict[str, str] = Field(description="AZ name → subnet id")
    launch_templates: dict[str, str] = Field(description="'{partition}-{pool}@{region}' → launch template id")
    placement_groups: dict[str, str] = Field(default_factory=dict, description="'{partition}-{pool}' → group name")
    aws_endpoint_url: str | None = None
