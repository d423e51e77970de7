"""docs/troubleshooting.md explains every Slurm node reason the product writes: the reasons are grepped out of the
source the way an operator would find them, so a new reason (or reason code) without a doc entry fails here.

What is grepped (slurm_plugin/**/*.py and the health check script):
- the reason prefixes `*_PREFIX = "(Xyz:"` (slurm_plugin/manager/model.py) and the health check's `PREFIX`;
- `REASON_* = f"{X_PREFIX}Tag) text"` constants: the whole text up to the first `{placeholder}`;
- `f"{X_PREFIX}Tag) {...}"` written inline: the `(Xyz:Tag)` part;
- `f"(Code:{...}) text {...}"` reasons: every literal stretch of three words or more;
- reason codes: `*_CODE = "Code"` constants, `power_down_reason("Code", ...)`, the default codes of a failed launch
  (`code: str = "..."`, `next(..., "Code")`), and every EC2 capacity error code the plugin knows;
- the health checks' `Unhealthy("check", ...)` → `(Health:check)`;
- Slurm's own reasons the manager acts on (`SLURM_FAILURE_REASONS`, `SLURM_DRAIN_REASONS`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "troubleshooting.md"
PLUGIN = sorted((ROOT / "slurm_plugin").rglob("*.py"))
HEALTHCHECK = ROOT / "assets" / "health" / "elastic-slurm-healthcheck"

_PREFIX = re.compile(r'^(\w+_PREFIX) = "(\(\w+:)"', re.MULTILINE)
_REASON_CONSTANT = re.compile(r'^REASON_\w+ = f"\{(\w+_PREFIX)\}([^"{]+)', re.MULTILINE)
_INLINE_TAG = re.compile(r'f"\{(\w+_PREFIX)\}(\w+\))')
_CODE_FSTRING = re.compile(r'f"\(Code:\{[^}]+\}\) ([^"]*)"')
_CODE_CONSTANT = re.compile(r'^\w+_CODE = "(\w+)"', re.MULTILINE)
_CODE_CALL = re.compile(r'power_down_reason\("(\w+)"')
_DEFAULT_CODE = re.compile(r'(?:\bcode: str = |\bnext\(.*,\s*)"([A-Z][A-Za-z]+)"\)?')
_CAPACITY_CODES = re.compile(r"CAPACITY_ERROR_CODES = frozenset\(\s*\{(.*?)\}\s*\)", re.DOTALL)
_CHECK = re.compile(r'Unhealthy\("(\w+)"')
_SLURM_REASONS = re.compile(r"^SLURM_\w+_REASONS = \(([^)]*)\)", re.MULTILINE)
_STRING = re.compile(r'"([^"]+)"')


def _sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in PLUGIN}


def reason_texts() -> set[str]:
    """Every reason (or fixed part of one) the product writes, as it must appear in the page."""
    sources = _sources()
    every = "\n".join(sources.values())
    prefixes = dict(_PREFIX.findall(every))
    found: set[str] = set(prefixes.values())
    for name, rest in _REASON_CONSTANT.findall(every):
        found.add(prefixes[name] + rest.rstrip())
    for name, tag in _INLINE_TAG.findall(every):
        found.add(prefixes[name] + tag)
    for text in _CODE_FSTRING.findall(every):
        for stretch in re.split(r"\{[^}]*\}|\[", text):
            if len(stretch.split()) >= 3:
                found.add(stretch.strip())
    codes = {*_CODE_CONSTANT.findall(every), *_CODE_CALL.findall(every), *_DEFAULT_CODE.findall(every)}
    capacity = _CAPACITY_CODES.search(every)
    assert capacity is not None, "CAPACITY_ERROR_CODES not found in slurm_plugin/"
    codes.update(_STRING.findall(capacity[1]))
    found.update(f"`{code}`" for code in codes)
    health = HEALTHCHECK.read_text(encoding="utf-8")
    health_prefix = re.search(r'^PREFIX = "(\(\w+:)"', health, re.MULTILINE)
    assert health_prefix is not None, "the health check's PREFIX not found"
    found.update(f"{health_prefix[1]}{check})" for check in _CHECK.findall(health))
    slurm = _SLURM_REASONS.findall(every)
    assert len(slurm) == 2, "SLURM_FAILURE_REASONS and SLURM_DRAIN_REASONS not found"
    for reasons in slurm:
        found.update(_STRING.findall(reasons))
    return found


def test_the_grep_finds_what_it_should() -> None:
    """A regex that stopped matching would make the next test pass on nothing."""
    texts = reason_texts()
    for known in (
        "(Manager:InstanceGone) instance terminated or lost",
        "(EC2:Impaired) EC2 status check impaired",
        "(Spot:Interruption) spot interruption warning",
        "(EC2:Scheduled)",
        "Failure when resuming nodes",
        "consecutive failed boots, no more launches;",
        "no capacity in any location of pool",
        "`ProtectedMode`",
        "`ManifestError`",
        "`CapacityCooldown`",
        "`ResumeFailed`",
        "`JobIncomplete`",
        "`InsufficientInstanceCapacity`",
        "(Health:gpu)",
        "(Health:stream)",
        "ResumeTimeout reached",
        "Not responding",
        "Duplicate jobid",
    ):
        assert known in texts, f"the grep no longer finds {known!r}"
    assert len(texts) >= 40


@pytest.mark.parametrize("text", sorted(reason_texts()))
def test_every_reason_the_product_writes_is_in_the_troubleshooting_page(text: str) -> None:
    page = DOC.read_text(encoding="utf-8")
    assert text in page, f"docs/troubleshooting.md does not explain the node reason {text!r}: add it"
