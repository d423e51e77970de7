"""Virtual time for the simulation: cooperative threads that only ever wait in `sleep`, run one at a time.

Each simulated process (slurmctld's loop, a resume worker, a resume-fail worker) is a real thread, but only the one
holding the run token executes. `sleep(s)` queues the caller at now + s and passes the token to the earliest
sleeper, advancing the clock to its wake time: a 4,500 s scale-out runs in seconds, and two workers interleave the way
two processes would (EC2 answers take virtual time; botocore's backoff and the plugin's pauses are virtual sleeps).
`patched_time` points `time.time`, `time.monotonic` and `time.sleep` at the clock in the modules that wait or keep time
(botocore's endpoint, the plugin's EC2 adapter, launcher, ...), so the real plugin and botocore code needs no change
and the rest of the process keeps real time.
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from unittest import mock


class SimulationOver(BaseException):
    """Raised in a simulated process still sleeping when the simulation ends (a BaseException: never swallowed by the
    plugin's `except Exception`)."""


class VirtualClock:
    """The clock and scheduler. The thread that creates it is the first simulated process."""

    def __init__(self, start: float) -> None:
        self.start = start
        self._now = start
        self._cond = threading.Condition()
        self._queue: list[tuple[float, int, int]] = []  # (wake time, order, process id)
        self._order = itertools.count()
        self._pids = itertools.count(1)
        self._local = threading.local()
        self._local.pid = 0
        self._running: int | None = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._parked: set[int] = set()
        self.errors: list[BaseException] = []

    def now(self) -> float:
        """Virtual epoch seconds."""
        return self._now

    def monotonic(self) -> float:
        """Virtual seconds since the clock started."""
        return self._now - self.start

    def in_process(self) -> bool:
        """Whether the calling thread is a simulated process."""
        return getattr(self._local, "pid", None) is not None

    def sleep(self, seconds: float) -> None:
        """Let virtual time pass for the caller; other processes run meanwhile."""
        me = self._local.pid
        with self._cond:
            heapq.heappush(self._queue, (self._now + max(0.0, seconds), next(self._order), me))
            self._pass_token()
            self._wait_turn(me)

    def pid(self) -> int:
        """The calling simulated process's id."""
        pid: int = self._local.pid
        return pid

    def park(self) -> None:
        """Wait, taking no virtual time, until another process calls `wake` with the caller's pid."""
        me = self._local.pid
        with self._cond:
            self._parked.add(me)
            self._pass_token()
            self._wait_turn(me)

    def wake(self, pid: int) -> None:
        """Let a parked process run again from now (after the caller's next sleep); nothing if it is not parked."""
        with self._cond:
            if pid in self._parked:
                self._parked.discard(pid)
                heapq.heappush(self._queue, (self._now, next(self._order), pid))

    def spawn(self, body: Callable[[], None], name: str) -> threading.Thread:
        """Start a simulated process that runs `body` from now on (after the caller's next sleep)."""
        pid = next(self._pids)
        with self._cond:
            heapq.heappush(self._queue, (self._now, next(self._order), pid))

        def run() -> None:
            self._local.pid = pid
            try:
                with self._cond:
                    self._wait_turn(pid)
                body()
            except SimulationOver:
                pass
            except BaseException as exc:  # reported to the driver, which stops the simulation
                self.errors.append(exc)
            finally:
                with self._cond:
                    if self._running == pid:
                        self._pass_token()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    def close(self) -> None:
        """End the simulation: every process still sleeping raises SimulationOver; wait for them to finish."""
        with self._cond:
            self._closed = True
            self._running = None
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)

    def _pass_token(self) -> None:
        """Give the run token to the earliest sleeper (called with the lock held)."""
        if self._queue:
            wake, _, pid = heapq.heappop(self._queue)
            self._now = max(self._now, wake)
            self._running = pid
        else:
            self._running = None
        self._cond.notify_all()

    def _wait_turn(self, pid: int) -> None:
        while self._running != pid:
            if self._closed:
                raise SimulationOver
            self._cond.wait()


# Modules whose `time` is the virtual clock's while a simulation runs: botocore's retry sleep, the plugin's pauses,
# timers and timestamps, and the simulation's own processes. Only these: the rest of the process keeps real time.
VIRTUAL_TIME_USERS = (
    "botocore.endpoint",
    "slurm_plugin.powersave.ec2",
    "slurm_plugin.powersave.launcher",
    "slurm_plugin.powersave.launch_calls",
    "slurm_plugin.powersave.binder",
    "slurm_plugin.powersave.unusable_pools",
    "slurm_plugin.telemetry.events",
    "bench.ec2_sim.wire",
    "bench.ec2_sim.whatif",
    "bench.ec2_sim.driver",
)


@contextmanager
def patched_time(clock: VirtualClock, modules: Sequence[str] = VIRTUAL_TIME_USERS) -> Iterator[None]:
    """In `modules`, `time.time`/`time.monotonic`/`time.sleep` follow the virtual clock (a thread that is not a
    simulated process still sleeps for real)."""
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if clock.in_process():
            clock.sleep(seconds)
        else:
            real_sleep(seconds)

    proxy = types.ModuleType("time", "the time module, on the simulation's virtual clock")
    proxy.__dict__.update({k: v for k, v in vars(time).items() if not k.startswith("__")})
    proxy.time = clock.now  # type: ignore[attr-defined]
    proxy.monotonic = clock.monotonic  # type: ignore[attr-defined]
    proxy.sleep = sleep  # type: ignore[attr-defined]
    with ExitStack() as stack:
        for name in modules:
            stack.enter_context(mock.patch.object(importlib.import_module(name), "time", proxy))
        yield
