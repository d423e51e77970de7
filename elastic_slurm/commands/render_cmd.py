"""`elastic-slurm render FILE --out DIR`: write the slurm.conf fragment, gres.conf and runtime manifest of a cluster.

Files written per cluster: `slurm-elastic.conf` (to `Include` from the base slurm.conf), `gres.conf` (if any line),
`topology.conf` (if a pool has `network_topology`; owned by SlurmUser with `--controller-hosts` as root),
`manifest.json`, and `prolog-wait-for-boot.env` (to sit beside the installed prolog). With several clusters in the
file and no `--cluster`, each cluster goes to `DIR/<cluster>/`. Without `--infra`, ids are placeholders.
With `--controller-hosts` (production, the controller's boot script) it also writes the base `slurm.conf` that
`Include`s the fragment, `cgroup.conf` (slurm_plugin/render/base.py), `conf-server` (one line: the
`slurmd --conf-server` argument compute nodes need in configless mode) and `accounting.json` (the accounting objects
the config asks slurmdbd to hold, for `slurm-accounting-apply`) and `rest-api.env` (clusters[].rest_api: whether
slurmrestd and the web page run, and where they listen; slurm_plugin/render/rest_api.py). Where the machine differs from EC2 (the local cloud),
$ES_RENDER_OVERRIDES names its paths, ports and timers (slurm_plugin/render/overrides.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cluster_config import ElasticSlurmConfig, load
from elastic_slurm.errors import UserError
from slurm_plugin.accounting.diff import desired_state
from slurm_plugin.instance_cache import CacheError, load_cache
from slurm_plugin.manifest import DeployedInfra, write_manifest
from slurm_plugin.render import overrides as render_overrides
from slurm_plugin.render import rest_api
from slurm_plugin.render.base import (
    BaseSettings,
    conf_server,
    render_base_conf,
    render_cgroup_conf,
    state_save_location,
)
from slurm_plugin.render.cluster import Rendered, RenderError, RenderOptions, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from slurm_plugin.render.topology import TOPOLOGY_CONF_NAME

SLURM_CONF_NAME = "slurm-elastic.conf"
GRES_CONF_NAME = "gres.conf"
MANIFEST_NAME = "manifest.json"
PROLOG_ENV_NAME = "prolog-wait-for-boot.env"
BASE_CONF_NAME = "slurm.conf"
CGROUP_CONF_NAME = "cgroup.conf"
CONF_SERVER_NAME = "conf-server"  # the `slurmd --conf-server` argument for compute nodes
ACCOUNTING_NAME = "accounting.json"  # desired accounting state for `slurm-accounting-apply --desired`


def register(sub: Any) -> None:
    """Add the `render` subcommand."""
    render = sub.add_parser("render", help="write slurm.conf fragments, gres.conf and the runtime manifest")
    render.add_argument("file", metavar="FILE", help="cluster YAML file")
    render.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    render.add_argument("--cluster", metavar="NAME", help="render only this cluster (needed with --infra)")
    render.add_argument("--cache", metavar="CACHE.json", help="instance cache from `instance-cache refresh`")
    render.add_argument(
        "--infra", metavar="INFRA.json", help="deployed ids (subnets, launch templates); default: placeholders"
    )
    render.add_argument(
        "--controller-hosts",
        metavar="H1[,H2]",
        help="also write the base slurm.conf + cgroup.conf: controller host(s) as name or name(address), primary first",
    )
    render.add_argument("--slurmdbd-host", metavar="HOST", help="with --controller-hosts: AccountingStorageHost")
    render.add_argument(
        "--fragments-path",
        metavar="PATH",
        help="with --controller-hosts: where the fragment is installed (the Include); default: --out/slurm-elastic.conf",
    )
    render.set_defaults(func=run_render)


def run_render(args: argparse.Namespace) -> int:
    """Render the selected cluster(s) into --out."""
    config = load(args.file)
    if not args.cache:
        raise UserError("--cache: an instance cache is needed; build one with `elastic-slurm instance-cache refresh`")
    try:
        cache = load_cache(args.cache)
    except CacheError as exc:
        raise UserError(f"--cache: {exc}") from None
    names = [args.cluster] if args.cluster else [c.name for c in config.clusters]
    if args.infra and len(names) > 1:
        raise UserError("--infra: the file has several clusters; choose one with --cluster")
    if args.controller_hosts is None and (args.slurmdbd_host or args.fragments_path):
        raise UserError("--slurmdbd-host/--fragments-path: only used with --controller-hosts")
    if args.controller_hosts is not None and len(names) > 1:
        raise UserError("--controller-hosts: the file has several clusters; choose one with --cluster")
    out = Path(args.out)
    try:
        overrides = render_overrides.load()
        options = render_overrides.apply(
            RenderOptions(slurmctld_parameters_in_base=args.controller_hosts is not None),
            overrides["options"],
            "options",
        )
    except RenderError as exc:
        raise UserError(str(exc)) from None
    for name in names:
        target = out / name if len(names) > 1 else out
        try:
            infra = _infra(args.infra) if args.infra else placeholder_infra(config.cluster(name))
            rendered = render_cluster(config, name, infra, cache, options)
            base = _base(args, config, name, target, overrides["base"]) if args.controller_hosts is not None else None
            slurm_user = _slurm_user(overrides["base"]) if base is not None else None
        except KeyError:
            known = ", ".join(c.name for c in config.clusters)
            raise UserError(f"--cluster: no cluster '{name}' in {args.file} (it has: {known})") from None
        except (RenderError, CacheError) as exc:
            raise UserError(str(exc)) from None
        write_rendered(rendered, target)
        if slurm_user is not None:
            _hand_to(target / TOPOLOGY_CONF_NAME, slurm_user)
        if base is not None:
            _write(target / BASE_CONF_NAME, base[0])
            _write(target / CGROUP_CONF_NAME, base[2])
            _write(target / CONF_SERVER_NAME, base[1] + "\n")
            _write(target / ACCOUNTING_NAME, desired_state(config).model_dump_json(indent=2) + "\n")
            _write(target / rest_api.ENV_NAME, base[3])
        extra = [f"{BASE_CONF_NAME} + {CGROUP_CONF_NAME} + {ACCOUNTING_NAME}"] if base is not None else []
        print(f"{target}: cluster {name}: {', '.join([*_summary(rendered), *extra])}")
    return 0


def write_rendered(rendered: Rendered, target: Path) -> None:
    """Write the files of one rendered cluster into `target` (created if missing)."""
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out: cannot create {target}: {exc.strerror}") from None
    (target / SLURM_CONF_NAME).write_text(rendered.slurm_conf, encoding="utf-8")
    gres = target / GRES_CONF_NAME
    if rendered.gres_conf:
        gres.write_text(rendered.gres_conf, encoding="utf-8")
    elif gres.exists():
        gres.unlink()
    (target / PROLOG_ENV_NAME).write_text(rendered.prolog_env, encoding="utf-8")
    topology = target / TOPOLOGY_CONF_NAME
    if rendered.topology_conf:
        topology.write_text(rendered.topology_conf, encoding="utf-8")
    elif topology.exists():
        topology.unlink()
    write_manifest(rendered.manifest, target / MANIFEST_NAME)


def _slurm_user(overrides: dict[str, Any]) -> str:
    """SlurmUser of the base slurm.conf (BaseSettings' default unless the machine overrides it)."""
    return str(overrides.get("slurm_user", BaseSettings.slurm_user))


def _hand_to(path: Path, user: str) -> None:
    """Give topology.conf to SlurmUser when rendering as root on a controller: the cluster manager, which runs as that
    user, rewrites it in place as instances come and go (slurm_plugin/manager/topology.py); the controller's config
    apply copies it into /etc/slurm with its owner. A user this machine lacks (a workstation) leaves it as it is."""
    if not path.exists() or os.geteuid() != 0:
        return
    try:
        shutil.chown(path, user)
    except LookupError:
        return
    except OSError as exc:
        raise UserError(f"--out: cannot give {path} to {user}: {exc.strerror}") from None


def _base(
    args: argparse.Namespace, config: ElasticSlurmConfig, name: str, target: Path, overrides: dict[str, Any]
) -> tuple[str, str, str, str]:
    """The base slurm.conf text, the conf-server argument, cgroup.conf and rest-api.env."""
    hosts = tuple(h.strip() for h in args.controller_hosts.split(",") if h.strip())
    settings = BaseSettings(
        controller_hosts=hosts,
        fragments_path=args.fragments_path or str((target / SLURM_CONF_NAME).absolute()),
        slurmdbd_host=args.slurmdbd_host or None,
    )
    settings = render_overrides.apply(settings, overrides, "base")
    cgroup = render_cgroup_conf(settings, config.cluster(name).cgroup_settings)
    cluster = config.cluster(name)
    rest_env = rest_api.env_file(
        cluster, state_save_location(cluster, settings), settings.rest_api_port, settings.web_ui_listen
    )
    return render_base_conf(config, name, settings), conf_server(settings), cgroup, rest_env


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--out: cannot write {path}: {exc.strerror}") from None


def _infra(path: str) -> DeployedInfra:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--infra: cannot read {path}: {exc.strerror}") from None
    try:
        return DeployedInfra.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise UserError(f"--infra: {path}: {where}: {first['msg']}") from None


def _summary(rendered: Rendered) -> list[str]:
    pools = rendered.manifest.pools
    items = [f"{len(pools)} pool(s)", f"{sum(p.max_nodes for p in pools)} node(s)"]
    if rendered.gres_conf:
        items.append("gres.conf")
    placeholder = any("PLACEHOLDER" in loc.subnet_id for p in pools for loc in p.locations)
    if placeholder:
        items.append("placeholder infra ids")
    return items
