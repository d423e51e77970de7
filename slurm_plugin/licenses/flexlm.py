"""Parse `lmutil lmstat -a -c port@host` (FlexLM / FlexNet Publisher, v9 to v11.x) into per-feature usage.

The totals line of each feature is authoritative:
    Users of vcs:  (Total of 10 licenses issued;  Total of 3 licenses in use)
Other shapes of that line: `(Uncounted, node-locked)` and `(Error: 2 licenses, unsupported by licensed server)`
(the feature is then left out: we know nothing about it). Below a totals line, `N RESERVATION(s) for ...` lines and
`... queued for N licenses` lines are counted for information. Output without any totals line is an error: either
the server is down (lmstat prints `Cannot connect to license server system`, `license server machine is down`,
`The desired vendor daemon is down`, ...) or the text is not lmstat's.
"""

from __future__ import annotations

import re

from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError, merge

_USERS_OF = re.compile(r"^Users of (?P<feature>[^\s:]+):\s*\((?P<body>.*)\)\s*$")
_TOTALS = re.compile(r"^Total of (?P<issued>\d+) licenses? issued;\s*Total of (?P<in_use>\d+) licenses? in use$")
_RESERVATION = re.compile(r"^\s+(?P<count>\d+)\s+RESERVATIONs?\s+for\s+", re.IGNORECASE)
_QUEUED = re.compile(r"\bqueued for (?P<count>\d+) licenses?\b", re.IGNORECASE)
_DOWN_HINTS = (
    "cannot connect to license server",
    "license server machine is down",
    "desired vendor daemon is down",
    "lmgrd is not running",
    "cannot find license file",
    "no such feature exists",
    "license server system does not support this feature",
    "error getting status",
)


def parse(text: str) -> dict[str, FeatureUsage]:
    """Features found in lmstat output; raises LicenseServerError when there are none."""
    found: list[FeatureUsage] = []
    current: dict[str, int | bool | str] | None = None
    saw_users_of = False

    def close() -> None:
        if current is not None:
            found.append(
                FeatureUsage(
                    feature=str(current["feature"]),
                    issued=int(current["issued"]),
                    in_use=int(current["in_use"]),
                    reserved=int(current["reserved"]),
                    queued=int(current["queued"]),
                    uncounted=bool(current["uncounted"]),
                )
            )

    for line in text.splitlines():
        match = _USERS_OF.match(line.strip())
        if match:
            saw_users_of = True
            close()
            current = _feature_start(match.group("feature"), match.group("body").strip())
            continue
        if current is None:
            continue
        reservation = _RESERVATION.match(line)
        if reservation:
            current["reserved"] = int(current["reserved"]) + int(reservation.group("count"))
            continue
        queued = _QUEUED.search(line)
        if queued:
            current["queued"] = int(current["queued"]) + int(queued.group("count"))
    close()
    if not saw_users_of:
        raise LicenseServerError(_failure_reason(text))
    return merge(found)


def _feature_start(feature: str, body: str) -> dict[str, int | bool | str] | None:
    """State for a new feature block, or None when the totals line carries no usable numbers."""
    state: dict[str, int | bool | str] = {
        "feature": feature,
        "issued": 0,
        "in_use": 0,
        "reserved": 0,
        "queued": 0,
        "uncounted": False,
    }
    totals = _TOTALS.match(body)
    if totals:
        state["issued"] = int(totals.group("issued"))
        state["in_use"] = int(totals.group("in_use"))
        return state
    if body.lower().startswith("uncounted"):
        state["uncounted"] = True
        return state
    return None  # "(Error: ...)" or an unknown shape: skip the feature rather than guess


def _failure_reason(text: str) -> str:
    """One line saying why lmstat output has no features."""
    for line in text.splitlines():
        lowered = line.lower()
        if any(hint in lowered for hint in _DOWN_HINTS):
            return f"lmstat: {line.strip()[:200]}"
    if not text.strip():
        return "lmstat printed nothing"
    return "lmstat output has no 'Users of' lines (not lmstat output?)"
