"""Shared e2e helpers for the license sync: a fake `lmutil` on PATH and a run of the real sync CLI.

Used by test_accounting_real.py (bare slurmdbd) and test_federation_e2e.py (two-cluster local cloud).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from cluster_config import ElasticSlurmConfig
from localcloud.instances import enter
from localcloud.layout import Layout
from slurm_plugin.licenses.sync import sync_config_from

REPO = Path(__file__).resolve().parent.parent.parent
LMSTAT_FIXTURES = REPO / "tests" / "fixtures" / "lmstat"


def fake_lmutil(bin_dir: Path, output: Path, exit_code: int, env: dict[str, str]) -> dict[str, str]:
    """`env` with PATH starting at `bin_dir`, where an `lmutil` prints `output` and exits with `exit_code` (like a
    real one: the report on stdout, whatever the exit code)."""
    script = bin_dir / "lmutil"
    script.write_text(f"#!/bin/sh\ncat '{output}'\nexit {exit_code}\n")
    script.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}"}


def lmstat_with_usage(fixture: str, feature: str, in_use: int, target: Path) -> Path:
    """A copy of an lmstat fixture where `feature` has `in_use` licenses in use (the license server after users
    outside Slurm checked licenses out or gave them back); written to `target`."""
    text = (LMSTAT_FIXTURES / fixture).read_text()
    pattern = re.compile(rf"(Users of {re.escape(feature)}:.*?Total of \d+ licenses? issued;\s+Total of )\d+")
    changed, count = pattern.subn(rf"\g<1>{in_use}", text)
    if count != 1:
        raise ValueError(f"{fixture}: no usage line for feature {feature}")
    target.write_text(changed)
    return target


def run_license_sync(
    config: ElasticSlurmConfig,
    cluster: str,
    layout: Layout,
    env: dict[str, str],
    view: enter.View,
    by_manifest: bool = True,
) -> subprocess.CompletedProcess[str]:
    """One run of the sync CLI (what the systemd timer runs: the image's /opt/elastic-slurm/bin/slurm-license-sync,
    as `slurm`, on the controller `view`) for `cluster`: with the local cloud's manifest, as
    assets/systemd/slurm-license-sync.service passes it (the state goes to license-sync/ in the plugin's state dir,
    where the exporter reads it), or, `by_manifest=False` (a bare slurmdbd has no manifest), with that directory.
    `env` gives the PATH (with a fake lmutil first, see fake_lmutil; the host part of it is dropped inside the root)."""
    sync_file = layout.etc / "license-sync.json"
    sync_file.write_text(sync_config_from(config, cluster).model_dump_json())
    state = layout.plugin_state / "license-sync"
    argv = ["/opt/elastic-slurm/bin/slurm-license-sync", "--config", str(sync_file)]
    slurm = enter.user(view.root, "slurm")
    if by_manifest:
        argv += ["--manifest", str(layout.manifest)]
    else:
        state.mkdir(exist_ok=True)
        os.chown(state, slurm.uid, slurm.gid)
        argv += ["--state-dir", str(state)]
    inside = [p for p in env["PATH"].split(":") if p.startswith(str(layout.root)) and p != str(layout.hostbin)]
    run_env = enter.user_env(slurm, {"PATH": ":".join([*inside, enter.ROOT_PATH])})
    return subprocess.run(
        enter.argv(view, argv, slurm, cwd=str(layout.root)), env=run_env, capture_output=True, text=True, timeout=60
    )
