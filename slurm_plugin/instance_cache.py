"""The instance cache: what each EC2 instance type of the config is (vCPUs, cores, memory, GPUs, EFA) and what it costs.

`elastic-slurm instance-cache refresh` builds it once (see `instance_cache_aws`); render, resume and suspend only read
it — never DescribeInstanceTypes at run time. `load_cache` turns every way the file can be unusable (missing, corrupt,
older format, too old, lacking a type) into a `CacheError` with a one-line message that says how to fix it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CACHE_SCHEMA_VERSION = 1
ZONE_NAME = r"^[a-z0-9-]{1,64}$"  # an AZ or Local Zone name (us-east-1a, us-west-2-lax-1a)
REBUILD_HINT = "rebuild with `elastic-slurm instance-cache refresh`"


class CacheError(Exception):
    """The cache cannot be used (one-line message naming the file and the fix)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuInfo(_Frozen):
    """The accelerators of one instance type."""

    count: int = Field(ge=1)
    manufacturer: str
    name: str


class Prices(_Frozen):
    """USD per hour. `spot` is the latest Linux spot price per AZ; `on_demand` is null when it could not be had."""

    on_demand: float | None = None
    spot: dict[str, float] = Field(default_factory=dict, description="AZ → USD/hour")

    @property
    def spot_min(self) -> float | None:
        """The cheapest current spot price over the AZs, or None when unknown."""
        return min(self.spot.values()) if self.spot else None


class InstanceTypeInfo(_Frozen):
    """One instance type, as DescribeInstanceTypes describes it."""

    vcpus: int = Field(ge=1)
    # VCpuInfo.DefaultCores / DefaultThreadsPerCore; None in a cache written before they were recorded
    cores: int | None = Field(default=None, ge=1)
    threads_per_core: int | None = Field(default=None, ge=1)
    memory_mib: int = Field(ge=1)
    architecture: str = Field(description="x86_64 | arm64")
    gpus: GpuInfo | None = None
    efa: bool = False
    prices: Prices = Field(default_factory=Prices)
    # the region's AZs where EC2 offers the type (DescribeInstanceTypeOfferings); None in a cache written before they
    # were recorded (then every AZ is assumed to offer it). Names checked: validate prints them in its messages
    availability_zones: list[Annotated[str, Field(pattern=ZONE_NAME)]] | None = None

    @property
    def physical_cores(self) -> int:
        """Physical cores: the CPUs a node running one thread per core has. An entry written before cores were
        recorded gets a LOW guess — every vCPU on arm64 (Graviton runs one thread per core), else half of them (two
        threads per core, as on nearly every x86 type) — because a node with fewer CPUs online than slurm.conf says is
        drained by Slurm, while one with more only leaves some unused. Every config apply rebuilds the cache."""
        if self.cores is not None:
            return self.cores
        return self.vcpus if self.architecture == "arm64" else max(1, self.vcpus // 2)


class InstanceCache(_Frozen):
    """The whole cache: region → instance type → info."""

    schema_version: int = CACHE_SCHEMA_VERSION
    generated_at: datetime
    regions: dict[str, dict[str, InstanceTypeInfo]]

    def get(self, region: str, instance_type: str) -> InstanceTypeInfo:
        """The info of a type in a region; CacheError (stale cache) when the cache does not have it."""
        try:
            return self.regions[region][instance_type]
        except KeyError:
            raise CacheError(
                f"instance cache has no {instance_type} in {region} (stale for this config); {REBUILD_HINT}"
            ) from None

    def find(self, instance_type: str, regions: list[str]) -> InstanceTypeInfo:
        """The info of a type from the first of `regions` that has it (sizes do not vary by region)."""
        for region in regions:
            info = self.regions.get(region, {}).get(instance_type)
            if info is not None:
                return info
        where = ", ".join(regions)
        raise CacheError(f"instance cache has no {instance_type} in {where} (stale for this config); {REBUILD_HINT}")

    def missing(self, wanted: dict[str, set[str]]) -> list[str]:
        """`region/type` for each wanted type the cache lacks (empty when the cache covers the config)."""
        return sorted(f"{r}/{t}" for r, types in wanted.items() for t in types if t not in self.regions.get(r, {}))


def load_cache(path: str | Path, max_age: timedelta | None = None, now: datetime | None = None) -> InstanceCache:
    """Read the cache; CacheError (one line) when missing, corrupt, of another format or older than `max_age`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CacheError(
            f"instance cache {path}: not found; build it with `elastic-slurm instance-cache refresh`"
        ) from None
    except OSError as exc:
        raise CacheError(f"instance cache {path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CacheError(
            f"instance cache {path}: not valid JSON ({exc.msg} at line {exc.lineno}); {REBUILD_HINT}"
        ) from None
    if not isinstance(data, dict):
        raise CacheError(f"instance cache {path}: not a JSON object; {REBUILD_HINT}")
    version = data.get("schema_version")
    if version != CACHE_SCHEMA_VERSION:
        raise CacheError(
            f"instance cache {path}: schema_version {version!r} is not {CACHE_SCHEMA_VERSION}; {REBUILD_HINT}"
        )
    try:
        cache = InstanceCache.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CacheError(f"instance cache {path}: {where}: {first['msg']}; {REBUILD_HINT}") from None
    if max_age is not None:
        generated = cache.generated_at if cache.generated_at.tzinfo else cache.generated_at.replace(tzinfo=UTC)
        age = (now or datetime.now(UTC)) - generated
        if age > max_age:
            raise CacheError(f"instance cache {path}: {age.days} days old (limit {max_age.days}); {REBUILD_HINT}")
    return cache


def write_cache(cache: InstanceCache, path: str | Path) -> None:
    """Write atomically (a reader never sees half a file)."""
    target = Path(path)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(cache.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)
