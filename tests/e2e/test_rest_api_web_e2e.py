"""The REST API and its web page (clusters[].rest_api, docs/rest-api.md) on the session cloud, in a real headless
Chromium (Debian's `chromium`, driven by playwright).

The controller's config apply started Slurm's slurmrestd unit (the image's drop-in: JWT only, 127.0.0.1) and the web
page's unit, as on EC2. A user connects on the page with a token from `scontrol token`, sees the partitions and the
nodes per state and AZ, submits the hello template pinned to a powered-down node: the emulated EC2 launches an
instance for it, the page shows the node's AZ and the job COMPLETED, and sacct agrees (the job ran as that user).
A wrong token is refused: 401 from the proxy, and the page says so. The page is HTTPS only, with the controller's own
certificate (Chromium trusts exactly its key; Python clients take it as their only CA).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from cluster_config.model_rest_api import DATA_PARSER
from localcloud.cloud import LocalCloud
from localcloud.services import webui_browser
from slurm_plugin.controller_state import controller_state_dir
from slurm_plugin.webui import certificate
from tests.e2e.conftest import cold_nodes
from tests.unit.test_webui_tls import plain_http_answer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.e2e
API = f"/slurm/{DATA_PARSER}"
SLURM_UID = 64030  # assets/image-build/build-slurm.sh


@pytest.fixture(scope="module")
def browser(cloud: LocalCloud) -> Iterator[Browser]:
    pytest.importorskip("playwright.sync_api", reason="playwright (requirements-dev.txt)")
    if shutil.which(webui_browser.CHROMIUM) is None:
        pytest.skip(f"no {webui_browser.CHROMIUM} (scripts/setup.sh installs Debian's chromium)")
    with webui_browser.chromium(webui_browser.certificate(cloud)) as launched:
        yield launched


def _get(cloud: LocalCloud, path: str, user: str, token: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        webui_browser.page_url(cloud).rstrip("/") + path,
        headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token},
    )
    try:
        with urllib.request.urlopen(request, timeout=30, context=webui_browser.tls_context(cloud)) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_a_job_submitted_from_the_page_launches_its_node_and_completes(cloud: LocalCloud, browser: Browser) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    page = browser.new_page()
    webui_browser.connect(page, webui_browser.page_url(cloud), webui_browser.JOB_USER, webui_browser.token(cloud))
    page.locator("#status").filter(has_text="Connected as esuser").wait_for()
    partitions = [row.split("\t")[0] for row in page.locator("#partitions tbody tr").all_inner_texts()]
    assert sorted(partitions) == ["cpu", "whole"]
    per_state = [int(row.split("\t")[1]) for row in page.locator("#node-states tbody tr").all_inner_texts()]
    assert sum(per_state) == len(cloud.nodes())  # every node, in one state row or another

    job = webui_browser.submit(page, "hello", "cpu", nodelist=node)
    cloud.wait_until(lambda: any(i.instance_id not in before for i in cloud.instances()), 90, f"an instance for {node}")
    (launched,) = [i for i in cloud.instances() if i.instance_id not in before]
    assert launched.pool == "cpu-small"
    # the node's AZ as EC2 placed it (from the plugin's event log), then on the page: the node is up until SuspendTime
    token = webui_browser.token(cloud)

    def zone_of_node() -> object:
        zones = _get(cloud, "/elastic/node-zones", "esuser", token)[1].get("zones")
        return zones.get(node) if isinstance(zones, dict) else None

    cloud.wait_until(
        lambda: zone_of_node() == launched.availability_zone, 60, f"{node} in {launched.availability_zone}"
    )
    page.locator("#node-zones tbody").filter(has_text=launched.availability_zone).wait_for(timeout=60_000)
    webui_browser.wait_job_state(page, job, "COMPLETED")

    # the controller's config apply made the JWT key once, on the controllers' own file system, for SlurmUser only
    key = cloud.layout.on_controller_state(controller_state_dir(cloud.info().cluster, "slurmctld")) / "jwt_hs256.key"
    assert (key.stat().st_mode & 0o777, key.stat().st_uid, key.stat().st_size) == (0o400, SLURM_UID, 32)

    [record] = cloud.wait_jobs_done([job], timeout=60)
    assert (record.state, record.nodes, record.exit_code) == ("COMPLETED", node, "0:0")
    assert cloud.slurm("sacct", "-n", "-X", "-P", "-j", job, "-o", "User,JobName").split() == ["esuser|hello-web"]
    page.close()


def test_a_wrong_token_is_refused_with_401_and_the_page_says_so(cloud: LocalCloud, browser: Browser) -> None:
    good = webui_browser.token(cloud)
    status, _ = _get(cloud, f"{API}/partitions/", "esuser", good[:-4] + "AAAA")
    assert status == 401
    status, _ = _get(cloud, f"{API}/partitions/", "esuser", "not-a-jwt")
    assert status == 401
    status, body = _get(cloud, f"{API}/partitions/", "esuser", good)
    assert status == 200 and body["partitions"]
    status, _ = _get(cloud, "/elastic/node-zones", "esuser", "not-a-jwt")
    assert status == 401
    status, _ = _get(cloud, "/etc/passwd", "esuser", good)  # only /slurm/ and /openapi/ reach slurmrestd
    assert status == 404

    page = browser.new_page()
    webui_browser.connect(page, webui_browser.page_url(cloud), "esuser", "not-a-jwt")
    page.locator("#status").filter(has_text="Token refused (HTTP 401)").wait_for()
    assert page.locator("#partitions tbody tr").count() == 0
    page.close()


def test_the_page_is_https_only_with_the_controllers_own_certificate(cloud: LocalCloud) -> None:
    """Tokens never travel in clear text: the page answers TLS only, with the certificate config apply made for this
    controller (names 127.0.0.1 and its host name; key readable by the page's account only), whose fingerprint the
    boot log gives for users to compare; a client that does not trust it gets nothing."""
    cert_path = webui_browser.certificate(cloud)
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert cloud.info().controller in names.get_values_for_type(x509.DNSName)
    key = cert_path.with_name("key.pem").stat()
    assert (key.st_uid, key.st_gid, key.st_mode & 0o777) == (0, _account_in_root(cloud, "slurmrestd")[1], 0o440)
    fingerprint = cert.fingerprint(hashes.SHA256()).hex(":").upper()
    assert (
        f"made the web page's certificate, sha256 {fingerprint}"
        in (cloud.layout.log / "controller-boot.log").read_text()
    )
    port = cloud.info().ports["webui"]
    assert not plain_http_answer("127.0.0.1", port).startswith(b"HTTP/")  # no answer in clear text
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=30, context=ssl.create_default_context())
    with urllib.request.urlopen(
        webui_browser.page_url(cloud), timeout=30, context=webui_browser.tls_context(cloud)
    ) as page:
        assert page.status == 200 and b"<html" in page.read().lower()


def _account_in_root(cloud: LocalCloud, user: str) -> tuple[int, int]:
    """`user`'s uid and gid in the Slurm root (the controller's accounts), which the host may not have."""
    passwd = (Path(cloud.info().slurm_root) / "etc" / "passwd").read_text().splitlines()
    fields = next(line.split(":") for line in passwd if line.split(":")[0] == user)
    return int(fields[2]), int(fields[3])


def test_the_config_sync_renews_an_expiring_certificate_once_a_day_and_restarts_the_page(cloud: LocalCloud) -> None:
    """The timer's daily check (config apply --reload with an unchanged config): a certificate ending within 30 days
    is made anew and the page restarted with it. Runs last in this module: the browser above pinned the first key."""
    cert_path = webui_browser.certificate(cloud)
    key_path = cert_path.with_name("key.pem")
    alt = x509.load_pem_x509_certificate(cert_path.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    names, addresses = alt.value.get_values_for_type(x509.DNSName), alt.value.get_values_for_type(x509.IPAddress)
    ending = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=certificate.VALID_DAYS - 10)
    cert_pem, key_pem = certificate.make(names, addresses, ending)  # ends in 10 days
    group = _account_in_root(cloud, "slurmrestd")[1]
    for path, data, gid, mode in ((key_path, key_pem, group, 0o440), (cert_path, cert_pem, 0, 0o444)):
        path.chmod(0o600)
        path.write_bytes(data)
        os.chown(path, 0, gid)  # as config apply leaves them: only the end date makes this pair due
        path.chmod(mode)
    stamp = cert_path.parent.parent / "webui-certificate-checked"
    day_ago = time.time() - 25 * 3600
    os.utime(stamp, (day_ago, day_ago))

    sync = "set -a; . /etc/elastic-slurm/env; set +a; exec systemctl start slurm-config-sync.service"  # as its timer
    done = cloud.on_controller(["/bin/bash", "-c", sync], timeout=240)
    assert done.returncode == 0, done.stderr
    renewed = cert_path.read_bytes()
    assert renewed != cert_pem
    assert certificate.fits(
        x509.load_pem_x509_certificate(renewed), names, addresses, datetime.datetime.now(datetime.UTC)
    )
    assert stamp.stat().st_mtime > day_ago + 3600

    def serves_the_new_one() -> bool:  # the page restarted with it (Type=simple: listening a moment later)
        try:
            with urllib.request.urlopen(
                webui_browser.page_url(cloud), timeout=10, context=webui_browser.tls_context(cloud)
            ) as page:
                return page.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    cloud.wait_until(serves_the_new_one, 60, "the page serving the renewed certificate")
