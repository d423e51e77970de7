"""What a compute instance's user data reads on EC2, published by `local up` in the emulated AWS and shared storage.

The stacks give every launch template the compute user data of `stacks.user_data.boot_commands("compute", values)`
with `values` naming: the munge key secret (Secrets Manager), the mounts parameter (SSM: a JSON list of the shared
file systems) and the cluster; the controller's boot writes the `slurmd --conf-server` argument on the shared file
system. `publish` makes the same objects for a local cloud, and derives the controller's munge key from the secret
the way that user data does (`sha512sum` of the secret as `aws --output text` prints it), so instances that run the
user data get a key that matches the controller's.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.layout import Layout
from stacks.user_data import boot_commands


@dataclass(frozen=True)
class BootData:
    """The user-data values of the cluster's compute instances, and where their objects live."""

    values: dict[str, str]

    def compute_user_data(self) -> str:
        """The exact compute user data the stacks put in the launch templates, for these values."""
        return "#!/bin/bash\n" + "\n".join(boot_commands("compute", self.values)) + "\n"


def munge_key_from_secret(secret: str) -> bytes:
    """What `aws secretsmanager get-secret-value ... --output text | sha512sum | cut -d' ' -f1` writes."""
    return (hashlib.sha512((secret + "\n").encode()).hexdigest() + "\n").encode()


def publish(
    client: Any,
    layout: Layout,
    cluster: str,
    region: str,
    shared_mount: str,
    conf_server: str,
    munge_secret: str | None = None,
) -> BootData:
    """Create the munge secret and the mounts parameter in the emulated AWS (`client(service, region)`), write the
    controller's munge key and the conf-server file; returns the compute user-data values. With `munge_secret` (the
    secret of another cluster of the same federation, which shares its munged), reuse that secret, as the federation
    stacks do."""
    secret_name = munge_secret or f"elastic-slurm/{cluster}/munge-key"
    if munge_secret is None:
        secret = secrets.token_hex(32)
        client("secretsmanager", region).create_secret(Name=secret_name, SecretString=secret)
        layout.munge_key.write_bytes(munge_key_from_secret(secret))
    parameter = f"/elastic-slurm/{cluster}/mounts"
    mounts = [{"type": "none", "source": str(layout.shared), "mount_point": shared_mount, "options": "bind"}]
    client("ssm", region).put_parameter(Name=parameter, Value=json.dumps(mounts), Type="String", Overwrite=True)
    conf_dir = layout.shared / "slurm" / "conf-server"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / cluster).write_text(conf_server + "\n")
    return BootData(
        values={
            "ES_CLUSTER": cluster,
            "ES_REGION": region,
            "ES_MUNGE_SECRET": secret_name,
            "ES_MOUNTS_PARAMETER": parameter,
            "ES_LOG_GROUP": f"/elastic-slurm/{cluster}",
        }
    )


def write_user_data(path: Path, data: BootData) -> None:
    """The user data as a script file (mode 0700) for an instance to run."""
    path.write_text(data.compute_user_data())
    path.chmod(0o700)
