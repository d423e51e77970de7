"""The instance cache: API shapes → cache entries, and every way a cache file can be unusable (one-line errors)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cluster_config import load
from slurm_plugin.instance_cache import CACHE_SCHEMA_VERSION, CacheError, InstanceTypeInfo, load_cache, write_cache
from slurm_plugin.instance_cache_aws import latest_spot_prices, on_demand_price, type_info_from_api, types_by_region
from tests.unit.cache_fixture import FIXTURE, GENERATED_AT, fixture_cache

EXAMPLES = Path(__file__).parents[2] / "cluster_config" / "examples"


def _api_item(itype: str) -> dict[str, object]:
    items: list[dict[str, object]] = json.loads(FIXTURE.read_text())["InstanceTypes"]
    return next(i for i in items if i["InstanceType"] == itype)


def test_gpu_type_keeps_count_maker_name_and_efa() -> None:
    info = type_info_from_api(_api_item("p5.48xlarge"))
    assert (info.vcpus, info.memory_mib, info.architecture, info.efa) == (192, 2097152, "x86_64", True)
    assert info.gpus is not None
    assert (info.gpus.count, info.gpus.manufacturer, info.gpus.name) == (8, "NVIDIA", "H100")


def test_graviton_type_is_arm64_without_gpus() -> None:
    info = type_info_from_api(_api_item("c7g.xlarge"))
    assert (info.vcpus, info.architecture, info.gpus, info.efa) == (4, "arm64", None, False)


def test_cores_and_threads_per_core_come_from_vcpu_info() -> None:
    intel, graviton = type_info_from_api(_api_item("c7i.2xlarge")), type_info_from_api(_api_item("c7g.xlarge"))
    assert (intel.cores, intel.threads_per_core, intel.physical_cores) == (4, 2, 4)
    assert (graviton.cores, graviton.threads_per_core, graviton.physical_cores) == (4, 1, 4)


def test_an_entry_written_before_cores_were_recorded_guesses_them_low() -> None:
    # a too-high CPUs= would have Slurm drain the node; vCPUs / 2 on x86, all vCPUs on arm64 (no SMT on Graviton)
    old = {"vcpus": 8, "memory_mib": 16384, "architecture": "x86_64"}
    assert InstanceTypeInfo.model_validate(old).physical_cores == 4
    assert InstanceTypeInfo.model_validate({**old, "architecture": "arm64"}).physical_cores == 8
    assert InstanceTypeInfo.model_validate({**old, "vcpus": 1}).physical_cores == 1


def test_latest_spot_price_per_az_wins_over_older_entries() -> None:
    history = [
        {"InstanceType": "c7i.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.5", "Timestamp": "2026-01-01"},
        {"InstanceType": "c7i.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.03", "Timestamp": "2026-02-01"},
        {"InstanceType": "c7i.large", "AvailabilityZone": "us-east-1b", "SpotPrice": "0.04", "Timestamp": "2026-01-15"},
    ]
    assert latest_spot_prices(history) == {"c7i.large": {"us-east-1a": 0.03, "us-east-1b": 0.04}}


def test_on_demand_price_is_read_from_a_price_list_product() -> None:
    product = {
        "terms": {"OnDemand": {"X.Y": {"priceDimensions": {"X.Y.Z": {"pricePerUnit": {"USD": "0.0892500000"}}}}}}
    }
    assert on_demand_price([json.dumps(product)]) == pytest.approx(0.08925)
    assert on_demand_price([]) is None


def test_types_by_region_covers_every_pool_region() -> None:
    wanted = types_by_region(load(EXAMPLES / "federation.yaml"))
    assert wanted == {
        "us-east-1": {"c7i.xlarge", "c6i.xlarge", "m7i.xlarge"},
        "us-west-2": {"c7g.xlarge", "c6g.xlarge"},
    }


def test_cache_round_trips_through_its_file(tmp_path: Path) -> None:
    cache = fixture_cache()
    write_cache(cache, tmp_path / "cache.json")
    assert load_cache(tmp_path / "cache.json") == cache


def test_missing_reports_types_the_cache_lacks() -> None:
    assert fixture_cache().missing({"us-east-1": {"c7i.large", "x9.huge"}, "eu-west-1": {"c7i.large"}}) == [
        "eu-west-1/c7i.large",
        "us-east-1/x9.huge",
    ]


def _valid() -> dict[str, object]:
    data: dict[str, object] = json.loads(fixture_cache().model_dump_json())
    return data


def _with_az(az: str) -> dict[str, object]:
    """The fixture cache with c7i.large in us-east-1 offered in the AZ named `az`."""
    data = _valid()
    regions: dict[str, dict[str, dict[str, object]]] = data["regions"]  # type: ignore[assignment]
    regions["us-east-1"]["c7i.large"]["availability_zones"] = [az]
    return data


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "not found; build it with `elastic-slurm instance-cache refresh`"),
        ("", "not valid JSON"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({**_valid(), "schema_version": 0}), "schema_version 0 is not 1; rebuild with"),
        (json.dumps({k: v for k, v in _valid().items() if k != "schema_version"}), "schema_version None is not 1"),
        (json.dumps({**_valid(), "regions": {"us-east-1": {"c7i.large": {"vcpus": "many"}}}}), "regions.us-east-1"),
        (json.dumps({k: v for k, v in _valid().items() if k != "generated_at"}), "generated_at: Field required"),
        (json.dumps({**_valid(), "surprise": 1}), "surprise: Extra inputs"),
        (json.dumps(_with_az("us-east-1a\nERROR: forged line")), "availability_zones.0: String should match"),
    ],
    ids=[
        "missing",
        "empty",
        "corrupt",
        "not-object",
        "old-schema",
        "no-schema",
        "bad-field",
        "no-date",
        "extra-key",
        "forged-az",
    ],
)
def test_unusable_cache_is_a_one_line_error(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "cache.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CacheError) as info:
        load_cache(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_cache_older_than_max_age_is_stale(tmp_path: Path) -> None:
    write_cache(fixture_cache(), tmp_path / "cache.json")
    now = GENERATED_AT + timedelta(days=40)
    with pytest.raises(CacheError, match=r"40 days old.*instance-cache refresh"):
        load_cache(tmp_path / "cache.json", max_age=timedelta(days=30), now=now)
    assert load_cache(tmp_path / "cache.json", max_age=timedelta(days=30), now=GENERATED_AT).schema_version == 1


def test_schema_version_constant_matches_written_files(tmp_path: Path) -> None:
    write_cache(fixture_cache(), tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text())["schema_version"] == CACHE_SCHEMA_VERSION
    assert datetime.fromisoformat(json.loads((tmp_path / "c.json").read_text())["generated_at"]).tzinfo == UTC
