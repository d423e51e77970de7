"""Protected mode: a pool whose instances keep failing to boot (bad AMI, broken user data) stops launching.

Slurm runs ResumeFailProgram for nodes that did not register within ResumeTimeout; each such node is one failed boot
of its pool. After `boot_failure_limit` consecutive failures (manifest; 0 disables) the pool is *protected*: resumes
launch nothing for it and set its nodes DOWN with a `(Code:ProtectedMode)` reason saying why and how to leave, so
jobs go to other pools or pend instead of paying for boot after failed boot. A boot that works resets the count: the
resume worker sees a node of the pool up and responding in Slurm. The pool leaves protected mode when an admin runs
`slurm-pool-protection --clear POOL` (which also returns its nodes to idle~) or when the pool's definition in the
manifest changes (new image, template or types: a re-render after a config change).

State: `{state_dir}/protection.json` = {pool key: {"failures": n, "since": epoch or null, "fingerprint": sha}}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slurm_plugin.manifest import Manifest, PoolManifest
from slurm_plugin.powersave.state import locked, read_json, write_json

PROTECTION_FILE = "protection.json"
PROTECTED_CODE = "ProtectedMode"
UP_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")
NOT_UP_FLAGS = ("NOT_RESPONDING", "POWERING_UP", "POWER_UP", "POWERED_DOWN", "POWERING_DOWN")


def fingerprint(pool: PoolManifest) -> str:
    """What identifies a pool's boots: a change (new template, types, locations) clears protected mode."""
    return hashlib.sha256(pool.model_dump_json().encode()).hexdigest()[:16]


def record_failures(
    state_dir: str | Path, failures: Iterable[tuple[PoolManifest, int]], limit: int, now: float
) -> list[str]:
    """Add failed boots per pool; returns the keys of pools that became protected now."""
    newly: list[str] = []
    with locked(state_dir) as directory:
        path = directory / PROTECTION_FILE
        table = read_json(path)
        for pool, count in failures:
            entry = _entry(table, pool)
            entry["failures"] += count
            if limit > 0 and entry["failures"] >= limit and entry["since"] is None:
                entry["since"] = now
                newly.append(pool.key)
            table[pool.key] = entry
        write_json(path, table)
    return newly


def record_success(state_dir: str | Path, pools: Iterable[PoolManifest]) -> None:
    """A node of each pool booted: its consecutive-failure count starts again (protection is left as it is)."""
    with locked(state_dir) as directory:
        path = directory / PROTECTION_FILE
        table = read_json(path)
        for pool in pools:
            entry = _entry(table, pool)
            if entry["since"] is None:
                table[pool.key] = {**entry, "failures": 0}
        write_json(path, table)


def protected(state_dir: str | Path, pools: Iterable[PoolManifest]) -> dict[str, dict[str, Any]]:
    """The protected pools among `pools` (key -> entry); an entry of an older pool definition is dropped."""
    result: dict[str, dict[str, Any]] = {}
    with locked(state_dir) as directory:
        path = directory / PROTECTION_FILE
        table = read_json(path)
        changed = False
        for pool in pools:
            raw = table.get(pool.key)
            if isinstance(raw, dict) and raw.get("fingerprint") != fingerprint(pool):
                del table[pool.key]  # the pool was re-rendered with another definition: a fresh start
                changed = True
            elif isinstance(raw, dict) and raw.get("since") is not None:
                result[pool.key] = raw
        if changed:
            write_json(path, table)
    return result


def failures_of(state_dir: str | Path, pool: PoolManifest) -> int:
    """The pool's current count of consecutive failed boots."""
    entry = read_json(Path(state_dir) / PROTECTION_FILE).get(pool.key)
    return int(entry.get("failures", 0)) if isinstance(entry, dict) else 0


def clear(state_dir: str | Path, key: str) -> bool:
    """Leave protected mode (admin); False when the pool had no protection entry."""
    with locked(state_dir) as directory:
        path = directory / PROTECTION_FILE
        table = read_json(path)
        found = table.pop(key, None) is not None
        write_json(path, table)
    return found


def is_up(state: str) -> bool:
    """A Slurm node state (e.g. `IDLE+CLOUD`) of a node that booted and responds."""
    flags = state.split("+")
    return flags[0] in UP_STATES and not any(f in flags for f in NOT_UP_FLAGS)


def reason(key: str, failures: int) -> str:
    """The node reason of a protected pool."""
    return (
        f"(Code:{PROTECTED_CODE}) pool {key}: {failures} consecutive failed boots, no more launches; "
        f"fix the image/user data, then slurm-pool-protection --clear {key}"
    )


def _entry(table: dict[str, Any], pool: PoolManifest) -> dict[str, Any]:
    raw = table.get(pool.key)
    if isinstance(raw, dict) and raw.get("fingerprint") == fingerprint(pool):
        return {"failures": int(raw.get("failures", 0)), "since": raw.get("since"), "fingerprint": fingerprint(pool)}
    return {"failures": 0, "since": None, "fingerprint": fingerprint(pool)}


def main(argv: list[str] | None = None) -> int:
    """Console script `slurm-pool-protection`: show the pools' failed-boot counts, or `--clear POOL`."""
    from slurm_plugin.manifest import ManifestError, load_manifest
    from slurm_plugin.powersave.background import manifest_path
    from slurm_plugin.powersave.planner import node_pools, pool_of
    from slurm_plugin.powersave.slurm import Scontrol, SlurmError

    parser = argparse.ArgumentParser(prog="slurm-pool-protection", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clear", metavar="POOL", help="leave protected mode: launch again, nodes back to idle~")
    args = parser.parse_args(argv)
    try:
        manifest: Manifest = load_manifest(manifest_path())
    except ManifestError as exc:
        print(f"slurm-pool-protection: error: {exc}", file=sys.stderr)
        return 1
    pools = {p.key: p for p in manifest.pools}
    if args.clear:
        pool = pools.get(args.clear)
        if pool is None:
            print(f"slurm-pool-protection: error: --clear: no pool '{args.clear}' (pools: {', '.join(pools)})",
                  file=sys.stderr)  # fmt: skip
            return 2
        clear(manifest.state_dir, pool.key)
        slurm = Scontrol(manifest.slurm_bin_dir, manifest.slurm_conf)
        try:
            down = [  # only what protected mode set DOWN: an admin's own DOWN stays theirs
                n.name
                for n in slurm.show_nodes(None).values()
                if pool_of(n.name, node_pools(manifest.pools)) == pool
                and n.reason.startswith(f"(Code:{PROTECTED_CODE})")
            ]
            if down:
                slurm.resume(down)
        except SlurmError as exc:
            print(f"slurm-pool-protection: error: {exc}", file=sys.stderr)
            return 1
        print(f"pool {pool.key}: protected mode cleared at {time.strftime('%H:%M:%S')}, {len(down)} node(s) resumed")
        return 0
    table = protected(manifest.state_dir, manifest.pools)
    for key, pool in pools.items():
        count = failures_of(manifest.state_dir, pool)
        mark = "PROTECTED" if key in table else "launching"
        print(json.dumps({"pool": key, "state": mark, "consecutive_failed_boots": count}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
