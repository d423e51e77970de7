"""The REST API's web page in a real headless Chromium (Debian's `chromium`, driven by playwright over CDP): what a
user does on it — connect with a token, submit a job template — for the e2e test and the docs' screenshot.

`python -m localcloud.services.webui_browser --state-dir DIR --out docs/images/web-ui.png` submits the hello template as the
local cloud's job user from the page of a running local cloud (one with `rest_api.enabled`), waits until the page
shows it COMPLETED and saves a screenshot. playwright is a test dependency (requirements-dev.txt); it never downloads
a browser here: it launches /usr/bin/chromium (scripts/setup.sh installs it).

The page is HTTPS with the controller's self-signed certificate (slurm_plugin/webui/certificate.py): Chromium trusts
exactly that certificate's key (`--ignore-certificate-errors-spki-list`, the pin a user makes by comparing the
fingerprint), Python clients take it as their only CA (`tls_context`), so every request here checks it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import ssl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from localcloud.cloud import LocalCloud

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # as root, in a container
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
JOB_USER = "esuser"  # the local cloud's job user (localcloud/image/slurm_root.py)
TOKEN_LIFESPAN = 900
VIEWPORT_SIZE = (1280, 900)


def certificate(cloud: LocalCloud) -> Path:
    """The web page's certificate on the cloud's (first) controller, as its config apply made it."""
    from localcloud.instances.machines import controller_machine

    return cloud.layout.machine_dir(controller_machine(0)) / "etc-elastic-slurm" / "webui" / "cert.pem"


def tls_context(cloud: LocalCloud) -> ssl.SSLContext:
    """A client context that trusts the page's certificate only (and checks that it names 127.0.0.1)."""
    return ssl.create_default_context(cafile=str(certificate(cloud)))


def spki_pin(cert_pem: bytes) -> str:
    """base64 SHA-256 of the certificate's public key (SubjectPublicKeyInfo): Chromium's pin format."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    spki = (
        x509.load_pem_x509_certificate(cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


@contextmanager
def chromium(trusted: Path | None = None) -> Iterator[Browser]:
    """Debian's Chromium, headless, through playwright (which downloads nothing); trusting the certificate `trusted`
    (its key only) when given."""
    from playwright.sync_api import sync_playwright

    args = [
        *CHROMIUM_ARGS,
        *([f"--ignore-certificate-errors-spki-list={spki_pin(trusted.read_bytes())}"] if trusted else []),
    ]
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def page_url(cloud: LocalCloud) -> str:
    """The web page of the cloud's controller (a 127.0.0.1 port here; rest_api.web_port on EC2)."""
    return f"https://127.0.0.1:{cloud.info().ports['webui']}/"


def token(cloud: LocalCloud, user: str = JOB_USER, lifespan: int = TOKEN_LIFESPAN) -> str:
    """A JWT for `user`, as an admin gets one on the controller: `scontrol token username=USER lifespan=N`."""
    out = cloud.slurm("scontrol", "token", f"username={user}", f"lifespan={lifespan}")
    return out.strip().split("=", 1)[1]


def connect(page: Page, url: str, user: str, jwt: str) -> None:
    """Open the page and connect as `user` with `jwt` (the page then refreshes every few seconds)."""
    page.goto(url)
    page.fill("#user", user)
    page.fill("#token", jwt)
    page.click("#connect")


def submit(page: Page, template: str, partition: str, nodelist: str = "") -> str:
    """Choose a template and partition (and a node list), submit; returns the job id the page reports
    (AssertionError with the page's message otherwise)."""
    page.wait_for_selector(f"#partition option[value='{partition}']", state="attached")
    page.select_option("#template", template)
    page.select_option("#partition", partition)
    page.fill("#job-nodelist", nodelist)
    page.click("#submit")
    result = page.locator("#submit-result")
    result.filter(has_text=re.compile("Submitted job|HTTP|refused")).wait_for()
    found = re.search(r"Submitted job (\d+)", result.inner_text())
    assert found, f"the page did not submit: {result.inner_text()}"
    return found.group(1)


def wait_job_state(page: Page, job_id: str, state: str, timeout_ms: float = 180_000) -> None:
    """Wait until the page's "My jobs" row of `job_id` shows `state`."""
    page.wait_for_function(
        "([id, state]) => [...document.querySelectorAll('#jobs tbody tr')].some("
        "r => r.cells[0].textContent === id && r.cells[2].textContent.split('+').includes(state))",
        arg=[job_id, state],
        timeout=timeout_ms,
    )


def job_row_text(page: Page, job_id: str) -> str:
    """The text of the job's row in "My jobs" ('' when it is not listed)."""
    for row in page.locator("#jobs tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        if cells and cells[0] == job_id:
            return " ".join(cells)
    return ""


def main(argv: list[str] | None = None) -> int:
    """Submit the hello template from the page of a running local cloud and save a screenshot."""
    from localcloud.cloud import LocalCloud

    parser = argparse.ArgumentParser(prog="python -m localcloud.services.webui_browser", description=__doc__)
    parser.add_argument("--state-dir", required=True, help="state dir of a running local cloud with rest_api")
    parser.add_argument("--out", required=True, help="where the PNG goes (docs/images/web-ui.png)")
    args = parser.parse_args(argv)
    cloud = LocalCloud(args.state_dir)
    if not cloud.info().rest_api:
        print("webui_browser: this local cloud's config has no rest_api.enabled", file=sys.stderr)
        return 2
    with chromium(certificate(cloud)) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT_SIZE[0], "height": VIEWPORT_SIZE[1]})
        connect(page, page_url(cloud), JOB_USER, token(cloud))
        job = submit(page, "hello", "cpu")
        wait_job_state(page, job, "COMPLETED")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.out, full_page=True)
    print(f"{args.out}: job {job} submitted from the page and COMPLETED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
