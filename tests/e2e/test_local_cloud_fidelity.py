"""Tested equals deployed: the local cloud runs Slurm the way an EC2 instance runs it.

Each test pins one promise of docs/local-cloud.md's fidelity table on the session cloud (tests/e2e/conftest.py):
the pinned Slurm release from the image root the component's scripts built, the production users (slurmctld and slurmdbd as `slurm`, the plugin
programs therefore as `slurm`, jobs of an ordinary user), and configless compute nodes that get every partition
from slurmctld with no slurm.conf on their own disk.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster_config import load, slurm_release
from localcloud.cloud import LocalCloud, LocalCloudError
from localcloud.image import slurm_root
from localcloud.instances import controller_boot, enter
from localcloud.instances.boot_data import BootData
from localcloud.instances.instance_runner import unit_dir
from localcloud.ops import LIVE
from localcloud.services import procs
from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT, controller_state_dir
from stacks.user_data import SIGNAL_URL_FILE, boot_commands, env_values_in, pool_values
from tests.e2e.conftest import CONFIG, assert_no_orphans, cold_nodes, exclude_warm, kept_up
from tests.e2e.requeue_helpers import start_after_requeue_hold

# What the local controller's env file adds to the values the stacks give it (docs/local-cloud.md: endpoint and
# credentials of the instance profile, render overrides, the systemctl stand-in's PID directory, the directories the
# plugin writes, the cloud's marker and the units it does not start)
LOCAL_VALUES = {
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "ES_RENDER_OVERRIDES",
    "ES_LOCAL_UNIT_DIR",
    "ES_LOCAL_UNITS_SKIP",
    "ES_STATE_DIR",
    "ES_LOG_DIR",
    "ES_SLURM_LOG_DIR",
    "ELASTIC_SLURM_LOCAL_CLOUD",
}
STACK_VALUES = {
    "ES_CLUSTER",
    "ES_REGION",
    "ES_MUNGE_SECRET",
    "ES_MOUNTS_PARAMETER",
    "ES_LOG_GROUP",
    "ES_CONF_SERVER_PARAMETER",
    "ES_NODE_NAMES_DIR",
    "ES_CONTROLLER_INDEX",
    "ES_DEPLOYED_INFRA",
    "ES_CONFIG_PARAMETER",
    "ES_EVENTS_QUEUE",
    "ES_DB_SECRET",
    "ES_DB_ENDPOINT",
    "ES_ROLE",
    # the exporter's: set by the stacks (0.0.0.0:9464, 60 s), other values here (a loopback port, 5 s)
    "ES_EXPORTER_LISTEN",
    "ES_CLOUDWATCH_INTERVAL",
}

pytestmark = pytest.mark.e2e


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid in /proc/{pid}/status")


def test_slurm_is_the_pinned_release_from_the_image_root(cloud: LocalCloud) -> None:
    config = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(" = ") for line in cloud.slurm("scontrol", "show", "config").splitlines())
    )
    assert config["SLURM_VERSION"] == slurm_release.VERSION
    assert cloud.info().slurm_version == slurm_release.VERSION
    root = Path(cloud.info().slurm_root)
    assert root == slurm_root.root_path(slurm_root.DEFAULT_SLURM)
    # built by the component's build-slurm.sh from the pinned tarball, not installed from a distribution's package
    build_info = (root / "etc/slurm/BUILD-INFO").read_text()
    assert f"Slurm {slurm_release.VERSION} built from" in build_info and slurm_release.SOURCE_SHA256 in build_info
    assert not list((root / "var/lib/dpkg/info").glob("slurm*.list"))


def test_slurm_offers_pmix_to_mpi_jobs(cloud: LocalCloud) -> None:
    # build-slurm.sh builds mpi/pmix against the OS's PMIx (Debian 13's libpmix-dev); MpiDefault=none, so MPI jobs
    # ask for it with `srun --mpi=pmix` (docs/job-templates.md)
    listed = cloud.slurm("srun", "--mpi=list")
    assert "pmix" in [line.strip() for line in listed.splitlines()], listed


def test_slurmctld_and_slurmdbd_run_as_slurm_and_the_plugin_writes_as_slurm(cloud: LocalCloud) -> None:
    slurm_uid = enter.user(cloud.root(), "slurm").uid
    for daemon in ("slurmctld", "slurmdbd"):
        pid = procs.read_pid(cloud.layout.pid_file(daemon))
        assert pid is not None and procs.is_ours(pid, daemon)
        assert _uid_of(pid) == slurm_uid, f"{daemon} does not run as slurm"
    config = cloud.slurm("scontrol", "show", "config")
    assert any(line.split() == ["SlurmUser", "=", f"slurm({slurm_uid})"] for line in config.splitlines())
    # a resume ran as SlurmUser: the plugin's state files it wrote are slurm's (the dirs were made for it)
    (node,) = cold_nodes(cloud, 1)
    (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=120)
    assert record.state == "COMPLETED"
    state = cloud.layout.plugin_state
    written = [p for p in state.iterdir() if p.is_file()]
    assert written and all(p.stat().st_uid == slurm_uid for p in written), [(p.name, p.stat().st_uid) for p in written]
    assert cloud.layout.log_file("plugin").stat().st_uid == slurm_uid


def test_an_ordinary_user_submits_and_the_job_runs_as_that_user(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    job = cloud.sbatch("-w", node, wrap="id -un; id -u", user=slurm_root.JOB_USER)
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED"
    out = (cloud.layout.jobs / f"{job}.out").read_text().split()
    assert out == [slurm_root.JOB_USER, str(slurm_root.JOB_UID)]
    # neither root nor an admin: a Slurm admin operation is refused for this user
    refused = cloud.slurm("scontrol", "update", f"nodename={node}", "state=drain", "reason=x", check=False,
                          user=slurm_root.JOB_USER)  # fmt: skip
    assert refused == ""
    assert "drain" not in cloud.nodes()[node]
    assert_no_orphans(cloud)


def test_compute_nodes_are_configless_and_see_every_partition_of_the_controller(cloud: LocalCloud) -> None:
    nodes = cold_nodes(cloud, 2)
    with kept_up(cloud, *nodes):  # their instances and slurmd are read after the job
        probe = (
            "test -e /etc/slurm/slurm.conf && echo has-local-conf; "
            "test -e /run/slurm/conf/slurm.conf && echo has-configless-cache; "
            "scontrol show partitions --oneliner | sed 's/ .*//'"
        )
        job = cloud.sbatch("-N2", "-w", ",".join(nodes), wrap=f"srun -N2 sh -c {probe!r} | sort | uniq -c")
        (record,) = cloud.wait_jobs_done([job], timeout=150)
        assert record.state == "COMPLETED"
        lines = [line.split(None, 1) for line in (cloud.layout.jobs / f"{job}.out").read_text().splitlines()]
        seen = {text: int(count) for count, text in lines}
        assert "has-local-conf" not in seen
        assert seen.get("has-configless-cache") == 2
        controller = {
            line.split()[0] for line in cloud.slurm("scontrol", "show", "partitions", "--oneliner").splitlines()
        }
        assert controller and all(seen.get(partition) == 2 for partition in controller), (controller, seen)
        # the slurmd processes (Slurm's slurmd.service: the systemctl stand-in's PID files) run with --conf-server, no -f
        for node in nodes:
            units = unit_dir(cloud.layout, cloud.instance_of_node(node).instance_id)
            cmd = procs.cmdline(procs.read_pid(units / "slurmd.service.pid") or 0)
            assert "--conf-server" in cmd and " -f " not in cmd, cmd
        assert {i.private_ip for i in cloud.instances(LIVE)} >= {cloud.node_addr(n) for n in nodes}


def test_an_instance_has_no_slurm_conf_on_its_disk(cloud: LocalCloud) -> None:
    instance = cloud.instance_view("i-probe")
    result = cloud.on_controller(["test", "-e", "/etc/slurm/slurm.conf"])
    assert result.returncode == 0, "the controller has /etc/slurm/slurm.conf"
    argv = enter.argv(instance, ["/bin/sh", "-c", "ls /etc/slurm; test ! -e /etc/slurm/slurm.conf"])
    probe = subprocess.run(argv, env=enter.user_env(enter.user(cloud.root(), "root")), capture_output=True, text=True)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert str(cloud.layout.etc) not in probe.stdout


def test_slurms_state_is_on_the_controllers_own_file_system_which_no_instance_sees(cloud: LocalCloud) -> None:
    """StateSaveLocation on the controllers' own file system (slurm_plugin/controller_state.py), mounted by the
    controller's boot from its own mounts parameter; the units that read that state require the mount; an instance's
    view has no such file system."""
    cluster = cloud.info().cluster
    state = controller_state_dir(cluster, "slurmctld")
    assert f"StateSaveLocation={state}\n" in cloud.layout.slurm_conf.read_text()
    # slurmctld wrote its cluster name (and id) there
    assert (cloud.layout.on_controller_state(state) / "clustername").read_text().startswith(f"{cluster}|")
    assert cloud.on_controller(["mountpoint", "-q", CONTROLLER_STATE_MOUNT]).returncode == 0
    units = cloud.layout.machine_dir("controller") / "etc-systemd"
    for unit in ("slurmctld", "slurmdbd", "slurm-clustermgr", "slurm-exporter", "slurm-license-sync"):
        dropin = (units / f"{unit}.service.d" / "elastic-slurm-state.conf").read_text()
        assert dropin.startswith(f"[Unit]\nRequiresMountsFor={state} "), unit
    instance = cloud.instance_view("i-probe")
    argv = enter.argv(instance, ["/bin/sh", "-c", f"ls -A {CONTROLLER_STATE_MOUNT} 2>/dev/null | wc -l"])
    probe = subprocess.run(argv, env=enter.user_env(enter.user(cloud.root(), "root")), capture_output=True, text=True)
    assert (probe.returncode, probe.stdout.strip()) == (0, "0"), probe.stderr


def test_an_instance_boots_from_the_launch_templates_compute_user_data(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    with kept_up(cloud, node):  # its instance is read after the job
        (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="mountpoint -q /shared && echo mounted")], 120)
        assert record.state == "COMPLETED"
        assert (cloud.layout.jobs / f"{record.job_id}.out").read_text().strip() == "mounted"
        instance = cloud.instance_of_node(node)
        machine = cloud.layout.machine_dir(instance.instance_id)
        # the script it ran is the stacks' compute user data for the values local up published plus its pool's launch
        # template values (stacks.user_data.pool_values: ES_POOL, custom actions)
        info = cloud.info()
        values = {
            **info.compute_user_data,
            **pool_values("cpu", load(info.config_path).cluster("local").partitions[0].pools[0]),
        }
        assert instance.pool == "cpu-small" and values["ES_POOL"] == "cpu-small"
        assert (machine / "run" / "user-data").read_text() == BootData(values).user_data()
        # munge key from the emulated Secrets Manager, as the controller's; its own munged
        assert (machine / "etc-munge" / "munge.key").read_bytes() == cloud.layout.munge_key.read_bytes()
        assert (machine / "run" / "munge" / "munged.pid").exists()
        # the mounts parameter and the controllers' address on the shared file system
        assert json.loads((machine / "etc-elastic-slurm" / "mounts.json").read_text())[0]["mount_point"] == "/shared"
        controller_ip = cloud.info().controller.removeprefix("ip-").replace("-", ".")
        conf_server = f"{controller_ip}:{cloud.info().ports['slurmctld']}"
        assert (
            f"configless: conf server {conf_server}"
            in (cloud.layout.log / "instances" / f"{instance.instance_id}.log").read_text()
        )


def test_a_broken_boot_step_fails_the_boot_visibly_and_nothing_is_left(cloud: LocalCloud) -> None:
    info = cloud.info()
    ssm = cloud.aws().client("ssm", info.regions[0])
    name = info.compute_user_data["ES_MOUNTS_PARAMETER"]
    saved = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    before = {i.instance_id for i in cloud.instances()}
    ssm.delete_parameter(Name=name)  # the user data's `aws ssm get-parameter` now fails (set -e)
    try:
        job = cloud.sbatch(*exclude_warm(cloud), wrap="true")

        def failed_boot() -> bool:
            return any(
                "ParameterNotFound" in _boot_log(cloud, i.instance_id)
                for i in cloud.instances()
                if i.instance_id not in before
            )

        cloud.wait_until(failed_boot, 90, "a boot failing on its SSM call")
    finally:
        ssm.put_parameter(Name=name, Value=saved, Type="String", Overwrite=True)
    broken = [
        i
        for i in cloud.instances()
        if i.instance_id not in before and "ParameterNotFound" in _boot_log(cloud, i.instance_id)
    ]
    assert broken and all("starting slurmd" not in _boot_log(cloud, i.instance_id) for i in broken)
    # ResumeTimeout: ResumeFailProgram terminates the failed instance; the job is requeued and runs on a good boot
    start_after_requeue_hold(cloud, job, 180)
    (record,) = cloud.wait_jobs_done([job], timeout=240)
    assert record.state == "COMPLETED"
    assert not {i.instance_id for i in broken} & {i.instance_id for i in cloud.instances(LIVE)}
    assert_no_orphans(cloud)


def _boot_log(cloud: LocalCloud, instance_id: str) -> str:
    path = cloud.layout.log / "instances" / f"{instance_id}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _env_values(script: str) -> dict[str, str]:
    return env_values_in(script)


def _signal_url(script: str) -> str:
    head = "(umask 077; echo '"
    lines = [line for line in script.splitlines() if line.startswith(head) and SIGNAL_URL_FILE in line]
    assert len(lines) == 1, "the controller user data writes the wait condition URL once"
    return lines[0][len(head) : lines[0].index("' > ")]


def test_the_controller_boots_from_the_controller_user_data_of_the_stacks(cloud: LocalCloud) -> None:
    script = (cloud.layout.machine_dir("controller") / "run" / "user-data").read_text()
    values = _env_values(script)
    assert set(values) - LOCAL_VALUES <= STACK_VALUES, set(values) - LOCAL_VALUES - STACK_VALUES
    assert {"ES_CONFIG_PARAMETER", "ES_DEPLOYED_INFRA", "ES_DB_SECRET"} <= set(values)
    values.pop("ES_ROLE")
    signal_url = _signal_url(script)
    assert (
        script
        == controller_boot.user_data(values, signal_url)
        == "#!/bin/bash\n" + "\n".join(boot_commands("controller", values, signal_url)) + "\n"
    )
    boot_log = cloud.layout.log_file("controller-boot").read_text()
    assert f"elastic-slurm boot: controller {cloud.info().controller} of {cloud.info().cluster} is up" in boot_log
    # slurmctld and slurmdbd were started from their units (Debian's, by the boot's systemctl), on the machine named
    # like its EC2 instance; slurm.conf names that instance, found by its Name tag
    for daemon, argv0 in (("slurmctld", "/usr/sbin/slurmctld --systemd"), ("slurmdbd", "/usr/sbin/slurmdbd -D -s")):
        pid = procs.read_pid(cloud.layout.pid_file(daemon))
        assert pid is not None and procs.cmdline(pid).replace("\0", " ").startswith(argv0), daemon
    assert f"SlurmctldHost={cloud.info().controller}(" in cloud.layout.slurm_conf.read_text()
    assert cloud.on_controller(["hostname", "-s"]).stdout.strip() == cloud.info().controller
    # the boot applied the config's accounting objects before slurmctld registered (accounting.json from render)
    assert "slurm-accounting-apply: INFO" in boot_log and boot_log.index("slurm-accounting-apply") < boot_log.index(
        "is up"
    )
    assert cloud.info().cluster in cloud.slurm("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster").split()


def test_slurmdbd_runs_with_the_configs_slurmdbd_settings(cloud: LocalCloud) -> None:
    # local-demo.yaml's accounting.slurmdbd_settings: the boot's render-slurmdbd wrote them, slurmdbd reports them
    shown = cloud.slurm("sacctmgr", "show", "configuration")
    assert re.search(r"^\s*PurgeTXNAfter\s*=\s*12 months?\s*$", shown, re.MULTILINE), shown


def test_a_failing_controller_boot_step_fails_local_up_with_the_reason_it_signals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = LocalCloud(tmp_path / "broken")
    original = controller_boot.publish

    def publish_without_config(client: Any, cluster: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        values = original(client, cluster, *args, **kwargs)  # the config parameter now names no object
        client("ssm", cluster.region).put_parameter(
            Name=values["ES_CONFIG_PARAMETER"], Value="s3://elastic-slurm-broken-assets/missing.yaml", Overwrite=True
        )
        return values

    monkeypatch.setattr(controller_boot, "publish", publish_without_config)
    try:
        with pytest.raises(LocalCloudError) as failed:
            cloud.up(CONFIG)
    finally:
        cloud.down()
    # what CloudFormation would show: the FAILURE signal's reason names the step and carries its output
    first = str(failed.value).splitlines()[0]
    assert first.startswith("controller boot failed (signal): elastic-slurm boot: FAILED at line"), first
    assert "elastic-slurm-config-apply" in first and "slurm_plugin.config_fetch" in first, first
    assert "config_fetch: GetObject: NoSuchBucket" in first, first  # the download's own one-line error
    assert not cloud.is_up()
