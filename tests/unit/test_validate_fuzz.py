"""Fuzz `elastic-slurm validate`: mutated example configs, fed to the CLI entry point in-process, always end with exit
code 0 (valid) or 3 (invalid) and never a traceback.

A seeded random mutator (no hypothesis in requirements-dev.txt): each case takes an example config and applies a few
mutations — a value somewhere replaced by a hostile one (wrong type, huge, control characters, reserved names, odd
CIDRs and paths), a key deleted or added, a list item repeated — or mangles the YAML text itself (cut short, stray
YAML syntax, anchors, tags). The count of cases is fixed, so the test does the same work on a busy machine; a failure
names the seed and case to replay.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_slurm.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "cluster_config" / "examples").glob("*.yaml"))
SEED = 34
CASES = 160
HOSTILE: list[Any] = [
    True,
    False,
    None,
    0,
    -1,
    2**31,
    2**64,
    1.5,
    float("inf"),
    "",
    " ",
    "x" * 5000,
    "a\nb",
    "tab\there",
    "\u202eevil",
    "$(reboot)",
    "'; DROP",
    "/",
    "/shared/../etc",
    "/opt/elastic-slurm",
    "us-east-1z",
    "default",
    "root",
    "1.2.3.4",
    "2001:db8::/32",
    "::/0",
    "0.0.0.0/0",
    "ResumeProgram",
    "elastic-slurm:cluster",
    "aws:x",
    "g5.xlarge",
    "c7i.large",
    "p5.48xlarge",
    [],
    [[]],
    {},
    {"ResumeProgram": "/bin/true"},
    {"unknown_key": 1},
    ["us-east-1a", "us-east-1a"],
]
TEXT_NOISE = [
    "\t",
    ":",
    "- ",
    "[",
    "{",
    "&a ",
    "*a",
    "!!python/object:os.system ",
    "%YAML 1.1\n",
    "? ",
    "|\n",
    "'",
    '"',
]


def nodes(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `data` (mapping keys and list indexes)."""
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found += nodes(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += nodes(value, (*path, index))
    return found


def mutate(data: Any, rng: random.Random) -> Any:
    """One structural mutation of a copy of `data`."""
    data = copy.deepcopy(data)
    path = rng.choice(nodes(data)[1:])
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = rng.choice(["replace", "replace", "replace", "delete", "add_key", "repeat"])
    if action == "replace":
        parent[last] = copy.deepcopy(rng.choice(HOSTILE))
    elif action == "delete":
        del parent[last]
    elif action == "add_key" and isinstance(parent, dict):
        parent[rng.choice(["name", "extra", "gpu", "slurm_settings", "tags", "max_nodes"])] = rng.choice(HOSTILE)
    elif action == "repeat" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    return data


def mangle(text: str, rng: random.Random) -> str:
    """The YAML text cut short or with stray syntax inserted."""
    at = rng.randrange(len(text))
    if rng.random() < 0.3:
        return text[:at]
    return text[:at] + rng.choice(TEXT_NOISE) + text[at:]


def case_text(index: int) -> str:
    rng = random.Random(SEED * 100_003 + index)
    data = yaml.safe_load(rng.choice(EXAMPLES).read_text(encoding="utf-8"))
    for _ in range(rng.randint(1, 3)):
        data = mutate(data, rng)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return mangle(text, rng) if rng.random() < 0.25 else text


def test_mutated_configs_exit_0_or_3_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fuzz.yaml"
    codes = {0: 0, 3: 0}
    for index in range(CASES):
        path.write_text(case_text(index), encoding="utf-8")
        try:
            code = main(["validate", str(path)])
        except Exception as exc:  # any escape is the failure this test looks for
            pytest.fail(f"case {index} (seed {SEED}) raised {type(exc).__name__}: {exc}\n{path.read_text()[:2000]}")
        out, err = capsys.readouterr()
        assert code in codes, f"case {index} (seed {SEED}) exited {code}: {err[:500]}"
        assert "Traceback" not in out + err, f"case {index} (seed {SEED})"
        if code == 3:
            assert err and all(line.startswith(f"{path}: ") for line in err.splitlines()), (index, err[:500])
        codes[code] += 1
    assert codes[3] > CASES // 2  # the mutations do break configs: the test exercises the error paths
    assert codes[0] > 0  # and some survive (harmless edits): the valid path runs too
