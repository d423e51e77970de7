"""The emulated AWS API: moto in server mode on 127.0.0.1 (one process, every region) behind the fault middleware.

Run standalone: `python -m localcloud.aws.emulated_aws --port P [--log-dir D]` (prints `READY <url>` when serving).
From Python: `EmulatedAws.start(log_dir)` starts that as a child process and returns a handle to talk to it; `stop()`
ends exactly that process. Clients use dummy credentials until `enforce_iam(admin)` turns moto's IAM enforcement on
(then every request must be signed by an emulated IAM user allowed the action; see localcloud/aws/iam.py); nothing
leaves the loopback interface.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localcloud import port_claims
from localcloud.aws.faults import Faults

if TYPE_CHECKING:
    from localcloud.aws.iam import Credentials

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
    process: subprocess.Popen[bytes] | None = None
    access_key: tuple[str, str, str | None] = (
        DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        DUMMY_CREDENTIALS["AWS_SESSION_TOKEN"],
    )

    @classmethod
    def start(cls, log_dir: Path, port: int | None = None, timeout: float = 60.0) -> EmulatedAws:
        """Start the server as a child process and wait until it answers."""
        log_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        log = open(log_dir / "emulated-aws.log", "ab")  # noqa: SIM115 - handed to the child
        process = subprocess.Popen(
            [sys.executable, "-m", "localcloud.aws.emulated_aws", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        log.close()
        handle = cls(url=f"http://127.0.0.1:{port}", pid=process.pid, process=process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"emulated AWS exited with {process.returncode}; see {log_dir}/emulated-aws.log")
            try:
                handle._request("GET", "/_localcloud/faults")
                return handle
            except OSError:
                time.sleep(0.2)
        handle.stop()
        raise RuntimeError(f"emulated AWS did not answer on {handle.url} within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop the server process we started (by PID; SIGTERM, then SIGKILL)."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)

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


def build_app() -> Any:
    """moto's multi-service WSGI app wrapped in the fault middleware."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from localcloud.aws import instance_topology
    from localcloud.aws.fault_middleware import FaultMiddleware
    from localcloud.aws.iam_gate import IamGate
    from localcloud.aws.moto_speedups import install as index_moto_lookups
    from localcloud.aws.moto_status_filters import install as honour_status_filters
    from localcloud.aws.moto_subnet_ips import install as reclaim_terminated_ips
    from localcloud.aws.spot_history import Offer

    index_moto_lookups()  # tags and instances read by id (same answers; localcloud/aws/moto_speedups.py)
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
    args = parser.parse_args()
    serve(args.port or free_port())


if __name__ == "__main__":
    main()
