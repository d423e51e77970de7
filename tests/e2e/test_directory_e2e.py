"""Users from the site's LDAP directory through SSSD, with real Slurm (docs/users.md).

`local up` runs a real slapd on the host as the site's directory, with the bind password in the emulated Secrets
Manager; every machine's user data (the stacks' own, stacks/user_data.py) reads the secret with its role's keys,
renders sssd.conf with `elastic-slurm render-sssd` and starts the image's sssd. `ldapuser` (uid 3001, also in group
`eda`) is in no /etc/passwd: the controller, the login node and the compute node each resolve it through their own
sssd, and a job ldapuser submits from the login node runs on a launched node with its directory groups.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.instances import enter
from localcloud.instances.login_nodes import on_login, sbatch_on_login, wait_ready
from localcloud.services import directory
from tests.e2e.conftest import assert_no_orphans, module_cloud

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "directory.yaml"
LDAP_USER = enter.User(directory.USER, directory.USER_UID, directory.USER_UID, "/tmp")


@pytest.fixture(scope="module")
def cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-e2e-directory-", dir="/var/tmp"))
    with module_cloud(request, CONFIG, state_dir, "directory e2e") as local:
        yield local


def test_no_machine_has_the_user_locally_but_the_controller_resolves_it(cloud: LocalCloud) -> None:
    assert "ldapuser" not in (cloud.root() / "etc/passwd").read_text()
    found = cloud.on_controller(["getent", "passwd", "ldapuser"])
    assert found.returncode == 0 and found.stdout.split(":")[2] == "3001", found.stdout + found.stderr
    groups = cloud.on_controller(["id", "-Gn", "ldapuser"])
    assert set(groups.stdout.split()) == {"ldapuser", "eda"}, groups.stdout + groups.stderr
    conf = cloud.layout.machine_dir("controller") / "sssd" / "etc-sssd" / "sssd.conf"
    assert oct(conf.stat().st_mode & 0o777) == "0o600"
    assert "ldap_default_bind_dn = cn=reader,dc=elastic-slurm,dc=local" in conf.read_text()


def test_a_directory_user_submits_from_the_login_node_and_runs_with_its_groups(cloud: LocalCloud) -> None:
    node = wait_ready(cloud)
    who = on_login(cloud, node, ["id"], user=LDAP_USER)
    assert who.stdout.startswith("uid=3001(ldapuser) gid=3001(ldapuser)"), who.stdout + who.stderr
    job = sbatch_on_login(cloud, node, wrap="id -un; id -Gn; getent passwd ldapuser | cut -d: -f3", user=LDAP_USER)
    (record,) = cloud.wait_jobs_done([job], timeout=180)
    assert record.state == "COMPLETED"
    name, groups, uid = (cloud.layout.jobs / f"{job}.out").read_text().splitlines()
    assert name == "ldapuser" and set(groups.split()) == {"ldapuser", "eda"} and uid == "3001"
    # sacct names the job's user and account: slurmctld resolved uid 3001 through the controller's sssd
    (line,) = cloud.slurm("sacct", "-X", "-n", "-P", "-j", job, "-o", "User,Account").split()
    assert line == "ldapuser|eda"
    # the node it ran on was launched for it in the emulated EC2 (a boot that ran past ResumeTimeout on a busy machine
    # is replaced: then two, both of that pool), and no instance is left without a node
    pools = [i.pool for i in cloud.instances()]
    assert pools and set(pools) == {"cpu-small"}
    assert_no_orphans(cloud)
