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
RAISED = ModelParams(limits=DOCUMENTED.with_launch_refill(10))
PACE = 300.0  # what-if budget per resume: 300 s of waiting + a slow boot (p99 ~135 s) stays within ResumeTimeout 600 s


def scenarios(quick: bool) -> list[Scenario]:
    """Every row of the report, in order."""
    rows = [Scenario("documented limits", n) for n in MAIN_NS]
    if quick:
        return rows
    short_cycle = SlurmTimers(suspend_timeout=30, requeue_delay=10)
    rows += [Scenario("requeue cycle 30 s", n, timers=short_cycle) for n in (1300, 4000)]
    rows += [Scenario("503 if no launch token", 4000, model=ModelParams(empty_bucket_answer="throttle"))]
    rows += [Scenario("503, no random ICE", 4000, model=ModelParams(empty_bucket_answer="throttle", ice_rate=0))]
    rows += [Scenario("launch refill 10/s", n, model=RAISED) for n in (4000, 10000)]
    rows += [Scenario("what-if: wait for tokens", n, pace_budget_s=PACE) for n in (1300, 4000, 10000)]
    rows += [Scenario("what-if + refill 10/s", n, model=RAISED, pace_budget_s=PACE) for n in (4000, 10000)]
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run, print, write; exit 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.ec2_sim", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the documented-limits rows")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for ec2-sim.json and the plots")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        print(f"python -m bench.ec2_sim: error: --out: {args.out} is not a directory", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = []
    for scenario in scenarios(args.quick):
        row = simulate(scenario)
        rows.append(row)
        print(f"{scenario.name} N={scenario.n}: {row['time_to_all_running_s']} s (floor {row['floor_s']} s), "
              f"{row['wall_s']} s real", flush=True)  # fmt: skip
    print()
    print(report.table(rows))
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
    path = args.out / "ec2-sim.json"
    report.write_json(path, rows, meta)
    print(f"\nmachine: {meta['machine']}, {meta['wall_s']} s real\nwritten to {path}")
    for plot in (report.plot_running(rows, args.out / "ec2-sim-running.png"),
                 report.plot_ratio(rows, args.out / "ec2-sim-ratio.png")):  # fmt: skip
        print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
