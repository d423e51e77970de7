"""slurmdbd.conf is rendered from the accounting secret, written 0600, and bad secrets fail with one line."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from elastic_slurm.cli import main
from slurm_plugin.render.dbd import DbdConfigError, render_slurmdbd_conf
from stacks.user_data import boot_commands

SECRET = {"engine": "mariadb", "host": "db.cluster-x.us-east-1.rds.amazonaws.com", "port": 3306,
          "username": "slurm", "password": "Abc123-_.,=", "dbname": "slurm_acct_db"}  # fmt: skip


def test_slurmdbd_conf_points_at_the_secret_database() -> None:
    text = render_slurmdbd_conf(SECRET, "ctl-0")
    lines = text.splitlines()
    for expected in (
        "DbdHost=ctl-0",
        "StorageType=accounting_storage/mysql",
        "StorageHost=db.cluster-x.us-east-1.rds.amazonaws.com",
        "StoragePort=3306",
        "StorageUser=slurm",
        "StoragePass=Abc123-_.,=",
        "StorageLoc=slurm_acct_db",
        "SlurmUser=slurm",
    ):
        assert expected in lines


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"password": "has#hash"}, "secret: 'password' has a character"),
        ({"password": "has space"}, "secret: 'password' has a character"),
        ({"host": None}, "secret: key 'host' is missing"),
        ({"port": "x3306"}, "secret: 'port' must be a number"),
    ],
)
def test_unusable_secrets_are_refused_naming_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(DbdConfigError, match=message.replace("(", r"\(")):
        render_slurmdbd_conf({**SECRET, **change}, "ctl-0")


def test_cli_writes_the_file_with_mode_0600(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(SECRET))
    out = tmp_path / "slurmdbd.conf"
    assert main(["render-slurmdbd", "--secret-json", str(secret), "--dbd-host", "ctl-0", "--out", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "StorageUser=slurm" in out.read_text()


def test_cli_bad_secret_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text("{not json")
    code = main(["render-slurmdbd", "--secret-json", str(secret), "--dbd-host", "h", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--secret-json: not JSON" in err[0]


def test_controller_boot_writes_slurmdbd_conf_before_starting_slurmdbd() -> None:
    script = "\n".join(boot_commands("controller", {"ES_CLUSTER": "c1", "ES_REGION": "us-east-1"}))
    assert script.index("render-slurmdbd") < script.index("systemctl enable --now slurmdbd")
    assert script.index("aws secretsmanager get-secret-value") < script.index("render-slurmdbd")


def test_primary_controller_schedules_the_long_health_check() -> None:
    script = "\n".join(boot_commands("controller", {"ES_CLUSTER": "c1", "ES_REGION": "us-east-1"}))
    assert "systemctl enable --now slurm-longcheck.timer" in script
