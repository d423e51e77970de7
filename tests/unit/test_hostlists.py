"""Hostlist expansion and compression, as slurmctld hands them to the plugin and render writes them."""

from __future__ import annotations

import pytest

from slurm_plugin.hostlists import compress, expand


def test_expand_range_with_dashes_in_prefix() -> None:
    assert expand("cpu-c7i-[1-3]") == ["cpu-c7i-1", "cpu-c7i-2", "cpu-c7i-3"]


def test_expand_several_pools_keeps_order() -> None:
    assert expand("gpu-g5-[2,4],cpu-c7i-1") == ["gpu-g5-2", "gpu-g5-4", "cpu-c7i-1"]


def test_expand_single_name() -> None:
    assert expand("cpu-c7i-10") == ["cpu-c7i-10"]


def test_expand_drops_duplicates() -> None:
    assert expand("a-[1-2],a-2") == ["a-1", "a-2"]


def test_expand_strips_surrounding_newline() -> None:
    assert expand("a-[1-2]\n") == ["a-1", "a-2"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty hostlist"),
        ("   ", "empty hostlist"),
        ("cpu-[1-3", "unbalanced"),
        ("cpu-1-3]", "unbalanced"),
        ("cpu-[3-1]", "start > stop"),
        ("cpu-[a-b]", "bad hostlist"),
        ("cpu-1 cpu-2", "whitespace"),
        (",", "names no node"),
        ("n[1-999999999]", "bad hostlist"),
    ],
)
def test_malformed_hostlist_raises_one_line_value_error(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        expand(text)
    assert "\n" not in str(info.value)


def test_long_malformed_hostlist_message_is_shortened() -> None:
    with pytest.raises(ValueError) as info:
        expand("n-[" + ",".join(str(i) for i in range(1000)))
    assert len(str(info.value)) < 200


def test_compress_sorts_numerically_and_merges_ranges() -> None:
    names = ["cpu-c7i-10", "cpu-c7i-2", "cpu-c7i-1", "cpu-c7i-3", "gpu-g5-7"]
    assert compress(names) == "cpu-c7i-[1-3,10],gpu-g5-7"


def test_compress_of_nothing_is_empty() -> None:
    assert compress([]) == ""


def test_compress_ignores_duplicates() -> None:
    assert compress(["a-1", "a-1", "a-2"]) == "a-[1-2]"


def test_compress_then_expand_round_trips_ten_thousand_nodes() -> None:
    names = [f"cpu-c7i-{i}" for i in range(1, 10001)] + [f"gpu-g5-{i}" for i in range(1, 100, 3)]
    assert sorted(expand(compress(names))) == sorted(names)
