"""Write a file only its owner may read (slurmdbd.conf, sssd.conf: both hold a password), atomically."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(out: Path, text: str) -> None:
    """Write `text` to `out` with mode 0600: into a temporary file created 0600, then renamed over `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    tmp.replace(out)
