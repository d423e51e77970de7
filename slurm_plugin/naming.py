"""Names shared by the stacks, the nodes and the operator's CLI: stack names, tag keys, SSM parameter paths.

Pure functions only; nothing here touches CDK. It lives in slurm_plugin, which every image installs, so the
`elastic-slurm` CLI on a node (which has no `stacks` package) and on an operator's machine name things alike;
`stacks.naming` re-exports it for the stacks.
"""

from __future__ import annotations

from slurm_plugin.render.base import SRUN_PORT_RANGE
from slurm_plugin.tags import TAG_CLUSTER, TAG_LOGIN_POOL, TAG_POOL, TAG_ROLE, TAG_SUBMIT_HOST

__all__ = [
    "SRUN_PORT_RANGE",
    "TAG_CLUSTER",
    "TAG_LOGIN_POOL",
    "TAG_POOL",
    "TAG_ROLE",
    "TAG_SUBMIT_HOST",
]  # re-exported names too

PLACEHOLDER_ACCOUNT = "123456789012"

# Slurm daemon ports (SlurmctldPort, SlurmdPort, DbdPort); the srun port range is render_base.SRUN_PORT_RANGE,
# the same constant render writes into slurm.conf as SrunPortRange.
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819


def stack_name(cluster: str, part: str) -> str:
    """CloudFormation stack name of one part of a cluster: `es-{cluster}-{part}`."""
    return f"es-{cluster}-{part}"


def ami_parameter(cluster: str, flavor: str) -> str:
    """SSM parameter the Image Builder distribution writes the newest AMI id to, e.g. `/elastic-slurm/c/ami/x86_64`."""
    return f"/elastic-slurm/{cluster}/ami/{flavor}"


def image_flavor(architecture: str, gpu: bool) -> str:
    """`x86_64`, `arm64`, `x86_64-gpu`: one image recipe per flavor a cluster needs."""
    return f"{architecture}-gpu" if gpu else architecture


CONF_SERVER_PENDING = "pending"  # the conf-server parameter's value until a controller has written it

# The root volume's device name in each base OS's AMIs: Image Builder and the launch templates size the volume of that
# name (a mapping under another name would add a blank volume and leave the root at the AMI's size).
ROOT_DEVICE = {"debian13": "/dev/xvda", "al2023": "/dev/xvda"}


def root_device(base_os: str) -> str:
    """Root device name of the base OS's AMIs (`/dev/sda1` for Ubuntu, RHEL and Rocky)."""
    return ROOT_DEVICE.get(base_os, "/dev/sda1")


def config_url_parameter(cluster: str) -> str:
    """SSM parameter holding the S3 URL of the cluster's config object: the controllers read the config through it at
    boot and whenever it changes (assets/bootstrap/elastic-slurm-config-apply), so an edit never touches their
    launch template."""
    return f"/elastic-slurm/{cluster}/config-url"


def conf_server_parameter(cluster: str) -> str:
    """SSM parameter (home region) holding the `slurmd --conf-server` argument: the controllers' addresses, written by
    their config apply; every compute node, in any region, reads it before starting slurmd configless."""
    return f"/elastic-slurm/{cluster}/conf-server"


def deployed_infra_parameter(cluster: str) -> str:
    """SSM parameter holding the cluster's `DeployedInfra` JSON (read by the controller bootstrap before render)."""
    return f"/elastic-slurm/{cluster}/deployed-infra"


def launch_template_key(partition: str, pool: str, region: str) -> str:
    """Key of a launch template in `DeployedInfra.launch_templates`."""
    return f"{partition}-{pool}@{region}"


def munge_secret_name(cluster: str) -> str:
    """Name of the cluster's munge key secret (home region)."""
    return f"elastic-slurm/{cluster}/munge-key"


def log_group_name(cluster: str) -> str:
    """The cluster's CloudWatch Logs group (home region)."""
    return f"/elastic-slurm/{cluster}"


def directory_parameter(cluster: str) -> str:
    """SSM parameter (home region) holding the config's `directory` section as JSON: every node reads it at boot
    (assets/bootstrap/elastic-slurm-directory) when the cluster has one."""
    return f"/elastic-slurm/{cluster}/directory"


def mounts_parameter(cluster: str) -> str:
    """SSM parameter listing the shared file systems (home region)."""
    return f"/elastic-slurm/{cluster}/mounts"


def controller_mounts_parameter(cluster: str) -> str:
    """SSM parameter (home region) listing what the controllers mount: the shared file systems and the controllers'
    own (slurm_plugin/controller_state.py)."""
    return f"/elastic-slurm/{cluster}/mounts-controller"


def remote_mounts_parameter(cluster: str) -> str:
    """SSM parameter (home region) listing what compute nodes in remote regions mount: the home EFS by the IP of one of
    its mount targets (over the VPC peering; its DNS name resolves only in the home VPC), no FSx."""
    return f"/elastic-slurm/{cluster}/mounts-remote"


def home_boot_env(
    cluster: str, home_region: str, munge_owner: str | None = None, remote: bool = False
) -> dict[str, str]:
    """Boot environment of a node, by names (usable from any region; AWS calls go to the home region). A federation
    member reads the munge key of `munge_owner` (the federation's host cluster); a `remote` region's node mounts what
    `remote_mounts_parameter` lists."""
    return {
        "ES_CLUSTER": cluster,
        "ES_REGION": home_region,
        "ES_MUNGE_SECRET": munge_secret_name(munge_owner or cluster),
        "ES_MOUNTS_PARAMETER": remote_mounts_parameter(cluster) if remote else mounts_parameter(cluster),
        "ES_LOG_GROUP": log_group_name(cluster),
        "ES_CONF_SERVER_PARAMETER": conf_server_parameter(cluster),
    }


def fleet_parameter(cluster: str) -> str:
    """SSM parameter (home region) with the operator's fleet wish, RUNNING or STOPPED: written by `elastic-slurm fleet
    stop|start`, read by the cluster manager every cycle; absent means RUNNING. Not a stack resource, so no deploy
    resets it."""
    return f"/elastic-slurm/{cluster}/fleet"
