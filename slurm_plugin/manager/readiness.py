"""Tell systemd the cluster manager is ready (sd_notify's `READY=1`), after its first cycle.

slurm-clustermgr.service is `Type=notify`: `systemctl start` (and the controller's boot, which starts it) returns once
the manager has run one cycle, and fails when the process ends before that — a manager that cannot start fails the
boot at once instead of after a fixed wait. The protocol (sd_notify(3)): one datagram of `KEY=VALUE` lines to the
AF_UNIX socket named by $NOTIFY_SOCKET, a leading `@` meaning the abstract namespace. Without $NOTIFY_SOCKET (run by
hand, `--once`) nothing is sent.
"""

from __future__ import annotations

import logging
import os
import socket

LOG = logging.getLogger(__name__)


def notify_ready(environ: dict[str, str] | None = None) -> bool:
    """Send READY=1 to $NOTIFY_SOCKET; True if sent (False: no socket named, or it refused)."""
    path = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(b"READY=1\n")
    except OSError as exc:
        LOG.warning("could not tell systemd the manager is ready (%s): %s", path, exc)
        return False
    return True
