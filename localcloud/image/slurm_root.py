"""The root file system the local cloud runs Slurm from: one per supported Slurm release, built once, cached.

Debian 12's own Slurm (22.05) is end of life, so the daemons, the Slurm clients, munge and the plugin run from a root
file system built into `$ELASTIC_SLURM_ROOT_CACHE` (default /var/cache/elastic-slurm), reused while its inputs are
unchanged; every build is atomic (a temporary directory renamed when complete). Two kinds:

- the image root of the pinned release (`cluster_config.slurm_release`, 26.05.3, the default): Debian 13 made into
  the controller/compute image by the image component's own scripts (localcloud.image.image_root) — what the AMI holds;
- a packaged root for an older release (24.11, Debian 13's own binary packages): a site still on the previous
  release, with the plugin's programs as wrappers (compatibility runs; docs/local-cloud.md).

    python -m localcloud.image.slurm_root build [--slurm 24.11]   # prints the root's path
    python -m localcloud.image.slurm_root prune                    # removes roots the current inputs no longer use

Either way the project source is bind-mounted at /opt/elastic-slurm/src at run time (see localcloud.instances.enter).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cluster_config import slurm_release
from localcloud.image import image_root, one_builder
from localcloud.layout import REPO_ROOT

DEFAULT_SLURM = ".".join(slurm_release.VERSION.split(".")[:2])
ROOT_CACHE = Path(os.environ.get("ELASTIC_SLURM_ROOT_CACHE", "/var/cache/elastic-slurm"))
SRC_IN_ROOT = "/opt/elastic-slurm/src"
BIN_IN_ROOT = "/opt/elastic-slurm/bin"
VENV_IN_ROOT = "/opt/elastic-slurm/venv"  # where the image pip-installs the project
RECIPE_VERSION = "8"  # bump when the customization below changes
# what install-plugin.sh installs into /opt/elastic-slurm/bin, linked into the mounted source on a packaged root
LINKED_PROGRAMS = (
    "assets/bootstrap/elastic-slurm-node-bootstrap",
    "assets/bootstrap/elastic-slurm-dirs",
    "assets/bootstrap/elastic-slurm-config-apply",
    "assets/bootstrap/elastic-slurm-imds-guard",
    "assets/bootstrap/elastic-slurm-custom-actions",
    "assets/bootstrap/elastic-slurm-first-state-save",
    "assets/bootstrap/elastic-slurm-smt-off",
    "assets/bootstrap/elastic-slurm-directory",
    "assets/health/elastic-slurm-healthcheck",
    "assets/health/elastic-slurm-longcheck-submit",
    "assets/slurm/prolog-wait-for-boot.sh",
)
BIND_SOURCE_C = REPO_ROOT / "localcloud" / "native" / "bind_source.c"
BIND_SOURCE_SO = "/opt/elastic-slurm/lib/local-cloud/bind_source.so"  # inside the root
SYSTEMCTL_SHIM = REPO_ROOT / "localcloud" / "native" / "systemctl"  # no systemd in a chroot: see the script
# An ordinary user (neither root nor a Slurm admin) who submits jobs in the tests and the demo.
JOB_USER = "esuser"
JOB_UID = 2001

PACKAGES = [
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "slurm-client",
    "sackd",  # login nodes
    "munge",
    "python3",
    "python3-pydantic",
    "python3-yaml",
    "python3-boto3",
    "python3-hostlist",
    "python3-prometheus-client",  # the metrics exporter (slurm_plugin/exporter)
    "perl",
    "procps",
    "util-linux",
    "mount",  # the user data mounts the shared file systems
    "jq",
    "curl",
    "awscli",  # the user data calls it (Secrets Manager, SSM, EC2), as on EC2
    "ca-certificates",
    "systemd",  # an AMI's: its unit files and systemd-analyze (tests/e2e/test_units_verify.py); never run as init here
]


@dataclass(frozen=True)
class Release:
    """A supported Slurm release, the Debian suite of its root, and whether the root is the image (built by the
    image component's scripts) or Debian's packages."""

    major: str
    suite: str
    image: bool = False


OLDER_SLURM = "24.11"  # the older release a site may still run: Debian 13's packages (slurm-wlm 24.11.5)
RELEASES = {
    r.major: r for r in (Release(DEFAULT_SLURM, image_root.SUITE, image=True), Release(OLDER_SLURM, image_root.SUITE))
}


class RootError(RuntimeError):
    """The root could not be built (one line)."""


def release(major: str) -> Release:
    """The supported release `major` (e.g. 26.05); RootError naming the choices otherwise."""
    try:
        return RELEASES[major]
    except KeyError:
        raise RootError(f"slurm_version: {major} is not supported here (choose {', '.join(RELEASES)})") from None


def release_of(version: str) -> Release:
    """The root a config's `images.slurm_version` runs on: the image root for the pinned release, a packaged root for
    another supported major release; RootError (one line) otherwise."""
    if version == slurm_release.VERSION:
        return RELEASES[DEFAULT_SLURM]
    rel = release(".".join(version.split(".")[:2]))
    if rel.image:
        raise RootError(
            f"images.slurm_version: the local cloud runs {rel.major} as the image's {slurm_release.VERSION}, not {version}"
        )
    return rel


def console_scripts() -> dict[str, str]:
    """[project.scripts] of pyproject.toml: program -> `module:function`."""
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    scripts: dict[str, str] = data["project"]["scripts"]
    return scripts


def _key(rel: Release) -> str:
    text = json.dumps(
        [
            RECIPE_VERSION,
            rel.suite,
            PACKAGES,
            sorted(console_scripts().items()),
            BIND_SOURCE_C.read_text(),
            LINKED_PROGRAMS,
            # the units are linked by name at build time: a new unit needs a new root
            sorted(p.name for p in (REPO_ROOT / "assets" / "systemd").iterdir()),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _local_additions() -> list[object]:
    """Inputs of what the local cloud adds to the image (part of the image root's key; the console scripts are pip's,
    keyed through pyproject.toml by image_root.image_layer_key)."""
    return [RECIPE_VERSION, BIND_SOURCE_C.read_text()]


def root_path(major: str = DEFAULT_SLURM) -> Path:
    """Where the root of `major` lives (built or not)."""
    rel = release(major)
    if rel.image:
        return (
            ROOT_CACHE / f"image-{slurm_release.VERSION}-{rel.suite}-{image_root.image_layer_key(_local_additions())}"
        )
    return ROOT_CACHE / f"slurm-{rel.major}-{rel.suite}-{_key(rel)}"


def slurm_layer_path() -> Path:
    """Where the image's Slurm layer (base system, packages, munge, Slurm built from source) lives."""
    return ROOT_CACHE / f"slurm-layer-{slurm_release.VERSION}-{image_root.SUITE}-{image_root.slurm_layer_key()}"


def is_built(major: str = DEFAULT_SLURM) -> bool:
    """True when the cached root exists and is complete."""
    return (root_path(major) / "etc" / "elastic-slurm-root.json").exists()


def _wrapper(target: str) -> str:
    module, function = target.split(":")
    return (
        "#!/bin/sh\n# elastic-slurm console script (local cloud root): the project source is mounted at"
        f" {SRC_IN_ROOT}\nexport PYTHONPATH={SRC_IN_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        f'exec /usr/bin/python3 -c "import sys; from {module} import {function}; sys.exit({function}())" "$@"\n'
    )


def _machine_parts(root: Path) -> None:
    """What stands in for the EC2 machine (not the image): the bind-source shim, the systemctl stand-in and systemd's
    own files (image_root.add_systemd; a packaged root has them from PACKAGES). During an image build the stand-in is
    a copy (the source is not mounted yet); `_finish` makes it a link into the source."""
    image_root.add_systemd(root)
    shim = root / BIND_SOURCE_SO.lstrip("/")
    shim.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(BIND_SOURCE_C), "-ldl"], check=True, capture_output=True
    )
    systemctl = root / "usr/local/sbin/systemctl"
    systemctl.unlink(missing_ok=True)
    shutil.copy(SYSTEMCTL_SHIM, systemctl)


def _finish(root: Path) -> None:
    """Local additions on either kind of root: the job user, the systemctl stand-in linked to the mounted source, no
    munge key or slurm.conf (the controller renders one, compute nodes run configless), our plugstack.conf, an empty
    /etc/nss_slurm.conf for the instances to bind their own over."""
    subprocess.run(
        ["chroot", str(root), "useradd", "--create-home", "--uid", str(JOB_UID), "--user-group", JOB_USER],
        check=True,
        capture_output=True,
    )
    systemctl = root / "usr/local/sbin/systemctl"
    systemctl.unlink(missing_ok=True)
    systemctl.symlink_to(f"{SRC_IN_ROOT}/{SYSTEMCTL_SHIM.relative_to(REPO_ROOT)}")
    shutil.rmtree(root / "run/systemctl-shim", ignore_errors=True)  # what `systemctl enable` noted during the build
    (root / SRC_IN_ROOT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for leftover in ("etc/munge/munge.key", "etc/slurm/slurm.conf"):
        (root / leftover).unlink(missing_ok=True)
    # an empty file (nss_slurm's defaults) each instance binds its own copy over (machines.OWN_ETC_NEW)
    (root / "etc/nss_slurm.conf").touch(mode=0o644)
    # local cloud helpers the instance runner starts an instance's user data with (its boot clock and host name)
    for helper in ("fresh-boot-exec", "unblock-exec"):
        link = root / BIN_IN_ROOT.lstrip("/") / helper
        link.unlink(missing_ok=True)
        link.symlink_to(f"{SRC_IN_ROOT}/assets/bootstrap/{helper}")


def _customize(root: Path) -> None:
    """A packaged root made to look like the image: programs in /opt/elastic-slurm/bin (wrappers running the mounted
    source with Debian's Python packages), our units, then the machine parts and the local additions."""
    bin_dir = root / BIN_IN_ROOT.lstrip("/")
    bin_dir.mkdir(parents=True, exist_ok=True)
    (root / SRC_IN_ROOT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for program, target in console_scripts().items():
        path = bin_dir / program
        path.write_text(_wrapper(target))
        path.chmod(0o755)
    # assets the image installs into /opt/elastic-slurm/bin: links into the mounted source, so they are current
    for rel_path in LINKED_PROGRAMS:
        link = bin_dir / Path(rel_path).name
        link.unlink(missing_ok=True)
        link.symlink_to(f"{SRC_IN_ROOT}/{rel_path}")
    for unit in sorted((REPO_ROOT / "assets" / "systemd").iterdir()):
        if unit.is_dir():  # a drop-in directory (sackd.service.d): where install-plugin.sh puts it
            drop_ins = root / "etc/systemd/system" / unit.name
            drop_ins.mkdir(parents=True, exist_ok=True)
            for conf in sorted(unit.glob("*.conf")):
                (drop_ins / conf.name).unlink(missing_ok=True)
                (drop_ins / conf.name).symlink_to(f"{SRC_IN_ROOT}/assets/systemd/{unit.name}/{conf.name}")
            continue
        link = root / "usr/lib/systemd/system" / unit.name
        link.unlink(missing_ok=True)
        link.symlink_to(f"{SRC_IN_ROOT}/assets/systemd/{unit.name}")
    # the image pip-installs the project into /opt/elastic-slurm/venv: here its python runs the mounted source
    venv_bin = root / VENV_IN_ROOT.lstrip("/") / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    (venv_bin / "python").write_text(
        f'#!/bin/sh\nexport PYTHONPATH={SRC_IN_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}\nexec /usr/bin/python3 "$@"\n'
    )
    (venv_bin / "python").chmod(0o755)
    for program in console_scripts():
        (venv_bin / program).unlink(missing_ok=True)
        (venv_bin / program).symlink_to(f"{BIN_IN_ROOT}/{program}")
    # Debian's plugstack.conf includes a glob slurmctld warns about; ours includes nothing
    (root / "etc/slurm/plugstack.conf").write_text("# elastic-slurm: no SPANK plugins\n")
    _machine_parts(root)
    _finish(root)


def _build_packaged(rel: Release, tmp: Path, log: Path) -> None:
    argv = [
        "mmdebstrap",
        "--variant=apt",
        "--aptopt=Acquire::Check-Valid-Until false",  # a mirror's Release file may carry an expired date
        f"--include={','.join(PACKAGES)}",
        rel.suite,
        str(tmp),
    ]
    with open(log, "ab") as out:
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise RootError(f"mmdebstrap {rel.suite} failed (exit {result.returncode}); see {log}")
    _customize(tmp)


def _build_image(tmp: Path, log: Path) -> None:
    layer = slurm_layer_path()
    try:
        with one_builder.one_builder(layer):  # image roots of other checkouts may share this layer
            if not (layer / "etc" / "slurm" / "BUILD-INFO").exists():
                one_builder.remove_partial_builds(layer, image_root.remove_tree)
                image_root.build_slurm_layer(layer, ROOT_CACHE, log)
        image_root.build_image_layer(layer, tmp, log, prepare=_machine_parts)
    except image_root.ImageBuildError as exc:
        raise RootError(str(exc)) from None
    image_root.link_mounted_source(tmp, SRC_IN_ROOT)
    _finish(tmp)


def build(major: str = DEFAULT_SLURM, log: Path | None = None, retry_failed: bool = True) -> Path:
    """The root of `major`: reused when built, waited for while another process builds it, built otherwise;
    RootError (one line naming the failed step and its log) when it cannot be. A failed build is recorded
    (localcloud.image.one_builder); `retry_failed=False` raises that record instead of building again."""
    rel = release(major)
    final = root_path(major)
    if is_built(major):
        return final
    with one_builder.one_builder(final):
        if is_built(major):  # built by the process this one waited for
            return final
        failed = one_builder.recorded_failure(final)
        if failed and not retry_failed:
            raise RootError(failed)
        one_builder.failure_record(final).unlink(missing_ok=True)
        one_builder.remove_partial_builds(final, image_root.remove_tree)
        try:
            _build(rel, final, log)
        except Exception as exc:
            one_builder.failure_record(final).write_text(f"{exc}\n")
            raise
    return final


def _build(rel: Release, final: Path, log: Path | None) -> None:
    if shutil.which("mmdebstrap") is None:
        raise RootError("mmdebstrap is not installed (scripts/setup.sh installs it)")
    ROOT_CACHE.mkdir(parents=True, exist_ok=True)
    log = log or ROOT_CACHE / f"{final.name}.log"
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    image_root.remove_tree(tmp)
    started = time.monotonic()
    try:
        if rel.image:
            _build_image(tmp, log)
        else:
            _build_packaged(rel, tmp, log)
        version = subprocess.run(["chroot", str(tmp), "slurmctld", "-V"], capture_output=True, text=True).stdout
        meta = {
            "slurm": version.strip(),
            "suite": rel.suite,
            "image": rel.image,
            "seconds": round(time.monotonic() - started, 1),
        }
        (tmp / "etc" / "elastic-slurm-root.json").write_text(json.dumps(meta) + "\n")
    except BaseException:
        image_root.remove_tree(tmp)
        raise
    image_root.publish(tmp, final)


def slurm_version(root: Path) -> str:
    """`slurm 26.05.3` / `slurm-wlm 24.11.5` -> the version, as recorded when the root was built."""
    meta = json.loads((root / "etc" / "elastic-slurm-root.json").read_text())
    return str(meta["slurm"]).split()[-1]


PRUNED_PREFIXES = ("image-", "slurm-")  # roots and layers of every release; `sources` (the tarballs) stays
PRUNE_MIN_AGE = 3600.0  # a root younger than this may be another checkout's build in progress


def _roots_in_use() -> set[str]:
    """Names of the cached roots some process runs in (a local cloud of any checkout: its daemons are chrooted)."""
    names = set()
    for proc in Path("/proc").iterdir():
        try:
            root = Path(os.readlink(proc / "root"))
        except OSError:
            continue
        if root.parent == ROOT_CACHE:
            names.add(root.name)
    return names


def prune(now: float | None = None) -> list[Path]:
    """Remove the cached roots and layers (and their logs) this checkout's inputs no longer select, older than an
    hour and not in use by a running process; returns what was removed. Each edit of assets/ or the build steps leaves a 1.6 GB root behind."""
    keep = {root_path(major).name for major in RELEASES} | {slurm_layer_path().name} | _roots_in_use()
    now = time.time() if now is None else now
    removed = []
    for entry in sorted(ROOT_CACHE.iterdir()) if ROOT_CACHE.is_dir() else []:
        name = entry.name.removesuffix(".log")
        if not name.startswith(PRUNED_PREFIXES) or name in keep or now - entry.stat().st_mtime < PRUNE_MIN_AGE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry)
    return removed


def _stop(signum: int, frame: object) -> None:
    """SIGTERM (scripts/test.sh stopping a background build): unwind, so the build unmounts and removes its partial
    root; once — a second signal must not cut that cleanup short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localcloud.image.slurm_root", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or reuse) the root of a Slurm release and print its path")
    b.add_argument("--slurm", default=DEFAULT_SLURM, help=f"Slurm release ({', '.join(RELEASES)})")
    sub.add_parser("prune", help="remove cached roots the current inputs no longer use (older than an hour)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    if args.command == "prune":
        gone = prune()
        print(f"slurm root: removed {len(gone)} cached entries no longer used", file=sys.stderr)
        return 0
    try:
        started = time.monotonic()
        cached = is_built(args.slurm)
        path = build(args.slurm)
    except RootError as exc:
        print(f"slurm root: {exc}", file=sys.stderr)
        return 1
    how = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
    print(f"slurm root {args.slurm}: {path} (Slurm {slurm_version(path)}, {how})", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
