"""Each sink of config values escapes or refuses on its own (defence in depth behind the config's patterns): the env
file the boot sources as root, the fstab lines, the license timer drop-in, the deconfigure Lambda's SSM command, the
config apply's slurmctld drop-in; and `validate` refuses the values of issue 30 by name."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse
from cluster_config.model_base import CLUSTER_NAME_PATTERN
from cluster_config.safe_types import PATH_PATTERN
from lambdas.deconfigure import handler
from slurm_plugin.licenses.units import timer_dropin
from stacks.user_data import (
    FSTAB_JQ,
    MOUNTS_FOR_JQ,
    boot_commands,
    env_file,
    env_file_text,
    env_values_in,
    read_env_file,
)

REPO = Path(__file__).resolve().parents[2]
SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurmdbd-AbCdEf"
NASTY = {
    "ES_A": "$(touch pwned)",
    "ES_B": "`touch pwned`; touch pwned | x & y",
    "ES_C": 'back\\slash "double" %n #hash  two  spaces ',
    "ES_D": "\uff04\uff08touch pwned\uff09 \u200b \u202e",  # fullwidth $( ), zero-width space, RTL override
    "ES_E": "",
}
CLUSTER: dict[str, Any] = {
    "name": "small",
    "region": "us-east-1",
    "storage": {"efs": {}},
    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
    "partitions": [
        {"name": "cpu", "default": True, "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}]}
    ],
}


def _source(text: str, tmp: Path, keys: list[str]) -> list[str]:
    (tmp / "env").write_text(text)
    script = 'set -a; . ./env; set +a; for k in "$@"; do printf "%s\\0" "${!k}"; done'
    out = subprocess.run(["bash", "-c", script, "bash", *keys], cwd=tmp, capture_output=True, check=True)
    return out.stdout.decode().split("\0")[:-1]


def test_bash_reads_every_env_file_value_back_verbatim_and_runs_nothing(tmp_path: Path) -> None:
    assert _source(env_file_text(NASTY), tmp_path, list(NASTY)) == list(NASTY.values())
    assert not (tmp_path / "pwned").exists()


def test_the_user_data_writes_the_env_file_through_a_quoted_here_document(tmp_path: Path) -> None:
    lines = env_file(NASTY)
    script = "\n".join(lines).replace("/etc/elastic-slurm", str(tmp_path))
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
    assert (tmp_path / "env").read_text() == env_file_text(NASTY)
    assert read_env_file((tmp_path / "env").read_text()) == NASTY
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "env").stat().st_mode & 0o777 == 0o600  # root's only: job users do not read it


def test_the_env_file_is_single_quoted_lines_that_systemd_reads_verbatim_too() -> None:
    # systemd.exec(5), EnvironmentFile=: a single-quoted value holds any character but ' verbatim, no escapes
    for line in env_file_text(NASTY).splitlines():
        key, value = line.split("=", 1)
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", key)
        assert value[0] == value[-1] == "'" and "'" not in value[1:-1]
        assert not re.search(r"[\x00-\x1f\x7f]", value)


@pytest.mark.parametrize("bad", ["it's", "a\nb", "a\rb", "a\x00b", "a\x1bb"])
def test_the_env_file_refuses_a_value_no_quoting_carries_to_bash_and_systemd(bad: str) -> None:
    with pytest.raises(ValueError, match="ES_X"):
        env_file_text({"ES_X": bad})


def test_the_env_file_values_are_found_back_in_a_whole_user_data_script() -> None:
    script = "\n".join(boot_commands("compute", {"ES_CLUSTER": "small", "ES_REGION": "us-east-1"}))
    assert env_values_in(script) == {"ES_CLUSTER": "small", "ES_REGION": "us-east-1", "ES_ROLE": "compute"}


def _fstab(entries: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["jq", "-r", FSTAB_JQ], input=json.dumps(entries), capture_output=True, text=True)


def _unmangle(field: str) -> str:
    """What libmount reads from an fstab field: a backslash and three octal digits are that character."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def test_fstab_fields_are_escaped_so_every_line_has_six_fields_and_reads_back() -> None:
    entry = {"type": "nfs4", "source": "h:/a b#c\\d", "mount_point": "/tools", "options": "ro,\tx\ny\r #z"}
    out = _fstab([entry, {"type": "efs", "source": "fs-1", "mount_point": "/shared", "options": "tls"}])
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    mount_point, line = first.split("\t")
    fields = line.split()
    assert mount_point == "/tools" and len(fields) == 6
    assert [_unmangle(f) for f in fields[:4]] == ["h:/a b#c\\d", "/tools", "nfs4", "ro,\tx\ny\r #z,_netdev,nofail"]
    assert second == "/shared\tfs-1:/ /shared efs tls,_netdev,nofail 0 0"


@pytest.mark.parametrize(
    "mount_point",
    ["/shared$(touch pwned)", "/a b", "relative", "/x\n/y", "/a//b", "/shared/../etc", "/a/./b", "/..", "/ok\n"],
)
def test_the_boot_stops_at_a_mount_point_that_is_not_a_plain_path(mount_point: str) -> None:
    out = _fstab([{"type": "efs", "source": "fs-1", "mount_point": mount_point, "options": "tls"}])
    assert out.returncode != 0 and "not a plain mount point" in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    "mount_point",
    [
        "/a b",
        "/x%n",
        "/x\nExecStartPre=/bin/touch /pwned",
        "/shared$(id)",
        "relative",
        "/shared/../etc",
        "/a//b",
        "/ok\n",
    ],
)
def test_the_slurmd_mounts_drop_in_refuses_a_mount_point_that_is_not_a_plain_path(mount_point: str) -> None:
    """The boot's `RequiresMountsFor=` lines (systemd reads a blank as a list separator, '%' as a specifier, a newline
    as a new directive): a mount point that is not a plain path writes nothing and stops the boot."""
    entries = [{"mount_point": "/shared"}, {"mount_point": mount_point}]
    out = subprocess.run(["jq", "-r", MOUNTS_FOR_JQ], input=json.dumps(entries), capture_output=True, text=True)
    assert out.returncode != 0 and "not a plain mount point" in out.stderr and out.stdout == ""
    fine = subprocess.run(["jq", "-r", MOUNTS_FOR_JQ], input=json.dumps(entries[:1]), capture_output=True, text=True)
    assert fine.stdout == "RequiresMountsFor=/shared\n"


def test_the_user_data_uses_the_fstab_program() -> None:
    script = "\n".join(boot_commands("compute", {"ES_CLUSTER": "small"}))
    assert f"jq -r '{FSTAB_JQ}' /etc/elastic-slurm/mounts.json |" in script
    assert "'" not in FSTAB_JQ  # it sits in single quotes
    assert f"mounts_for=$(jq -r '{MOUNTS_FOR_JQ}' /etc/elastic-slurm/mounts.json)" in script
    assert "'" not in MOUNTS_FOR_JQ


def test_the_deconfigure_command_quotes_and_checks_every_value() -> None:
    assert handler.submit_host_commands(["/shared", "/fsx"], "alpha") == [
        "umount -l /shared 2>/dev/null || true",
        "umount -l /fsx 2>/dev/null || true",
        "rm -rf -- /etc/elastic-slurm/alpha /etc/slurm/clusters/alpha",
    ]
    for mount_points, cluster in (
        (["/shared$(touch pwned)"], "alpha"),
        (["/shared/../etc"], "alpha"),
        (["/shared\n"], "alpha"),
        (["/shared"], ""),
        (["/shared"], "a;b"),
    ):
        with pytest.raises(ValueError):
            handler.submit_host_commands(mount_points, cluster)


def test_the_deconfigure_rules_equal_the_configs() -> None:
    # the Lambda ships without the project: its copies of the patterns must stay those of the config
    assert handler.CLUSTER_NAME.pattern == CLUSTER_NAME_PATTERN
    assert handler.MOUNT_POINT.pattern == PATH_PATTERN


def test_a_bad_mount_point_fails_the_delete_with_a_reason_instead_of_running() -> None:
    class Ec2:
        def get_paginator(self, _: str) -> Any:
            class Pages:
                def paginate(self, **_: Any) -> list[dict[str, Any]]:
                    item = {"InstanceId": "i-1", "State": {"Name": "running"}, "Tags": []}
                    return [{"Reservations": [{"Instances": [item]}]}]

            return Pages()

    class Ssm:
        sent = 0

        def send_command(self, **_: Any) -> dict[str, Any]:
            Ssm.sent += 1
            return {"Command": {"CommandId": "c"}}

    outcome = handler.deconfigure(Ec2(), Ssm(), "alpha", ["/x$(id)"], lambda: 600_000, lambda _: None)
    assert not outcome.ok and outcome.reason.startswith("ValueError: mount point")
    assert Ssm.sent == 0


def _config(**changes: Any) -> Any:
    data: dict[str, Any] = {"clusters": [copy.deepcopy(CLUSTER)]}
    for key, value in changes.items():
        data[key] = value
    return data


def test_the_timer_drop_in_refuses_a_schedule_that_is_not_a_calendar_expression() -> None:
    lic = {"name": "ansys", "count": 4, "server_type": "flexlm", "server": "27000@lic", "sync_schedule": "*:0/5"}
    accounting = {"mode": "existing", "endpoint": "db:3306", "secret_arn": SECRET}
    config = parse(_config(licenses=[lic], accounting=accounting))
    assert timer_dropin(config) == (
        "# Written by elastic-slurm render from licenses[].sync_schedule.\n[Timer]\nOnCalendar=\nOnCalendar=*:0/5\n"
    )
    bad = config.licenses[0].model_copy(update={"sync_schedule": "*:0/5\n[Service]\nExecStart=/bin/sh -c id"})
    with pytest.raises(ValueError, match="sync_schedule"):
        timer_dropin(config.model_copy(update={"licenses": [bad]}))


def _state_dir_check() -> str:
    lines = (REPO / "assets/bootstrap/elastic-slurm-config-apply").read_text().splitlines()
    (line,) = [x for x in lines if x.startswith('case "$state_dir" in')]
    return line


@pytest.mark.parametrize(
    ("state_dir", "ok"),
    [("/shared/slurm/state", True), ("/var/spool/slurmctld", True), ("/a b", False), ("/a%n", False), ("", False)],
)
def test_config_apply_writes_the_slurmctld_drop_in_only_for_a_plain_state_dir(state_dir: str, ok: bool) -> None:
    script = f'log() {{ echo "$*" >&2; }}; state_dir=$1\n{_state_dir_check()}\necho fine'
    out = subprocess.run(["bash", "-c", script, "bash", state_dir], capture_output=True, text=True)
    assert (out.returncode == 0 and out.stdout == "fine\n") is ok, out


ISSUE_30 = [
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/shared$(touch${IFS}/tmp/x)"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/etc"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/opt/elastic-slurm"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/shared/../etc"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/shared//x"}}}),
    ("clusters[0].storage.efs.mount_point", {"storage": {"efs": {"mount_point": "/shared/./x"}}}),
    (
        "clusters[0].storage.extra_mounts[0].options",
        {"storage": {"efs": {}, "extra_mounts": [{"source": "h:/x", "mount_point": "/x", "options": "ro #"}]}},
    ),
    (
        "clusters[0].storage.extra_mounts[0].fs_type",
        {"storage": {"efs": {}, "extra_mounts": [{"source": "h:/x", "mount_point": "/x", "fs_type": "nfs4 ro"}]}},
    ),
    (
        "clusters[0].storage.extra_mounts[0].source",
        {"storage": {"efs": {}, "extra_mounts": [{"source": "#h:/x", "mount_point": "/x"}]}},
    ),
]


@pytest.mark.parametrize(("path", "change"), ISSUE_30, ids=[str(i) for i in range(len(ISSUE_30))])
def test_validate_refuses_values_that_would_run_or_shift_at_a_sink(path: str, change: dict[str, Any]) -> None:
    cluster = {**copy.deepcopy(CLUSTER), **change}
    with pytest.raises(ConfigInvalid) as refused:
        parse({"clusters": [cluster]})
    assert [e.path for e in refused.value.errors] == [path], refused.value.errors


@pytest.mark.parametrize(
    ("path", "changes"),
    [
        (
            "accounting.secret_arn",
            {
                "accounting": {
                    "mode": "existing",
                    "endpoint": "db:3306",
                    "secret_arn": SECRET.replace("-AbCdEf", "$(id)-x"),
                }
            },
        ),
        # invisible characters are checked for the whole section; the message starts with the field
        ("licenses[0]", {"licenses": [{"name": "a", "count": 1, "sync_schedule": "*:0/5\n[Service]"}]}),
        ("licenses[0].sync_schedule", {"licenses": [{"name": "a", "count": 1, "sync_schedule": "%H"}]}),
        ("tags.owner", {"tags": {"owner": "$(id)"}}),
    ],
)
def test_validate_refuses_the_shared_sections_injections(path: str, changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        parse(_config(**changes))
    assert [e.path for e in refused.value.errors] == [path], refused.value.errors


def test_the_slurm_source_url_cannot_leave_the_image_builder_steps_quotes() -> None:
    # assets/imagebuilder/slurm.yaml passes it as '{{ SlurmSourceUrl }}'
    assert "'{{ SlurmSourceUrl }}'" in (REPO / "assets/imagebuilder/slurm.yaml").read_text()
    cluster = copy.deepcopy(CLUSTER)
    cluster["images"] = {"slurm_source": {"url": "https://x.example/s.tar.bz2'$(id)'", "sha256": "0" * 64}}
    with pytest.raises(ConfigInvalid) as refused:
        parse({"clusters": [cluster]})
    assert [e.path for e in refused.value.errors] == ["clusters[0].images.slurm_source.url"]
