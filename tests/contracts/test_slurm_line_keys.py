"""The partition and node keys `validate` allows (cluster_config/slurm_line_keys.py) are exactly those the pinned Slurm
release's parser reads: `_partition_options[]` and `_nodename_options[]` of src/common/read_config.c, taken from the
pinned source tarball (the one the images build, checked against its sha256). A key Slurm does not read there would
make slurmctld refuse slurm.conf; a key it reads that the table lacks would be refused for nothing."""

from __future__ import annotations

import hashlib
import re
import tarfile

import pytest

from cluster_config import slurm_release
from cluster_config.slurm_line_keys import NODE_KEYS, PARTITION_KEYS
from localcloud.image import image_root

_BLOCK = r"static s_p_options_t {name}\[\] = \{{(.*?)\n\t\}};"


def pinned_read_config() -> str:
    """src/common/read_config.c of the pinned release, from the source mirror (skips when the mirror lacks it)."""
    mirror = image_root.source_mirror()
    name = slurm_release.SOURCE_URL.rsplit("/", 1)[-1]
    tarball = mirror / name if mirror is not None else None
    if tarball is None or not tarball.is_file():
        pytest.skip(f"no Slurm source {name} in the source mirror ({mirror})")
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == slurm_release.SOURCE_SHA256
    with tarfile.open(tarball) as archive:
        for member in archive:
            if member.name.endswith("/src/common/read_config.c"):
                handle = archive.extractfile(member)
                assert handle is not None
                return handle.read().decode("utf-8")
    raise AssertionError(f"{tarball} has no src/common/read_config.c")


def options(source: str, block: str) -> set[str]:
    """The keys of one `static s_p_options_t NAME[] = {...}` table, lowercased, less the line's own name key."""
    match = re.search(_BLOCK.format(name=re.escape(block)), source, re.DOTALL)
    assert match is not None, f"no {block}[] in read_config.c"
    return {key.lower() for key in re.findall(r'\{\s*"([A-Za-z]+)"', match.group(1))}


def differences(source_keys: set[str], table: frozenset[str], own: str) -> tuple[set[str], set[str]]:
    """(keys Slurm reads that the table lacks, keys of the table Slurm does not read)."""
    ours = {key.lower() for key in table} - {own.lower()}
    return source_keys - ours, ours - source_keys


@pytest.fixture(scope="module")
def read_config() -> str:
    return pinned_read_config()


def test_partition_keys_are_the_parsers(read_config: str) -> None:
    keys = options(read_config, "_partition_options")
    assert len(keys) > 40
    assert differences(keys, PARTITION_KEYS, "PartitionName") == (set(), set())


def test_node_keys_are_the_parsers(read_config: str) -> None:
    keys = options(read_config, "_nodename_options")
    assert len(keys) > 25
    assert differences(keys, NODE_KEYS, "NodeName") == (set(), set())


def test_a_table_that_drifts_from_the_parser_is_caught(read_config: str) -> None:
    keys = options(read_config, "_partition_options")
    drifted = frozenset(PARTITION_KEYS - {"MaxNodes"} | {"ResumeProgram"})
    assert differences(keys, drifted, "PartitionName") == ({"maxnodes"}, {"resumeprogram"})
