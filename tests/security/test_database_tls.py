"""TLS to the accounting database (issue 30 #9): the database refuses clear text, slurmdbd connects with TLS and checks
the server's certificate against a CA the image holds.

Both sides from our own outputs: the synthesized accounting stacks (each RDS database has a parameter group with
`require_secure_transport=ON` and SchedMD's settings), the rendered slurmdbd.conf (`StorageParameters=SSL_CA=` the
path aws-tools.sh installs the RDS CA bundle at, and the bundle check of that image step, run here on good and
forged bundles), and the local cloud's MariaDB, started by its real start function: a client without TLS is refused,
one checking the certificate against the CA slurmdbd is given connects, one with another CA fails.
"""

from __future__ import annotations

import copy
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud import conf
from localcloud.aws.emulated_aws import free_port
from localcloud.layout import Layout
from localcloud.services import daemons, procs
from localcloud.services.db_tls import make_tls_files
from slurm_plugin.render.dbd import PURGE_DEFAULTS, RDS_CA_BUNDLE, DbdConfigError, DbdPaths, render_slurmdbd_conf
from stacks.accounting import DB_PARAMETERS
from tests.cdk.conftest import REPO_ROOT, Assembly

AWS_TOOLS = REPO_ROOT / "assets" / "image-build" / "aws-tools.sh"
SECRET = {"host": "db.cluster-x.us-east-1.rds.amazonaws.com", "port": 3306, "username": "slurm", "password": "pw"}


# ------------------------------------------------------------------ the stacks: RDS refuses clear text
def tls_problems(template: dict[str, Any]) -> list[str]:
    """Each RDS database of an accounting template whose parameter group does not require TLS or lacks SchedMD's
    settings (empty: every one does)."""
    resources = template["Resources"]
    problems = []
    for logical, resource in resources.items():
        key = {"AWS::RDS::DBCluster": "DBClusterParameterGroupName", "AWS::RDS::DBInstance": "DBParameterGroupName"}
        if resource["Type"] not in key:
            continue
        ref = resource["Properties"].get(key[resource["Type"]], {})
        group = resources.get(ref.get("Ref", "") if isinstance(ref, dict) else "", {})
        if resource["Type"] == "AWS::RDS::DBInstance" and "DBClusterIdentifier" in resource["Properties"]:
            continue  # an Aurora instance: its cluster's parameter group holds the settings
        parameters = group.get("Properties", {}).get("Parameters", {})
        if parameters.get("require_secure_transport") != "ON":
            problems.append(f"{logical}: require_secure_transport is not ON")
        if any(parameters.get(k) != v for k, v in DB_PARAMETERS.items()):
            problems.append(f"{logical}: not SchedMD's settings")
    return problems


@pytest.mark.parametrize(
    ("stem", "kind"), [("minimal", "AWS::RDS::DBInstance"), ("multi-az-gpu", "AWS::RDS::DBCluster")]
)
def test_every_accounting_database_refuses_connections_without_tls(
    assemblies: dict[str, Assembly], stem: str, kind: str
) -> None:
    if stem not in assemblies:
        pytest.skip(f"{stem} not synthesized (ES_SYNTH_ONLY)")
    (stack,) = [s for s in assemblies[stem].templates if s.endswith("-accounting")]
    template = assemblies[stem].template_json(stack)
    assert [r for r in template["Resources"].values() if r["Type"] == kind]  # the engine of the example
    assert tls_problems(template) == []
    assert DB_PARAMETERS["innodb_lock_wait_timeout"] == "900"  # SchedMD's accounting.shtml
    assert int(DB_PARAMETERS["max_allowed_packet"]) >= 16 * 1024 * 1024
    broken = copy.deepcopy(template)  # negative case: a parameter group that lets clear text through
    for resource in broken["Resources"].values():
        if resource["Type"] in ("AWS::RDS::DBParameterGroup", "AWS::RDS::DBClusterParameterGroup"):
            resource["Properties"]["Parameters"]["require_secure_transport"] = "OFF"
    assert tls_problems(broken) and all("require_secure_transport" in p for p in tls_problems(broken)[:1])


# ------------------------------------------------------------------ slurmdbd.conf and the image's CA bundle
def test_slurmdbd_connects_with_tls_checked_against_the_bundle_the_image_installs() -> None:
    lines = render_slurmdbd_conf(SECRET, "ctl-0").splitlines()
    assert f"StorageParameters=SSL_CA={RDS_CA_BUNDLE}" in lines
    installed = re.search(r"^rds_ca=(\S+)$", AWS_TOOLS.read_text(), re.M)
    assert installed is not None and installed.group(1) == RDS_CA_BUNDLE
    assert [line for line in lines if line.startswith("Purge")] == [f"{k}={v}" for k, v in PURGE_DEFAULTS]


def test_the_sites_slurmdbd_settings_replace_the_ca_and_the_purge_defaults() -> None:
    settings: dict[str, Any] = {"StorageParameters": "SSL_CA=/etc/pki/site-db-ca.pem", "PurgeJobAfter": "60month"}
    lines = render_slurmdbd_conf(SECRET, "ctl-0", settings=settings).splitlines()
    assert [x for x in lines if x.startswith("StorageParameters=")] == [
        "StorageParameters=SSL_CA=/etc/pki/site-db-ca.pem"
    ]
    assert [x for x in lines if x.startswith("PurgeJobAfter=")] == ["PurgeJobAfter=60month"]


@pytest.mark.parametrize("ca", ["relative/ca.pem", "/ca.pem,SSL_KEY=/x", "/ca #.pem", ""])
def test_a_ca_path_slurmdbd_conf_cannot_hold_is_refused(ca: str) -> None:
    with pytest.raises(DbdConfigError, match="ssl_ca"):
        render_slurmdbd_conf(SECRET, "ctl-0", paths=DbdPaths(ssl_ca=ca))


def _bundle_check() -> str:
    """The Python the image step runs on the downloaded bundle (aws-tools.sh's here-document)."""
    found = re.search(r"<<'PY'\n(.*?)\nPY\n", AWS_TOOLS.read_text(), re.S)
    assert found is not None
    return found.group(1)


def _ca(path: Path, unit: str) -> Path:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-keyout", str(path.with_suffix(".key")), "-out", str(path),
         "-subj", f"/C=US/O=Amazon Web Services, Inc./OU={unit}/CN=test root CA", "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True,
    )  # fmt: skip
    return path


def test_the_image_step_installs_only_a_bundle_of_rds_cas(tmp_path: Path) -> None:
    good = _ca(tmp_path / "rds.pem", "Amazon RDS")
    other = _ca(tmp_path / "other.pem", "Someone Else")
    mixed = tmp_path / "mixed.pem"
    mixed.write_text(good.read_text() + other.read_text())
    junk = tmp_path / "junk.pem"
    junk.write_text("<html>not found</html>\n")

    def check(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["python3", "-", str(path)], input=_bundle_check(), capture_output=True, text=True)

    assert check(good).returncode == 0
    for forged in (other, mixed, junk):
        assert check(forged).returncode != 0, forged.name


# ------------------------------------------------------------------ the local cloud's MariaDB: TLS required
@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Layout, int]]:
    if subprocess.run(
        ["sh", "-c", "command -v mariadbd || test -x /usr/sbin/mariadbd"], capture_output=True
    ).returncode:
        pytest.skip("MariaDB is not installed")
    layout = Layout(tmp_path_factory.mktemp("db"))
    layout.create()
    port = free_port()
    ports = conf.Ports(aws=0, mysql=port, slurmctld=0, slurmdbd=0, slurmd_base=0, sackd=0)
    layout.my_cnf.write_text(conf.my_cnf(layout, ports))
    pid = daemons.start_mariadb(layout, "pw-tls-test")
    try:
        yield layout, port
    finally:
        assert procs.stop_pid(pid, str(layout.my_cnf))  # the mariadbd this fixture started (its defaults file)


def _client(port: int, *options: str) -> subprocess.CompletedProcess[str]:
    argv = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", "slurm", "-ppw-tls-test", *options]
    return subprocess.run([*argv, "-N", "-e", "show status like 'Ssl_version'"], capture_output=True, text=True)


def test_the_local_database_refuses_clear_text_and_serves_tls_to_the_ca_slurmdbd_is_given(
    mariadb: tuple[Layout, int], tmp_path: Path
) -> None:
    layout, port = mariadb
    ca = conf.db_tls(layout).ca
    assert f"StorageParameters=SSL_CA={ca}" in conf.slurmdbd_conf(layout, conf.Ports(0, port, 0, 0, 0, 0), "x")
    verified = _client(port, f"--ssl-ca={ca}", "--ssl-verify-server-cert")
    assert verified.returncode == 0 and "TLSv1." in verified.stdout, verified.stderr
    assert _client(port, "--skip-ssl").returncode != 0  # clear text: refused
    other = tmp_path / "other"
    make_tls_files(other, other / "ca.pem", other / "server.pem", other / "key.pem")
    wrong = _client(port, f"--ssl-ca={other / 'ca.pem'}", "--ssl-verify-server-cert")
    assert wrong.returncode != 0  # a server whose certificate the CA did not sign: not trusted


def test_the_local_clouds_slurmdbd_is_rendered_with_the_local_ca_against_a_server_requiring_tls(tmp_path: Path) -> None:
    """The local cloud's controller renders slurmdbd.conf with the production command (render-slurmdbd), its CA
    path overridden; every e2e test with accounting then runs slurmdbd over TLS (the server admits nothing else)."""
    layout = Layout(tmp_path)
    ports = conf.Ports(aws=1, mysql=2, slurmctld=3, slurmdbd=4, slurmd_base=5, sackd=6)
    overrides = conf.render_overrides(layout, ports)
    dbd = render_slurmdbd_conf(SECRET, "ctl-0", paths=DbdPaths(**overrides["dbd"]))
    assert f"StorageParameters=SSL_CA={conf.db_tls(layout).ca}" in dbd.splitlines()
    server = conf.my_cnf(layout, ports).splitlines()
    assert "require_secure_transport=ON" in server and f"ssl-ca={conf.db_tls(layout).ca}" in server
