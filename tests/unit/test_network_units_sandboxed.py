"""The units that serve the network — slurmrestd (the image's drop-in on Slurm's own unit), the web page and the
metrics exporter — run unprivileged and sandboxed: no new privileges, a read-only system, a private /tmp (issue 30).
The local cloud's systemctl stand-in does not apply these directives (docs/local-cloud.md): this checks the files the
image installs."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).resolve().parents[2] / "assets" / "systemd"
UNITS = ["slurmrestd.service.d/elastic-slurm.conf", "slurm-webui.service", "slurm-exporter.service"]
REQUIRED = {"NoNewPrivileges": {"true"}, "ProtectSystem": {"full", "strict"}, "PrivateTmp": {"true"}}


def _service(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"))
    return dict(parser["Service"])


@pytest.mark.parametrize("unit", UNITS)
def test_a_network_facing_unit_runs_unprivileged_and_sandboxed(unit: str) -> None:
    service = _service(SYSTEMD / unit)
    assert service.get("User") not in (None, "", "root")
    for key, value in REQUIRED.items():
        assert service.get(key) in value, f"{unit}: {key}={service.get(key)}"
