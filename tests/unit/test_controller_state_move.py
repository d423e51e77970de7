"""A cluster deployed before the controllers had a file system of their own: the primary's first boot on the new one
moves slurmctld's and the plugin's state there (`move_state` of assets/bootstrap/elastic-slurm-config-apply, run
here as the script has it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CONFIG_APPLY = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-config-apply"


def _move_state_function() -> str:
    lines = CONFIG_APPLY.read_text(encoding="utf-8").splitlines()
    start = lines.index("move_state() {")
    end = lines.index("}", start)
    return "\n".join(lines[start : end + 1])


def move_state(old: Path, new: Path) -> subprocess.CompletedProcess[str]:
    script = f'set -Eeuo pipefail\nlog() {{ echo "$*" >&2; }}\n{_move_state_function()}\nmove_state "$1" "$2"'
    return subprocess.run(["bash", "-c", script, "bash", str(old), str(new)], capture_output=True, text=True)


def _old_state(root: Path) -> Path:
    old = root / "shared" / "slurm" / "state" / "c"
    (old / "hash.0").mkdir(parents=True)
    (old / "job_state").write_bytes(b"jobs")
    (old / "hash.0" / "job.17").write_bytes(b"script")
    os.chown(old / "job_state", 64030, 64030)
    os.chmod(old / "job_state", 0o600)
    return old


def test_the_old_state_is_copied_whole_with_owners_and_modes(tmp_path: Path) -> None:
    old = _old_state(tmp_path)
    new = tmp_path / "slurm-state" / "c" / "slurmctld"
    out = move_state(old, new)
    assert out.returncode == 0, out.stderr
    assert (new / "job_state").read_bytes() == b"jobs" and (new / "hash.0" / "job.17").read_bytes() == b"script"
    info = (new / "job_state").stat()
    assert (info.st_uid, info.st_mode & 0o777) == (64030, 0o600)
    assert f"moved the state in {old} to {new}" in out.stderr
    assert (old / "job_state").exists()  # left for the operator
    assert not Path(f"{new}.moving").exists()


def test_a_new_place_that_holds_state_is_never_overwritten(tmp_path: Path) -> None:
    old = _old_state(tmp_path)
    new = tmp_path / "slurm-state" / "c" / "slurmctld"
    new.mkdir(parents=True)
    (new / "job_state").write_bytes(b"newer")
    assert move_state(old, new).returncode == 0
    assert (new / "job_state").read_bytes() == b"newer" and not (new / "hash.0").exists()


def test_an_empty_new_place_and_a_half_done_copy_are_replaced(tmp_path: Path) -> None:
    old = _old_state(tmp_path)
    new = tmp_path / "slurm-state" / "c" / "slurmctld"
    new.mkdir(parents=True)  # made empty by an earlier boot step
    Path(f"{new}.moving").mkdir()  # a copy an earlier boot did not finish
    (Path(f"{new}.moving") / "half").write_bytes(b"")
    assert move_state(old, new).returncode == 0
    assert sorted(p.name for p in new.iterdir()) == ["hash.0", "job_state"]


def test_nothing_to_move_on_a_new_cluster(tmp_path: Path) -> None:
    new = tmp_path / "slurm-state" / "c" / "slurmctld"
    out = move_state(tmp_path / "shared" / "slurm" / "state" / "c", new)
    assert (out.returncode, out.stderr, new.exists()) == (0, "", False)
