"""Shared fixtures and hooks: one emulated AWS server (moto + fault layer) per test session, stopped at the end;
the tests that run programs of a Slurm root wait for its build, and run as a part of their own in scripts/test.sh
(`--root-tests`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from tests import schedule_hint, synth

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")  # never phone home from tests
for _key, _value in DUMMY_CREDENTIALS.items():
    os.environ.setdefault(_key, _value)
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def emulated_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedAws]:
    """A moto server with the fault layer on 127.0.0.1, shared by the session (faults cleared per test by users)."""
    handle = EmulatedAws.start(Path(tmp_path_factory.mktemp("emulated-aws")))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def aws(emulated_aws: EmulatedAws) -> Iterator[EmulatedAws]:
    """The session's emulated AWS with faults and call counters reset before and after the test."""
    emulated_aws.clear_faults()
    emulated_aws.reset_call_counts()
    yield emulated_aws
    emulated_aws.clear_faults()


# fixtures shared by the tests that run Slurm from the local cloud's root
from tests.slurm_in_root import (  # noqa: E402
    munge_socket,  # noqa: F401
    needs_root,
    root_failure,
    wait_for_root,
)

ROOT_PARTS = ("all", "none", "only")  # --root-tests: every test, those that need no Slurm root, those that need one
# Directories of tests/ where no test needs a root: `--root-tests=only` does not collect them (each of its workers
# would import and collect them only to deselect them); the other parts check that it stays true.
ROOTLESS_DIRS = ("aws", "cdk", "contracts")
TESTS_DIR = Path(__file__).parent


# A test module elsewhere (but tests/e2e/) whose text names neither marker a root test carries (`needs_root`) holds
# none either: `--root-tests=only` does not import it; the other parts check that every root test's module names one.
ROOT_MARKS = ("slurm_root", "mark.e2e")


def rootless_dir_of(path: Path) -> str | None:
    """The ROOTLESS_DIRS entry `path` lies in, else None."""
    try:
        first = path.relative_to(TESTS_DIR).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in ROOTLESS_DIRS else None


def rootless_module(path: Path) -> bool:
    """A test module outside tests/e2e/ whose text names no ROOT_MARKS entry (so it can hold no root test)."""
    if not (path.name.startswith("test_") and path.suffix == ".py") or path.parent == TESTS_DIR / "e2e":
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return not any(mark in text for mark in ROOT_MARKS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--root-tests", choices=ROOT_PARTS, default="all",
                     help="all: every test (default); none: only those that run no program of a Slurm root; only: "
                     "only those that do (scripts/test.sh runs the two parts side by side)")  # fmt: skip


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`--root-tests=only` skips the ROOTLESS_DIRS and the rootless modules (importing them costs each of its workers
    seconds of CPU, only to deselect their tests)."""
    if config.getoption("root_tests") == "only" and (
        rootless_dir_of(collection_path) is not None or rootless_module(collection_path)
    ):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--root-tests` keeps one part of the suite, deselecting the other. The part that needs a root starts longest
    file first (tests/schedule_hint.py; scripts/test.sh turns xdist's own reorder, files with most tests first, off
    for it); the sort is stable: a file's tests stay together and every worker collects the same order, as xdist
    requires. A test in a ROOTLESS_DIRS directory that needs a root stops the run (the Slurm part would miss it)."""
    part = config.getoption("root_tests")
    misplaced = [i.nodeid for i in items if rootless_dir_of(Path(i.path)) and needs_root(i) is not None]
    if misplaced:
        raise pytest.UsageError(
            f"{misplaced[0]} needs a Slurm root: tests/conftest.py ROOTLESS_DIRS must not name its directory"
        )
    unnamed = [i.nodeid for i in items if needs_root(i) is not None and rootless_module(Path(i.path))]
    if unnamed:
        raise pytest.UsageError(
            f"{unnamed[0]} needs a Slurm root, but its module names no {' or '.join(ROOT_MARKS)} (tests/conftest.py "
            "ROOT_MARKS): the Slurm part would not collect it"
        )
    if part == "all":
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if (needs_root(item) is not None) == (part == "only") else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    if part == "only":
        items.sort(key=lambda item: -schedule_hint.seconds_of(item.nodeid.split("::")[0]))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A test that runs programs of a Slurm root starts once that root is built, and one that reads the synthesized
    assemblies once they are (tests/synth.py): both waited for here, before its fixtures and outside its timeout
    (pytest-timeout's timer starts inside this)."""
    major = needs_root(item)
    if major is not None:
        wait_for_root(major)
    if synth.needs_assemblies(item):
        synth.shared_assemblies(item.config._tmp_path_factory)  # type: ignore[attr-defined]  # pytest's own
    return (yield)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A root whose build failed fails each test that needs it, with the build's one line (after the skip marks:
    a test skipped here is not failed by it)."""
    major = needs_root(item)
    failure = root_failure(major) if major is not None else None
    if failure is not None:
        pytest.fail(f"the Slurm {major} root: {failure}", pytrace=False)


# the synthesized assemblies, once per session (per xdist worker) for tests/cdk, tests/contracts and tests/security
from tests.synth import all_templates, assemblies  # noqa: E402, F401

_SESSION_START = time.time()


def _spares_under(directory: Path) -> list[int]:
    """Pids of spare resume workers (slurm_plugin/powersave/spare.py) whose manifest is under `directory`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--spare" in argv and any(a.startswith(str(directory).encode()) for a in argv):
            found.append(int(entry))
    return found


@pytest.fixture(autouse=True)
def _no_spare_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that runs ResumeProgram against a manifest in its tmp_path leaves a spare worker waiting for the next
    request: stop it (only those of this test's directory) when the test ends."""
    directory = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if directory is None:
        return
    for pid in _spares_under(directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The fault soak's counters (tests/aws/test_fault_soak.py), when it ran in this session (in any xdist worker)."""
    soak = config.cache.get("elastic-slurm/fault-soak", None) if getattr(config, "cache", None) is not None else None
    if isinstance(soak, dict) and float(soak.get("at", 0)) >= _SESSION_START:
        terminalreporter.write_line(str(soak.get("line", "")))
