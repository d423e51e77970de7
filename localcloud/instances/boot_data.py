"""What every instance's user data reads on EC2, published by `local up` in the emulated AWS.

The stacks give every launch template the user data of `stacks.user_data.boot_commands(role, values)` with `values`
naming: the munge key secret (Secrets Manager), the mounts parameter (SSM: a JSON list of the shared file systems;
the controllers' lists their own file system too),
the cluster, and the conf-server parameter, where the controller's config apply writes the `slurmd --conf-server`
argument. `publish` makes the same objects for a local cloud; each machine's user data derives its munge key from the
secret itself.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT
from stacks.naming import CONF_SERVER_PENDING, conf_server_parameter, controller_mounts_parameter, mounts_parameter
from stacks.user_data import boot_commands


@dataclass(frozen=True)
class BootData:
    """The user-data values of the cluster's compute (and login) instances, and where their objects live."""

    values: dict[str, str]
    role: str = "compute"  # or `login`: a login pool's launch template

    def user_data(self) -> str:
        """The exact user data the stacks put in the launch templates of this role, for these values."""
        return "#!/bin/bash\n" + "\n".join(boot_commands(self.role, self.values)) + "\n"


def publish(
    client: Any,
    cluster: str,
    region: str,
    shared_source: Path,
    shared_mount: str,
    controller_state_source: Path,
    munge_secret: str | None = None,
) -> BootData:
    """Create the munge secret, the mounts parameter and the conf-server parameter (its value pending until the
    controller's config apply writes it, as the cluster stack creates it) in the emulated AWS; returns the
    user-data values naming them (the compute values; the controller's add its own, see controller_boot). With
    `munge_secret` (the secret of another cluster of the same federation), reuse that secret, as the federation
    stacks do. The shared file system is the host directory `shared_source`, bind-mounted at `shared_mount`; the
    controllers' mounts parameter adds their own file system, the host directory `controller_state_source`."""
    secret_name = munge_secret or f"elastic-slurm/{cluster}/munge-key"
    if munge_secret is None:
        client("secretsmanager", region).create_secret(Name=secret_name, SecretString=secrets.token_hex(32))
    parameter = mounts_parameter(cluster)
    mounts = [{"type": "none", "source": str(shared_source), "mount_point": shared_mount, "options": "bind"}]
    client("ssm", region).put_parameter(Name=parameter, Value=json.dumps(mounts), Type="String", Overwrite=True)
    own = {
        "type": "none",
        "source": str(controller_state_source),
        "mount_point": CONTROLLER_STATE_MOUNT,
        "options": "bind",
    }
    client("ssm", region).put_parameter(
        Name=controller_mounts_parameter(cluster), Value=json.dumps([*mounts, own]), Type="String", Overwrite=True
    )
    client("ssm", region).put_parameter(
        Name=conf_server_parameter(cluster), Value=CONF_SERVER_PENDING, Type="String", Overwrite=True
    )
    return BootData(
        values={
            "ES_CLUSTER": cluster,
            "ES_REGION": region,
            "ES_MUNGE_SECRET": secret_name,
            "ES_MOUNTS_PARAMETER": parameter,
            "ES_LOG_GROUP": f"/elastic-slurm/{cluster}",
            "ES_CONF_SERVER_PARAMETER": conf_server_parameter(cluster),
        }
    )


def write_user_data(path: Path, data: BootData) -> None:
    """The user data as a script file (mode 0700) for an instance to run."""
    path.write_text(data.user_data())
    path.chmod(0o700)
