"""The sacctmgr adapter: read what slurmdbd holds, apply only the diff to the desired state (`slurm-accounting-apply`).

Reads use `sacctmgr -P -n show <entity> format=...` (pipe-separated, no header); writes use `sacctmgr -i` (no
prompt). The decision of what to change is `slurm_plugin.accounting.diff.diff` (pure); this module only runs it.
The desired state is a JSON file (`AccountingState`) written at render time from the cluster config.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from slurm_plugin import logs
from slurm_plugin.accounting.diff import Account, AccountingState, Change, Qos, Resource, SlurmVersion, diff

LOG = logging.getLogger(__name__)
_VERSION = re.compile(r"slurm(?:-wlm)?\s+(\d+)\.(\d+)", re.IGNORECASE)


class SacctmgrError(Exception):
    """A sacctmgr command failed (one-line message)."""


class Sacctmgr(Protocol):
    """What the accounting code needs from sacctmgr."""

    def version(self) -> SlurmVersion:
        """The Slurm version of the sacctmgr binary."""

    def show(self, entity: str, fields: Sequence[str], *options: str) -> list[list[str]]:
        """`sacctmgr -P -n show <entity> <options> format=<fields>` as rows of len(fields) strings."""

    def run(self, argv: Sequence[str]) -> str:
        """`sacctmgr -i <argv>`; raises SacctmgrError on failure."""


def parse_version(text: str) -> SlurmVersion:
    """`slurm 22.05.8` → SlurmVersion(22, 5); raises SacctmgrError on anything else."""
    match = _VERSION.search(text)
    if not match:
        raise SacctmgrError(f"cannot read the Slurm version from {text.strip()[:80]!r}")
    return SlurmVersion(int(match.group(1)), int(match.group(2)))


class SacctmgrCli:
    """The real sacctmgr binary."""

    def __init__(self, binary: str = "sacctmgr", env: Mapping[str, str] | None = None, timeout: float = 60) -> None:
        self.binary = binary
        self.env = dict(env) if env is not None else None
        self.timeout = timeout

    def _call(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [self.binary, *argv], env=self.env, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise SacctmgrError(f"sacctmgr {' '.join(argv[:3])}: no answer within {self.timeout:.0f}s") from None
        except OSError as exc:
            raise SacctmgrError(f"cannot run {self.binary}: {exc.strerror}") from None

    def version(self) -> SlurmVersion:
        result = self._call(["--version"])
        return parse_version(result.stdout + result.stderr)

    def show(self, entity: str, fields: Sequence[str], *options: str) -> list[list[str]]:
        argv = ["-P", "-n", "show", entity, *options, f"format={','.join(fields)}"]
        result = self._call(argv)
        if result.returncode != 0:
            raise SacctmgrError(f"sacctmgr show {entity}: {_last_line(result)}")
        rows = []
        for line in result.stdout.splitlines():
            if "|" not in line and len(fields) > 1:
                continue  # a message, not a row
            cells = line.split("|")
            rows.append((cells + [""] * len(fields))[: len(fields)])
        return rows

    def run(self, argv: Sequence[str]) -> str:
        result = self._call(["-i", *argv])
        if result.returncode != 0:
            raise SacctmgrError(f"sacctmgr {' '.join(argv)}: {_last_line(result)}")
        return result.stdout


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = (result.stderr.strip() or result.stdout.strip() or f"exit code {result.returncode}").splitlines()
    return lines[-1].strip()


def _int(text: str, default: int = 0) -> int:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else default


def duration_seconds(text: str) -> int:
    """Seconds of a duration as sacctmgr shows it (`[D-]HH:MM:SS`, `MM:SS`, plain seconds; empty: 0)."""
    text = text.strip()
    if not text:
        return 0
    days, _, clock = text.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + _int(part)
    return seconds + _int(days) * 86400 if days else seconds


def _list(text: str) -> list[str]:
    return sorted(item for item in text.strip().split(",") if item)


_QUERIES: dict[str, tuple[str, list[str], tuple[str, ...]]] = {
    "clusters": ("cluster", ["cluster", "features"], ()),
    "federations": ("federation", ["federation", "cluster"], ()),
    "qos": ("qos", ["name", "description", "priority", "preempt", "preemptmode", "gracetime"], ()),
    "assocs": ("association", ["cluster", "account", "user", "parentname", "qos"], ()),
    "accounts": ("account", ["account", "description", "organization"], ()),
    "users": ("user", ["user", "defaultaccount"], ()),
    "resources": ("resource", ["name", "server", "type", "count", "servertype", "description"], ()),
    "shares": ("resource", ["name", "server", "cluster", "allowed"], ("withclusters",)),
}


def _read_all(sacctmgr: Sacctmgr) -> dict[str, list[list[str]]]:
    """Run every show query at once (each is a round trip to slurmdbd; together they take one)."""
    with ThreadPoolExecutor(max_workers=len(_QUERIES)) as pool:
        futures = {
            key: pool.submit(sacctmgr.show, entity, fields, *options)
            for key, (entity, fields, options) in _QUERIES.items()
        }
        return {key: future.result() for key, future in futures.items()}


def read_state(sacctmgr: Sacctmgr) -> AccountingState:
    """Everything `diff` compares, read from slurmdbd."""
    rows = _read_all(sacctmgr)
    clusters = rows["clusters"]
    feds: dict[str, list[str]] = {}
    for fed, cluster in rows["federations"]:
        if fed:
            feds.setdefault(fed, [])
            if cluster:
                feds[fed].append(cluster)
    qos = {
        name: Qos(
            name=name,
            description=desc,
            priority=_int(prio),
            preempt=tuple(_list(preempt)),
            preempt_mode=mode.lower() or "cluster",
        )
        for name, desc, prio, preempt, mode, _grace in rows["qos"]
        if name
    }
    qos_grace = {name: duration_seconds(grace) for name, *_, grace in rows["qos"] if name}
    assoc_rows = rows["assocs"]
    parents = {account: parent for _, account, user, parent, _qos in assoc_rows if not user and parent}
    accounts = {
        name: Account(name=name, description=desc, organization=org, parent=parents.get(name, "root"))
        for name, desc, org in rows["accounts"]
        if name
    }
    users = {name: default for name, default in rows["users"] if name}
    return AccountingState(
        clusters=sorted(name for name, _ in clusters if name),
        cluster_features={name: _list(features) for name, features in clusters if name},
        federations={name: sorted(members) for name, members in feds.items()},
        qos=qos,
        qos_grace=qos_grace,
        accounts=accounts,
        users=users,
        associations=sorted((c, a, u) for c, a, u, _, _ in assoc_rows if c and a),
        account_qos={f"{c}/{a}": _list(q) for c, a, u, _, q in assoc_rows if c and a and not u},
        resources=resources_from(rows["resources"], rows["shares"]),
    )


def resources_from(resources: list[list[str]], shares: list[list[str]]) -> dict[str, Resource]:
    """Remote licenses with their per-cluster shares (`allowed`, in the version's unit)."""
    found: dict[str, Resource] = {}
    for name, server, kind, count, server_type, desc in resources:
        if name and kind.lower() == "license":
            res = Resource(name=name, server=server, server_type=server_type, count=_int(count), description=desc)
            found[res.key] = res
    allowed: dict[str, dict[str, int]] = {}
    for name, server, cluster, value in shares:
        if name and cluster:
            allowed.setdefault(f"{name}@{server}", {})[cluster] = _int(value)
    return {key: res.model_copy(update={"allowed": allowed.get(key, {})}) for key, res in found.items()}


def plan(sacctmgr: Sacctmgr, desired: AccountingState) -> tuple[SlurmVersion, list[Change]]:
    """The version and the changes `apply` would make (reads only)."""
    version = sacctmgr.version()
    return version, diff(read_state(sacctmgr), desired, version)


def apply(sacctmgr: Sacctmgr, desired: AccountingState, dry_run: bool = False) -> list[Change]:
    """Run the diff's commands in order; returns them. Stops at the first failing command (SacctmgrError)."""
    _, changes = plan(sacctmgr, desired)
    for change in changes:
        LOG.info("%s%s", "(dry run) " if dry_run else "", change.summary)
        if not dry_run:
            sacctmgr.run(change.argv)
    if not changes:
        LOG.info("accounting is up to date")
    return changes


def load_desired(path: str | Path) -> AccountingState:
    """Read a desired-state JSON file; raises SacctmgrError with a one-line reason."""
    try:
        return AccountingState.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SacctmgrError(f"--desired {path}: cannot read: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SacctmgrError(f"--desired {path}: {where}: {first['msg']}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """`slurm-accounting-apply --desired accounting.json`: make slurmdbd match; exit 0 when done or up to date."""
    parser = argparse.ArgumentParser(prog="slurm-accounting-apply", description=__doc__.splitlines()[0])
    parser.add_argument("--desired", required=True, help="desired-state JSON written by render")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, make none")
    parser.add_argument("--sacctmgr", default=os.environ.get("SACCTMGR", "sacctmgr"), help="sacctmgr binary")
    parser.add_argument("--log-file", default=None, help="also log to this file")
    args = parser.parse_args(argv)
    log = logs.setup(args.log_file, "slurm-accounting-apply")
    try:
        changes = apply(SacctmgrCli(args.sacctmgr), load_desired(args.desired), dry_run=args.dry_run)
    except SacctmgrError as exc:
        log.error("%s", exc)
        return 1
    log.info("%d change(s)%s", len(changes), " (dry run)" if args.dry_run else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
