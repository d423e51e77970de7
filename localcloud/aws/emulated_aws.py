"""The emulated AWS API: moto in server mode on 127.0.0.1 (one process, every region) behind the fault middleware.

Run standalone: `python -m localcloud.aws.emulated_aws --port P` (prints `READY <url>` when serving).
From Python: `EmulatedAws.start(log_dir)` starts a server and returns a handle to talk to it; `stop()` ends exactly
that process. Starting one means importing moto's EC2 models (about 2 CPU-seconds, most of a server's start), so a
process starts its servers from a zygote of its own: `python -m localcloud.aws.emulated_aws --servers`, started at the
first `start()`, imports all that once and forks each server (its own session, stdout to its log, the environment of
that first start) from it; it ends when
the process that started it does (end of its standard input). Servers outlive it (`ps` shows them with its command
line) and their handles stop them by PID. Clients use dummy credentials until `enforce_iam(admin)` turns moto's IAM
enforcement on (then every request must be signed by an emulated IAM user allowed the action; see
localcloud/aws/iam.py); nothing leaves the loopback interface.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localcloud import port_claims
from localcloud.aws.faults import Faults
from localcloud.services import procs

if TYPE_CHECKING:
    from localcloud.aws.iam import Credentials

MODULE = "localcloud.aws.emulated_aws"  # in every server's command line (the zygote's, which forks them)
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


DAEMON_PORTS_FROM = 25000  # free_port's range starts here (below: the slurmd port blocks of localcloud.cloud)


def daemon_port_range() -> range:
    """Where free_port picks: from DAEMON_PORTS_FROM up to the kernel's ephemeral range."""
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return range(DAEMON_PORTS_FROM, ephemeral)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1, below the kernel's ephemeral range: between this pick and the daemon's
    bind, an outgoing connection (every Slurm client, every HTTP call) may take any port of that range, and did; and
    claimed for this process (localcloud/port_claims.py): another local cloud picking ports meanwhile skips it."""
    ports = daemon_port_range()
    for _ in range(100):
        port = ports.start + secrets.randbelow(max(1, len(ports)))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port_claims.claim([port]):  # not picked by another cloud that has yet to bind it
            return port
    with socket.socket() as sock:  # no free port below the ephemeral range: any free port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EmulatedAws:
    """Handle to a running emulated AWS server process."""

    url: str
    pid: int
    started: bool = False  # by this handle's start() (stop() then waits for its end)
    access_key: tuple[str, str, str | None] = (
        DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        DUMMY_CREDENTIALS["AWS_SESSION_TOKEN"],
    )

    @classmethod
    def start(cls, log_dir: Path, port: int | None = None, timeout: float = 60.0) -> EmulatedAws:
        """Start a server (forked by this process's zygote) and wait until it answers."""
        log_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        log = log_dir / "emulated-aws.log"
        handle = cls(url=f"http://127.0.0.1:{port}", pid=_zygote().spawn(port, log), started=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(handle.pid):
                raise RuntimeError(f"emulated AWS exited; see {log}")
            try:
                handle._request("GET", "/_localcloud/faults")
                return handle
            except OSError:
                time.sleep(0.2)
        handle.stop()
        raise RuntimeError(f"emulated AWS did not answer on {handle.url} within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop the server: SIGTERM by PID; one this handle started is waited for (SIGKILL after 10 s)."""
        if self.started and not _alive(self.pid):
            return  # ended already: never signal a PID that may be another process's now
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        if not self.started:
            return
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            while _alive(self.pid):
                time.sleep(0.05)
        # its command line reads empty once the exit has released its memory, before it closes its files (its port):
        # wait until it is gone or a zombie (only waited for: nothing is signalled past this point)
        deadline = time.monotonic() + 10
        while procs.running(self.pid) and time.monotonic() < deadline:
            time.sleep(0.02)

    def client(self, service: str, region: str = "us-east-1") -> Any:
        """A boto3 client for this server: dummy credentials, or the admin user's once IAM is enforced."""
        import boto3

        key_id, secret, token = self.access_key
        return boto3.client(  # type: ignore[call-overload]  # service is a runtime string
            service,
            region_name=region,
            endpoint_url=self.url,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            aws_session_token=token,
        )

    def messages_in_queue(self, queue_url: str, region: str = "us-east-1") -> int:
        """An SQS queue's messages, visible or not (one received and not deleted is invisible until its timeout)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        reply = self.client("sqs", region).get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)
        return sum(int(reply["Attributes"][n]) for n in names)

    def enforce_iam(self, admin: Credentials) -> None:
        """Turn moto's IAM enforcement on; this handle's clients sign as `admin` from now on."""
        self._request("POST", "/_localcloud/iam", {"enforce": True})
        self.access_key = (admin.access_key_id, admin.secret_access_key, None)

    def log_requests(self, path: Path | None) -> None:
        """Append every AWS request (service, region, action, parameters) to `path` as JSON lines; None stops."""
        self._request("POST", "/_localcloud/iam", {"request_log": str(path) if path else None})

    def iam_enforced(self) -> bool:
        """Whether the server enforces IAM."""
        return bool(self._request("GET", "/_localcloud/iam")["enforce"])

    def set_faults(self, faults: Faults) -> None:
        """Replace the active faults."""
        self._request("POST", "/_localcloud/faults", faults.to_json())

    def clear_faults(self) -> None:
        """No faults."""
        self.set_faults(Faults())

    def call_counts(self) -> dict[str, int]:
        """AWS calls since the last reset, by `service:Action`."""
        counts: dict[str, int] = self._request("GET", "/_localcloud/calls")
        return counts

    def reset_call_counts(self) -> None:
        """Zero the call counters."""
        self._request("POST", "/_localcloud/calls/reset", {})

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")


def _alive(pid: int) -> bool:
    """Whether `pid` is still a server of ours (a running process, not a zombie, with this module in its command
    line: never a reused PID); the zygote reaps its servers at once."""
    return procs.is_ours(pid, MODULE)


class _Zygote:
    """This process's zygote: `spawn` asks it for a server and answers the server's PID."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", MODULE, "--servers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # never signalled with the caller's process group (Ctrl-C of a test run)
            cwd=Path(__file__).resolve().parents[2],
        )
        self.lock = threading.Lock()
        atexit.register(self.close)

    def close(self) -> None:
        """End the zygote (its servers go on): end of its input, then SIGKILL if it is still importing after 5 s."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def spawn(self, port: int, log: Path) -> int:
        request = {"port": port, "log": str(log)}
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the emulated AWS zygote ended ({self.process.wait()}); see {log}")
        return int(json.loads(answer)["pid"])


# what `serve` and `build_app` import (moto's EC2 models are most of a server's start), imported once by the zygote
PRELOADED = (
    "moto.ec2.models",
    "moto.moto_server.threaded_moto_server",
    "moto.moto_server.werkzeug_app",
    "werkzeug.serving",
    "localcloud.aws.fault_middleware",
    "localcloud.aws.iam_gate",
    "localcloud.aws.instance_topology",
    "localcloud.aws.moto_speedups",
    "localcloud.aws.moto_status_filters",
    "localcloud.aws.moto_subnet_ips",
    "localcloud.aws.spot_history",
)
_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    """This process's zygote, started at the first call (again if it ended)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or _ZYGOTE.process.poll() is not None:
            _ZYGOTE = _Zygote()
        return _ZYGOTE


def zygote() -> None:
    """The zygote's loop: import what a server imports, then fork one server per request line until stdin ends."""
    for module in PRELOADED:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a server that ends is reaped at once
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the server
            try:
                os.setsid()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                serve(int(request["port"]))
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()


def build_app() -> Any:
    """moto's multi-service WSGI app wrapped in the fault middleware."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from localcloud.aws import instance_topology
    from localcloud.aws.fault_middleware import FaultMiddleware
    from localcloud.aws.iam_gate import IamGate
    from localcloud.aws.moto_answer_walk import install as walk_answers_quicker
    from localcloud.aws.moto_serializer import install as keep_serializer_lookups
    from localcloud.aws.moto_speedups import install as index_moto_lookups
    from localcloud.aws.moto_status_filters import install as honour_status_filters
    from localcloud.aws.moto_subnet_ips import install as reclaim_terminated_ips
    from localcloud.aws.moto_xml import install as write_xml_quicker
    from localcloud.aws.spot_history import Offer

    index_moto_lookups()  # tags and instances read by id (same answers; localcloud/aws/moto_speedups.py)
    keep_serializer_lookups()  # answers written with fewer lookups (same answers; localcloud/aws/moto_serializer.py)
    walk_answers_quicker()  # EC2 answers' shapes walked with less around (same answers; moto_answer_walk.py)
    write_xml_quicker()  # EC2 answers' XML written directly (same bytes; localcloud/aws/moto_xml.py)
    honour_status_filters()  # DescribeInstanceStatus filters moto drops (localcloud/aws/moto_status_filters.py)
    reclaim_terminated_ips()  # a full subnet reuses terminated instances' addresses (localcloud/aws/moto_subnet_ips.py)
    account = "123456789012"

    def subnet_az(region: str, subnet_id: str) -> str | None:
        try:
            return str(ec2_backends[account][region].get_subnet(subnet_id).availability_zone)
        except Exception:  # unknown subnet: moto itself will answer with the proper error
            return None

    def template_type(region: str, template_id: str) -> str | None:
        try:
            data = ec2_backends[account][region].get_launch_template(template_id).default_version().data
            value = data.get("InstanceType")
            return str(value) if value else None
        except Exception:
            return None

    def offers(region: str) -> list[Offer]:
        zone_ids = {zone.name: zone.zone_id for zone in RegionsAndZonesBackend.zones.get(region, [])}
        return [
            Offer(o["InstanceType"], o["Location"], zone_ids.get(o["Location"], ""))
            for o in INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region, [])
        ]

    def topology(region: str, params: dict[str, str]) -> tuple[str, list[tuple[str, str]], bytes]:
        backend = ec2_backends[account][region]
        zone_ids = {zone.name: zone.zone_id for zone in RegionsAndZonesBackend.zones.get(region, [])}
        tags = getattr(backend, "tags", {})
        found = [
            instance_topology.EmulatedInstance(
                instance_id=inst.id,
                instance_type=inst.instance_type,
                availability_zone=str(inst.placement.zone or ""),
                zone_id=zone_ids.get(str(inst.placement.zone or ""), ""),
                state=inst.state,
                group_name=str(inst.placement.group_name or ""),
                launch_group=instance_topology.launch_group(tags.get(inst.id, {}), reservation.id),
            )
            for reservation in backend.all_reservations()
            for inst in reservation.instances
        ]
        return instance_topology.describe_instance_topology(params, found)

    app = FaultMiddleware(DomainDispatcherApplication(create_backend_app), subnet_az, template_type, offers, topology)
    return IamGate(app)


def serve(port: int) -> None:
    """Serve until SIGTERM."""
    from moto.moto_server.threaded_moto_server import MotoRequestHandler  # type: ignore[attr-defined]
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, build_app(), threaded=True, request_handler=MotoRequestHandler)
    # The emulator's state is many long-lived objects (moto's models, botocore's shapes), which the default collector
    # thresholds walk again and again (11 % of the CPU of 8,000 launches, measured in-process). What exists now is
    # never collected; new objects are, in generations of 50,000 (cycles are still found, less often).
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"READY http://127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main() -> None:
    """Command-line entry: `python -m localcloud.aws.emulated_aws --port P`."""
    parser = argparse.ArgumentParser(description="Emulated AWS API (moto server + fault injection) on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--servers", action="store_true", help="fork a server per JSON request line on stdin")
    args = parser.parse_args()
    if args.servers:
        zygote()
    else:
        serve(args.port or free_port())


if __name__ == "__main__":
    main()
