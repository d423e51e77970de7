"""The questions of `elastic-slurm configure` and the config they build — data and pure functions, no I/O.

`QUESTIONS` lists every question in the order it is asked: a key, the prompt, the default (fixed, or computed from the
earlier answers) and a parse function that turns the typed text into a value or raises ValueError with a one-line
reason (the wizard then asks again). `asked(question, answers)` says whether a question applies (the second pool's
questions only when two pools were asked for). `build_config(answers)` turns the answers into the dict a cluster YAML
holds; the caller validates it with `cluster_config.parse`, exactly as `elastic-slurm validate` does.

Single answers are checked with the rules the validator uses: the model's patterns (worded as the loader words them),
the region and instance type lists of `cluster_config.aws_catalog`, the node name and subnet address limits of
`cluster_config.checks`, AZ letters and reserved names of `cluster_config.input_checks`, and the model's own CIDR rule
(an address alone becomes its /32; IPv6 is refused). A pool of NVIDIA GPU types gets `gpu: {}`.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster_config import aws_catalog, model
from cluster_config.address_space import address_space
from cluster_config.checks import AWS_RESERVED_PER_SUBNET, MAX_NODE_NAME, architecture_of, node_name, region_of_az
from cluster_config.input_checks import RESERVED_PARTITION_NAMES, az_problem
from cluster_config.instance_checks import nvidia_family
from cluster_config.loader import PATTERN_HINTS
from cluster_config.safe_types import rule_cidr

Answers = dict[str, Any]
DEFAULT_REGION = "us-east-1"
# Storage choices: a debian13 image (the default base OS) has no FSx for Lustre client (cluster_config/os_support.py, lustre_client),
# so fsx_lustre is left to a hand edit together with another images.base_os.
STORAGE_CHOICES = ("efs", "fsx_ontap", "fsx_openzfs")
ACCOUNTING_CHOICES = ("none", "create")
PURCHASE_CHOICES = tuple(option.value for option in model.PurchaseOption)
# Usable addresses of one compute subnet the wizard's network creates (the model's default prefix).
_SUBNET_PREFIX: int = model.NewNetwork.model_fields["compute_subnet_prefix"].default
SUBNET_ADDRESSES = 2 ** (32 - _SUBNET_PREFIX) - AWS_RESERVED_PER_SUBNET


@dataclass(frozen=True)
class Question:
    """One question: `parse(text, earlier_answers)` returns the value or raises ValueError(one-line reason)."""

    key: str
    prompt: str
    default: str | Callable[[Answers], str]
    parse: Callable[[str, Answers], Any]
    only_if: Callable[[Answers], bool] | None = None
    default_label: str | None = None  # shown instead of an empty default, e.g. "none"

    def default_for(self, answers: Answers) -> str:
        """The default text for this question, given the earlier answers."""
        return self.default(answers) if callable(self.default) else self.default


def asked(question: Question, answers: Answers) -> bool:
    """Whether `question` applies after `answers` (questions of the second pool need two pools)."""
    return question.only_if is None or question.only_if(answers)


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _pattern(value: str, pattern: str) -> str:
    if not re.fullmatch(pattern, value):
        raise ValueError(f"'{value}' is not {PATTERN_HINTS[pattern]}")
    return value


def _choice(choices: tuple[str, ...]) -> Callable[[str, Answers], str]:
    def parse(text: str, _answers: Answers) -> str:
        if text not in choices:
            raise ValueError(f"'{text}' is not one of {', '.join(choices)}")
        return text

    return parse


def _no_repeats(values: list[str], what: str) -> None:
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{what} '{repeated[0]}' is listed twice")


# ---------------------------------------------------------------- parse functions
def parse_cluster_name(text: str, _answers: Answers) -> str:
    """A Slurm ClusterName the model accepts."""
    _pattern(text, model.CLUSTER_NAME_PATTERN)
    if len(text) > 32:
        raise ValueError(f"'{text}' is longer than 32 characters")
    return text


def parse_region(text: str, _answers: Answers) -> str:
    """A region AWS has (botocore's list, as the validator checks it)."""
    _pattern(text, model.REGION_PATTERN)
    if problem := aws_catalog.unknown_region(text):
        raise ValueError(problem)
    return text


def parse_azs(text: str, answers: Answers) -> list[str]:
    """1 to 6 AZs of the region, each once."""
    azs = _split(text)
    if not 1 <= len(azs) <= 6:
        raise ValueError(f"give 1 to 6 availability zones, got {len(azs)}")
    for az in azs:
        _pattern(az, model.AZ_PATTERN)
        if region_of_az(az) != answers["region"]:
            raise ValueError(f"availability zone '{az}' is not in region '{answers['region']}'")
        if problem := az_problem(az):
            raise ValueError(problem)
    _no_repeats(azs, "availability zone")
    return azs


def parse_instance_type(text: str, _answers: Answers) -> str:
    """One instance type AWS has."""
    _pattern(text, model.INSTANCE_TYPE_PATTERN)
    if problem := aws_catalog.unknown_instance_type(text):
        raise ValueError(problem)
    return text


def parse_instance_types(text: str, answers: Answers) -> list[str]:
    """Instance types of one pool: known names, each once, one architecture."""
    types = [parse_instance_type(item, answers) for item in _split(text)]
    if not types:
        raise ValueError("give at least one instance type")
    _no_repeats(types, "instance type")
    arches = sorted({architecture_of(t) for t in types})
    if len(arches) > 1:
        raise ValueError(f"instance types mix architectures ({', '.join(arches)}); one pool takes one")
    if len({nvidia_family(t) for t in types}) > 1:
        raise ValueError("instance types mix GPU and CPU types; one pool takes one kind (make two pools)")
    return types


def parse_partition_name(text: str, _answers: Answers) -> str:
    """A partition name the model accepts and Slurm does not reserve."""
    _pattern(text, model.NAME_PATTERN)
    if text in RESERVED_PARTITION_NAMES:
        raise ValueError(f"'{text}' is reserved: {RESERVED_PARTITION_NAMES[text]}")
    return text


def parse_pool_count(text: str, _answers: Answers) -> int:
    """1 or 2."""
    if text not in ("1", "2"):
        raise ValueError(f"'{text}' is not 1 or 2")
    return int(text)


def pool_name(n: int, answers: Answers) -> str:
    """Pool `n`'s name (1-based): the family of its first instance type, `spot` appended when it buys spot, `2`
    appended when pool 1 already has that name — `c7i`, `c7ispot`, `m7gspot`."""
    family = re.sub(r"[^a-z0-9]", "", answers[f"pool{n}_instance_types"][0].split(".", 1)[0])
    name = family + ("" if answers[f"pool{n}_purchase_option"] == "on_demand" else "spot")
    if n == 2 and name == pool_name(1, answers):
        name += "2"
    return name


def _max_nodes(n: int) -> Callable[[str, Answers], int]:
    def parse(text: str, answers: Answers) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"'{text}' is not a whole number") from None
        if not 1 <= value <= 10000:
            raise ValueError(f"{value} is not between 1 and 10000")
        room = len(answers["availability_zones"]) * SUBNET_ADDRESSES - sum(
            answers.get(f"pool{i}_max_nodes", 0) for i in range(1, n)
        )
        if value > room:
            raise ValueError(f"{value} nodes do not fit the {room} free addresses of the compute subnets")
        longest = node_name(answers["partition_name"], pool_name(n, answers), value)
        if len(longest) > MAX_NODE_NAME:
            raise ValueError(f"node name '{longest}' is longer than {MAX_NODE_NAME} characters")
        return value

    return parse


def parse_ssh_cidrs(text: str, _answers: Answers) -> list[str]:
    """CIDRs (IPv4 or IPv6) allowed to SSH to the controller, normalised as the model normalises them (an address
    alone is its /32 or /128). None at all is fine (Session Manager needs no ingress)."""
    cidrs = [rule_cidr(item) for item in _split(text)]
    for cidr in cidrs:
        if ipaddress.ip_network(cidr).prefixlen == 0:
            raise ValueError(f"'{cidr}' opens SSH to the whole internet; list your own address ranges")
    _no_repeats(cidrs, "CIDR")
    return cidrs


def default_region() -> str:
    """The region the AWS tools are configured with (AWS_REGION, AWS_DEFAULT_REGION) when AWS has it, else us-east-1."""
    for env in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        region = os.environ.get(env, "")
        if region and re.fullmatch(model.REGION_PATTERN, region) and aws_catalog.unknown_region(region) is None:
            return region
    return DEFAULT_REGION


# ---------------------------------------------------------------- the questions
def _second_pool(answers: Answers) -> bool:
    return bool(answers.get("pool_count") == 2)


def _pool_questions(n: int, types: str, purchase: str) -> list[Question]:
    only_if = _second_pool if n == 2 else None
    return [
        Question(
            f"pool{n}_instance_types",
            f"Pool {n}: instance types, comma-separated, in order of preference",
            types,
            parse_instance_types,
            only_if,
        ),
        Question(
            f"pool{n}_purchase_option",
            f"Pool {n}: purchase option ({'/'.join(PURCHASE_CHOICES)})",
            purchase,
            _choice(PURCHASE_CHOICES),
            only_if,
        ),
        Question(f"pool{n}_max_nodes", f"Pool {n}: max nodes", "10", _max_nodes(n), only_if),
    ]


QUESTIONS: list[Question] = [
    Question("cluster_name", "Cluster name", "my-cluster", parse_cluster_name),
    Question("region", "Region", lambda _answers: default_region(), parse_region),
    Question(
        "availability_zones",
        "Availability zones, comma-separated",
        lambda answers: f"{answers['region']}a,{answers['region']}b",
        parse_azs,
    ),
    Question("controller_instance_type", "Controller instance type", "c7i.large", parse_instance_type),
    Question("partition_name", "Partition name", "cpu", parse_partition_name),
    Question("pool_count", "Pools in the partition (1 or 2)", "1", parse_pool_count),
    *_pool_questions(1, "c7i.large", "on_demand"),
    *_pool_questions(2, "c7i.xlarge", "spot"),
    Question("storage", f"Shared storage ({'/'.join(STORAGE_CHOICES)})", "efs", _choice(STORAGE_CHOICES)),
    Question(
        "accounting", f"Accounting database ({'/'.join(ACCOUNTING_CHOICES)})", "none", _choice(ACCOUNTING_CHOICES)
    ),
    Question(
        "ssh_cidrs",
        "CIDRs allowed to SSH to the controller, comma-separated (empty: Session Manager only)",
        "",
        parse_ssh_cidrs,
        default_label="none",
    ),
]


def defaults() -> Answers:
    """The answers of someone who presses Enter at every question."""
    answers: Answers = {}
    for question in QUESTIONS:
        if asked(question, answers):
            answers[question.key] = question.parse(question.default_for(answers), answers)
    return answers


# ---------------------------------------------------------------- the config
def _pool(n: int, answers: Answers) -> dict[str, Any]:
    types = answers[f"pool{n}_instance_types"]
    pool: dict[str, Any] = {"name": pool_name(n, answers), "instance_types": types}
    if answers[f"pool{n}_purchase_option"] != "on_demand":
        pool["purchase_option"] = answers[f"pool{n}_purchase_option"]
    pool["max_nodes"] = answers[f"pool{n}_max_nodes"]
    if nvidia_family(types[0]):  # the GPU image (driver, CUDA) and GPU scheduling
        pool["gpu"] = {}
    return pool


def build_config(answers: Answers) -> dict[str, Any]:
    """The cluster YAML (as a dict) the answers describe; keys left at their defaults are not written."""
    pools = [_pool(n, answers) for n in range(1, answers["pool_count"] + 1)]
    cluster: dict[str, Any] = {
        "name": answers["cluster_name"],
        "region": answers["region"],
        "network": {"mode": "create", "availability_zones": answers["availability_zones"]},
        "storage": {answers["storage"]: {}},
        "controller": {"instance_type": answers["controller_instance_type"]},
        "partitions": [{"name": answers["partition_name"], "default": True, "pools": pools}],
    }
    if answers["ssh_cidrs"]:
        cluster["ssh_allowed_cidrs"] = answers["ssh_cidrs"]
        if any(address_space(cidr) == "public" for cidr in answers["ssh_cidrs"]):
            cluster["ssh_allow_public_cidrs"] = True  # typed in as the answer: the operator's explicit choice
    return {"clusters": [cluster], "accounting": {"mode": answers["accounting"]}}
