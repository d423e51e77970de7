"""One build of a Slurm root at a time (localcloud.image.one_builder): a second caller waits for the first and reuses
its root; a failed build is recorded and raised to the tests instead of being built again; while scripts/test.sh builds
the roots, the tests that need none are collected first (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from localcloud.image import image_root, one_builder, slurm_root
from tests import conftest, schedule_hint
from tests.slurm_in_root import needs_root

RELEASE = slurm_root.OLDER_SLURM  # a packaged root: its path is quick to compute


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(slurm_root, "ROOT_CACHE", tmp_path)
    return tmp_path


def _complete(final: Path) -> None:
    (final / "etc").mkdir(parents=True)
    (final / "etc" / "elastic-slurm-root.json").write_text('{"slurm": "slurm 24.11.5"}\n')


def test_a_second_caller_waits_for_the_build_in_progress_and_reuses_its_root(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    builds: list[str] = []

    def slow_build(rel: slurm_root.Release, final: Path, log: Path | None) -> None:
        builds.append(threading.current_thread().name)
        started.set()
        assert release.wait(10)
        _complete(final)

    monkeypatch.setattr(slurm_root, "_build", slow_build)
    first = threading.Thread(target=slurm_root.build, args=(RELEASE,), name="first")
    first.start()
    assert started.wait(10)
    results: list[Path] = []
    second = threading.Thread(target=lambda: results.append(slurm_root.build(RELEASE, retry_failed=False)))
    second.start()
    time.sleep(0.3)
    assert second.is_alive() and not results  # waiting on the lock, not building a second root
    release.set()
    first.join(10)
    second.join(10)
    assert builds == ["first"]
    assert results == [slurm_root.root_path(RELEASE)] and slurm_root.is_built(RELEASE)


def test_a_failed_build_is_recorded_raised_to_the_tests_and_retried_by_setup(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def failing_build(rel: slurm_root.Release, final: Path, log: Path | None) -> None:
        calls.append("fail")
        raise slurm_root.RootError("build-slurm.sh failed (exit 2); see /var/cache/x.log")

    monkeypatch.setattr(slurm_root, "_build", failing_build)
    with pytest.raises(slurm_root.RootError):
        slurm_root.build(RELEASE)
    final = slurm_root.root_path(RELEASE)
    assert one_builder.recorded_failure(final) == "build-slurm.sh failed (exit 2); see /var/cache/x.log"
    # a test does not build again: it gets the recorded line at once
    with pytest.raises(slurm_root.RootError, match=r"build-slurm.sh failed \(exit 2\)"):
        slurm_root.build(RELEASE, retry_failed=False)
    assert calls == ["fail"]
    # setup (the default) retries; a success clears the record
    monkeypatch.setattr(slurm_root, "_build", lambda rel, final, log: _complete(final))
    assert slurm_root.build(RELEASE) == final
    assert one_builder.recorded_failure(final) is None


def test_the_next_build_removes_what_a_stopped_build_left(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = slurm_root.root_path(RELEASE)
    left = cache / f".{final.name}.4242.tmp"
    other = cache / f".{final.name}-other.4242.tmp"  # another root's: not touched
    for partial in (left, other):
        (partial / "dev" / "pts").mkdir(parents=True)
    monkeypatch.setattr(slurm_root, "_build", lambda rel, final, log: _complete(final))
    assert slurm_root.build(RELEASE) == final
    assert not left.exists() and other.exists()


def test_the_lock_is_released_when_its_holder_dies(tmp_path: Path) -> None:
    """flock: a builder killed mid-build never leaves the others waiting (the kernel drops its lock)."""
    final = tmp_path / "image-x"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from localcloud.image import one_builder\n"
         "with one_builder.one_builder(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)", str(final)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(_take(final)))
        waiter.start()
        time.sleep(0.3)
        assert not got  # held by the other process
        holder.kill()
        waiter.join(10)
        assert got == [True]
    finally:
        holder.kill()
        holder.wait()


def _take(final: Path) -> bool:
    with one_builder.one_builder(final):
        return True


@pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")
def test_a_partial_root_is_removed_without_entering_what_is_mounted_in_it(tmp_path: Path) -> None:
    """An interrupted build may leave the host's /dev bound into its root: removing the root leaves /dev whole."""
    host_dev = tmp_path / "host-dev"  # a file system of its own, as the host's /dev (devtmpfs) is
    host_dev.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "host-dev", str(host_dev)], check=True)
    partial = tmp_path / ".image-x.123.tmp"
    try:
        (host_dev / "null").write_text("a device\n")
        (partial / "dev").mkdir(parents=True)
        (partial / "etc").mkdir()
        subprocess.run(["mount", "--bind", str(host_dev), str(partial / "dev")], check=True)
        image_root.remove_tree(partial)
        assert (host_dev / "null").read_text() == "a device\n"
        assert not (partial / "etc").exists()
    finally:
        subprocess.run(["umount", "--lazy", str(partial / "dev")], capture_output=True)
        subprocess.run(["umount", "--lazy", str(host_dev)], capture_output=True)


def test_a_stopped_build_unwinds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM raises SystemExit (the build's cleanup runs) and is ignored after that (nothing cuts the cleanup)."""
    monkeypatch.setattr(signal, "signal", lambda signum, handler: calls.append((signum, handler)))
    calls: list[tuple[int, object]] = []
    with pytest.raises(SystemExit) as stopped:
        slurm_root._stop(signal.SIGTERM, None)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert calls == [(signal.SIGTERM, signal.SIG_IGN)]


@dataclass
class FakeItem:
    """What needs_root reads of a pytest item."""

    path: Path
    markers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    name: str = "test_x"

    @property
    def nodeid(self) -> str:
        return f"{self.path.relative_to(TESTS.parent).as_posix()}::{self.name}"

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return getattr(pytest.mark, name)(*self.markers[name]).mark if name in self.markers else None


TESTS = Path(conftest.__file__).parent
ITEMS = [
    FakeItem(TESTS / "e2e" / "test_a.py"),
    FakeItem(TESTS / "unit" / "test_b.py"),
    FakeItem(TESTS / "security" / "test_c.py", {"e2e": ()}),
    FakeItem(TESTS / "unit" / "test_d.py", {"slurm_root": ("24.11",)}),
    FakeItem(TESTS / "cdk" / "test_e.py"),
    FakeItem(TESTS / "cdk" / "test_e.py", name="test_y"),
]


def test_the_tests_that_need_a_root_are_known_with_their_release() -> None:
    default = slurm_root.DEFAULT_SLURM
    assert [needs_root(i) for i in ITEMS] == [default, None, default, "24.11", None, None]  # type: ignore[arg-type]


@dataclass
class FakeConfig:
    """What pytest_collection_modifyitems reads of pytest's config: the part asked for, and the deselect hook."""

    part: str
    deselected: list[FakeItem] = field(default_factory=list)

    def getoption(self, name: str) -> str:
        assert name == "root_tests"
        return self.part

    @property
    def hook(self) -> FakeConfig:
        return self

    def pytest_deselected(self, items: list[FakeItem]) -> None:
        self.deselected.extend(items)


def _collect(part: str, items: list[FakeItem]) -> tuple[list[FakeItem], list[FakeItem]]:
    """The items kept, in order, and those deselected, for `--root-tests part`."""
    config = FakeConfig(part)
    kept = list(items)
    conftest.pytest_collection_modifyitems(config, kept)  # type: ignore[arg-type]
    return kept, config.deselected


def test_the_suite_splits_into_the_tests_that_need_no_root_and_those_that_do() -> None:
    assert _collect("all", ITEMS) == (ITEMS, [])  # the usual order, nothing deselected
    kept, dropped = _collect("none", ITEMS)
    assert kept == [ITEMS[1], ITEMS[4], ITEMS[5]] and dropped == [ITEMS[0], ITEMS[2], ITEMS[3]]
    kept, dropped = _collect("only", ITEMS)
    assert sorted(map(ITEMS.index, kept)) == [0, 2, 3] and dropped == [ITEMS[1], ITEMS[4], ITEMS[5]]
    # every test is in exactly one part
    assert sorted(map(ITEMS.index, _collect("none", ITEMS)[0] + _collect("only", ITEMS)[0])) == list(range(len(ITEMS)))


def test_the_slurm_part_does_not_collect_the_directories_without_root_tests() -> None:
    only, other = FakeConfig("only"), FakeConfig("none")
    assert conftest.pytest_ignore_collect(TESTS / "cdk" / "test_e.py", only) is True  # type: ignore[arg-type]
    assert conftest.pytest_ignore_collect(TESTS / "contracts", only) is True  # type: ignore[arg-type]
    assert conftest.pytest_ignore_collect(TESTS / "e2e" / "test_a.py", only) is None  # type: ignore[arg-type]
    assert conftest.pytest_ignore_collect(TESTS / "cdk" / "test_e.py", other) is None  # type: ignore[arg-type]
    assert conftest.pytest_ignore_collect(TESTS.parent / "cdk" / "x.py", only) is None  # type: ignore[arg-type]


def test_a_root_test_in_a_directory_the_slurm_part_skips_stops_the_run() -> None:
    misplaced = FakeItem(TESTS / "contracts" / "test_f.py", {"e2e": ()})
    for part in ("all", "none"):
        with pytest.raises(pytest.UsageError, match=re.escape("tests/contracts/test_f.py::test_x needs a Slurm root")):
            _collect(part, [*ITEMS, misplaced])


def test_the_slurm_part_does_not_import_the_modules_that_name_no_root_mark(tmp_path: Path) -> None:
    only, other = FakeConfig("only"), FakeConfig("none")
    plain, marked, helper = tmp_path / "test_plain.py", tmp_path / "test_marked.py", tmp_path / "helpers.py"
    plain.write_text("def test_x():\n    pass\n")
    marked.write_text("import pytest\n\npytestmark = pytest.mark." + "e2e\n")
    helper.write_text("X = 1\n")
    assert conftest.rootless_module(plain) and conftest.pytest_ignore_collect(plain, only) is True  # type: ignore[arg-type]
    assert not conftest.rootless_module(marked) and conftest.pytest_ignore_collect(marked, only) is None  # type: ignore[arg-type]
    assert not conftest.rootless_module(helper)  # not a test module: collected as ever
    assert conftest.pytest_ignore_collect(plain, other) is None  # type: ignore[arg-type]
    assert not conftest.rootless_module(TESTS / "e2e" / "test_cost_e2e.py")  # tests/e2e/: root tests by their place


def test_a_root_test_in_a_module_that_names_no_root_mark_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    unnamed = FakeItem(TESTS / "unit" / "test_g.py", {"e2e": ()})  # marked e2e by, say, a conftest hook
    monkeypatch.setattr(conftest, "rootless_module", lambda path: path == unnamed.path)
    for part in ("all", "none"):
        with pytest.raises(pytest.UsageError, match=re.escape("tests/unit/test_g.py::test_x needs a Slurm root, but")):
            _collect(part, [*ITEMS, unnamed])


def test_the_tests_that_need_a_root_start_longest_file_first() -> None:
    """The files that need a root by their seconds in tests/root_test_seconds.json, longest first; a file the hint
    does not know counts as UNKNOWN_SECONDS; a file's tests stay together in their order (a stable sort)."""
    names = ("test_cost_e2e.py", "test_manager_e2e.py", "test_not_measured_yet.py", "test_failover_e2e.py")
    items = [FakeItem(TESTS / "e2e" / name) for name in names]
    items.insert(2, FakeItem(TESTS / "e2e" / names[1], name="test_y"))
    kept, _ = _collect("only", items)
    seconds = [schedule_hint.seconds_of(i.nodeid.split("::")[0]) for i in kept]
    assert [(i.path.name, i.name) for i in kept] == [
        (names[1], "test_x"), (names[1], "test_y"), (names[3], "test_x"), (names[2], "test_x"), (names[0], "test_x")
    ], seconds  # fmt: skip
    assert seconds[3] == schedule_hint.UNKNOWN_SECONDS and seconds == sorted(seconds, reverse=True)


def test_the_seconds_hint_is_read_back_from_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_x" name="a" time="10.4"/>'
        '<testcase classname="tests.e2e.test_x" name="b" time="5.2"/>'
        '<testcase classname="tests.unit.test_y" name="c" time="0.4"/></testsuite></testsuites>'
    )
    assert schedule_hint.from_junit(report) == {"tests/e2e/test_x.py": 16, "tests/unit/test_y.py": 0}


# boots a local cloud / runs a program in a root / reads it
ROOT_USERS = ("module_cloud(", "in_root(", "root_env(", "munge_socket", "root_path()")
ROOT_MARKS = ("pytest.mark.e2e", "pytest.mark." + "slurm_root")


def _unmarked(paths: list[Path]) -> list[str]:
    """The modules among `paths`, outside tests/e2e, that use a root without a mark saying so."""
    found = []
    for path in paths:
        text = path.read_text()
        if "e2e" in path.parts or not any(use in text for use in ROOT_USERS):
            continue
        if not any(mark in text for mark in ROOT_MARKS):
            found.append(path.name)
    return found


def test_every_test_module_that_runs_a_root_says_so(tmp_path: Path) -> None:
    """A module outside tests/e2e that boots a local cloud or runs programs in a root is marked e2e or slurm_root,
    else it would run before the background build ends (and fail)."""
    assert _unmarked(sorted(TESTS.rglob("test_*.py"))) == []
    # the check can fail: an unmarked module running a program in the root is found
    module = tmp_path / "test_unmarked.py"
    module.write_text("from tests.slurm_in_root import in_root\n\ndef test_x():\n    in_root(['true'])\n")
    assert _unmarked([module]) == ["test_unmarked.py"]
