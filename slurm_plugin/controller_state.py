"""Where the controllers keep their state: a file system of their own, apart from the users' files.

stacks/storage.py creates it (an EFS only the controllers' role may mount, behind a security group that admits the
controllers alone) and lists it in the controllers' mounts parameter only. It holds slurmctld's StateSaveLocation
(render/base.py; the REST API's JWT key among it) and, with two controllers, the plugin's state
(powersave/state.py). Apart from the users' files, their I/O (and the burst credits of a bursting EFS) never stalls
slurmctld's state saves, and root on a compute or login node cannot mount it. It is below /var/spool, which no site
mount may hide (cluster_config.safe_types.RESERVED_TREES). A cluster deployed before kept it on the users' first
shared file system; the primary's first boot moves it (assets/bootstrap/elastic-slurm-config-apply, `move_state`).
No imports: the plugin's programs read it at start.
"""

from __future__ import annotations

CONTROLLER_STATE_MOUNT = "/var/spool/slurm-state"


def controller_state_dir(cluster: str, what: str) -> str:
    """`what` (slurmctld, plugin) of `cluster` on the controllers' own file system."""
    return f"{CONTROLLER_STATE_MOUNT}/{cluster}/{what}"
