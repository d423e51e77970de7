"""What each base OS (`images.base_os`) gives the image build: one table, read by the validator and the build steps.

The validator (`cluster_config/os_checks.py`) refuses what a base OS cannot build (a GPU pool without an NVIDIA CUDA
repository for its architecture, FSx for Lustre without an AWS Lustre client); the build steps of
`assets/image-build/` and the GPU component read the same rows from `assets/image-build/os-table.env`, generated from
this table (`python -m cluster_config.os_support > assets/image-build/os-table.env`; a unit test keeps the committed
file equal to `render_env()`), and the images stack builds the SSM agent's user data from it. Pure data and small
functions: no CDK, no I/O but `main`.

Sources of the facts (one per column):
- Python: Debian 13 ships 3.13, Ubuntu 24.04 3.12, Ubuntu 22.04 3.10 with `python3.11`/`python3.11-venv` in
  universe (jammy-updates); Amazon Linux 2023 and RHEL/Rocky 9 ship 3.9 with a `python3.11` package.
- SSM agent: "For Linux instances, if the base image does not already include the Systems Manager agent, Image Builder
  installs it", on the OSes Image Builder supports (https://docs.aws.amazon.com/imagebuilder/latest/APIReference/
  API_AdditionalInstanceConfiguration.html; supported OSes: https://docs.aws.amazon.com/imagebuilder/latest/userguide/
  what-is-image-builder.html, which name neither Debian nor Rocky Linux). Amazon Linux 2023 and Canonical's Ubuntu
  AMIs ship the agent. Debian and Rocky get it from the region's own agent bucket, the URLs of
  https://docs.aws.amazon.com/systems-manager/latest/userguide/verify-agent-signature.html.
- CUDA: NVIDIA's repository codenames per distribution and architecture (x86_64; arm64 = SBSA), from the supported
  distributions table of https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/introduction.html. For
  arm64 only the distributions we could confirm there are listed (Ubuntu, RHEL/Rocky 9): others are refused.
- EFA: the EFA installer supports every base OS here, Debian 13 since installer 1.46.0
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-changelog.html).
- PMIx (Slurm's mpi/pmix plugin): Debian's and Ubuntu's `libpmix-dev` (Debian 13: PMIx 5.0.7, Ubuntu universe),
  Rocky/RHEL 9's `pmix-devel` (CRB); AL2023 has no PMIx package we could confirm, so its images build no mpi/pmix.
- FSx for Lustre clients: https://docs.aws.amazon.com/fsx/latest/LustreGuide/install-lustre-client.html (Amazon Linux
  2023, RHEL/Rocky 9, Ubuntu 22.04/24.04; none for Debian).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Arch = Literal["x86_64", "arm64"]
ARCHES: tuple[Arch, ...] = ("x86_64", "arm64")
MIN_PYTHON = (3, 11)  # tomllib and the plugin's typing (install-plugin.sh)
SsmAgent = Literal["preinstalled", "image-builder", "user-data"]

# The packages every apt-based image installs (Slurm's build dependencies, munge, the boot scripts' tools); see
# os-packages.sh for what each is for.
_DEB_COMMON = [
    "build-essential",
    "pkg-config",
    "bzip2",
    "perl",
    "python3",
    "munge",
    "libmunge-dev",
    "libpam0g-dev",
    "libreadline-dev",
    "libmariadb-dev",
    "libjson-c-dev",
    "libhttp-parser-dev",
    "libyaml-dev",
    "libjwt-dev",
    "liblua5.3-dev",
    "libhwloc-dev",
    "libnuma-dev",
    "libdbus-1-dev",
    "liblz4-dev",
    "libcurl4-openssl-dev",
    "libpmix-dev",  # Slurm's mpi/pmix plugin (`srun --mpi=pmix`); Ubuntu has it in universe
    "nfs-common",
    "jq",
    "curl",
    "ca-certificates",
    "mount",
    "procps",
    "util-linux",
    "iptables",
    "sssd-ldap",
    "libnss-sss",
    "libpam-sss",
]
_RPM_COMMON = [
    "gcc",
    "make",
    "bzip2",
    "tar",
    "perl",
    "pkgconf-pkg-config",
    "pam-devel",
    "readline-devel",
    "mariadb-connector-c-devel",
    "json-c-devel",
    "libyaml-devel",
    "lua-devel",
    "hwloc-devel",
    "numactl-devel",
    "dbus-devel",
    "lz4-devel",
    "libcurl-devel",
    "nfs-utils",
    "jq",
    "curl",
    "iptables-nft",
    "sssd-ldap",
]
_EL9_EXTRA = ["munge", "munge-devel", "http-parser-devel", "libjwt-devel", "pmix-devel"]  # from CRB and EPEL
_AL2023_EXTRA = ["openssl-devel", "zlib-devel", "bzip2-devel", "authselect"]  # munge is built from source there


@dataclass(frozen=True)
class Python:
    """The interpreter the plugin's venv is made with: its command, its version and the packages that bring it."""

    command: str
    version: tuple[int, int]
    packages: tuple[str, ...]


@dataclass(frozen=True)
class OsSupport:
    """One base OS: what the image build steps install and what AWS and NVIDIA publish for it."""

    base_os: str
    os_release: str  # "${ID}${VERSION_ID%%.*}" of /etc/os-release, as the build steps compute it
    package_manager: Literal["apt", "dnf"]
    packages: tuple[str, ...]  # os-packages.sh, besides the Python packages
    extra_repos: Literal["none", "crb-epel", "rhui-crb-epel"]
    python: Python
    munge: Literal["package", "source"]  # build-munge.sh builds it where the OS packages none
    cloudwatch_agent: Literal["package", "rpm-url", "deb-url"]
    efs_utils: Literal["package", "source"]
    lustre_client: Literal["none", "amzn", "el9", "ubuntu"]
    ssm_agent: SsmAgent
    cuda_repo: Mapping[str, str] = field(default_factory=dict)  # arch -> NVIDIA repository path; absent: none
    cuda_toolkit: str = "cuda-toolkit-12-6"  # the CUDA toolkit package of the GPU images (NVIDIA's repository)
    nvidia_driver: Literal["apt-package", "dnf-module", "dnf-package"] = "apt-package"
    efa: bool = True
    # Slurm's mpi/pmix plugin: built against the OS's PMIx development package (build-slurm.sh --with-pmix, which
    # fails when none is found), or not at all where the OS packages none we could confirm
    pmix: Literal["package", "none"] = "package"


def _deb(python: Python, *extra: str) -> tuple[str, ...]:
    return (*_DEB_COMMON, *python.packages, *extra)


_PY313 = Python("python3", (3, 13), ("python3-venv",))
_PY312 = Python("python3", (3, 12), ("python3-venv",))
_PY311_UBUNTU = Python("python3.11", (3, 11), ("python3.11", "python3.11-venv"))
_PY311_RPM = Python("python3.11", (3, 11), ("python3.11", "python3.11-pip"))

OS_SUPPORT: dict[str, OsSupport] = {
    entry.base_os: entry
    for entry in (
        OsSupport(
            base_os="debian13",
            os_release="debian13",
            package_manager="apt",
            packages=_deb(_PY313, "awscli"),  # Debian 13 packages AWS CLI v2
            extra_repos="none",
            python=_PY313,
            munge="package",
            cloudwatch_agent="deb-url",
            efs_utils="source",
            lustre_client="none",
            ssm_agent="user-data",
            cuda_repo={"x86_64": "debian13/x86_64"},
            cuda_toolkit="cuda-toolkit-13-0",  # NVIDIA's debian13 repository starts with CUDA 13
        ),
        OsSupport(
            base_os="ubuntu2204",
            os_release="ubuntu22",
            package_manager="apt",
            packages=_deb(_PY311_UBUNTU),
            extra_repos="none",
            python=_PY311_UBUNTU,
            munge="package",
            cloudwatch_agent="deb-url",
            efs_utils="source",
            lustre_client="ubuntu",
            ssm_agent="preinstalled",
            cuda_repo={"x86_64": "ubuntu2204/x86_64", "arm64": "ubuntu2204/sbsa"},
        ),
        OsSupport(
            base_os="ubuntu2404",
            os_release="ubuntu24",
            package_manager="apt",
            packages=_deb(_PY312),
            extra_repos="none",
            python=_PY312,
            munge="package",
            cloudwatch_agent="deb-url",
            efs_utils="source",
            lustre_client="ubuntu",
            ssm_agent="preinstalled",
            cuda_repo={"x86_64": "ubuntu2404/x86_64", "arm64": "ubuntu2404/sbsa"},
        ),
        OsSupport(
            base_os="al2023",
            os_release="amzn2023",
            package_manager="dnf",
            packages=(*_RPM_COMMON, *_PY311_RPM.packages, *_AL2023_EXTRA),
            extra_repos="none",
            python=_PY311_RPM,
            munge="source",
            cloudwatch_agent="package",
            efs_utils="package",
            lustre_client="amzn",
            ssm_agent="preinstalled",
            cuda_repo={"x86_64": "amzn2023/x86_64"},
            nvidia_driver="dnf-package",
            pmix="none",  # no PMIx package in AL2023's repositories that we could confirm: no mpi/pmix there
        ),
        OsSupport(
            base_os="rhel9",
            os_release="rhel9",
            package_manager="dnf",
            packages=(*_RPM_COMMON, *_PY311_RPM.packages, *_EL9_EXTRA),
            extra_repos="rhui-crb-epel",
            python=_PY311_RPM,
            munge="package",
            cloudwatch_agent="rpm-url",
            efs_utils="source",
            lustre_client="el9",
            ssm_agent="image-builder",
            cuda_repo={"x86_64": "rhel9/x86_64", "arm64": "rhel9/sbsa"},
            nvidia_driver="dnf-module",
        ),
        OsSupport(
            base_os="rocky9",
            os_release="rocky9",
            package_manager="dnf",
            packages=(*_RPM_COMMON, *_PY311_RPM.packages, *_EL9_EXTRA),
            extra_repos="crb-epel",
            python=_PY311_RPM,
            munge="package",
            cloudwatch_agent="rpm-url",
            efs_utils="source",
            lustre_client="el9",
            ssm_agent="user-data",
            cuda_repo={"x86_64": "rhel9/x86_64", "arm64": "rhel9/sbsa"},  # NVIDIA's rhel9 covers Rocky Linux 9
            nvidia_driver="dnf-module",
        ),
    )
}

CUDA_REPOS = "https://developer.download.nvidia.com/compute/cuda/repos"


def cuda_repo(base_os: str, arch: str, table: Mapping[str, OsSupport] = OS_SUPPORT) -> str | None:
    """NVIDIA's CUDA repository path (e.g. `ubuntu2204/sbsa`) of a base OS on an architecture; None: NVIDIA has none."""
    return table[base_os].cuda_repo.get(arch)


def ssm_agent_url(base_os: str, arch: str, region: str, table: Mapping[str, OsSupport] = OS_SUPPORT) -> str:
    """The SSM agent package AWS publishes for a base OS in the region's own bucket
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/verify-agent-signature.html)."""
    entry = table[base_os]
    flavor = {"x86_64": "amd64", "arm64": "arm64"}[arch]
    kind, suffix = ("debian", "deb") if entry.package_manager == "apt" else ("linux", "rpm")
    return f"https://s3.{region}.amazonaws.com/amazon-ssm-{region}/latest/{kind}_{flavor}/amazon-ssm-agent.{suffix}"


def env_rows(entry: OsSupport) -> dict[str, str]:
    """One base OS as the build steps read it (`os_value KEY` in assets/image-build/os-lib.sh)."""
    return {
        "package_manager": entry.package_manager,
        "packages": " ".join(entry.packages),
        "extra_repos": entry.extra_repos,
        "python": entry.python.command,
        "python_version": ".".join(map(str, entry.python.version)),
        "munge": entry.munge,
        "cloudwatch_agent": entry.cloudwatch_agent,
        "efs_utils": entry.efs_utils,
        "lustre_client": entry.lustre_client,
        "ssm_agent": entry.ssm_agent,
        **{f"cuda_repo_{arch}": entry.cuda_repo.get(arch, "") for arch in ARCHES},
        "cuda_toolkit": entry.cuda_toolkit,
        "nvidia_driver": entry.nvidia_driver,
        "efa": "yes" if entry.efa else "no",
        "pmix": entry.pmix,
    }


def render_env(table: Mapping[str, OsSupport] = OS_SUPPORT) -> str:
    """assets/image-build/os-table.env: `base_os_<os-release>=<base_os>` and `<base_os>_<key>='<value>'` lines."""
    lines = [
        "# Generated by `python -m cluster_config.os_support` from cluster_config/os_support.py: edit that table, not",
        "# this file (tests/unit/test_os_support.py keeps the two equal). Sourced by assets/image-build/os-lib.sh.",
    ]
    for entry in table.values():
        lines.append(f"base_os_{entry.os_release}={entry.base_os}")
        lines += [f"{entry.base_os}_{key}='{value}'" for key, value in env_rows(entry).items()]
    return "\n".join(lines) + "\n"


def parse_env(text: str) -> dict[str, dict[str, str]]:
    """The rows of an os-table.env, per base OS (the inverse of render_env, for the contract tests)."""
    flat: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            flat[name] = value.strip("'")
    bases = {value for name, value in flat.items() if name.startswith("base_os_")}
    return {
        base: {name[len(base) + 1 :]: value for name, value in flat.items() if name.startswith(f"{base}_")}
        for base in sorted(bases)
    }


def main() -> None:
    """Print the generated os-table.env."""
    sys.stdout.write(render_env())


if __name__ == "__main__":
    main()
