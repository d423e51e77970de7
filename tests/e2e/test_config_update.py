"""A config edit is applied in place (issue 13, item 5): `cdk deploy` of an edited YAML uploads a new config object and
points the config URL parameter at it (localcloud.instances.controller_boot.deploy_config does the same in the emulated AWS);
the controller's slurm-config-sync unit runs assets/bootstrap/elastic-slurm-config-apply --reload, exactly as the
timer does on EC2. A pool grows while a job runs on it: the job keeps running, the new nodes exist in Slurm and in
the plugin's manifest, a job placed on a new node gets an instance of that pool, and an unchanged parameter is a no-op.
A slurmdbd_settings edit restarts slurmdbd; turning rest_api off and on stops and starts slurmrestd and the web page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster_config import load
from cluster_config.model_rest_api import DATA_PARSER
from localcloud.cloud import LocalCloud
from localcloud.instances import controller_boot
from localcloud.ops import OpsError
from localcloud.services import procs, webui_browser
from slurm_plugin.manifest import Manifest
from tests.e2e.conftest import CONFIG, kept_up, module_cloud

pytestmark = pytest.mark.e2e

SYNC_UNIT = "slurm-config-sync.service"
SYNC_TIMER = "slurm-config-sync.timer"
APPLY_LOCK = "/run/elastic-slurm-config-apply.lock"  # assets/bootstrap/elastic-slurm-config-apply


@pytest.fixture(scope="module")
def cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """A local cloud of its own (its config is edited), on a copy of the demo config."""
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-e2e-update-", dir="/var/tmp"))
    config = state_dir.parent / f"{state_dir.name}.yaml"
    shutil.copy(CONFIG, config)
    try:
        with module_cloud(request, config, state_dir, "config update e2e") as local:
            yield local
    finally:
        config.unlink(missing_ok=True)


def _on_controller_env(cloud: LocalCloud, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`command` (a shell line) on the controller with the boot's environment (/etc/elastic-slurm/env)."""
    line = f"set -a; . /etc/elastic-slurm/env; set +a; exec {command}"
    return cloud.on_controller(["/bin/bash", "-c", line], timeout=timeout)


def _run_sync_unit(cloud: LocalCloud) -> str:
    """Start the sync service on the controller as its timer does (the systemctl stand-in runs the unit's ExecStart
    with its EnvironmentFile); returns the unit's log."""
    result = _on_controller_env(cloud, f"systemctl start {SYNC_UNIT}", timeout=240)
    log = cloud.layout.run / "units" / f"{SYNC_UNIT}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    assert result.returncode == 0, result.stderr + text[-3000:]
    return text


def _deploy_edited(cloud: LocalCloud, max_nodes: int) -> str:
    """What `cdk deploy` does with a YAML whose `big` pool now has `max_nodes` nodes; returns the new object URL."""
    path = Path(cloud.info().config_path)
    data = yaml.safe_load(path.read_text())
    (pool,) = [p for p in data["clusters"][0]["partitions"][0]["pools"] if p["name"] == "big"]
    pool["max_nodes"] = max_nodes
    path.write_text(yaml.safe_dump(data))
    cluster = load(path).clusters[0]
    aws = cloud.aws()
    return controller_boot.deploy_config(lambda service, region: aws.client(service, region), cluster, path)


def test_the_controller_boot_enabled_the_config_sync_timer(cloud: LocalCloud) -> None:
    units = cloud.layout.run / "units"
    assert (units / "slurm-config-sync.timer.enabled").exists()
    applied = (cloud.layout.machine_dir("controller") / "etc-elastic-slurm" / "config-applied").read_text().strip()
    assert applied.startswith("s3://") and applied.endswith(".yaml")


def test_an_unchanged_config_parameter_changes_nothing(cloud: LocalCloud) -> None:
    conf = cloud.layout.slurm_conf
    before = conf.stat().st_mtime_ns
    log = _run_sync_unit(cloud)
    assert "reconfigured" not in log
    assert conf.stat().st_mtime_ns == before


def test_a_config_that_fails_to_render_leaves_the_running_one_and_is_not_retried_every_minute(
    cloud: LocalCloud,
) -> None:
    conf = cloud.layout.slurm_conf
    before = conf.read_text()
    etc = cloud.layout.machine_dir("controller") / "etc-elastic-slurm"
    applied = (etc / "config-applied").read_text()
    path = Path(cloud.info().config_path)
    good = path.read_text()
    cluster = load(path).clusters[0]
    aws = cloud.aws()
    # the timer (every minute) must not be the run that meets the bad config first: this run's exit code is asserted.
    # Stopped while holding the apply's lock, so no run of it is cut off half way
    stopped = _on_controller_env(cloud, f"flock {APPLY_LOCK} systemctl stop {SYNC_TIMER}")
    assert stopped.returncode == 0, stopped.stderr
    try:
        path.write_text(good.replace("max_nodes: 4", "max_nodes: 0"))  # `validate` would refuse it; say it got through
        url = controller_boot.deploy_config(lambda s, r: aws.client(s, r), cluster, path)
        failed = _on_controller_env(cloud, f"systemctl start {SYNC_UNIT}")
        assert failed.returncode != 0
        assert conf.read_text() == before and (etc / "config-applied").read_text() == applied
        assert (etc / "config-failed").read_text().strip() == url
        log_size = (cloud.layout.run / "units" / f"{SYNC_UNIT}.log").stat().st_size
        assert "FAILED" in _run_sync_unit(cloud)[:log_size]  # the next run within 15 minutes does not try again
        assert (cloud.layout.run / "units" / f"{SYNC_UNIT}.log").stat().st_size == log_size
    finally:
        path.write_text(good)
        controller_boot.deploy_config(lambda s, r: aws.client(s, r), cluster, path)
        _run_sync_unit(cloud)  # back to the config the boot applied (its URL is the applied one: no reconfigure)
        started = _on_controller_env(cloud, f"systemctl start {SYNC_TIMER}")
        assert started.returncode == 0, started.stderr


def test_a_pool_grows_in_place_while_its_running_job_keeps_running(cloud: LocalCloud) -> None:
    nodes_before = cloud.nodes()
    assert "cpu-big-4" in nodes_before and "cpu-big-5" not in nodes_before  # nodes are numbered from 1
    running = cloud.sbatch("-p", "cpu", "-C", "cpu-big", "-N1", wrap="sleep 600")
    cloud.wait_until(lambda: cloud.queue().get(running) == "RUNNING", 90, f"job {running} running")
    url = _deploy_edited(cloud, max_nodes=6)

    log = _run_sync_unit(cloud)

    assert f"applied {url} (reconfigured)" in log
    assert "slurmdbd restarted" not in log  # its settings did not change: slurmdbd.conf is the same
    nodes = cloud.nodes()
    assert {"cpu-big-5", "cpu-big-6"} <= set(nodes) and "cpu-big-7" not in nodes
    assert len(nodes) == len(nodes_before) + 2
    assert cloud.queue().get(running) == "RUNNING" and cloud.job_restarts(running) == 0
    manifest = Manifest.model_validate_json((cloud.layout.etc / "manifest.json").read_text())
    pool = manifest.pool_of_node("cpu-big-6")
    assert pool is not None and pool.max_nodes == 6

    # a job on a node that did not exist before the edit: the plugin launches it from the updated manifest
    with kept_up(cloud, "cpu-big-6"):  # its instance is read after the job
        placed = cloud.sbatch("-p", "cpu", "-w", "cpu-big-6", "-N1", wrap="hostname")
        (record,) = cloud.wait_jobs_done([placed], timeout=120)
        assert record.state == "COMPLETED" and record.nodes == "cpu-big-6", record
        assert cloud.instance_of_node("cpu-big-6").pool == "cpu-big"
    cloud.slurm("scancel", running)


def test_a_slurmdbd_settings_edit_restarts_slurmdbd_on_the_new_slurmdbd_conf(cloud: LocalCloud) -> None:
    before = procs.read_pid(cloud.layout.pid_file("slurmdbd"))
    path = Path(cloud.info().config_path)
    data = yaml.safe_load(path.read_text())
    data["accounting"]["slurmdbd_settings"] = {"PurgeTXNAfter": "6months"}
    path.write_text(yaml.safe_dump(data))
    aws = cloud.aws()
    url = controller_boot.deploy_config(lambda s, r: aws.client(s, r), load(path).clusters[0], path)
    log_size = (cloud.layout.run / "units" / f"{SYNC_UNIT}.log").stat().st_size

    log = _run_sync_unit(cloud)[log_size:]

    assert "slurmdbd restarted with the new slurmdbd.conf" in log and f"applied {url} (reconfigured)" in log
    shown = cloud.slurm("sacctmgr", "show", "configuration")
    assert re.search(r"^\s*PurgeTXNAfter\s*=\s*6 months?\s*$", shown, re.MULTILINE), shown
    after = procs.read_pid(cloud.layout.pid_file("slurmdbd"))
    assert after is not None and after != before
    # slurmctld still talks to it: a job's record reaches the database
    (record,) = cloud.wait_jobs_done([cloud.sbatch("-p", "cpu", "-N1", wrap="true")], timeout=120)
    assert record.state == "COMPLETED", record


REST_UNITS = ("slurmrestd.service", "slurm-webui.service")
RestState = tuple[list[int], int | None, str]  # is-active codes, the page's HTTP status (None: no answer), AuthAltTypes


def _deploy_rest_api(cloud: LocalCloud, enabled: bool) -> str:
    """What `cdk deploy` does with a YAML whose cluster has rest_api.enabled = `enabled`; returns the object URL."""
    path = Path(cloud.info().config_path)
    data = yaml.safe_load(path.read_text())
    data["clusters"][0]["rest_api"] = {"enabled": enabled}
    path.write_text(yaml.safe_dump(data))
    aws = cloud.aws()
    return controller_boot.deploy_config(lambda s, r: aws.client(s, r), load(path).clusters[0], path)


def _rest_state(cloud: LocalCloud) -> RestState:
    """The units' `systemctl is-active` codes, the page's answer to a partitions query with a fresh token (None: no
    answer at all), and slurm.conf's AuthAltTypes as slurmctld runs it."""
    active = [_on_controller_env(cloud, f"systemctl is-active {unit}").returncode for unit in REST_UNITS]
    config = cloud.slurm("scontrol", "show", "config")
    alt = re.search(r"^AuthAltTypes\s*=\s*(\S+)", config, re.MULTILINE)
    request = urllib.request.Request(
        webui_browser.page_url(cloud).rstrip("/") + f"/slurm/{DATA_PARSER}/partitions/",
        headers={"X-SLURM-USER-NAME": webui_browser.JOB_USER, "X-SLURM-USER-TOKEN": _token_or_empty(cloud)},
    )
    try:  # the page's own certificate, made by config apply when the REST API was first enabled
        with urllib.request.urlopen(request, timeout=30, context=webui_browser.tls_context(cloud)) as answer:
            status: int | None = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, ConnectionError, FileNotFoundError):
        status = None
    return active, status, alt.group(1) if alt else "(missing)"


def _settled_rest_state(cloud: LocalCloud, expected: RestState) -> RestState:
    """_rest_state once it is `expected`, else its last value after 60 s (the units are Type=simple: started, not
    yet listening)."""
    deadline = time.monotonic() + 60
    while True:
        state = _rest_state(cloud)
        if state == expected or time.monotonic() > deadline:
            return state
        time.sleep(1)


def _token_or_empty(cloud: LocalCloud) -> str:
    try:
        return webui_browser.token(cloud)
    except OpsError:  # no JWT auth configured: `scontrol token` fails
        return ""


def test_the_rest_api_is_stopped_and_started_again_by_config_edits(cloud: LocalCloud) -> None:
    """rest_api.enabled is applied in place (update_policy: reconfigure): off stops slurmrestd and the web page and
    drops JWT from slurm.conf; on again starts them with the JWT key kept in StateSaveLocation."""
    running = ([0, 0], 200, "auth/jwt")
    assert _settled_rest_state(cloud, running) == running
    log_size = (cloud.layout.run / "units" / f"{SYNC_UNIT}.log").stat().st_size

    url = _deploy_rest_api(cloud, enabled=False)
    log = _run_sync_unit(cloud)[log_size:]
    assert f"applied {url} (reconfigured)" in log, log
    stopped = ([3, 3], None, "(null)")  # is-active: 3 = inactive; nothing answers on the page's port
    assert _settled_rest_state(cloud, stopped) == stopped

    url = _deploy_rest_api(cloud, enabled=True)
    log = _run_sync_unit(cloud)[log_size:]
    assert f"applied {url} (reconfigured)" in log, log
    assert _settled_rest_state(cloud, running) == running
