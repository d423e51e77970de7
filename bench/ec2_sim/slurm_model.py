"""slurmctld's power-save cycle as the simulation needs it, and the plugin's Slurm adapter (`scontrol`) on top of it.

Workload: N single-node jobs submitted at once, one per powered-down node (ResumeRate=0: one ResumeProgram call with
all N nodes). Per node:
- ResumeProgram makes it POWERING_UP with a deadline of now + ResumeTimeout;
- the plugin binds it (`set_addresses`: NodeAddr = the instance's address); its slurmd registers when the instance's
  boot time has passed; the node is *running* (up) then, if it is still powering up with that instance;
- not up by the deadline: slurmctld calls ResumeFailProgram for it (the real `terminate_nodes`, cause resume-fail),
  requeues its job and powers it down;
- powered down by the plugin (a failed launch) or after a resume failure: its job is eligible again after the requeue
  delay (Slurm: cred expiration + 1 = 121 s by default) and the node is idle~ after SuspendTimeout; then it is resumed
  again, together with every other node that became idle~ in the same second (one ResumeProgram call);
- DOWN with ResumeAfter (a pool with no capacity anywhere): resumed again when ResumeAfter expires.
Not modelled: SuspendTime (no node idles: each has its job), the cluster manager's orphan clean-up.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.ec2_sim.ec2_model import Ec2Model
from slurm_plugin.powersave.slurm import SlurmNode

IDLE, POWERING_UP, UP, POWERING_DOWN, DOWN = "idle~", "powering_up", "up", "powering_down", "down"
SHOWN = {
    IDLE: "IDLE+CLOUD+POWERED_DOWN",
    POWERING_UP: "ALLOCATED+CLOUD+POWERING_UP",
    UP: "ALLOCATED+CLOUD",
    POWERING_DOWN: "IDLE+CLOUD+POWERING_DOWN",
    DOWN: "DOWN+CLOUD+POWERED_DOWN",
}


@dataclass(frozen=True)
class SlurmTimers:
    """The Slurm settings the cycle depends on (elastic-slurm's defaults: cluster_config/model.py)."""

    resume_timeout: float = 600
    suspend_timeout: float = 120
    requeue_delay: float = 121  # slurmctld: begin_time = now + requeue_delay (cred_expire = 120 s) + 1


@dataclass
class Node:
    """One node as slurmctld sees it."""

    name: str
    state: str = IDLE
    addr: str = ""
    instance_id: str = ""
    deadline: float = math.inf
    generation: int = 0  # bumped at each resume: events of an earlier resume no longer apply
    up_at: float | None = None
    resumes: int = 0


@dataclass
class Cycle:
    """What the cycle did (for the report)."""

    resume_calls: int = 0
    resume_fail_calls: int = 0
    resume_timeouts: int = 0
    powered_down_by_plugin: Counter[str] = field(default_factory=Counter)  # reason code -> nodes
    set_down: int = 0


class SlurmModel:
    """The nodes, their pending events, and the `Slurm` adapter methods the plugin calls."""

    def __init__(self, names: Sequence[str], model: Ec2Model, clock: Callable[[], float], timers: SlurmTimers) -> None:
        self.nodes = {name: Node(name, addr=name) for name in names}
        self.model = model
        self.clock = clock
        self.timers = timers
        self.cycle = Cycle()
        self._events: list[tuple[float, int, str, str, int, str]] = []  # (time, order, kind, node, generation, id)
        self._order = itertools.count()
        self.to_resume: list[str] = []
        self.to_fail: list[str] = []

    # ------------------------------------------------------------------ events
    def _push(self, at: float, kind: str, node: Node, instance_id: str = "") -> None:
        heapq.heappush(self._events, (at, next(self._order), kind, node.name, node.generation, instance_id))

    def next_event(self) -> float:
        """When the earliest pending event is due (inf: none)."""
        return self._events[0][0] if self._events else math.inf

    def submit(self) -> None:
        """The N jobs arrive: every node is wanted now."""
        self.to_resume.extend(self.nodes)

    def process_due(self) -> None:
        """Apply every event due by now; what to resume or fail is collected in to_resume / to_fail."""
        now = self.clock()
        while self._events and self._events[0][0] <= now:
            at, _, kind, name, generation, instance_id = heapq.heappop(self._events)
            node = self.nodes[name]
            if kind == "register":
                self._register(node, at, instance_id)
            elif generation != node.generation:
                continue
            elif kind == "deadline" and node.state == POWERING_UP:
                self.cycle.resume_timeouts += 1
                self.to_fail.append(name)
                node.state = POWERING_DOWN
                self._push(at + self._back_after(), "idle", node)
            elif kind == "idle" and node.state in (POWERING_DOWN, DOWN):
                node.state = IDLE
                self.to_resume.append(name)

    def _back_after(self) -> float:
        return max(self.timers.suspend_timeout, self.timers.requeue_delay)

    def _register(self, node: Node, at: float, iid: str) -> None:
        """The instance's slurmd registers: the node is up if it is powering up with that instance."""
        instance = self.model.instances.get(iid)
        if node.state == POWERING_UP and node.instance_id == iid and instance and instance.state(at) != "terminated":
            node.state = UP
            node.up_at = at

    def start_resume(self, names: Sequence[str]) -> None:
        """ResumeProgram is called for `names`: each powering up until its deadline."""
        now = self.clock()
        self.cycle.resume_calls += 1
        for name in names:
            node = self.nodes[name]
            node.state = POWERING_UP
            node.generation += 1
            node.resumes += 1
            node.deadline = now + self.timers.resume_timeout
            self._push(node.deadline, "deadline", node)
            if node.instance_id and node.addr != name:  # bound earlier (a late worker): may register now
                self._schedule_register(node)

    def _schedule_register(self, node: Node) -> None:
        instance = self.model.instances.get(node.instance_id)
        if instance is not None:
            self._push(max(self.clock(), instance.registered_at), "register", node, instance.instance_id)

    def all_up(self) -> bool:
        """Every node is running."""
        return all(n.state == UP for n in self.nodes.values())

    # ------------------------------------------------------------------ the plugin's Slurm adapter
    def set_addresses(self, addresses: Mapping[str, str]) -> None:
        """NodeAddr = the instance's address: the node's slurmd can register once the instance has booted."""
        for name, address in addresses.items():
            node = self.nodes[name]
            instance = self.model.by_ip.get(address)
            node.addr = address
            node.instance_id = instance.instance_id if instance else ""
            self._schedule_register(node)

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        """NodeAddr back to the node name."""
        for name in nodes:
            self.nodes[name].addr = name
            self.nodes[name].instance_id = ""

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        """POWER_DOWN_FORCE: the job is requeued; the node is idle~ again after SuspendTimeout."""
        code = reason.partition("(Code:")[2].partition(")")[0] or reason
        for name in nodes:
            node = self.nodes[name]
            if node.state in (POWERING_DOWN, IDLE, DOWN):
                continue
            self.cycle.powered_down_by_plugin[code] += 1
            node.state = POWERING_DOWN
            self._push(self.clock() + self._back_after(), "idle", node)

    def set_down(self, nodes: Sequence[str], reason: str, resume_after: int) -> None:
        """DOWN until ResumeAfter (0: until an admin clears it: never, here)."""
        for name in nodes:
            node = self.nodes[name]
            self.cycle.set_down += 1
            node.state = DOWN
            node.generation += 1
            if resume_after > 0:
                self._push(self.clock() + max(resume_after, self._back_after()), "idle", node)

    def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
        """What `scontrol show nodes` would say."""
        names = list(self.nodes) if nodes is None else [n for n in nodes if n in self.nodes]
        return {n: SlurmNode(n, self.nodes[n].addr or n, n, SHOWN[self.nodes[n].state]) for n in names}
