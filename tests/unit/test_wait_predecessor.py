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
    tmp_path: Path, instances: list[str], gone_after: int | None = None, wait: int = 30, *args: str
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
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


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


def test_any_index_waits_for_every_older_controller_but_not_the_other_new_one(tmp_path: Path) -> None:
    """Before config apply moves an older release's state: every controller of that release (any index, launched
    more than ES_GENERATION_GAP before this one) must be gone; the other controller this update launched is not."""
    instances = [
        "i-old1\t2026-11-20T08:00:00+00:00",  # the old backup: Name prod-controller-1
        "i-new\t2026-11-25T10:05:00+00:00",
        "i-new1\t2026-11-25T10:04:30+00:00",  # the new backup, launched 30 s before this one
    ]
    result = run(tmp_path, [instances[0], *instances[1:]], 2, 30, "--any-index")
    assert result.returncode == 0, result.stderr
    first = calls(tmp_path)[0]
    assert "Name=tag:Name" not in first and "Name=tag:elastic-slurm:role,Values=controller" in first
    assert result.stderr.count("waiting for the controllers of the release before (i-old1) to be gone") == 2
    # the stand-in keeps only i-new after 2 lookups; with the old one never gone, the bound fails the boot
    (tmp_path / "calls").unlink()
    stuck = run(tmp_path, instances, None, 1, "--any-index")
    assert stuck.returncode == 1 and "(i-old1) still runs after 1s" in stuck.stderr
