"""`elastic-slurm instance-cache refresh` against the emulated AWS (moto server serves real instance type data; the
Price List API and spot price history come from localcloud/aws/price_list.py's table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_slurm.cli import main
from localcloud.aws.emulated_aws import EmulatedAws, free_port
from localcloud.aws.price_list import on_demand_price, spot_price
from slurm_plugin.instance_cache import load_cache
from slurm_plugin.instance_cache_aws import build_cache, client_factory
from slurm_plugin.manifest import load_manifest

EXAMPLES = Path(__file__).parents[2] / "cluster_config" / "examples"


def _refresh(aws: EmulatedAws, config: Path, out: Path, *extra: str) -> int:
    return main(["instance-cache", "refresh", str(config), "--out", str(out), "--endpoint-url", aws.url, *extra])


def test_refresh_queries_each_region_once_and_caches_the_config_types(aws: EmulatedAws, tmp_path: Path) -> None:
    out = tmp_path / "cache.json"
    assert _refresh(aws, EXAMPLES / "federation.yaml", out, "--no-on-demand-prices") == 0
    calls = aws.call_counts()
    assert calls.get("ec2:DescribeInstanceTypes") == 2
    assert calls.get("ec2:DescribeSpotPriceHistory") == 2
    assert not any(key.startswith("pricing:") for key in calls)
    cache = load_cache(out)
    assert {r: set(types) for r, types in cache.regions.items()} == {
        "us-east-1": {"c7i.xlarge", "c6i.xlarge", "m7i.xlarge"},
        "us-west-2": {"c7g.xlarge", "c6g.xlarge"},
    }
    graviton = cache.get("us-west-2", "c7g.xlarge")
    assert (graviton.vcpus, graviton.memory_mib, graviton.architecture, graviton.gpus) == (4, 8192, "arm64", None)
    # physical cores and threads per core (a pool's disable_hyperthreading): moto answers VCpuInfo as EC2 does
    assert (graviton.cores, graviton.threads_per_core) == (4, 1)
    assert (cache.get("us-east-1", "c7i.xlarge").cores, cache.get("us-east-1", "c7i.xlarge").threads_per_core) == (2, 2)
    assert graviton.prices.on_demand is None
    assert graviton.prices.spot and all(az.startswith("us-west-2") for az in graviton.prices.spot)
    # where EC2 offers each type: one DescribeInstanceTypeOfferings by AZ per region (moto answers from EC2's data)
    assert calls.get("ec2:DescribeInstanceTypeOfferings") == 2
    assert graviton.availability_zones and all(az.startswith("us-west-2") for az in graviton.availability_zones)


def test_gpu_types_carry_gpus_and_efa(aws: EmulatedAws, tmp_path: Path) -> None:
    out = tmp_path / "cache.json"
    assert _refresh(aws, EXAMPLES / "multi-az-gpu.yaml", out) == 0
    p5 = load_cache(out).get("us-east-1", "p5.48xlarge")
    assert p5.gpus is not None and (p5.gpus.count, p5.gpus.manufacturer, p5.gpus.name) == (8, "NVIDIA", "H100")
    assert p5.efa is True


def test_refresh_stores_price_list_on_demand_prices_and_spot_prices_that_differ_per_az(
    aws: EmulatedAws, tmp_path: Path
) -> None:
    out = tmp_path / "cache.json"
    assert _refresh(aws, EXAMPLES / "local-demo.yaml", out) == 0
    cache = load_cache(out)
    assert cache.get("us-east-1", "c7i.large").prices.on_demand == 0.08925  # the public us-east-1 Linux price
    priced = [(region, itype, info) for region, types in cache.regions.items() for itype, info in types.items()]
    assert len(priced) == 7  # c7i.large, c6i.large, m7i.large in both regions; c7i.xlarge in us-east-1
    for region, itype, info in priced:
        on_demand, spot = info.prices.on_demand, info.prices.spot
        assert on_demand is not None and on_demand == on_demand_price(itype, region)
        assert len(spot) >= 3 and all(az.startswith(region) for az in spot)
        assert len(set(spot.values())) == len(spot), f"{itype} in {region}: the same spot price in two AZs"
        assert all(0 < price < on_demand and price == spot_price(itype, az) for az, price in spot.items())
    assert aws.call_counts().get("pricing:GetProducts") == len(priced)  # one query per type and region


def test_a_type_the_price_list_does_not_sell_has_null_prices_and_the_others_are_priced(aws: EmulatedAws) -> None:
    cache = build_cache({"us-east-1": {"c7i.large", "r7i.large"}}, client_factory(aws.url))
    assert cache.get("us-east-1", "r7i.large").prices.on_demand is None  # no product, as AWS for a type it lacks
    assert cache.get("us-east-1", "r7i.large").prices.spot == {}
    assert cache.get("us-east-1", "c7i.large").prices.on_demand == 0.08925


def test_on_demand_prices_unreachable_are_stored_as_null(aws: EmulatedAws) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: the Price List API is unreachable

    def client(service: str, region: str) -> Any:
        return client_factory(nowhere if service == "pricing" else aws.url)(service, region)

    cache = build_cache({"us-east-1": {"c7i.large", "m7i.large"}}, client)
    assert [info.prices.on_demand for info in cache.regions["us-east-1"].values()] == [None, None]
    assert cache.get("us-east-1", "c7i.large").prices.spot  # spot prices come from EC2, which answered


def test_refreshed_cache_renders_the_config(aws: EmulatedAws, tmp_path: Path) -> None:
    config = EXAMPLES / "local-demo.yaml"
    assert _refresh(aws, config, tmp_path / "cache.json", "--no-on-demand-prices") == 0
    args = ["render", str(config), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache.json")]
    assert main(args) == 0
    conf = (tmp_path / "out" / "slurm-elastic.conf").read_text()
    assert "NodeName=cpu-small-[1-10] CPUs=2 " in conf
    assert load_manifest(tmp_path / "out" / "manifest.json").pools[0].instance_types[0] == "c7i.large"


def test_unknown_instance_type_exits_2_with_one_line(
    aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # accepted by the loader as a type newer than botocore (cluster_config/aws_catalog.py): EC2 is the one to refuse it
    monkeypatch.setenv("ELASTIC_SLURM_EXTRA_INSTANCE_TYPES", "zz9.mega")
    data = yaml.safe_load((EXAMPLES / "minimal.yaml").read_text())
    data["clusters"][0]["partitions"][0]["pools"][0]["instance_types"] = ["c7i.large", "zz9.mega"]
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(data))
    assert _refresh(aws, config, tmp_path / "cache.json", "--no-on-demand-prices") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("elastic-slurm instance-cache: ") and "zz9.mega" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "cache.json").exists()


def test_out_in_missing_directory_exits_2(aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _refresh(aws, EXAMPLES / "minimal.yaml", tmp_path / "nope" / "cache.json") == 2
    assert "--out: directory" in capsys.readouterr().err
