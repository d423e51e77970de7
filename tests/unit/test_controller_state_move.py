"""A cluster deployed by a release that kept Slurm's state on the users' shared file system: the primary's first
boot moves slurmctld's and the plugin's state to the controllers' own file system, once, after every controller of
that release is gone; a backup waits for the move (assets/bootstrap/elastic-slurm-config-apply's block, run here as
the script has it, with the AWS lookup and `mountpoint` stood in for)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CONFIG_APPLY = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-config-apply"
SLURM_UID = 64030


def _move_block() -> str:
    """The script's lines from `MOVED=` up to the directories step that follows the move."""
    lines = CONFIG_APPLY.read_text(encoding="utf-8").splitlines()
    start = lines.index("MOVED=.elastic-slurm-moved")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith('ES_STATE_DIR="$plugin_state"'))
    return "\n".join(lines[start:end])


class Boot:
    """One controller boot's view: the shared mount, the controllers' own file system, the env config apply has."""

    def __init__(self, root: Path, index: int = 0, controllers: int = 2) -> None:
        self.root = root
        self.shared = root / "shared"
        self.own = root / "slurm-state"
        self.state_dir = self.own / "c" / "slurmctld"
        self.plugin_state = self.own / "c" / "plugin" if controllers == 2 else Path("/var/lib/elastic-slurm")
        self.index = index
        self.calls = root / "calls"
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        python = self.bin / "python"  # config apply's "$PY": the predecessor wait is `$PY -m slurm_plugin.predecessor`
        python.write_text(
            f'#!/bin/bash\n[ "$1 $2" = "-m slurm_plugin.predecessor" ] && echo "wait-predecessor ${{*:3}}" >> {self.calls}\n'
        )
        python.chmod(0o755)

    @property
    def old_state(self) -> Path:
        return self.shared / "slurm" / "state" / "c"

    @property
    def old_plugin(self) -> Path:
        return self.shared / "elastic-slurm" / "state" / "c"

    def run(self, reload: str = "", mounted: bool = True, extra: str = "") -> subprocess.CompletedProcess[str]:
        script = "\n".join(
            [
                "set -Eeuo pipefail",
                'log() { echo "$*" >&2; }',
                f'mountpoint() {{ [ "$2" = {self.own} ] && {"true" if mounted else "false"}; }}',
                extra,
                f"BIN={self.bin} PY={self.bin / 'python'} ES_SHARED_MOUNT={self.shared} ES_CLUSTER=c"
                f" ES_CONTROLLER_INDEX={self.index}",
                f"reload={reload!r} state_dir={self.state_dir} plugin_state={self.plugin_state}",
                _move_block(),
                "echo applied",
            ]
        )
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def _old_release(boot: Boot) -> None:
    """What the release before left on the shared file system (owners and modes as slurmctld writes them)."""
    (boot.old_state / "hash.7").mkdir(parents=True)
    (boot.old_state / "job_state").write_bytes(b"jobs")
    (boot.old_state / "hash.7" / "job.17").write_bytes(b"script")
    (boot.old_state / "jwt_hs256.key").write_bytes(b"k" * 32)
    boot.old_plugin.mkdir(parents=True)
    (boot.old_plugin / "nodes.json").write_text('{"cpu-1": {"instance_id": "i-1"}}')
    if os.geteuid() == 0:
        os.chown(boot.old_state / "job_state", SLURM_UID, SLURM_UID)
    os.chmod(boot.old_state / "job_state", 0o600)


def test_the_primary_moves_both_states_once_every_old_controller_is_gone(tmp_path: Path) -> None:
    boot = Boot(tmp_path)
    _old_release(boot)
    out = boot.run()
    assert out.returncode == 0 and out.stdout == "applied\n", out.stderr
    assert boot.calls.read_text() == "wait-predecessor --any-index\n"  # before anything moved
    assert (boot.state_dir / "job_state").read_bytes() == b"jobs"
    assert (boot.state_dir / "hash.7" / "job.17").read_bytes() == b"script"
    assert (boot.plugin_state / "nodes.json").read_text() == '{"cpu-1": {"instance_id": "i-1"}}'
    info = (boot.state_dir / "job_state").stat()
    assert info.st_mode & 0o777 == 0o600 and (os.geteuid() != 0 or info.st_uid == SLURM_UID)
    # the JWT key root on any node could read is gone from both places (config apply makes a new one)
    assert not (boot.state_dir / "jwt_hs256.key").exists()
    # the old copies are renamed aside: a later boot never imports them again
    assert not boot.old_state.exists() and not boot.old_plugin.exists()
    (aside,) = boot.old_state.parent.glob("c.moved-*")
    assert (aside / "job_state").exists() and not (aside / "jwt_hs256.key").exists()
    assert not Path(f"{boot.state_dir}.moving").exists()
    again = boot.run()
    assert again.returncode == 0 and boot.calls.read_text().count("wait-predecessor") == 1, again.stderr


def test_a_new_cluster_has_nothing_to_move_and_waits_for_nobody(tmp_path: Path) -> None:
    boot = Boot(tmp_path)
    out = boot.run()
    assert (out.returncode, out.stderr, boot.calls.exists(), boot.state_dir.exists()) == (0, "", False, False)


def test_state_in_both_places_is_never_chosen_between(tmp_path: Path) -> None:
    boot = Boot(tmp_path)
    _old_release(boot)
    boot.state_dir.mkdir(parents=True)
    (boot.state_dir / "job_state").write_bytes(b"newer")
    out = boot.run()
    assert out.returncode == 1 and "hold Slurm state: not choosing one" in out.stderr
    assert (boot.state_dir / "job_state").read_bytes() == b"newer" and (boot.old_state / "job_state").exists()


def test_an_empty_new_place_and_a_half_done_copy_are_replaced(tmp_path: Path) -> None:
    boot = Boot(tmp_path)
    _old_release(boot)
    boot.state_dir.mkdir(parents=True)  # an earlier boot made it, empty
    Path(f"{boot.state_dir}.moving").mkdir()  # and stopped half-way through its copy
    (Path(f"{boot.state_dir}.moving") / "half").write_bytes(b"")
    assert boot.run().returncode == 0
    assert sorted(p.name for p in boot.state_dir.iterdir()) == [".elastic-slurm-moved", "hash.7", "job_state"]


def test_the_backup_waits_for_the_primarys_move_before_anything_writes_there(tmp_path: Path) -> None:
    backup = Boot(tmp_path, index=1)
    _old_release(backup)
    # the primary moves while the backup waits (the backup's poll sleeps: its stand-in is what the primary leaves)
    moved_meanwhile = (
        f"sleep() {{ mkdir -p {backup.state_dir} {backup.plugin_state}; touch {backup.state_dir}/.elastic-slurm-moved"
        f" {backup.plugin_state}/.elastic-slurm-moved; mv {backup.old_state} {backup.old_state}.moved-x;"
        f" mv {backup.old_plugin} {backup.old_plugin}.moved-x; }}"
    )
    out = backup.run(extra=moved_meanwhile)
    assert out.returncode == 0 and "waiting for the primary to move" in out.stderr, out.stderr
    assert not backup.calls.exists()  # the backup neither looked up nor moved anything
    assert (backup.plugin_state / ".elastic-slurm-moved").exists()
    waiting = Boot(tmp_path / "again", index=1)
    _old_release(waiting)
    still = waiting.run(extra="sleep() { :; }")  # nobody moves: it gives up (after its hour), failing the boot
    assert still.returncode == 1 and "did not move Slurm's state within an hour" in still.stderr
    assert Boot(tmp_path / "again", index=0).run().returncode == 0
    assert waiting.run(extra="sleep() { exit 3; }").returncode == 0  # moved: no wait at all


def test_nothing_is_moved_on_a_reload_or_without_the_file_system_mounted(tmp_path: Path) -> None:
    boot = Boot(tmp_path)
    _old_release(boot)
    assert boot.run(reload="1").returncode == 0 and not boot.state_dir.exists()
    out = boot.run(mounted=False)
    assert out.returncode == 1 and "not mounted" in out.stderr and not boot.state_dir.exists()


@pytest.mark.parametrize("broken", ["unreadable", "symlink"])
def test_a_directory_that_cannot_be_read_fails_the_boot_instead_of_a_cold_start(tmp_path: Path, broken: str) -> None:
    boot = Boot(tmp_path)
    _old_release(boot)
    extra = ""
    if broken == "unreadable":
        extra = 'ls() { echo "ls: cannot open directory: Input/output error" >&2; return 2; }'
    else:
        target = tmp_path / "elsewhere"
        boot.old_state.rename(target)
        boot.old_state.symlink_to(target)
    out = boot.run(extra=extra)
    assert out.returncode == 1, out
    assert not boot.state_dir.exists() and not boot.calls.exists()


def test_the_key_the_move_drops_is_the_rest_apis_key_file() -> None:
    from slurm_plugin.render.rest_api import JWT_KEY_NAME

    assert f"JWT_KEY_FILE={JWT_KEY_NAME}  #" in CONFIG_APPLY.read_text(encoding="utf-8")
