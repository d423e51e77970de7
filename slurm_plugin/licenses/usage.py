"""What a license server says about its features, as plain data shared by the FlexLM and RLM parsers."""

from __future__ import annotations

from dataclasses import dataclass


class LicenseServerError(Exception):
    """The server did not answer, or printed something we cannot trust (one-line message)."""


@dataclass(frozen=True)
class FeatureUsage:
    """One feature on one server: licenses issued, in use (checked out, as the server totals them), reserved."""

    feature: str
    issued: int
    in_use: int
    reserved: int = 0
    queued: int = 0
    uncounted: bool = False

    @property
    def free(self) -> int:
        """Licenses nobody holds, as the server sees it (never negative)."""
        return max(0, self.issued - self.in_use)


def merge(usages: list[FeatureUsage]) -> dict[str, FeatureUsage]:
    """Sum usages of the same feature (one feature served by several vendor daemons or pools)."""
    merged: dict[str, FeatureUsage] = {}
    for usage in usages:
        old = merged.get(usage.feature)
        if old is None:
            merged[usage.feature] = usage
            continue
        merged[usage.feature] = FeatureUsage(
            feature=usage.feature,
            issued=old.issued + usage.issued,
            in_use=old.in_use + usage.in_use,
            reserved=old.reserved + usage.reserved,
            queued=old.queued + usage.queued,
            uncounted=old.uncounted and usage.uncounted,
        )
    return merged
