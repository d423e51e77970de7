"""The synthesized cloud assemblies every CDK, contract and security test reads: every example config (and the test-only configs in tests/cdk/configs/) is
synthesized ONCE per session with the real CDK CLI via `elastic-slurm synth`, in parallel, into a temp dir.

Assertions then read the cloud assemblies (templates, manifest.json, validation-report.json) — nothing is built twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO_ROOT / "cluster_config" / "examples").glob("*.yaml")) + sorted(
    (Path(__file__).parent / "cdk" / "configs").glob("*.yaml")
)
# One synth alone (inside a test's timeout, 600 s): minutes on a busy machine, never this long unless it hangs.
SYNTH_TIMEOUT = 480
# Every config's synth together, run before the first test that reads them starts its timeout: a bound for a hang.
SHARED_SYNTH_DEADLINE = 1800
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


def _synth_command(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "elastic_slurm.cli", "synth", str(config), "--out", str(out)]


def _start(
    argv: list[str], stdout: Any, stderr: Any, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A synth in a session (and process group) of its own: stopped as a whole, the CDK CLI and the app's node and
    Python processes with it; and a scheduler autogroup of its own, as each daemon of the Slurm part's local clouds
    has, so that part's dozens of sessions do not starve it."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=offline_env() if env is None else env,
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_or_stop(process: subprocess.Popen[bytes], seconds: float) -> int:
    """The process's exit code; after `seconds`, -9: its whole group killed."""
    try:
        return process.wait(timeout=max(0.0, seconds))
    except subprocess.TimeoutExpired:
        _stop_group(process)
        return process.wait()


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the process's whole group while its leader is not reaped (its PID, the group's ID, is still ours)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def run_synth(
    argv: list[str], cwd: Path = REPO_ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` (a synth), its stdout and stderr captured; killed with its whole group after SYNTH_TIMEOUT (-9)."""
    process = _start(argv, subprocess.PIPE, subprocess.PIPE, cwd, env)
    try:
        out, err = process.communicate(timeout=SYNTH_TIMEOUT)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        out, err = process.communicate()
    text = [part.decode("utf-8", errors="replace") for part in (out, err)]
    return subprocess.CompletedProcess(argv, process.returncode, text[0], text[1])


def synth_once(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`elastic-slurm synth CONFIG --out OUT` with the real CDK CLI, offline; its output (stdout and stderr) captured."""
    return run_synth(_synth_command(config, out))


def synthesize_all(base: Path) -> dict[str, Assembly]:
    """Config stem → assembly, every config synthesized concurrently by the real CLI into `base`, all within
    SHARED_SYNTH_DEADLINE."""
    deadline = time.monotonic() + SHARED_SYNTH_DEADLINE
    running = []
    try:
        for config in CONFIGS:
            log = (base / f"{config.stem}.log").open("wb")
            running.append((config, _start(_synth_command(config, base / config.stem), log, subprocess.STDOUT), log))
        result: dict[str, Assembly] = {}
        for config, process, log in running:
            code = _wait_or_stop(process, deadline - time.monotonic())
            log.close()
            output = (base / f"{config.stem}.log").read_text(encoding="utf-8", errors="replace")
            result[config.stem] = Assembly(config, base / config.stem, code, output)
        return result
    finally:
        for _, process, log in running:
            if process.poll() is None:
                _wait_or_stop(process, 0)
            log.close()


_SHARED: dict[str, Assembly] = {}


def shared_assemblies(factory: pytest.TempPathFactory) -> dict[str, Assembly]:
    """Config stem → synthesized assembly, synthesized once per run. Under pytest-xdist the workers of one run share
    one synthesis: the first to arrive synthesizes into the run's common temp dir under a file lock, the others wait
    for it and read the same (read-only) assemblies, so a `make test` synthesizes each config once, not once per
    worker. Called before a test's timeout starts (tests/conftest.py `pytest_runtest_protocol`): on a busy machine
    the synthesis may take minutes, and what bounds it is SHARED_SYNTH_DEADLINE, not one test's timeout."""
    if _SHARED:
        return _SHARED
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _SHARED.update(synthesize_all(factory.mktemp("cdk-out")))
        return _SHARED
    shared = factory.getbasetemp().parent / "cdk-out-shared"  # the run's dir, common to its workers
    shared.mkdir(exist_ok=True)
    record = shared / "assemblies.json"
    with (shared.parent / "cdk-out-shared.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            result = synthesize_all(shared)
            data = {stem: [a.returncode, a.output] for stem, a in result.items()}
            record.write_text(json.dumps(data), encoding="utf-8")
            _SHARED.update(result)
            return _SHARED
    data = json.loads(record.read_text(encoding="utf-8"))
    by_stem = {config.stem: config for config in CONFIGS}
    _SHARED.update(
        {stem: Assembly(by_stem[stem], shared / stem, code, output) for stem, (code, output) in data.items()}
    )
    return _SHARED


def needs_assemblies(item: pytest.Item) -> bool:
    """Whether `item` uses the shared assemblies (directly or through another fixture)."""
    return "assemblies" in getattr(item, "fixturenames", ())


@pytest.fixture(scope="session")
def assemblies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Assembly]:
    """Config stem → synthesized assembly (`shared_assemblies`)."""
    return shared_assemblies(tmp_path_factory)


@pytest.fixture(scope="session")
def all_templates(assemblies: dict[str, Assembly]) -> dict[str, Path]:
    """`config/stack` → template path over every assembly."""
    return {f"{name}/{stack}": path for name, a in assemblies.items() for stack, path in a.templates.items()}
