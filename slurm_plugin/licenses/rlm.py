"""Parse `rlmutil rlmstat -a -c port@host` (Reprise RLM, v9 to v15) into per-feature usage.

Only the "license pool status" sections are read: each pool is a product line followed by its counters,
    nuke_i v2019.1231
        count: 10, # reservations: 1, inuse: 3, exp: 31-dec-2026
        obsolete: 0, min_remove: 120, total checkouts: 1234
A product with several pools (versions, expiry dates) is summed. `count: uncounted` marks node-locked pools.
Output without any pool counters is an error (server down, wrong port, not rlmstat output).
"""

from __future__ import annotations

import re

from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError, merge

_POOL_HEADER = re.compile(r"license pool status on ", re.IGNORECASE)
_USAGE_HEADER = re.compile(r"license usage status on ", re.IGNORECASE)
_PRODUCT = re.compile(r"^\s*(?P<feature>[A-Za-z0-9_][\w.+-]*)\s+v[\w.]+\s*$")
_COUNTS = re.compile(
    r"^\s*count:\s*(?P<count>\d+|uncounted)\s*,\s*#\s*reservations:\s*(?P<reserved>\d+)\s*,"
    r"\s*inuse:\s*(?P<in_use>\d+)",
    re.IGNORECASE,
)
_DOWN_HINTS = ("error connecting", "cannot connect", "connection refused", "not running", "timed out", "bad server")


def parse(text: str) -> dict[str, FeatureUsage]:
    """Features found in rlmstat output; raises LicenseServerError when there are none."""
    found: list[FeatureUsage] = []
    in_pools = False
    product: str | None = None
    for line in text.splitlines():
        if _POOL_HEADER.search(line):
            in_pools, product = True, None
            continue
        if _USAGE_HEADER.search(line) or "ISV server status on" in line:
            in_pools, product = False, None
            continue
        if not in_pools:
            continue
        header = _PRODUCT.match(line)
        if header:
            product = header.group("feature")
            continue
        counts = _COUNTS.match(line)
        if counts and product is not None:
            uncounted = counts.group("count").lower() == "uncounted"
            found.append(
                FeatureUsage(
                    feature=product,
                    issued=0 if uncounted else int(counts.group("count")),
                    in_use=int(counts.group("in_use")),
                    reserved=int(counts.group("reserved")),
                    uncounted=uncounted,
                )
            )
            product = None
    if not found:
        raise LicenseServerError(_failure_reason(text))
    return merge(found)


def _failure_reason(text: str) -> str:
    """One line saying why rlmstat output has no pools."""
    for line in text.splitlines():
        lowered = line.lower()
        if any(hint in lowered for hint in _DOWN_HINTS):
            return f"rlmstat: {line.strip()[:200]}"
    if not text.strip():
        return "rlmstat printed nothing"
    return "rlmstat output has no license pool counters (not rlmstat output?)"
