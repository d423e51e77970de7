"""LocalCloud: bring a whole local cloud up and down — emulated AWS, munge, MariaDB, slurmdbd, slurmctld, instance runner.

The one Python API behind `elastic-slurm local up/down/status`, the demo and the e2e tests:

    cloud = LocalCloud(state_dir)
    cloud.up(config_path)        # idempotent only in the sense that it refuses to start twice
    ...                          # see localcloud.ops for jobs, instances, faults
    cloud.down()                 # stops exactly the processes named by our PID files

`up` does what a deployment does, against the emulated AWS: create the network and launch templates, refresh the
instance cache, render slurm.conf fragments + manifest with the production `render` code, then starts the daemons.
A config with `controller.count: 2` boots two controller machines from the same user data (the backup with
ES_CONTROLLER_INDEX=1), each with its own address and host name: docs/local-cloud.md, docs/operations.md (failover).
"""

from __future__ import annotations

import json
import logging
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cluster_config import ElasticSlurmConfig, load
from cluster_config.model import Cluster
from localcloud import conf, port_claims
from localcloud.aws import cloud_iam
from localcloud.aws.aws_setup import create_infra, plan_networks
from localcloud.aws.emulated_aws import EmulatedAws, free_port
from localcloud.aws.iam import Credentials
from localcloud.cloud_parts import (
    BACKUP,
    BACKUP_DAEMONS,
    DAEMONS,
    PRIMARY_ONLY,
    UNIT_PID_FILES,
    CloudInfo,
    LocalCloudError,
    Status,
    node_count,
    plugin_wrapper,
    port_block,
)
from localcloud.image import slurm_root
from localcloud.instances import boot_data, controller_boot, enter, machines
from localcloud.instances.login_nodes import create_login_groups
from localcloud.layout import DEFAULT_STATE_DIR, REPO_ROOT, Layout
from localcloud.ops import LIVE, CloudOps, Instance, OpsError
from localcloud.services import daemons, directory, procs, prometheus
from slurm_plugin import primary
from slurm_plugin.instance_cache import CacheError
from slurm_plugin.powersave.state import plugin_state_dir
from slurm_plugin.render import sssd
from slurm_plugin.render.base import shared_mount as shared_mount_of
from slurm_plugin.render.cluster import RenderError
from stacks.naming import directory_parameter
from stacks.user_data import directory_values, login_values, node_names_values, pool_values

# the local cloud's API: LocalCloud, and what it says about itself (localcloud/cloud_parts.py)
__all__ = ["DAEMONS", "CloudInfo", "LocalCloud", "LocalCloudError", "Status"]
LOG = logging.getLogger(__name__)
# the plugin programs slurmctld runs, and the protected-mode admin command: wrapped with the endpoint and manifest
PLUGIN_PROGRAMS = ("slurm-resume", "slurm-suspend", "slurm-resume-fail", "slurm-pool-protection")
PROLOG = REPO_ROOT / "assets" / "slurm" / "prolog-wait-for-boot.sh"
CLOUDWATCH_SECONDS = 5  # the exporter's CloudWatch publish interval here (60 on EC2): runs last minutes


class LocalCloud(CloudOps):
    """One local cloud living in one state directory."""

    def __init__(self, state_dir: str | Path = DEFAULT_STATE_DIR) -> None:
        self.layout = Layout(Path(state_dir).resolve())

    # ------------------------------------------------------------------ info
    def info(self) -> CloudInfo:
        """What `up` saved; LocalCloudError when this state dir has no local cloud."""
        try:
            return CloudInfo(**json.loads(self.layout.cloud_json.read_text()))
        except (OSError, ValueError, TypeError):
            raise LocalCloudError(
                f"no local cloud in {self.layout.root} (run `elastic-slurm local up` first)"
            ) from None

    def controller_count(self) -> int:
        """How many controllers this cloud booted (1 when it cannot tell)."""
        try:
            return max(1, len(self.info().controller_hosts))
        except LocalCloudError:
            return 1

    def daemon_list(self) -> list[tuple[str, str]]:
        """(PID file name, marker) of every daemon of this cloud: the backup controller's too when it has one."""
        return [*DAEMONS, *(BACKUP_DAEMONS if self.controller_count() > 1 else [])]

    def running_daemons(self) -> dict[str, int | None]:
        """Each daemon's PID if it is alive and ours, else None."""
        result: dict[str, int | None] = {}
        for name, marker in self.daemon_list():
            pid = procs.read_pid(self.layout.pid_file(name))
            result[name] = pid if pid is not None and procs.is_ours(pid, marker) else None
        return result

    def required_daemons(self) -> set[str]:
        """The daemons this cloud needs running: not the timers and the manager (their units run only when the
        config or `up(manager=True)` asks), not MariaDB/slurmdbd without accounting."""
        optional = {"license-sync-timer", "longcheck-timer", "clustermgr"}
        if not self.info().accounting:
            optional |= {"mariadbd", "slurmdbd"}
        if not self.info().directory:
            optional |= {"slapd", "sssd"}
        if not self.info().rest_api:
            optional |= {"webui", "slurmrestd"}
        optional |= {f"{name}@{BACKUP}" for name in optional | PRIMARY_ONLY}
        return {name for name, _ in self.daemon_list()} - optional

    def is_up(self) -> bool:
        """True when any daemon of this state dir is alive."""
        return any(pid is not None for pid in self.running_daemons().values())

    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (sbatch, squeue, sacct, ...) against this cloud."""
        return daemons.slurm_env(self.layout)

    def root(self) -> Path:
        """The Slurm root file system this cloud runs from."""
        return Path(self.info().slurm_root)

    def controller(self, index: int = 0) -> enter.View:
        """Controller `index`'s machine view of the root (0: the primary, 1: the backup)."""
        info = self.info()
        hosts = info.controller_hosts or [info.controller]
        if not 0 <= index < len(hosts):
            raise LocalCloudError(f"controller {index}: this cloud has {len(hosts)} controller(s)")
        return machines.controller_view(
            self.layout, Path(info.slurm_root), info.shared_mount, hosts[index] or None, index
        )

    def on_controller(
        self,
        argv: list[str],
        user: str = "root",
        env: dict[str, str] | None = None,
        timeout: float = 120,
        index: int = 0,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command on controller `index`'s machine as `user` (e.g. the cluster manager as `slurm`, as its unit
        does)."""
        view = self.controller(index)
        account = enter.user(view.root, user)
        full_env = enter.user_env(account, {daemons.CLOUD_MARKER: str(self.layout.root), **(env or {})})
        return subprocess.run(
            enter.argv(view, argv, None if user == "root" else account, cwd=str(self.layout.root)),
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_unit(self, index: int, unit: str) -> None:
        """`systemctl start UNIT` on controller `index` with its env file, as an operator (or systemd's restart)
        brings a crashed daemon back (e.g. the primary's slurmctld: it takes control back from the backup)."""
        script = f"set -a; . /etc/elastic-slurm/env; set +a; exec systemctl start {shlex.quote(unit)}"
        done = self.on_controller(["/bin/bash", "-c", script], index=index)
        if done.returncode != 0:
            raise LocalCloudError(f"controller {index}: systemctl start {unit}: {done.stderr.strip()}")

    def instance_view(self, instance_id: str) -> enter.View:
        """An instance's view of the root (what its processes see)."""
        info = self.info()
        return machines.instance_view(self.layout, Path(info.slurm_root), instance_id)

    def aws(self) -> EmulatedAws:
        """A handle on the running emulated AWS (faults, call counts, clients signing as the harness's admin while
        IAM is enforced); never used to stop it."""
        info = self.info()
        pid = procs.read_pid(self.layout.pid_file("emulated-aws")) or 0
        handle = EmulatedAws(url=info.aws_endpoint_url, pid=pid)
        principals = cloud_iam.load(self.layout)
        if principals is not None:
            handle.access_key = (principals.admin.access_key_id, principals.admin.secret_access_key, None)
        return handle

    def principals(self) -> cloud_iam.CloudPrincipals:
        """The IAM principals of this running cloud (LocalCloudError when it has none)."""
        principals = cloud_iam.load(self.layout)
        if principals is None:
            raise LocalCloudError(f"no IAM principals recorded in {self.layout.root}")
        return principals

    # ------------------------------------------------------------------ up
    def up(
        self,
        config_path: str | Path,
        cluster_name: str | None = None,
        boot_delay: float = 2.0,
        boot_failure_rate: float = 0.0,
        shared_with: LocalCloud | None = None,
        manager: bool = False,
        iam_without: tuple[str, ...] = (),
    ) -> CloudInfo:
        """Start everything; on any failure, stop what was started and raise LocalCloudError.

        The controller and the instances call the emulated AWS as IAM principals holding the roles' own statements,
        with enforcement on (localcloud.aws.cloud_iam); `iam_without` drops statements (by Sid) from the controller's, so
        a test can show what a missing permission breaks.

        The controller's boot starts the cluster manager as on EC2 only with `manager=True`; otherwise its unit is
        enabled but not started (tests drive single passes with `slurm-clustermgr --once`, see docs/local-cloud.md).
        With `shared_with` (a running local cloud of another cluster of the same config), reuse its emulated AWS,
        munge key secret and MariaDB/slurmdbd instead of starting our own: a second cluster of a federation.
        The caller registers this cluster in slurmdbd first (see localcloud.sites.federation); `down` then stops only
        what this cloud started.
        """
        config = load(config_path)
        cluster = self._pick_cluster(config, cluster_name)
        if cluster.controller.count > 1 and (cluster.rest_api.enabled or shared_with is not None):
            raise LocalCloudError(
                f"controller.count: cluster {cluster.name} has {cluster.controller.count} controllers; the local cloud"
                " runs two controllers without clusters[].rest_api and outside a federation only"
            )
        if self.is_up():
            raise LocalCloudError(
                f"a local cloud is already running in {self.layout.root} (`elastic-slurm local down`)"
            )
        self._check_state_dir()
        try:
            root = slurm_root.build(slurm_root.release_of(cluster.images.slurm_version).major, log=None)
        except slurm_root.RootError as exc:
            raise LocalCloudError(str(exc)) from None
        self._fresh_state_dir()
        self.layout.create()
        self._root = root
        self._manager = manager
        self._iam_without = iam_without
        self.set_boot(boot_delay=boot_delay, boot_failure_rate=boot_failure_rate, fail_boots=0)
        try:
            return self._up(config, cluster, Path(config_path).resolve(), shared_with)
        except LocalCloudError:
            self.down()
            raise
        except (CacheError, RenderError, ClientError, BotoCoreError, RuntimeError, OSError) as exc:
            self.down()
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise LocalCloudError(f"local up failed: {first} (logs: {self.layout.log})") from exc
        except BaseException:
            self.down()
            raise

    def _check_state_dir(self) -> None:
        """Refuse a non-empty state dir that an earlier `up` did not create (before anything slow happens)."""
        root = self.layout.root
        if root.exists() and any(root.iterdir()) and not self.layout.cloud_json.exists():
            raise LocalCloudError(f"--state-dir: {root} is not empty and holds no local cloud; choose another")

    def _fresh_state_dir(self) -> None:
        """Start from an empty state dir; only ever delete a dir that an earlier `up` created."""
        self._check_state_dir()
        root = self.layout.root
        if not root.exists():
            return
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    @staticmethod
    def _pick_cluster(config: ElasticSlurmConfig, name: str | None) -> Cluster:
        if name is None:
            return config.clusters[0]
        try:
            return config.cluster(name)
        except KeyError:
            names = ", ".join(c.name for c in config.clusters)
            raise LocalCloudError(f"--cluster: no cluster '{name}' in the config (it has: {names})") from None

    def _up(
        self, config: ElasticSlurmConfig, cluster: Cluster, config_path: Path, shared: LocalCloud | None = None
    ) -> CloudInfo:
        layout = self.layout
        base = shared.info().ports if shared is not None else {}
        nodes = node_count(cluster)
        block = port_block(nodes + 1)  # a slurmd port per node, then SlurmdPort (login nodes' sackd listen there)
        ports = conf.Ports(
            aws=base.get("aws") or free_port(),
            mysql=base.get("mysql") or free_port(),
            slurmctld=free_port(),
            slurmdbd=base.get("slurmdbd") or free_port(),
            slurmd_base=block,
            sackd=block + nodes,
            exporter=free_port(),
            prometheus=free_port(),
            restd=free_port(),
            webui=free_port(),
        )
        if shared is None:
            LOG.info("starting emulated AWS on 127.0.0.1:%d", ports.aws)
            aws = EmulatedAws.start(layout.log, port=ports.aws)
            layout.pid_file("emulated-aws").write_text(f"{aws.pid}\n")
        else:
            aws = shared.aws()
        regions = [plan.region for plan in plan_networks(cluster)]

        def ec2(region: str) -> Any:
            return aws.client("ec2", region)

        def factory(service: str, region: str) -> Any:
            return aws.client(service, region)

        # what the stacks create before the controllers boot: network, launch templates, controller instances, the
        # config object, the DeployedInfra parameter, the secrets and the mounts parameter
        infra = create_infra(cluster, ec2, aws.url)
        LOG.info("created VPCs, %d subnets and %d launch templates", len(infra.subnets), len(infra.launch_templates))
        hosts = controller_boot.launch_controllers(ec2(cluster.region), cluster, infra)
        create_login_groups(cluster, factory, infra)  # moto's Auto Scaling launches them; the runner boots them
        shared_mount = shared_mount_of(cluster) or "/shared"  # validation requires a shared file system
        state_dir = self._plugin_state(cluster.name, len(hosts))
        boot = boot_data.publish(
            factory,
            cluster.name,
            cluster.region,
            layout.shared,
            shared_mount,
            layout.controller_state,
            munge_secret=shared.info().compute_user_data.get("ES_MUNGE_SECRET") if shared is not None else None,
        )
        boot.values.update(node_names_values(cluster))  # as the cluster stack's compute user data
        if cluster.directory is not None:  # the site's LDAP directory: slapd on the host, its bind secret in AWS
            boot.values.update(self._start_directory(cluster, factory))
        db_secret = None
        accounting = config.accounting.mode != "none"
        if shared is None and accounting:  # the RDS stand-in, on the host; its secret names it as RDS's would
            db_password = secrets.token_hex(12)
            layout.my_cnf.write_text(conf.my_cnf(layout, ports))
            try:
                daemons.start_mariadb(layout, db_password)
            except daemons.DaemonError as exc:
                raise LocalCloudError(str(exc)) from None
            db_secret = conf.db_secret(ports, db_password)
        controller_values = controller_boot.publish(factory, cluster, config_path, infra, db_secret)
        # from here on every request is signed by a principal holding what its role holds
        admin = shared.principals().admin if shared is not None else None
        principals = cloud_iam.install(aws, layout, cluster, infra, admin, self._iam_without)
        values = {
            **boot.values,
            **controller_values,
            **self._machine_values(aws.url, ports, principals.controller, state_dir, len(hosts)),
        }
        self._write_wrappers(aws.url, principals.controller)
        info = CloudInfo(
            cluster=cluster.name,
            config_path=str(config_path),
            aws_endpoint_url=aws.url,
            regions=regions,
            ports=dict(ports.__dict__),
            resume_timeout=cluster.slurm.resume_timeout,
            suspend_time=cluster.slurm.suspend_time,
            accounting=accounting,
            slurm_root=str(self._root),
            slurm_version=slurm_root.slurm_version(self._root),
            shared_mount=shared_mount,
            compute_user_data=boot.values,
            pool_user_data={
                f"{part.name}-{pool.name}": pool_values(part.name, pool)
                for part in cluster.partitions
                for pool in part.pools
            },
            login_user_data={pool.name: login_values(pool) for pool in cluster.login_nodes},
            controller=hosts[0].hostname,
            controller_hosts=[host.hostname for host in hosts],
            directory=cluster.directory is not None,
            prometheus_url=f"http://127.0.0.1:{ports.prometheus}",
            rest_api=cluster.rest_api.enabled,
        )
        layout.cloud_json.write_text(json.dumps(info.to_json(), indent=2) + "\n")
        view = machines.controller_view(layout, self._root, shared_mount, hosts[0].hostname)
        machines.write_client_wrappers(layout, view)
        for index in range(len(hosts)):
            units = self._unit_dir(index)
            units.mkdir(exist_ok=True)
            for name, unit in UNIT_PID_FILES.items():
                layout.pid_file(name if index == 0 else f"{name}@{index}").symlink_to(units / f"{unit}.pid")
        try:
            for index, host in enumerate(hosts):
                LOG.info("booting controller %s from its user data (Slurm %s)", host.hostname, info.slurm_version)
                machine = view if index == 0 else self.controller(index)
                # the instance id IMDS would give the user data (slurm_plugin.predecessor looks itself up by it)
                marker = {daemons.CLOUD_MARKER: str(layout.root), "ELASTIC_SLURM_INSTANCE_ID": host.instance_id}
                signal_url = controller_boot.wait_condition_url(aws.url)
                own = self._controller_values(index, host.private_ip, ports)
                controller_boot.boot(layout, machine, {**values, **own}, marker, signal_url, index)
            if shared is None and accounting:
                daemons.add_job_user(view, cluster.name)
            prometheus.start(layout, ports.prometheus, f"127.0.0.1:{ports.exporter}")
        except (controller_boot.BootError, daemons.DaemonError, prometheus.PrometheusError) as exc:
            raise LocalCloudError(str(exc)) from None
        runner = [sys.executable, "-m", "localcloud.instances.instance_runner", "--state-dir", str(layout.root)]
        procs.spawn(runner, layout.log_file("instance-runner"), layout.pid_file("instance-runner"), cwd=REPO_ROOT)
        LOG.info("local cloud %s is up (state dir %s)", cluster.name, layout.root)
        return info

    def _start_directory(self, cluster: Cluster, factory: Callable[[str, str], Any]) -> dict[str, str]:
        """slapd (localcloud/services/directory.py), the bind password's secret and the directory parameter the stacks create
        (with the local URI, base, bind DN and the secret's ARN); the user-data values naming it, as the stacks'."""
        assert cluster.directory is not None
        try:
            local = directory.start(self.layout, free_port())
        except directory.DirectoryError as exc:
            raise LocalCloudError(str(exc)) from None
        secret = factory("secretsmanager", cluster.region).create_secret(
            Name=f"elastic-slurm/{cluster.name}/directory-bind", SecretString=local.bind_password
        )
        section = cluster.directory.model_copy(
            update={
                "ldap_uri": [local.uri],
                "bind_dn": directory.READER,
                "search_base": directory.SUFFIX,
                "bind_password_secret_arn": str(secret["ARN"]),
            }
        )
        factory("ssm", cluster.region).put_parameter(
            Name=directory_parameter(cluster.name), Value=sssd.section_json(section), Type="String", Overwrite=True
        )
        return directory_values(cluster)

    def _plugin_state(self, cluster: str, controllers: int) -> str:
        """The plugin's state directory as the controllers see it. One controller: state/plugin. Two: where the
        production render puts it (slurm_plugin/powersave/state.py: on the controllers' own file system), and
        state/plugin becomes a link to it, so the host's tools find it where they always do."""
        if controllers < 2:
            return str(self.layout.plugin_state)
        inside = plugin_state_dir(cluster, controllers)
        on_host = self.layout.on_controller_state(inside)
        on_host.mkdir(parents=True, exist_ok=True)
        self.layout.plugin_state.rmdir()  # made empty by Layout.create
        self.layout.plugin_state.symlink_to(on_host)
        return inside

    def _unit_dir(self, index: int) -> Path:
        """Where the systemctl stand-in of controller `index` keeps its PID files and unit logs."""
        return self.layout.run / ("units" if index == 0 else f"units-{index}")

    def _controller_values(self, index: int, address: str, ports: conf.Ports) -> dict[str, str]:
        """What differs between the two controllers' env files: the index (the backup: 1), the stand-in's PID
        directory, and the exporter's address (each controller's own address, the same port: two machines)."""
        listen = f"127.0.0.1:{ports.exporter}" if index == 0 else f"{address}:{ports.exporter}"
        return {"ES_CONTROLLER_INDEX": str(index), "ES_LOCAL_UNIT_DIR": str(self._unit_dir(index)),
                "ES_EXPORTER_LISTEN": listen}  # fmt: skip

    def _machine_values(
        self, aws_url: str, ports: conf.Ports, role: Credentials, state_dir: str, controllers: int
    ) -> dict[str, str]:
        """What this machine adds to the controller's env file: the emulated endpoint and credentials (the instance
        profile on EC2), the render overrides (ports, paths under the state dir, timers) and where the systemctl
        stand-in keeps its PID files; plus the marker every process of this cloud carries."""
        layout = self.layout
        overrides = layout.state / "render-overrides.json"
        rendered = conf.render_overrides(layout, ports, state_dir=state_dir, controllers=controllers)
        overrides.write_text(json.dumps(rendered, indent=2))
        return {
            "AWS_ENDPOINT_URL": aws_url,
            **role.env(),
            "ES_RENDER_OVERRIDES": str(overrides),
            "ES_LOCAL_UNIT_DIR": str(layout.run / "units"),
            "ES_STATE_DIR": state_dir,
            "ES_EXPORTER_LISTEN": f"127.0.0.1:{ports.exporter}",
            "ES_CLOUDWATCH_INTERVAL": str(CLOUDWATCH_SECONDS),
            "ES_LOG_DIR": str(layout.log),
            "ES_SLURM_LOG_DIR": str(layout.log),
            daemons.CLOUD_MARKER: str(layout.root),
            "ES_LOCAL_UNITS_SKIP": ",".join(
                (*machines.UNITS_NOT_RUN, *(() if self._manager else ("slurm-clustermgr.service",)))
            ),
        }

    def _write_wrappers(self, aws_url: str, role: Credentials) -> None:
        env = {
            "ELASTIC_SLURM_MANIFEST": str(self.layout.manifest),
            "PATH": f"{slurm_root.BIN_IN_ROOT}:{enter.ROOT_PATH}",
            "AWS_ENDPOINT_URL": aws_url,
            daemons.CLOUD_MARKER: str(self.layout.root),
            **role.env(),
        }
        for program in PLUGIN_PROGRAMS:
            path = self.layout.bin / program
            path.write_text(plugin_wrapper(program, env))
            path.chmod(0o755)

    # ------------------------------------------------------------------ down
    def down(self) -> list[str]:
        """Stop every process of this local cloud (checked by PID and command line); returns what was stopped."""
        from localcloud.teardown import stop_everything

        # the backup's daemons first: a primary stopped before it would hand the cluster over to it
        stopped = stop_everything(self.layout, [DAEMONS[0], *BACKUP_DAEMONS, *DAEMONS[1:]])
        if self.layout.cloud_json.exists():  # the ports `up` claimed, given back
            port_claims.release_cloud(self.info().ports)
        return stopped

    def status(self) -> Status:
        """Daemons (PID or None), Slurm nodes and live instances; nodes/instances empty when unreachable."""
        daemons_alive = self.running_daemons()
        nodes: dict[str, str] = {}
        instances: list[Instance] = []
        controllers: dict[str, str] = {}
        if daemons_alive.get("slurmctld") or daemons_alive.get(f"slurmctld@{BACKUP}"):
            nodes = self.nodes()
            ping = self.slurm("scontrol", "ping", check=False)
            controllers = dict(primary.describe(primary.parse_ping(ping), "-"))
        if daemons_alive.get("emulated-aws"):
            try:
                instances = self.instances(LIVE)
            except Exception as exc:  # the emulated AWS may be injecting faults
                raise OpsError(f"emulated AWS: {exc}") from None
        return Status(str(self.layout.root), daemons_alive, nodes, instances, controllers)

    # ------------------------------------------------------------------ knobs
    def fail_next_boots(self, count: int) -> None:
        """Make the next `count` instances fail to boot (they stay running in EC2 with no slurmd)."""
        try:
            current = int(json.loads(self.layout.runner_control.read_text()).get("fail_boots", 0))
        except (OSError, ValueError):
            current = 0
        self.set_boot(fail_boots=current + count)

    def set_boot(
        self, boot_delay: float | None = None, boot_failure_rate: float | None = None, fail_boots: int | None = None
    ) -> None:
        """Change the instance runner's boot delay, random failure rate, or total count of boots that must fail."""
        path = self.layout.runner_control
        try:
            current = json.loads(path.read_text())
        except (OSError, ValueError):
            current = {}
        for key, value in (
            ("boot_delay", boot_delay),
            ("boot_failure_rate", boot_failure_rate),
            ("fail_boots", fail_boots),
        ):
            if value is not None:
                current[key] = value
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(current) + "\n")
        tmp.replace(path)
