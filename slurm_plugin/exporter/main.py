"""`slurm-exporter`: serve the cluster's Prometheus metrics over HTTP and publish the alarm metrics to CloudWatch.

Runs on every controller as assets/systemd/slurm-exporter.service (user slurm), and the same way on the local cloud's
controller. Scrapes are served by prometheus_client's HTTP server (`/metrics`); every `--cloudwatch-interval`
seconds the exporter collects once itself and puts the values of slurm_plugin/exporter/cloudwatch.py into CloudWatch,
so the alarms work without any Prometheus. Collections are serialized: two scrapes never run the Slurm clients at once.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from wsgiref.simple_server import make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import Metric
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

from slurm_plugin import logs, primary
from slurm_plugin.exporter import EXPORTER_PORT, cloudwatch
from slurm_plugin.exporter.collector import ClusterCollector, Snapshot
from slurm_plugin.exporter.plugin_source import PluginReader
from slurm_plugin.exporter.slurm_source import SlurmReader
from slurm_plugin.http_limits import CONNECTION_TIMEOUT
from slurm_plugin.licenses.cli import state_dir_of as license_state_dir_of
from slurm_plugin.manifest import Manifest, ManifestError, load_manifest

NAME = "slurm-exporter"
ACCOUNTING_MODES = ("create", "existing", "none")  # cluster_config/model_accounting.py
# Series labelled by user or account (slurm_user_jobs, slurm_account_jobs, slurm_rpc_user_calls_total): served only
# when this variable is "1" (the controller's env file, stacks/cluster.py, from
# clusters[].controller.exporter_per_user_series, default off) or with --per-user-series: whoever reaches the exporter
# would learn who runs what. The exporter is reached only from the monitoring
# security group (stacks/network.py); the local cloud, whose dashboards show the per-user panels, leaves it unset.
PER_USER_ENV = "ES_EXPORTER_PER_USER_SERIES"
LOG = logging.getLogger(NAME)


class _Serialized(ClusterCollector):
    """One collection at a time: HTTP scrapes run in threads of their own and the CloudWatch loop collects too. A
    scrape that arrives while a collection runs (a slow slurmctld: up to TIMEOUT per call) gets the last complete
    one instead of waiting, so waiting threads never pile up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._last: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        if self._lock.acquire(blocking=False):
            try:
                self._last = list(super().collect())
            finally:
                self._lock.release()
        yield from self._last


def cloudwatch_values(snap: Snapshot, deltas: cloudwatch.CounterDeltas) -> dict[str, float]:
    """The CloudWatch metrics of one collection (counters turned into increments since the last publish)."""
    values = {
        cloudwatch.SLURMCTLD_UP: float(snap.slurmctld_up),
        cloudwatch.NODES_UP: float(snap.nodes_up),
        cloudwatch.JOBS_PENDING: float(snap.jobs.get("pending", 0)),
        cloudwatch.JOBS_RUNNING: float(snap.jobs.get("running", 0)),
        cloudwatch.PROTECTED_POOLS: float(snap.protected_pools),
    }
    if snap.capacity_errors is not None and snap.boot_failures is not None:  # None: the event log was not read
        totals = {cloudwatch.CAPACITY_ERRORS: snap.capacity_errors, cloudwatch.FAILED_BOOTS: snap.boot_failures}
        values.update(deltas.deltas(totals))
    if snap.slurmdbd_up is not None:
        values[cloudwatch.SLURMDBD_UP] = float(snap.slurmdbd_up)
    if snap.license_sync_age is not None:  # never synced: inf, which the publisher sends as cloudwatch.INFINITY
        values[cloudwatch.LICENSE_SYNC_AGE] = snap.license_sync_age
    return values


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got '{text}'")
    return host or "0.0.0.0", int(port)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got '{text}'")
    return value


def _mode(text: str) -> str:
    if text not in ACCOUNTING_MODES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(ACCOUNTING_MODES)}, got '{text}'")
    return text


class _TimedHandler(_SilentHandler):
    """prometheus_client's request handler, with a timeout on each connection (slurm_plugin/http_limits.py)."""

    timeout = CONNECTION_TIMEOUT


def serve_metrics(host: str, port: int, registry: CollectorRegistry) -> tuple[ThreadingWSGIServer, threading.Thread]:
    """prometheus_client's threading WSGI server for /metrics, bound and serving in a daemon thread."""
    server = make_server(host, port, make_wsgi_app(registry), ThreadingWSGIServer, handler_class=_TimedHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, thread


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog=NAME, description="Prometheus metrics of Slurm and the power-save plugin; "
                                     "alarm metrics to CloudWatch.")  # fmt: skip
    parser.add_argument("--manifest", required=True, help="runtime manifest (JSON) written by `elastic-slurm render`")
    parser.add_argument("--listen", type=_listen, default=("0.0.0.0", EXPORTER_PORT),
                        help=f"HOST:PORT to serve /metrics on (default 0.0.0.0:{EXPORTER_PORT})")  # fmt: skip
    parser.add_argument("--accounting", type=_mode, default="create",
                        help="the config's accounting.mode (create, existing, none); none: no slurmdbd to check")  # fmt: skip
    parser.add_argument("--license-state-dir", default=None,
                        help="where slurm-license-sync keeps its state (default: license-sync/ in the manifest's "
                        "state_dir, where slurm-license-sync.service has it write)")  # fmt: skip
    parser.add_argument("--cloudwatch-interval", type=_interval, default=60.0,
                        help="seconds between CloudWatch publishes; 0: never (default 60)")  # fmt: skip
    parser.add_argument("--per-user-series", choices=("on", "off"), default=None,
                        help=f"serve the series labelled by user and account (default: ${PER_USER_ENV}, 1 = on, "
                        "0 = off; unset = on)")  # fmt: skip
    parser.add_argument("--log-file", default=None, help="default: exporter.log next to the manifest's log_file")
    return parser


def per_user_series(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    """Whether to serve the per-user and per-account series: the flag, else $ES_EXPORTER_PER_USER_SERIES."""
    if args.per_user_series is not None:
        return bool(args.per_user_series == "on")
    return environ.get(PER_USER_ENV, "1") != "0"


def build_collector(manifest: Manifest, args: argparse.Namespace) -> ClusterCollector:
    """The collector over the real Slurm clients and the plugin's state dir."""
    return _Serialized(
        manifest,
        SlurmReader(manifest.slurm_bin_dir, manifest.slurm_conf),
        PluginReader(manifest, args.license_state_dir or license_state_dir_of(manifest)),
        accounting=args.accounting != "none",
        per_user=per_user_series(args, os.environ),
    )


def publish_loop(collector: ClusterCollector, manifest: Manifest, interval: float, stop: threading.Event) -> None:
    """Collect and publish every `interval` seconds until `stop`."""
    client = cloudwatch.cloudwatch_client(manifest.home_region, manifest.aws_endpoint_url)
    # only the controller in charge publishes (slurm_plugin/primary.py), asking this cluster's own scontrol
    gate = primary.Gate.for_slurm(manifest.slurm_bin_dir, manifest.slurm_conf)
    publisher = cloudwatch.CloudWatchPublisher(client, manifest.cluster, gate=gate)
    deltas = cloudwatch.CounterDeltas()
    while not stop.is_set():
        for _ in collector.collect():
            pass
        publisher.publish(cloudwatch_values(collector.snapshot, deltas), datetime.now(UTC))
        stop.wait(interval)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script `slurm-exporter`."""
    args = build_parser().parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
    except ManifestError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 2
    logs.setup(args.log_file or str(Path(manifest.log_file).with_name("exporter.log")), NAME)
    collector = build_collector(manifest, args)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    host, port = args.listen
    try:
        server, thread = serve_metrics(host, port, registry)
    except OSError as exc:
        print(f"{NAME}: error: --listen {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    LOG.info("serving /metrics on %s:%d; CloudWatch every %s s", host, port, args.cloudwatch_interval or "never")
    if args.cloudwatch_interval > 0:
        publish_loop(collector, manifest, args.cloudwatch_interval, stop)
    else:
        stop.wait()
    server.shutdown()
    thread.join(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
