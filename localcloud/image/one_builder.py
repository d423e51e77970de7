"""One builder of a cached root at a time, across processes, and a failed build remembered.

`make test` builds the Slurm roots in the background while the tests that need none run (scripts/test.sh); a test
that needs a root meanwhile asks for it like any caller (`slurm_root.build`) and so waits for that build instead of
starting a second one. The lock is an flock on a file under `<cache>/locks/`: the kernel drops it when its holder
dies, so a killed build never leaves a waiter stuck, and the next holder removes what a stopped build left. A build
that fails writes its one-line error next to the root (`<root>.failed`): callers that must not build again (the
tests, while 4 workers wait) raise it at once; a build asked for by hand or by setup retries.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR = "locks"  # under the cache; left alone by prune (its names carry no root prefix)


@contextmanager
def one_builder(final: Path) -> Iterator[None]:
    """Hold the build lock of `final` (a root in a cache directory) for the block; waits while another process has it."""
    locks = final.parent / LOCK_DIR
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{final.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def failure_record(final: Path) -> Path:
    """Where a failed build of `final` leaves its error (pruned with the root's other leftovers)."""
    return final.with_name(f"{final.name}.failed")


def recorded_failure(final: Path) -> str | None:
    """The one-line error of the last failed build of `final`, None when it did not fail."""
    try:
        return failure_record(final).read_text().strip() or f"building {final.name} failed"
    except FileNotFoundError:
        return None


def remove_partial_builds(final: Path, remove: Callable[[Path], None]) -> None:
    """Remove what stopped builds of `final` left (`.<name>.<pid>.tmp`: a build removes its own unless it is killed,
    or a mount was still in it). Call it holding `final`'s lock: no other builder of `final` is running then."""
    for partial in final.parent.glob(f".{final.name}.*.tmp"):
        remove(partial)
