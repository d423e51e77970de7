"""I/O edges of the license sync: run lmutil/rlmutil, read scontrol/sacctmgr, write sacctmgr, persist the state."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from slurm_plugin.accounting.diff import SlurmVersion
from slurm_plugin.accounting.sacctmgr import SacctmgrCli, SacctmgrError
from slurm_plugin.licenses import flexlm, rlm
from slurm_plugin.licenses.sync import CurrentLicense, SyncState, Update
from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError

_LICENSE_LINE = re.compile(r"LicenseName=(?P<name>\S+)")
_USED = re.compile(r"\bUsed=(?P<used>\d+)")


def _run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=dict(env) if env is not None else None,
        )
    except subprocess.TimeoutExpired:
        raise LicenseServerError(f"{argv[0]} {' '.join(argv[1:3])}: no answer within {timeout:.0f}s") from None
    except OSError as exc:
        raise LicenseServerError(f"cannot run {argv[0]}: {exc.strerror}") from None


class LicenseServerTools:
    """`lmutil lmstat -a -c port@host` and `rlmutil rlmstat -a -c port@host`."""

    def __init__(self, lmutil: str = "lmutil", rlmutil: str = "rlmutil", timeout: float = 30.0) -> None:
        self.lmutil = lmutil
        self.rlmutil = rlmutil
        self.timeout = timeout

    def query(self, server_type: str, address: str) -> dict[str, FeatureUsage]:
        if server_type == "flexlm":
            result = _run([self.lmutil, "lmstat", "-a", "-c", address], self.timeout)
            return flexlm.parse(result.stdout + "\n" + result.stderr)
        if server_type == "rlm":
            result = _run([self.rlmutil, "rlmstat", "-a", "-c", address], self.timeout)
            return rlm.parse(result.stdout + "\n" + result.stderr)
        raise LicenseServerError(f"unknown server type {server_type!r}")


def parse_scontrol_licenses(text: str) -> dict[str, int]:
    """`scontrol show licenses -o` (one license per line) → name → Used."""
    held: dict[str, int] = {}
    for line in text.splitlines():
        name = _LICENSE_LINE.search(line)
        used = _USED.search(line)
        if name and used:
            held[name.group("name")] = int(used.group("used"))
    return held


class SlurmCommands:
    """sacctmgr for the numbers, scontrol for what jobs hold."""

    def __init__(
        self, local_cluster: str, sacctmgr: str = "sacctmgr", scontrol: str = "scontrol", timeout: float = 30.0
    ) -> None:
        self.local_cluster = local_cluster
        self.sacctmgr = SacctmgrCli(sacctmgr, timeout=timeout)
        self.scontrol = scontrol
        self.timeout = timeout
        self._version: SlurmVersion | None = None

    def version(self) -> SlurmVersion:
        if self._version is None:
            self._version = self.sacctmgr.version()
        return self._version

    def current(self) -> dict[str, CurrentLicense]:
        fields = ["name", "server", "type", "count"]
        if self.version().has_lastconsumed:
            fields.append("lastconsumed")
        found = {}
        for row in self.sacctmgr.show("resource", fields):
            if row[0] and row[2].lower() == "license" and row[3].isdigit():
                last = int(row[4]) if len(row) > 4 and row[4].isdigit() else None
                found[f"{row[0]}@{row[1]}"] = CurrentLicense(int(row[3]), last)
        return found

    def held(self, cluster: str) -> dict[str, int]:
        argv = [self.scontrol, "show", "licenses", "-o"]
        if cluster != self.local_cluster:
            argv[1:1] = ["-M", cluster]
        result = _run(argv, self.timeout)
        if result.returncode != 0:
            lines = (result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}").splitlines()
            raise LicenseServerError(f"scontrol show licenses: {lines[-1]}")
        return parse_scontrol_licenses(result.stdout)

    def update(self, update: Update) -> None:
        settings = [f"count={update.count}"]
        if update.last_consumed is not None:
            settings.append(f"lastconsumed={update.last_consumed}")
        self.sacctmgr.run(
            ["modify", "resource", "where", f"name={update.name}", f"server={update.server}", "set", *settings]
        )


def load_state(path: Path) -> SyncState:
    """The persisted state; a missing or unreadable file starts fresh (never fatal)."""
    try:
        return SyncState.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return SyncState()


def save_state(state: SyncState, path: Path) -> None:
    """Write atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = [
    "LicenseServerTools",
    "SacctmgrError",
    "SlurmCommands",
    "load_state",
    "parse_scontrol_licenses",
    "save_state",
]
