"""The YAML loader: file and syntax problems become one `ConfigInvalid` line each, with the line number."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster_config import ConfigInvalid, load
from cluster_config.loader import format_loc, known_keys, parse_yaml

VALID = """\
clusters:
  - name: alpha
    region: us-east-1
    network: {mode: create, availability_zones: [us-east-1a]}
    storage: {efs: {}}
    partitions:
      - name: cpu
        pools:
          - {name: c7i, instance_types: [c7i.large], max_nodes: 4}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigInvalid) as caught:
        parse_yaml(text, "f.yaml")
    return [str(e) for e in caught.value.errors]


def test_valid_text_parses() -> None:
    assert parse_yaml(VALID).clusters[0].partitions[0].pools[0].max_nodes == 4


def test_malformed_yaml_names_the_line() -> None:
    text = VALID.replace("region: us-east-1", "region: us-east-1: oops")
    assert errors_of(text) == ["line 3: not valid YAML: mapping values are not allowed here"]


def test_tab_indentation_names_the_line() -> None:
    [error] = errors_of("clusters:\n\t- name: x\n")
    assert error.startswith("line 2: not valid YAML:")


def test_key_given_twice_is_an_error_with_its_line() -> None:
    text = VALID.replace("max_nodes: 4}", "max_nodes: 4, max_nodes: 8}")
    assert errors_of(text) == ["line 9: not valid YAML: duplicate key 'max_nodes'"]


def test_merge_keys_may_override_merged_values() -> None:
    text = VALID.replace(
        "    storage: {efs: {}}\n", "    storage: &s {efs: {}}\n    images: {<<: {base_os: rhel9}, base_os: al2023}\n"
    )
    assert parse_yaml(text).clusters[0].images.base_os == "al2023"


def test_python_tags_are_refused_not_executed() -> None:
    [error] = errors_of("clusters: !!python/object/apply:os.system ['true']\n")
    assert error.startswith("line 1: not valid YAML:")


@pytest.mark.parametrize(
    "text", ["", "# only a comment\n", "- a\n- b\n", "just a string\n"], ids=["empty", "comment", "list", "scalar"]
)
def test_file_that_is_not_a_mapping_is_one_error(text: str) -> None:
    assert errors_of(text) == ["(top level): the file must be a mapping with a 'clusters' key"]


def test_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        load(tmp_path / "nope.yaml")
    assert [str(e) for e in caught.value.errors] == ["(file): cannot read: No such file or directory"]


def test_directory_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        load(tmp_path)
    assert [str(e) for e in caught.value.errors] == ["(file): cannot read: Is a directory"]


def test_binary_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigInvalid) as caught:
        load(path)
    assert [str(e) for e in caught.value.errors] == ["(file): not UTF-8 text: invalid start byte at byte 0"]


def test_error_string_carries_the_source() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        parse_yaml("[]", "cfg.yaml")
    assert str(caught.value) == "cfg.yaml: (top level): the file must be a mapping with a 'clusters' key"


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("clusters", 0, "partitions", 1, "pools", 0, "max_nodes"), "clusters[0].partitions[1].pools[0].max_nodes"),
        (("clusters", 0, "network", "create", "vpc_cidr"), "clusters[0].network.vpc_cidr"),
        (
            ("clusters", 0, "remote_regions", 1, "network", "import", "subnets", 0),
            "clusters[0].remote_regions[1].network.subnets[0]",
        ),
        (("accounting",), "accounting"),
        ((), "(top level)"),
    ],
)
def test_pydantic_location_becomes_yaml_path(loc: tuple[int | str, ...], path: str) -> None:
    assert format_loc(loc) == path


def test_known_keys_follow_the_yaml_path_through_lists_and_network_modes() -> None:
    assert "max_nodes" in known_keys(("clusters", 0, "partitions", 0, "pools", 0))
    assert known_keys(("clusters", 0, "network", "import")) == ["mode", "subnets", "vpc_id"]
    assert known_keys(("tags",)) == []


def test_yaml_safe_dump_of_a_loaded_example_is_plain_yaml() -> None:
    text = yaml.safe_dump(parse_yaml(VALID).model_dump(mode="json"))
    assert "!!python" not in text


def test_unhashable_key_is_a_yaml_error_not_a_crash() -> None:
    [error] = errors_of("? [a, b]\n: 1\n")
    assert error.startswith("line 1: not valid YAML: found unhashable key")
