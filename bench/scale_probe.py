"""Run one program's entry function in this process and report what it cost: CPU, AWS calls, subprocesses.

bench/scale_10k.py starts it on the local cloud's controller with the controller's own Python, where the program
normally runs (the cluster manager: `slurm-clustermgr --once`):

    python -m bench.scale_probe [--profile FILE] slurm_plugin.manager.daemon:main -- --once --manifest M

Counted in this process: every AWS API call botocore makes (`service:Operation`, before retries: the emulator's
own counter sees each HTTP attempt) and every subprocess started (by program name, e.g. `scontrol`); CPU seconds of
this process and of its waited-for children (scontrol); wall seconds. With --profile, cProfile's statistics go to
FILE and the most expensive functions (cumulative) into the report. The report is the last stdout line, prefixed
with REPORT_PREFIX.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

REPORT_PREFIX = "SCALE_PROBE "
TOP_FUNCTIONS = 25


@contextmanager
def counting_calls(aws: Counter[str], programs: Counter[str]) -> Iterator[None]:
    """Count botocore API calls into `aws` and subprocesses into `programs` while the block runs."""
    import botocore.client

    make_call = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private, untyped
    popen_init = subprocess.Popen.__init__

    def counted_call(client: Any, operation: str, params: Any) -> Any:
        aws[f"{client.meta.service_model.endpoint_prefix}:{operation}"] += 1
        return make_call(client, operation, params)

    def counted_popen(process: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        first = args if isinstance(args, str | bytes) else next(iter(args), "")
        programs[os.path.basename(os.fsdecode(first)).split()[0] if first else "?"] += 1
        popen_init(process, args, *rest, **kwargs)

    setattr(botocore.client.BaseClient, "_make_api_call", counted_call)  # noqa: B010
    setattr(subprocess.Popen, "__init__", counted_popen)  # noqa: B010
    try:
        yield
    finally:
        setattr(botocore.client.BaseClient, "_make_api_call", make_call)  # noqa: B010
        setattr(subprocess.Popen, "__init__", popen_init)  # noqa: B010


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def top_functions(profile: cProfile.Profile, count: int = TOP_FUNCTIONS) -> list[dict[str, Any]]:
    """The `count` functions with the most cumulative time: {function, calls, own_s, cumulative_s}."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (path, line, name), (_prim, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{path}:{line}({name})", "calls": calls, "own_s": own, "cumulative_s": cumulative})
    rows.sort(key=lambda row: row["cumulative_s"], reverse=True)
    return [
        {**row, "own_s": round(row["own_s"], 3), "cumulative_s": round(row["cumulative_s"], 3)} for row in rows[:count]
    ]


def probe(target: Callable[[list[str]], int], argv: list[str], profile_path: str | None) -> dict[str, Any]:
    """Run `target(argv)` with the counters (and the profiler) on; the report."""
    aws: Counter[str] = Counter()
    programs: Counter[str] = Counter()
    profile = cProfile.Profile(time.process_time) if profile_path else None  # CPU, not wall (waits on AWS)
    cpu_self, cpu_children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with counting_calls(aws, programs):
        if profile is not None:
            profile.enable()
        try:
            code = target(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            if profile is not None:
                profile.disable()
    report: dict[str, Any] = {
        "exit_code": code,
        "wall_s": round(time.perf_counter() - wall, 3),
        "cpu_s": round(_cpu(resource.RUSAGE_SELF) - cpu_self, 3),
        "children_cpu_s": round(_cpu(resource.RUSAGE_CHILDREN) - cpu_children, 3),
        "aws_calls": dict(sorted(aws.items())),
        "subprocesses": dict(sorted(programs.items())),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if profile is not None and profile_path:
        profile.dump_stats(profile_path)
        report["profile"] = top_functions(profile)
    return report


def load_target(spec: str) -> Callable[[list[str]], int]:
    """`package.module:function` -> the function."""
    module, _, name = spec.partition(":")
    function: Callable[[list[str]], int] = getattr(importlib.import_module(module), name or "main")
    return function


def main(argv: list[str] | None = None) -> int:
    """Command line: run the target, print the report."""
    parser = argparse.ArgumentParser(prog="bench.scale_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", metavar="FILE", help="write cProfile statistics here (and list the top ones)")
    parser.add_argument("target", help="module:function taking an argv list, e.g. slurm_plugin.manager.daemon:main")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the target (after --)")
    args = parser.parse_args(argv)
    target_args = args.args[1:] if args.args[:1] == ["--"] else args.args
    try:
        target = load_target(args.target)
    except (ImportError, AttributeError) as exc:
        print(f"bench.scale_probe: error: target: {exc}", file=sys.stderr)
        return 2
    report = probe(target, target_args, args.profile)
    print(REPORT_PREFIX + json.dumps(report, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
