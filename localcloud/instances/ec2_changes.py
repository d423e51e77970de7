"""The instance runner's wait for EC2 changes: the emulated AWS's change feed (`GET /_localcloud/ec2-changes`,
localcloud/aws/fault_middleware.py) answers as soon as an EC2 call that may change an instance (anything but
Describe/Get/List) has been served, or when the wait is over.

The runner used to list every instance four times a second whether or not anything had happened; on a session-long
local cloud that polling was most of the emulated AWS's CPU. Now it lists them once per change, and at least every
IDLE_SECONDS anyway (a boot whose delay ends sooner shortens the wait: Runner.next_wake), and never twice within
MIN_GAP_SECONDS (a launch storm ends every wait: the looks stay spaced, as they were when polling).

A SIGTERM during the wait ends it at once (`interrupt`), so stopping the runner is not delayed by a pending wait.
"""

from __future__ import annotations

import json
import time
import urllib.request

from localcloud.aws.fault_middleware import CHANGES_PATH

IDLE_SECONDS = 5.0  # the longest the runner waits before it lists the instances anyway
RETRY_SECONDS = 0.25  # after the feed or a look failed (the emulated AWS restarting, a fault): wait, then look again
MIN_GAP_SECONDS = 0.1  # between two looks


class Interrupted(Exception):
    """Raised from the signal handler while a wait is pending."""


class ChangeFeed:
    """Waits on one emulated AWS's change feed."""

    def __init__(self, endpoint_url: str) -> None:
        self.url = endpoint_url.rstrip("/") + CHANGES_PATH
        self.waiting = False
        self.stopping = False

    def wait(self, after: int, seconds: float) -> int | None:
        """EC2's change generation once it differs from `after`, or when `seconds` are over; None when the feed did
        not answer (the caller then simply looks again). Raises Interrupted once `interrupt` was called."""
        self.waiting = True
        try:
            if self.stopping:  # a stop that came just before the wait began
                raise Interrupted
            with urllib.request.urlopen(f"{self.url}?after={after}&wait={seconds:.3f}", timeout=seconds + 10) as reply:
                return int(json.loads(reply.read())["generation"])
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(min(seconds, RETRY_SECONDS))
            return None
        finally:
            self.waiting = False

    def interrupt(self) -> None:
        """From a signal handler: no wait lasts from now on; a pending one ends at once (Interrupted is raised in the
        waiting main thread)."""
        self.stopping = True
        if self.waiting:
            raise Interrupted
