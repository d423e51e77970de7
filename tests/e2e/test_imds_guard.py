"""The image's IMDS guard is executed, not just shipped: `/opt/elastic-slurm/bin/elastic-slurm-imds-guard` of the
image root (installed by install-plugin.sh), with the root's own iptables, in a fresh network namespace.

The local cloud's instances share the host's network namespace, so their boot does not run the guard unit
(docs/local-cloud.md); this module gives each test a namespace of its own instead: loopback up, the IMDS addresses
169.254.169.254 and fd00:ec2::254 on it, and a tiny HTTP listener (the root's python3) answering there as IMDS would.
Every command runs on a machine view of the root (localcloud/instances/enter.py) entered into that namespace with `nsenter`;
the host's network namespace is never changed. The listener is the namespace's only process: killing it ends both.

- root reaches IMDS; a job user and, on a compute node, `slurm` are refused; on a controller `slurm` reaches it;
  ES_IMDS_ALLOW adds a user; IPv6 IMDS is guarded too, and a missing ip6tables on an IPv6 kernel fails closed.
- A rerun applies each family's rules in one iptables-restore (no window with the chain empty).
- Running the guard again leaves exactly one jump from OUTPUT and the same chain.
- An unknown user in ES_IMDS_ALLOW is a one-line error, exit 2, before any rule changes.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localcloud.image import slurm_root
from localcloud.instances import enter
from localcloud.layout import REPO_ROOT

pytestmark = pytest.mark.e2e

GUARD = f"{slurm_root.BIN_IN_ROOT}/elastic-slurm-imds-guard"
CHAIN = "ELASTIC-SLURM-IMDS"
IMDS_V4 = "169.254.169.254"
IMDS_V6 = "fd00:ec2::254"
HOST_TOOLS = ["unshare", "nsenter", "chroot", "ip"]
TIMEOUT = 60

# Inside the new network namespace, before the root is entered: the host's `ip` puts the IMDS addresses on loopback.
# On EC2 IMDS is off the instance and connections to it come from the instance's own address. Here they would come
# from the IMDS address itself, and the REJECT's ICMP error, sent back to that address, would pass the guard's chain
# again (a packet the kernel makes has no owner) and be dropped: a job user would time out instead of being refused.
# So the local routes to IMDS get another source address, as on EC2: a loopback one (127.0.0.2 / ::1), so that nothing
# here names an address outside 127.0.0.0/8 but IMDS's own (and the namespace has no route off the machine anyway).
NETNS_SETUP = (
    "set -e; ip link set lo up; "
    f"ip addr add {IMDS_V4}/32 dev lo; "
    f"ip route replace local {IMDS_V4} dev lo table local proto kernel scope host src 127.0.0.2; "
    f"ip -6 addr add {IMDS_V6}/128 dev lo nodad; "
    # the kernel adds the address's local route a moment later: replace it only once it is there (else `del` races it)
    f"for _ in $(seq 50); do ip -6 route show table local {IMDS_V6} | grep -q . && break; sleep 0.1; done; "
    f"ip -6 route del local {IMDS_V6} dev lo table local; "
    f"ip -6 route add local {IMDS_V6} dev lo table local proto kernel src ::1; "
    'exec "$@"'
)
# The IMDS stand-in: one HTTP server per address family, "ready" once both listen.
LISTENER = f"""
import http.server, socket, threading

class Imds(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"imds stand-in"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server6(http.server.HTTPServer):
    address_family = socket.AF_INET6

servers = [http.server.HTTPServer(("{IMDS_V4}", 80), Imds), Server6(("{IMDS_V6}", 80), Imds)]
for server in servers[1:]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
print("ready", flush=True)
servers[0].serve_forever()
"""

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def root() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root (chroot into the image root)")
    absent = [t for t in HOST_TOOLS if shutil.which(t, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if absent:
        pytest.skip(f"missing: {', '.join(absent)}")
    return slurm_root.root_path()


def _wait_ready(listener: subprocess.Popen[str], timeout: float = 20) -> None:
    assert listener.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        readable, _, _ = select.select([listener.stdout], [], [], 0.2)
        if readable and listener.stdout.readline().strip() == "ready":
            return
        if listener.poll() is not None:
            break
    listener.kill()
    _, err = listener.communicate(timeout=10)
    pytest.fail(f"IMDS stand-in did not start (exit {listener.returncode}): {err.strip()}")


@pytest.fixture
def netns(root: Path) -> Iterator[Run]:
    """A fresh network namespace with the IMDS stand-in listening; yields run(command, user=None, env=None,
    on=None) that runs `command` on a view of the root (`on`, default the plain root) inside that namespace, as
    `user` (default root)."""
    view = enter.View(root)
    listener = subprocess.Popen(
        [
            "unshare",
            "--net",
            "--",
            "/bin/sh",
            "-c",
            NETNS_SETUP,
            "imds-netns",
            *enter.argv(view, ["python3", "-c", LISTENER]),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=enter.user_env(enter.user(root, "root")),
    )
    try:
        _wait_ready(listener)
        namespace = f"/proc/{listener.pid}/ns/net"
        assert os.readlink(namespace) != os.readlink("/proc/self/ns/net"), "the listener is in the host's namespace"

        def run(
            command: list[str],
            user: str | None = None,
            env: dict[str, str] | None = None,
            on: enter.View | None = None,
        ) -> subprocess.CompletedProcess[str]:
            assert listener.poll() is None, "the IMDS stand-in (and with it the namespace) is gone"
            who = enter.user(root, user or "root")
            argv = enter.argv(on or view, command, as_user=None if user is None else who)
            return subprocess.run(
                ["nsenter", f"--net={namespace}", "--", *argv],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                env=enter.user_env(who, env),
                check=False,
            )

        yield run
    finally:
        listener.kill()
        listener.communicate(timeout=10)


def _guard(run: Run, role: str, allow: str = "", on: enter.View | None = None) -> subprocess.CompletedProcess[str]:
    return run([GUARD], env={"ES_ROLE": role, "ES_IMDS_ALLOW": allow}, on=on)


def _reaches(run: Run, user: str | None = None, address: str = IMDS_V4) -> bool:
    """True when `user` (default root) gets the stand-in's answer; False when the connection is refused."""
    host = f"[{address}]" if ":" in address else address
    result = run(["curl", "-sS", "--max-time", "5", f"http://{host}/latest/meta-data/"], user=user)
    if result.returncode == 0:
        assert result.stdout == "imds stand-in"
        return True
    assert result.returncode == 7, result.stderr  # curl: failed to connect (REJECT), not a timeout or another error
    return False


def _rules(run: Run, tool: str = "iptables") -> list[str]:
    result = run([tool, "-w", "-S"])
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_image_root_holds_the_guard_of_this_checkout(root: Path) -> None:
    installed = root / GUARD.lstrip("/")
    assert not installed.is_symlink() and os.access(installed, os.X_OK)
    assert installed.read_bytes() == (REPO_ROOT / "assets/bootstrap/elastic-slurm-imds-guard").read_bytes()
    assert os.path.lexists(root / "usr/sbin/iptables") and os.path.lexists(root / "usr/sbin/ip6tables")
    assert (root / "etc/systemd/system/elastic-slurm-imds-guard.service").is_file()


def test_without_the_guard_every_user_reaches_imds(netns: Run) -> None:
    assert _reaches(netns) and _reaches(netns, slurm_root.JOB_USER) and _reaches(netns, "slurm")


def test_on_a_compute_node_only_root_reaches_imds(netns: Run) -> None:
    result = _guard(netns, "compute")
    assert result.returncode == 0, result.stderr
    assert _reaches(netns)
    assert not _reaches(netns, slurm_root.JOB_USER)
    assert not _reaches(netns, "nobody")
    assert not _reaches(netns, "slurm")


def test_on_a_controller_slurm_reaches_imds_and_job_users_do_not(netns: Run) -> None:
    result = _guard(netns, "controller")
    assert result.returncode == 0, result.stderr
    assert _reaches(netns) and _reaches(netns, "slurm")
    assert not _reaches(netns, slurm_root.JOB_USER)


def test_es_imds_allow_adds_users(netns: Run) -> None:
    result = _guard(netns, "compute", allow=f"{slurm_root.JOB_USER} nobody")
    assert result.returncode == 0, result.stderr
    assert _reaches(netns, slurm_root.JOB_USER) and _reaches(netns, "nobody")
    assert not _reaches(netns, "slurm")


def test_ipv6_imds_is_guarded_too(netns: Run) -> None:
    assert _reaches(netns, slurm_root.JOB_USER, IMDS_V6)
    result = _guard(netns, "compute")
    assert result.returncode == 0, result.stderr
    assert _reaches(netns, address=IMDS_V6)
    assert not _reaches(netns, slurm_root.JOB_USER, IMDS_V6)


def test_running_the_guard_twice_leaves_one_jump_and_the_same_chain(netns: Run, root: Path) -> None:
    slurm_uid = enter.user(root, "slurm").uid
    assert _guard(netns, "controller").returncode == 0
    first = {tool: _rules(netns, tool) for tool in ("iptables", "ip6tables")}
    assert _guard(netns, "controller").returncode == 0
    for tool, address in (("iptables", f"{IMDS_V4}/32"), ("ip6tables", f"{IMDS_V6}/128")):
        rules = _rules(netns, tool)
        assert rules == first[tool]
        assert [r for r in rules if r.startswith("-A OUTPUT")] == [f"-A OUTPUT -d {address} -j {CHAIN}"]
        chain = [r for r in rules if r.startswith(f"-A {CHAIN}")]
        assert chain[:2] == [
            f"-A {CHAIN} -m owner --uid-owner 0 -j ACCEPT",
            f"-A {CHAIN} -m owner --uid-owner {slurm_uid} -j ACCEPT",
        ]
        assert len(chain) == 3 and chain[2].startswith(f"-A {CHAIN} -j REJECT")
    # the chain is rebuilt, not appended to: a compute node's run afterwards leaves root only
    assert _guard(netns, "compute").returncode == 0
    assert [r for r in _rules(netns) if r.startswith(f"-A {CHAIN}")][:-1] == [
        f"-A {CHAIN} -m owner --uid-owner 0 -j ACCEPT"
    ]
    assert not _reaches(netns, "slurm")


def test_without_ip6tables_on_an_ipv6_kernel_the_guard_fails_closed(netns: Run, root: Path) -> None:
    # a PATH holding iptables but no ip6tables (a host directory bound over the root's empty /mnt): IPv6 IMDS would
    # stay open, so the guard exits 1 in one line (its unit is RequiredBy slurmd/slurmctld: no Slurm daemon starts)
    assert Path("/proc/net/if_inet6").exists(), "this host's kernel has no IPv6"
    with tempfile.TemporaryDirectory(prefix="imds-ipv4-only-") as tools:
        for tool in ("iptables", "iptables-restore"):
            os.symlink(f"/usr/sbin/{tool}", Path(tools) / tool)
        ipv4_only = enter.View(root).with_binds((tools, "/mnt"))
        result = netns(
            ["/usr/bin/env", "PATH=/mnt:/usr/bin:/bin", GUARD],
            env={"ES_ROLE": "compute", "ES_IMDS_ALLOW": ""},
            on=ipv4_only,
        )
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "IPv6" in result.stderr
    assert not any(CHAIN in r for r in _rules(netns, "ip6tables"))


def test_a_rerun_replaces_the_rules_in_one_commit(netns: Run, root: Path) -> None:
    """The chain is rebuilt by one iptables-restore per family: no flush-then-rebuild window. A trace of the run
    shows the rule-changing commands: only `-restore` writes, `-C` only reads."""
    assert _guard(netns, "controller").returncode == 0
    traced = netns(["bash", "-x", GUARD], env={"ES_ROLE": "compute", "ES_IMDS_ALLOW": ""})
    assert traced.returncode == 0, traced.stderr
    commands = [line.lstrip("+ ") for line in traced.stderr.splitlines() if line.startswith("+")]
    changing = {"-A", "-I", "-D", "-R", "-F", "-N", "-X", "-Z", "-P"}
    writers = [c for c in commands if c.split(" ")[0] in ("iptables", "ip6tables") and changing & set(c.split(" "))]
    assert writers == [], writers
    assert sum(c.startswith(("iptables-restore", "ip6tables-restore")) for c in commands) == 2
    assert not _reaches(netns, "slurm") and _reaches(netns)


def test_an_unknown_user_in_es_imds_allow_is_one_line_exit_2_and_changes_nothing(netns: Run) -> None:
    result = _guard(netns, "compute", allow="nobody no-such-user")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "no-such-user" in result.stderr
    assert not any(CHAIN in r for r in _rules(netns))
    assert _reaches(netns, slurm_root.JOB_USER)
