"""Controller logins limited to `directory.controller_login_groups`, through the real PAM stack and the real sssd of
the local cloud (issue 30, finding 5).

The cluster of tests/e2e/configs/directory.yaml (a real slapd as the site's directory; `ldapuser`, groups ldapuser
and eda), with `controller_login_groups: [hpc-admins]`: the controller's boot (the stacks' user data running
assets/bootstrap/elastic-slurm-directory) writes the access snippet and restarts sssd. PAM's account phase is what
sshd, su or Session Manager's `runuser` run before a session: here libpam's `pam_acct_mgmt` through ctypes, as root,
with the image's own stack (common-account: pam_unix, pam_localuser, pam_sss). The controller refuses ldapuser
(PAM_PERM_DENIED from sssd's access provider) and admits root; the login node, which has no snippet, admits
ldapuser: the same check can succeed. ldapuser still resolves on the controller (slurmctld puts names on uids).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from localcloud.cloud import LocalCloud
from localcloud.instances.login_nodes import on_login, wait_ready
from tests.e2e.conftest import module_cloud

pytestmark = pytest.mark.e2e

BASE = Path(__file__).resolve().parents[1] / "e2e" / "configs" / "directory.yaml"
PAM_SUCCESS, PAM_PERM_DENIED = 0, 6  # <security/_pam_types.h>
# pam_start + pam_acct_mgmt for argv[1] (service `elastic-slurm-check`: no such file, so PAM's `other`, which
# includes common-account); prints the return code of pam_acct_mgmt
ACCOUNT_CHECK = """
import ctypes, sys
pam = ctypes.CDLL("libpam.so.0")
class Conv(ctypes.Structure):
    _fields_ = [("conv", ctypes.c_void_p), ("appdata_ptr", ctypes.c_void_p)]
handle, conv = ctypes.c_void_p(), Conv(None, None)
rc = pam.pam_start(b"elastic-slurm-check", sys.argv[1].encode(), ctypes.byref(conv), ctypes.byref(handle))
assert rc == 0, f"pam_start: {rc}"
print(pam.pam_acct_mgmt(handle, 0))
pam.pam_end(handle, 0)
"""


@pytest.fixture(scope="module")
def cloud(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-e2e-logins-", dir="/var/tmp"))
    config = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    config["clusters"][0]["directory"]["controller_login_groups"] = ["hpc-admins"]
    path = tmp_path_factory.mktemp("logins") / "logins.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with module_cloud(request, path, state_dir, "controller logins e2e") as local:
        yield local


def _account_check(run: Callable[[list[str]], subprocess.CompletedProcess[str]], user: str) -> int:
    done = run(["python3", "-c", ACCOUNT_CHECK, user])
    assert done.returncode == 0, done.stdout + done.stderr
    return int(done.stdout.strip().splitlines()[-1])


def test_the_controller_admits_no_directory_user_outside_its_login_groups(cloud: LocalCloud) -> None:
    snippet = cloud.layout.machine_dir("controller") / "sssd" / "etc-sssd" / "conf.d" / "50-elastic-slurm-access.conf"
    assert "simple_allow_groups = hpc-admins" in snippet.read_text()
    assert oct(snippet.stat().st_mode & 0o777) == "0o600"
    found = cloud.on_controller(["getent", "passwd", "ldapuser"])  # names still resolve
    assert found.returncode == 0 and found.stdout.split(":")[2] == "3001", found.stdout + found.stderr
    assert _account_check(cloud.on_controller, "ldapuser") == PAM_PERM_DENIED
    assert _account_check(cloud.on_controller, "root") == PAM_SUCCESS


def test_the_login_node_admits_the_directory_user(cloud: LocalCloud) -> None:
    node = wait_ready(cloud)
    assert _account_check(lambda argv: on_login(cloud, node, argv), "ldapuser") == PAM_SUCCESS
