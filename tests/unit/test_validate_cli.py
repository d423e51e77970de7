"""`elastic-slurm validate`: exit codes (0 valid, 3 invalid, 2 usage), `--output json`, warnings and their silencing,
the facts of `--cache` (offerings per region, GPUs), and the input limits (size, depth, aliases) — run in-process
through the CLI entry point, as a user runs it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import loader
from cluster_config.warning_checks import WARNINGS
from elastic_slurm import exit_codes
from elastic_slurm.cli import main
from slurm_plugin.instance_cache import GpuInfo, InstanceCache
from tests.unit.cache_fixture import fixture_cache
from tests.unit.test_config_invalid import base

ROOT = Path(__file__).resolve().parents[2]
C0 = "clusters[0]"
P0 = f"{C0}.partitions[0].pools[0]"


def write(tmp_path: Path, data: Any, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def write_cache(tmp_path: Path, cache: InstanceCache) -> Path:
    path = tmp_path / "cache.json"
    path.write_text(cache.model_dump_json(), encoding="utf-8")
    return path


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def pool(data: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = data["clusters"][0]["partitions"][0]["pools"][0]
    return first


# ---------------------------------------------------------------- exit codes and JSON
def test_a_valid_file_exits_0_and_an_invalid_one_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, base(), "good.yaml")
    bad_data = base()
    pool(bad_data)["max_nodes"] = True
    bad = write(tmp_path, bad_data, "bad.yaml")
    assert validate(capsys, str(good))[0] == exit_codes.OK == 0
    code, out, err = validate(capsys, str(good), str(bad))
    assert code == exit_codes.INVALID_CONFIG == 3
    assert f"{good}: valid" in out.splitlines()
    assert err.splitlines() == [f"{bad}: {P0}.max_nodes: Input should be a valid integer, got the boolean true"]


def test_json_output_has_the_documented_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_data = base()
    bad_data["clusters"][0]["partitions"][0]["name"] = "default"
    pool(bad_data)["instance_types"] = ["g5.12xlarge"]
    bad = write(tmp_path, bad_data, "bad.yaml")
    warned_data = base()
    warned_data["clusters"][0]["slurm"] = {"suspend_time": 30}
    warned = write(tmp_path, warned_data, "warned.yaml")
    code, out, err = validate(capsys, "--output", "json", str(bad), str(warned))
    assert (code, err) == (exit_codes.INVALID_CONFIG, "")
    first, second = (json.loads(line) for line in out.splitlines())
    assert first == {
        "file": str(bad),
        "valid": False,
        "errors": [
            {
                "path": f"{C0}.partitions[0].name",
                "message": "'default' is reserved: Slurm reads `PartitionName=DEFAULT` as the defaults of every "
                "partition; choose another name",
            },
            {
                "path": f"{P0}.gpu",
                "message": "'g5.12xlarge' has NVIDIA GPUs (its family says): add `gpu: {}` so its nodes boot the GPU "
                "image (driver, CUDA) and Slurm schedules the GPUs",
            },
        ],
        "warnings": [],
    }
    assert second["valid"] is True and second["errors"] == []
    assert [(w["path"], w["code"]) for w in second["warnings"]] == [(f"{C0}.slurm.suspend_time", "short-suspend-time")]


def test_an_unknown_warning_code_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = validate(capsys, str(write(tmp_path, base())), "--ignore-warning", "no-such-code")
    assert (code, out) == (exit_codes.USAGE, "")
    assert err.startswith("elastic-slurm validate: --ignore-warning no-such-code: no such warning (codes: ")


# ---------------------------------------------------------------- warnings
def suspicious() -> dict[str, Any]:
    """A valid config that trips every warning that needs no cache."""
    data = base()
    cluster = data["clusters"][0]
    cluster["slurm"] = {"suspend_time": 30}
    cluster["ssh_allowed_cidrs"] = ["100.64.0.0/10"]
    cluster["controller"] = {"instance_type": "t3.medium"}
    cluster["network"]["availability_zones"] = ["us-east-1a"]
    pool(data).update(purchase_option="spot", placement_group=True)
    return data


def test_warnings_print_with_their_codes_and_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, suspicious())
    code, out, err = validate(capsys, str(path))
    assert (code, err) == (0, "")
    warned = [line for line in out.splitlines() if ": warning[" in line]
    assert [re.sub(r"(warning\[[a-z-]+\]).*", r"\1", line) for line in warned] == [
        f"{path}: {C0}.slurm.suspend_time: warning[short-suspend-time]",
        f"{path}: {C0}.ssh_allowed_cidrs[0]: warning[wide-ssh-cidr]",
        f"{path}: {C0}.controller.instance_type: warning[burstable-controller]",
        f"{path}: {P0}.instance_types: warning[single-spot-type]",
        f"{path}: {P0}.placement_group: warning[spot-placement-group]",
    ]


def test_a_named_warning_is_silenced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, suspicious())
    args = ["--ignore-warning", "short-suspend-time", "--ignore-warning", "burstable-controller"]
    code, out, _ = validate(capsys, str(path), *args, "--output", "json")
    assert code == 0
    codes = [w["code"] for w in json.loads(out)["warnings"]]
    assert codes == ["wide-ssh-cidr", "single-spot-type", "spot-placement-group"]


def test_every_warning_code_is_documented() -> None:
    page = (ROOT / "docs" / "validate.md").read_text(encoding="utf-8")
    for code, meaning in WARNINGS.items():
        assert f"| `{code}` | {meaning} |" in page, code


def test_the_exit_code_table_is_documented() -> None:
    page = (ROOT / "docs" / "validate.md").read_text(encoding="utf-8")
    for name in ("OK", "FAILED", "USAGE", "INVALID_CONFIG"):
        assert f"| {getattr(exit_codes, name)} | `{name}` |" in page, name


# ---------------------------------------------------------------- --cache facts
def test_a_type_the_cache_lacks_in_its_region_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = fixture_cache()
    east = {t: i for t, i in cache.regions["us-east-1"].items() if t != "c7i.large"}
    cache_path = write_cache(tmp_path, cache.model_copy(update={"regions": {**cache.regions, "us-east-1": east}}))
    path = write(tmp_path, base())
    code, _, err = validate(capsys, str(path), "--cache", str(cache_path))
    assert code == exit_codes.INVALID_CONFIG
    assert err.splitlines() == [
        f"{path}: {P0}.instance_types[0]: 'c7i.large' is not in the instance cache {cache_path} for us-east-1: EC2 "
        "does not offer it there, or the cache was built for another config (`elastic-slurm instance-cache refresh` "
        "asks EC2)"
    ]
    assert validate(capsys, str(path), "--cache", str(write_cache(tmp_path, cache)))[0] == 0


def _with_azs(cache: InstanceCache, azs: list[str]) -> InstanceCache:
    """The cache with c7i.large in us-east-1 offered in `azs` only (DescribeInstanceTypeOfferings by AZ)."""
    east = dict(cache.regions["us-east-1"])
    east["c7i.large"] = east["c7i.large"].model_copy(update={"availability_zones": azs})
    return cache.model_copy(update={"regions": {**cache.regions, "us-east-1": east}})


def test_a_type_offered_in_none_of_the_pools_azs_is_refused_and_in_some_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, base())  # pool c7i in us-east-1a and us-east-1b
    nowhere = write_cache(tmp_path, _with_azs(fixture_cache(), ["us-east-1d", "us-east-1f"]))
    code, _, err = validate(capsys, str(path), "--cache", str(nowhere))
    assert code == exit_codes.INVALID_CONFIG
    assert err.splitlines() == [
        f"{path}: {P0}.instance_types[0]: 'c7i.large' is offered in none of the pool's AZs of us-east-1 (us-east-1a, "
        f"us-east-1b), the instance cache {nowhere} says: EC2 offers it in us-east-1d, us-east-1f"
    ]
    some = write_cache(tmp_path, _with_azs(fixture_cache(), ["us-east-1b", "us-east-1c"]))
    code, out, _ = validate(capsys, str(path), "--cache", str(some), "--output", "json")
    assert code == 0
    (warning,) = json.loads(out)["warnings"]
    assert (warning["path"], warning["code"]) == (f"{P0}.instance_types[0]", "type-not-in-every-az")
    assert "'c7i.large' in us-east-1a" in warning["message"]
    everywhere = write_cache(tmp_path, _with_azs(fixture_cache(), ["us-east-1a", "us-east-1b"]))
    code, out, _ = validate(capsys, str(path), "--cache", str(everywhere), "--output", "json")
    assert (code, json.loads(out)["warnings"]) == (0, [])


def test_gpu_facts_come_from_the_cache_when_it_has_the_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = fixture_cache()
    east = dict(cache.regions["us-east-1"])
    east["c7i.large"] = east["c7i.large"].model_copy(update={"gpus": GpuInfo(count=1, manufacturer="NVIDIA", name="T")})
    cache_path = write_cache(tmp_path, cache.model_copy(update={"regions": {**cache.regions, "us-east-1": east}}))
    path = write(tmp_path, base())
    code, _, err = validate(capsys, str(path), "--cache", str(cache_path))
    assert code == exit_codes.INVALID_CONFIG
    assert f"'c7i.large' has NVIDIA GPUs (the instance cache {cache_path} says)" in err


def test_cache_warnings_name_uneven_pools_and_uncovered_regions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = base()
    pool(data)["instance_types"] = ["c7i.large", "c7i.xlarge"]
    cache = fixture_cache()
    cache_path = write_cache(tmp_path, cache)
    code, out, _ = validate(capsys, str(write(tmp_path, data)), "--cache", str(cache_path), "--output", "json")
    assert code == 0
    assert [w["code"] for w in json.loads(out)["warnings"]] == ["uneven-pool-types"]
    only_west = write_cache(tmp_path, cache.model_copy(update={"regions": {"us-west-2": cache.regions["us-west-2"]}}))
    code, out, _ = validate(capsys, str(write(tmp_path, base())), "--cache", str(only_west), "--output", "json")
    assert code == 0
    (warning,) = json.loads(out)["warnings"]
    assert (warning["path"], warning["code"]) == (f"{P0}.availability_zones", "cache-lacks-region")


# ---------------------------------------------------------------- input limits
def one_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    code, out, err = validate(capsys, str(path))
    assert (code, out) == (exit_codes.INVALID_CONFIG, "")
    (line,) = err.splitlines()
    assert len(line) <= len(str(path)) + 2 * loader.MAX_MESSAGE + 4
    return line.removeprefix(f"{path}: ")


def test_a_50_mb_file_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w", encoding="utf-8") as handle:
        handle.write("clusters:\n  - name: ")
        handle.write("x" * 50_000_000)  # a 50 MB single-line value
    assert one_error(capsys, path) == "(file): larger than 1024 KiB: not a config"


def test_a_value_under_the_size_limit_is_never_echoed_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = base()
    data["clusters"][0]["region"] = "us-east-" + "1" * 900_000
    message = one_error(capsys, write(tmp_path, data))
    assert message.startswith(f"{C0}: region: a value of 900008 characters (at most 4096)")


def test_deep_nesting_is_refused_without_recursion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, text in (
        ("flow", "[" * 20_000 + "]" * 20_000),
        ("block", "clusters: " + "{a: " * 20_000 + "1" + "}" * 20_000),
    ):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        assert one_error(capsys, path) == f"line 1: mappings and lists nest more than {loader.MAX_DEPTH} levels deep"


def test_alias_expansion_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert one_error(capsys, path) == f"(file): more than {loader.MAX_NODES} values once YAML aliases are expanded"


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [*a]\n",  # an anchor inside itself
        "x0: &a0 [x]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 40)),  # a chain 40 deep
    ],
    ids=["self", "chain"],
)
def test_aliases_nest_no_deeper_than_the_text_may(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text(text, encoding="utf-8")
    assert one_error(capsys, path) == (
        f"(file): mappings and lists nest more than {loader.MAX_DEPTH} levels deep once YAML aliases are expanded"
    )


def test_a_number_of_5000_digits_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "digits.yaml"
    path.write_text(yaml.safe_dump(base()).replace("max_nodes: 10", "max_nodes: " + "9" * 5000), encoding="utf-8")
    assert one_error(capsys, path).startswith("line ")


def test_the_documented_limits_are_the_loaders() -> None:
    page = (ROOT / "docs" / "validate.md").read_text(encoding="utf-8")
    for value in (f"{loader.MAX_FILE_BYTES // 1024} KiB", f"{loader.MAX_DEPTH} levels", f"{loader.MAX_NODES:,} values"):
        assert value in page, value
