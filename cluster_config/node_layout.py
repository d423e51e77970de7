"""A pool's own node layout — `Boards`, `SocketsPerBoard`, `Sockets`, `CoresPerSocket`, `ThreadsPerCore` in its
`slurm_settings` — read as Slurm 26.05.3 reads a NodeName line (src/common/read_config.c), and checked against the
pool's CPUs.

EC2 publishes no socket count, so the product's own layout is one socket of all cores (slurm_plugin/render/nodes.py);
a site with two-socket types (e.g. c6i.32xlarge, hpc7a.96xlarge, p5.48xlarge) gives the layout itself. Slurm does not
refuse a layout that misses the CPUs it is given: it logs "CPUs=N match no Sockets, Sockets*CoresPerSocket or
Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs." and resets CPUs to the layout's product — every node of the
pool then offers fewer (or more) CPUs than it has — or, where CPUs equal Sockets x CoresPerSocket, drains every node
at registration ("Low socket*core*thread count", src/slurmctld/node_mgr.c). So a layout must make exactly the pool's
CPUs (Sockets x CoresPerSocket x ThreadsPerCore: the product counts threads as CPUs, physical cores on
`disable_hyperthreading` pools), with Slurm's own defaults and inference: Boards, CoresPerSocket and ThreadsPerCore default to 1; without
Sockets, Boards x SocketsPerBoard, else CPUs / (CoresPerSocket x ThreadsPerCore) when that divides, else Boards.
Sockets together with SocketsPerBoard is refused (Slurm ignores Sockets then), as are values other than integers from
1 to 9999 (Slurm reads them as 16-bit integers; a space would start another key).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from cluster_config.slurm_settings import NODE_TOPOLOGY_KEYS, SettingValue, render_value

_COUNT = re.compile(r"^[1-9][0-9]{0,3}$")  # up to 9999: Slurm reads them as 16-bit integers


@dataclass(frozen=True)
class Layout:
    """A site's layout keys, each None when not set."""

    boards: int | None = None
    sockets_per_board: int | None = None
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None

    def total_sockets(self, cpus: int) -> int:
        """Sockets as slurmctld infers them for a node of `cpus` CPUs."""
        boards = self.boards or 1
        if self.sockets is not None:
            return self.sockets
        if self.sockets_per_board is not None:
            return boards * self.sockets_per_board
        per_socket = (self.cores_per_socket or 1) * (self.threads_per_core or 1)
        return cpus // per_socket if cpus >= per_socket and cpus % per_socket == 0 else boards

    def cpus(self, cpus: int) -> int:
        """CPUs the layout makes (Sockets x CoresPerSocket x ThreadsPerCore) for a node given `cpus`."""
        return self.total_sockets(cpus) * (self.cores_per_socket or 1) * (self.threads_per_core or 1)


def site_layout(settings: Mapping[str, SettingValue]) -> dict[str, str]:
    """The layout keys a pool's slurm_settings set (Slurm's spelling → the value as written); empty: none."""
    lowered = {key.lower(): value for key, value in settings.items()}
    return {key: render_value(lowered[key.lower()]) for key in NODE_TOPOLOGY_KEYS if key.lower() in lowered}


def layout_problems(settings: Mapping[str, SettingValue], cpus: int | None = None) -> Iterator[str]:
    """What is wrong with a pool's own layout (nothing when it sets none); with the pool's CPUs (from an instance
    cache) also whether the layout makes them."""
    given = site_layout(settings)
    if not given:
        return
    bad = [f"{key}={value}" for key, value in given.items() if not _COUNT.match(value)]
    if bad:
        yield f"{', '.join(bad)}: a node layout count is an integer from 1 to 9999"
        return
    layout = Layout(*(int(given[key]) if key in given else None for key in NODE_TOPOLOGY_KEYS))
    if layout.sockets is not None and layout.sockets_per_board is not None:
        yield "set Sockets or SocketsPerBoard, not both: Slurm ignores Sockets when SocketsPerBoard is set"
        return
    if layout.boards is not None and layout.total_sockets(cpus or 0) < layout.boards:
        yield f"Boards={layout.boards} exceeds the sockets: Slurm would reset Boards to 1"
        return
    if cpus is not None and layout.cpus(cpus) != cpus:
        sockets = layout.total_sockets(cpus)
        yield (
            f"{' '.join(f'{k}={v}' for k, v in given.items())} makes {layout.cpus(cpus)} CPUs (Sockets {sockets} x "
            f"CoresPerSocket {layout.cores_per_socket or 1} x ThreadsPerCore {layout.threads_per_core or 1}), the "
            f"pool's nodes have {cpus}: Slurm would reset their CPUs or drain them"
        )
