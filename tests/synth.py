"""The synthesized cloud assemblies every CDK, contract and security test reads: every example config (and the test-only configs in tests/cdk/configs/) is
synthesized ONCE per session with the real CDK CLI via `elastic-slurm synth`, in parallel, into a temp dir.

Assertions then read the cloud assemblies (templates, manifest.json, validation-report.json) — nothing is built twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO_ROOT / "cluster_config" / "examples").glob("*.yaml")) + sorted(
    (Path(__file__).parent / "cdk" / "configs").glob("*.yaml")
)
SYNTH_TIMEOUT = 300
# A developer iterating on one stack may synthesize fewer configs: ES_SYNTH_ONLY=minimal,remote-region (stems).
# `make test` never sets it.
if os.environ.get("ES_SYNTH_ONLY"):
    _ONLY = set(os.environ["ES_SYNTH_ONLY"].split(","))
    CONFIGS = [c for c in CONFIGS if c.stem in _ONLY]


@dataclass(frozen=True)
class Assembly:
    """One synthesized config: its output directory and what the CLI said."""

    config: Path
    outdir: Path
    returncode: int
    output: str

    @property
    def templates(self) -> dict[str, Path]:
        """Stack name → template file."""
        return {p.name.removesuffix(".template.json"): p for p in sorted(self.outdir.glob("*.template.json"))}

    def template_json(self, stack: str) -> dict[str, Any]:
        """A stack's template as a dict."""
        data: dict[str, Any] = json.loads(self.templates[stack].read_text(encoding="utf-8"))
        return data

    def manifest(self) -> dict[str, Any]:
        """The cloud assembly manifest (stack dependencies, metadata)."""
        data: dict[str, Any] = json.loads((self.outdir / "manifest.json").read_text(encoding="utf-8"))
        return data

    def validation_report(self) -> dict[str, Any]:
        """The policy-validation report cdk-nag writes."""
        data: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text(encoding="utf-8"))
        return data


def offline_env() -> dict[str, str]:
    """The test session sets dummy AWS credentials for moto; a synth must not see them (the CDK CLI would try to
    reach STS with them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] = "1"
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def synth_once(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`elastic-slurm synth CONFIG --out OUT` with the real CDK CLI, offline; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "elastic_slurm.cli", "synth", str(config), "--out", str(out)],
        cwd=REPO_ROOT,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=SYNTH_TIMEOUT,
        check=False,
    )


def synthesize_all(base: Path) -> dict[str, Assembly]:
    """Config stem → assembly, every config synthesized concurrently by the real CLI into `base`."""
    running = []
    for config in CONFIGS:
        outdir = base / config.stem
        log = (base / f"{config.stem}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "elastic_slurm.cli", "synth", str(config), "--out", str(outdir)],
            cwd=REPO_ROOT,
            env=offline_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        running.append((config, outdir, process, log))
    result: dict[str, Assembly] = {}
    try:
        for config, outdir, process, log in running:
            try:
                code = process.wait(timeout=SYNTH_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
            log.close()
            output = (base / f"{config.stem}.log").read_text(encoding="utf-8", errors="replace")
            result[config.stem] = Assembly(config, outdir, code, output)
    finally:
        for _, _, process, log in running:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    return result


@pytest.fixture(scope="session")
def assemblies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Assembly]:
    """Config stem → synthesized assembly. Under pytest-xdist the workers of one run share one synthesis: the first
    to arrive synthesizes into the run's common temp dir under a file lock, the others wait for it and read the same
    (read-only) assemblies, so a `make test` synthesizes each config once, not once per worker."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return synthesize_all(tmp_path_factory.mktemp("cdk-out"))
    shared = tmp_path_factory.getbasetemp().parent / "cdk-out-shared"  # the run's dir, common to its workers
    shared.mkdir(exist_ok=True)
    record = shared / "assemblies.json"
    with (shared.parent / "cdk-out-shared.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            result = synthesize_all(shared)
            data = {stem: [a.returncode, a.output] for stem, a in result.items()}
            record.write_text(json.dumps(data), encoding="utf-8")
            return result
    data = json.loads(record.read_text(encoding="utf-8"))
    by_stem = {config.stem: config for config in CONFIGS}
    return {stem: Assembly(by_stem[stem], shared / stem, code, output) for stem, (code, output) in data.items()}


@pytest.fixture(scope="session")
def all_templates(assemblies: dict[str, Assembly]) -> dict[str, Path]:
    """`config/stack` → template path over every assembly."""
    return {f"{name}/{stack}": path for name, a in assemblies.items() for stack, path in a.templates.items()}
