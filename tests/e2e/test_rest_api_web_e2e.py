"""The REST API and its web page (clusters[].rest_api, docs/rest-api.md) on the session cloud, in a real headless
Chromium (Debian's `chromium`, driven by playwright).

The controller's config apply started Slurm's slurmrestd unit (the image's drop-in: JWT only, 127.0.0.1) and the web
page's unit, as on EC2. A user connects on the page with a token from `scontrol token`, sees the partitions and the
nodes per state and AZ, submits the hello template pinned to a powered-down node: the emulated EC2 launches an
instance for it, the page shows the node's AZ and the job COMPLETED, and sacct agrees (the job ran as that user).
A wrong token is refused: 401 from the proxy, and the page says so.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from cluster_config.model_rest_api import DATA_PARSER
from localcloud.cloud import LocalCloud
from localcloud.services import webui_browser
from tests.e2e.conftest import cold_nodes

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.e2e
API = f"/slurm/{DATA_PARSER}"
SLURM_UID = 64030  # assets/image-build/build-slurm.sh


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    pytest.importorskip("playwright.sync_api", reason="playwright (requirements-dev.txt)")
    if shutil.which(webui_browser.CHROMIUM) is None:
        pytest.skip(f"no {webui_browser.CHROMIUM} (scripts/setup.sh installs Debian's chromium)")
    with webui_browser.chromium() as launched:
        yield launched


def _get(cloud: LocalCloud, path: str, user: str, token: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        webui_browser.page_url(cloud).rstrip("/") + path,
        headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
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

    # the controller's config apply made the JWT key once, on the shared file system, for SlurmUser only
    key = cloud.layout.shared / "slurm" / "state" / cloud.info().cluster / "jwt_hs256.key"
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
