"""Contract: every image step ↔ the OS it runs on.

Only Debian 13's image steps run here (tests/e2e/test_image_build.py); for every other base OS what AWS and the
distributions enforce is checked on paper, both sides derived from our own outputs:

- the step scripts (assets/image-build/*.sh, called by assets/imagebuilder/slurm.yaml and gpu.yaml) read each per-OS
  fact through `os_value KEY` from os-table.env: every key a script reads is in every OS's row, the rows are the
  table the validator reads (cluster_config/os_support.py), and no script or component branches on the OS itself;
- every OS's Python is >= 3.11 (install-plugin.sh: tomllib, the plugin's typing);
- a GPU pool the validator accepts on an OS/architecture is one the GPU steps can build (a CUDA repository for that
  architecture and the EFA installer), and the other way round;
- the SSM agent, which Image Builder needs to run any step, is on every build instance: preinstalled, installed by
  Image Builder, or installed by our user data override, which then also asks for Image Builder's clean-up script in
  the recipe's working directory (checked on the synthesized image recipes).

Negative cases: a table without debian13's CUDA repository (the validator refuses a GPU pool on debian13 and the
contract reports the mismatch), ubuntu2204's Python set to 3.10, a script that reads a key no row has, a step that
branches on /etc/os-release itself, and recipes whose user data override is missing or cleans up the wrong directory.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from cluster_config import load
from cluster_config.checks import architecture_of
from cluster_config.model import ElasticSlurmConfig
from cluster_config.os_checks import os_problems
from cluster_config.os_support import (
    ARCHES,
    MIN_PYTHON,
    OS_SUPPORT,
    OsSupport,
    Python,
    SsmAgent,
    env_rows,
    parse_env,
    ssm_agent_url,
)
from tests.cdk.conftest import REPO_ROOT, Assembly

pytestmark = pytest.mark.cdk

STEPS = REPO_ROOT / "assets" / "image-build"
COMPONENTS = REPO_ROOT / "assets" / "imagebuilder"
OS_VALUE = re.compile(r"\bos_value\s+([A-Za-z0-9_]+)")
# Reading the OS itself instead of its table row (VERSION_CODENAME, for a repository URL, is a value, not a branch)
OWN_OS_BRANCH = re.compile(r"/etc/os-release|\bVERSION_ID\b|\$\{?ID\b")
PACKAGE_MANAGER = re.compile(r"\b(apt-get|apt|dnf|yum|dpkg|rpm)\s")
GPU_TYPE = {"x86_64": "g5.xlarge", "arm64": "g5g.xlarge"}


# ---------------------------------------------------------------- the scripts' side
def step_scripts() -> dict[str, str]:
    """Every image build step (the sourced os-lib.sh is the table's reader, not a step)."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(STEPS.glob("*.sh")) if p.name != "os-lib.sh"}


def component_commands() -> dict[str, list[str]]:
    """Component file → its ExecuteBash commands."""
    commands: dict[str, list[str]] = {}
    for path in sorted(COMPONENTS.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        commands[path.name] = [
            command
            for phase in document["phases"]
            for step in phase["steps"]
            if step["action"] == "ExecuteBash"
            for command in step["inputs"]["commands"]
        ]
    return commands


def keys_read(scripts: Mapping[str, str]) -> dict[str, set[str]]:
    """Script → the table keys it reads."""
    return {name: set(OS_VALUE.findall(text)) for name, text in scripts.items()}


def shipped_rows() -> dict[str, dict[str, str]]:
    """The rows the steps read: os-table.env as shipped in assets/."""
    return parse_env((STEPS / "os-table.env").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the validator's side
def gpu_pool_accepted(base_os: str, arch: str, table: Mapping[str, OsSupport]) -> bool:
    """Whether the validator accepts a GPU pool of `arch` on `base_os` under `table`."""
    data = {
        "clusters": [
            {
                "name": "alpha",
                "region": "us-east-1",
                "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
                "storage": {"efs": {}},
                "images": {"base_os": base_os},
                "partitions": [
                    {
                        "name": "gpu",
                        "default": True,
                        "pools": [{"name": "gpu", "instance_types": [GPU_TYPE[arch]], "max_nodes": 1, "gpu": {}}],
                    }
                ],
            }
        ],
        "accounting": {"mode": "none"},
    }
    cluster = ElasticSlurmConfig.model_validate(data).clusters[0]  # the schema only: the rules are os_problems
    return not list(os_problems(cluster, "clusters[0]", architecture_of, table))


# ---------------------------------------------------------------- the contract
def contract_problems(
    table: Mapping[str, OsSupport], rows: Mapping[str, Mapping[str, str]], scripts: Mapping[str, str]
) -> list[str]:
    """Every disagreement between the steps (what they read from `rows`) and the table the validator reads."""
    problems: list[str] = []
    needed = keys_read(scripts)
    for base_os, entry in table.items():
        row = rows.get(base_os)
        if row is None:
            problems.append(f"{base_os}: os-table.env has no row for it")
            continue
        for script, keys in sorted(needed.items()):
            problems += [f"{script} reads {key}, which {base_os}'s row has not" for key in sorted(keys - row.keys())]
        for key, value in env_rows(entry).items():
            if row.get(key) != value:
                problems.append(
                    f"{base_os}.{key}: the steps read {row.get(key)!r}, the validator's table says {value!r}"
                )
        if entry.python.version < MIN_PYTHON:
            version = ".".join(map(str, entry.python.version))
            problems.append(f"{base_os}: {entry.python.command} is Python {version}, install-plugin.sh needs 3.11")
        if entry.ssm_agent not in typing.get_args(SsmAgent):
            problems.append(f"{base_os}: nothing brings the SSM agent Image Builder runs the steps with")
        for arch in ARCHES:
            accepted = gpu_pool_accepted(base_os, arch, table)
            buildable = bool(row.get(f"cuda_repo_{arch}")) and row.get("efa") == "yes"
            if accepted != buildable:
                problems.append(
                    f"{base_os} {arch}: the validator {'accepts' if accepted else 'refuses'} a GPU pool the GPU steps"
                    f" {'cannot' if accepted else 'can'} build"
                )
    for script, text in sorted(scripts.items()):
        if OWN_OS_BRANCH.search(text):
            problems.append(f"{script} reads the OS itself instead of its row of os-table.env")
        if needed[script] and "os-lib.sh" not in text:
            problems.append(f"{script} reads os_value without sourcing os-lib.sh")
    return problems


def component_problems(commands: Mapping[str, list[str]]) -> list[str]:
    """Components only call the steps: a package manager in a component is a per-OS choice outside the table."""
    return [
        f"{component}: runs a package manager itself ({command.splitlines()[0]}...)"
        for component, lines in sorted(commands.items())
        for command in lines
        if PACKAGE_MANAGER.search(command)
    ]


def test_every_step_reads_its_os_facts_from_the_table_the_validator_reads() -> None:
    scripts = step_scripts()
    assert contract_problems(OS_SUPPORT, shipped_rows(), scripts) == []
    # not vacuous: the steps do read the table, for every step kind that has per-OS facts
    needed = keys_read(scripts)
    assert {"packages", "package_manager", "extra_repos"} <= needed["os-packages.sh"]
    assert "python" in needed["install-plugin.sh"]
    assert {"cuda_repo_x86_64", "cuda_repo_arm64", "cuda_toolkit", "nvidia_driver"} <= needed["gpu-driver-cuda.sh"]
    assert {"lustre_client", "efs_utils", "cloudwatch_agent"} <= needed["aws-tools.sh"]


def test_components_only_call_the_steps() -> None:
    commands = component_commands()
    assert component_problems(commands) == []
    called = {m for lines in commands.values() for c in lines for m in re.findall(r"image-build/([a-z0-9-]+\.sh)", c)}
    assert {"os-packages.sh", "gpu-driver-cuda.sh", "gpu-efa.sh"} <= called
    assert called <= set(step_scripts())


def test_gpu_pools_the_validator_accepts_are_exactly_those_with_a_cuda_repository() -> None:
    accepted = {(b, a) for b in OS_SUPPORT for a in ARCHES if gpu_pool_accepted(b, a, OS_SUPPORT)}
    assert accepted == {(b, a) for b, row in shipped_rows().items() for a in ARCHES if row[f"cuda_repo_{a}"]}
    assert ("debian13", "x86_64") in accepted and ("debian13", "arm64") not in accepted


# ---------------------------------------------------------------- negative cases
def test_negative_a_table_without_debian13s_cuda_repository_is_refused_and_reported() -> None:
    table = dict(OS_SUPPORT, debian13=dataclasses.replace(OS_SUPPORT["debian13"], cuda_repo={}))
    assert gpu_pool_accepted("debian13", "x86_64", OS_SUPPORT)
    assert not gpu_pool_accepted("debian13", "x86_64", table)
    problems = contract_problems(table, shipped_rows(), step_scripts())
    assert "debian13 x86_64: the validator refuses a GPU pool the GPU steps can build" in problems
    assert "debian13.cuda_repo_x86_64: the steps read 'debian13/x86_64', the validator's table says ''" in problems


def test_negative_ubuntu2204_with_python_3_10_is_reported() -> None:
    python310 = Python("python3", (3, 10), ("python3-venv",))
    table = dict(OS_SUPPORT, ubuntu2204=dataclasses.replace(OS_SUPPORT["ubuntu2204"], python=python310))
    problems = contract_problems(table, shipped_rows(), step_scripts())
    assert "ubuntu2204: python3 is Python 3.10, install-plugin.sh needs 3.11" in problems


def test_negative_a_key_no_row_has_and_an_own_os_branch_are_reported() -> None:
    scripts = dict(step_scripts())
    scripts["os-packages.sh"] += '\nmirror=$(os_value apt_mirror)\ncase "$ID" in debian) ;; esac\n'
    scripts["validate.sh"] += "\n. /etc/os-release\n"
    problems = contract_problems(OS_SUPPORT, shipped_rows(), scripts)
    assert {f"os-packages.sh reads apt_mirror, which {b}'s row has not" for b in OS_SUPPORT} <= set(problems)
    assert "os-packages.sh reads the OS itself instead of its row of os-table.env" in problems
    assert "validate.sh reads the OS itself instead of its row of os-table.env" in problems
    assert component_problems({"gpu.yaml": ["set -e\napt-get install -y nvidia-open"]}) == [
        "gpu.yaml: runs a package manager itself (set -e...)"
    ]


# ---------------------------------------------------------------- the SSM agent on the synthesized recipes
def user_data_text(value: Any, region: str) -> str:
    """The text of a recipe's UserDataOverride ({"Fn::Base64": text or Fn::Join with the region})."""
    inner = value["Fn::Base64"]
    if isinstance(inner, str):
        return inner
    separator, parts = inner["Fn::Join"]
    region_ref = {"Ref": "AWS::Region"}
    return str(separator).join(
        part if isinstance(part, str) else region if part == region_ref else "?" for part in parts
    )


def recipe_ssm_problems(template: Mapping[str, Any], base_os: str, region: str) -> list[str]:
    """The SSM agent contract on one images stack: our override exactly where nothing else brings the agent."""
    problems = []
    recipes = {
        k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == "AWS::ImageBuilder::ImageRecipe"
    }
    for logical, props in sorted(recipes.items()):
        arch = "arm64" if "arm64" in props["Name"] else "x86_64"
        override = props.get("AdditionalInstanceConfiguration", {}).get("UserDataOverride")
        if OS_SUPPORT[base_os].ssm_agent != "user-data":
            if override is not None:
                problems.append(f"{logical}: replaces Image Builder's user data (its SSM agent install and clean-up)")
            continue
        if override is None:
            problems.append(f"{logical}: no SSM agent on {base_os}: Image Builder cannot run a step")
            continue
        text = user_data_text(override, region)
        if f"url={ssm_agent_url(base_os, arch, region)}" not in text.splitlines():
            problems.append(f"{logical}: does not install the SSM agent of {base_os} {arch} from {region}'s bucket")
        if f"touch {props.get('WorkingDirectory', '/tmp')}/perform_cleanup" not in text.splitlines():
            problems.append(f"{logical}: Image Builder's clean-up script would not run (no perform_cleanup)")
    return problems


def images_stacks(assembly: Assembly) -> list[tuple[dict[str, Any], str, str]]:
    """(template, base_os, region) of every cluster's images stack in a synthesized config."""
    config = load(assembly.config)
    return [
        (assembly.template_json(f"es-{c.name}-images"), c.images.base_os, c.region)
        for c in config.clusters
        if f"es-{c.name}-images" in assembly.templates
    ]


def test_every_synthesized_recipe_has_an_ssm_agent_and_keeps_the_clean_up(assemblies: dict[str, Assembly]) -> None:
    checked: set[str] = set()
    for name, assembly in sorted(assemblies.items()):
        assert assembly.returncode == 0, f"{name}: {assembly.output[-2000:]}"
        for template, base_os, region in images_stacks(assembly):
            assert recipe_ssm_problems(template, base_os, region) == [], name
            checked.add(OS_SUPPORT[base_os].ssm_agent)
    assert "user-data" in checked  # debian13 (the default base OS) is among the configs


def test_negative_recipes_without_the_override_or_cleaning_up_elsewhere_are_reported(
    assemblies: dict[str, Assembly],
) -> None:
    template, base_os, region = images_stacks(assemblies["minimal"])[0]
    assert base_os == "debian13"
    recipe = next(r for r in template["Resources"].values() if r["Type"] == "AWS::ImageBuilder::ImageRecipe")
    recipe["Properties"]["WorkingDirectory"] = "/var/tmp"
    assert [p.split(": ", 1)[1] for p in recipe_ssm_problems(template, base_os, region)] == [
        "Image Builder's clean-up script would not run (no perform_cleanup)"
    ]
    del recipe["Properties"]["AdditionalInstanceConfiguration"]["UserDataOverride"]
    assert [p.split(": ", 1)[1] for p in recipe_ssm_problems(template, base_os, region)] == [
        "no SSM agent on debian13: Image Builder cannot run a step"
    ]
    assert [p.split(": ", 1)[1] for p in recipe_ssm_problems(template, "ubuntu2204", region)] == []
