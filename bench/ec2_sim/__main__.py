"""`python -m bench.ec2_sim`: run the scenarios, print the table, write bench/results/ec2-sim.json and the plots.

Rows: the documented limits for N = 1,000 / 1,300 / 4,000 / 10,000, then variants that explain the misses (a shorter
Slurm requeue cycle, EC2 answering 503 when no launch token is left, a raised launch refill rate) and the what-if of
the change proposed in bench/README.md (the adapter waits for launch tokens). `--quick` runs the documented rows only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench.ec2_sim import report
from bench.ec2_sim.buckets import DOCUMENTED
from bench.ec2_sim.driver import Scenario, simulate
from bench.ec2_sim.ec2_model import ModelParams
from bench.ec2_sim.slurm_model import SlurmTimers

RESULTS = Path(__file__).resolve().parent.parent / "results"
MAIN_NS = (1000, 1300, 4000, 10000)
JOB_NS = (1000, 4000, 10000)
JOB_SIZES = (50, 1000)
RAISED = ModelParams(limits=DOCUMENTED.with_launch_refill(10))
PACE = 300.0  # what-if budget per resume: 300 s of waiting + a slow boot (p99 ~135 s) stays within ResumeTimeout 600 s


def scenarios(quick: bool) -> list[Scenario]:
    """Every row of the report, in order."""
    rows = [Scenario("documented limits", n) for n in MAIN_NS]
    if quick:
        return rows
    # issue 33: the same limits with multi-node jobs (all or nothing, each in one AZ); the rows above are jobs of 1
    rows += [Scenario(f"jobs of {k}", n, job_nodes=k) for k in JOB_SIZES for n in JOB_NS]
    short_cycle = SlurmTimers(suspend_timeout=30, requeue_delay=10)
    rows += [Scenario("requeue cycle 30 s", n, timers=short_cycle) for n in (1300, 4000)]
    rows += [Scenario("503 if no launch token", 4000, model=ModelParams(empty_bucket_answer="throttle"))]
    rows += [Scenario("503, no random ICE", 4000, model=ModelParams(empty_bucket_answer="throttle", ice_rate=0))]
    rows += [Scenario("launch refill 10/s", n, model=RAISED) for n in (4000, 10000)]
    rows += [Scenario("what-if: wait for tokens", n, pace_budget_s=PACE) for n in (1300, 4000, 10000)]
    rows += [Scenario("what-if + refill 10/s", n, model=RAISED, pace_budget_s=PACE) for n in (4000, 10000)]
    return rows


def job_table() -> list[Scenario]:
    """bench/README.md's jobs table: 1k/4k/10k nodes in jobs of 1, 50 and 1000 nodes, documented limits."""
    rows = [Scenario("documented limits" if k == 1 else f"jobs of {k}", n, job_nodes=k) for k in (1, *JOB_SIZES)
            for n in JOB_NS]  # fmt: skip
    # at N=1000 an AZ holds 3 x 0.3 N = 900 instances: no 1000-node job fits one AZ; with 0.4 N per pool it does
    roomy = {"c7i.large": 0.4, "c6i.large": 0.4, "m7i.large": 0.4}
    return [*rows, Scenario("jobs of 1000, AZ holds 1.2 N", 1000, job_nodes=1000, capacity_share=roomy)]


def main(argv: list[str] | None = None) -> int:
    """Run, print, write; exit 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.ec2_sim", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the documented-limits rows")
    parser.add_argument("--jobs", action="store_true", help="only the jobs table: jobs of 1, 50, 1000 nodes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for ec2-sim.json and the plots")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        print(f"python -m bench.ec2_sim: error: --out: {args.out} is not a directory", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = []
    for scenario in job_table() if args.jobs else scenarios(args.quick):
        row = simulate(scenario)
        rows.append(row)
        print(f"{scenario.name} N={scenario.n}: {row['time_to_all_running_s']} s (floor {row['floor_s']} s), "
              f"{row['wall_s']} s real", flush=True)  # fmt: skip
    print()
    print(report.jobs_table(rows) if args.jobs else report.table(rows))
    meta = {
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": sys.version.split()[0],
        },
        "wall_s": round(time.perf_counter() - started, 1),
        "throttling_source": "https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html",
    }
    stem = "ec2-sim-jobs" if args.jobs else "ec2-sim"
    path = args.out / f"{stem}.json"
    report.write_json(path, rows, meta)
    print(f"\nmachine: {meta['machine']}, {meta['wall_s']} s real\nwritten to {path}")
    if not args.jobs:
        for plot in (report.plot_running(rows, args.out / "ec2-sim-running.png"),
                     report.plot_ratio(rows, args.out / "ec2-sim-ratio.png")):  # fmt: skip
            print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
