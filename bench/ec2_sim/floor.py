"""The floor: the earliest the documented rate limits (and the boot time) let N instances be running.

An ideal launcher asks for every instance the moment the RunInstances resource bucket (capacity C, refill r tokens
at each whole second; CreateFleet draws on it too) holds a token for it: the k-th instance launches at
t_k = 0 for k <= C, else ceil((k - C) / r) seconds. A launch call may carry up to 10,000 instances, so the request
buckets (5/2 per s for RunInstances, 50/5 for CreateFleet) never bind, and API latency is taken as zero. Each
instance then needs its boot time B (lognormal, the model's distribution) until its slurmd registers, and is bound at
once. N nodes are all running by T with probability P(T) = prod_k F(T - t_k), F the boot time's CDF; the floor is the
T with P(T) = 1/2 (the median of the last boot), found by bisection. With jobs of k nodes, all or nothing, a job
launches when the bucket has given the tokens of its last node (k <= C). `expected_running` is the ideal's expected count
at t, sum_k F(t - t_k), drawn next to the simulated curve. The same with F_ec2(x) = F(x / pending_fraction) gives the
floor of EC2's `running` state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.ec2_sim.buckets import BucketSpec


@dataclass(frozen=True)
class BootTime:
    """A lognormal boot time (median seconds, sigma of its log), optionally scaled (the pending share)."""

    median_s: float
    sigma: float
    scale: float = 1.0

    def cdf(self, seconds: float) -> float:
        """P(boot time <= seconds)."""
        if seconds <= 0:
            return 0.0
        z = (math.log(seconds / self.scale) - math.log(self.median_s)) / self.sigma
        return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def launch_schedule(n: int, bucket: BucketSpec, job_nodes: int = 1) -> list[tuple[float, int]]:
    """(launch time, instances) of the ideal launcher for n instances, grouped by whole second; with jobs of
    `job_nodes` nodes (all or nothing), each job launches when the bucket has given the tokens of its last node."""
    if job_nodes > 1:
        if job_nodes > bucket.capacity:
            raise ValueError(f"a job of {job_nodes} nodes never fits a bucket of {bucket.capacity} tokens")
        times = [at for at, count in launch_schedule(n, bucket) for _ in range(count)]
        by_time: dict[float, int] = {}
        for start in range(0, n, job_nodes):
            job = times[start : start + job_nodes]
            by_time[job[-1]] = by_time.get(job[-1], 0) + len(job)
        return sorted(by_time.items())
    burst = min(n, math.floor(bucket.capacity))
    if n > burst and bucket.refill_per_second <= 0:
        raise ValueError(f"a bucket of {bucket.capacity} tokens that never refills cannot launch {n} instances")
    schedule = [(0.0, burst)] if burst else []
    launched, second = burst, 0
    while launched < n:
        second += 1
        allowed = min(n, burst + math.floor(second * bucket.refill_per_second + 1e-9))  # tokens given so far
        if allowed > launched:
            schedule.append((float(second), allowed - launched))
            launched = allowed
    return schedule


def launch_floor(n: int, bucket: BucketSpec, job_nodes: int = 1) -> float:
    """When the ideal launcher has launched the n-th instance."""
    schedule = launch_schedule(n, bucket, job_nodes)
    return schedule[-1][0] if schedule else 0.0


def all_running_floor(n: int, bucket: BucketSpec, boot: BootTime, job_nodes: int = 1) -> float:
    """The median time at which all n instances of the ideal launcher are running (see the module docstring)."""
    if n <= 0:
        return 0.0
    schedule = launch_schedule(n, bucket, job_nodes)

    def log_p(t: float) -> float:
        total = 0.0
        for at, count in schedule:
            p = boot.cdf(t - at)
            if p <= 0.0:
                return -math.inf
            total += count * math.log(p)
        return total

    low, high = schedule[-1][0], schedule[-1][0] + boot.scale * boot.median_s * math.exp(12 * boot.sigma)
    for _ in range(80):
        middle = (low + high) / 2
        if log_p(middle) < math.log(0.5):
            low = middle
        else:
            high = middle
    return high


def expected_running(
    times: Sequence[float], n: int, bucket: BucketSpec, boot: BootTime, job_nodes: int = 1
) -> list[float]:
    """The ideal launcher's expected number of running instances at each of `times`."""
    schedule = launch_schedule(n, bucket, job_nodes)
    return [sum(count * boot.cdf(t - at) for at, count in schedule) for t in times]
