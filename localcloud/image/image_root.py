"""The image root: the controller and compute image, built here by the image component's own scripts.

EC2 Image Builder runs `assets/imagebuilder/slurm.yaml`, which only calls the scripts of `assets/image-build/`. This
module runs the same scripts, in the same order and with the same arguments, in a Debian 13 root file system (the
base OS the tests execute), so the image the local cloud boots is the image the component builds:

    os-packages.sh → build-munge.sh → build-slurm.sh <tarball> <sha256> <version> → install-plugin.sh → validate.sh

The Slurm source is the pinned release of `cluster_config.slurm_release` (SchedMD's tag archive), taken from the
first of: the root cache's `sources/`, the source mirror directory (`$ELASTIC_SLURM_SOURCE_MIRROR`, else
`../shared/sources` beside the checkout when it exists: these machines cannot reach GitHub), the release's URL; its
sha256 is checked before it is cached, and build-slurm.sh checks it again. Two layers, each cached by its inputs and
built atomically (a temporary directory renamed when complete):

- the Slurm layer (base system, packages, munge, Slurm): ~10 minutes on 2 cores, rebuilt only when those scripts,
  the release or the checksum change;
- the image layer (a copy of the Slurm layer + the plugin, the node programs and the units): about a minute, rebuilt
  when install-plugin.sh, validate.sh, assets/ or the project's dependencies change.

What the local cloud adds to the image and AWS does not (listed in docs/local-cloud.md): the systemctl stand-in and
the bind-source shim (machine parts, installed before the steps, as systemd is on an AMI; Debian's systemd package
too, which a Debian AMI has and the minimal root has not: its unit files and `systemd-analyze`, never started by the
local cloud), the job user, and links that make the venv import the project source mounted at
/opt/elastic-slurm/src, so code edits need no rebuild.
aws-tools.sh (AWS CLI installer, CloudWatch agent, efs-utils, Lustre client) is not run: it downloads from AWS.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster_config import slurm_release
from localcloud.layout import REPO_ROOT
from stacks.image_source import ASSETS_NOT_SHIPPED, PROJECT_SOURCE

SUITE = "trixie"  # Debian 13, the executed base OS
# What Debian's official AMI has that the first step needs (the component's python3 -m zipfile, curl)
BASE_PACKAGES = ["ca-certificates", "curl", "python3", "procps"]
STEPS = REPO_ROOT / "assets" / "image-build"
SLURM_STEPS = ("os-packages.sh", "build-munge.sh", "build-slurm.sh")
STEP_DATA = ("os-lib.sh", "os-table.env")  # what the steps source: the per-OS table (cluster_config/os_support.py)
PLUGIN_STEPS = ("install-plugin.sh", "validate.sh")
PROJECT_PACKAGES = tuple(name for name in PROJECT_SOURCE if (REPO_ROOT / name).is_dir())  # the importable packages
ASSETS_IN_ROOT = "/opt/elastic-slurm/assets"
SOURCE_IN_BUILD = "/tmp/elastic-slurm-source"
HOST_CA = "/tmp/elastic-slurm-build-ca.crt"  # in the root, during the build only (see _machine)
SOURCE_MIRROR_ENV = "ELASTIC_SLURM_SOURCE_MIRROR"  # a directory of source tarballs (air-gapped sites, tests)
DEFAULT_SOURCE_MIRROR = REPO_ROOT.parent / "shared" / "sources"  # beside the checkout, where CI puts shared/
LAYER_RECIPE = "1"  # bump when this module's way of building a layer changes


class ImageBuildError(RuntimeError):
    """A step of the image build failed (one line naming the step and its log)."""


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _tree_text(path: Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(relative path, sha256) of every file under `path` (less the top-level `skip` entries), sorted: a directory's
    content as a cache-key input."""
    return sorted(
        (str(f.relative_to(path)), hashlib.sha256(f.read_bytes()).hexdigest())
        for f in path.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.relative_to(path).parts[0] not in skip
    )


def slurm_layer_key() -> str:
    """Cache key of the Slurm layer: the base, its build steps and the per-OS table they read, the release and its
    checksum."""
    steps = [(name, (STEPS / name).read_text()) for name in (*SLURM_STEPS, *STEP_DATA)]
    return _digest(LAYER_RECIPE, SUITE, BASE_PACKAGES, steps, slurm_release.VERSION, slurm_release.SOURCE_SHA256)


def image_layer_key(extra: object) -> str:
    """Cache key of the image layer: the Slurm layer + the plugin steps, assets/, the project's dependencies and
    `extra` (the local cloud's own additions)."""
    steps = [(name, (STEPS / name).read_text()) for name in PLUGIN_STEPS]
    project = [(name, (REPO_ROOT / name).read_text()) for name in ("pyproject.toml", "requirements.txt")]
    assets = _tree_text(REPO_ROOT / "assets", skip=ASSETS_NOT_SHIPPED)
    return _digest(slurm_layer_key(), steps, assets, project, extra)


def source_mirror() -> Path | None:
    """The directory of source tarballs the operator names (`$ELASTIC_SLURM_SOURCE_MIRROR`), else `../shared/sources`
    beside the checkout when it exists (where CI and the test machines keep SchedMD's tarballs), else None."""
    named = os.environ.get(SOURCE_MIRROR_ENV)
    if named:
        return Path(named)
    return DEFAULT_SOURCE_MIRROR if DEFAULT_SOURCE_MIRROR.is_dir() else None


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_tarball(
    cache: Path,
    url: str = slurm_release.SOURCE_URL,
    sha256: str = slurm_release.SOURCE_SHA256,
    name: str | None = None,
    what: str = "Slurm source",
) -> Path:
    """The source tarball of `url` with checksum `sha256` (default: the pinned release), as a file `name` (default:
    the URL's last part) in `cache`/sources: the cached copy, else the source mirror's (source_mirror()), else
    downloaded. A copy with another checksum is not used; ImageBuildError (one line naming `what`, the file, its
    sha256 and where it looked) when no place has it."""
    name = name or url.rsplit("/", 1)[-1]
    target = cache / "sources" / name
    if target.is_file() and _sha256_of(target) == sha256:
        return target
    looked = [f"{target.parent}/"]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{name}.{os.getpid()}.part")
    mirror = source_mirror()
    if mirror is None:
        looked.append(f"no source mirror (${SOURCE_MIRROR_ENV} unset, no {DEFAULT_SOURCE_MIRROR})")
    else:
        looked.append(f"{mirror}/")
        candidate = mirror / name
        if candidate.is_file() and _sha256_of(candidate) == sha256:
            shutil.copyfile(candidate, partial)
            partial.rename(target)
            return target
    try:
        with urllib.request.urlopen(url, timeout=120) as answer, open(partial, "wb") as out:
            shutil.copyfileobj(answer, out)
        if _sha256_of(partial) == sha256:
            partial.rename(target)
            return target
        looked.append(f"{url} (its content has another sha256)")
    except OSError as exc:
        looked.append(f"{url} ({exc})")
    partial.unlink(missing_ok=True)
    raise ImageBuildError(f"no {what} {name} with sha256 {sha256}: looked in {'; '.join(looked)}")


@contextmanager
def _machine(root: Path) -> Iterator[None]:
    """/proc, /dev, name resolution and the test machine's CA bundle inside `root` while steps run; undone after.

    The CA bundle: this machine's network may intercept TLS with its own CA (the host's bundle trusts it, Debian's
    does not), so pip and curl in the steps are pointed at a copy of the host's bundle (HOST_CA, run_step's
    environment) — the image's own CA store is not changed."""
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    shutil.copy(host_ca_bundle(), root / HOST_CA.lstrip("/"))
    mounted: list[Path] = []
    try:
        for target, argv in (
            (root / "proc", ["mount", "-t", "proc", "proc"]),
            (root / "dev", ["mount", "--bind", "/dev"]),
        ):
            mounted.append(target)  # first: an interrupt between the mount and this must still unmount it
            subprocess.run([*argv, str(target)], check=True, capture_output=True)
        yield
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "--lazy", str(target)], capture_output=True)
        (root / "etc" / "resolv.conf").unlink(missing_ok=True)
        (root / HOST_CA.lstrip("/")).unlink(missing_ok=True)


def host_ca_bundle() -> str:
    """The CA bundle this machine's own pip/curl use."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    raise ImageBuildError("no CA bundle on this machine (/etc/ssl/certs/ca-certificates.crt)")


def run_step(root: Path, log: Path, script: str, *args: str) -> None:
    """Run one build step of the component inside `root`, as Image Builder's ExecuteBash does (bash, as root)."""
    started = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n==== {script} {' '.join(args)}\n".encode())
        out.flush()
        environment = [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=/root",
            "LANG=C.UTF-8",
            *(f"{name}={HOST_CA}" for name in ("PIP_CERT", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE")),
        ]
        result = subprocess.run(
            [
                "chroot",
                str(root),
                "/usr/bin/env",
                "-i",
                *environment,
                "bash",
                f"{ASSETS_IN_ROOT}/image-build/{script}",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.write(f"==== {script}: exit {result.returncode} after {time.monotonic() - started:.0f} s\n".encode())
    if result.returncode != 0:
        raise ImageBuildError(f"image step {script} failed (exit {result.returncode}); see {log}")


def add_systemd(root: Path) -> None:
    """Debian's systemd package, when the root has none: a Debian AMI has it, the image build's root (Debian's minimal
    `apt` variant) has not. Its units let `systemd-analyze verify` check ours against systemd itself
    (tests/e2e/test_units_verify.py) and it is the real systemd of the measurements in docs/local-cloud.md; the boot
    scripts still reach the systemctl stand-in, earlier in PATH (/usr/local/sbin). Needs the network (`_machine`)."""
    if (root / "usr/lib/systemd/systemd").exists():
        return
    env = ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive"]
    for argv in (
        ["apt-get", "-q", "update"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "systemd"],
        ["apt-get", "clean"],
    ):
        done = subprocess.run(["chroot", str(root), *env, *argv], capture_output=True, text=True)
        if done.returncode != 0:
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            raise ImageBuildError(f"installing systemd into the image root: {' '.join(argv)} failed: {tail}")


def _copy_assets(root: Path) -> None:
    """What the component's UnpackAssets step does: assets/ (minus the component YAML) to /opt/elastic-slurm/assets."""
    target = root / ASSETS_IN_ROOT.lstrip("/")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "assets", target, ignore=shutil.ignore_patterns(*ASSETS_NOT_SHIPPED, "__pycache__"))


def build_slurm_layer(final: Path, cache: Path, log: Path) -> None:
    """Debian 13 + os-packages.sh + build-munge.sh + build-slurm.sh, into `final` (atomic)."""
    tarball = source_tarball(cache)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    remove_tree(tmp)
    argv = ["mmdebstrap", "--variant=apt", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(tmp)]
    with open(log, "ab") as out:
        if subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            remove_tree(tmp)
            raise ImageBuildError(f"mmdebstrap {SUITE} failed; see {log}")
    try:
        _copy_assets(tmp)
        shutil.copy(tarball, tmp / "tmp" / tarball.name)
        with _machine(tmp):
            run_step(tmp, log, "os-packages.sh")
            run_step(tmp, log, "build-munge.sh")
            run_step(
                tmp, log, "build-slurm.sh", f"/tmp/{tarball.name}", slurm_release.SOURCE_SHA256, slurm_release.VERSION
            )
        (tmp / "tmp" / tarball.name).unlink()
    except BaseException:
        remove_tree(tmp)
        raise
    publish(tmp, final)


def build_image_layer(slurm_layer: Path, tmp: Path, log: Path, prepare: Callable[[Path], None]) -> None:
    """A copy of the Slurm layer + install-plugin.sh + validate.sh, into `tmp` (the caller publishes it, or removes
    it on failure). `prepare(root)` installs the local machine's parts first (the systemctl stand-in the steps call,
    systemd's own files), with the network the steps have."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(slurm_layer), str(tmp)], check=True)
    with _machine(tmp):
        prepare(tmp)
    _copy_assets(tmp)
    source = tmp / SOURCE_IN_BUILD.lstrip("/")
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for name in PROJECT_SOURCE:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source / name)
    with _machine(tmp):
        run_step(tmp, log, "install-plugin.sh", ASSETS_IN_ROOT, SOURCE_IN_BUILD)
        run_step(tmp, log, "validate.sh", slurm_release.VERSION)
    shutil.rmtree(source)


def link_mounted_source(root: Path, src_in_root: str) -> None:
    """Local cloud only: the venv imports the project from the source mounted at `src_in_root` (code edits need no
    rebuild); what pip installed is replaced by links to it, the console scripts pip wrote stay as they are."""
    for site in (root / "opt/elastic-slurm/venv/lib").glob("python3*/site-packages"):
        for package in PROJECT_PACKAGES:
            installed = site / package
            if installed.is_dir() and not installed.is_symlink():
                shutil.rmtree(installed)
            installed.unlink(missing_ok=True)
            installed.symlink_to(f"{src_in_root}/{package}")


def remove_tree(path: Path) -> None:
    """Remove a build's root directory without ever crossing into a file system mounted in it (`rm
    --one-file-system`): if a build is stopped while the host's /dev is bound into the root, /dev stays whole."""
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True)


def publish(tmp: Path, final: Path) -> None:
    """Rename the finished `tmp` to `final` (atomic), unless another builder sharing the cache directory won the race."""
    if final.exists():
        remove_tree(tmp)
    else:
        tmp.rename(final)
