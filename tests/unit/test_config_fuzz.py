"""Random damage to the example configs never crashes the loader: every outcome is a config or ConfigInvalid.

A fixed seed keeps it deterministic; each problem must still be one line (no embedded newlines).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from cluster_config import ConfigInvalid, parse

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "cluster_config" / "examples").glob("*.yaml"))
ODD_VALUES: list[Any] = [
    None, 0, -1, 10**12, 1.5, True, "", "x", "127.16.0.0/16", "::/0", [], {}, [1], {"a": 1},
    "us-east-1a", "c7g.large", "é", "a" * 300, float("nan"), float("inf"),
]  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _damage(data: Any, rng: random.Random) -> None:
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in _paths(data) if p])
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(ODD_VALUES)


def test_random_damage_to_examples_gives_one_line_errors_never_a_crash() -> None:
    rng = random.Random(20261122)
    bases = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in EXAMPLES]
    for _ in range(400):
        data = copy.deepcopy(rng.choice(bases))
        _damage(data, rng)
        try:
            parse(data)
        except ConfigInvalid as exc:
            assert exc.errors
            assert all("\n" not in str(e) for e in exc.errors), exc.errors
