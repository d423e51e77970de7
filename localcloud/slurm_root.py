"""The Debian root file system the local cloud runs Slurm from: one per supported Slurm release, built once, cached.

Debian 12's own Slurm (22.05) is end of life, so the daemons, the Slurm clients, munge and the plugin's Python run from
a Debian root of the suite that ships the wanted release (26.05 from unstable, 24.11 from Debian 13), built with
`mmdebstrap` into `$ELASTIC_SLURM_ROOT_CACHE` (default /var/cache/elastic-slurm) and reused while its inputs (suite,
package list, this module's recipe) are unchanged. The build is atomic: a temporary directory renamed when complete.

    python -m localcloud.slurm_root build [--slurm 26.05]   # prints the root's path

The root holds what the image holds (users slurm/munge, /opt/elastic-slurm/bin with the plugin's programs), but the
Python dependencies come from Debian packages and the project source is bind-mounted at /opt/elastic-slurm/src at run
time (see localcloud.enter) — listed in docs/local-cloud.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from localcloud.layout import REPO_ROOT

DEFAULT_SLURM = "26.05"
ROOT_CACHE = Path(os.environ.get("ELASTIC_SLURM_ROOT_CACHE", "/var/cache/elastic-slurm"))
SRC_IN_ROOT = "/opt/elastic-slurm/src"
BIN_IN_ROOT = "/opt/elastic-slurm/bin"
VENV_IN_ROOT = "/opt/elastic-slurm/venv"  # where the image pip-installs the project
RECIPE_VERSION = "6"  # bump when the customization below changes
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
    "munge",
    "python3",
    "python3-pydantic",
    "python3-yaml",
    "python3-boto3",
    "python3-hostlist",
    "perl",
    "procps",
    "util-linux",
    "mount",  # the user data mounts the shared file systems
    "jq",
    "curl",
    "awscli",  # the user data calls it (Secrets Manager, SSM, EC2), as on EC2
    "ca-certificates",
]


@dataclass(frozen=True)
class Release:
    """A supported Slurm release and the Debian suite that ships it."""

    major: str
    suite: str


RELEASES = {r.major: r for r in (Release("26.05", "sid"), Release("24.11", "trixie"))}


class RootError(RuntimeError):
    """The root could not be built (one line)."""


def release(major: str) -> Release:
    """The supported release `major` (e.g. 26.05); RootError naming the choices otherwise."""
    try:
        return RELEASES[major]
    except KeyError:
        raise RootError(f"slurm_version: {major} is not supported here (choose {', '.join(RELEASES)})") from None


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
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def root_path(major: str = DEFAULT_SLURM) -> Path:
    """Where the root of `major` lives (built or not)."""
    rel = release(major)
    return ROOT_CACHE / f"slurm-{rel.major}-{rel.suite}-{_key(rel)}"


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


def _customize(root: Path) -> None:
    """What the image adds on top of the packages: programs in /opt/elastic-slurm/bin, the job user, no config."""
    bin_dir = root / BIN_IN_ROOT.lstrip("/")
    bin_dir.mkdir(parents=True, exist_ok=True)
    (root / SRC_IN_ROOT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for program, target in console_scripts().items():
        path = bin_dir / program
        path.write_text(_wrapper(target))
        path.chmod(0o755)
    # assets the image installs into /opt/elastic-slurm/bin: links into the mounted source, so they are current
    for rel_path in (
        "assets/bootstrap/elastic-slurm-node-bootstrap",
        "assets/bootstrap/elastic-slurm-dirs",
        "assets/bootstrap/fresh-boot-exec",
        "assets/bootstrap/unblock-exec",
        "assets/health/elastic-slurm-healthcheck",
        "assets/health/elastic-slurm-longcheck-submit",
        "assets/slurm/prolog-wait-for-boot.sh",
    ):
        link = bin_dir / Path(rel_path).name
        link.unlink(missing_ok=True)
        link.symlink_to(f"{SRC_IN_ROOT}/{rel_path}")
    subprocess.run(
        ["chroot", str(root), "useradd", "--create-home", "--uid", str(JOB_UID), "--user-group", JOB_USER],
        check=True,
        capture_output=True,
    )
    # local cloud only: instances connect from their private IP (see localcloud/native/bind_source.c)
    shim = root / BIND_SOURCE_SO.lstrip("/")
    shim.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(BIND_SOURCE_C), "-ldl"], check=True, capture_output=True
    )
    # the systemctl stand-in and our units: links into the mounted source, so they are current (see the shim)
    shim = root / "usr/local/sbin/systemctl"
    shim.unlink(missing_ok=True)
    shim.symlink_to(f"{SRC_IN_ROOT}/{SYSTEMCTL_SHIM.relative_to(REPO_ROOT)}")
    for unit in sorted((REPO_ROOT / "assets" / "systemd").iterdir()):
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
    # no slurm.conf and no munge key in the image: the controller renders one, compute nodes run configless
    for leftover in ("etc/munge/munge.key", "etc/slurm/slurm.conf"):
        (root / leftover).unlink(missing_ok=True)
    # Debian unstable's plugstack.conf includes a glob slurmctld warns about; ours includes nothing
    (root / "etc/slurm/plugstack.conf").write_text("# elastic-slurm: no SPANK plugins\n")


def build(major: str = DEFAULT_SLURM, log: Path | None = None) -> Path:
    """The root of `major`, built when missing; RootError (one line) when mmdebstrap fails."""
    rel = release(major)
    final = root_path(major)
    if is_built(major):
        return final
    if shutil.which("mmdebstrap") is None:
        raise RootError("mmdebstrap is not installed (scripts/setup.sh installs it)")
    ROOT_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    argv = [
        "mmdebstrap",
        "--variant=apt",
        "--aptopt=Acquire::Check-Valid-Until false",  # unstable's Release file here carries an expired date
        f"--include={','.join(PACKAGES)}",
        rel.suite,
        str(tmp),
    ]
    started = time.monotonic()
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log:
            out.close()  # type: ignore[union-attr]
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RootError(f"mmdebstrap {rel.suite} failed (exit {result.returncode}); see {log or 'its output'}")
    _customize(tmp)
    version = subprocess.run(["chroot", str(tmp), "slurmctld", "-V"], capture_output=True, text=True).stdout.strip()
    meta = {"slurm": version, "suite": rel.suite, "seconds": round(time.monotonic() - started, 1)}
    (tmp / "etc" / "elastic-slurm-root.json").write_text(json.dumps(meta) + "\n")
    if final.exists():  # another builder won the race
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(final)
    return final


def slurm_version(root: Path) -> str:
    """`slurm-wlm 26.05.5` -> `26.05.5`, as recorded when the root was built."""
    meta = json.loads((root / "etc" / "elastic-slurm-root.json").read_text())
    return str(meta["slurm"]).split()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localcloud.slurm_root", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or reuse) the root of a Slurm release and print its path")
    b.add_argument("--slurm", default=DEFAULT_SLURM, help=f"Slurm release ({', '.join(RELEASES)})")
    args = parser.parse_args(argv)
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
