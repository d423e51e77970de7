"""The order the tests that need a Slurm root start in while scripts/test.sh builds the roots: longest file first.

xdist (`--dist loadfile`) hands a worker one file at a time, in the order collected; the files that run the local
cloud take 2 s to 5 min each, mostly waiting on Slurm's timers, so the one that starts last decides when the run ends.
Longest first (LPT) keeps that tail short. The seconds are a hint only, nothing is asserted on them: each file's
wall time in a quiet `-n 4` run of those files, in tests/root_test_seconds.json; a file not listed counts as
`UNKNOWN_SECONDS`. Refresh after adding or reshaping e2e files:

    pytest -n 4 --dist loadfile --junitxml=/tmp/root.xml -m 'e2e or slurm_root' tests/e2e tests/security tests/unit
    python -m tests.schedule_hint /tmp/root.xml > tests/root_test_seconds.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from functools import cache
from pathlib import Path

SECONDS_FILE = Path(__file__).resolve().parent / "root_test_seconds.json"
UNKNOWN_SECONDS = 60


@cache
def file_seconds() -> dict[str, int]:
    """Test file (relative to the checkout, as in a node id) → its seconds in the last measured run."""
    seconds: dict[str, int] = json.loads(SECONDS_FILE.read_text(encoding="utf-8"))
    return seconds


def seconds_of(test_file: str) -> int:
    """The hint for one test file (a node id's path part)."""
    return file_seconds().get(test_file, UNKNOWN_SECONDS)


def from_junit(path: Path) -> dict[str, int]:
    """Per-file seconds from a JUnit XML report (`--junitxml`): the sum of its tests' times."""
    totals: Counter[str] = Counter()
    for case in ET.parse(path).iter("testcase"):
        totals[str(case.get("classname")).replace(".", "/") + ".py"] += float(case.get("time") or 0)
    return {name: round(total) for name, total in sorted(totals.items())}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m tests.schedule_hint JUNIT.xml > tests/root_test_seconds.json", file=sys.stderr)
        return 2
    print(json.dumps(from_junit(Path(sys.argv[1])), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
