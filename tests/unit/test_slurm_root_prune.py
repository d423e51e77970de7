"""`python -m localcloud.image.slurm_root prune`: only roots the current inputs do not select, and only old ones, go."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localcloud.image import slurm_root


def test_prune_removes_old_unused_roots_and_keeps_current_young_and_foreign_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slurm_root, "ROOT_CACHE", tmp_path)
    monkeypatch.setattr(
        slurm_root, "root_path", lambda major=slurm_root.DEFAULT_SLURM: tmp_path / f"image-{major}-current"
    )
    monkeypatch.setattr(slurm_root, "slurm_layer_path", lambda: tmp_path / "slurm-layer-current")
    current = [tmp_path / f"image-{major}-current" for major in slurm_root.RELEASES] + [
        tmp_path / "slurm-layer-current"
    ]
    old = [tmp_path / "image-24.11.5-trixie-aaaa", tmp_path / "slurm-26.05-sid-bbbb", tmp_path / "slurm-layer-cccc"]
    in_use = tmp_path / "image-24.11.5-trixie-eeee"  # old, but a running local cloud's daemons are chrooted in it
    monkeypatch.setattr(slurm_root, "_roots_in_use", lambda: {in_use.name})
    young = tmp_path / "image-24.11.5-trixie-dddd"  # maybe another checkout's build in progress
    for path in [*current, *old, young, in_use, tmp_path / "sources"]:
        (path / "etc").mkdir(parents=True)
    (tmp_path / "image-24.11.5-trixie-aaaa.log").write_text("log\n")
    now = 10_000_000.0
    for path in [*current, *old, in_use, tmp_path / "image-24.11.5-trixie-aaaa.log", tmp_path / "sources"]:
        os.utime(path, (now - 7200, now - 7200))
    os.utime(young, (now - 60, now - 60))
    removed = slurm_root.prune(now=now)
    assert sorted(p.name for p in removed) == sorted([p.name for p in old] + ["image-24.11.5-trixie-aaaa.log"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in current] + [young.name, in_use.name, "sources"]
    )
