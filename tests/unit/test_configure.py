"""`elastic-slurm configure`: the wizard's answers (piped or typed at a real terminal) make a YAML that validates.

Piped runs call `main([...])` in-process with stdin replaced; one run drives the real CLI under a pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import elastic_slurm.commands.configure_cmd as configure_cmd
from cluster_config import load, parse
from cluster_config.model import NewNetwork
from elastic_slurm import exit_codes
from elastic_slurm.cli import main
from elastic_slurm.commands.configure_cmd import prompt_of
from elastic_slurm.configure_wizard import QUESTIONS, Answers, asked, build_config, defaults

ROOT = Path(__file__).resolve().parents[2]
EOF_ERROR = "elastic-slurm configure: input ended before all questions were answered"


def script(overrides: Mapping[str, str | list[str]]) -> str:
    """One line per question asked, in order: its override (a list: refused answers, then the good one) or Enter."""
    answers: Answers = {}
    lines: list[str] = []
    for question in QUESTIONS:
        if not asked(question, answers):
            continue
        given = overrides.get(question.key, "")
        given = [given] if isinstance(given, str) else given
        lines += given
        answers[question.key] = question.parse(given[-1] or question.default_for(answers), answers)
    return "".join(f"{line}\n" for line in lines)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory, with no region configured in the environment (the default is then us-east-1)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    return tmp_path


def configure(monkeypatch: pytest.MonkeyPatch, stdin: str, *args: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main(["configure", *args])


def test_questions_are_data_and_their_defaults_validate(here: Path) -> None:
    keys = [q.key for q in QUESTIONS]
    assert len(keys) == len(set(keys))
    assert keys[:2] == ["cluster_name", "region"]
    config = build_config(defaults())
    assert config["clusters"][0]["network"]["availability_zones"] == ["us-east-1a", "us-east-1b"]
    parse(config)


def test_all_defaults_piped_write_a_file_that_loads(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert configure(monkeypatch, script({})) == 0
    out, err = capsys.readouterr()
    assert err == ""
    path = here / "my-cluster.yaml"
    assert f"Wrote {path.name}:" in out
    assert "cluster my-cluster (us-east-1): 1 partition(s), 1 pool(s), 0 always-on / 10 max nodes" in out
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# my-cluster.yaml: written by `elastic-slurm configure`")
    for step in (
        "elastic-slurm validate my-cluster.yaml",
        "elastic-slurm cluster create my-cluster.yaml --dryrun",
        "elastic-slurm cluster create my-cluster.yaml  ",
    ):
        assert step in text
    config = load(path)
    cluster = config.clusters[0]
    assert (cluster.name, cluster.region, cluster.controller.instance_type) == ("my-cluster", "us-east-1", "c7i.large")
    assert cluster.storage.efs is not None
    assert config.accounting.mode == "none"
    assert cluster.ssh_allowed_cidrs == []
    (pool,) = cluster.partitions[0].pools
    assert (pool.name, pool.instance_types, pool.purchase_option, pool.max_nodes) == (
        "c7i",
        ["c7i.large"],
        "on_demand",
        10,
    )


def test_custom_answers_make_the_expected_config(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "cluster_name": "hpc-eu",
        "region": "eu-west-1",
        "availability_zones": "eu-west-1a, eu-west-1b, eu-west-1c",
        "controller_instance_type": "m7i.large",
        "partition_name": "batch",
        "pool_count": "2",
        "pool1_instance_types": "c7i.2xlarge,c6i.2xlarge",
        "pool1_purchase_option": "spot",
        "pool1_max_nodes": "100",
        "pool2_instance_types": "c7i.2xlarge",
        "pool2_purchase_option": "on_demand",
        "pool2_max_nodes": "4",
        "storage": "fsx_openzfs",
        "accounting": "create",
        "ssh_cidrs": "203.0.113.0/24",
    }
    assert configure(monkeypatch, script(answers), "--out", "eu.yaml") == 0
    config = load(here / "eu.yaml")
    cluster = config.clusters[0]
    assert (cluster.name, cluster.region, cluster.controller.instance_type) == ("hpc-eu", "eu-west-1", "m7i.large")
    assert isinstance(cluster.network, NewNetwork)
    assert cluster.network.availability_zones == ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
    assert cluster.storage.efs is None and cluster.storage.fsx_openzfs is not None
    assert cluster.ssh_allowed_cidrs == ["203.0.113.0/24"]
    assert config.accounting.mode == "create"
    (partition,) = cluster.partitions
    assert (partition.name, partition.default) == ("batch", True)
    pools = [(p.name, p.instance_types, p.purchase_option, p.max_nodes) for p in partition.pools]
    assert pools == [
        ("c7ispot", ["c7i.2xlarge", "c6i.2xlarge"], "spot", 100),
        ("c7i", ["c7i.2xlarge"], "on_demand", 4),
    ]


def test_a_public_or_ipv6_ssh_range_answered_is_written_with_its_opt_in(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A public office range typed in is the operator's explicit choice: the file carries ssh_allow_public_cidrs, so
    validate passes what configure wrote (an IPv6 range becomes an IPv6 rule, stacks/network.py)."""
    answers = {"ssh_cidrs": "198.51.100.7, 2600:1f18::/32"}
    assert configure(monkeypatch, script(answers), "--out", "pub.yaml") == 0
    cluster = load(here / "pub.yaml").clusters[0]
    assert cluster.ssh_allowed_cidrs == ["198.51.100.7/32", "2600:1f18::/32"]
    assert cluster.ssh_allow_public_cidrs is True


def test_bad_answers_are_asked_again_with_the_reason(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers: dict[str, str | list[str]] = {
        "region": ["us-east-9", "us-west-2"],
        "controller_instance_type": ["c7i.lrage", "c7i.large"],
        "pool1_instance_types": ["c7i.large,c7i.lrage", "c7g.large,m7i.large", "c7g.large"],
        "pool1_max_nodes": ["lots", "0", "9000", "20"],
        "ssh_cidrs": ["0.0.0.0/0", "100.64.1.2/10", "100.64.0.0/10"],
    }
    assert configure(monkeypatch, script(answers)) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "  region: unknown region 'us-east-9' (did you mean 'us-east-2'?)",
        "  controller_instance_type: unknown instance type 'c7i.lrage' (did you mean 'c7i.large'?)",
        "  pool1_instance_types: unknown instance type 'c7i.lrage' (did you mean 'c7i.large'?)",
        "  pool1_instance_types: instance types mix architectures (arm64, x86_64); one pool takes one",
        "  pool1_max_nodes: 'lots' is not a whole number",
        "  pool1_max_nodes: 0 is not between 1 and 10000",
        "  pool1_max_nodes: 9000 nodes do not fit the 8182 free addresses of the compute subnets",
        "  ssh_cidrs: '0.0.0.0/0' opens SSH to the whole internet; list your own address ranges",
        "  ssh_cidrs: '100.64.1.2/10' is not a CIDR: 100.64.1.2/10 has host bits set",
    ]
    assert out.count("Region [us-east-1]: ") == 2
    assert out.count("Controller instance type [c7i.large]: ") == 2
    cluster = load(here / "my-cluster.yaml").clusters[0]
    assert cluster.region == "us-west-2"
    assert isinstance(cluster.network, NewNetwork)
    assert cluster.network.availability_zones == ["us-west-2a", "us-west-2b"]  # the default follows the region
    assert cluster.controller.instance_type == "c7i.large"
    assert cluster.partitions[0].pools[0].instance_types == ["c7g.large"]
    assert cluster.partitions[0].pools[0].max_nodes == 20
    assert cluster.ssh_allowed_cidrs == ["100.64.0.0/10"]


def test_input_ending_early_exits_2_with_one_line_and_writes_nothing(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert configure(monkeypatch, "early\nus-east-1\n") == 2
    _out, err = capsys.readouterr()
    assert err.splitlines() == [EOF_ERROR]
    assert list(here.iterdir()) == []


def test_existing_out_file_needs_force(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "taken.yaml").write_text("keep me\n", encoding="utf-8")
    assert configure(monkeypatch, script({}), "--out", "taken.yaml") == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == ["elastic-slurm configure: --out taken.yaml: exists; pass --force to overwrite it"]
    assert out == ""  # refused before the first question
    assert (here / "taken.yaml").read_text(encoding="utf-8") == "keep me\n"
    assert configure(monkeypatch, script({}), "--out", "taken.yaml", "--force") == 0
    load(here / "taken.yaml")
    capsys.readouterr()
    assert configure(monkeypatch, script({}), "--out", "missing/x.yaml") == 2
    assert capsys.readouterr().err == "elastic-slurm configure: --out missing/x.yaml: no such directory missing\n"


def test_default_out_file_taken_asks_for_another_name(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "my-cluster.yaml").write_text("keep me\n", encoding="utf-8")
    assert configure(monkeypatch, script({"cluster_name": ["", "second"]})) == 0
    _out, err = capsys.readouterr()
    assert "cluster_name: my-cluster.yaml already exists here" in err
    assert (here / "my-cluster.yaml").read_text(encoding="utf-8") == "keep me\n"
    assert load(here / "second.yaml").clusters[0].name == "second"


def test_an_invalid_config_is_reported_and_not_written(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(answers: Answers) -> dict[str, object]:
        config = build_config(answers)
        config["clusters"][0]["storage"] = {}
        return config

    monkeypatch.setattr(configure_cmd, "build_config", broken)
    assert configure(monkeypatch, script({}), "--out", "bad.yaml") == exit_codes.INVALID_CONFIG
    _out, err = capsys.readouterr()
    assert err.splitlines()[1:] == [
        "bad.yaml: clusters[0].storage: needs a shared file system (efs, fsx_lustre, fsx_ontap or fsx_openzfs): it "
        "holds the users' files and tells booting compute nodes their node names"
    ]
    assert not (here / "bad.yaml").exists()


class Terminal:
    """The controlling side of a pseudo-terminal: wait for text, type lines."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no {text!r} after {timeout}s; the terminal shows:\n{self.seen}")
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the program exited and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"the program ended before {text!r}; the terminal shows:\n{self.seen}")
            self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        self.seen = self.seen.split(text, 1)[1]

    def type(self, line: str) -> None:
        os.write(self.fd, f"{line}\r".encode())


def test_configure_at_a_real_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    controller, child_side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_slurm.cli", "configure", "--out", "tty.yaml"],
        stdin=child_side,
        stdout=child_side,
        stderr=child_side,
        cwd=tmp_path,
        env=env,
    )
    os.close(child_side)
    term = Terminal(controller)
    try:
        term.expect("Cluster name [my-cluster]: ")
        term.type("typed")
        term.expect("Region [us-east-1]: ")
        term.type("us-east-9")
        term.expect("region: unknown region 'us-east-9' (did you mean 'us-east-2'?)\n")
        term.expect("Region [us-east-1]: ")
        term.type("eu-central-1")
        answers: Answers = {"cluster_name": "typed", "region": "eu-central-1"}
        for question in QUESTIONS[2:]:
            if asked(question, answers):
                default = question.default_for(answers)
                term.expect(prompt_of(question, default))
                term.type("")
                answers[question.key] = question.parse(default, answers)
        term.expect("Wrote tty.yaml:\n")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    assert "Traceback" not in term.seen
    assert "npx" not in (tmp_path / "tty.yaml").read_text(encoding="utf-8")  # the pinned CLI, through elastic-slurm
    config = load(tmp_path / "tty.yaml")
    cluster = config.clusters[0]
    assert (cluster.name, cluster.region) == ("typed", "eu-central-1")
    assert isinstance(cluster.network, NewNetwork)
    assert cluster.network.availability_zones == ["eu-central-1a", "eu-central-1b"]


def test_docs_show_every_question() -> None:
    intro = (ROOT / "docs" / "configuration_intro.md").read_text(encoding="utf-8")
    section = intro.split("## Start with `elastic-slurm configure`", 1)[1]
    for question in QUESTIONS:
        assert question.prompt in section, question.key
