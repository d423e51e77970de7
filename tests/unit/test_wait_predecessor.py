"""assets/bootstrap/elastic-slurm-wait-predecessor, run for real with a stand-in `aws`: a replacement controller waits
while an older instance carries its Name tag, not for a newer one, not at creation, and gives up (exit 1) at its
bound. (Every local-cloud controller boot runs it against the emulated EC2: the creation path.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-wait-predecessor"


STRANGER = "i-stranger\t2026-11-01T00:00:00+00:00"  # an older instance of another owner named prod-controller-0


def run(
    tmp_path: Path, instances: list[str], gone_after: int | None = None, wait: int = 30
) -> subprocess.CompletedProcess[str]:
    """`instances`: 'id launchtime' lines DescribeInstances answers; after `gone_after` lookups only ours is left.
    A stranger's instance that carries only the Name tag is in the answer unless the lookup filters on the cluster
    and role tags, as EC2 would answer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "instances").write_text("\n".join(instances) + "\n")
    (bin_dir / "aws").write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        f"n=$(wc -l < {tmp_path}/calls)\n"
        '[[ " $* " == *" Name=tag:elastic-slurm:cluster,Values=prod "*"Name=tag:elastic-slurm:role,Values=controller "* ]]'
        f' || printf "%s\\n" "{STRANGER}"\n'
        f'if [ -n "{gone_after or ""}" ] && [ "$n" -gt "{gone_after or 0}" ]; then grep i-new {tmp_path}/instances; '
        f"else cat {tmp_path}/instances; fi\n"
    )
    (bin_dir / "aws").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ES_CLUSTER": "prod",
        "ES_REGION": "us-east-1",
        "ES_CONTROLLER_INDEX": "0",
        "ELASTIC_SLURM_INSTANCE_ID": "i-new",
        "ES_PREDECESSOR_WAIT": str(wait),
        "ES_PREDECESSOR_POLL": "0",
    }
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_at_creation_there_is_nothing_to_wait_for(tmp_path: Path) -> None:
    result = run(tmp_path, ["i-new\t2026-11-25T10:05:00+00:00"])
    assert (result.returncode, result.stderr) == (0, "")
    (call,) = calls(tmp_path)
    assert "--filters Name=tag:Name,Values=prod-controller-0" in call
    assert "Name=instance-state-name,Values=pending,running,stopping,shutting-down" in call


def test_a_replacement_waits_until_the_older_controller_is_gone(tmp_path: Path) -> None:
    old = "i-old\t2026-11-20T08:00:00+00:00"
    result = run(tmp_path, [old, "i-new\t2026-11-25T10:05:00+00:00"], gone_after=3)
    assert result.returncode == 0, result.stderr
    assert len(calls(tmp_path)) == 4
    # three lookups found the old controller (one wait line each), the fourth found it gone
    assert result.stderr.count("waiting for the controller this one replaces (i-old) to be gone") == 3


def test_a_newer_instance_is_not_waited_for(tmp_path: Path) -> None:
    result = run(tmp_path, ["i-new\t2026-11-25T10:05:00+00:00", "i-newer\t2026-11-25T11:00:00+00:00"])
    assert (result.returncode, result.stderr) == (0, "")


def test_it_gives_up_at_its_bound_without_starting_slurm(tmp_path: Path) -> None:
    old = "i-old\t2026-11-20T08:00:00+00:00"
    result = run(tmp_path, [old, "i-new\t2026-11-25T10:05:00+00:00"], wait=1)
    assert result.returncode == 1
    assert (
        "the controller this one replaces (i-old) still runs after 1s: not starting Slurm next to it" in result.stderr
    )


def test_an_instance_that_only_carries_the_name_is_not_waited_for(tmp_path: Path) -> None:
    result = run(tmp_path, ["i-new\t2026-11-25T10:05:00+00:00"])
    assert (result.returncode, result.stderr) == (0, "")
    (call,) = calls(tmp_path)
    assert "Name=tag:elastic-slurm:cluster,Values=prod" in call
