"""The emulated machines of one local cloud — the controller and each EC2 instance — as views of the Slurm root.

- The controller sees the whole state directory at its own path (its "disk": logs, plugin state, spool), its
  etc/ at /etc/slurm (what its boot renders: slurm.conf, fragments, manifest; Slurm's default path, so clients need no
  SLURM_CONF), its own /etc/munge, /etc/elastic-slurm, /etc/systemd/system, /run and /tmp, the shared file system at
  its mount point, the controllers' own file system (Slurm's state) at its mount point, and its EC2 host name (a
  UTS namespace) resolved by its own /etc/hosts.
- An instance sees no configuration at all: a private /run and /tmp, munged's socket, the shared file system, the jobs
  directory, and only the spool/log/pid directories its slurmd writes. Its slurmd runs configless (`--conf-server`).
  Its local accounts (/etc/passwd, /etc/group) and name service (/etc/nsswitch.conf, /etc/nss_slurm.conf) are its
  own: copies of the image's taken when it boots, as an AMI's are the instance's own from then on. So a user added
  later to the submit host (the image root's /etc/passwd, which the controller sees) is unknown on an instance that
  is already running — unless its jobs resolve users through nss_slurm (docs/users.md).

`write_client_wrappers` puts host commands `sbatch`, `squeue`, ... in the state dir's hostbin/: each runs the root's
client on the controller, so tests and users on the host talk to the cluster with its own Slurm version.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from localcloud.instances import enter
from localcloud.layout import REPO_ROOT, Layout
from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT

CLIENTS = (
    "sbatch",
    "srun",
    "salloc",
    "squeue",
    "sinfo",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "sdiag",
    "sprio",
    "sshare",
    "sreport",
    "sstat",
    "munge",
    "unmunge",
)


# Units the boot scripts enable that the local cloud does not run (ES_LOCAL_UNITS_SKIP of the systemctl stand-in):
# the IMDS guard installs iptables rules, and every machine here shares the host's network namespace (its script is
# executed by tests/e2e/test_imds_guard.py in a namespace of its own instead; docs/local-cloud.md).
UNITS_NOT_RUN = ("elastic-slurm-imds-guard.service",)

# An instance's own copies of these files of the image (passwd/group: its local accounts; nsswitch.conf: edited by the
# node bootstrap when the cluster enables nss_slurm). The root's originals must only ever be edited in place: a tool
# that renames a new file over one (useradd, vipw) would detach the bind in every running instance, as the kernel
# lazily unmounts a mount point that is renamed over in another mount namespace.
OWN_ETC_COPIES = ("passwd", "group", "nsswitch.conf")
# ... and files the node bootstrap writes that the image has not (bound over an empty file the root build leaves)
OWN_ETC_NEW = ("nss_slurm.conf",)


def _private(layout: Layout, name: str) -> tuple[tuple[str, str], ...]:
    """A machine's own /run, /tmp and /etc/fstab (the boot adds the shared file systems to it)."""
    base = layout.machine_dir(name)
    for sub in ("run", "tmp"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "tmp").chmod(0o1777)
    fstab = base / "fstab"
    if not fstab.exists():
        fstab.write_text("# /etc/fstab of this emulated machine (the image's is empty)\n")
    return ((str(base / "run"), "/run"), (str(base / "tmp"), "/tmp"), (str(fstab), "/etc/fstab"))


# SSSD's configuration, databases, sockets and logs: each machine runs its own sssd (clusters[].directory), as each
# EC2 instance does. Copies of the image's directories (owners and modes kept) made at the machine's first view.
SSSD_DIRS = ("etc/sssd", "var/lib/sss", "var/log/sssd")


def _own_sssd(layout: Layout, root: Path, name: str) -> tuple[tuple[str, str], ...]:
    """The machine's own SSSD directories (nothing when the image has no SSSD)."""
    binds = []
    for rel in SSSD_DIRS:
        if not (root / rel).is_dir():
            continue
        own = layout.machine_dir(name) / "sssd" / rel.replace("/", "-")
        if not own.exists():
            own.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", str(root / rel), str(own)], check=True)
        binds.append((str(own), f"/{rel}"))
    return tuple(binds)


def _own_etc(layout: Layout, root: Path, instance_id: str) -> tuple[tuple[str, str], ...]:
    """The instance's own /etc files (OWN_ETC_COPIES, OWN_ETC_NEW): created at its first view, i.e. when it boots,
    and kept from then on (the instance's disk)."""
    base = layout.machine_dir(instance_id) / "etc"
    base.mkdir(parents=True, exist_ok=True)
    binds = []
    for name in (*OWN_ETC_COPIES, *OWN_ETC_NEW):
        own = base / name
        if not own.exists():
            if name in OWN_ETC_COPIES:
                shutil.copy2(root / "etc" / name, own)
            else:
                own.touch(mode=0o644)
        binds.append((str(own), f"/etc/{name}"))
    return tuple(binds)


def _own_systemd(base: Path, root: Path) -> tuple[str, str]:
    """The machine's own /etc/systemd/system, whose boot adds drop-ins (the shared file systems' RequiresMountsFor=,
    stacks/user_data.py): its disk starts as the image's, units and links, and is never the image root's itself."""
    own = base / "etc-systemd"
    if not own.exists() and (root / "etc/systemd/system").is_dir():
        shutil.copytree(root / "etc/systemd/system", own, symlinks=True)
    own.mkdir(parents=True, exist_ok=True)  # a root without units (the unit tests' stand-in roots): an empty one
    return (str(own), "/etc/systemd/system")


def controller_machine(index: int) -> str:
    """The machine directory name of controller `index`: `controller` (the primary), `controller-1` (the backup)."""
    return "controller" if index == 0 else f"controller-{index}"


def controller_view(
    layout: Layout, root: Path, shared_mount: str, hostname: str | None = None, index: int = 0
) -> enter.View:
    """Controller `index` (0: the primary, 1: the backup): with `hostname` (its EC2 name), its own host name and
    /etc/hosts. Both controllers of a two-controller cloud see the same /etc/slurm (what each renders is the same
    text); everything else of theirs is their own: /run (munged's socket, the user data), /tmp, /etc/munge,
    /etc/elastic-slurm (the env file with its ES_CONTROLLER_INDEX), /etc/systemd/system, SSSD, the host name."""
    machine = controller_machine(index)
    base = layout.machine_dir(machine)
    for sub in ("etc-munge", "etc-elastic-slurm"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    extra: tuple[tuple[str, str], ...] = ()
    if hostname:
        hosts = base / "hosts"
        if not hosts.exists():
            address = hostname.removeprefix("ip-").replace("-", ".")
            hosts.write_text(f"127.0.0.1 localhost\n{address} {hostname}\n")
        extra = ((str(hosts), "/etc/hosts"),)
    view = enter.View(root, hostname=hostname).with_binds(
        *extra,
        *_private(layout, machine),
        *_own_sssd(layout, root, machine),
        (base / "etc-munge", "/etc/munge"),
        (base / "etc-elastic-slurm", "/etc/elastic-slurm"),
        _own_systemd(base, root),
        (layout.etc, "/etc/slurm"),
        *enter.same_path(layout.root, REPO_ROOT),
        (layout.shared, shared_mount),
        (layout.controller_state, CONTROLLER_STATE_MOUNT),  # the controllers' own file system
    )
    return view


def ec2_hostname(private_ip: str) -> str:
    """The host name EC2 gives an instance: ip-127-16-0-4 for 127.16.0.4."""
    return "ip-" + private_ip.replace(".", "-")


def instance_view(layout: Layout, root: Path, instance_id: str, private_ip: str | None = None) -> enter.View:
    """One emulated EC2 instance (compute node): its own /run, /tmp, /etc/munge, /etc/elastic-slurm and
    /etc/systemd/system, no slurm.conf
    anywhere on its disk, its own accounts and name service (`_own_etc`); with `private_ip`, its own /etc/hosts
    resolving its EC2 host name to that address. Its
    user data mounts the shared file system (the state dir's shared/, visible at its own path as the NFS server would
    be) at its mount point itself and starts its own munged."""
    extra: tuple[tuple[str, str], ...] = ()
    base = layout.machine_dir(instance_id)
    if private_ip:
        hosts = base / "hosts"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(f"127.0.0.1 localhost\n{private_ip} {ec2_hostname(private_ip)}\n")
        extra = ((str(hosts), "/etc/hosts"),)
    for sub in ("etc-munge", "etc-elastic-slurm"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return enter.View(root).with_binds(
        *extra,
        *_private(layout, instance_id),
        *_own_etc(layout, root, instance_id),
        *_own_sssd(layout, root, instance_id),
        (base / "etc-munge", "/etc/munge"),
        (base / "etc-elastic-slurm", "/etc/elastic-slurm"),
        _own_systemd(base, root),
        *enter.same_path(layout.spool, layout.log, layout.run, layout.jobs, layout.shared),
    )


def write_client_wrappers(layout: Layout, view: enter.View) -> None:
    """hostbin/<client>: run that Slurm client of the root on the controller (as root; as uid:gid when the caller
    sets ES_LOCAL_USER=uid:gid), in the caller's directory if the controller has it (else /), with the caller's
    environment. Mount namespaces need root, so the wrappers do too; the user switch happens at `chroot`."""
    layout.hostbin.mkdir(parents=True, exist_ok=True)
    argv = enter.argv(view, ["true"])
    helper = shlex.quote(argv[0])
    root_and_binds = " ".join(shlex.quote(a) for a in argv[1 : argv.index("--")])  # no option: the view has no hostname
    for client in CLIENTS:
        text = (
            "#!/bin/sh\n"
            f"# {client} of the local cloud's Slurm root, run on its controller (written by `elastic-slurm local up`).\n"
            'spec=""; [ -n "${ES_LOCAL_USER:-}" ] && spec="--userspec $ES_LOCAL_USER"\n'
            f"exec {helper} $spec {root_and_binds} -- "
            f'/bin/sh -c \'cd "$0" 2>/dev/null || cd /; exec "$@"\' "$PWD" /usr/bin/{client} "$@"\n'
        )
        path = layout.hostbin / client
        path.write_text(text)
        path.chmod(0o755)
